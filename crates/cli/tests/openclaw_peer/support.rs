//! The OpenClaw peer tests' support (split from `openclaw_peer.rs`): the pinned gateway
//! (`Peer`), the real daemon (`Daemon`), their configuration, the scenario counter and the
//! output readers.

use openphone_clock::Stopwatch;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub(crate) const TOKEN: &str = "openphone-peer-test-token-0123456789abcdef";

pub(crate) fn peer_bin() -> Option<PathBuf> {
    match std::env::var_os("OPENPHONE_OPENCLAW_PEER") {
        Some(p) if !p.is_empty() => Some(PathBuf::from(p)),
        _ => {
            println!("skipped: OPENPHONE_OPENCLAW_PEER not set");
            None
        }
    }
}

pub(crate) fn openphone() -> Command {
    Command::new(env!("CARGO_BIN_EXE_openphone"))
}

pub(crate) struct Peer {
    pub(crate) bin: PathBuf,
    pub(crate) port: u16,
}

impl Peer {
    pub(crate) fn start(bin: PathBuf, port: u16, allow: &str, auto_approve: bool) -> Peer {
        let peer = Peer { bin, port };
        let status = peer
            .cmd(&["start", "--fresh"])
            .env("OPENCLAW_PEER_ALLOW_COMMANDS", allow)
            .env("OPENCLAW_PEER_START_TIMEOUT", "240")
            .env(
                "OPENCLAW_PEER_AUTO_APPROVE_LOCAL",
                if auto_approve { "1" } else { "0" },
            )
            .status()
            .unwrap();
        assert!(status.success(), "openclaw-peer start failed");
        peer
    }
    pub(crate) fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.args(args)
            .env("OPENCLAW_PEER_PORT", self.port.to_string())
            .env("OPENCLAW_PEER_TOKEN", TOKEN);
        c
    }
    pub(crate) fn url(&self) -> String {
        format!("ws://127.0.0.1:{}", self.port)
    }
    pub(crate) fn output(&self, args: &[&str]) -> (bool, String) {
        let out = self.cmd(args).stderr(Stdio::null()).output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }
    pub(crate) fn approve(&self, what: &str) -> Value {
        let (ok, text) = self.output(&["approve", what]);
        assert!(ok, "approve {what}: {text}");
        serde_json::from_str(&text).unwrap()
    }
    pub(crate) fn run_dir(&self) -> PathBuf {
        let (_, text) = self.output(&["env"]);
        let line = text
            .lines()
            .find(|l| l.starts_with("export OPENCLAW_PEER_RUN_DIR="))
            .unwrap();
        PathBuf::from(line.split_once('=').unwrap().1.trim_matches('\''))
    }
    pub(crate) fn script(&self, script: &str) {
        std::fs::write(self.run_dir().join("mock-script.json"), script).unwrap();
    }
    /// An operator agent turn; returns the reply text.
    pub(crate) fn agent(&self, args: &[&str]) -> String {
        let mut full = vec!["cli", "agent", "--agent", "main", "--json"];
        full.extend_from_slice(args);
        let (_, text) = self.output(&full);
        let json = text.split("\n[openclaw]").next().unwrap_or_default();
        let value: Value = serde_json::from_str(json).unwrap_or(Value::Null);
        value
            .pointer("/result/payloads/0/text")
            .and_then(Value::as_str)
            .unwrap_or(json)
            .to_owned()
    }
    pub(crate) fn mock_requests(&self) -> String {
        std::fs::read_to_string(self.run_dir().join("mock-requests.jsonl")).unwrap_or_default()
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.cmd(&["stop"]).status();
    }
}

pub(crate) struct Daemon {
    pub(crate) child: Child,
    pub(crate) dir: PathBuf,
    pub(crate) log: PathBuf,
}

