//! Issue 11, item 5 (local hardening), through the real binary: the data directory's modes and
//! owner, client-supplied strings in the human log, short tokens, and the approval page behind
//! the operator credential.

use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream, connect_async};

use super::harness::{Runtime, Serve, TOKEN, serve, terminate, write_config};
use super::support::openphone;

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).unwrap().mode() & 0o7777
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `openphone serve` with its human log in `log`, ready (its `endpoint.json` written).
// The child moves into `Serve`, whose Drop reaps it.
#[allow(clippy::zombie_processes)]
fn serve_logged(data: &Path, config: &str, log: &Path) -> Serve {
    let child = openphone()
        .args(["serve", "--listen", "127.0.0.1:0", "--log-format", "human"])
        // The access line carries runtime-supplied text too (request ids): logged here.
        .args(["--access-log", "--config", config, "--data-dir"])
        .arg(data)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    let url = ready(data, &child).expect("serve did not become ready");
    Serve { child, url }
}

/// Polls `endpoint.json` until it names `child` (its URL) or the child exits (`None`).
fn ready(data: &Path, child: &Child) -> Option<String> {
    // Up to 30 s: 1500 polls 20 ms apart (counted, so no clock is read).
    for _ in 0..1500 {
        if let Ok(text) = std::fs::read_to_string(data.join("endpoint.json"))
            && let Ok(info) = serde_json::from_str::<Value>(&text)
            && info["pid"] == json!(child.id())
        {
            return Some(info["url"].as_str().unwrap().to_owned());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// Runs `openphone serve` expecting it to refuse to start: (exit code, stderr). Panics if it
/// becomes ready instead.
fn serve_refused(data: &Path, config: Option<&str>, env: &[(&str, &str)]) -> (i32, String) {
    let mut cmd = openphone();
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(config) = config {
        cmd.args(["--config", config]);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    // Up to 30 s: 1500 polls 20 ms apart.
    for _ in 0..1500 {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            return (status.code().unwrap_or(-1), err);
        }
        if data.join("endpoint.json").exists() {
            let _ = child.kill();
            let _ = child.wait();
            panic!("serve started on {}", data.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("serve neither started nor exited");
}

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A WebSocket with hermes' bearer token that has not said `hello` yet.
async fn connect(url: &str) -> Ws {
    let mut req = url.into_client_request().unwrap();
    req.headers_mut()
        .insert("Authorization", format!("Bearer {TOKEN}").parse().unwrap());
    connect_async(req).await.unwrap().0
}

async fn call(ws: &mut Ws, id: u64, method: &str, params: Value) -> Value {
    let frame = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    ws.send(Message::text(frame.to_string())).await.unwrap();
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(30), ws.next())
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

fn hello(name: &str, version: &str) -> Value {
    json!({"protocol": {"min": 1, "max": 1}, "client": {"name": name, "version": version}})
}

/// Issue 11, item 5: a data directory made before (or loosened since) kept its modes, and the
/// database, its WAL and the tokens stayed readable by every local user.
#[test]
fn an_existing_data_dir_with_loose_modes_is_tightened_at_start() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let config = write_config(tmp.path());
    std::fs::create_dir(&data).unwrap();
    set_mode(&data, 0o755);
    let mut first = serve(&data, &config);
    // SIGKILL: the WAL and shared-memory files stay beside the database.
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    std::fs::write(data.join("daemon.log"), "an older log\n").unwrap();
    for name in ["openphone.db-wal", "openphone.db-shm", "mcp.token"] {
        assert!(data.join(name).exists(), "{name}");
    }
    // What a umask of 022, a copy or a restored backup leaves behind.
    for entry in std::fs::read_dir(&data).unwrap() {
        set_mode(&entry.unwrap().path(), 0o644);
    }
    set_mode(&data, 0o755);

    let mut second = serve(&data, &config);
    assert_eq!(mode(&data), 0o700, "the data directory");
    let mut seen = Vec::new();
    for entry in std::fs::read_dir(&data).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(mode(&path) & 0o077, 0, "{name} is {:o}", mode(&path));
        seen.push(name);
    }
    for name in [
        "openphone.db",
        "openphone.db-wal",
        "openphone.db-shm",
        "openphone.lock",
        "operator.token",
        "mcp.token",
        "mcp-state.key",
        "endpoint.json",
        "endpoint.sock",
        "mcp.sock",
        "daemon.log",
    ] {
        assert!(seen.iter().any(|s| s == name), "{name} missing: {seen:?}");
    }
    assert_eq!(mode(&data.join("openphone.db")), 0o600);
    assert_eq!(mode(&data.join("mcp.token")), 0o600);
    terminate(&mut second.child);
}

/// Issue 11, item 5: a data directory (or a file in it) of another local user must not be
/// used: its owner can read and replace everything the daemon keeps there.
#[test]
fn a_data_dir_owned_by_another_user_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let me = std::fs::metadata(tmp.path()).unwrap().uid();
    let (data, owner) = if me == 0 {
        let data = tmp.path().join("theirs");
        std::fs::create_dir(&data).unwrap();
        std::os::unix::fs::chown(&data, Some(65534), Some(65534)).unwrap();
        (data, 65534)
    } else {
        // Without root no directory can be given away: `/` belongs to root.
        (Path::new("/").to_path_buf(), 0)
    };
    let (code, err) = serve_refused(&data, None, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(&data.display().to_string()), "{err}");
    assert!(err.contains(&format!("uid {owner}")), "{err}");
    assert!(err.contains(&format!("uid {me}")), "{err}");
    if me != 0 {
        return;
    }
    assert_eq!(
        std::fs::read_dir(&data).unwrap().count(),
        0,
        "nothing written"
    );

    // A file in an otherwise good data directory, left by another user.
    let data = tmp.path().join("mine");
    std::fs::create_dir(&data).unwrap();
    set_mode(&data, 0o700);
    let token = data.join("mcp.token");
    std::fs::write(&token, "0123456789abcdef0123456789abcdef").unwrap();
    std::os::unix::fs::chown(&token, Some(65534), Some(65534)).unwrap();
    let (code, err) = serve_refused(&data, None, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(&token.display().to_string()), "{err}");
    assert!(err.contains("uid 65534"), "{err}");
}

/// Issue 11, item 5: newlines in `client.name` (and in runtime-supplied request ids) started
/// forged lines in the human log, and ESC sequences reached the terminal reading it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_characters_in_client_name_cannot_forge_log_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let log = tmp.path().join("serve.log");
    let config = write_config(tmp.path());
    let mut d = serve_logged(&data, &config, &log);
    let forged = "2099-01-01T00:00:00.000000Z  INFO FORGED: the operator approved everything";
    let mut ws = connect(&d.url).await;
    let name = format!("evil\n{forged}\x1b[31m red\u{202e}");
    let answer = call(&mut ws, 1, "hello", hello(&name, "1.0\r\x1b[2J")).await;
    assert_eq!(answer["result"]["runtime"], "hermes", "{answer}");
    let request_id = format!("r1\r\n{forged}\x1b[0m");
    let params = json!({"request_id": request_id, "tool": "openphone.device.status",
        "params": {"reason": "check"}});
    let answer = call(&mut ws, 2, "tools.invoke", params).await;
    assert_eq!(
        answer["result"]["request_id"],
        json!(request_id),
        "{answer}"
    );
    drop(ws);
    terminate(&mut d.child);

    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains('\x1b'), "ESC reached the log:\n{text}");
    assert!(!text.contains('\r'), "CR reached the log:\n{text}");
    assert!(
        !text.contains('\u{202e}'),
        "a bidi override reached the log:\n{text}"
    );
    let forged_lines: Vec<&str> = text.lines().filter(|l| l.starts_with("2099")).collect();
    assert_eq!(forged_lines, Vec::<&str>::new(), "{text}");
    // Both values are there, escaped, on the line that logs them.
    let hello_line = text.lines().find(|l| l.contains("hello")).unwrap();
    assert!(hello_line.contains(r"evil\n2099"), "{hello_line}");
    assert!(hello_line.contains(r"\u{1b}[31m"), "{hello_line}");
    let tool_line = text.lines().find(|l| l.contains("runtime_tool")).unwrap();
    assert!(tool_line.contains(r"r1\r\n2099"), "{tool_line}");
}

/// Issue 11, item 5: a 900 KB `client.name` was accepted and logged whole (27 MB of log in
/// 0.2 s); an MCP host's `clientInfo` likewise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_client_name_is_refused_or_cut() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let log = tmp.path().join("serve.log");
    let config = write_config(tmp.path());
    let mut d = serve_logged(&data, &config, &log);
    let huge = "n".repeat(900_000);
    let mut ws = connect(&d.url).await;
    let answer = call(&mut ws, 1, "hello", hello(&huge, "1")).await;
    assert_eq!(
        answer["error"]["data"]["code"], "invalid_params",
        "{answer}"
    );
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("client.name") && message.contains("256"),
        "{message}"
    );
    let answer = call(&mut ws, 2, "hello", hello("ok", &huge)).await;
    assert_eq!(
        answer["error"]["data"]["code"], "invalid_params",
        "{answer}"
    );
    // The limit is inclusive, and the connection stays open for a good hello.
    let answer = call(&mut ws, 3, "hello", hello(&"n".repeat(256), "1")).await;
    assert_eq!(answer["result"]["runtime"], "hermes", "{answer}");
    drop(ws);

    // MCP's clientInfo is the client's word too: logged cut.
    let token = std::fs::read_to_string(data.join("mcp.token")).unwrap();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": format!("host\n{huge}"), "version": "1\u{1b}[31m"}}})
    .to_string();
    let authority = d
        .url
        .strip_prefix("ws://")
        .unwrap()
        .split('/')
        .next()
        .unwrap();
    let (status, _) = http(
        authority,
        &format!(
            "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{init}",
            token.trim(),
            init.len()
        ),
    );
    assert_eq!(status, 200);
    terminate(&mut d.child);

    let text = std::fs::read_to_string(&log).unwrap();
    let longest = text.lines().max_by_key(|l| l.len()).unwrap();
    let start: String = longest.chars().take(300).collect();
    assert!(
        longest.len() < 1024,
        "a log line of {} bytes: {start}…",
        longest.len()
    );
    assert!(
        text.len() < 64 * 1024,
        "the log grew to {} bytes",
        text.len()
    );
    assert!(text.contains("mcp client initialized"), "{text}");
}

