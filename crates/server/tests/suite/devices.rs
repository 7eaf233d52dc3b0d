//! Several phones, one daemon (issue 30): `[[devices]]` with two simulated phones on different
//! scenarios, a real daemon and its real store. Each request acts on the phone it names only;
//! a runtime granted one phone is refused the other; a request naming none among several, or
//! an unknown one, is refused with the list of ids; audit records name the phone;
//! `devices.list` lists them.

use openphone_server::{Daemon, DaemonOptions, DeviceChoice};
use serde_json::{Value, json};

use super::support::{RUNTIME_TOKEN, Running, config, connect};

const LIMITED_TOKEN: &str = "limited-test-token-0123456789";

/// A scenario whose phone differs from the default one: its battery and its owner.
const SECOND_SCENARIO: &str = r#"{"version": 1, "device": {"model": "Second Phone",
    "battery_percent": 11, "owner_name": "Second Owner"}}"#;

async fn two_phones() -> Running {
    two_phones_and("").await
}

/// [`two_phones`] with `tail` appended to the configuration (a `[builtin]` table, say).
async fn two_phones_and(tail: &str) -> Running {
    two_phones_with(tail, SECOND_SCENARIO).await
}

/// [`two_phones_and`] with the second phone on `second_scenario`.
async fn two_phones_with(tail: &str, second_scenario: &str) -> Running {
    let dir = tempfile::tempdir().unwrap();
    // The scenario file lives in the data directory itself (the daemon tightens it to 0700).
    let second = dir.path().join("second.json");
    std::fs::write(&second, second_scenario).unwrap();
    let extra = format!(
        r#"max_autonomy = "trusted_actions"

[[runtimes]]
id = "limited"
token = "{LIMITED_TOKEN}"
grants = ["safe_read", "private_read", "dangerous"]
devices = ["first"]

[[devices]]
id = "first"
kind = "sim"

[[devices]]
id = "second"
kind = "sim"
scenario = "{}"
{tail}
"#,
        second.display()
    );
    let daemon = Daemon::start(DaemonOptions {
        data_dir: dir.path().to_path_buf(),
        listen: "127.0.0.1:0".parse().unwrap(),
        device: DeviceChoice::Config,
        config: config(&extra),
    })
    .await
    .unwrap();
    Running { daemon, dir }
}

/// `tools.invoke` of `tool` with `params` on `device` (none: `device_id` left out).
async fn invoke(
    client: &mut super::support::Client,
    id: &str,
    tool: &str,
    params: Value,
    device: Option<&str>,
) -> Value {
    let mut p = json!({"request_id": id, "tool": tool, "params": params,
        "autonomy": "trusted_actions"});
    if let Some(device) = device {
        p["device_id"] = json!(device);
    }
    client.call("tools.invoke", p).await["result"].clone()
}

fn status(device: &str) -> Value {
    json!({"reason": format!("battery of {device}")})
}

