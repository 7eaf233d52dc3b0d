//! Issue 28, item 9: a host that retries without an idempotency key (Hermes Agent 0.19.0)
//! saw only "pending" after the inline wait, called again, opened a second confirmation, and
//! both approvals ran. A call without a key now joins an identical call waiting for the user
//! (or decided a moment ago); calls allowed without asking stay separate actions. Also the low
//! item: a runtime tagging its call with another runtime's `phone_session_id` is refused.
//!
//! Real daemon, real sockets: MCP over `mcp.sock`, the operator on the WebSocket endpoint,
//! executions counted on the simulated phone's calendar.

use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::support::{Client, McpSock, RUNTIME_TOKEN, config, connect, start, tool_result_meta};

/// An `mcp.sock` connection of the `hermes` runtime past the hello and the MCP handshake.
async fn hermes_host(dir: &std::path::Path) -> McpSock {
    McpSock::open(
        dir,
        RUNTIME_TOKEN,
        ("Hermes Agent", "0.19.0"),
        Duration::from_secs(60),
    )
    .await
}

impl McpSock {
    /// `tools/call` without `_meta` idempotency key (as Hermes sends it); with a progress
    /// token when `progress` is given.
    async fn call(&mut self, id: u64, name: &str, arguments: Value, progress: Option<&str>) {
        let mut params = json!({"name": name, "arguments": arguments});
        if let Some(token) = progress {
            params["_meta"] = json!({"progressToken": token});
        }
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}))
            .await;
    }

    /// Waits for the first progress notification of `token`: the call has its answer from
    /// the bridge and is waiting for the user.
    async fn waiting(&mut self, token: &str) {
        loop {
            let message = self.next().await;
            if message["method"] == "notifications/progress"
                && message["params"]["progressToken"] == json!(token)
            {
                return;
            }
            assert!(message.get("id").is_none(), "answered early: {message}");
        }
    }
}

/// The same calendar entry, the reason worded anew each time (a model's retry).
fn dentist(reason: &str) -> Value {
    json!({"title": "Dentist retry-28", "start_at": 1_900_000_000_000_i64, "reason": reason})
}

async fn operator(d: &super::support::Running) -> Client {
    let mut op = connect(&d.url(), Some(&d.operator_token())).await.unwrap();
    op.hello().await;
    op
}

