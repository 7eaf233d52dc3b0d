//! A real Android phone's path end to end (issue 30's "done when"), with the fake device and
//! the real `adb` client: `openphone serve --device adb:127.0.0.1:PORT` (a private adb server
//! on its own port through `ANDROID_ADB_SERVER_PORT`, started by the backend with
//! `/usr/bin/adb` and killed at the end) answers `openphone.screen.get` with the device's
//! elements; a tap parks, `openphone confirmations approve` approves it, and the device's log
//! shows exactly one `input tap`; `openphone devices list --json` shows the phone attached, in
//! state `device`, used by the daemon.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use openphone_fake_adbd::{FakeAdbd, Options};
use serde_json::{Value, json};

use super::harness::{Runtime, Serve, write_config};
use super::support::openphone;

fn adb() -> PathBuf {
    let adb = PathBuf::from("/usr/bin/adb");
    assert!(
        adb.exists(),
        "this test needs the real adb client (apt-get install adb)"
    );
    adb
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap()
}

/// Kills the private adb server when the test ends, however it ends.
struct AdbServer(u16);

impl Drop for AdbServer {
    fn drop(&mut self) {
        let _ = Command::new(adb())
            .args(["-P", &self.0.to_string(), "kill-server"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// `openphone serve --device adb:<serial>` with the private adb server, ready.
// The child moves into `Serve`, whose Drop reaps it.
#[allow(clippy::zombie_processes)]
fn serve_adb(data: &Path, config: &str, serial: &str, adb_port: u16) -> Serve {
    let mut child = openphone()
        .args(["serve", "--listen", "127.0.0.1:0", "--config", config])
        .args(["--device", &format!("adb:{serial}"), "--data-dir"])
        .arg(data)
        .env("ANDROID_ADB_SERVER_PORT", adb_port.to_string())
        .env_remove("ANDROID_SERIAL")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Up to 60 s: 3000 polls 20 ms apart (counted, so no clock is read); the adb server
    // starts and connects first.
    for _ in 0..3000 {
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
    panic!("serve --device adb did not become ready");
}

/// An `openphone` client command with the private adb server, off the async threads.
async fn cli(args: Vec<String>, data: &Path, adb_port: u16) -> (i32, String, String) {
    let data = data.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let out = openphone()
            .args(&args)
            .arg("--data-dir")
            .arg(&data)
            .env("ANDROID_ADB_SERVER_PORT", adb_port.to_string())
            .env_remove("ANDROID_SERIAL")
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    })
    .await
    .unwrap()
}

fn taps(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("input tap"))
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_device_adb_reads_the_screen_and_a_tap_approved_once_taps_once() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("input.log");
    let fake = FakeAdbd::start(
        "127.0.0.1:0".parse().unwrap(),
        Options {
            log: Some(log.clone()),
            ..Options::default()
        },
    )
    .await
    .unwrap();
    let serial = fake.addr().to_string();
    let adb_port = free_port();
    let _server = AdbServer(adb_port);
    let data = dir.path().join("data");
    let config = write_config(dir.path());
    let serve = serve_adb(&data, &config, &serial, adb_port);
    let mut rt = Runtime::connect(&serve.url).await;

    // The screen is the device's: its elements, read over the real adb.
    let screen = rt
        .call(
            "tools.invoke",
            json!({"request_id": "read-1", "tool": "openphone.screen.get",
                   "params": {"reason": "look", "format": "full"}}),
        )
        .await;
    let screen = &screen["result"];
    assert_eq!(screen["status"], "ok", "{screen}");
    let text = screen["result"].to_string();
    assert!(text.contains("Messages"), "the demo home screen: {text}");

    // A tap parks for the user; nothing reaches the device.
    let tap = rt
        .call(
            "tools.invoke",
            json!({"request_id": "tap-1", "tool": "openphone.ui.tap",
                   "params": {"x": 100, "y": 200, "reason": "tap"}, "wait": false}),
        )
        .await;
    let tap = &tap["result"];
    assert_eq!(tap["status"], "needs_confirmation", "{tap}");
    assert!(taps(&log).is_empty(), "{:?}", taps(&log));
    let id = tap["result"]["confirmation_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let (code, out, err) = cli(
        vec!["confirmations".into(), "approve".into(), id],
        &data,
        adb_port,
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    // The approved tap runs once: exactly one `input tap` in the device's log.
    for _ in 0..500 {
        if !taps(&log).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(taps(&log), ["input tap 100 200"]);

    // `devices list`: the phone attached, in state device, used by the daemon's phone.
    let (code, out, err) = cli(
        vec!["devices".into(), "list".into(), "--json".into()],
        &data,
        adb_port,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let listing: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(listing["daemon"], "running", "{listing}");
    let attached = listing["attached"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["serial"] == json!(serial))
        .unwrap_or_else(|| panic!("{listing}"))
        .clone();
    assert_eq!(attached["state"], "device", "{attached}");
    assert_eq!(attached["used_by"], "default", "{attached}");
    let configured = &listing["configured"][0];
    assert_eq!(configured["id"], "default", "{listing}");
    assert_eq!(configured["kind"], "adb", "{listing}");
    assert_eq!(configured["spec"], format!("adb:{serial}"), "{listing}");
    assert_eq!(configured["state"], "device", "{listing}");
    assert_eq!(configured["in_use"], true, "{listing}");
    drop(serve);
    fake.stop().await;
}

/// A phone that does not answer at start does not stop the daemon: `serve` starts, its
/// startup line says the phone is not reachable now and that its calls answer the error until
/// it is back, and a call on it answers the device's error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_device_adb_starts_when_the_phone_is_unreachable_and_says_so() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let adb_port = free_port();
    let _server = AdbServer(adb_port);
    // Nothing listens on this port: the phone is "unplugged".
    let serial = format!("127.0.0.1:{}", free_port());
    let data = dir.path().join("data");
    let config = write_config(dir.path());
    let mut child = openphone()
        .args(["serve", "--listen", "127.0.0.1:0", "--config", &config])
        .args(["--device", &format!("adb:{serial}"), "--data-dir"])
        .arg(&data)
        .env("ANDROID_ADB_SERVER_PORT", adb_port.to_string())
        .env_remove("ANDROID_SERIAL")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let lines = tokio::task::spawn_blocking(move || {
        std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .take(3)
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    let info: Value =
        serde_json::from_str(&std::fs::read_to_string(data.join("endpoint.json")).unwrap())
            .unwrap();
    let serve = Serve {
        url: info["url"].as_str().unwrap().to_owned(),
        child,
    };
    // The ready line, the config file it read, and the phone's line (in any order after ready).
    assert!(lines[0].contains("ready on"), "{lines:?}");
    let phone = lines
        .iter()
        .find(|l| l.contains("not reachable now"))
        .unwrap_or_else(|| panic!("no line says the phone is not reachable: {lines:?}"));
    assert!(phone.contains("until it is back"), "{lines:?}");
    let mut rt = Runtime::connect(&serve.url).await;
    let screen = rt
        .call(
            "tools.invoke",
            json!({"request_id": "read-1", "tool": "openphone.screen.get",
                   "params": {"reason": "look"}}),
        )
        .await;
    let code = screen["result"]["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        ["device_not_found", "device_offline", "device_timeout"].contains(&code.as_str()),
        "{screen}"
    );
    drop(serve);
}