#[tokio::test]
async fn two_phones_each_request_acts_on_the_phone_it_names_only() {
    let running = two_phones().await;
    let mut hermes = connect(&running.url(), Some(RUNTIME_TOKEN)).await.unwrap();
    hermes.hello().await;

    let first = invoke(
        &mut hermes,
        "s1",
        "openphone.device.status",
        status("first"),
        Some("first"),
    )
    .await;
    let second = invoke(
        &mut hermes,
        "s2",
        "openphone.device.status",
        status("second"),
        Some("second"),
    )
    .await;
    assert_eq!(first["status"], "ok", "{first}");
    assert_eq!(second["status"], "ok", "{second}");
    assert_eq!(
        second["result"]["device"]["model"], "Second Phone",
        "{second}"
    );
    assert_eq!(
        second["result"]["device"]["battery_percent"], 11,
        "{second}"
    );
    assert_ne!(
        first["result"]["device"]["model"], "Second Phone",
        "{first}"
    );

    // A state change on the first phone only (Settings opened), read back from each.
    let open = invoke(
        &mut hermes,
        "c1",
        "openphone.app.open",
        json!({"package_or_label": "Settings", "reason": "test"}),
        Some("first"),
    )
    .await;
    assert_eq!(open["status"], "ok", "{open}");
    let first_after = invoke(
        &mut hermes,
        "s3",
        "openphone.device.status",
        status("first"),
        Some("first"),
    )
    .await;
    let second_after = invoke(
        &mut hermes,
        "s4",
        "openphone.device.status",
        status("second"),
        Some("second"),
    )
    .await;
    let foreground = |v: &Value| v["result"]["device"]["foreground"]["package"].clone();
    assert_eq!(
        foreground(&first_after),
        "com.android.settings",
        "{first_after}"
    );
    assert_eq!(
        foreground(&second_after),
        foreground(&second),
        "{second_after}"
    );
    assert_ne!(
        foreground(&second_after),
        "com.android.settings",
        "{second_after}"
    );

    // The audit records name the phone each request acted on.
    let token = running.operator_token();
    let mut operator = connect(&running.url(), Some(&token)).await.unwrap();
    operator.hello().await;
    let page = operator.call("audit.query", json!({"limit": 1000})).await;
    let records = page["result"]["records"].as_array().unwrap().clone();
    let device_of = |request: &str| -> Vec<Value> {
        records
            .iter()
            .filter(|r| r["request_id"] == request)
            .map(|r| r["device_id"].clone())
            .collect()
    };
    assert_eq!(device_of("s1"), [json!("first")]);
    assert_eq!(device_of("s2"), [json!("second")]);
    assert!(!device_of("c1").is_empty());
    assert!(device_of("c1").iter().all(|d| d == "first"), "{records:?}");
    running.daemon.shutdown().await;
}

#[tokio::test]
async fn two_phones_a_request_naming_none_or_an_unknown_one_is_refused_with_the_ids() {
    let running = two_phones().await;
    let mut hermes = connect(&running.url(), Some(RUNTIME_TOKEN)).await.unwrap();
    hermes.hello().await;
    let none = invoke(
        &mut hermes,
        "n1",
        "openphone.screen.get",
        json!({"reason": "look"}),
        None,
    )
    .await;
    assert_eq!(none["error"]["code"], "invalid_params", "{none}");
    assert_eq!(
        none["error"]["details"]["devices"],
        json!(["first", "second"])
    );
    assert!(
        none["error"]["message"]
            .as_str()
            .unwrap()
            .contains("first, second"),
        "{none}"
    );
    let unknown = invoke(
        &mut hermes,
        "n2",
        "openphone.screen.get",
        json!({"reason": "look"}),
        Some("third"),
    )
    .await;
    assert_eq!(unknown["error"]["code"], "invalid_params", "{unknown}");
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap()
            .contains("\"third\""),
        "{unknown}"
    );
    // A runtime-owned command acts on no phone: it needs none.
    let memory = invoke(
        &mut hermes,
        "n3",
        "openphone.memory.save",
        json!({"text": "x", "reason": "r"}),
        None,
    )
    .await;
    assert_ne!(memory["error"]["code"], "invalid_params", "{memory}");
    running.daemon.shutdown().await;
}

#[tokio::test]
async fn two_phones_a_runtime_granted_one_phone_is_refused_the_other() {
    let running = two_phones().await;
    let mut limited = connect(&running.url(), Some(LIMITED_TOKEN)).await.unwrap();
    limited.hello().await;
    let ok = invoke(
        &mut limited,
        "g1",
        "openphone.screen.get",
        json!({"reason": "look"}),
        Some("first"),
    )
    .await;
    assert_eq!(ok["status"], "ok", "{ok}");
    let refused = invoke(
        &mut limited,
        "g2",
        "openphone.screen.get",
        json!({"reason": "look"}),
        Some("second"),
    )
    .await;
    assert_eq!(refused["error"]["code"], "tool_not_granted", "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("\"second\""),
        "{refused}"
    );
    // It sees only its phone; the operator sees both, with who is limited to them.
    let mine = limited.call("devices.list", json!({})).await;
    let ids: Vec<&str> = mine["result"]["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["first"]);
    // …and not which runtimes a phone is limited to (the operator's business).
    assert!(
        mine["result"]["devices"][0].get("runtimes").is_none(),
        "a runtime saw the grants of others: {mine}"
    );
    let token = running.operator_token();
    let mut operator = connect(&running.url(), Some(&token)).await.unwrap();
    operator.hello().await;
    let all = operator.call("devices.list", json!({})).await;
    assert_eq!(
        all["result"]["devices"],
        json!([
            {"id": "first", "kind": "sim", "spec": "sim", "state": "device", "runtimes": ["limited"]},
            {"id": "second", "kind": "sim", "spec": format!("sim:{}", running.dir.path().join("second.json").display()),
             "state": "device", "runtimes": []}
        ])
    );
    running.daemon.shutdown().await;
}

