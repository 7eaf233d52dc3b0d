//! The CLI as a client of the daemon: finds it via `<data-dir>/endpoint.json` and
//! `operator.token`, says `hello` as the operator, and calls methods.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use futures_util::{SinkExt, StreamExt};
use openphone_server::{ENDPOINT_FILE, EndpointInfo, TOKEN_FILE};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream, connect_async};

/// No daemon serves the data directory (exit 2 with one line).
#[derive(Debug)]
pub struct NoDaemon(pub PathBuf);

impl std::fmt::Display for NoDaemon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let dir = self.0.display();
        write!(
            f,
            "no daemon for {dir}: start one with `openphone serve --data-dir {dir}`"
        )
    }
}

impl std::error::Error for NoDaemon {}

/// A JSON-RPC error answered by the daemon.
#[derive(Debug)]
pub struct RpcFailure {
    pub code: String,
    pub message: String,
}

impl std::fmt::Display for RpcFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for RpcFailure {}

pub struct DaemonClient {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    next_id: u64,
    /// Event notifications that arrived while waiting for a response.
    events: std::collections::VecDeque<Value>,
    pub endpoint: EndpointInfo,
    pub hello: Value,
}

fn read_endpoint(dir: &Path) -> Result<(EndpointInfo, String)> {
    let no_daemon = || NoDaemon(dir.to_path_buf());
    let text = std::fs::read_to_string(dir.join(ENDPOINT_FILE)).map_err(|_| no_daemon())?;
    let info: EndpointInfo = serde_json::from_str(&text).map_err(|_| no_daemon())?;
    let token = std::fs::read_to_string(dir.join(TOKEN_FILE))
        .with_context(|| format!("reading {}", dir.join(TOKEN_FILE).display()))?;
    Ok((info, token.trim().to_owned()))
}

impl DaemonClient {
    /// Connects to the daemon serving `dir` and says hello as the operator.
    pub async fn connect(dir: &Path) -> Result<DaemonClient> {
        let (endpoint, token) = read_endpoint(dir)?;
        let mut req = endpoint
            .url
            .as_str()
            .into_client_request()
            .context("bad endpoint url")?;
        req.headers_mut().insert(
            "Authorization",
            format!("Bearer {token}")
                .parse()
                .context("bad operator token")?,
        );
        let (ws, _) = match connect_async(req).await {
            Ok(ok) => ok,
            Err(tokio_tungstenite::tungstenite::Error::Io(_)) => {
                return Err(NoDaemon(dir.to_path_buf()).into());
            }
            Err(e) => return Err(e).context("connecting to the daemon"),
        };
        let mut client = DaemonClient {
            ws,
            next_id: 0,
            events: std::collections::VecDeque::new(),
            endpoint,
            hello: Value::Null,
        };
        client.hello = client
            .call(
                "hello",
                json!({
                    "protocol": {"min": openphone_protocol::MIN_VERSION, "max": openphone_protocol::MAX_VERSION},
                    "client": {"name": "openphone-cli", "version": env!("CARGO_PKG_VERSION")},
                }),
            )
            .await?;
        Ok(client)
    }

    /// Calls a method; a JSON-RPC error becomes an [`RpcFailure`].
    pub async fn call(&mut self, method: &str, params: Value) -> Result<Value> {
        self.next_id += 1;
        let id = self.next_id;
        let frame = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.ws
            .send(Message::text(frame.to_string()))
            .await
            .context("sending to the daemon")?;
        loop {
            let Some(msg) = self.ws.next().await else {
                bail!("the daemon closed the connection");
            };
            let text = match msg.context("reading from the daemon")? {
                Message::Text(t) => t,
                Message::Close(frame) => {
                    bail!(
                        "the daemon closed the connection{}",
                        frame.map(|f| format!(": {}", f.reason)).unwrap_or_default()
                    )
                }
                _ => continue,
            };
            let value: Value =
                serde_json::from_str(text.as_str()).context("daemon sent non-JSON")?;
            if value.get("method").and_then(Value::as_str) == Some("event") {
                self.events.push_back(value["params"].clone());
                continue;
            }
            if value.get("id") != Some(&json!(id)) {
                continue;
            }
            if let Some(err) = value.get("error") {
                return Err(RpcFailure {
                    code: err["data"]["code"].as_str().unwrap_or("error").to_owned(),
                    message: err["message"].as_str().unwrap_or("").to_owned(),
                }
                .into());
            }
            return Ok(value.get("result").cloned().unwrap_or(Value::Null));
        }
    }

    /// The next event notification's `{event, payload, seq}`.
    pub async fn next_event(&mut self) -> Result<Value> {
        if let Some(e) = self.events.pop_front() {
            return Ok(e);
        }
        loop {
            let Some(msg) = self.ws.next().await else {
                bail!("the daemon closed the connection");
            };
            if let Message::Text(t) = msg.context("reading from the daemon")? {
                let value: Value =
                    serde_json::from_str(t.as_str()).context("daemon sent non-JSON")?;
                if value.get("method").and_then(Value::as_str) == Some("event") {
                    return Ok(value["params"].clone());
                }
            }
        }
    }

    pub async fn close(mut self) {
        let _ = self.ws.close(None).await;
    }
}
