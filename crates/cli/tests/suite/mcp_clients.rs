//! The MCP server driven by a real third-party client: the Python `mcp` SDK (pinned 2.3.0,
//! installed into `.cache/mcp-py` by `tests/clients/py/install.sh`, which `.ci/run` runs and
//! these tests run too when the venv is missing). The daemon is the real `openphone serve`;
//! stdio goes through the real `openphone mcp serve` front end; approvals come from separate
//! `openphone confirm` processes; the phone's state is read back through the operator CLI.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openphone_protocol::Registry;
use serde_json::{Value, json};

use super::mcp_harness::{
    Via, daemon, error_of, expected_tools, finish, python, repo_root, save_args, tool_result_meta,
};

#[test]
fn python_client_lists_every_runnable_mcp_tool_over_stdio_and_http_in_every_mode() {
    let d = daemon("");
    let expected = expected_tools();
    let mcp_true = Registry::embedded()
        .unwrap()
        .commands()
        .filter(|c| c.mcp)
        .count();
    // Every MCP command runs on this daemon, the background-job tools included, beside the
    // connection's own openphone_confirmation_status.
    assert_eq!(expected.len(), mcp_true + 1, "{expected:?}");
    assert!(expected.contains(&"openphone_jobs_create".to_owned()));
    for via in [Via::Stdio, Via::Http] {
        for mode in ["legacy", "auto", "modern"] {
            let answer = d.drive(via, mode, &["--list"]);
            let mut names: Vec<String> = answer["tools"]
                .as_array()
                .unwrap_or_else(|| panic!("{via:?} {mode}: {answer}"))
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_owned())
                .collect();
            let listed_order = names.clone();
            names.sort();
            assert_eq!(names, expected, "{via:?} {mode}");
            assert_eq!(listed_order, expected, "{via:?} {mode}: not sorted");
            let tap = answer["tools"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["name"] == "openphone_ui_tap")
                .unwrap();
            assert_eq!(tap["annotations"]["readOnlyHint"], false, "{tap}");
            assert_eq!(tap["annotations"]["destructiveHint"], true, "{tap}");
            assert_eq!(tap["meta"]["dev.openphone/command"], "openphone.ui.tap");
            if mode != "modern" {
                assert_eq!(answer["server_name"], "openphone", "{answer}");
            }
        }
    }
}

#[test]
fn python_client_reads_the_screen_in_both_eras() {
    let d = daemon("");
    let args = json!({"reason": "look at the screen", "include_ui_tree": true}).to_string();
    for via in [Via::Stdio, Via::Http] {
        for mode in ["legacy", "modern"] {
            let answer = d.drive(
                via,
                mode,
                &["--call", "openphone_screen_get", "--args", &args],
            );
            assert_eq!(answer["is_error"], false, "{via:?} {mode}: {answer}");
            let structured = &answer["structured"];
            assert!(structured.is_object(), "{answer}");
            // A screen is too large to send twice: the text is a compact summary of it.
            let text = answer["texts"][0].as_str().unwrap();
            assert!(
                text.ends_with("The full result is the structured content."),
                "{text}"
            );
            assert!(text.len() * 4 < structured.to_string().len(), "{text}");
            assert_eq!(tool_result_meta(&answer)["status"], "ok");
        }
    }
}

#[test]
fn python_client_waits_while_the_user_approves_with_the_cli_and_the_action_runs_once() {
    let d = daemon("");
    for (via, mode) in [(Via::Stdio, "legacy"), (Via::Http, "modern")] {
        let text = format!("approved note {via:?} {mode}");
        let child = d.spawn(
            via,
            mode,
            &[
                "--call",
                "openphone_memory_save",
                "--args",
                &save_args(&text),
                "--progress",
            ],
        );
        let ids = d.wait_pending(1);
        assert_eq!(d.pending()[0].1, "mcp");
        assert_eq!(d.memories(&text), 0, "nothing runs before the approval");
        assert_eq!(d.resolve("approve", &ids[0]), 0);
        let answer = finish(child);
        assert_eq!(answer["is_error"], false, "{via:?} {mode}: {answer}");
        assert_eq!(d.memories(&text), 1, "{via:?} {mode}: saved exactly once");
        let progress = answer["progress"].as_array().unwrap();
        assert!(
            progress.iter().any(|p| p["message"]
                .as_str()
                .is_some_and(|m| m.contains("confirmation"))),
            "{via:?} {mode}: progress tells the client it waits: {answer}"
        );
        assert!(d.pending().is_empty());
    }
}

