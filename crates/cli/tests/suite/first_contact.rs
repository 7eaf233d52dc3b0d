//! Regression tests of issue 12, "First contact": what a new user meets on a machine that never
//! ran the daemon — `mcp serve --autostart` answering its very first call, a waiting
//! `tools invoke` saying what it waits for, and `serve` on a busy port saying who holds it.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::harness::{serve, write_config};
use super::mcp_harness::{error_of, finish, python, repo_root};
use super::support::openphone;

/// Stops, when dropped, a daemon this test did not spawn itself (`--autostart` started it):
/// SIGTERM to the pid its `endpoint.json` names.
struct Autostarted<'a>(&'a Path);

impl Drop for Autostarted<'_> {
    fn drop(&mut self) {
        if let Ok(text) = std::fs::read_to_string(self.0.join("endpoint.json"))
            && let Ok(info) = serde_json::from_str::<Value>(&text)
            && let Some(pid) = info["pid"].as_u64()
        {
            let _ = Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
        }
    }
}

/// The Python `mcp` client over stdio against `openphone mcp serve <serve_args>`, with `env`
/// passed to the server (the SDK passes only HOME, PATH, … otherwise), running `extra`.
fn drive_stdio(serve_args: &str, env: &[String], extra: &[&str]) -> Value {
    let server = format!("{} mcp serve {serve_args}", env!("CARGO_BIN_EXE_openphone"));
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
        .args(["--overall-timeout-s", "120"]);
    for kv in env {
        cmd.args(["--env", kv]);
    }
    cmd.args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    finish(cmd.spawn().unwrap())
}

fn screen_get() -> [String; 4] {
    [
        "--call".into(),
        "openphone_screen_get".into(),
        "--args".into(),
        json!({"reason": "first look"}).to_string(),
    ]
}

/// Issue 12 (1): the host's first call through `mcp serve --autostart` on a fresh data
/// directory used to fail with "no MCP token", because the token was read before the daemon
/// it had just started wrote it.
#[test]
fn mcp_serve_autostart_on_a_fresh_data_dir_answers_the_first_call() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("never-used");
    let _daemon = Autostarted(&data);
    let call = screen_get();
    let call: Vec<&str> = call.iter().map(String::as_str).collect();
    let answer = drive_stdio(
        &format!("--autostart --data-dir {}", data.display()),
        &["OPENPHONE_LISTEN=127.0.0.1:0".into()],
        &call,
    );
    assert_eq!(answer["is_error"], false, "the very first call: {answer}");
    assert_eq!(
        answer["structured"]["package"], "com.android.launcher",
        "{answer}"
    );
    assert!(data.join("mcp.token").is_file());
}

/// Issue 12 (1): when the daemon `--autostart` started cannot come up, the host is told why
/// (its log) instead of a bare "no daemon".
#[test]
fn autostart_says_why_the_daemon_it_started_did_not_come_up() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let call = screen_get();
    let call: Vec<&str> = call.iter().map(String::as_str).collect();
    let answer = drive_stdio(
        &format!("--autostart --data-dir {}", data.display()),
        &[format!("OPENPHONE_LISTEN=127.0.0.1:{port}")],
        &call,
    );
    let error = error_of(&answer);
    assert_eq!(error["code"], "daemon_unavailable", "{answer}");
    let message = error["message"].as_str().unwrap();
    for needed in [
        "started by --autostart",
        "exited",
        &format!("cannot listen on 127.0.0.1:{port}"),
        "--listen",
        "daemon.log",
    ] {
        assert!(message.contains(needed), "{needed:?} missing: {message}");
    }
}

/// `mcp serve` in front of a daemon that serves no MCP says so, rather than "start the daemon".
#[test]
fn mcp_serve_names_a_daemon_that_serves_no_mcp() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let config = tmp.path().join("openphone.toml");
    std::fs::write(&config, "[mcp]\nenabled = false\n").unwrap();
    let serve = serve(&data, config.to_str().unwrap());
    let call = screen_get();
    let call: Vec<&str> = call.iter().map(String::as_str).collect();
    // Also with --autostart: the daemon it starts loses the data directory to this one.
    for autostart in ["", "--autostart "] {
        let answer = drive_stdio(
            &format!("{autostart}--data-dir {}", data.display()),
            &["OPENPHONE_LISTEN=127.0.0.1:0".into()],
            &call,
        );
        let error = error_of(&answer);
        assert_eq!(error["code"], "daemon_unavailable", "{answer}");
        let message = error["message"].as_str().unwrap();
        assert!(
            message.contains("does not serve MCP")
                && message.contains(&format!("pid {}", serve.child.id())),
            "{autostart}: {message}"
        );
    }
}

