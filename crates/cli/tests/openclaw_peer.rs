//! The OpenClaw adapter against the real, pinned OpenClaw gateway (`openclaw-peer`), through
//! the real daemon (`openphone serve --config` with an `[openclaw]` table) and the real CLI.
//!
//! Opt-in: runs only when `OPENPHONE_OPENCLAW_PEER` names the `openclaw-peer` command
//! (`.ci/run` sets it and `OPENCLAW_PEER_HOME`); otherwise every test prints
//! "skipped: OPENPHONE_OPENCLAW_PEER not set" and returns. Each test has its own gateway port
//! and data directory; run with `--test-threads=1` (a gateway is heavy).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test crate: a panic is a failed test

use std::process::Command;
use std::time::Duration;

use openphone_clock::Stopwatch;
use serde_json::Value;

#[path = "openclaw_peer/support.rs"]
mod support;

use support::*;

#[test]
fn public_ws_gateway_url_is_refused_before_any_connection() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("c.toml"),
        config("ws://gateway.example.com:18789", TOKEN),
    )
    .unwrap();
    let out = openphone()
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(dir.path().join("c.toml"))
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("use wss://"), "{err}");
    assert!(!dir.path().join("data/openclaw-device.key").exists());
}

#[test]
fn reset_identity_needs_yes_then_replaces_the_device() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let run = |args: &[&str]| {
        let out = openphone()
            .args(["openclaw", "reset-identity"])
            .args(args)
            .arg("--data-dir")
            .arg(&data)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, _, err) = run(&[]);
    assert!(!ok);
    assert!(err.contains("--yes is required"), "{err}");
    assert!(
        !data.join("openclaw-device.key").exists(),
        "nothing changed"
    );

    let (ok, out, err) = run(&["--yes", "--json"]);
    assert!(ok, "{err}");
    let first: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(first["old_device_id"], Value::Null);
    let id = first["new_device_id"].as_str().unwrap().to_owned();
    assert_eq!(id.len(), 64, "{first}");

    let (ok, out, err) = run(&["--yes", "--json"]);
    assert!(ok, "{err}");
    let second: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(second["old_device_id"], id.as_str());
    assert_ne!(second["new_device_id"], id.as_str());
    assert_eq!(
        second["gateway_cleanup"],
        format!("openclaw devices remove {id}").as_str()
    );
}

#[test]
fn doctor_before_any_gateway_answer_shows_unknown_the_policy_verdicts_and_the_fixes() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.toml");
    std::fs::write(&cfg, config("ws://127.0.0.1:1", TOKEN)).unwrap();
    let out = openphone()
        .args(["openclaw", "doctor", "--json", "--config"])
        .arg(&cfg)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "a gap exits 1");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["status"], Value::Null, "no daemon runs");
    let rows = report["commands"].as_array().unwrap();
    let row = |command: &str| {
        rows.iter()
            .find(|r| r["command"] == command)
            .unwrap_or_else(|| panic!("{command} in {report}"))
            .clone()
    };
    let set = row("openphone.clipboard.set");
    assert_eq!(set["declared"], true);
    assert_eq!(set["effective"], Value::Null);
    assert_eq!(set["needs_allowlist"], true);
    assert_eq!(set["policy"], "confirm", "{set}");
    assert_eq!(row("openphone.request.status")["policy"], "allow");
    let fixes: Vec<&str> = report["fixes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert!(
        fixes[0].starts_with("openclaw config set gateway.nodes.commands.allow '["),
        "{fixes:?}"
    );
    assert!(
        fixes.contains(&"openclaw nodes approve <requestId>"),
        "{fixes:?}"
    );
}

