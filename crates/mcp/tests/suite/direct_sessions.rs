//! The direct path of `/mcp` (`direct.rs`) on a handshake-era session: a plain call gets the
//! answer rmcp gives, shares the session's places and cancels, stops waiting when the session
//! closes, keeps the session from idling out; a call that is not plain stays rmcp's.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use openphone_mcp::MAX_IN_FLIGHT_PER_CLIENT;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::direct_support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_session_call_gets_the_answer_rmcp_gives() {
    let p = pair(Duration::from_millis(200));
    let on = open_session(&p.direct, &p.principal, json!({})).await;
    let off = open_session(&p.rmcp, &p.principal, json!({})).await;
    let cases = cases();
    for (n, (name, arguments, meta)) in cases.iter().enumerate() {
        let before = p.direct.direct_answers();
        let call = |session: &str| {
            session_call(
                &p.principal,
                session,
                9,
                name,
                arguments.clone(),
                meta.clone(),
            )
        };
        let direct = send(&p.direct, call(&on)).await;
        assert_eq!(p.direct.direct_answers(), before + 1, "case {n}: not taken");
        let rmcp = send(&p.rmcp, call(&off)).await;
        assert_eq!(p.rmcp.direct_answers(), 0);
        assert_eq!((direct.0, rmcp.0), (200, 200), "case {n}");
        // rmcp answers a session's POST as an event stream, the direct path as JSON: both
        // are the client's to read (it accepts both), and the message is the same.
        assert_eq!(direct.1, "application/json");
        assert!(rmcp.1.starts_with("text/event-stream"), "{}", rmcp.1);
        assert_eq!(masked(&direct.2), masked(&rmcp.2), "case {n}: answer");
        assert_eq!(direct.2["id"], json!(9));
    }
    // The audit names the session's client, as under rmcp.
    let audit = p.bridge.audit_page(0, 10_000).unwrap();
    let caller = serde_json::to_string(&audit.last().unwrap().entry.caller).unwrap();
    assert!(caller.contains("client:session-test"), "{caller}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_call_that_is_not_plain_goes_to_rmcp() {
    let p = pair(Duration::from_millis(200));
    // A client that may be asked mid-call: its calls stay rmcp's.
    let elicits = open_session(&p.direct, &p.principal, json!({"elicitation": {}})).await;
    let reply = send(&p.direct, status_call(&p.principal, &elicits, 3)).await;
    assert_eq!(p.direct.direct_answers(), 0);
    assert_eq!(reply.2["result"]["isError"], json!(false), "{}", reply.2);
    // Another runtime's token on a session: rmcp's refusal, untouched.
    let plain = open_session(&p.direct, &p.principal, json!({})).await;
    let other = runtime("openclaw");
    let reply = send(&p.direct, status_call(&other, &plain, 4)).await;
    assert_eq!(p.direct.direct_answers(), 0);
    assert!(
        reply.2["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("another runtime")),
        "{}",
        reply.2
    );
    // A session that is not there: rmcp's 404.
    let gone = send_status(&p.direct, status_call(&p.principal, "no-such-session", 5)).await;
    assert_eq!(gone, 404);
    // The version the session did not negotiate: rmcp's.
    let mut stale = status_call(&p.principal, &plain, 6);
    stale.headers_mut().insert(
        "mcp-protocol-version",
        http::HeaderValue::from_static("2025-06-18"),
    );
    let _ = send_status(&p.direct, stale).await;
    assert_eq!(p.direct.direct_answers(), 0);
    // The plain call on the plain session is taken.
    let reply = send(&p.direct, status_call(&p.principal, &plain, 7)).await;
    assert_eq!(p.direct.direct_answers(), 1);
    assert_eq!(reply.2["result"]["isError"], json!(false), "{}", reply.2);
}

/// `notifications/cancelled` reaches a call on the direct path as it reaches one under rmcp:
/// the request it was waiting on is withdrawn, so it never runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explicit_cancel_withdraws_a_direct_session_call() {
    let p = pair(Duration::from_secs(60));
    let session = open_session(&p.direct, &p.principal, json!({})).await;
    let call = session_call(
        &p.principal,
        &session,
        21,
        "openphone_clipboard_set",
        json!({"text": "never", "reason": "r"}),
        json!({}),
    );
    let service = p.direct.clone();
    let waiting = tokio::spawn(async move { send(&service, call).await });
    // The call waits for the user.
    for _ in 0..100 {
        if !p.bridge.pending_confirmations(None).unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(p.bridge.pending_confirmations(None).unwrap().len(), 1);
    assert_eq!(p.direct.direct_answers(), 1);
    let cancel = json!({
        "jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 21, "reason": "changed my mind"},
    });
    assert_eq!(
        send_status(
            &p.direct,
            session_post(&p.principal, Some(&session), &cancel)
        )
        .await,
        202
    );
    let answer = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the cancel ends the wait")
        .unwrap();
    assert!(
        p.bridge.pending_confirmations(None).unwrap().is_empty(),
        "withdrawn"
    );
    assert_eq!(
        answer.2["result"]["_meta"]["dev.openphone/toolResult"]["error"]["code"],
        json!("cancelled"),
        "{}",
        answer.2
    );
}

/// rmcp's session worker sees none of the direct calls; the session must not be closed as idle
/// while they come.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_in_use_on_the_direct_path_is_not_closed_as_idle() {
    let (_dir, _clock, _bridge, backend) = backend(Duration::from_millis(200));
    let principal = runtime("hermes");
    let idle = Duration::from_secs(1);
    let service = service_idle(&backend, true, idle);
    let used = open_session(&service, &principal, json!({})).await;
    let unused = open_session(&service, &principal, json!({})).await;
    // Direct calls only, for well over two idle times.
    for n in 0..24 {
        let reply = send(&service, status_call(&principal, &used, n)).await;
        assert_eq!(reply.2["result"]["isError"], json!(false), "{}", reply.2);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(service.direct_answers(), 24);
    let list = |session: &str| {
        session_post(
            &principal,
            Some(session),
            &json!({"jsonrpc": "2.0", "id": 99, "method": "tools/list"}),
        )
    };
    assert_eq!(send_status(&service, list(&used)).await, 200, "kept open");
    assert_eq!(
        send_status(&service, list(&unused)).await,
        404,
        "closed as idle"
    );
}

/// A session's direct calls and its calls through rmcp share the session's places: the handler
/// the direct path uses is the session's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_direct_calls_share_its_places_with_rmcps() {
    let p = pair(Duration::from_secs(60));
    let session = open_session(&p.direct, &p.principal, json!({})).await;
    let _waiting = fill_places(&p, &p.direct, Some(&session), MAX_IN_FLIGHT_PER_CLIENT).await;
    assert_eq!(p.direct.direct_answers(), MAX_IN_FLIGHT_PER_CLIENT as u64);
    // Through rmcp (it asks for progress), on the same session.
    let ninth = send(
        &p.direct,
        session_call(
            &p.principal,
            &session,
            9,
            "openphone_device_status",
            json!({"reason": "r"}),
            json!({"progressToken": "p9"}),
        ),
    )
    .await;
    assert_eq!(p.direct.direct_answers(), MAX_IN_FLIGHT_PER_CLIENT as u64);
    assert_eq!(code_of(&ninth.2), json!("rate_limited"), "{}", ninth.2);
    // Another session of the same token has places of its own.
    let other = open_session(&p.direct, &p.principal, json!({})).await;
    let reply = send(&p.direct, status_call(&p.principal, &other, 1)).await;
    assert_eq!(status_of(&reply.2), json!("ok"), "{}", reply.2);
}