/// One phone: a request naming none acts on it and its records carry no device id, as
/// before several phones existed.
#[tokio::test]
async fn one_phone_requests_need_no_device_id_and_records_name_none() {
    let running = super::support::start(config("")).await;
    let mut hermes = connect(&running.url(), Some(RUNTIME_TOKEN)).await.unwrap();
    hermes.hello().await;
    let read = invoke(
        &mut hermes,
        "o1",
        "openphone.screen.get",
        json!({"reason": "look"}),
        None,
    )
    .await;
    assert_eq!(read["status"], "ok", "{read}");
    let named = invoke(
        &mut hermes,
        "o2",
        "openphone.screen.get",
        json!({"reason": "look"}),
        Some("default"),
    )
    .await;
    assert_eq!(named["status"], "ok", "{named}");
    let token = running.operator_token();
    let mut operator = connect(&running.url(), Some(&token)).await.unwrap();
    operator.hello().await;
    let page = operator.call("audit.query", json!({"limit": 1000})).await;
    let record = page["result"]["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["request_id"] == "o1")
        .unwrap()
        .clone();
    assert!(record.get("device_id").is_none(), "{record}");
    running.daemon.shutdown().await;
}

/// A runtime granted exactly one phone (`[[runtimes]] devices = ["first"]`) needs no
/// `device_id`: its calls go to that phone, and their records name it.
#[tokio::test]
async fn two_phones_a_runtime_granted_one_phone_needs_no_device_id() {
    let running = two_phones().await;
    let mut limited = connect(&running.url(), Some(LIMITED_TOKEN)).await.unwrap();
    limited.hello().await;
    let read = invoke(
        &mut limited,
        "d1",
        "openphone.device.status",
        status("default"),
        None,
    )
    .await;
    assert_eq!(read["status"], "ok", "{read}");
    assert_ne!(read["result"]["device"]["model"], "Second Phone", "{read}");
    // A runtime granted both still has to name one.
    let mut hermes = connect(&running.url(), Some(RUNTIME_TOKEN)).await.unwrap();
    hermes.hello().await;
    let none = invoke(
        &mut hermes,
        "d2",
        "openphone.device.status",
        status("none"),
        None,
    )
    .await;
    assert_eq!(none["error"]["code"], "invalid_params", "{none}");
    let token = running.operator_token();
    let mut operator = connect(&running.url(), Some(&token)).await.unwrap();
    operator.hello().await;
    let page = operator.call("audit.query", json!({"limit": 1000})).await;
    let devices: Vec<Value> = page["result"]["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["request_id"] == "d1")
        .map(|r| r["device_id"].clone())
        .collect();
    assert_eq!(devices, [json!("first")]);
    running.daemon.shutdown().await;
}

/// The bug: the idempotency identity left the phone out, so the same key reused on another
/// phone replayed the first phone's result and never acted on the second.
#[tokio::test]
async fn idempotency_key_reused_on_another_phone_replayed_the_first_phones_result() {
    let running = two_phones().await;
    let mut hermes = connect(&running.url(), Some(RUNTIME_TOKEN)).await.unwrap();
    hermes.hello().await;
    let open = |id: &str, device: &str| {
        json!({"request_id": id, "tool": "openphone.app.open", "idempotency_key": "same-key",
            "params": {"package_or_label": "Settings", "reason": "test"},
            "autonomy": "trusted_actions", "device_id": device})
    };
    let first = hermes.call("tools.invoke", open("k1", "first")).await["result"].clone();
    assert_eq!(first["status"], "ok", "{first}");
    let second = hermes.call("tools.invoke", open("k2", "second")).await["result"].clone();
    assert_eq!(second["status"], "ok", "{second}");
    let after = invoke(
        &mut hermes,
        "k3",
        "openphone.device.status",
        status("second"),
        Some("second"),
    )
    .await;
    assert_eq!(
        after["result"]["device"]["foreground"]["package"], "com.android.settings",
        "the second phone was never acted on: {after}"
    );
    // The same key on the same phone is still a replay.
    let again = hermes.call("tools.invoke", open("k4", "second")).await["result"].clone();
    assert_eq!(again["status"], "ok", "{again}");
    let token = running.operator_token();
    let mut operator = connect(&running.url(), Some(&token)).await.unwrap();
    operator.hello().await;
    let page = operator.call("audit.query", json!({"limit": 1000})).await;
    let replayed: Vec<Value> = page["result"]["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["request_id"] == "k2" || r["request_id"] == "k4")
        .map(|r| json!([r["request_id"], r["confirmation"]]))
        .collect();
    assert!(
        replayed.contains(&json!(["k4", "replayed"])),
        "{replayed:?}"
    );
    assert!(
        !replayed.contains(&json!(["k2", "replayed"])),
        "{replayed:?}"
    );
    running.daemon.shutdown().await;
}

/// A phone session is bound to the phone its attention request names: the runtime's calls in
/// that session that name no phone go to it, and `sessions.list` shows it. A phone that is
/// not configured is refused before any session is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_phones_a_session_is_bound_to_its_phone_and_its_calls_go_there() {
    let running = two_phones().await;
    let mut hermes = connect(&running.url(), Some(RUNTIME_TOKEN)).await.unwrap();
    hermes.hello().await;
    let token = running.operator_token();
    let mut operator = connect(&running.url(), Some(&token)).await.unwrap();
    operator.hello().await;
    let unknown = operator
        .call(
            "attention.request",
            json!({"surface": "chat", "text": "hi", "runtime": "hermes", "device_id": "third"}),
        )
        .await;
    assert_eq!(
        unknown["error"]["data"]["code"], "invalid_params",
        "{unknown}"
    );
    let asked = operator
        .call(
            "attention.request",
            json!({"surface": "chat", "text": "battery?", "runtime": "hermes",
                "device_id": "second"}),
        )
        .await;
    let session = asked["result"]["phone_session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{asked}"))
        .to_owned();
    let read = hermes
        .call(
            "tools.invoke",
            json!({"request_id": "b1", "tool": "openphone.device.status",
                "phone_session_id": session, "params": {"reason": "battery"}}),
        )
        .await["result"]
        .clone();
    assert_eq!(read["status"], "ok", "{read}");
    assert_eq!(read["result"]["device"]["model"], "Second Phone", "{read}");
    let listed = operator.call("sessions.list", json!({})).await;
    let found = listed["result"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["phone_session_id"] == session.as_str())
        .unwrap()
        .clone();
    assert_eq!(found["device_id"], "second", "{found}");
    // The same call outside the session still has to name a phone.
    let loose = invoke(
        &mut hermes,
        "b2",
        "openphone.device.status",
        status("none"),
        None,
    )
    .await;
    assert_eq!(loose["error"]["code"], "invalid_params", "{loose}");
    running.daemon.shutdown().await;
}

/// A job made naming a phone (`jobs.create` `device_id`) shows it, and its run's tool calls go
/// to that phone although they name none; a phone that is not configured is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_phones_a_job_names_its_phone_and_its_runs_act_on_it() {
    let fake = openphone_fake_model::FakeModel::start().await;
    fake.push(openphone_fake_model::Script::tool_call(
        "phone_context",
        json!({"reason": "battery"}),
    ));
    fake.push(openphone_fake_model::Script::text("Battery checked."));
    let running = two_phones_and(&format!(
        "[builtin]\nbase_url = \"{}\"\nmodel = \"fake-model\"\nrequest_timeout_secs = 10\n",
        fake.url()
    ))
    .await;
    let token = running.operator_token();
    let mut op = connect(&running.url(), Some(&token)).await.unwrap();
    op.hello().await;
    let unknown = op
        .call(
            "jobs.create",
            json!({"title": "x", "prompt": "y", "device_id": "third"}),
        )
        .await;
    assert_eq!(
        unknown["error"]["data"]["code"], "invalid_params",
        "{unknown}"
    );
    let made = op
        .call(
            "jobs.create",
            json!({"title": "Battery", "prompt": "How is the battery?", "device_id": "second"}),
        )
        .await;
    assert_eq!(made["result"]["job"]["device_id"], "second", "{made}");
    let id = made["result"]["job"]["id"].as_i64().unwrap();
    op.call("jobs.wake", json!({})).await;
    let mut last = Value::Null;
    for _ in 0..300 {
        last = op.call("jobs.get", json!({"job_id": id})).await["result"].clone();
        if last["job"]["status"] == "completed" || last["job"]["status"] == "failed" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(last["job"]["status"], "completed", "{last}");
    assert_eq!(last["job"]["device_id"], "second", "{last}");
    let page = op.call("audit.query", json!({"limit": 1000})).await;
    let calls: Vec<Value> = page["result"]["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["tool"] == "openphone.device.status")
        .map(|r| json!([r["status"], r["device_id"]]))
        .collect();
    assert!(!calls.is_empty(), "{page}");
    assert!(
        calls.iter().all(|c| c == &json!(["ok", "second"])),
        "{calls:?}"
    );
    running.daemon.shutdown().await;
}

/// MCP names a phone with `_meta["openphone/device_id"]`; a call naming none goes to the
/// only phone the runtime is granted (the `limited` runtime: `first`), and one naming a phone
/// that is not configured is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_a_call_names_its_phone_in_meta_or_defaults_to_the_granted_one() {
    let running = two_phones().await;
    let call = |id: u64, meta: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "openphone_device_status", "arguments": {"reason": "battery"},
            "_meta": meta}})
    };
    let model = |response: &Value| -> Value {
        response["result"]["structuredContent"]["device"]["model"].clone()
    };
    let mut hermes = super::support::McpSock::open(
        running.dir.path(),
        RUNTIME_TOKEN,
        ("devices-test", "1"),
        std::time::Duration::from_secs(30),
    )
    .await;
    hermes
        .send(&call(2, json!({"openphone/device_id": "second"})))
        .await;
    let second = hermes.response(2).await;
    assert_eq!(model(&second), "Second Phone", "{second}");
    hermes
        .send(&call(3, json!({"openphone/device_id": "third"})))
        .await;
    let unknown = hermes.response(3).await;
    assert_eq!(unknown["result"]["isError"], true, "{unknown}");
    let mut limited = super::support::McpSock::open(
        running.dir.path(),
        LIMITED_TOKEN,
        ("devices-test", "1"),
        std::time::Duration::from_secs(30),
    )
    .await;
    limited.send(&call(2, json!({}))).await;
    let first = limited.response(2).await;
    assert_eq!(limited_status(&first), "ok", "{first}");
    assert_ne!(model(&first), "Second Phone", "{first}");
    running.daemon.shutdown().await;
}

