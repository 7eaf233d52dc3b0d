//! The real `openphone serve` binary on a temp data dir and a free port, driven by a scripted
//! runtime (WebSocket client) and by `openphone` client commands run as separate processes.

use std::time::Duration;

use serde_json::{Value, json};

use super::harness::{Runtime, cli, cli_async, pending_ids, serve, terminate, write_config};
use super::support::run;

fn tap(request_id: &str, key: &str, wait: bool) -> Value {
    json!({
        "request_id": request_id,
        "tool": "openphone.ui.tap",
        "params": {"x": 100, "y": 200, "reason": "open the first app"},
        "idempotency_key": key,
        "wait": wait,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_invokes_and_the_user_approves_from_another_process() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let config = write_config(tmp.path());
    let mut serve = serve(&data, &config);

    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(data.join("operator.token"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let (code, out, err) = cli(&["status", "--json"], &data);
    assert_eq!(code, 0, "{err}");
    let status: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(status["url"], json!(serve.url));
    // A second daemon on the same directory fails with one line naming the holder.
    let (code, _, err) = cli(&["serve", "--listen", "127.0.0.1:0"], &data);
    assert_eq!(code, 2);
    assert!(
        err.contains("locked") && err.contains(&format!("pid {}", serve.child.id())),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");

    let mut rt = Runtime::connect(&serve.url).await;
    let tools = rt.call("tools.list", json!({})).await;
    assert!(
        tools["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "openphone.screen.get")
    );
    let screen = rt
        .call("tools.invoke", json!({"request_id": "s1", "tool": "openphone.screen.get", "params": {}, "reason": "look"}))
        .await;
    assert_eq!(screen["result"]["status"], "ok", "{screen}");
    assert_eq!(
        screen["result"]["result"]["package"],
        "com.android.launcher"
    );
    // Tap the Settings icon where the screen says it is.
    let settings = screen["result"]["result"]["interactive_elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["label"] == "Settings")
        .expect("a Settings icon on the home screen")
        .clone();
    let tap_settings = json!({
        "request_id": "t1",
        "tool": "openphone.ui.tap",
        "params": {"x": settings["center"]["x"], "y": settings["center"]["y"], "reason": "open Settings"},
        "idempotency_key": "tap-1",
    });
    let tap_id = rt.send("tools.invoke", tap_settings).await;
    let ids = loop {
        let ids = pending_ids(&data).await;
        if !ids.is_empty() {
            break ids;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let (code, out, err) = cli_async(
        vec!["confirm".into(), "approve".into(), ids[0].clone()],
        &data,
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    let tapped = rt.wait(tap_id).await;
    assert_eq!(tapped["result"]["status"], "ok", "{tapped}");
    assert_eq!(tapped["result"]["request_id"], "t1");
    // The approved tap changed the phone: Settings is now in the foreground.
    let after = rt
        .call("tools.invoke", json!({"request_id": "s2", "tool": "openphone.screen.get", "params": {}, "reason": "check"}))
        .await;
    assert_eq!(
        after["result"]["result"]["package"], "com.android.settings",
        "{after}"
    );

    // The CLI's own invocations: exit codes follow the status.
    let (code, _, _) = cli(&["tool", "invoke", "openphone.screen.get", "{}"], &data);
    assert_eq!(code, 0);
    let (code, out, _) = cli(
        &[
            "tool",
            "invoke",
            "openphone.ui.tap",
            r#"{"x":1,"y":1}"#,
            "--no-wait",
        ],
        &data,
    );
    assert_eq!(code, 3, "{out}");
    let (code, _, _) = cli(&["tool", "invoke", "openphone.no.such", "{}"], &data);
    assert_eq!(code, 1);
    let (code, out, _) = cli(&["tool", "list", "--json"], &data);
    assert_eq!(code, 0);
    assert!(out.contains("openphone.ui.tap"));
    let (code, _, _) = cli(&["sessions", "list"], &data);
    assert_eq!(code, 0);

    drop(rt);
    terminate(&mut serve.child);
    assert!(
        !data.join("endpoint.json").exists(),
        "endpoint.json left behind"
    );
    let (code, _, err) = cli(&["status"], &data);
    assert_eq!(code, 2);
    assert!(
        err.contains("no daemon for") && err.contains("openphone serve --data-dir"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_confirmation_survives_kill_9_and_the_retry_gets_the_final_result() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let config = write_config(tmp.path());
    let mut first = serve(&data, &config);
    let mut rt = Runtime::connect(&first.url).await;
    let parked = rt.call("tools.invoke", tap("k1", "tap-key", false)).await;
    assert_eq!(parked["result"]["status"], "needs_confirmation", "{parked}");
    let cid = parked["result"]["result"]["confirmation_id"]
        .as_str()
        .unwrap()
        .to_owned();

    first.child.kill().unwrap(); // SIGKILL
    first.child.wait().unwrap();
    drop(rt);

    let mut second = serve(&data, &config);
    assert_eq!(pending_ids(&data).await, vec![cid.clone()]);
    let (code, out, err) =
        cli_async(vec!["confirm".into(), "approve".into(), cid.clone()], &data).await;
    assert_eq!(code, 0, "{out}{err}");

    let mut rt = Runtime::connect(&second.url).await;
    let retried = rt
        .call("tools.invoke", tap("k1-retry", "tap-key", true))
        .await;
    assert_eq!(retried["result"]["status"], "ok", "{retried}");
    assert_eq!(retried["result"]["replayed"], true);
    assert_eq!(retried["result"]["request_id"], "k1-retry");
    drop(rt);
    terminate(&mut second.child);
}

#[test]
fn serve_refuses_an_unknown_config_key_and_a_public_address() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tmp.path().join("bad.toml");
    std::fs::write(&cfg, "[limits]\nmax_frames = 1\n").unwrap();
    let data = tmp.path().join("d");
    let (code, _, err) = run(
        &[
            "serve",
            "--config",
            cfg.to_str().unwrap(),
            "--data-dir",
            data.to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(code, 2);
    assert!(err.contains("max_frames"), "{err}");
    let (code, _, err) = run(
        &[
            "serve",
            "--listen",
            "0.0.0.0:0",
            "--data-dir",
            data.to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(code, 2);
    assert!(err.contains("insecure_listen"), "{err}");
}

#[test]
fn completions_are_generated() {
    let (code, out, _) = run(&["completions", "bash"], "");
    assert_eq!(code, 0);
    assert!(out.contains("openphone"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_streams_the_routed_runtimes_reply() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let config = write_config(tmp.path());
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("\n[routing]\nchat = \"hermes\"\n");
    std::fs::write(&config, text).unwrap();
    let serve = serve(&data, &config);

    // Nobody connected yet: a clear refusal.
    let (code, _, err) = cli(&["ask", "hello?"], &data);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("(runtime_not_connected)"), "{err}");

    let mut rt = Runtime::connect(&serve.url).await;
    let sub = rt
        .call(
            "events.subscribe",
            json!({"events": ["runtime.attention.requested"]}),
        )
        .await;
    assert!(sub.get("result").is_some(), "{sub}");
    let ask_dir = data.clone();
    let ask = tokio::spawn(async move {
        cli_async(
            vec!["ask".into(), "Where is my next meeting?".into()],
            &ask_dir,
        )
        .await
    });
    let attention = rt.event("runtime.attention.requested").await;
    assert_eq!(attention["text"], "Where is my next meeting?");
    let session = attention["phone_session_id"].clone();
    for (text, fin) in [
        ("Room 4B, ", false),
        ("at 14:00.", false),
        ("Room 4B, at 14:00.", true),
    ] {
        let r = rt
            .call(
                "runtime.message",
                json!({"phone_session_id": session, "text": text, "final": fin}),
            )
            .await;
        assert!(r.get("result").is_some(), "{r}");
    }
    let (code, out, err) = ask.await.unwrap();
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "Room 4B, at 14:00.\n");

    let (code, out, _) = cli(&["runtime", "list", "--json"], &data);
    assert_eq!(code, 0);
    let list: Value = serde_json::from_str(&out).unwrap();
    let hermes = list["runtimes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "hermes")
        .unwrap()
        .clone();
    assert_eq!(hermes["status"], "connected");
    let (code, out, _) = cli(&["runtime", "select", "volume", "hermes"], &data);
    assert_eq!((code, out.trim()), (0, "volume → hermes"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_invoke_reports_throughput_latency_and_daemon_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let config = tmp.path().join("bench.toml");
    std::fs::write(
        &config,
        "[limits]\nrate_per_sec = 10000.0\nrate_burst = 10000.0\n",
    )
    .unwrap();
    let _serve = serve(&data, config.to_str().unwrap());
    let (code, out, err) = cli(
        &[
            "bench",
            "invoke",
            "--connections",
            "3",
            "--calls",
            "7",
            "--json",
        ],
        &data,
    );
    assert_eq!(code, 0, "{err}");
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (r["calls"].clone(), r["ok"].clone(), r["other"].clone()),
        (json!(21), json!(21), json!(0))
    );
    assert!(r["calls_per_sec"].as_f64().unwrap() > 0.0);
    assert!(r["p99_ms"].as_f64().unwrap() >= r["p50_ms"].as_f64().unwrap());
    if cfg!(target_os = "linux") {
        assert!(r["daemon_peak_rss_kib"].as_u64().unwrap() > 1000, "{r}");
    }
    let (code, _, err) = cli(&["bench", "invoke", "--calls", "0"], &data);
    assert_eq!(code, 2);
    assert!(err.contains("at least 1"), "{err}");
}

/// CI failure of issue 16's crash test: a quick run of operator commands (each a new
/// connection: `hello` plus one request) emptied the operator's token bucket and a command
/// failed with `rate_limited` although the daemon said how long to wait. The CLI now waits
/// the named time and sends the refused request again.
#[test]
fn cli_commands_faster_than_the_rate_limit_wait_instead_of_failing() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let config = write_config(tmp.path());
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("\n[limits]\nrate_per_sec = 10.0\nrate_burst = 4.0\n");
    std::fs::write(&config, text).unwrap();
    let _daemon = serve(&data, &config);
    // 12 commands are 24 requests: far more than the burst of 4 allows at once.
    for n in 0..12 {
        let (code, out, err) = cli(&["jobs", "list", "--json"], &data);
        assert_eq!(code, 0, "command {n}: {out}{err}");
        let list: Value = serde_json::from_str(&out).unwrap();
        assert!(list["jobs"].is_array(), "{list}");
    }
}
