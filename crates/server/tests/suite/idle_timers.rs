//! Issue 34: an idle daemon sleeps until its next due time instead of ticking every second.
//! What is scheduled while it sleeps still happens on time: the sleep is cut short by a new
//! confirmation or a new watcher.

use serde_json::{Value, json};

use super::support::*;

/// Lets the daemon's timers go to sleep with nothing due (their longest sleep is a minute).
async fn idle() {
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
}

/// A confirmation that nobody waits for (`wait: false`) times out only through the daemon's
/// expiry timer. Created after the timer went to sleep with nothing pending, it still times
/// out at its expiry, not at the timer's next minute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirmation_created_while_the_daemon_idles_times_out_on_time() {
    let d = start(config("")).await;
    let mut op = connect(&d.url(), Some(&d.operator_token())).await.unwrap();
    op.hello().await;
    let sub = op
        .call(
            "events.subscribe",
            json!({"events": ["runtime.confirmation.resolved"]}),
        )
        .await;
    assert!(sub.get("result").is_some(), "{sub}");
    let mut rt = connect(&d.url(), Some(RUNTIME_TOKEN)).await.unwrap();
    rt.hello().await;
    idle().await;
    let parked = rt
        .call(
            "tools.invoke",
            json!({"request_id": "idle-1", "tool": "openphone.ui.tap",
                   "params": {"x": 10, "y": 20, "reason": "open the app"},
                   "idempotency_key": "idle-1", "wait": false, "timeout_ms": 1500}),
        )
        .await;
    assert_eq!(parked["result"]["status"], "needs_confirmation", "{parked}");
    // next_event gives up after 20 s: the timer's idle minute would fail this.
    let resolved = op.next_event().await;
    assert_eq!(resolved["params"]["event"], "runtime.confirmation.resolved");
    assert_eq!(
        resolved["params"]["payload"]["resolution"], "timeout",
        "{resolved}"
    );
    d.daemon.shutdown().await;
}

/// A time watcher created while the engine sleeps (no watcher was due) fires at its time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_time_watcher_created_while_the_daemon_idles_fires_on_time() {
    let d = start(config("")).await;
    let mut op = connect(&d.url(), Some(&d.operator_token())).await.unwrap();
    op.hello().await;
    idle().await;
    let now = d.daemon.goal_engine().now();
    // Creating a watcher is a mutation: asked first, approved by the operator.
    let parked = op
        .call(
            "tools.invoke",
            json!({"request_id": "w-1", "tool": "openphone.watchers.create", "wait": false,
                   "params": {"title": "Stand up", "source": "time", "next_run_at": now + 3000,
                              "reason": "test"}}),
        )
        .await;
    let cid = parked["result"]["result"]["confirmation_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{parked}"))
        .to_owned();
    let approved = op
        .call(
            "confirmations.resolve",
            json!({"confirmation_id": cid, "decision": "approve"}),
        )
        .await;
    assert_eq!(approved["result"]["status"], "ok", "{approved}");
    for n in 0.. {
        let call = json!({"request_id": format!("list-{n}"), "tool": "openphone.watchers.list",
                          "params": {"reason": "test"}});
        let listed: Value = op.call("tools.invoke", call).await;
        let active = listed["result"]["result"]["watchers"]
            .as_array()
            .unwrap_or_else(|| panic!("{listed}"))
            .len();
        if active == 0 {
            break;
        }
        assert!(
            n < 150,
            "the watcher had not fired 15 s after its time: {listed}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    d.daemon.shutdown().await;
}
