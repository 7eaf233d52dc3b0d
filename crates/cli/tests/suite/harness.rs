//! A real `openphone serve` on a temp data dir and a free port, a scripted WebSocket client
//! (a runtime or the operator), and `openphone` client commands run as separate processes.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use openphone_fake_model::FakeModel;
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream, connect_async};

use super::support::{openphone, run};

pub(super) const TOKEN: &str = "hermes-cli-test-token-0123456789";

pub(super) fn write_config(dir: &Path) -> String {
    let path = dir.join("openphone.toml");
    std::fs::write(
        &path,
        format!(
            "[[runtimes]]\nid = \"hermes\"\ntoken = \"{TOKEN}\"\n\
             grants = [\"safe_read\", \"private_read\", \"dangerous\"]\n"
        ),
    )
    .unwrap();
    path.to_str().unwrap().to_owned()
}

pub(super) struct Serve {
    pub(super) child: Child,
    pub(super) url: String,
}

impl Drop for Serve {
    fn drop(&mut self) {
        // A test that failed half-way must not leave a daemon behind.
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Starts `openphone serve` on port 0 and waits (polling endpoint.json) until it is ready.
// The child moves into `Serve`, whose Drop reaps it.
#[allow(clippy::zombie_processes)]
pub(super) fn serve(data: &Path, config: &str) -> Serve {
    let mut child = openphone()
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--config",
            config,
            "--data-dir",
        ])
        .arg(data)
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
            return Serve {
                url: info["url"].as_str().unwrap().to_owned(),
                child,
            };
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("serve did not become ready");
}

pub(super) fn cli(args: &[&str], data: &Path) -> (i32, String, String) {
    let mut all: Vec<&str> = args.to_vec();
    all.push("--data-dir");
    all.push(data.to_str().unwrap());
    run(&all, "")
}

pub(super) async fn cli_async(args: Vec<String>, data: &Path) -> (i32, String, String) {
    let data = data.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        cli(&refs, &data)
    })
    .await
    .unwrap()
}

/// Writes `openphone.toml` in `dir` with a `[builtin]` table on `fake` (10 s request timeout);
/// returns its path.
pub(super) fn fake_model_config(dir: &Path, fake: &FakeModel) -> String {
    let path = dir.join("openphone.toml");
    std::fs::write(
        &path,
        format!(
            "[builtin]\nbase_url = \"{}\"\nmodel = \"fake-model\"\nrequest_timeout_secs = 10\n",
            fake.url()
        ),
    )
    .unwrap();
    path.to_str().unwrap().to_owned()
}

/// `openphone jobs args… --json` against `data`: the exit code, the parsed output (null when
/// it is not JSON) and stderr.
pub(super) async fn jobs_json(args: &[&str], data: &Path) -> (i32, Value, String) {
    let mut all: Vec<String> = vec!["jobs".into()];
    all.extend(args.iter().map(|s| (*s).to_owned()));
    all.push("--json".into());
    let (code, out, err) = cli_async(all, data).await;
    let value = serde_json::from_str(&out).unwrap_or(Value::Null);
    (code, value, err)
}

pub(super) struct Runtime {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    next: u64,
}

impl Runtime {
    pub(super) async fn connect(url: &str) -> Runtime {
        Runtime::connect_as(url, TOKEN, "hermes").await
    }

    /// Connects with `token` and checks that the daemon names the caller `runtime`.
    pub(super) async fn connect_as(url: &str, token: &str, runtime: &str) -> Runtime {
        let mut req = url.into_client_request().unwrap();
        req.headers_mut()
            .insert("Authorization", format!("Bearer {token}").parse().unwrap());
        let (ws, _) = connect_async(req).await.unwrap();
        let mut rt = Runtime { ws, next: 0 };
        let hello = rt
            .call("hello", json!({"protocol": {"min": 1, "max": 1}, "client": {"name": "scripted", "version": "1"}}))
            .await;
        assert_eq!(hello["result"]["runtime"], runtime, "{hello}");
        rt
    }

    pub(super) async fn send(&mut self, method: &str, params: Value) -> u64 {
        self.next += 1;
        let frame = json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params});
        self.ws
            .send(Message::text(frame.to_string()))
            .await
            .unwrap();
        self.next
    }

    pub(super) async fn wait(&mut self, id: u64) -> Value {
        loop {
            let msg = tokio::time::timeout(Duration::from_secs(30), self.ws.next())
                .await
                .expect("no answer within 30 s")
                .expect("connection closed")
                .unwrap();
            if let Message::Text(t) = msg {
                let v: Value = serde_json::from_str(t.as_str()).unwrap();
                if v["id"] == json!(id) {
                    return v;
                }
            }
        }
    }

    pub(super) async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params).await;
        self.wait(id).await
    }
}

pub(super) async fn pending_ids(data: &Path) -> Vec<String> {
    let (code, out, err) =
        cli_async(vec!["confirm".into(), "list".into(), "--json".into()], data).await;
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    v["confirmations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["confirmation_id"].as_str().unwrap().to_owned())
        .collect()
}

pub(super) fn terminate(child: &mut Child) {
    let status = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    // Up to 20 s: 1000 polls 20 ms apart.
    for _ in 0..1000 {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "serve exited with {status}");
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("serve did not stop on SIGTERM");
}

impl Runtime {
    /// The payload of the next event with this name (other frames are skipped).
    pub(super) async fn event(&mut self, name: &str) -> Value {
        loop {
            let msg = tokio::time::timeout(Duration::from_secs(30), self.ws.next())
                .await
                .expect("no event within 30 s")
                .expect("connection closed")
                .unwrap();
            if let Message::Text(t) = msg {
                let v: Value = serde_json::from_str(t.as_str()).unwrap();
                if v["method"] == "event" && v["params"]["event"] == name {
                    return v["params"]["payload"].clone();
                }
            }
        }
    }
}

/// A small deterministic generator of kill delays (seeded per run, printed) for the crash
/// tests.
pub(super) struct Delays(pub(super) u64);

impl Delays {
    /// The next delay, 0 to `max_ms` inclusive.
    pub(super) fn next(&mut self, max_ms: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % (max_ms + 1)
    }
}

/// SIGKILL to a daemon started by [`serve`], and its exit awaited.
pub(super) fn kill(daemon: &mut Serve) {
    let _ = daemon.child.kill();
    let _ = daemon.child.wait();
}