#[test]
fn python_client_gets_the_denial_and_nothing_changes() {
    let d = daemon("");
    for (via, mode) in [(Via::Http, "legacy"), (Via::Stdio, "modern")] {
        let text = format!("denied note {via:?} {mode}");
        let child = d.spawn(
            via,
            mode,
            &[
                "--call",
                "openphone_memory_save",
                "--args",
                &save_args(&text),
            ],
        );
        let ids = d.wait_pending(1);
        assert_eq!(d.resolve("deny", &ids[0]), 0);
        let answer = finish(child);
        let error = error_of(&answer);
        assert_eq!(error["code"], "user_denied_confirmation", "{answer}");
        assert_eq!(error["retryable"], false);
        assert_eq!(tool_result_meta(&answer)["status"], "denied");
        assert_eq!(d.memories(&text), 0);
    }
}

#[test]
fn an_undecided_call_returns_pending_and_the_keyed_retry_returns_the_stored_result() {
    let d = daemon("[mcp]\nlocal_confirmation_wait_ms = 3000\n");
    let text = "note decided after the wait";
    let args = save_args(text);
    let first = d.drive(
        Via::Stdio,
        "legacy",
        &[
            "--call",
            "openphone_memory_save",
            "--args",
            &args,
            "--key",
            "retry-1",
        ],
    );
    let error = error_of(&first);
    assert_eq!(
        error["code"], "mutating_tool_requires_confirmation",
        "{first}"
    );
    let meta = tool_result_meta(&first);
    assert_eq!(meta["status"], "needs_confirmation");
    let id = meta["confirmation_id"].as_str().unwrap().to_owned();
    assert!(error["message"].as_str().unwrap().contains(&id), "{error}");
    assert_eq!(d.wait_pending(1), vec![id.clone()]);

    // The same call again (a new front-end process, over the other transport too) while
    // still pending: the same confirmation, no second prompt.
    let again = d.drive(
        Via::Http,
        "modern",
        &[
            "--call",
            "openphone_memory_save",
            "--args",
            &args,
            "--key",
            "retry-1",
        ],
    );
    assert_eq!(
        tool_result_meta(&again)["confirmation_id"],
        json!(id),
        "{again}"
    );
    assert_eq!(d.pending().len(), 1);

    // A keyed retry that the client cancels does not take the confirmation from the user.
    let cancelled = d.drive(
        Via::Stdio,
        "legacy",
        &[
            "--call",
            "openphone_memory_save",
            "--args",
            &args,
            "--key",
            "retry-1",
            "--timeout-s",
            "1",
        ],
    );
    assert!(cancelled.get("exception").is_some(), "{cancelled}");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(d.wait_pending(1), vec![id.clone()]);

    assert_eq!(d.resolve("approve", &id), 0);
    assert_eq!(d.memories(text), 1);
    for via in [Via::Stdio, Via::Http] {
        let retry = d.drive(
            via,
            "legacy",
            &[
                "--call",
                "openphone_memory_save",
                "--args",
                &args,
                "--key",
                "retry-1",
            ],
        );
        assert_eq!(retry["is_error"], false, "{via:?}: {retry}");
        assert_eq!(
            retry["structured"]["memory"]["text"],
            json!(text),
            "{retry}"
        );
    }
    assert_eq!(d.memories(text), 1, "the retries replayed, never ran again");
}