fn limited_status(response: &Value) -> Value {
    super::support::tool_result_meta(response)["status"].clone()
}

/// World events from every phone reach the bus, each naming its phone: a message arriving on
/// the second phone (its scenario's timeline) is published with `device_id: "second"`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_phones_every_phones_events_reach_the_bus_naming_their_phone() {
    // The daemon's phones run on the system clock.
    let now = openphone_clock::Clock::now_ms(&openphone_clock::SystemClock);
    let scenario = json!({"version": 1, "device": {"model": "Second Phone"},
        "timeline": [{"at_ms": now + 1500,
            "inject": {"kind": "message", "address": "+15550001", "text": "hello second"}}]});
    let running = two_phones_with("", &scenario.to_string()).await;
    let token = running.operator_token();
    let mut op = connect(&running.url(), Some(&token)).await.unwrap();
    op.hello().await;
    let sub = op
        .call(
            "events.subscribe",
            json!({"events": ["phone.message.received"]}),
        )
        .await;
    assert!(sub.get("result").is_some(), "{sub}");
    let event = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        loop {
            let e = op.next_event().await;
            if e["params"]["event"] == "phone.message.received" {
                return e["params"]["payload"].clone();
            }
        }
    })
    .await
    .expect("the second phone's message never reached the bus");
    assert_eq!(event["text"], "hello second", "{event}");
    assert_eq!(event["device_id"], "second", "{event}");
    running.daemon.shutdown().await;
}