/// A session closed while its direct call waits for the user (the client deletes it) ends the
/// wait, as rmcp's service ends its own calls': the call answers pending at once, and the
/// confirmation stays for the user.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_a_session_ends_its_direct_calls_wait() {
    let p = pair(Duration::from_secs(60));
    let session = open_session(&p.direct, &p.principal, json!({})).await;
    let mut waiting = fill_places(&p, &p.direct, Some(&session), 1).await;
    let mut delete = http::Request::builder()
        .method("DELETE")
        .uri("/mcp")
        .header("host", "localhost:7777")
        .header("mcp-protocol-version", "2025-11-25")
        .header("mcp-session-id", session.as_str())
        .body(Full::new(Bytes::new()))
        .unwrap();
    delete.extensions_mut().insert(Arc::clone(&p.principal));
    let status = send_status(&p.direct, delete).await;
    assert!(matches!(status, 200 | 202 | 204), "{status}");
    let answer = tokio::time::timeout(Duration::from_secs(10), waiting.pop().unwrap())
        .await
        .expect("the close ends the wait")
        .unwrap();
    assert_eq!(
        status_of(&answer.2),
        json!("needs_confirmation"),
        "{}",
        answer.2
    );
    assert_eq!(p.bridge.pending_confirmations(None).unwrap().len(), 1);
}