/// Issue 11, item 5: an `mcp.token` of 3 characters, or a blank one, was accepted (and a blank
/// one matched an empty token on `mcp.sock`); configured runtime tokens likewise need length.
#[test]
fn a_short_mcp_token_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    for (case, contents) in [
        ("short", "abc\n"),
        ("blank", "   \n"),
        ("spaced", "0123456789 abcdef0123"),
    ] {
        let data = tmp.path().join(case);
        std::fs::create_dir(&data).unwrap();
        set_mode(&data, 0o700);
        let file = data.join("mcp.token");
        std::fs::write(&file, contents).unwrap();
        let (code, err) = serve_refused(&data, None, &[]);
        assert_eq!(code, 2, "{case}: {err}");
        assert!(err.contains(&file.display().to_string()), "{case}: {err}");
        assert!(err.contains("16"), "{case}: {err}");
    }

    // A configured runtime's token: inline (the file and key named) or from the environment.
    let data = tmp.path().join("configured");
    let config = tmp.path().join("openphone.toml");
    for (text, needles) in [
        (
            "[[runtimes]]\nid = \"hermes\"\ntoken = \"abc\"\n",
            vec![config.display().to_string(), "token".into(), "16".into()],
        ),
        (
            "[[runtimes]]\nid = \"hermes\"\ntoken = \"                    \"\n",
            vec![config.display().to_string(), "token".into()],
        ),
        (
            "[[runtimes]]\nid = \"hermes\"\ntoken_env = \"OPENPHONE_TEST_SHORT\"\n",
            vec!["OPENPHONE_TEST_SHORT".into(), "16".into()],
        ),
    ] {
        std::fs::write(&config, text).unwrap();
        let (code, err) = serve_refused(
            &data,
            Some(config.to_str().unwrap()),
            &[("OPENPHONE_TEST_SHORT", "xyz")],
        );
        assert_eq!(code, 2, "{text}: {err}");
        for needle in needles {
            assert!(err.contains(&needle), "{text}: {needle} not in {err}");
        }
    }
}

