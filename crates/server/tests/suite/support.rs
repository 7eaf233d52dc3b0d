//! A daemon on a temp data dir and 127.0.0.1:0, and a scripted WebSocket client.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use openphone_server::{Config, Daemon, DaemonOptions, DeviceChoice};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpStream, UnixStream};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream, connect_async};

pub const RUNTIME_TOKEN: &str = "hermes-test-token-0123456789";

pub fn config(extra: &str) -> Config {
    let text = format!(
        r#"
[[runtimes]]
id = "hermes"
token = "{RUNTIME_TOKEN}"
grants = ["safe_read", "private_read", "dangerous"]
{extra}
"#
    );
    Config::parse(&text, "test.toml").unwrap()
}

pub struct Running {
    pub daemon: Daemon,
    pub dir: tempfile::TempDir,
}

impl Running {
    pub fn operator_token(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("operator.token")).unwrap()
    }
    pub fn url(&self) -> String {
        self.daemon.url()
    }
}

pub async fn start(config: Config) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(DaemonOptions {
        data_dir: dir.path().to_path_buf(),
        listen: "127.0.0.1:0".parse().unwrap(),
        device: DeviceChoice::Sim,
        config,
    })
    .await
    .unwrap();
    Running { daemon, dir }
}

/// An `mcp.sock` connection past the token hello and the MCP handshake.
pub struct McpSock {
    lines: tokio::io::Lines<BufReader<OwnedReadHalf>>,
    write: OwnedWriteHalf,
    /// How long [`McpSock::next`] waits for a line.
    wait: Duration,
}

impl McpSock {
    /// Connects to `dir`'s `mcp.sock`, says hello with `token` and initializes as the client
    /// `name` `version`; every line read afterwards is awaited at most `wait`.
    pub async fn open(
        dir: &Path,
        token: &str,
        (name, version): (&str, &str),
        wait: Duration,
    ) -> McpSock {
        let stream = UnixStream::connect(dir.join("mcp.sock")).await.unwrap();
        let (read, write) = stream.into_split();
        let mut socket = McpSock {
            lines: BufReader::new(read).lines(),
            write,
            wait,
        };
        socket
            .send(&json!({"openphone_mcp_hello": {"token": token}}))
            .await;
        let hello = socket.next().await;
        pretty_assertions::assert_eq!(hello["openphone_mcp_hello"], "ok", "{hello}");
        socket
            .send(
                &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": name, "version": version}}}),
            )
            .await;
        let init = socket.response(1).await;
        assert!(init.get("result").is_some(), "{init}");
        socket
            .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        socket
    }

    pub async fn send(&mut self, message: &Value) {
        let line = format!("{message}\n");
        self.write.write_all(line.as_bytes()).await.unwrap();
    }

    pub async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(self.wait, self.lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("no line within {} s", self.wait.as_secs()))
            .unwrap()
            .expect("the socket closed");
        serde_json::from_str(&line).unwrap()
    }

    /// The response to `id`, skipping notifications.
    pub async fn response(&mut self, id: u64) -> Value {
        loop {
            let message = self.next().await;
            if message["id"] == json!(id) {
                return message;
            }
        }
    }
}

/// `_meta["dev.openphone/toolResult"]` of an MCP call's response.
pub fn tool_result_meta(response: &Value) -> &Value {
    &response["result"]["_meta"]["dev.openphone/toolResult"]
}

pub struct Client {
    pub ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    next_id: u64,
    pub events: VecDeque<Value>,
}

/// Connects with an optional bearer token; `Err(status)` when the upgrade is refused.
pub async fn connect(url: &str, token: Option<&str>) -> Result<Client, u16> {
    let mut req = url.into_client_request().unwrap();
    if let Some(t) = token {
        req.headers_mut()
            .insert("Authorization", format!("Bearer {t}").parse().unwrap());
    }
    match connect_async(req).await {
        Ok((ws, _)) => Ok(Client {
            ws,
            next_id: 0,
            events: VecDeque::new(),
        }),
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => Err(resp.status().as_u16()),
        Err(e) => panic!("connect: {e}"),
    }
}

