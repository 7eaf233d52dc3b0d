//! The CLI as a client of the daemon: finds it via `<data-dir>/endpoint.json` and
//! `operator.token`, says `hello` as the operator, and calls methods. Requests are built from
//! and answers parsed into the endpoint's types (`openphone_protocol::endpoint`), so the CLI
//! reads the same shapes the daemon writes.
//!
//! It connects over `endpoint.sock` when `endpoint.json` names it and it accepts (the user's
//! own way in, outside the TCP port's connection caps, so a flood of strangers cannot lock the
//! operator out), and over TCP otherwise.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use futures_util::{SinkExt, StreamExt};
use openphone_protocol::ErrorCode;
use openphone_protocol::endpoint::{
    ClientInfo, EndpointErrorCode, ErrorData, Event, Hello, HelloParams, HelloResult, Method,
    Request, RequestId, ServerMessage, VersionRange,
};
use openphone_server::{ENDPOINT_FILE, EndpointInfo, TOKEN_FILE};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpStream, UnixStream};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{WebSocketStream, client_async};

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
    /// The stable code of `error.data.code`.
    pub code: EndpointErrorCode,
    pub message: String,
}

impl std::fmt::Display for RpcFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code.as_str())
    }
}

impl std::error::Error for RpcFailure {}

/// A byte stream to the daemon: `endpoint.sock` or TCP.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// The WebSocket to the daemon, over either stream.
type Ws = WebSocketStream<Box<dyn Io>>;

/// The URL the upgrade names on `endpoint.sock` (the socket itself is the address).
const SOCKET_URL: &str = "ws://localhost/v1/runtime";

/// One operator connection to the daemon's endpoint.
pub struct DaemonClient {
    ws: Ws,
    next_id: u64,
    /// Events that arrived while waiting for a response.
    events: VecDeque<Event>,
    /// What `endpoint.json` says about the daemon.
    pub endpoint: EndpointInfo,
    /// The daemon's answer to `hello`.
    pub hello: HelloResult,
}

fn read_endpoint(dir: &Path) -> Result<EndpointInfo> {
    let no_daemon = || NoDaemon(dir.to_path_buf());
    let text = std::fs::read_to_string(dir.join(ENDPOINT_FILE)).map_err(|_| no_daemon())?;
    let info: EndpointInfo = serde_json::from_str(&text).map_err(|_| no_daemon())?;
    Ok(info)
}

/// The operator token of `dir`.
fn read_token(dir: &Path) -> Result<String> {
    let path = dir.join(TOKEN_FILE);
    let token =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    Ok(token.trim().to_owned())
}

/// Opens the stream to the daemon and the upgrade request for it: `endpoint.sock` when
/// `endpoint.json` names one that accepts (its file mode authenticates the user's account;
/// the operator token is sent too when readable), else the TCP URL with the operator token.
async fn open(dir: &Path, endpoint: &EndpointInfo) -> Result<(Box<dyn Io>, String, String)> {
    if let Some(path) = &endpoint.socket
        && let Ok(stream) = UnixStream::connect(path).await
    {
        let token = read_token(dir).unwrap_or_default();
        return Ok((Box::new(stream), SOCKET_URL.to_owned(), token));
    }
    let token = read_token(dir)?;
    let url = endpoint.url.clone();
    let req = url
        .as_str()
        .into_client_request()
        .context("bad endpoint url")?;
    let authority = req
        .uri()
        .authority()
        .context("the endpoint url names no host")?;
    let addr = match authority.port_u16() {
        Some(_) => authority.as_str().to_owned(),
        None => format!("{}:80", authority.host()),
    };
    let stream = TcpStream::connect(addr.as_str())
        .await
        .map_err(|_| NoDaemon(dir.to_path_buf()))?;
    let _ = stream.set_nodelay(true);
    Ok((Box::new(stream), url, token))
}

/// Reads the next frame the daemon sends, skipping non-text frames.
async fn next_message(ws: &mut Ws) -> Result<ServerMessage> {
    loop {
        let Some(msg) = ws.next().await else {
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
            Message::Binary(_) | Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {
                continue;
            }
        };
        return ServerMessage::parse(text.as_str()).context("the daemon sent an unexpected frame");
    }
}

