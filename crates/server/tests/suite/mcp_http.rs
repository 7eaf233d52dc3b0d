//! `/mcp` over a real socket with hand-written HTTP requests: the security checks in their
//! order (Host, Origin, token, size, rate), per-request version negotiation, the handshake-era
//! regression of a `logging/setLevel` sent before `initialized`, and the sealed `requestState`
//! of the 2026-07-28 confirmation round against tampering and replay.

use std::net::SocketAddr;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::support::{RUNTIME_TOKEN, Reply, config, http_request, start};

/// One request to `/mcp` on a fresh connection.
async fn send(addr: SocketAddr, method: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
    http_request(addr, method, "/mcp", headers, body).await
}

const MODERN: &str = "2026-07-28";

/// A 2026-07-28 request: `_meta` plus the standard headers.
async fn modern(
    addr: SocketAddr,
    token: &str,
    method: &str,
    name: Option<&str>,
    mut params: Value,
) -> Reply {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "raw-test", "version": "1"},
    });
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let auth = format!("Bearer {token}");
    let mut headers = vec![
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", MODERN),
        ("Mcp-Method", method),
    ];
    if let Some(n) = name {
        headers.push(("Mcp-Name", n));
    }
    send(addr, "POST", &headers, body.as_bytes()).await
}

async fn call(addr: SocketAddr, token: &str, name: &str, params: Value) -> Value {
    let mut p = params;
    p["name"] = json!(name);
    let reply = modern(addr, token, "tools/call", Some(name), p).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.json()
}

fn error_code_of(result: &Value) -> String {
    // A policy outcome (pending, denied, expired) is `isError: false` with its outcome.
    let outcome = result["result"]["structuredContent"]["outcome"].is_string();
    assert_eq!(result["result"]["isError"], !outcome, "{result}");
    let text = result["result"]["content"][0]["text"].as_str().unwrap();
    let v: Value = serde_json::from_str(text).unwrap();
    v["error"]["code"].as_str().unwrap().to_owned()
}

fn mcp_token(dir: &std::path::Path) -> String {
    std::fs::read_to_string(dir.join("mcp.token"))
        .unwrap()
        .trim()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_http_checks_host_then_origin_then_token_then_size() {
    let d = start(config("")).await;
    let addr = d.daemon.addr();
    let token = mcp_token(d.dir.path());
    let auth = format!("Bearer {token}");
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    let base = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let with = |extra: &[(&'static str, &'static str)]| -> Vec<(&str, &str)> {
        base.iter().chain(extra.iter()).copied().collect()
    };

    // Host first: a rebinding attack's Host is refused even with a good token.
    let mut h = with(&[("Host", "evil.example.com")]);
    h.push(("Authorization", &auth));
    let r = send(addr, "POST", &h, list.as_bytes()).await;
    assert_eq!(r.status, 403, "{}", r.body);

    // Origin before the token: a foreign page learns nothing about tokens.
    let r = send(
        addr,
        "POST",
        &with(&[("Origin", "http://evil.example.com")]),
        list.as_bytes(),
    )
    .await;
    assert_eq!(r.status, 403, "{}", r.body);

    // No token, a wrong one, the operator's (MCP callers are runtimes): 401 with the challenge.
    let operator = format!("Bearer {}", d.operator_token());
    for value in [
        None,
        Some("Bearer wrong-token-0123456789"),
        Some(operator.as_str()),
    ] {
        let mut h = with(&[]);
        if let Some(v) = value {
            h.push(("Authorization", v));
        }
        let r = send(addr, "POST", &h, list.as_bytes()).await;
        assert_eq!(r.status, 401, "{value:?}: {}", r.body);
        assert_eq!(r.header("www-authenticate"), Some("Bearer"));
        assert!(!r.body.contains(&token));
    }

    // A body over 1 MiB: refused whether declared or streamed in chunks.
    let big = vec![b' '; 1024 * 1024 + 1];
    let mut h = with(&[]);
    h.push(("Authorization", &auth));
    let r = send(addr, "POST", &h, &big).await;
    assert_eq!(r.status, 413, "{}", r.body);
    let mut chunked = format!("{:x}\r\n", big.len()).into_bytes();
    chunked.extend_from_slice(&big);
    chunked.extend_from_slice(b"\r\n0\r\n\r\n");
    let mut h = with(&[("Transfer-Encoding", "chunked")]);
    h.push(("Authorization", &auth));
    let r = send(addr, "POST", &h, &chunked).await;
    assert_eq!(r.status, 413, "{}", r.body);

    // A loopback Origin and the right token pass.
    let r = modern(addr, &token, "tools/list", None, json!({})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let tools = r.json()["result"]["tools"].as_array().unwrap().len();
    assert!(tools >= 30, "{tools}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_http_rate_limits_each_token() {
    let d = start(config("[limits]\nrate_per_sec = 0.01\nrate_burst = 2.0\n")).await;
    let addr = d.daemon.addr();
    let token = mcp_token(d.dir.path());
    let mut statuses = Vec::new();
    for _ in 0..4 {
        let r = modern(addr, &token, "tools/list", None, json!({})).await;
        statuses.push(r.status);
        if r.status == 429 {
            assert!(r.header("retry-after").is_some());
        }
    }
    assert_eq!(statuses, vec![200, 200, 429, 429]);
    // Another credential has its own bucket.
    let r = modern(addr, RUNTIME_TOKEN, "tools/list", None, json!({})).await;
    assert_eq!(r.status, 200, "{}", r.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_http_refuses_an_unsupported_modern_version_with_32022() {
    let d = start(config("")).await;
    let addr = d.daemon.addr();
    let token = mcp_token(d.dir.path());
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2099-01-01",
        "io.modelcontextprotocol/clientCapabilities": {},
    }}})
    .to_string();
    let auth = format!("Bearer {token}");
    let r = send(
        addr,
        "POST",
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2099-01-01"),
            ("Mcp-Method", "tools/list"),
        ],
        body.as_bytes(),
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.body);
    let v = r.json();
    assert_eq!(v["error"]["code"], -32022, "{v}");
    let supported = v["error"]["data"]["supported"].as_array().unwrap();
    assert_eq!(
        supported,
        &vec![
            json!("2025-06-18"),
            json!("2025-11-25"),
            json!("2026-07-28")
        ]
    );
}