/// A `tools invoke` that waits for the user, with its stderr read line by line as it comes.
struct Waiting {
    child: std::process::Child,
    stderr: Vec<String>,
    lines: std::io::Lines<BufReader<std::process::ChildStderr>>,
}

impl Waiting {
    fn start(data: &Path, extra: &[&str]) -> Waiting {
        let mut child = openphone()
            .args([
                "tools",
                "invoke",
                "openphone.ui.tap",
                r#"{"x":405,"y":528,"reason":"open Messages"}"#,
                "--timeout-secs",
                "20",
            ])
            .args(extra)
            .arg("--data-dir")
            .arg(data)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = BufReader::new(child.stderr.take().unwrap()).lines();
        Waiting {
            child,
            stderr: Vec::new(),
            lines,
        }
    }

    /// Reads stderr until a line contains `marker` (the command still running); returns that
    /// line. Without it, stderr ends when the command does, and the test fails.
    fn line_with(&mut self, marker: &str) -> String {
        for line in self.lines.by_ref() {
            let line = line.unwrap();
            self.stderr.push(line.clone());
            if line.contains(marker) {
                return line;
            }
        }
        panic!("no {marker:?} on stderr: {:?}", self.stderr);
    }

    /// The command line after `label` on stderr.
    fn command(&mut self, label: &str) -> Vec<String> {
        let line = self.line_with(label);
        let (_, command) = line.split_once(label).unwrap();
        command.split_whitespace().map(str::to_owned).collect()
    }

    fn finish(mut self) -> (i32, String, Vec<String>) {
        for line in self.lines.by_ref() {
            self.stderr.push(line.unwrap());
        }
        let out = self.child.wait_with_output().unwrap();
        (
            out.status.code().unwrap(),
            String::from_utf8(out.stdout).unwrap(),
            self.stderr,
        )
    }
}

