//! The Hermes adapter suite's support (split from `hermes_adapter.rs`): where the pinned
//! Hermes Agent is, a Hermes home that points Hermes at a scripted fake model, and the real
//! daemon with a `kind = "hermes"` runtime.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use openphone_clock::Stopwatch;
use openphone_fake_model::FakeModel;
use serde_json::Value;

/// The venv the pinned Hermes Agent is installed in: `OPENPHONE_HERMES_VENV`, else the
/// repository's `.cache/hermes-venv` (`tests/clients/hermes/install.sh`).
pub(crate) fn hermes_venv() -> PathBuf {
    match std::env::var_os("OPENPHONE_HERMES_VENV") {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.cache/hermes-venv"),
    }
}

/// The `hermes` executable, or `None` after printing why the test is skipped.
pub(crate) fn hermes_bin() -> Option<PathBuf> {
    let bin = hermes_venv().join("bin/hermes");
    if bin.exists() {
        Some(bin)
    } else {
        println!(
            "skipped: Hermes not installed at {} (tests/clients/hermes/install.sh installs it)",
            bin.display()
        );
        None
    }
}

pub(crate) fn openphone() -> Command {
    Command::new(env!("CARGO_BIN_EXE_openphone"))
}

/// `openphone ask --runtime hermes PROMPT` against `daemon`, on its own thread (a test
/// approves or denies meanwhile): its exit code, stdout and stderr.
pub(crate) fn ask_in_background(
    daemon: &Daemon,
    prompt: &str,
) -> std::thread::JoinHandle<(Option<i32>, String, String)> {
    let data = daemon.data.clone();
    let prompt = prompt.to_owned();
    std::thread::spawn(move || {
        let out = openphone()
            .args([
                "ask",
                "--runtime",
                "hermes",
                &prompt,
                "--timeout-secs",
                "180",
            ])
            .arg("--data-dir")
            .arg(&data)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    })
}

/// A Hermes home whose model is the fake (`provider: custom`).
pub(crate) fn hermes_home(dir: &Path, fake: &FakeModel) -> PathBuf {
    let home = dir.join("hermes-home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("config.yaml"),
        format!(
            "model:\n  provider: custom\n  base_url: {}\n  default: fake-model\n  api_key: sk-fake\n\
             auxiliary:\n  title_generation:\n    enabled: false\n",
            fake.url()
        ),
    )
    .unwrap();
    home
}

/// The daemon's configuration: the `hermes` runtime with every grant, plus `extra`.
pub(crate) fn config(hermes: &Path, home: &Path, extra: &str) -> String {
    format!(
        "[[runtimes]]\nid = \"hermes\"\nkind = \"hermes\"\ncommand = \"{}\"\nhome = \"{}\"\n\
         grants = [\"safe_read\", \"private_read\", \"dangerous\"]\n\n{extra}",
        hermes.display(),
        home.display()
    )
}

pub(crate) struct Daemon {
    pub(crate) child: Child,
    pub(crate) data: PathBuf,
    pub(crate) log: PathBuf,
}

impl Daemon {
    pub(crate) fn start(dir: &Path, config: &str) -> Daemon {
        let cfg = dir.join("openphone.toml");
        std::fs::write(&cfg, config).unwrap();
        let data = dir.join("data");
        let log = dir.join("serve.log");
        let child = openphone()
            .args(["serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(&cfg)
            .arg("--data-dir")
            .arg(&data)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let clock = Stopwatch::start();
        while !data.join("endpoint.json").exists() {
            assert!(
                clock.elapsed() < Duration::from_secs(30),
                "no daemon: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Daemon { child, data, log }
    }

    pub(crate) fn cli(&self, args: &[&str]) -> (i32, String, String) {
        let out = openphone()
            .args(args)
            .arg("--data-dir")
            .arg(&self.data)
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The `hermes` runtime's `runtimes list` row once it is `connected` (Hermes' API server
    /// answered), waiting up to 90 s.
    pub(crate) fn wait_ready(&self) -> Value {
        let clock = Stopwatch::start();
        loop {
            let (_, out, _) = self.cli(&["runtimes", "list", "--json"]);
            let row = serde_json::from_str::<Value>(&out)
                .ok()
                .and_then(|v| {
                    v["runtimes"]
                        .as_array()
                        .and_then(|a| a.iter().find(|r| r["id"] == "hermes").cloned())
                })
                .unwrap_or(Value::Null);
            if row["status"] == "connected" {
                return row;
            }
            let detail = row["detail"].as_str().unwrap_or_default();
            assert!(
                !detail.starts_with("failed") && clock.elapsed() < Duration::from_secs(90),
                "Hermes not ready: {row}\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// The first pending confirmation's id, waiting up to `limit`.
    pub(crate) fn pending(&self, limit: Duration) -> Option<String> {
        let clock = Stopwatch::start();
        while clock.elapsed() < limit {
            let (_, out, _) = self.cli(&["confirmations", "list", "--json"]);
            if let Ok(v) = serde_json::from_str::<Value>(&out) {
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

    /// SIGTERM, then waits (SIGKILL after 20 s).
    pub(crate) fn stop(&mut self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let clock = Stopwatch::start();
        while clock.elapsed() < Duration::from_secs(20) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The audit log, one JSON value per record (read after [`Daemon::stop`]).
    pub(crate) fn audit(&self) -> Vec<Value> {
        let (code, out, err) = self.cli(&["audit", "export"]);
        assert_eq!(code, 0, "{err}");
        out.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.stop();
        }
    }
}

/// The pid of the `hermes gateway run` the daemon started (its child), from `/proc`.
pub(crate) fn gateway_pid(daemon_pid: u32) -> Option<u32> {
    let parent = format!("PPid:\t{daemon_pid}");
    std::fs::read_dir("/proc")
        .ok()?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .find(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/status"))
                .is_ok_and(|s| s.lines().any(|l| l == parent))
                && std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| c.contains("hermes") && c.contains("gateway"))
        })
}

/// `VmRSS` and `VmHWM` of a process, in kB.
pub(crate) fn rss_kb(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The tool messages the fake model was sent (what Hermes gave the model as tool results).
pub(crate) fn tool_results(fake: &FakeModel) -> Vec<String> {
    fake.requests()
        .iter()
        .filter_map(|r| r["messages"].as_array().cloned())
        .next_back()
        .unwrap_or_default()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            m["content"]
                .as_str()
                .map_or_else(|| m["content"].to_string(), str::to_owned)
        })
        .collect()
}