#[test]
fn killing_the_stdio_front_end_keeps_the_confirmation_for_the_respawned_one() {
    let d = daemon("");
    let text = "note across a respawn";
    let args = save_args(text);
    let mut child = d.spawn(
        Via::Stdio,
        "legacy",
        &[
            "--call",
            "openphone_memory_save",
            "--args",
            &args,
            "--key",
            "respawn-1",
        ],
    );
    let ids = d.wait_pending(1);
    child.kill().unwrap();
    let _ = child.wait();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(d.pending().len(), 1, "a closed connection is no cancel");
    assert_eq!(d.resolve("approve", &ids[0]), 0);
    let retry = d.drive(
        Via::Stdio,
        "legacy",
        &[
            "--call",
            "openphone_memory_save",
            "--args",
            &args,
            "--key",
            "respawn-1",
        ],
    );
    assert_eq!(retry["is_error"], false, "{retry}");
    assert_eq!(d.memories(text), 1);
}

#[test]
fn a_cancelled_call_that_has_not_run_never_runs() {
    let d = daemon("");
    let text = "note that was cancelled";
    // The client gives up after 2 s and sends notifications/cancelled.
    let child = d.spawn(
        Via::Stdio,
        "legacy",
        &[
            "--call",
            "openphone_memory_save",
            "--args",
            &save_args(text),
            "--timeout-s",
            "2",
        ],
    );
    let ids = d.wait_pending(1);
    let answer = finish(child);
    assert!(
        answer.get("exception").is_some(),
        "the client timed out: {answer}"
    );
    d.wait_pending(0);
    assert_ne!(
        d.resolve("approve", &ids[0]),
        0,
        "a withdrawn request cannot be approved"
    );
    assert_eq!(d.memories(text), 0);
}

#[test]
fn invalid_arguments_are_a_tool_error_naming_the_field_and_unknown_tools_a_protocol_error() {
    let d = daemon("");
    for via in [Via::Stdio, Via::Http] {
        let args = json!({"x": "ten", "y": 20, "reason": "tap"}).to_string();
        let answer = d.drive(
            via,
            "legacy",
            &["--call", "openphone_ui_tap", "--args", &args],
        );
        let error = error_of(&answer);
        assert_eq!(error["code"], "invalid_params", "{answer}");
        assert!(error.to_string().contains("/x"), "names the field: {error}");
        assert!(d.pending().is_empty(), "nothing was asked");

        let answer = d.drive(
            via,
            "legacy",
            &["--call", "openphone_no_such_tool", "--args", "{}"],
        );
        assert_eq!(answer["code"], -32602, "{answer}");
        assert_eq!(answer["data"]["code"], "unknown_tool", "{answer}");
    }
}

#[test]
fn http_refuses_a_foreign_origin_with_403_and_a_missing_token_with_401() {
    let d = daemon("");
    let answer = d.drive(
        Via::Http,
        "legacy",
        &["--list", "--header", "Origin: http://evil.example.com"],
    );
    assert!(answer.get("exception").is_some(), "{answer}");
    assert_eq!(answer["http_errors"][0]["status"], 403, "{answer}");

    let answer = d.drive(Via::Http, "legacy", &["--list", "--no-token"]);
    assert!(answer.get("exception").is_some(), "{answer}");
    assert_eq!(answer["http_errors"][0]["status"], 401, "{answer}");
    assert_eq!(
        answer["http_errors"][0]["www_authenticate"], "Bearer",
        "{answer}"
    );

    // A loopback origin passes.
    let answer = d.drive(
        Via::Http,
        "legacy",
        &["--list", "--header", "Origin: http://localhost:3000"],
    );
    assert!(answer["tools"].is_array(), "{answer}");
}

const DESK_TOKEN: &str = "desk-host-token-0123456789abcdef";

fn confirming_host_config(wait_ms: u64) -> String {
    format!(
        "[mcp]\nlocal_confirmation_wait_ms = {wait_ms}\n\n[[runtimes]]\nid = \"desk\"\n\
         token = \"{DESK_TOKEN}\"\ngrants = [\"safe_read\", \"private_read\", \"dangerous\"]\n\
         trust_client_confirmation = true\n"
    )
}

