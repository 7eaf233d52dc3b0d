//! The direct path of `/mcp` (`direct.rs`) in the 2026-07-28 era: a plain `tools/call`
//! answered without rmcp's per-request service gets the answer rmcp gives, and everything else
//! still goes to rmcp. Two services — the direct path on and off — answer the same requests;
//! their answers are compared with the ids each call draws masked.

use std::sync::Arc;
use std::time::Duration;

use openphone_mcp::MAX_IN_FLIGHT_PER_CLIENT;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tower_service::Service;

use super::direct_support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_modern_call_gets_the_answer_rmcp_gives() {
    let p = pair(Duration::from_millis(200));
    let cases = cases();
    let mut outcomes = Vec::new();
    let mut errors = Vec::new();
    for (n, (name, arguments, meta)) in cases.iter().enumerate() {
        let before = p.direct.direct_answers();
        let direct = send(
            &p.direct,
            request(&p.principal, name, arguments.clone(), meta.clone(), &[]),
        )
        .await;
        assert_eq!(p.direct.direct_answers(), before + 1, "case {n}: not taken");
        let rmcp = send(
            &p.rmcp,
            request(&p.principal, name, arguments.clone(), meta.clone(), &[]),
        )
        .await;
        assert_eq!(p.rmcp.direct_answers(), 0);
        assert_eq!(direct.0, rmcp.0, "case {n}: status");
        assert_eq!(direct.1, rmcp.1, "case {n}: content type");
        assert_eq!(masked(&direct.2), masked(&rmcp.2), "case {n}: answer");
        assert_eq!(direct.2["id"], json!(41), "case {n}");
        outcomes.push(direct.2["result"]["structuredContent"]["outcome"].clone());
        errors.push(direct.2["result"]["isError"] == json!(true));
    }
    // The cases reach the tool, the manifest's checks and the wait for the user.
    assert_eq!(errors, [false, false, true, true, false, true, true]);
    // The two reads carried the phone's text (`structuredContent` as the phone wrote it), and
    // their answers above are the trees rmcp's path wrote.
    assert_eq!(p.direct.direct_text_answers(), 2);
    assert_eq!(p.rmcp.direct_text_answers(), 0);
    assert_eq!(outcomes[4], json!("pending"), "{outcomes:?}");
    // A keyed call answered on one path is the same call on the other: replayed, not run again.
    let keyed = json!({"dev.openphone/idempotencyKey": "same-key"});
    let first = send(
        &p.direct,
        request(
            &p.principal,
            "openphone_device_status",
            json!({"reason": "r"}),
            keyed.clone(),
            &[],
        ),
    )
    .await;
    let again = send(
        &p.rmcp_same,
        request(
            &p.principal,
            "openphone_device_status",
            json!({"reason": "r"}),
            keyed,
            &[],
        ),
    )
    .await;
    assert_eq!(
        first.2, again.2,
        "the replay is byte for byte the first answer"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_but_the_plain_case_still_goes_to_rmcp() {
    let p = pair(Duration::from_millis(200));
    let status = "openphone_device_status";
    let taken = |extra: &'static [(&'static str, &'static str)], meta: Value| {
        let request = request(&p.principal, status, json!({"reason": "r"}), meta, extra);
        let service = p.direct.clone();
        async move {
            let before = service.direct_answers();
            let answer = send(&service, request).await;
            (service.direct_answers() > before, answer)
        }
    };
    // A progress token: the call may stream, rmcp serves it.
    let (direct, answer) = taken(&[], json!({"progressToken": "p1"})).await;
    assert!(!direct);
    assert_eq!(answer.0, 200);
    assert_eq!(answer.2["result"]["isError"], json!(false), "{}", answer.2);
    // A browser's request: rmcp checks its Origin again.
    let (direct, answer) = taken(&[("origin", "http://127.0.0.1:7777")], json!({})).await;
    assert!(!direct);
    assert_eq!(answer.0, 200, "{}", answer.2);
    // A second Mcp-Name, contradicting the body: rmcp's refusal, untouched.
    let (direct, answer) = taken(&[("mcp-name", "openphone_screen_get")], json!({})).await;
    assert!(!direct);
    assert_eq!(answer.0, 400, "{}", answer.2);
    // A request without a principal (no guard in front): rmcp's answer too.
    let mut bare = request(&p.principal, status, json!({}), json!({}), &[]);
    bare.extensions_mut().clear();
    let before = p.direct.direct_answers();
    let _ = send(&p.direct, bare).await;
    assert_eq!(p.direct.direct_answers(), before);
}

/// A client that goes away while its call waits for the user does not withdraw the request,
/// and its call does not keep waiting unseen: the call's token is cancelled, its wait ends and
/// its place among the client's calls in flight comes back; the confirmation stays pending for
/// the user and the keyed retry — as when rmcp's response stream is dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_direct_call_ends_its_wait_and_leaves_its_confirmation_pending() {
    // A long local wait: only the drop ends it.
    let p = pair(Duration::from_secs(60));
    let mut waiting = Vec::new();
    for n in 0..MAX_IN_FLIGHT_PER_CLIENT {
        let call = request(
            &p.principal,
            "openphone_clipboard_set",
            json!({"text": format!("text {n}"), "reason": "r"}),
            json!({"dev.openphone/idempotencyKey": format!("drop-{n}")}),
            &[],
        );
        let mut service = p.direct.clone();
        waiting.push(tokio::spawn(async move {
            tokio::time::timeout(Duration::from_millis(500), service.call(call))
                .await
                .is_err()
        }));
    }
    for call in waiting {
        assert!(call.await.unwrap(), "each call waits for the user");
    }
    assert_eq!(p.direct.direct_answers(), MAX_IN_FLIGHT_PER_CLIENT as u64);
    // Every place is free again: had the dropped calls kept waiting (a minute), this one would
    // be refused (`rate_limited`) every time. The calls' tasks end a moment after the drops.
    let mut status = Value::Null;
    for _ in 0..100 {
        let after = send(
            &p.direct,
            request(
                &p.principal,
                "openphone_device_status",
                json!({"reason": "r"}),
                json!({}),
                &[],
            ),
        )
        .await;
        status = status_of(&after.2);
        if status == json!("ok") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(status, json!("ok"));
    let pending = p.bridge.pending_confirmations(None).unwrap();
    assert_eq!(
        pending.len(),
        MAX_IN_FLIGHT_PER_CLIENT,
        "none withdrawn: {pending:?}"
    );
}

/// A 2026-07-28 client's calls count under one key on both paths: eight waiting on the direct
/// path leave no place for a ninth that rmcp serves (it asks for progress), neither sending
/// `clientInfo`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_paths_count_a_modern_clients_calls_together() {
    let p = pair(Duration::from_secs(60));
    let _waiting = fill_places(&p, &p.direct, None, MAX_IN_FLIGHT_PER_CLIENT).await;
    assert_eq!(p.direct.direct_answers(), MAX_IN_FLIGHT_PER_CLIENT as u64);
    let ninth = send(
        &p.direct,
        request(
            &p.principal,
            "openphone_device_status",
            json!({"reason": "r"}),
            json!({"progressToken": "p9", "io.modelcontextprotocol/clientInfo": null}),
            &[],
        ),
    )
    .await;
    assert_eq!(p.direct.direct_answers(), MAX_IN_FLIGHT_PER_CLIENT as u64);
    assert_eq!(code_of(&ninth.2), json!("rate_limited"), "{}", ninth.2);
}

/// A confirming host (the user trusts its prompt) is asked through `input_required` on both
/// paths alike: the direct path chooses the confirmation strategy from the same inputs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirming_host_is_asked_the_same_on_both_paths() {
    let p = pair(Duration::from_millis(200));
    let mut host = (*runtime("hermes")).clone();
    host.confirming_host = true;
    let host = Arc::new(host);
    let form = json!({"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}});
    let call = || {
        request(
            &host,
            "openphone_clipboard_set",
            json!({"text": "asked", "reason": "r"}),
            form.clone(),
            &[],
        )
    };
    let direct = send(&p.direct, call()).await;
    assert_eq!(p.direct.direct_answers(), 1);
    let rmcp = send(&p.rmcp, call()).await;
    assert_eq!((direct.0, direct.1.as_str()), (rmcp.0, rmcp.1.as_str()));
    assert_eq!(masked(&direct.2), masked(&rmcp.2));
    assert_eq!(
        direct.2["result"]["resultType"],
        json!("input_required"),
        "{}",
        direct.2
    );
    assert!(
        direct.2["result"]["requestState"].is_string(),
        "{}",
        direct.2
    );
}
