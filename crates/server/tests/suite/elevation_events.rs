//! Elevated mode on the real daemon (issue 32 item 11, `docs/security.md`): every grant,
//! revocation and expiry is pushed as `runtime.elevation.changed` to operators and to the
//! runtime concerned, and a job a runtime creates while elevated does not inherit the
//! elevation — it runs with the runtime's configured ceiling.

use std::time::Duration;

use openphone_fake_model::{FakeModel, Script};
use openphone_server::Config;
use serde_json::{Value, json};

use super::support::{Client, RUNTIME_TOKEN, connect, start};

/// `hermes` with an `observe_only` ceiling (it may be elevated), then `extra`.
fn config(extra: &str) -> Config {
    let text = format!(
        "[[runtimes]]\nid = \"hermes\"\ntoken = \"{RUNTIME_TOKEN}\"\n\
         grants = [\"safe_read\", \"private_read\", \"dangerous\"]\n\
         max_autonomy = \"observe_only\"\n{extra}"
    );
    Config::parse(&text, "test.toml").unwrap()
}

/// The next `runtime.elevation.changed` payload.
async fn changed(c: &mut Client) -> Value {
    loop {
        let e = c.next_event().await;
        if e["params"]["event"] == "runtime.elevation.changed" {
            return e["params"]["payload"].clone();
        }
    }
}

async fn subscribed(c: &mut Client) {
    let sub = c
        .call(
            "events.subscribe",
            json!({"events": ["runtime.elevation.changed"]}),
        )
        .await;
    assert!(sub.get("result").is_some(), "{sub}");
}

async fn elevate(op: &mut Client, secs: u64) -> Value {
    let r = op
        .call(
            "runtime.elevate",
            json!({"runtime": "hermes", "to": "trusted_actions", "duration_secs": secs}),
        )
        .await;
    r["result"]["elevation"]
        .as_object()
        .map(|_| r["result"]["elevation"].clone())
        .unwrap_or_else(|| panic!("{r}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_elevation_granted_revoked_or_expired_is_announced_without_reloading() {
    let d = start(config("")).await;
    let mut op = connect(&d.url(), Some(&d.operator_token())).await.unwrap();
    op.hello().await;
    subscribed(&mut op).await;
    let mut rt = connect(&d.url(), Some(RUNTIME_TOKEN)).await.unwrap();
    rt.hello().await;
    subscribed(&mut rt).await;

    let first = elevate(&mut op, 600).await;
    for c in [&mut op, &mut rt] {
        let e = changed(c).await;
        assert_eq!(e["change"], "granted", "{e}");
        assert_eq!(e["elevation"], first, "{e}");
        assert!(e.get("replaced").is_none(), "{e}");
    }
    // A one-second grant replaces it, then expires on its own (the daemon's sweep).
    let short = elevate(&mut op, 1).await;
    let e = changed(&mut op).await;
    assert_eq!(
        (&e["change"], &e["elevation"], &e["replaced"]),
        (&json!("granted"), &short, &first),
        "{e}"
    );
    let e = changed(&mut op).await;
    assert_eq!(e["change"], "expired", "{e}");
    assert_eq!(e["elevation"]["grant_id"], short["grant_id"], "{e}");
    assert!(e["at_ms"].as_i64().unwrap() >= short["expires_at_ms"].as_i64().unwrap());
    // The runtime sees its own changes too.
    assert_eq!(changed(&mut rt).await["change"], "granted");
    assert_eq!(changed(&mut rt).await["change"], "expired");

    let last = elevate(&mut op, 600).await;
    assert_eq!(changed(&mut op).await["change"], "granted");
    let revoked = op
        .call("runtime.revoke_elevation", json!({"runtime": "hermes"}))
        .await;
    assert_eq!(revoked["result"]["revoked"], last, "{revoked}");
    let e = changed(&mut op).await;
    assert_eq!(e["change"], "revoked", "{e}");
    assert_eq!(e["elevation"], last, "{e}");
    // Revoking nothing announces nothing: the next change is the next grant.
    let none = op
        .call("runtime.revoke_elevation", json!({"runtime": "hermes"}))
        .await;
    assert!(none["result"]["revoked"].is_null(), "{none}");
    let next = elevate(&mut op, 600).await;
    let e = changed(&mut op).await;
    assert_eq!(
        (&e["change"], &e["elevation"]),
        (&json!("granted"), &next),
        "{e}"
    );
    d.daemon.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_created_during_an_elevation_does_not_inherit_it() {
    let fake = FakeModel::start().await;
    fake.push(Script::tool_call(
        "tap",
        json!({"x": 10, "y": 10, "reason": "open the first app"}),
    ));
    fake.push(Script::text("I could not tap."));
    let d = start(config(&format!(
        "[builtin]\nbase_url = \"{}\"\nmodel = \"fake-model\"\nrequest_timeout_secs = 10\n",
        fake.url()
    )))
    .await;
    let mut op = connect(&d.url(), Some(&d.operator_token())).await.unwrap();
    op.hello().await;
    let mut rt = connect(&d.url(), Some(RUNTIME_TOKEN)).await.unwrap();
    rt.hello().await;

    // observe_only: hermes may not even create the job.
    let job = |n: u32| {
        json!({"request_id": format!("job-{n}"), "tool": "openphone.jobs.create",
               "autonomy": "trusted_actions",
               "params": {"title": "Tap", "prompt": "Tap the first app.", "reason": "test"}})
    };
    let refused = rt.call("tools.invoke", job(1)).await;
    assert_eq!(
        refused["result"]["error"]["code"], "observe_only_mutation_denied",
        "{refused}"
    );
    // Elevated to trusted_actions, it may, and its own call runs under the grant.
    let grant = elevate(&mut op, 600).await;
    let created = rt.call("tools.invoke", job(2)).await;
    assert_eq!(created["result"]["status"], "ok", "{created}");
    let id = created["result"]["result"]["job"]["id"].as_i64().unwrap();

    // The job runs while the elevation still lasts, but with hermes's configured ceiling:
    // its tap is denied by observe_only, not parked for review as trusted_actions would.
    let woke = op.call("jobs.wake", json!({})).await;
    assert_eq!(woke["result"]["claimed"], json!([id]), "{woke}");
    let mut tap = None;
    for _ in 0..600 {
        let audit = op.call("audit.query", json!({"limit": 1000})).await;
        tap = audit["result"]["records"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["tool"] == "openphone.ui.tap")
            .cloned();
        if tap.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let tap = tap.expect("the job's tap was never decided");
    assert_eq!(tap["error_code"], "observe_only_mutation_denied", "{tap}");
    assert!(
        !tap.to_string()
            .contains(grant["grant_id"].as_str().unwrap()),
        "the job's call used the elevation: {tap}"
    );
    let listed = op.call("runtime.list", json!({})).await;
    let hermes = listed["result"]["runtimes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "hermes")
        .cloned()
        .unwrap();
    assert_eq!(
        hermes["elevation"]["grant_id"], grant["grant_id"],
        "{hermes}"
    );
    let got = op.call("jobs.get", json!({"job_id": id})).await;
    assert!(
        !got.to_string().contains("review_required"),
        "the tap was parked: {got}"
    );
    d.daemon.shutdown().await;
    fake.shutdown().await;
}