#[test]
fn a_confirming_host_decides_below_the_risk_floor_in_both_eras() {
    let d = daemon(&confirming_host_config(1500));
    let run_desk = |via: Via, mode: &str, answer: &str, text: &str| {
        let mut cmd = d.driver(
            via,
            mode,
            &[
                "--answer",
                answer,
                "--call",
                "openphone_memory_save",
                "--args",
                &save_args(text),
            ],
        );
        match via {
            Via::Stdio => {
                cmd.env("OPENPHONE_MCP_TOKEN", DESK_TOKEN);
                cmd.args(["--env", &format!("OPENPHONE_MCP_TOKEN={DESK_TOKEN}")]);
            }
            Via::Http => {
                cmd.args(["--token", DESK_TOKEN]);
            }
        }
        finish(cmd.spawn().unwrap())
    };
    // Handshake era: elicitation/create mid-call; 2026-07-28: input_required + requestState.
    for (via, mode) in [(Via::Stdio, "legacy"), (Via::Http, "modern")] {
        let text = format!("host approved {via:?} {mode}");
        let answer = run_desk(via, mode, "accept", &text);
        assert_eq!(answer["is_error"], false, "{via:?} {mode}: {answer}");
        let asked = answer["elicitations"].as_array().unwrap();
        assert_eq!(asked.len(), 1, "{answer}");
        assert!(
            asked[0]["message"].as_str().unwrap().contains("OpenPhone"),
            "{answer}"
        );
        assert_eq!(d.memories(&text), 1);

        let text = format!("host declined {via:?} {mode}");
        let answer = run_desk(via, mode, "decline", &text);
        assert_eq!(
            error_of(&answer)["code"],
            "user_denied_confirmation",
            "{answer}"
        );
        let text = format!("host dismissed {via:?} {mode}");
        let answer = run_desk(via, mode, "cancel", &text);
        assert_eq!(
            error_of(&answer)["code"],
            "confirmation_cancelled",
            "{answer}"
        );
        assert_eq!(d.memories(&text), 0);
        assert!(d.pending().is_empty());
    }
}

#[test]
fn a_confirming_host_never_approves_the_risk_floor() {
    let d = daemon(&confirming_host_config(1500));
    let args = json!({"event_id": 1, "reason": "clean up"}).to_string();
    let mut cmd = d.driver(
        Via::Stdio,
        "legacy",
        &[
            "--answer",
            "accept",
            "--call",
            "openphone_calendar_delete",
            "--args",
            &args,
        ],
    );
    cmd.args(["--env", &format!("OPENPHONE_MCP_TOKEN={DESK_TOKEN}")]);
    let answer = finish(cmd.spawn().unwrap());
    let form_prompts = answer["elicitations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["mode"] != "url")
        .count();
    assert_eq!(
        form_prompts, 0,
        "no host prompt for the risk floor: {answer}"
    );
    assert_eq!(
        tool_result_meta(&answer)["status"],
        "needs_confirmation",
        "{answer}"
    );
    let pending = d.pending();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].1, "desk");
    assert_eq!(pending[0].2, "openphone.calendar.delete");
}