/// `hello` lists every phone the caller may act on with its profile; `phone` stays the first
/// phone's. A runtime limited to one phone sees only it; with one phone the list is absent.
#[tokio::test]
async fn two_phones_hello_lists_each_phone_with_its_profile() {
    let running = two_phones().await;
    let mut hermes = connect(&running.url(), Some(RUNTIME_TOKEN)).await.unwrap();
    let hello = hermes.hello().await;
    let ids: Vec<Value> = hello["devices"]
        .as_array()
        .unwrap_or_else(|| panic!("{hello}"))
        .iter()
        .map(|d| json!([d["id"], d["profile"]["model"]]))
        .collect();
    assert_eq!(ids[1], json!(["second", "Second Phone"]), "{hello}");
    assert_eq!(ids[0][0], "first", "{hello}");
    assert_ne!(hello["phone"]["model"], "Second Phone", "{hello}");
    let mut limited = connect(&running.url(), Some(LIMITED_TOKEN)).await.unwrap();
    let mine = limited.hello().await;
    assert_eq!(mine["devices"].as_array().unwrap().len(), 1, "{mine}");
    running.daemon.shutdown().await;
    let one = super::support::start(config("")).await;
    let mut hermes = connect(&one.url(), Some(RUNTIME_TOKEN)).await.unwrap();
    let hello = hermes.hello().await;
    assert!(hello.get("devices").is_none(), "{hello}");
    one.daemon.shutdown().await;
}