impl Daemon {
    pub(crate) fn start(dir: &Path, config: &str) -> Daemon {
        Daemon::start_with_env(dir, config, &[])
    }
    pub(crate) fn start_with_env(dir: &Path, config: &str, env: &[(&str, &str)]) -> Daemon {
        std::fs::create_dir_all(dir).unwrap();
        let cfg = dir.join("config.toml");
        std::fs::write(&cfg, config).unwrap();
        let data = dir.join("data");
        let log = dir.join(format!(
            "serve-{}.log",
            std::fs::read_dir(dir).unwrap().count()
        ));
        let child = openphone()
            .envs(env.iter().copied())
            .args(["serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(&cfg)
            .arg("--data-dir")
            .arg(&data)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        for _ in 0..200 {
            if data.join("endpoint.json").exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Daemon {
            child,
            dir: data,
            log,
        }
    }
    pub(crate) fn cli(&self, args: &[&str]) -> (bool, String) {
        let out = openphone()
            .args(args)
            .arg("--data-dir")
            .arg(&self.dir)
            .output()
            .unwrap();
        (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    }
    pub(crate) fn status(&self) -> String {
        let (_, text) = self.cli(&["openclaw", "status", "--json"]);
        serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v["status"].as_str().map(str::to_owned))
            .unwrap_or(text)
    }
    pub(crate) fn wait_status(&self, limit: Duration, pred: impl Fn(&str) -> bool) -> String {
        let clock = Stopwatch::start();
        loop {
            let status = self.status();
            if pred(&status) || clock.elapsed() > limit {
                return status;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
    pub(crate) fn pending_confirmation(&self, limit: Duration) -> Option<String> {
        let clock = Stopwatch::start();
        while clock.elapsed() < limit {
            let (_, text) = self.cli(&["confirmations", "list", "--json"]);
            if let Ok(v) = serde_json::from_str::<Value>(&text) {
                let list = v.get("confirmations").cloned().unwrap_or(v);
                if let Some(id) = list
                    .as_array()
                    .and_then(|a| a.first())
                    .and_then(|c| c["confirmation_id"].as_str())
                {
                    return Some(id.to_owned());
                }
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        None
    }
    /// Denies every pending confirmation (a scenario's leftovers never leak into the next).
    pub(crate) fn clear_pending(&self) {
        let (_, text) = self.cli(&["confirmations", "list", "--json"]);
        let Ok(v) = serde_json::from_str::<Value>(&text) else {
            return;
        };
        for c in v["confirmations"].as_array().into_iter().flatten() {
            if let Some(id) = c["confirmation_id"].as_str() {
                self.cli(&["confirmations", "deny", id]);
            }
        }
    }

    pub(crate) fn stop(mut self) {
        // SIGTERM through `kill`, by this child's own pid.
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn config(url: &str, token: &str) -> String {
    format!(
        "[openclaw]\nurl = \"{url}\"\ntoken = \"{token}\"\ndisplay_name = \"OpenPhone CI\"\n\
         grants = [\"safe_read\", \"private_read\", \"dangerous\"]\nbackoff_initial_ms = 300\n"
    )
}

pub(crate) fn allow_list() -> String {
    let out = openphone()
        .args(["openclaw", "tools", "--json", "--config"])
        .arg(write_temp_config())
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_owned())
        .collect::<Vec<_>>()
        .join(",")
}

pub(crate) fn write_temp_config() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("openphone-oc-tools-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("c.toml");
    std::fs::write(&path, config("ws://127.0.0.1:1", TOKEN)).unwrap();
    path
}

pub(crate) const SCRIPT: &str = r#"{"rules":[
 {"match":"SET_CLIP","toolCall":{"name":"phone_set_clipboard","arguments":{"text":"from openclaw","reason":"peer test"}}}
],"afterTool":"Phone tool {{tool}} said: {{result}}","default":"Mock reply #{{n}}"}"#;

pub(crate) fn scenario(name: &str, passed: bool, count: &mut (u32, u32)) {
    scenario_with(name, passed, count, "");
}

/// Like [`scenario`], printing `evidence` when it fails.
pub(crate) fn scenario_with(name: &str, passed: bool, count: &mut (u32, u32), evidence: &str) {
    if !passed && !evidence.is_empty() {
        println!(
            "evidence for {name}: {}",
            evidence.chars().take(1_500).collect::<String>()
        );
    }
    count.1 += 1;
    if passed {
        count.0 += 1;
    }
    println!("scenario {name}: {}", if passed { "pass" } else { "FAIL" });
}

pub(crate) fn device_id(daemon: &Daemon) -> String {
    let text = daemon.log();
    text.split("device=")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or_default()
        .to_owned()
}

pub(crate) fn spawn_capture(mut cmd: Command) -> Child {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

pub(crate) fn finish_capture(child: Child) -> String {
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The reply text of an `openclaw agent --json` output (the raw output when it has none).
pub(crate) fn reply_text(raw: &str) -> String {
    let json = raw.split("\n[openclaw]").next().unwrap_or_default();
    serde_json::from_str::<Value>(json)
        .ok()
        .and_then(|v| {
            v.pointer("/result/payloads/0/text")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| raw.to_owned())
}
