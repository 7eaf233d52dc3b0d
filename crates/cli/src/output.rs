//! What the client commands share: running a command's future, printing `--json` output, the
//! one-line form of an approval and its constraints, and reading a human duration. Every
//! command file uses this module; it uses none of them.

pub(crate) mod fleet_columns;

use anyhow::{Context, Result, bail};
use openphone_protocol::endpoint::{ApprovalInfo, ApprovalKind};
use serde::Serialize;
use serde_json::{Map, Value};

/// Runs `f` to completion on a fresh single-threaded runtime.
pub(crate) fn block_on<T>(f: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(f)
}

/// Prints `v` as pretty JSON with its object keys sorted (through [`Value`]), the form every
/// `--json` output of the client commands has.
pub(crate) fn print_json<T: Serialize>(v: &T) -> Result<()> {
    let value = serde_json::to_value(v)?;
    println!("{}", serde_json::to_string_pretty(&value)?);
    Ok(())
}

/// One approval on one line: id, state, kind, runtime, tool, constraints, scope, expiry.
pub(crate) fn approval_line(a: &ApprovalInfo) -> String {
    let scope = match (a.kind, &a.phone_session_id) {
        (ApprovalKind::SessionGrant, Some(session)) => format!("  session {session}"),
        _ => String::new(),
    };
    let expiry = a
        .expires_at_ms
        .map(|at| format!("  expires at {}", format_ms(at)))
        .unwrap_or_default();
    let background = if a.background { "  +background" } else { "" };
    format!(
        "{:<5} {:<8} {:<13} {:<12} {}{}{scope}{expiry}{background}",
        a.approval_id,
        a.state.as_str(),
        a.kind.as_str(),
        a.runtime,
        a.tool,
        constraints_text(&a.constraints)
    )
}

/// ` where k=v, …` for constraints, or nothing.
pub(crate) fn constraints_text(constraints: &Map<String, Value>) -> String {
    if constraints.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = constraints
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    format!(" where {}", parts.join(", "))
}

fn format_ms(ms: i64) -> String {
    when(ms)
}

/// Now, from the system clock, for showing how far a time is and reading relative times.
pub(crate) fn now_ms() -> i64 {
    openphone_clock::Clock::now_ms(&openphone_clock::SystemClock)
}

/// A time a person reads: local time with the zone and how far it is from now
/// (`Sat 28 Nov 14:05 UTC+1 (in 2 h)`). `--json` output keeps the milliseconds.
pub(crate) fn when(ms: i64) -> String {
    openphone_clock::human::format_local(ms, now_ms())
}

/// A time a person wrote to `flag` (RFC 3339, `in 2h`, `tomorrow 09:00`, Unix ms) in
/// milliseconds, or an error naming the flag and the forms accepted.
pub(crate) fn when_ms(flag: &str, raw: &str) -> Result<i64> {
    openphone_clock::human::parse_when(raw, now_ms()).map_err(|e| {
        anyhow::anyhow!(
            "{flag} {e}\n  accepted: {}",
            openphone_clock::human::WHEN_FORMS
        )
    })
}

/// A human duration given to `flag` (`30s`, `2h`, `1h 30m`) into milliseconds; zero refused.
pub(crate) fn duration_ms(flag: &str, raw: &str) -> Result<i64> {
    let ms = openphone_clock::human::parse_duration(raw).map_err(|e| {
        anyhow::anyhow!(
            "{flag} {e}\n  accepted: {}",
            openphone_clock::human::DURATION_FORMS
        )
    })?;
    if ms == 0 {
        bail!("{flag} must be longer than zero");
    }
    Ok(ms)
}