/// A goal names its phone (`device_id` in its spec): its tool step acts on that phone only,
/// its job step makes a job on it, and a goal naming a phone that is not configured is
/// refused at `goals.create` with the ids.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_phones_a_goal_names_its_phone_and_its_steps_act_on_it() {
    let running = two_phones().await;
    let token = running.operator_token();
    let mut op = connect(&running.url(), Some(&token)).await.unwrap();
    op.hello().await;
    let unknown = op
        .call(
            "goals.create",
            json!({"goal": {"objective": "x", "device_id": "third"}}),
        )
        .await;
    assert_eq!(
        unknown["error"]["data"]["code"], "invalid_params",
        "{unknown}"
    );
    let message = unknown["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("first") && message.contains("second"),
        "{unknown}"
    );
    let run_at = openphone_clock::Clock::now_ms(&openphone_clock::SystemClock) + 3_600_000;
    let made = op
        .call(
            "goals.create",
            json!({"goal": {
                "objective": "check the second phone's battery",
                "device_id": "second",
                "plan": [
                    {"id": "look", "title": "Battery", "kind": "tool",
                     "command": "openphone.device.status", "params": {"reason": "battery"}},
                    {"id": "later", "title": "Again later", "kind": "job",
                     "prompt": "How is the battery?", "run_at": run_at, "depends_on": ["look"]}
                ]
            }}),
        )
        .await;
    assert_eq!(made["result"]["goal"]["device_id"], "second", "{made}");
    let id = made["result"]["goal"]["id"].as_str().unwrap().to_owned();
    let mut goal = Value::Null;
    for _ in 0..300 {
        goal = op.call("goals.get", json!({"goal_id": id})).await["result"]["goal"].clone();
        let later = goal["actions"]
            .as_array()
            .and_then(|a| a.iter().find(|a| a["id"] == "later"))
            .cloned()
            .unwrap_or(Value::Null);
        if later["state"] != "PLANNED" && later["state"] != "READY" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(goal["device_id"], "second", "{goal}");
    assert_eq!(goal["actions"][0]["state"], "DONE", "{goal}");
    assert_eq!(goal["actions"][1]["state"], "RUNNING", "{goal}");
    let page = op.call("audit.query", json!({"limit": 1000})).await;
    let calls: Vec<Value> = page["result"]["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["tool"] == "openphone.device.status")
        .map(|r| json!([r["status"], r["device_id"]]))
        .collect();
    assert_eq!(calls, vec![json!(["ok", "second"])], "{page}");
    let jobs = op.call("jobs.list", json!({})).await;
    let job_devices: Vec<Value> = jobs["result"]["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["job"]["device_id"].clone())
        .collect();
    assert_eq!(job_devices, vec![json!("second")], "{jobs}");
    running.daemon.shutdown().await;
}