fn run_printed(command: &[String]) -> (i32, String) {
    let out = Command::new(&command[0])
        .args(&command[1..])
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// Issue 12 (2): a waiting `tools invoke` printed nothing until it timed out. Now stderr names
/// the confirmation, its summary and the exact commands that approve or deny it from another
/// terminal, at once; stdout (`--json`) holds the final result only.
#[test]
fn a_waiting_invoke_names_its_confirmation_and_the_approve_command_on_stderr() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let config = write_config(tmp.path());
    let _serve = serve(&data, &config);

    let mut waiting = Waiting::start(&data, &["--json"]);
    let first = waiting.line_with("waiting for your confirmation");
    assert!(
        first.contains("openphone.ui.tap: open Messages (x=405; y=528)"),
        "the summary: {first}"
    );
    let approve = waiting.command("approve it from another terminal:");
    let deny = waiting.command("deny it:");
    // The id printed is the pending confirmation's, and the commands name this data directory.
    let (code, listed) = run_printed(&[
        env!("CARGO_BIN_EXE_openphone").into(),
        "confirmations".into(),
        "list".into(),
        "--json".into(),
        "--data-dir".into(),
        data.display().to_string(),
    ]);
    assert_eq!(code, 0, "{listed}");
    let listed: Value = serde_json::from_str(&listed).unwrap();
    let id = listed["confirmations"][0]["confirmation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let dir = data.display().to_string();
    assert_eq!(
        approve[1..],
        ["confirmations", "approve", &id, "--data-dir", &dir],
        "{approve:?}"
    );
    assert_eq!(
        deny[1..],
        ["confirmations", "deny", &id, "--data-dir", &dir],
        "{deny:?}"
    );
    assert_eq!(approve[0], env!("CARGO_BIN_EXE_openphone"));
    assert!(
        waiting.stderr.iter().any(|l| l.contains(&id)),
        "{:?}",
        waiting.stderr
    );

    // The printed command works as printed; the waiting invoke then ends with the result.
    let (code, said) = run_printed(&approve);
    assert_eq!(code, 0, "{said}");
    let (code, stdout, stderr) = waiting.finish();
    assert_eq!(code, 0, "{stdout}{stderr:?}");
    let result: Value = serde_json::from_str(&stdout).expect("stdout is the JSON result only");
    assert_eq!(result["status"], "ok", "{result}");
    assert_eq!(result["result"]["effect"], "opened Messages", "{result}");

    // The deny command works as printed too.
    let mut waiting = Waiting::start(&data, &["--json"]);
    let deny = waiting.command("deny it:");
    let (code, said) = run_printed(&deny);
    assert_eq!(code, 0, "{said}");
    let (code, stdout, _) = waiting.finish();
    assert_eq!(code, 1);
    let result: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(result["status"], "denied", "{result}");
}

/// Issue 12 (3): `serve` on a busy port printed the OS error twice and nothing else. Now: the
/// error once, the OpenPhone daemon holding the port (found through the default data
/// directory's `endpoint.json`) and `--listen`.
#[test]
fn serve_on_a_busy_port_says_the_os_error_once_names_the_holder_and_suggests_listen() {
    let tmp = tempfile::tempdir().unwrap();
    let xdg = tmp.path().join("xdg");
    let default_dir = xdg.join("openphone");
    let config = write_config(tmp.path());
    let holder = serve(&default_dir, &config);
    let addr = holder
        .url
        .trim_start_matches("ws://")
        .trim_end_matches("/v1/runtime")
        .to_owned();

    let busy = |env_xdg: &Path, addr: &str| {
        let out = openphone()
            .args(["serve", "--listen", addr, "--data-dir"])
            .arg(tmp.path().join("second"))
            .env("XDG_DATA_HOME", env_xdg)
            .env_remove("OPENPHONE_DATA_DIR")
            .env_remove("OPENPHONE_LISTEN")
            .output()
            .unwrap();
        (
            out.status.code().unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let (code, err) = busy(&xdg, &addr);
    assert_eq!(code, 2, "{err}");
    assert_eq!(
        err.matches("(os error").count(),
        1,
        "the OS error once: {err}"
    );
    assert!(err.contains(&format!("cannot listen on {addr}")), "{err}");
    assert!(
        err.contains(&format!(
            "the OpenPhone daemon of {} (pid {}",
            default_dir.display(),
            holder.child.id()
        )),
        "names the daemon holding the port: {err}"
    );
    assert!(err.contains("--listen"), "{err}");

    // A port held by something else: on Linux the process is named, elsewhere the message says
    // it cannot be known.
    let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let other_addr = other.local_addr().unwrap().to_string();
    let (code, err) = busy(&tmp.path().join("no-xdg"), &other_addr);
    assert_eq!(code, 2, "{err}");
    assert_eq!(err.matches("(os error").count(), 1, "{err}");
    if cfg!(target_os = "linux") {
        assert!(
            err.contains(&format!("held by pid {}", std::process::id())),
            "{err}"
        );
    } else {
        assert!(err.contains("cannot be known"), "{err}");
    }
    assert!(err.contains("--listen"), "{err}");
}

/// Found while trying every command on a fresh machine (issue 12): `openphone protocol
/// commands | head` (or `completions … | head`, `audit export | head`) panicked with "failed
/// printing to stdout: Broken pipe" and a backtrace. A closed stdout now ends the command
/// quietly, with the exit code a shell gives a process stopped by SIGPIPE.
#[test]
fn a_closed_stdout_ends_the_command_quietly_instead_of_a_panic() {
    for args in [
        &["protocol", "commands"][..],
        &["completions", "bash"][..],
        &["info"][..],
    ] {
        // A pipe whose reading end is closed before the command writes anything.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = openphone()
            .args(args)
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(out.status.code(), Some(141), "{args:?}: {stderr}");
    }
}

/// Found in the same sweep: `serve --data-dir <relative>` wrote relative socket paths into
/// `endpoint.json` (and its messages), which a client or host in another directory cannot
/// reach.
#[test]
fn serve_with_a_relative_data_dir_names_absolute_paths_in_endpoint_json() {
    let tmp = tempfile::tempdir().unwrap();
    let mut child = openphone()
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir", "rel"])
        .current_dir(tmp.path())
        .env_remove("OPENPHONE_LISTEN")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let endpoint = tmp.path().join("rel/endpoint.json");
    // Up to 30 s: 1500 polls 20 ms apart.
    let info = (0..1500).find_map(|_| {
        let info = std::fs::read_to_string(&endpoint)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok());
        if info.is_none() {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        info
    });
    let _ = child.kill();
    let _ = child.wait();
    let info = info.expect("serve did not become ready");
    let root = tmp.path().canonicalize().unwrap();
    for key in ["mcp_socket", "socket"] {
        if let Some(path) = info[key].as_str() {
            let path = Path::new(path);
            assert!(path.is_absolute(), "{key}: {info}");
            assert_eq!(
                path.parent().unwrap().canonicalize().unwrap(),
                root.join("rel"),
                "{info}"
            );
        }
    }
    assert!(info["mcp_socket"].is_string(), "{info}");
}