/// One HTTP/1.1 exchange on a fresh connection: (status, whole response).
fn http(authority: &str, request: &str) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(authority).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = Vec::new();
    // An SSE stream may stay open: what arrived before the timeout is enough.
    let _ = stream.read_to_end(&mut response);
    let response = String::from_utf8_lossy(&response).into_owned();
    let status = response
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, response)
}

fn get(authority: &str, path: &str, headers: &str) -> (u16, String) {
    http(
        authority,
        &format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\n{headers}Connection: close\r\n\r\n"),
    )
}

fn post_form(authority: &str, path: &str, origin: &str, body: &str) -> (u16, String) {
    http(
        authority,
        &format!(
            "POST {path} HTTP/1.1\r\nHost: {authority}\r\nOrigin: {origin}\r\n\
             Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            body.len()
        ),
    )
}

/// Issue 11, item 5: `GET /confirmations/{id}` needed no credential and showed the request's
/// parameters to any local process that knew (or was handed) the id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_approval_page_needs_the_operator_credential() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let config = write_config(tmp.path());
    let mut d = serve(&data, &config);
    let mut rt = Runtime::connect(&d.url).await;
    let secret = "the spare key is under the mat";
    let params = json!({"request_id": "page-1", "tool": "openphone.memory.save",
        "params": {"text": secret, "reason": "remember"}, "wait": false, "timeout_ms": 600_000});
    let parked = rt.call("tools.invoke", params).await;
    assert_eq!(parked["result"]["status"], "needs_confirmation", "{parked}");
    let cid = parked["result"]["result"]["confirmation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let authority = d
        .url
        .strip_prefix("ws://")
        .unwrap()
        .split('/')
        .next()
        .unwrap();
    let path = format!("/confirmations/{cid}");
    let operator = std::fs::read_to_string(data.join("operator.token")).unwrap();
    let origin = format!("http://{authority}");

    // Without a credential: what is asked, by whom, and how to decide — not the parameters.
    let (status, page) = get(authority, &path, "");
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains(&cid) && page.contains("openphone.memory.save"),
        "{page}"
    );
    assert!(page.contains("hermes"), "{page}");
    assert!(!page.contains("spare key"), "{page}");
    // A runtime's token is not the operator's.
    let (status, page) = get(
        authority,
        &path,
        &format!("Authorization: Bearer {TOKEN}\r\n"),
    );
    assert_eq!(status, 401, "{page}");
    assert!(!page.contains("spare key"), "{page}");
    let (status, page) = post_form(authority, &path, &origin, &format!("token={TOKEN}"));
    assert_eq!(status, 401, "{page}");
    assert!(!page.contains("spare key"), "{page}");

    // With the operator token: the whole request.
    let bearer = format!("Authorization: Bearer {}\r\n", operator.trim());
    let (status, page) = get(authority, &path, &bearer);
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("spare key"), "{page}");
    let (status, page) = post_form(
        authority,
        &path,
        &origin,
        &format!("token={}%0A", operator.trim()),
    );
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("spare key"), "{page}");
    // A web page cannot post the form.
    let (status, page) = post_form(
        authority,
        &path,
        "https://evil.example",
        &format!("token={}", operator.trim()),
    );
    assert_eq!(status, 403, "{page}");
    assert!(!page.contains("spare key"), "{page}");
    drop(rt);
    terminate(&mut d.child);
}