fn http_get(url: &str) -> (u16, String) {
    let rest = url.strip_prefix("http://").unwrap();
    let (authority, path) = rest.split_once('/').unwrap();
    let mut stream = std::net::TcpStream::connect(authority).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET /{path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response[9..12].parse().unwrap();
    (status, response)
}

#[test]
fn a_url_capable_client_is_pointed_at_the_approval_page() {
    let d = daemon("");
    let text = "note approved after opening the page";
    let seen: Arc<Mutex<Option<String>>> = Arc::default();
    let child = d.spawn(
        Via::Stdio,
        "legacy",
        &[
            "--answer",
            "accept",
            "--call",
            "openphone_memory_save",
            "--args",
            &save_args(text),
        ],
    );
    let ids = d.wait_pending(1);
    let page = format!(
        "{}confirmations/{}",
        d.mcp_url.strip_suffix("mcp").unwrap(),
        ids[0]
    );
    let (status, body) = http_get(&page);
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains(&ids[0]) && body.contains("openphone.memory.save"),
        "{body}"
    );
    *seen.lock().unwrap() = Some(page.clone());
    assert_eq!(d.resolve("approve", &ids[0]), 0);
    let answer = finish(child);
    assert_eq!(answer["is_error"], false, "{answer}");
    let urls: Vec<&Value> = answer["elicitations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["mode"] == "url")
        .collect();
    assert_eq!(urls.len(), 1, "{answer}");
    assert_eq!(urls[0]["url"], json!(page), "{answer}");
    assert_eq!(d.memories(text), 1);
}

#[test]
fn mcp_serve_without_a_daemon_lists_tools_and_explains_every_call() {
    let tmp = tempfile::tempdir().unwrap();
    let server = format!(
        "{} mcp serve --data-dir {}",
        env!("CARGO_BIN_EXE_openphone"),
        tmp.path().display()
    );
    let drive = |extra: &[&str]| {
        let mut cmd = Command::new(python());
        cmd.arg(repo_root().join("tests/clients/py/mcp_drive.py"))
            .args([
                "--transport",
                "stdio",
                "--server",
                &server,
                "--mode",
                "legacy",
            ])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        finish(cmd.spawn().unwrap())
    };
    let listed = drive(&["--list"]);
    assert!(listed["tools"].as_array().unwrap().len() >= 30, "{listed}");
    let args = json!({"reason": "look"}).to_string();
    let answer = drive(&["--call", "openphone_screen_get", "--args", &args]);
    let error = error_of(&answer);
    assert_eq!(error["code"], "daemon_unavailable", "{answer}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("openphone serve"),
        "{error}"
    );
}

/// `openphone mcp token` prints the token the daemon accepts; `mcp config` prints JSON hosts
/// can paste.
#[test]
fn mcp_token_and_config_print_what_hosts_need() {
    let d = daemon("");
    let (code, out, err) = d.cli(&["mcp", "token"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), d.token);
    let (code, out, err) = d.cli(&["mcp", "config", "claude-desktop"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let args = v["mcpServers"]["openphone"]["args"].as_array().unwrap();
    assert_eq!(args[0], "mcp");
    assert_eq!(args[1], "serve");
    let (code, out, _) = d.cli(&["mcp", "config", "http"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["mcpServers"]["openphone"]["url"], json!(d.mcp_url));
    assert!(
        !out.contains(&d.token),
        "the token is not printed into config"
    );
}

#[test]
fn bench_mcp_reports_throughput_latency_and_counts_the_limiter() {
    let d = daemon("[limits]\nrate_per_sec = 10000.0\nrate_burst = 10000.0\n");
    let (code, out, err) = d.cli(&[
        "bench",
        "mcp",
        "--connections",
        "3",
        "--calls",
        "7",
        "--json",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (r["calls"].clone(), r["ok"].clone(), r["other"].clone()),
        (json!(21), json!(21), json!(0)),
        "{r}"
    );
    assert!(r["p99_ms"].as_f64().unwrap() >= r["p50_ms"].as_f64().unwrap());
    assert!(r["calls_per_sec"].as_f64().unwrap() > 0.0);

    // With the default limits the token bucket refuses most of a burst: counted, not failed.
    let limited = daemon("[limits]\nrate_per_sec = 0.01\nrate_burst = 2.0\n");
    let (code, out, err) = limited.cli(&[
        "bench",
        "mcp",
        "--connections",
        "1",
        "--calls",
        "6",
        "--json",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["ok"], 2, "{r}");
    assert_eq!(r["rate_limited"], 4, "{r}");

    let (code, _, err) = d.cli(&["bench", "mcp", "--calls", "0"]);
    assert_eq!(code, 2);
    assert!(err.contains("at least 1"), "{err}");
}

#[test]
fn a_confirmation_nobody_decides_times_out_and_never_runs() {
    let d = daemon("[mcp]\nlocal_confirmation_wait_ms = 8000\nconfirmation_timeout_ms = 1000\n");
    let text = "note nobody confirmed";
    for via in [Via::Stdio, Via::Http] {
        let answer = d.drive(
            via,
            "legacy",
            &[
                "--call",
                "openphone_memory_save",
                "--args",
                &save_args(text),
                "--key",
                &format!("t-{via:?}"),
            ],
        );
        let error = error_of(&answer);
        assert_eq!(error["code"], "timeout", "{via:?}: {answer}");
        assert_eq!(tool_result_meta(&answer)["status"], "timeout");
        assert!(d.pending().is_empty());
        // The keyed retry replays the timeout; it does not ask again.
        let retry = d.drive(
            via,
            "legacy",
            &[
                "--call",
                "openphone_memory_save",
                "--args",
                &save_args(text),
                "--key",
                &format!("t-{via:?}"),
            ],
        );
        assert_eq!(error_of(&retry)["code"], "timeout", "{retry}");
        assert!(d.pending().is_empty());
    }
    assert_eq!(d.memories(text), 0);
}

#[test]
fn the_audit_log_names_the_mcp_client_beside_its_runtime() {
    let d = daemon("");
    let args = json!({"reason": "look"}).to_string();
    for (via, name) in [(Via::Stdio, "stdio-probe"), (Via::Http, "http-probe")] {
        let answer = d.drive(
            via,
            "legacy",
            &[
                "--client-name",
                name,
                "--call",
                "openphone_screen_get",
                "--args",
                &args,
            ],
        );
        assert_eq!(answer["is_error"], false, "{answer}");
    }
    let (code, out, err) = d.cli(&["audit", "export", "--format", "jsonl"]);
    assert_eq!(code, 0, "{err}");
    for name in ["stdio-probe", "http-probe"] {
        let record = out
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|r| r.to_string().contains(name))
            .unwrap_or_else(|| panic!("no audit record names {name}:\n{out}"));
        assert_eq!(record["runtime"], "mcp", "{record}");
        assert_eq!(
            record["caller"]["principal"],
            json!(format!("token:mcp client:{name}")),
            "{record}"
        );
        assert_eq!(record["caller"]["transport"], "mcp", "{record}");
    }
}

/// Issue 28, item 9: a host without idempotency keys (Hermes Agent 0.19.0) saw "pending" after
/// the inline wait, its model called again, a second confirmation opened and both approvals
/// ran. The same call without a key now joins the first one's confirmation, and asked again
/// after the approval it gets the approved call's result: one approval, one action.
#[test]
fn python_client_retrying_without_a_key_after_a_late_approval_runs_once() {
    let d = daemon("[mcp]\nlocal_confirmation_wait_ms = 1000\n");
    let text = "note retried without a key";
    let call = |reason: &str| {
        let args = json!({"text": text, "reason": reason}).to_string();
        d.drive(
            Via::Stdio,
            "legacy",
            &["--call", "openphone_memory_save", "--args", &args],
        )
    };
    let first = call("remember it");
    assert_eq!(
        tool_result_meta(&first)["status"],
        "needs_confirmation",
        "{first}"
    );
    let id = tool_result_meta(&first)["confirmation_id"]
        .as_str()
        .unwrap()
        .to_owned();

    // The model retries, reworded, without a key: the same confirmation, no second one.
    let again = call("remember it, please");
    assert_eq!(
        tool_result_meta(&again)["confirmation_id"],
        json!(id),
        "{again}"
    );
    assert_eq!(d.pending().len(), 1);

    // The user approves late; the host asks once more and gets the approved call's result.
    assert_eq!(d.resolve("approve", &id), 0);
    let after = call("did it work?");
    assert_eq!(after["is_error"], false, "{after}");
    assert_eq!(
        after["structured"]["memory"]["text"],
        json!(text),
        "{after}"
    );
    assert_eq!(tool_result_meta(&after)["replayed"], true, "{after}");
    assert_eq!(d.memories(text), 1, "one approval, one memory");
    assert!(d.pending().is_empty());
}