/// Scenarios 1, 3, 4, 5, 6, 7, 8, 9 (first half) of spec §19, `doctor` (R4.1), the
/// confirmation, deny, observe_only, idempotency and unknown-command checks, and the deferred
/// outcome across a daemon restart (R3.3), on one gateway.
#[test]
fn peer_pairs_publishes_tools_and_serves_the_agent_through_the_bridge() {
    let Some(bin) = peer_bin() else { return };
    let allow = allow_list();
    let peer = Peer::start(bin, 28_831, &allow, true);
    peer.script(SCRIPT);
    let work = tempfile::tempdir().unwrap();
    let mut count = (0, 0);

    // 1 + 3: hello-ok with the shared token, token stored; connected_unapproved until the
    // command surface is approved, then ready.
    let connect = Stopwatch::start();
    let daemon = Daemon::start(work.path(), &config(&peer.url(), TOKEN));
    let first = daemon.wait_status(Duration::from_secs(30), |s| s == "connected_unapproved");
    let to_hello = connect.elapsed();
    scenario(
        "3a connected_unapproved before node approval",
        first == "connected_unapproved",
        &mut count,
    );
    assert!(daemon.dir.join("openclaw-tokens.json").exists());
    let approved = peer.approve("nodes");
    let commands = approved["nodes"][0]["commands"]
        .as_array()
        .map_or(0, Vec::len);
    let approve_clock = Stopwatch::start();
    let ready = daemon.wait_status(Duration::from_secs(30), |s| s == "ready");
    println!(
        "measured: connect → connected_unapproved {} ms; node approval → ready {} ms; {} commands approved",
        to_hello.as_millis(),
        approve_clock.elapsed().as_millis(),
        commands
    );
    scenario("3b approve nodes → ready", ready == "ready", &mut count);
    // R4.1: doctor agrees with the gateway: as many commands effective as it approved, and
    // for the rest (2026.9.6 leaves `openphone.jobs.*` out of the approved surface even when
    // allowlisted) the exact fix commands, exit 1.
    let cfg = work.path().join("config.toml");
    let (doctor_ok, doctor) = daemon.cli(&[
        "openclaw",
        "doctor",
        "--json",
        "--config",
        cfg.to_str().unwrap(),
    ]);
    let report: Value = serde_json::from_str(&doctor).unwrap_or(Value::Null);
    let rows = report["commands"].as_array().cloned().unwrap_or_default();
    let effective = rows.iter().filter(|r| r["effective"] == true).count();
    let missing: Vec<String> = rows
        .iter()
        .filter(|r| r["effective"] == false)
        .map(|r| r["command"].as_str().unwrap_or_default().to_owned())
        .collect();
    let fixes = report["fixes"].as_array().cloned().unwrap_or_default();
    println!("doctor: {effective} effective, missing {missing:?}");
    scenario_with(
        "R4.1 doctor matches the gateway's approved surface, with fixes for the gaps",
        report["status"] == "ready"
            && effective == commands
            && effective + missing.len() == rows.len()
            && doctor_ok == missing.is_empty()
            && fixes.is_empty() == missing.is_empty(),
        &mut count,
        &format!(
            "status={} effective={effective} approved={commands} missing={missing:?} fixes={}",
            report["status"],
            fixes.len()
        ),
    );
    // 4: the custom commands were allowlisted, so the approved surface carries them.
    scenario(
        "4 allowlisted custom commands reach the surface",
        commands > 30,
        &mut count,
    );

    // 5 + confirmation: the agent calls a phone tool that needs confirmation; approved with
    // `openphone confirmations approve`; the result reaches the OpenClaw session.
    let turn = {
        let peer_cmd = peer.cmd(&[
            "cli",
            "agent",
            "--agent",
            "main",
            "--json",
            "--message",
            "SET_CLIP please",
        ]);
        spawn_capture(peer_cmd)
    };
    let id = daemon.pending_confirmation(Duration::from_secs(90));
    if let Some(id) = &id {
        let (ok, text) = daemon.cli(&["confirmations", "approve", id]);
        assert!(ok, "{text}");
    }
    let reply = reply_text(&finish_capture(turn));
    scenario_with(
        "5 agent tool call → confirmation approved → result in the session",
        id.is_some()
            && reply.contains("Phone tool phone_set_clipboard said")
            && reply.contains("\"set\": true"),
        &mut count,
        &reply,
    );

    // A deny reaches the agent as a denial.
    daemon.clear_pending();
    let turn = spawn_capture(peer.cmd(&[
        "cli",
        "agent",
        "--agent",
        "main",
        "--json",
        "--message",
        "SET_CLIP again",
    ]));
    let id = daemon.pending_confirmation(Duration::from_secs(90));
    if let Some(id) = &id {
        let (ok, text) = daemon.cli(&["confirmations", "deny", id]);
        assert!(ok, "{text}");
    }
    let reply = finish_capture(turn);
    scenario(
        "deny reaches the agent as USER_DENIED",
        reply.contains("USER_DENIED"),
        &mut count,
    );

    // 8: a phone-originated request; the reply comes back as runtime messages.
    let (ok, text) = daemon.cli(&[
        "ask",
        "--runtime",
        "openclaw",
        "--timeout-secs",
        "60",
        "hello from the phone",
    ]);
    scenario(
        "8 openphone ask --runtime openclaw",
        ok && text.contains("Mock reply"),
        &mut count,
    );

    // observe_only: a phone session in observe_only; the agent in that session asks for a
    // mutating tool → denied by phone policy, no confirmation.
    let (_, text) = daemon.cli(&[
        "ask",
        "--runtime",
        "openclaw",
        "--autonomy",
        "observe_only",
        "--timeout-secs",
        "60",
        "observe please",
    ]);
    let session = text
        .split("session ")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .unwrap_or_default()
        .to_owned();
    let key = format!("agent:main:openphone-{session}");
    let reply = peer.agent(&["--session-key", &key, "--message", "SET_CLIP in observe"]);
    scenario_with(
        "observe_only session denies a mutating invoke",
        !session.is_empty() && reply.contains("PHONE_POLICY_DENIED"),
        &mut count,
        &format!("session={session} reply={reply}"),
    );

    // Idempotency: the same invoke replayed with its key does not run twice.
    daemon.clear_pending();
    let node = device_id(&daemon);
    let params = r#"{"text":"idem","reason":"peer test"}"#;
    let invoke = |key: &str| {
        peer.cmd(&[
            "cli",
            "nodes",
            "invoke",
            "--node",
            &node,
            "--command",
            "openphone.clipboard.set",
            "--params",
            params,
            "--idempotency-key",
            key,
            "--invoke-timeout",
            "25000",
            "--json",
        ])
    };
    let first = spawn_capture(invoke("idem-key-1"));
    if let Some(id) = daemon.pending_confirmation(Duration::from_secs(60)) {
        daemon.cli(&["confirmations", "approve", &id]);
    }
    let first = finish_capture(first);
    let second = finish_capture(spawn_capture(invoke("idem-key-1")));
    let (_, pending) = daemon.cli(&["confirmations", "list", "--json"]);
    scenario_with(
        "idempotency key replays the recorded result",
        first.contains("\"set\"")
            && second.contains("replayed")
            && !pending.contains("runtime-confirm"),
        &mut count,
        &format!("first={first}\nsecond={second}\npending={pending}"),
    );

    // Unknown command: the gateway refuses what this phone did not declare (never reaches it).
    let (_, text) = peer.output(&[
        "cli",
        "nodes",
        "invoke",
        "--node",
        &node,
        "--command",
        "openphone.nope",
        "--json",
    ]);
    scenario(
        "undeclared command refused",
        text.contains("not allowed") || text.contains("false"),
        &mut count,
    );

    // 7: a slow handler (a confirmation nobody answers) under a 2 s gateway deadline: the
    // caller gets our own structured answer (the pending receipt), not the gateway's TIMEOUT.
    daemon.clear_pending();
    let (_, text) = peer.output(&[
        "cli",
        "nodes",
        "invoke",
        "--node",
        &node,
        "--command",
        "openphone.clipboard.set",
        "--params",
        r#"{"text":"slow","reason":"peer test"}"#,
        "--idempotency-key",
        "slow-key-1",
        "--invoke-timeout",
        "2000",
        "--json",
    ]);
    scenario_with(
        "7 our structured answer before the gateway's 2 s deadline",
        text.contains("pending_confirmation") && !text.contains("TIMEOUT"),
        &mut count,
        &text,
    );

    // 7b: a forced late result. The daemon is stopped (SIGSTOP) while the gateway sends an
    // invoke with a 2 s deadline; the gateway gives up; on SIGCONT the daemon answers, the
    // gateway says `ignored: true`, and the daemon records the late result.
    let daemon_pid = daemon.child.id().to_string();
    let kill = |sig: &str| {
        Command::new("kill")
            .args([sig, &daemon_pid])
            .status()
            .is_ok_and(|s| s.success())
    };
    let paused = kill("-STOP");
    let (_, late) = peer.output(&[
        "cli",
        "nodes",
        "invoke",
        "--node",
        &node,
        "--command",
        "openphone.clipboard.set",
        "--params",
        r#"{"text":"late","reason":"peer test"}"#,
        "--idempotency-key",
        "late-key-1",
        "--invoke-timeout",
        "2000",
        "--json",
    ]);
    let continued = kill("-CONT");
    let clock = Stopwatch::start();
    let mut recorded = false;
    while clock.elapsed() < Duration::from_secs(15) && !recorded {
        recorded = daemon.log().contains("late invoke result");
        std::thread::sleep(Duration::from_millis(200));
    }
    let (_, audit) = daemon.cli(&["audit", "export"]);
    scenario_with(
        "7 a forced late result is ignored by the gateway and recorded",
        paused && continued && recorded && audit.contains("openclaw.invoke_result_late"),
        &mut count,
        &format!("caller saw: {late}"),
    );
    daemon.clear_pending();

    // 6: deferral. The confirmation outlives the gateway's ~30 s: pending receipt; approval
    // later posts the outcome into the session; a duplicate call attaches.
    daemon.clear_pending();
    let outcomes_before = peer
        .mock_requests()
        .matches("tool output, data only")
        .count();
    let reply = peer.agent(&["--message", "SET_CLIP deferred"]);
    let receipt = reply.contains("pending_confirmation");
    let dup = peer.agent(&["--message", "SET_CLIP deferred again"]);
    let (_, list) = daemon.cli(&["confirmations", "list", "--json"]);
    // `confirmations list --json` holds each confirmation twice (its `confirmations` member
    // and the inbox's `items`): count the confirmations.
    let pending_count = serde_json::from_str::<serde_json::Value>(&list)
        .ok()
        .and_then(|v| v["confirmations"].as_array().map(Vec::len))
        .unwrap_or(0);

    // 1b + R3.3: the daemon restarts while the request is deferred. The reconnect
    // authenticates with the stored device token, and approving after the restart still
    // posts the outcome (the outbox is durable).
    daemon.stop();
    let daemon = Daemon::start(work.path(), &config(&peer.url(), TOKEN));
    let ready = daemon.wait_status(Duration::from_secs(30), |s| s == "ready");
    scenario(
        "1 reconnect with the device token",
        ready == "ready" && daemon.log().contains("auth=device-token"),
        &mut count,
    );
    if let Some(id) = daemon.pending_confirmation(Duration::from_secs(5)) {
        daemon.cli(&["confirmations", "approve", &id]);
    }
    let clock = Stopwatch::start();
    let mut posted = false;
    while clock.elapsed() < Duration::from_secs(60) && !posted {
        posted = peer
            .mock_requests()
            .matches("tool output, data only")
            .count()
            > outcomes_before;
        std::thread::sleep(Duration::from_millis(500));
    }
    scenario_with(
        "6 deferral: receipt, duplicate attaches, outcome posted after a daemon restart",
        receipt && dup.contains("pending_confirmation") && pending_count == 1 && posted,
        &mut count,
        &format!("reply={reply}\ndup={dup}\npending={pending_count} posted={posted}"),
    );

    // 9: the gateway stops → offline with backoff → starts again → reconnect and republish.
    let _ = peer.cmd(&["stop"]).status();
    let offline = daemon.wait_status(Duration::from_secs(20), |s| s.starts_with("offline"));
    let _ = peer
        .cmd(&["start"])
        .env("OPENCLAW_PEER_ALLOW_COMMANDS", &allow)
        .env("OPENCLAW_PEER_START_TIMEOUT", "240")
        .status();
    let back = daemon.wait_status(Duration::from_secs(90), |s| s == "ready");
    scenario(
        "9 gateway restart → offline → reconnect → ready",
        offline.starts_with("offline") && back == "ready",
        &mut count,
    );

    // 9b: a zombie gateway. SIGSTOP keeps its socket open but sends nothing: the watchdog
    // (2 × the gateway's tickIntervalMs, 60 s with 2026.9.6) closes the connection and the
    // daemon goes offline naming it; SIGCONT → reconnect → ready.
    let pid = std::fs::read_to_string(peer.run_dir().join("gateway.pid"))
        .unwrap_or_default()
        .trim()
        .to_owned();
    let signal = |sig: &str| {
        !pid.is_empty()
            && Command::new("kill")
                .args([sig, &pid])
                .status()
                .is_ok_and(|s| s.success())
    };
    let stopped_at = Stopwatch::start();
    let stopped = signal("-STOP");
    let zombie = daemon.wait_status(Duration::from_secs(100), |s| s.starts_with("offline"));
    let noticed = stopped_at.elapsed();
    let resumed = signal("-CONT");
    let back = daemon.wait_status(Duration::from_secs(120), |s| s == "ready");
    println!("zombie gateway noticed after {} ms", noticed.as_millis());
    scenario_with(
        "9 kill -STOP: the watchdog goes offline, SIGCONT → ready",
        stopped
            && resumed
            && zombie.starts_with("offline")
            && daemon.log().contains("watchdog: no frame from the gateway")
            && back == "ready",
        &mut count,
        &format!("pid={pid} status={zombie} after={noticed:?} back={back}"),
    );
    println!("peer scenarios passed: {}/{}", count.0, count.1);
    assert_eq!(
        count.0,
        count.1,
        "see the FAIL lines above; daemon log:\n{}",
        daemon.log()
    );
}

