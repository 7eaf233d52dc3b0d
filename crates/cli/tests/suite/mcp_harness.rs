//! The harness of the MCP client tests: the Python `mcp` SDK's venv, a real `openphone serve`
//! with MCP on, the driver script (`tests/clients/py/mcp_drive.py`) over stdio or HTTP, and
//! operator checks through the CLI.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use openphone_clock::SystemClock;
use openphone_device::{PhoneDevice, SimPhone};
use openphone_protocol::{Executor, Registry};
use serde_json::{Value, json};

use super::support::{openphone, run};

pub(super) fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The venv's python, installing the pinned SDK first if needed (once per test process).
pub(super) fn python() -> PathBuf {
    static READY: OnceLock<PathBuf> = OnceLock::new();
    READY
        .get_or_init(|| {
            let root = repo_root();
            let status = Command::new("bash")
                .arg(root.join("tests/clients/py/install.sh"))
                .stdout(Stdio::null())
                .status()
                .expect("running tests/clients/py/install.sh");
            assert!(status.success(), "installing the Python mcp SDK failed");
            root.join(".cache/mcp-py/bin/python")
        })
        .clone()
}

pub(super) struct Daemon {
    pub(super) child: Child,
    _tmp: tempfile::TempDir,
    pub(super) data: PathBuf,
    pub(super) mcp_url: String,
    pub(super) token: String,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `openphone serve` on a fresh data dir and a free port, with `config` as its config file.
#[allow(clippy::zombie_processes)] // reaped by Daemon's Drop
pub(super) fn daemon(config: &str) -> Daemon {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let config_path = tmp.path().join("openphone.toml");
    std::fs::write(&config_path, config).unwrap();
    let child = openphone()
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&config_path)
        .arg("--data-dir")
        .arg(&data)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Up to 30 s: 1500 polls 20 ms apart (counted, so no clock is read).
    for _ in 0..1500 {
        if let Ok(text) = std::fs::read_to_string(data.join("endpoint.json"))
            && let Ok(info) = serde_json::from_str::<Value>(&text)
            && info["pid"] == json!(child.id())
        {
            let token = std::fs::read_to_string(data.join("mcp.token")).unwrap();
            return Daemon {
                child,
                _tmp: tmp,
                mcp_url: info["mcp_url"].as_str().unwrap().to_owned(),
                token: token.trim().to_owned(),
                data,
            };
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("serve did not become ready");
}

/// How a client reaches the daemon.
#[derive(Clone, Copy, Debug)]
pub(super) enum Via {
    Stdio,
    Http,
}

impl Daemon {
    pub(super) fn cli(&self, args: &[&str]) -> (i32, String, String) {
        let mut all = args.to_vec();
        all.extend(["--data-dir", self.data.to_str().unwrap()]);
        run(&all, "")
    }

    /// The driver's command line for `via` in `mode`, then `extra`.
    pub(super) fn driver(&self, via: Via, mode: &str, extra: &[&str]) -> Command {
        let mut cmd = Command::new(python());
        cmd.arg(repo_root().join("tests/clients/py/mcp_drive.py"));
        match via {
            Via::Stdio => {
                let server = format!(
                    "{} mcp serve --data-dir {}",
                    env!("CARGO_BIN_EXE_openphone"),
                    self.data.display()
                );
                cmd.args(["--transport", "stdio", "--server", &server]);
            }
            Via::Http => {
                cmd.args(["--transport", "http", "--url", &self.mcp_url]);
                if !extra.contains(&"--no-token") {
                    cmd.args(["--token", &self.token]);
                }
            }
        }
        cmd.args(["--mode", mode, "--overall-timeout-s", "120"]);
        cmd.args(extra.iter().filter(|a| **a != "--no-token"));
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd
    }

    /// Runs the driver to the end; returns its JSON answer.
    pub(super) fn drive(&self, via: Via, mode: &str, extra: &[&str]) -> Value {
        finish(self.driver(via, mode, extra).spawn().unwrap())
    }

    pub(super) fn spawn(&self, via: Via, mode: &str, extra: &[&str]) -> Child {
        self.driver(via, mode, extra).spawn().unwrap()
    }

    /// Pending confirmations as (id, runtime, tool).
    pub(super) fn pending(&self) -> Vec<(String, String, String)> {
        let (code, out, err) = self.cli(&["confirm", "list", "--json"]);
        assert_eq!(code, 0, "{err}");
        let v: Value = serde_json::from_str(&out).unwrap();
        v["confirmations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["confirmation_id"].as_str().unwrap().to_owned(),
                    c["runtime"].as_str().unwrap().to_owned(),
                    c["tool"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    }

    /// Waits until exactly `n` confirmations are pending; returns their ids.
    pub(super) fn wait_pending(&self, n: usize) -> Vec<String> {
        // Up to about 60 s: 600 polls 100 ms apart.
        let mut pending = Vec::new();
        for _ in 0..600 {
            pending = self.pending();
            if pending.len() == n {
                return pending.into_iter().map(|p| p.0).collect();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("expected {n} pending, have {pending:?}");
    }

    pub(super) fn resolve(&self, verb: &str, id: &str) -> i32 {
        self.cli(&["confirm", verb, id]).0
    }

    /// How many memories match `text`, read by the operator.
    pub(super) fn memories(&self, text: &str) -> usize {
        let params = json!({"query": text, "reason": "test check"}).to_string();
        let (code, out, err) = self.cli(&[
            "tool",
            "invoke",
            "openphone.memory.search",
            &params,
            "--json",
        ]);
        assert_eq!(code, 0, "{out}{err}");
        let v: Value = serde_json::from_str(&out).unwrap();
        let found = v["result"]["memories"]
            .as_array()
            .or_else(|| v["result"]["results"].as_array())
            .unwrap_or_else(|| panic!("no memory list in {v}"));
        found
            .iter()
            .filter(|m| m.to_string().contains(text))
            .count()
    }
}

pub(super) fn finish(child: Child) -> Value {
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|_| {
        panic!(
            "driver printed no JSON (exit {:?})\nstdout: {stdout}\nstderr: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The error object of a failed call's text block: an `isError` result, or a policy outcome
/// (pending, denied, expired: `isError: false` with `structuredContent.outcome`).
pub(super) fn error_of(answer: &Value) -> Value {
    let outcome = answer["structured"]["outcome"].is_string();
    assert_eq!(
        answer["is_error"], !outcome,
        "expected an error result or a policy outcome: {answer}"
    );
    let text = answer["texts"][0].as_str().unwrap();
    serde_json::from_str::<Value>(text).unwrap()["error"].clone()
}

pub(super) fn tool_result_meta(answer: &Value) -> &Value {
    &answer["meta"]["dev.openphone/toolResult"]
}

pub(super) fn save_args(text: &str) -> String {
    json!({"text": text, "reason": "remember this for the test"}).to_string()
}

/// The tools a default MCP principal sees with the simulated phone: every `mcp: true`
/// command this daemon can run (the phone's commands and the runtime-owned services').
pub(super) fn expected_tools() -> Vec<String> {
    let registry = Registry::embedded().unwrap();
    let phone = SimPhone::with_default_scenario(Arc::new(SystemClock)).unwrap();
    let supported = phone.profile().supported_tools;
    let mut names: Vec<String> = registry
        .commands()
        .filter(|c| c.mcp)
        .filter(|c| match c.executor {
            Executor::Device => supported.contains(&c.name),
            // The daemon serves every runtime-owned command: memory, watchers and the
            // background-job tools.
            Executor::Runtime => true,
        })
        .map(|c| c.name.replace('.', "_"))
        .collect();
    // The connection's own tool for collecting a pending call's outcome.
    names.push("openphone_confirmation_status".to_owned());
    names.sort();
    names
}