impl DaemonClient {
    /// Connects to the daemon serving `dir` and says hello as the operator.
    pub async fn connect(dir: &Path) -> Result<DaemonClient> {
        let endpoint = read_endpoint(dir)?;
        let (stream, url, token) = open(dir, &endpoint).await?;
        let mut req = url
            .as_str()
            .into_client_request()
            .context("bad endpoint url")?;
        if !token.is_empty() {
            req.headers_mut().insert(
                "Authorization",
                format!("Bearer {token}")
                    .parse()
                    .context("bad operator token")?,
            );
        }
        let (mut ws, _) = match client_async(req, stream).await {
            Ok(ok) => ok,
            Err(tokio_tungstenite::tungstenite::Error::Io(_)) => {
                return Err(NoDaemon(dir.to_path_buf()).into());
            }
            Err(e) => return Err(e).context("connecting to the daemon"),
        };
        let mut events = VecDeque::new();
        let hello = exchange::<Hello>(
            &mut ws,
            &mut events,
            1,
            HelloParams {
                protocol: VersionRange {
                    min: openphone_protocol::MIN_VERSION,
                    max: openphone_protocol::MAX_VERSION,
                },
                client: ClientInfo {
                    name: "openphone-cli".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                },
                token: None,
            },
        )
        .await?;
        Ok(DaemonClient {
            ws,
            next_id: 1,
            events,
            endpoint,
            hello,
        })
    }

    /// Calls method `M`; a JSON-RPC error becomes an [`RpcFailure`].
    pub async fn call<M: Method>(&mut self, params: M::Params) -> Result<M::Result> {
        self.next_id += 1;
        exchange::<M>(&mut self.ws, &mut self.events, self.next_id, params).await
    }

    /// The next event notification.
    pub async fn next_event(&mut self) -> Result<Event> {
        if let Some(e) = self.events.pop_front() {
            return Ok(e);
        }
        loop {
            match next_message(&mut self.ws).await? {
                ServerMessage::Event(n) => return Ok(n.params.event),
                ServerMessage::Response(_) | ServerMessage::Error(_) => {}
            }
        }
    }

    /// Closes the connection politely.
    pub async fn close(mut self) {
        let _ = self.ws.close(None).await;
    }
}

/// Sends request `id` for method `M` and waits for its answer, keeping the events that arrive
/// meanwhile in `events`.
async fn exchange<M: Method>(
    ws: &mut Ws,
    events: &mut VecDeque<Event>,
    id: u64,
    params: M::Params,
) -> Result<M::Result> {
    let frame = serde_json::to_string(&Request::new::<M>(id, params))
        .with_context(|| format!("writing a {} request", M::NAME))?;
    let ours = RequestId::from(id);
    // A `rate_limited` answer means the daemon refused the request before running it, so the
    // same frame is sent again after the wait the daemon names, a bounded number of times.
    let mut waited_ms = 0u64;
    'send: loop {
        ws.send(Message::text(frame.as_str()))
            .await
            .context("sending to the daemon")?;
        loop {
            match next_message(ws).await? {
                ServerMessage::Event(n) => events.push_back(n.params.event),
                ServerMessage::Response(r) if r.id == ours => {
                    return r.result_as::<M>().with_context(|| {
                        format!("the daemon's answer to {} is malformed", M::NAME)
                    });
                }
                ServerMessage::Error(e) if e.id.as_ref() == Some(&ours) => {
                    if let Some(wait) = rate_limit_wait(&e.error.data, waited_ms) {
                        waited_ms += wait;
                        tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
                        continue 'send;
                    }
                    return Err(RpcFailure {
                        code: e.error.data.code,
                        message: e.error.message,
                    }
                    .into());
                }
                ServerMessage::Response(_) | ServerMessage::Error(_) => {}
            }
        }
    }
}

/// The most a command waits in total for the daemon's rate limit before it reports it.
const RATE_LIMIT_PATIENCE_MS: u64 = 10_000;

/// How long to wait before sending a `rate_limited` request again, or `None` when the error is
/// something else or the command has already waited `RATE_LIMIT_PATIENCE_MS`.
fn rate_limit_wait(data: &ErrorData, waited_ms: u64) -> Option<u64> {
    if data.code != EndpointErrorCode::Catalogue(ErrorCode::RateLimited)
        || waited_ms >= RATE_LIMIT_PATIENCE_MS
    {
        return None;
    }
    let wait = data.retry_after_ms.unwrap_or(100).clamp(10, 2_000);
    Some(wait.min(RATE_LIMIT_PATIENCE_MS - waited_ms))
}