/// Scenario 2 (manual device pairing) and a wrong token, on a gateway that does not
/// auto-approve loopback devices.
#[test]
fn peer_manual_pairing_and_wrong_token() {
    let Some(bin) = peer_bin() else { return };
    let allow = allow_list();
    let peer = Peer::start(bin, 28_841, &allow, false);
    let mut count = (0, 0);

    // A wrong token: auth_failed with the gateway's reason, one attempt only (no storm).
    let work = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(
        work.path(),
        &config(&peer.url(), "wrong-token-0123456789abcdef-0123456789"),
    );
    let status = daemon.wait_status(Duration::from_secs(30), |s| s.starts_with("auth_failed"));
    std::thread::sleep(Duration::from_secs(3));
    let attempts = daemon.log().matches("OpenClaw: connecting").count();
    println!("wrong token: {status} after {attempts} attempt(s)");
    scenario(
        "wrong token → auth_failed, no retry storm",
        status.starts_with("auth_failed") && status.contains("token_mismatch") && attempts == 1,
        &mut count,
    );
    drop(daemon);

    // 2: pairing_pending with the request id → approve devices → connected.
    let work = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(work.path(), &config(&peer.url(), TOKEN));
    let pending = daemon.wait_status(Duration::from_secs(30), |s| {
        s.starts_with("pairing_pending")
    });
    let (_, text) = daemon.cli(&["openclaw", "status"]);
    let request_id = pending
        .strip_prefix("pairing_pending ")
        .unwrap_or_default()
        .to_owned();
    let shows_command = text.contains(&format!("openclaw devices approve {request_id}"));
    let approved = peer.approve("devices");
    let listed = approved.to_string().contains(&request_id);
    let connected = daemon.wait_status(Duration::from_secs(40), |s| {
        s == "connected_unapproved" || s == "ready"
    });
    scenario(
        "2 manual device pairing",
        !request_id.is_empty()
            && shows_command
            && listed
            && (connected == "connected_unapproved" || connected == "ready"),
        &mut count,
    );
    drop(daemon);

    // A setup code (`openclaw qr --json`) instead of the shared token: the bootstrap token
    // pairs (approved here if the gateway asks), the device token is used after a restart,
    // and the bootstrap token is in no log.
    let (_, qr) = peer.output(&["cli", "qr", "--json", "--url", &peer.url()]);
    let code = serde_json::from_str::<Value>(qr.trim())
        .ok()
        .and_then(|v| v["setupCode"].as_str().map(str::to_owned))
        .unwrap_or_default();
    let work = tempfile::tempdir().unwrap();
    let setup_config = format!(
        "[openclaw]\nurl = \"{}\"\nsetup_code_env = \"OPENPHONE_TEST_SETUP_CODE\"\n\
         pairing_retry_ms = 2000\n",
        peer.url()
    );
    let env = [("OPENPHONE_TEST_SETUP_CODE", code.as_str())];
    let daemon = Daemon::start_with_env(work.path(), &setup_config, &env);
    let first = daemon.wait_status(Duration::from_secs(30), |s| {
        s.starts_with("pairing_pending") || s == "connected_unapproved" || s == "ready"
    });
    if first.starts_with("pairing_pending") {
        peer.approve("devices");
    }
    let paired = daemon.wait_status(Duration::from_secs(40), |s| {
        s == "connected_unapproved" || s == "ready"
    });
    let bootstrap_used = daemon.log().contains("auth=bootstrap-token");
    let first_log = daemon.log();
    daemon.stop();
    let daemon = Daemon::start_with_env(work.path(), &setup_config, &env);
    let again = daemon.wait_status(Duration::from_secs(30), |s| {
        s == "connected_unapproved" || s == "ready"
    });
    let token = {
        use base64::Engine as _;
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(code.trim_end_matches('='))
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .and_then(|v| v["bootstrapToken"].as_str().map(str::to_owned))
            .unwrap_or_default()
    };
    let leaked = token.is_empty()
        || first_log.contains(&token)
        || daemon.log().contains(&token)
        || first_log.contains(&code)
        || daemon.log().contains(&code);
    scenario_with(
        "setup code pairs; the device token is used after a restart; no token in the logs",
        !code.is_empty()
            && bootstrap_used
            && (paired == "connected_unapproved" || paired == "ready")
            && (again == "connected_unapproved" || again == "ready")
            && daemon.log().contains("auth=device-token")
            && !leaked,
        &mut count,
        &format!("first={first} paired={paired} again={again} leaked={leaked}"),
    );
    println!("peer scenarios passed: {}/{}", count.0, count.1);
    assert_eq!(count.0, count.1, "daemon log:\n{}", daemon.log());
}