async fn pending_ids(op: &mut Client) -> Vec<String> {
    let list = op.call("confirmations.list", json!({})).await;
    list["result"]["confirmations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["confirmation_id"].as_str().unwrap().to_owned())
        .collect()
}

async fn resolve(op: &mut Client, id: &str, decision: &str) -> Value {
    let r = op
        .call(
            "confirmations.resolve",
            json!({"confirmation_id": id, "decision": decision}),
        )
        .await;
    assert!(r.get("result").is_some(), "{r}");
    r["result"].clone()
}

/// How many "Dentist retry-28" entries the simulated phone's calendar holds.
async fn entries(op: &mut Client) -> u64 {
    let r = op
        .call(
            "tools.invoke",
            json!({"request_id": count_id(), "tool": "openphone.calendar.search",
                   "params": {"query": "Dentist retry-28", "reason": "count the entries"}}),
        )
        .await;
    assert_eq!(r["result"]["status"], "ok", "{r}");
    r["result"]["result"]["total"].as_u64().unwrap()
}

/// A fresh request id for each count.
fn count_id() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("count-{n}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_without_a_key_after_a_late_approval_runs_once() {
    // The inline wait is long enough for the operator to approve while the retry waits.
    let d = start(config("[mcp]\nlocal_confirmation_wait_ms = 5000\n")).await;
    let mut host = hermes_host(d.dir.path()).await;
    let mut op = operator(&d).await;

    // The first call: nobody decides within the inline wait, the host sees "pending".
    host.call(2, "openphone_calendar_add", dentist("book it"), None)
        .await;
    let first = host.response(2).await;
    assert_eq!(
        tool_result_meta(&first)["status"],
        "needs_confirmation",
        "{first}"
    );
    let cid = tool_result_meta(&first)["confirmation_id"]
        .as_str()
        .unwrap()
        .to_owned();

    // Its model retries, without a key: no second confirmation opens.
    host.call(
        3,
        "openphone_calendar_add",
        dentist("book it, please"),
        Some("p3"),
    )
    .await;
    host.waiting("p3").await;
    assert_eq!(pending_ids(&mut op).await, vec![cid.clone()]);

    // The user approves late: the retry gets the approved call's result.
    let approved = resolve(&mut op, &cid, "approve").await;
    assert_eq!(approved["status"], "ok", "{approved}");
    assert_eq!(
        approved["result"]["event"]["title"], "Dentist retry-28",
        "{approved}"
    );
    let retried = host.response(3).await;
    assert_eq!(retried["result"]["isError"], false, "{retried}");
    assert_eq!(tool_result_meta(&retried)["status"], "ok", "{retried}");
    assert_eq!(
        retried["result"]["structuredContent"]["event"], approved["result"]["event"],
        "{retried}"
    );

    // Asked once more after the approval: the same result, replayed, nothing runs.
    host.call(4, "openphone_calendar_add", dentist("did it work?"), None)
        .await;
    let again = host.response(4).await;
    assert_eq!(tool_result_meta(&again)["status"], "ok", "{again}");
    assert_eq!(tool_result_meta(&again)["replayed"], true, "{again}");
    assert_eq!(
        again["result"]["structuredContent"],
        retried["result"]["structuredContent"]
    );
    assert_eq!(entries(&mut op).await, 1, "one approval, one entry");
    assert!(pending_ids(&mut op).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_while_pending_does_not_open_a_second_confirmation() {
    let d = start(config("[mcp]\nlocal_confirmation_wait_ms = 300\n")).await;
    let mut host = hermes_host(d.dir.path()).await;
    let mut op = operator(&d).await;

    let mut seen = Vec::new();
    for (id, reason) in [(2, "book it"), (3, "book it again"), (4, "still pending?")] {
        host.call(id, "openphone_calendar_add", dentist(reason), None)
            .await;
        let answer = host.response(id).await;
        assert_eq!(
            tool_result_meta(&answer)["status"],
            "needs_confirmation",
            "{answer}"
        );
        seen.push(
            tool_result_meta(&answer)["confirmation_id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    seen.dedup();
    assert_eq!(seen.len(), 1, "every retry waits on the first confirmation");
    assert_eq!(pending_ids(&mut op).await, seen);

    // The user denies: a retry gets the denial and asks nobody again.
    let denied = resolve(&mut op, &seen[0], "deny").await;
    assert_eq!(
        denied["error"]["code"], "user_denied_confirmation",
        "{denied}"
    );
    host.call(5, "openphone_calendar_add", dentist("try again"), None)
        .await;
    let after = host.response(5).await;
    assert_eq!(tool_result_meta(&after)["status"], "denied", "{after}");
    assert_eq!(tool_result_meta(&after)["replayed"], true, "{after}");
    assert!(pending_ids(&mut op).await.is_empty());
    assert_eq!(entries(&mut op).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_identical_auto_allowed_calls_are_two_actions() {
    let d = start(config("[mcp]\nlocal_confirmation_wait_ms = 300\n")).await;
    let mut host = hermes_host(d.dir.path()).await;
    let mut op = operator(&d).await;
    // The user lets `hermes` add calendar entries without asking.
    let grant = op
        .call(
            "approvals.grant",
            json!({"runtime": "hermes", "tool": "openphone.calendar.add"}),
        )
        .await;
    assert!(grant.get("result").is_some(), "{grant}");

    for id in [2, 3] {
        host.call(id, "openphone_calendar_add", dentist("book it"), None)
            .await;
        let answer = host.response(id).await;
        assert_eq!(tool_result_meta(&answer)["status"], "ok", "{answer}");
        assert_eq!(tool_result_meta(&answer).get("replayed"), None, "{answer}");
    }
    assert_eq!(
        entries(&mut op).await,
        2,
        "two auto-allowed calls, two entries"
    );
    assert!(pending_ids(&mut op).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_cannot_tag_its_call_with_another_runtimes_phone_session() {
    let extra = r#"
[[runtimes]]
id = "openclaw"
token = "openclaw-test-token-0123456789"
grants = ["safe_read", "private_read", "dangerous"]
"#;
    let d = start(config(extra)).await;
    let mut op = operator(&d).await;
    let mut openclaw = connect(&d.url(), Some("openclaw-test-token-0123456789"))
        .await
        .unwrap();
    openclaw.hello().await;
    // The operator opens a session routed to `openclaw` …
    let accepted = op
        .call(
            "attention.request",
            json!({"runtime": "openclaw", "text": "plan my day", "surface": "chat"}),
        )
        .await;
    let session = accepted["result"]["phone_session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{accepted}"))
        .to_owned();

    // … and `hermes` tags its call with it: refused, naming phone_session_id.
    let mut hermes = connect(&d.url(), Some(RUNTIME_TOKEN)).await.unwrap();
    hermes.hello().await;
    let tagged = hermes
        .call(
            "tools.invoke",
            json!({"request_id": "tag-1", "tool": "openphone.calendar.add",
                   "phone_session_id": session, "params": dentist("book it"), "wait": false}),
        )
        .await;
    assert_eq!(
        tagged["result"]["error"]["code"], "invalid_params",
        "{tagged}"
    );
    let message = tagged["result"]["error"]["message"].as_str().unwrap();
    assert!(message.contains("phone_session_id"), "{message}");
    assert!(
        pending_ids(&mut op).await.is_empty(),
        "no confirmation made"
    );

    // The operator may name any session.
    let by_operator = op
        .call(
            "tools.invoke",
            json!({"request_id": "tag-2", "tool": "openphone.calendar.search",
                   "phone_session_id": session,
                   "params": {"query": "x", "reason": "look"}}),
        )
        .await;
    assert_eq!(by_operator["result"]["status"], "ok", "{by_operator}");
}
