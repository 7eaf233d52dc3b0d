//! The operator's way in under a flood (issue 11, item 2): the real `openphone serve` under a
//! small descriptor limit, hundreds of connections on 127.0.0.1 that never authenticate, and
//! the real `openphone status` beside them.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio_tungstenite::connect_async;
use tokio_tungstenite::tungstenite::Message;

use super::harness::{Runtime, TOKEN, cli, serve, terminate, write_config};

/// The daemon's descriptor limit (soft and hard) in the flood test.
const DESCRIPTORS: u32 = 256;

/// Starts `openphone serve` with soft and hard descriptor limits of [`DESCRIPTORS`] and waits
/// until it is ready; returns the child and its endpoint URL.
// The child is reaped by `terminate` or by the kill at the end of a failed wait.
#[allow(clippy::zombie_processes)]
fn serve_limited(data: &Path, config: &Path) -> (Child, String) {
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -n {DESCRIPTORS} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_openphone"))
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(config)
        .arg("--data-dir")
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
            return (child, info["url"].as_str().unwrap().to_owned());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("serve did not become ready");
}

/// Runs `openphone args… --data-dir data`; `None` if it has not finished within 30 s (then it
/// is killed).
async fn cli_bounded(args: &[&str], data: &Path) -> Option<(i32, String)> {
    let mut child = super::support::openphone()
        .args(args)
        .arg("--data-dir")
        .arg(data)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // 300 polls 100 ms apart.
    for _ in 0..300 {
        if let Some(status) = child.try_wait().unwrap() {
            let mut out = String::new();
            std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut out).unwrap();
            let mut err = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
            return Some((status.code().unwrap_or(-1), format!("{out}{err}")));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// Whether the daemon closes a raw connection within 30 s.
async fn closes(stream: &mut TcpStream) -> bool {
    let mut buf = [0u8; 512];
    for _ in 0..300 {
        match tokio::time::timeout(Duration::from_millis(100), stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            // A 503 may come before the close.
            Ok(Ok(_)) | Err(_) => {}
        }
    }
    false
}

/// Issue 11: ~1,010 WebSocket connections that never sent `hello` exhausted the daemon's
/// descriptors (no hello deadline, no cap on unauthenticated connections), and `openphone
/// status` hung: the operator was locked out for as long as the strangers liked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_connections_that_never_say_hello_does_not_lock_out_the_operator() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("openphone.toml");
    std::fs::write(
        &config,
        format!(
            "[[runtimes]]\nid = \"hermes\"\ntoken = \"{TOKEN}\"\n\
             [limits]\nhello_timeout_ms = 4000\n"
        ),
    )
    .unwrap();
    let (mut child, url) = serve_limited(&data, &config);
    let addr = url
        .trim_start_matches("ws://")
        .trim_end_matches("/v1/runtime")
        .to_owned();

    // The flood, beyond the daemon's descriptor limit: WebSockets that never say hello, then
    // TCP connections that never send a byte. Over the caps the daemon answers 503.
    let mut sockets = Vec::new();
    let mut refused = 0;
    for _ in 0..100 {
        match connect_async(url.as_str()).await {
            Ok((ws, _)) => sockets.push(ws),
            Err(_) => refused += 1,
        }
    }
    let mut silent = Vec::new();
    for _ in 0..DESCRIPTORS {
        silent.push(TcpStream::connect(&addr).await.unwrap());
    }

    // The operator still gets in, over endpoint.sock.
    let (code, out) = cli_bounded(&["status", "--json"], &data)
        .await
        .expect("`openphone status` hung during the flood");
    assert_eq!(code, 0, "{out}");
    let status: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(status["url"], json!(url));

    // The strangers are closed at the hello deadline: the WebSockets with 1008.
    assert!(sockets.len() + refused == 100 && !sockets.is_empty());
    for ws in &mut sockets {
        let code = loop {
            match tokio::time::timeout(Duration::from_secs(30), ws.next())
                .await
                .expect("a WebSocket without hello was left open")
            {
                Some(Ok(Message::Close(frame))) => break frame.map(|f| u16::from(f.code)),
                Some(Ok(_)) => continue,
                Some(Err(_)) | None => break None,
            }
        };
        assert_eq!(code, Some(1008));
    }
    for s in &mut silent {
        assert!(closes(s).await, "a silent connection was left open");
    }
    drop((sockets, silent));

    // The TCP port serves again.
    let mut rt = Runtime::connect(&url).await;
    let r = rt.call("tools.list", json!({})).await;
    assert!(r.get("result").is_some(), "{r}");
    terminate(&mut child);
}

/// The CLI prefers `endpoint.sock` and falls back to TCP when the socket is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_falls_back_to_tcp_without_the_endpoint_socket() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = write_config(dir.path());
    let mut serve = serve(&data, &config);
    let socket = data.join("endpoint.sock");
    assert!(socket.exists());
    let (code, _, err) = cli(&["status"], &data);
    assert_eq!(code, 0, "{err}");
    std::fs::remove_file(&socket).unwrap();
    let (code, out, err) = cli(&["status"], &data);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&serve.url), "{out}");
    terminate(&mut serve.child);
}
