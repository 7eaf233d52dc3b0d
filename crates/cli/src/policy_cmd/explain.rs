//! `openphone policy explain <tool> '<params>'`: asks the running daemon (`policy.explain`)
//! how a request would be decided now — every layer's verdict and reason, the decision, and
//! what would change it. A dry run: nothing is recorded or executed, so the exit code is 0
//! whatever the decision (2 for unusable input, a refused request, or no daemon).

use std::process::ExitCode;

use anyhow::{Context, Result, anyhow};
use clap::Args;
use openphone_protocol::endpoint::{
    EndpointErrorCode, Explanation, PolicyExplain, PolicyExplainParams, PolicyOutcome,
};
use openphone_protocol::{CanonicalError, ErrorCode, parse_json_strict};
use serde_json::Value;

use crate::client::{DaemonClient, RpcFailure};
use crate::data_dir::DataDir;

/// `openphone policy explain` arguments.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The command, by any of its names (e.g. `openphone.ui.tap`, `tap`).
    tool: String,
    /// Its params as a JSON object.
    #[arg(default_value = "{}")]
    params: String,
    #[command(flatten)]
    data_dir: DataDir,
    /// Decide it for this configured runtime (its grants, ceiling and tool policy); default:
    /// the operator itself.
    #[arg(long)]
    runtime: Option<String>,
    /// The request's autonomy (`observe_only`, `ask_before_action`, `trusted_actions`).
    #[arg(long)]
    autonomy: Option<String>,
    /// The phone session the request would be made in.
    #[arg(long = "session", value_name = "PHONE_SESSION_ID")]
    session: Option<String>,
    /// The transport it would arrive on (`websocket`, `mcp`, `cli`, `openclaw`, `internal`).
    #[arg(long)]
    transport: Option<String>,
    /// Decide it as inside a background run (a job or goal).
    #[arg(long)]
    background: bool,
    /// Print the explanation as JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `openphone policy explain`.
pub fn run(args: ExplainArgs) -> Result<ExitCode> {
    let dir = args.data_dir.resolve()?;
    let params: Value = parse_json_strict(&args.params).map_err(|e| match e {
        CanonicalError::DuplicateKey { key } => {
            anyhow!("params hold the key {key:?} more than once; give each key once")
        }
        other => anyhow::Error::new(other).context(format!(
            "params must be a JSON object, e.g. '{{\"x\":10,\"y\":20}}', not {}",
            args.params
        )),
    })?;
    let request = PolicyExplainParams {
        tool: args.tool,
        params: Some(params),
        runtime: args.runtime,
        autonomy: args.autonomy,
        phone_session_id: args.session,
        transport: args.transport,
        background: args.background.then_some(true),
    };
    let explanation = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(async {
            let mut client = DaemonClient::connect(&dir).await?;
            let answer = client.call::<PolicyExplain>(request).await;
            client.close().await;
            answer
        })
        .map_err(refused_is_bad_input)?;
    if args.json {
        let value = serde_json::to_value(&explanation)?;
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        print!("{}", text(&explanation));
    }
    Ok(ExitCode::SUCCESS)
}

/// The daemon refusing the request (an unknown tool, invalid params, an unknown runtime, …)
/// is unusable input: exit 2, not the 1 of a refused action. A failure inside the daemon
/// stays what it is.
fn refused_is_bad_input(err: anyhow::Error) -> anyhow::Error {
    match err.downcast_ref::<RpcFailure>() {
        Some(f) if f.code != EndpointErrorCode::Catalogue(ErrorCode::ToolError) => {
            anyhow!("{f}")
        }
        Some(_) | None => err,
    }
}

/// The explanation for a person: one line per layer, the decision, then what would change it.
fn text(e: &Explanation) -> String {
    let mut out = format!(
        "{} for runtime {} (autonomy {})\n",
        e.tool, e.runtime, e.effective_autonomy
    );
    for l in &e.layers {
        let code = l.code.map(|c| format!(" [{c}]")).unwrap_or_default();
        out.push_str(&format!(
            "L{} {:<22} {:<8} {}{code}\n",
            l.layer.number(),
            l.layer.as_str(),
            l.verdict.as_str(),
            l.reason
        ));
    }
    let mut source = e.source.kind.clone();
    let members: Vec<String> = e
        .source
        .fields
        .iter()
        .map(|(k, v)| match v {
            Value::String(s) => format!("{k} {s}"),
            other => format!("{k} {other}"),
        })
        .collect();
    if !members.is_empty() {
        source.push_str(&format!(" ({})", members.join(", ")));
    }
    let one_shot = if e.one_shot { ", one-shot" } else { "" };
    out.push_str(&format!(
        "decision: {}{one_shot} — decided by {source}\n",
        e.decision
    ));
    if e.changes.is_empty() {
        if e.decision == PolicyOutcome::Allow {
            out.push_str("It runs without asking; nothing to change.\n");
        }
        return out;
    }
    out.push_str("To change this:\n");
    for c in &e.changes {
        out.push_str(&format!(
            "  - L{} {}: {}\n",
            c.layer.number(),
            c.kind,
            c.description
        ));
        match (&c.setting, &c.value) {
            (Some(setting), Some(value)) => {
                out.push_str(&format!("      setting: {setting} ({value})\n"));
            }
            (Some(setting), None) => out.push_str(&format!("      setting: {setting}\n")),
            (None, _) => {}
        }
        if let Some(command) = &c.command {
            out.push_str(&format!("      run: {command}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_has_a_line_per_layer_the_decision_and_the_changes() {
        let e: Explanation = serde_json::from_value(json!({
            "tool": "openphone.ui.tap", "runtime": "hermes",
            "effective_autonomy": "ask_before_action", "decision": "confirm", "one_shot": false,
            "source": {"kind": "policy", "layer": "autonomy"},
            "layers": [
                {"layer": "runtime_authorisation", "verdict": "allow", "reason": "granted"},
                {"layer": "autonomy", "verdict": "confirm",
                 "reason": "ask_before_action: mutating commands ask first"}
            ],
            "changes": [{"kind": "standing_approval", "layer": "standing_approvals",
                         "description": "a standing approval",
                         "command": "openphone approvals grant --runtime hermes --tool openphone.ui.tap"}]
        }))
        .unwrap();
        let t = text(&e);
        assert!(
            t.contains("L4 autonomy               confirm  ask_before_action: mutating"),
            "{t}"
        );
        assert!(
            t.contains("decision: confirm — decided by policy (layer autonomy)"),
            "{t}"
        );
        assert!(
            t.contains("To change this:\n  - L7 standing_approval: a standing approval"),
            "{t}"
        );
        assert!(
            t.contains("run: openphone approvals grant --runtime hermes"),
            "{t}"
        );
    }
}
