//! The per-call access line (`event="runtime_tool"`, target `openphone::access`) is off by
//! default and on with `openphone serve --access-log` or `[log] access = true`; the daemon's
//! other lines (ready, shutting down) are written either way.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use super::harness::{Runtime, terminate, write_config};
use super::support::openphone;

/// `openphone serve` with `extra` arguments and its stderr in `<dir>/serve.log`; waits until
/// it is ready and returns it with its endpoint URL.
fn serve_logging(dir: &Path, config: &str, extra: &[&str]) -> (Child, String) {
    let data = dir.join("data");
    let log = std::fs::File::create(dir.join("serve.log")).unwrap();
    let mut child = openphone()
        .args(["serve", "--listen", "127.0.0.1:0", "--config", config])
        .args(extra)
        .arg("--data-dir")
        .arg(&data)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    // Up to 30 s: 1500 polls 20 ms apart (counted, so no clock is read).
    for _ in 0..1500 {
        if let Ok(text) = std::fs::read_to_string(data.join("endpoint.json"))
            && let Ok(info) = serde_json::from_str::<Value>(&text)
            && info["pid"] == json!(child.id())
        {
            return (child, info["url"].as_str().unwrap().to_owned());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("serve did not become ready");
}

/// Starts a daemon, makes one tool call, stops the daemon and returns what it wrote on stderr.
async fn log_of_one_call(config_extra: &str, args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path());
    if !config_extra.is_empty() {
        let mut text = std::fs::read_to_string(&config).unwrap();
        text.push_str(config_extra);
        std::fs::write(&config, text).unwrap();
    }
    let (mut child, url) = serve_logging(dir.path(), &config, args);
    let mut rt = Runtime::connect(&url).await;
    let answer = rt
        .call(
            "tools.invoke",
            json!({"request_id": "access-1", "tool": "openphone.device.status", "params": {},
                   "reason": "access log test"}),
        )
        .await;
    assert_eq!(answer["result"]["status"], "ok", "{answer}");
    drop(rt);
    terminate(&mut child);
    std::fs::read_to_string(dir.path().join("serve.log")).unwrap()
}

fn access_lines(log: &str) -> Vec<&str> {
    log.lines().filter(|l| l.contains("runtime_tool")).collect()
}

#[tokio::test]
async fn a_call_writes_no_access_line_by_default() {
    let log = log_of_one_call("", &[]).await;
    assert!(access_lines(&log).is_empty(), "{log}");
    assert!(log.contains("ready"), "{log}");
    assert!(log.contains("shutting down"), "{log}");
}

#[tokio::test]
async fn the_flag_writes_one_access_line_per_call() {
    let log = log_of_one_call("", &["--access-log"]).await;
    let lines = access_lines(&log);
    assert_eq!(lines.len(), 1, "{log}");
    assert!(lines[0].contains("openphone.device.status"), "{log}");
    assert!(lines[0].contains("hermes"), "{log}");
    assert!(log.contains("ready"), "{log}");
}

#[tokio::test]
async fn the_config_key_writes_one_access_line_per_call() {
    let log = log_of_one_call("\n[log]\naccess = true\n", &["--log-format", "json"]).await;
    let lines = access_lines(&log);
    assert_eq!(lines.len(), 1, "{log}");
    let line: Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(line["fields"]["event"], json!("runtime_tool"), "{log}");
    assert_eq!(
        line["fields"]["tool"],
        json!("openphone.device.status"),
        "{log}"
    );
}
