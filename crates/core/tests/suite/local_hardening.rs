//! Local hardening of the core (issue 11, item 5): what the user approves reads as what runs,
//! a keyed retry just after an expiry gets the recorded `timeout`, and per-session state stays
//! bounded however many runtime sessions a runtime invents.

use openphone_core::MAX_TASK_SCOPES;
use openphone_protocol::{ErrorCode, ToolStatus};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::*;

/// Issue 11: a right-to-left override (U+202E) and zero-width characters reached the summary
/// unchanged, so `moc.knab` could read as `bank.com` on the very screen the user trusts.
#[tokio::test]
async fn bidi_and_zero_width_characters_are_escaped_in_summaries() {
    let h = Harness::new();
    let text = "pay \u{202E}moc.knab\u{202C} now\u{200B}\u{2066}x\u{2069}\u{200E}\u{200F}\u{061C}\u{200C}\u{200D}\u{2060}\u{FEFF}\u{202A}\u{202B}\u{202D}\u{2067}\u{2068}";
    let req = request(
        "bidi-1",
        "openphone.memory.save",
        json!({"text": text, "reason": "keep \u{202E}this"}),
    );
    let first = h.call(&hermes(), req).await;
    assert_eq!(first.status, ToolStatus::NeedsConfirmation, "{first:?}");
    // Each shown as its code point; the value is cut at 48 characters as always.
    let expected = "openphone.memory.save: keep \\u{202E}this (text=pay \\u{202E}moc.knab\\u{202C} \
                    now\\u{200B}\\u{2066…)";
    assert_eq!(first.result["summary"], json!(expected));
    let stored = h
        .bridge
        .store()
        .get_confirmation(&confirmation_id(&first))
        .unwrap()
        .unwrap();
    assert_eq!(stored.summary, expected);
    // Every bidi control and zero-width character, each shown as its code point.
    let invisible = [
        '\u{202A}', '\u{202B}', '\u{202C}', '\u{202D}', '\u{202E}', '\u{2066}', '\u{2067}',
        '\u{2068}', '\u{2069}', '\u{200E}', '\u{200F}', '\u{061C}', '\u{200B}', '\u{200C}',
        '\u{200D}', '\u{2060}', '\u{FEFF}',
    ];
    for (i, c) in invisible.into_iter().enumerate() {
        let req = request(
            &format!("each-{i}"),
            "openphone.memory.save",
            json!({"text": format!("a{c}b"), "reason": "r"}),
        );
        let result = h.call(&hermes(), req).await;
        assert_eq!(
            result.result["summary"],
            json!(format!(
                "openphone.memory.save: r (text=a\\u{{{:04X}}}b)",
                u32::from(c)
            ))
        );
    }
    // What runs on approval is still exactly what was sent.
    assert_eq!(stored.request["request"]["params"]["text"], json!(text));
}

/// Issue 11: a keyed retry arriving after a confirmation's expiry but before the expiry timer
/// reached it found no live confirmation and no final result, and asked the user again.
#[tokio::test]
async fn a_keyed_retry_just_after_expiry_gets_the_recorded_timeout() {
    let h = Harness::new();
    let keyed = |id: &str| {
        with(open_notes(id), |r| {
            r.idempotency_key = Some("retry-key".into());
            r.timeout_ms = Some(5_000);
        })
    };
    let first = h.call(&hermes(), keyed("k1")).await;
    assert_eq!(first.status, ToolStatus::NeedsConfirmation);
    // The expiry passes; no timer runs here (as in the second before the daemon's tick).
    h.clock.advance(5_001);
    let retry = h.call(&hermes(), keyed("k2")).await;
    assert_eq!(
        (retry.status, code(&retry), retry.replayed),
        (ToolStatus::Timeout, Some(ErrorCode::Timeout.as_str()), true),
        "{retry:?}"
    );
    let all = h
        .bridge
        .store()
        .list_confirmations(&Default::default())
        .unwrap();
    assert_eq!(all.len(), 1, "a second confirmation was made: {all:?}");
    assert_eq!(h.actions(), 0);
}

/// Issue 11: a fresh `runtime_session_id` on every call left one cached task id per session
/// in memory for as long as the daemon ran.
#[tokio::test]
async fn a_new_runtime_session_per_call_keeps_the_task_cache_bounded() {
    let h = Harness::new();
    let look = |i: usize| {
        with(
            request(
                &format!("s{i}"),
                "openphone.screen.get",
                json!({"reason": "look"}),
            ),
            |r| r.runtime_session_id = format!("session-{i}"),
        )
    };
    let first = h.call(&hermes(), look(0)).await;
    assert_eq!(first.status, ToolStatus::Ok, "{first:?}");
    let task = first.openphone_task_id.clone().unwrap();
    // The same session keeps its task while it stays in use.
    assert_eq!(
        h.call(&hermes(), look(0)).await.openphone_task_id,
        Some(task.clone())
    );
    for i in 1..MAX_TASK_SCOPES + 100 {
        let result = h.call(&hermes(), look(i)).await;
        assert_eq!(result.status, ToolStatus::Ok);
        assert!(h.bridge.cached_task_scopes() <= MAX_TASK_SCOPES);
    }
    assert_eq!(h.bridge.cached_task_scopes(), MAX_TASK_SCOPES);
    // The session used least recently was evicted: used again, it starts a new task.
    let again = h.call(&hermes(), look(0)).await;
    assert_ne!(again.openphone_task_id, Some(task));
    assert_eq!(h.bridge.cached_task_scopes(), MAX_TASK_SCOPES);
}