/// VS Code Copilot sent `logging/setLevel` before `notifications/initialized`; an error there
/// ended its connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_logging_set_level_before_initialized_gets_an_empty_result() {
    let d = start(config("")).await;
    let addr = d.daemon.addr();
    let auth = format!("Bearer {}", mcp_token(d.dir.path()));
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "copilot-like", "version": "1"}}})
    .to_string();
    let headers = [
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let r = send(addr, "POST", &headers, init.as_bytes()).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(r.json()["result"]["serverInfo"]["name"], "openphone");
    let session = r.header("mcp-session-id").unwrap().to_owned();

    let set_level = json!({"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel",
        "params": {"level": "info"}})
    .to_string();
    let mut h: Vec<(&str, &str)> = headers.to_vec();
    h.push(("Mcp-Session-Id", &session));
    h.push(("MCP-Protocol-Version", "2025-06-18"));
    let r = send(addr, "POST", &h, set_level.as_bytes()).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["result"], json!({}), "{}", r.body);
}

const DESK_TOKEN: &str = "desk-host-token-0123456789abcdef";

fn save(text: &str) -> Value {
    json!({"arguments": {"text": text, "reason": "remember it"}})
}

async fn count(addr: SocketAddr, text: &str) -> usize {
    let r = call(
        addr,
        DESK_TOKEN,
        "openphone_memory_search",
        json!({"arguments": {"query": text, "reason": "check"}}),
    )
    .await;
    r["result"]["structuredContent"]["memories"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"))
        .iter()
        .filter(|m| m["text"] == json!(text))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sealed_request_state_refuses_tampering_and_a_replay_never_runs_twice() {
    let d = start(config(&format!(
        "\n[[runtimes]]\nid = \"desk\"\ntoken = \"{DESK_TOKEN}\"\n\
         grants = [\"safe_read\", \"private_read\", \"dangerous\"]\ntrust_client_confirmation = true\n"
    )))
    .await;
    let addr = d.daemon.addr();
    let text = "sealed state note";
    let first = call(addr, DESK_TOKEN, "openphone_memory_save", save(text)).await;
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    let confirm = &result["inputRequests"]["confirm"];
    assert_eq!(confirm["method"], "elicitation/create", "{first}");
    assert!(
        confirm["params"]["message"]
            .as_str()
            .unwrap()
            .contains("remember it")
    );
    let state = result["requestState"].as_str().unwrap().to_owned();
    let accept = json!({"confirm": {"action": "accept", "content": {}}});

    let retry = |state: &str, args: Value, responses: Option<Value>| {
        let mut p = args;
        p["requestState"] = json!(state);
        if let Some(r) = responses {
            p["inputResponses"] = r;
        }
        p
    };

    // One byte flipped: the seal does not open.
    let mut bytes = state.clone().into_bytes();
    let mid = bytes.len() / 2;
    bytes[mid] = if bytes[mid] == b'A' { b'B' } else { b'A' };
    let flipped = String::from_utf8(bytes).unwrap();
    let r = call(
        addr,
        DESK_TOKEN,
        "openphone_memory_save",
        retry(&flipped, save(text), Some(accept.clone())),
    )
    .await;
    assert_eq!(error_code_of(&r), "confirmation_invalid", "{r}");

    // A valid seal with other arguments.
    let r = call(
        addr,
        DESK_TOKEN,
        "openphone_memory_save",
        retry(&state, save("something else"), Some(accept.clone())),
    )
    .await;
    assert_eq!(error_code_of(&r), "confirmation_invalid", "{r}");

    // Another principal presenting it.
    let other = mcp_token(d.dir.path());
    let r = call(
        addr,
        &other,
        "openphone_memory_save",
        retry(&state, save(text), Some(accept.clone())),
    )
    .await;
    assert_eq!(error_code_of(&r), "confirmation_invalid", "{r}");

    // No answer yet: asked again for the same record, never an error.
    let r = call(
        addr,
        DESK_TOKEN,
        "openphone_memory_save",
        retry(&state, save(text), None),
    )
    .await;
    assert_eq!(r["result"]["resultType"], "input_required", "{r}");
    assert_eq!(r["result"]["requestState"], json!(state));
    assert_eq!(count(addr, text).await, 0, "nothing ran yet");

    // The answer: runs once.
    let r = call(
        addr,
        DESK_TOKEN,
        "openphone_memory_save",
        retry(&state, save(text), Some(accept.clone())),
    )
    .await;
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert_eq!(count(addr, text).await, 1);

    // Replayed, even with another answer: the recorded outcome, never a second run.
    let decline = json!({"confirm": {"action": "decline"}});
    for responses in [accept, decline] {
        let r = call(
            addr,
            DESK_TOKEN,
            "openphone_memory_save",
            retry(&state, save(text), Some(responses)),
        )
        .await;
        assert_eq!(r["result"]["isError"], false, "{r}");
        assert_eq!(
            r["result"]["structuredContent"]["memory"]["text"],
            json!(text)
        );
    }
    assert_eq!(count(addr, text).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_can_be_disabled() {
    let d = start(config("[mcp]\nenabled = false\n")).await;
    let r = modern(
        d.daemon.addr(),
        RUNTIME_TOKEN,
        "tools/list",
        None,
        json!({}),
    )
    .await;
    assert_eq!(r.status, 404, "{}", r.body);
    assert!(!d.dir.path().join("mcp.sock").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_mcp_token_is_refused_on_the_websocket_endpoint() {
    let d = start(config("")).await;
    let token = mcp_token(d.dir.path());
    let refused = super::support::connect(&d.url(), Some(&token)).await;
    assert_eq!(refused.err(), Some(401), "mcp.token is for MCP only");
    // The configured runtime token works on both.
    assert!(
        super::support::connect(&d.url(), Some(RUNTIME_TOKEN))
            .await
            .is_ok()
    );
    let r = modern(
        d.daemon.addr(),
        RUNTIME_TOKEN,
        "tools/list",
        None,
        json!({}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_is_never_served_on_a_non_loopback_address() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = openphone_server::Daemon::start(openphone_server::DaemonOptions {
        data_dir: dir.path().to_path_buf(),
        listen: "0.0.0.0:0".parse().unwrap(),
        device: openphone_server::DeviceChoice::Sim,
        config: openphone_server::Config::parse(
            &format!(
                "insecure_listen = true\n[[runtimes]]\nid = \"hermes\"\ntoken = \"{RUNTIME_TOKEN}\"\n"
            ),
            "test.toml",
        )
        .unwrap(),
    })
    .await
    .unwrap();
    let info: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("endpoint.json")).unwrap())
            .unwrap();
    assert!(info.get("mcp_url").is_none(), "{info}");
    assert!(!dir.path().join("mcp.sock").exists());
    let local: SocketAddr = format!("127.0.0.1:{}", daemon.addr().port())
        .parse()
        .unwrap();
    let r = modern(local, RUNTIME_TOKEN, "tools/list", None, json!({})).await;
    assert_eq!(r.status, 404, "{}", r.body);
    daemon.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_state_stops_working_once_the_host_is_no_longer_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let desk = |trusted: bool| {
        config(&format!(
            "\n[[runtimes]]\nid = \"desk\"\ntoken = \"{DESK_TOKEN}\"\n\
             grants = [\"safe_read\", \"private_read\", \"dangerous\"]\ntrust_client_confirmation = {trusted}\n"
        ))
    };
    let boot = |config| {
        openphone_server::Daemon::start(openphone_server::DaemonOptions {
            data_dir: dir.path().to_path_buf(),
            listen: "127.0.0.1:0".parse().unwrap(),
            device: openphone_server::DeviceChoice::Sim,
            config,
        })
    };
    let daemon = boot(desk(true)).await.unwrap();
    let text = "note of a revoked host";
    let first = call(
        daemon.addr(),
        DESK_TOKEN,
        "openphone_memory_save",
        save(text),
    )
    .await;
    let state = first["result"]["requestState"]
        .as_str()
        .unwrap_or_else(|| panic!("{first}"))
        .to_owned();
    daemon.shutdown().await;

    // The user turns the trust off; the confirmation survives the restart, the state does not
    // decide it any more.
    let daemon = boot(desk(false)).await.unwrap();
    let mut p = save(text);
    p["requestState"] = json!(state);
    p["inputResponses"] = json!({"confirm": {"action": "accept", "content": {}}});
    let r = call(daemon.addr(), DESK_TOKEN, "openphone_memory_save", p).await;
    assert_eq!(error_code_of(&r), "confirmation_invalid", "{r}");
    assert_eq!(count(daemon.addr(), text).await, 0);
    daemon.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_session_stays_with_the_token_that_opened_it() {
    let d = start(config("")).await;
    let addr = d.daemon.addr();
    let mine = format!("Bearer {}", mcp_token(d.dir.path()));
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "owner", "version": "1"}}})
    .to_string();
    let base = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let mut h: Vec<(&str, &str)> = base.to_vec();
    h.push(("Authorization", &mine));
    let r = send(addr, "POST", &h, init.as_bytes()).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let session = r.header("mcp-session-id").unwrap().to_owned();

    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string();
    let other = format!("Bearer {RUNTIME_TOKEN}");
    for (auth, ok) in [(other.as_str(), false), (mine.as_str(), true)] {
        let mut h: Vec<(&str, &str)> = base.to_vec();
        h.push(("Authorization", auth));
        h.push(("Mcp-Session-Id", &session));
        h.push(("MCP-Protocol-Version", "2025-11-25"));
        let r = send(addr, "POST", &h, list.as_bytes()).await;
        let v = r.json();
        assert_eq!(v["result"]["tools"].is_array(), ok, "{v}");
        if !ok {
            assert!(
                v["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("another runtime"),
                "{v}"
            );
        }
    }
}

/// MCP's tool list shows what the bridge runs: the runtime-served commands too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_lists_runtime_served_commands_as_tools() {
    let d = start(config("")).await;
    let addr = d.daemon.addr();
    let token = mcp_token(d.dir.path());
    let reply = modern(addr, &token, "tools/list", None, json!({})).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let listed = reply.json();
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    for name in [
        "openphone_memory_save",
        "openphone_watchers_create",
        "openphone_screen_get",
    ] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
}

/// Issue 18: the goal commands over MCP — listed, created after the user accepts the
/// confirmation, owned by the MCP runtime that created them and closed to another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_runs_the_goal_commands_for_the_runtime_that_owns_the_goal() {
    let d = start(config(&format!(
        "\n[[runtimes]]\nid = \"desk\"\ntoken = \"{DESK_TOKEN}\"\n\
         grants = [\"safe_read\", \"private_read\", \"dangerous\"]\ntrust_client_confirmation = true\n"
    )))
    .await;
    let addr = d.daemon.addr();
    let reply = modern(addr, DESK_TOKEN, "tools/list", None, json!({})).await;
    let listed = reply.json();
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    for name in [
        "openphone_goals_create",
        "openphone_goals_list",
        "openphone_goals_get",
        "openphone_goals_plan",
        "openphone_goals_stop",
    ] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }

    let create = json!({"arguments": {
        "objective": "find the dentist appointment",
        "plan": [{"id": "find", "title": "Find it", "kind": "tool",
                  "command": "openphone.calendar.search", "params": {"query": "Dentist"}}],
        "reason": "the user asked"}});
    let first = call(addr, DESK_TOKEN, "openphone_goals_create", create.clone()).await;
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let mut again = create;
    again["requestState"] = first["result"]["requestState"].clone();
    again["inputResponses"] = json!({"confirm": {"action": "accept", "content": {}}});
    let created = call(addr, DESK_TOKEN, "openphone_goals_create", again).await;
    assert_eq!(created["result"]["isError"], false, "{created}");
    let goal = &created["result"]["structuredContent"]["goal"];
    assert_eq!(goal["owner"]["runtime"], "desk", "{created}");
    assert_eq!(goal["planner"], "desk");
    let id = goal["id"].as_str().unwrap().to_owned();

    let mine = call(
        addr,
        DESK_TOKEN,
        "openphone_goals_list",
        json!({"arguments": {"reason": "what runs"}}),
    )
    .await;
    assert_eq!(
        mine["result"]["structuredContent"]["goals"][0]["goal_id"],
        json!(id),
        "{mine}"
    );

    // The default MCP runtime is another runtime: not its goal.
    let other = mcp_token(d.dir.path());
    let refused = call(
        addr,
        &other,
        "openphone_goals_get",
        json!({"arguments": {"goal_id": id, "reason": "peek"}}),
    )
    .await;
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    let text = refused["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("forbidden"), "{text}");
}

/// Issue 28, item 8: the handshake-era sessions had one global cap (256), the least recently
/// used closed first, so one token holder opening sessions closed every other host's (a
/// victim's session answered 404 after 16 s). Now a principal over its own cap closes its own
/// oldest session; another principal's session still answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_token_holder_cannot_close_another_hosts_mcp_session() {
    let d = start(config(
        "[limits]\nrate_per_sec = 100000.0\nrate_burst = 100000.0\n",
    ))
    .await;
    let addr = d.daemon.addr();
    let init = |name: &str| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": name, "version": "1"}}})
        .to_string()
    };
    let base = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let open = |auth: String, body: String| async move {
        let mut h: Vec<(&str, &str)> = base.to_vec();
        h.push(("Authorization", &auth));
        let r = send(addr, "POST", &h, body.as_bytes()).await;
        assert_eq!(r.status, 200, "{}", r.body);
        r.header("mcp-session-id").unwrap().to_owned()
    };
    let ping = |auth: String, session: String| async move {
        let body = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}).to_string();
        let mut h: Vec<(&str, &str)> = base.to_vec();
        h.push(("Authorization", &auth));
        h.push(("Mcp-Session-Id", &session));
        h.push(("MCP-Protocol-Version", "2025-11-25"));
        send(addr, "POST", &h, body.as_bytes()).await.status
    };
    let victim = format!("Bearer {RUNTIME_TOKEN}");
    let flooder = format!("Bearer {}", mcp_token(d.dir.path()));
    let kept = open(victim.clone(), init("victim")).await;
    // More sessions than the whole cap, all from one token.
    let mut flood = Vec::new();
    for _ in 0..=openphone_mcp::MAX_HTTP_SESSIONS {
        flood.push(open(flooder.clone(), init("flood")).await);
    }
    assert_eq!(
        ping(victim.clone(), kept).await,
        200,
        "the victim's session was closed"
    );
    // The flooder paid with its own oldest sessions.
    assert_eq!(ping(flooder.clone(), flood[0].clone()).await, 404);
    assert_eq!(ping(flooder, flood.last().unwrap().clone()).await, 200);
    d.daemon.shutdown().await;
}