impl Client {
    /// A client over an already upgraded socket.
    pub fn from_stream(ws: WebSocketStream<MaybeTlsStream<TcpStream>>) -> Client {
        Client {
            ws,
            next_id: 0,
            events: VecDeque::new(),
        }
    }

    pub async fn send_raw(&mut self, text: &str) {
        self.ws.send(Message::text(text)).await.unwrap();
    }

    /// The next JSON message (skipping pings); `None` on close.
    pub async fn next_json(&mut self) -> Option<Value> {
        loop {
            let msg = tokio::time::timeout(std::time::Duration::from_secs(20), self.ws.next())
                .await
                .expect("no message within 20 s")?;
            match msg {
                Ok(Message::Text(t)) => return Some(serde_json::from_str(t.as_str()).unwrap()),
                Ok(Message::Close(_)) | Err(_) => return None,
                Ok(_) => continue,
            }
        }
    }

    /// The close code the server sends next (skipping other frames).
    pub async fn close_code(&mut self) -> Option<u16> {
        loop {
            let msg = tokio::time::timeout(std::time::Duration::from_secs(20), self.ws.next())
                .await
                .expect("no close within 20 s");
            match msg {
                Some(Ok(Message::Close(Some(frame)))) => return Some(frame.code.into()),
                Some(Ok(Message::Close(None))) | None | Some(Err(_)) => return None,
                Some(Ok(_)) => continue,
            }
        }
    }

    pub async fn request(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        let frame = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_raw(&frame.to_string()).await;
        id
    }

    /// The next event notification (those set aside while waiting for responses first).
    pub async fn next_event(&mut self) -> Value {
        if let Some(e) = self.events.pop_front() {
            return e;
        }
        loop {
            let m = self.next_json().await.expect("connection closed");
            if m.get("method").and_then(Value::as_str) == Some("event") {
                return m;
            }
        }
    }

    /// Waits for the response to `id`, keeping events aside.
    pub async fn response(&mut self, id: u64) -> Value {
        loop {
            let msg = self.next_json().await.expect("connection closed");
            if msg.get("method").and_then(Value::as_str) == Some("event") {
                self.events.push_back(msg);
                continue;
            }
            if msg["id"] == json!(id) {
                return msg;
            }
        }
    }

    /// Calls a method and returns the whole response (result or error).
    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params).await;
        self.response(id).await
    }

    pub async fn hello(&mut self) -> Value {
        let r = self
            .call(
                "hello",
                json!({"protocol": {"min": 1, "max": 1}, "client": {"name": "test", "version": "0"}}),
            )
            .await;
        assert!(r.get("result").is_some(), "hello failed: {r}");
        r["result"].clone()
    }
}

pub fn error_code(resp: &Value) -> (i64, String) {
    (
        resp["error"]["code"].as_i64().unwrap_or(0),
        resp["error"]["data"]["code"]
            .as_str()
            .unwrap_or("")
            .to_owned(),
    )
}

/// An HTTP answer read off the socket.
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC message of the body: plain JSON, or the last `data:` line of an SSE body.
    pub fn json(&self) -> Value {
        if let Ok(v) = serde_json::from_str(&self.body) {
            return v;
        }
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .rfind(|v| v.get("id").is_some())
            .unwrap_or_else(|| panic!("no JSON-RPC message in {:?}", self.body))
    }
}

fn dechunk(raw: &str) -> String {
    let mut out = String::new();
    let mut rest = raw;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || after.len() < n {
            break;
        }
        out.push_str(&after[..n]);
        rest = after[n..].strip_prefix("\r\n").unwrap_or(&after[n..]);
    }
    out
}

/// One HTTP/1.1 request to `path` on a fresh connection (`Connection: close`); `Host` is the
/// daemon's unless given, `Content-Length` unless a `Transfer-Encoding` is.
pub async fn http_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if !headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("transfer-encoding"))
    {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).await.unwrap();
    // The server may answer (413) before reading the whole body; a reset then is fine.
    let _ = s.write_all(body).await;
    let mut raw = Vec::new();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(30), s.read_to_end(&mut raw)).await;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Reply {
        status,
        headers,
        body,
    }
}
