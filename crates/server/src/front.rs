//! The front door: every connection is admitted or refused before any HTTP is parsed, so a
//! flood of peers that never authenticate cannot exhaust the daemon (issue 11).
//!
//! accept → admit (the total cap and the unauthenticated cap; over either: 503 and close) →
//! HTTP/1.1 with a header read timeout → a [`Ticket`] in every request's extensions → the
//! ticket is marked authenticated (a valid bearer on the upgrade, a successful `hello`, an
//! `/mcp` request past its guard) or the connection is closed at its hello deadline.
//!
//! `endpoint.sock` (mode 0600 in the data directory) serves the same endpoint beside the TCP
//! port, outside the caps: only the user's account can open it, so the operator always has a
//! way in. A peer running as the daemon's user is the operator without a token (the socket's
//! file mode is the credential); any other peer (root) authenticates as on TCP.
//!
//! Events about unauthenticated peers are logged at most once a second per kind, with the
//! count of those left out, and never written to the audit log.
//!
//! Small answers leave at once: every accepted TCP socket has `TCP_NODELAY`, and on Linux it
//! acknowledges what it has read as soon as it would wait for more ([`Tcp`]), so a client that
//! writes a request's headers and body separately without `TCP_NODELAY` does not wait ~40 ms
//! for our delayed ACK before its body may leave (issue 13).

use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::http::HeaderValue;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream, UnixListener};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::config::Limits;
use crate::daemon::stopped;
use crate::lock::lock;
use crate::state::AppState;

/// `<data-dir>/endpoint.sock`: the endpoint on a Unix socket, for the user's own clients.
pub const ENDPOINT_SOCKET_FILE: &str = "endpoint.sock";

/// Descriptors kept free below the process's limit for the store, the listeners, the MCP
/// socket, logs and the operator's own connections.
const RESERVED_DESCRIPTORS: u64 = 64;

/// The answer to a connection over a cap, written without waiting before it is closed.
const REFUSAL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\n\
content-type: text/plain\r\ncontent-length: 38\r\n\r\ntoo many connections; try again later\n";

/// Where a connection came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Door {
    /// The TCP port: counted against the caps, closed at its deadline unless authenticated.
    Tcp,
    /// `endpoint.sock`; `owner`: the peer runs as the daemon's user.
    Local { owner: bool },
}

/// One connection's place in the caps, shared by its HTTP connection and, after an upgrade,
/// its WebSocket. Dropping the last holder frees the places.
#[derive(Debug)]
pub struct Ticket {
    door: Door,
    hello_deadline: Instant,
    _total: Option<OwnedSemaphorePermit>,
    unauthenticated: Mutex<Option<OwnedSemaphorePermit>>,
    authenticated: AtomicBool,
}

impl Ticket {
    fn new(
        door: Door,
        hello_timeout: Duration,
        total: Option<OwnedSemaphorePermit>,
        unauthenticated: Option<OwnedSemaphorePermit>,
    ) -> Ticket {
        Ticket {
            door,
            // The deadline of a timer started now: no clock is read.
            hello_deadline: tokio::time::sleep(hello_timeout).deadline(),
            _total: total,
            unauthenticated: Mutex::new(unauthenticated),
            authenticated: AtomicBool::new(false),
        }
    }

    /// Where the connection came in.
    pub fn door(&self) -> Door {
        self.door
    }

    /// When a connection that has not authenticated (or said `hello`) is closed.
    pub fn hello_deadline(&self) -> Instant {
        self.hello_deadline
    }

    /// The peer proved a credential: its unauthenticated place is freed.
    pub fn authenticated(&self) {
        self.authenticated.store(true, Ordering::SeqCst);
        lock(&self.unauthenticated).take();
    }

    pub fn is_authenticated(&self) -> bool {
        self.authenticated.load(Ordering::SeqCst)
    }
}

/// What an unauthenticated peer did, for the rate-limited log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unauthenticated {
    /// A connection refused because a cap was reached.
    Refused,
    /// A connection closed because it did not authenticate in time.
    HelloTimeout,
    /// A connection cut off because its request headers came too slowly.
    SlowHeaders,
    /// A frame over the size limit before `hello`.
    OversizeFrame,
    /// A wrong token on the upgrade or in `hello`.
    WrongToken,
    /// An upgrade from a web page whose `Origin` is not allowed.
    ForeignOrigin,
}

impl Unauthenticated {
    const ALL: [Unauthenticated; 6] = [
        Unauthenticated::Refused,
        Unauthenticated::HelloTimeout,
        Unauthenticated::SlowHeaders,
        Unauthenticated::OversizeFrame,
        Unauthenticated::WrongToken,
        Unauthenticated::ForeignOrigin,
    ];

    fn index(self) -> usize {
        match self {
            Unauthenticated::Refused => 0,
            Unauthenticated::HelloTimeout => 1,
            Unauthenticated::SlowHeaders => 2,
            Unauthenticated::OversizeFrame => 3,
            Unauthenticated::WrongToken => 4,
            Unauthenticated::ForeignOrigin => 5,
        }
    }

    fn message(self) -> &'static str {
        match self {
            Unauthenticated::Refused => {
                "connection refused (503): the connection caps are reached ([limits] max_connections, max_unauthenticated)"
            }
            Unauthenticated::HelloTimeout => {
                "unauthenticated connection closed: no hello within [limits] hello_timeout_ms"
            }
            Unauthenticated::SlowHeaders => {
                "connection cut off: request headers not complete within [limits] header_read_timeout_ms"
            }
            Unauthenticated::OversizeFrame => {
                "frame over the size limit before hello; closing with 1009 (not audited)"
            }
            Unauthenticated::WrongToken => "wrong token refused",
            Unauthenticated::ForeignOrigin => {
                "upgrade from a foreign Origin refused (403); allow it in [endpoint] extra_allowed_origins"
            }
        }
    }
}

/// Lets one log line a second through and counts the others.
#[derive(Debug, Default)]
struct LogGate(Mutex<GateState>);

#[derive(Debug, Default)]
struct GateState {
    next_ms: i64,
    suppressed: u64,
}

impl LogGate {
    /// `Some(lines left out since the last one)` when a line may be written now.
    fn pass(&self, now_ms: i64) -> Option<u64> {
        let mut g = lock(&self.0);
        if now_ms >= g.next_ms {
            g.next_ms = now_ms.saturating_add(1000);
            Some(std::mem::take(&mut g.suppressed))
        } else {
            g.suppressed += 1;
            None
        }
    }
}

/// The caps, the timeouts, the allowed origins and the log of unauthenticated peers.
#[derive(Debug)]
pub struct Front {
    total: Arc<Semaphore>,
    unauthenticated: Arc<Semaphore>,
    max_connections: usize,
    max_unauthenticated: usize,
    hello_timeout: Duration,
    header_read_timeout: Duration,
    extra_origins: Vec<String>,
    gates: [LogGate; Unauthenticated::ALL.len()],
}

impl Front {
    /// The front door for these limits. `descriptors`: the process's descriptor limit, which
    /// lowers the connection cap so that accepting never runs out of descriptors.
    pub fn new(limits: &Limits, extra_origins: Vec<String>, descriptors: Option<u64>) -> Front {
        let mut max_connections = limits.max_connections.max(1);
        if let Some(limit) = descriptors {
            let fits = usize::try_from(limit.saturating_sub(RESERVED_DESCRIPTORS).max(1))
                .unwrap_or(usize::MAX);
            if fits < max_connections {
                tracing::warn!(
                    configured = max_connections,
                    descriptor_limit = limit,
                    effective = fits,
                    "max_connections lowered to fit the descriptor limit"
                );
                max_connections = fits;
            }
        }
        let max_unauthenticated = limits.max_unauthenticated.clamp(1, max_connections);
        Front {
            total: Arc::new(Semaphore::new(max_connections)),
            unauthenticated: Arc::new(Semaphore::new(max_unauthenticated)),
            max_connections,
            max_unauthenticated,
            hello_timeout: Duration::from_millis(limits.hello_timeout_ms),
            header_read_timeout: Duration::from_millis(limits.header_read_timeout_ms),
            extra_origins,
            gates: Default::default(),
        }
    }

    /// The cap on TCP connections in force (after the descriptor limit).
    pub fn max_connections(&self) -> usize {
        self.max_connections
    }

    /// The cap on unauthenticated TCP connections in force.
    pub fn max_unauthenticated(&self) -> usize {
        self.max_unauthenticated
    }

    /// How long a connection may take to authenticate.
    pub fn hello_timeout(&self) -> Duration {
        self.hello_timeout
    }

    /// A place for a new TCP connection, or `None` when a cap is reached.
    fn admit(&self) -> Option<Ticket> {
        let total = self.total.clone().try_acquire_owned().ok()?;
        let unauthenticated = self.unauthenticated.clone().try_acquire_owned().ok()?;
        Some(Ticket::new(
            Door::Tcp,
            self.hello_timeout,
            Some(total),
            Some(unauthenticated),
        ))
    }

    /// Whether an upgrade's `Origin` is accepted: a loopback origin or a configured one.
    pub fn origin_allowed(&self, origin: &HeaderValue) -> bool {
        origin
            .to_str()
            .is_ok_and(|o| crate::mcp::origin_allowed(o, &self.extra_origins))
    }

    /// Logs what an unauthenticated peer did, at most once a second per kind.
    pub fn note(&self, now_ms: i64, what: Unauthenticated) {
        if let Some(suppressed) = self.gates[what.index()].pass(now_ms) {
            tracing::warn!(suppressed_since_last = suppressed, "{}", what.message());
        }
    }
}

/// Raises the process's soft descriptor limit to its hard limit; returns the soft limit in
/// force afterwards (`None`: unlimited).
pub fn raise_descriptor_limit() -> Option<u64> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let now = getrlimit(Resource::Nofile);
    if now.current == now.maximum {
        return now.current;
    }
    let raised = Rlimit {
        current: now.maximum,
        maximum: now.maximum,
    };
    match setrlimit(Resource::Nofile, raised) {
        Ok(()) => {
            tracing::info!(
                from = now.current,
                to = now.maximum,
                "descriptor limit raised"
            );
            now.maximum
        }
        Err(e) => {
            tracing::warn!(error = %e, limit = now.current, "the descriptor limit could not be raised");
            now.current
        }
    }
}

/// Binds `endpoint.sock` in `data_dir` with mode 0600, replacing a stale one.
pub fn bind_socket(data_dir: &Path) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::PermissionsExt;
    let path = data_dir.join(ENDPOINT_SOCKET_FILE);
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let listener = UnixListener::bind(&path)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// A listener the front door serves.
#[derive(Debug)]
pub enum Listener {
    /// The TCP port, behind the caps.
    Tcp(TcpListener),
    /// `endpoint.sock`.
    Local(UnixListener),
}

/// A byte stream of either door.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

impl Listener {
    /// The next admitted connection; `Ok(None)` when one was refused.
    async fn accept(&self, state: &AppState) -> std::io::Result<Option<(Box<dyn Io>, Ticket)>> {
        match self {
            Listener::Tcp(listener) => {
                let (stream, _) = listener.accept().await?;
                match state.front.admit() {
                    Some(ticket) => Ok(Some((Box::new(Tcp::new(stream)), ticket))),
                    None => {
                        refuse(stream);
                        state
                            .front
                            .note(state.bridge.now_ms(), Unauthenticated::Refused);
                        Ok(None)
                    }
                }
            }
            Listener::Local(listener) => {
                let (stream, _) = listener.accept().await?;
                let me = rustix::process::getuid().as_raw();
                let owner = stream.peer_cred().is_ok_and(|c| c.uid() == me);
                let ticket =
                    Ticket::new(Door::Local { owner }, state.front.hello_timeout, None, None);
                Ok(Some((Box::new(stream), ticket)))
            }
        }
    }
}

/// An accepted TCP connection: `TCP_NODELAY` (an answer's last segment never waits for the
/// peer's ACK of the one before) and, where the OS has it, `TCP_QUICKACK` re-armed whenever a
/// read that consumed data is followed by a wait for more. Linux otherwise delays the ACK of a
/// request's first segment by up to 40 ms in the hope of sending it with the answer; a client
/// that sent its headers alone without `TCP_NODELAY` cannot send its body until that ACK
/// arrives, so every such request would stall for the delayed-ACK timer.
#[derive(Debug)]
pub struct Tcp {
    stream: TcpStream,
    /// Data was read since the last acknowledgement was pushed out.
    unacknowledged: bool,
}

impl Tcp {
    /// Wraps an accepted stream and turns `TCP_NODELAY` on.
    pub fn new(stream: TcpStream) -> Tcp {
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "TCP_NODELAY could not be set on a connection");
        }
        Tcp {
            stream,
            unacknowledged: false,
        }
    }

    /// Sends the ACK of everything read so far now instead of at the delayed-ACK timer.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn acknowledge(&self) {
        if let Err(e) = rustix::net::sockopt::set_tcp_quickack(&self.stream, true) {
            tracing::debug!(error = %e, "TCP_QUICKACK could not be set on a connection");
        }
    }

    /// Other systems: nothing to push (the delayed ACK stays as the OS has it).
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    fn acknowledge(&self) {}
}

impl AsyncRead for Tcp {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let poll = Pin::new(&mut this.stream).poll_read(cx, buf);
        match &poll {
            Poll::Ready(Ok(())) if buf.filled().len() > before => this.unacknowledged = true,
            Poll::Pending if this.unacknowledged => {
                this.unacknowledged = false;
                this.acknowledge();
            }
            _ => {}
        }
        poll
    }
}

impl AsyncWrite for Tcp {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

/// Answers 503 if the socket takes it at once, then closes.
fn refuse(stream: TcpStream) {
    let _ = stream.try_write(REFUSAL);
}

/// Serves `listener` with `app` until shutdown, then lets open HTTP connections finish (at
/// most 10 s). Upgraded WebSockets live on in their own tasks.
pub async fn serve(state: Arc<AppState>, listener: Listener, app: Router) {
    let mut stop = state.shutdown.clone();
    let mut tasks: JoinSet<()> = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept(&state) => match accepted {
                Ok(Some((io, ticket))) => {
                    tasks.spawn(connection(state.clone(), io, Arc::new(ticket), app.clone()));
                }
                Ok(None) => {}
                Err(e) => {
                    // Out of descriptors or a transient error: wait a little, keep serving.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            () = stopped(&mut stop) => break,
        }
    }
    drop(listener);
    let drained = tokio::time::timeout(Duration::from_secs(10), async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tasks.abort_all();
    }
}

/// One HTTP/1.1 connection: the header read timeout, the ticket in every request, the
/// deadline of an unauthenticated TCP connection, graceful shutdown.
async fn connection(state: Arc<AppState>, io: Box<dyn Io>, ticket: Arc<Ticket>, app: Router) {
    let for_requests = ticket.clone();
    let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
        req.extensions_mut().insert(for_requests.clone());
        let mut app = app.clone();
        tower_service::Service::call(&mut app, req)
    });
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(state.front.header_read_timeout);
    let conn = http
        .serve_connection(TokioIo::new(io), service)
        .with_upgrades();
    let mut conn = std::pin::pin!(conn);
    let deadline = tokio::time::sleep_until(ticket.hello_deadline());
    let mut deadline = std::pin::pin!(deadline);
    let mut watching = ticket.door() == Door::Tcp;
    let mut stop = state.shutdown.clone();
    let mut closing = false;
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    if e.is_timeout() {
                        state.front.note(state.bridge.now_ms(), Unauthenticated::SlowHeaders);
                    } else {
                        tracing::debug!(error = %e, "http connection ended");
                    }
                }
                return;
            }
            () = deadline.as_mut(), if watching => {
                if !ticket.is_authenticated() {
                    state.front.note(state.bridge.now_ms(), Unauthenticated::HelloTimeout);
                    return;
                }
                watching = false;
            }
            () = stopped(&mut stop), if !closing => {
                conn.as_mut().graceful_shutdown();
                closing = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_log_gate_passes_one_line_a_second_and_counts_the_rest() {
        let gate = LogGate::default();
        assert_eq!(gate.pass(10_000), Some(0));
        assert_eq!(gate.pass(10_001), None);
        assert_eq!(gate.pass(10_999), None);
        assert_eq!(gate.pass(11_000), Some(2));
        assert_eq!(gate.pass(11_500), None);
    }

    #[tokio::test]
    async fn the_caps_admit_up_to_their_size_and_free_places_on_drop() {
        let limits = Limits {
            max_connections: 3,
            max_unauthenticated: 2,
            ..Limits::default()
        };
        let front = Front::new(&limits, Vec::new(), None);
        let a = front.admit().unwrap();
        let b = front.admit().unwrap();
        // Two unauthenticated: the third waits for one to authenticate.
        assert!(front.admit().is_none());
        a.authenticated();
        let c = front.admit().unwrap();
        // Three in all.
        c.authenticated();
        assert!(front.admit().is_none());
        drop(b);
        assert!(front.admit().is_some());
        drop((a, c));
    }

    #[test]
    fn the_connection_cap_fits_the_descriptor_limit() {
        let limits = Limits::default();
        let front = Front::new(&limits, Vec::new(), Some(256));
        assert_eq!(front.max_connections(), 192);
        assert_eq!(front.max_unauthenticated(), 128);
        let front = Front::new(&limits, Vec::new(), Some(100));
        assert_eq!(front.max_connections(), 36);
        assert_eq!(front.max_unauthenticated(), 36);
        let front = Front::new(&limits, Vec::new(), None);
        assert_eq!(front.max_connections(), limits.max_connections);
    }

    /// The kernel reports `TCP_QUICKACK` as on unless the socket is in its delayed-ACK
    /// ("ping-pong") mode: put into that mode, the wrapper must take it out once it has read
    /// data and is about to wait for more.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[tokio::test]
    async fn a_read_followed_by_a_wait_pushes_the_ack_out() {
        use rustix::net::sockopt::{set_tcp_quickack, tcp_quickack};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (accepted, _) = listener.accept().await.unwrap();
        let mut server = Tcp::new(accepted);
        assert!(server.stream.nodelay().unwrap());
        set_tcp_quickack(&server.stream, false).unwrap();
        assert!(!tcp_quickack(&server.stream).unwrap());

        client.write_all(b"POST / HTTP/1.1\r\n").await.unwrap();
        let mut buf = [0u8; 64];
        let n = server.read(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"POST / HTTP/1.1\r\n");
        // Reading alone changes nothing; the wait for more does.
        assert!(!tcp_quickack(&server.stream).unwrap());
        let waited = std::future::poll_fn(|cx| {
            let mut rb = ReadBuf::new(&mut buf);
            Poll::Ready(Pin::new(&mut server).poll_read(cx, &mut rb).is_pending())
        })
        .await;
        assert!(waited);
        assert!(tcp_quickack(&server.stream).unwrap());

        // A second wait with nothing read in between does not touch the socket again.
        set_tcp_quickack(&server.stream, false).unwrap();
        let waited = std::future::poll_fn(|cx| {
            let mut rb = ReadBuf::new(&mut buf);
            Poll::Ready(Pin::new(&mut server).poll_read(cx, &mut rb).is_pending())
        })
        .await;
        assert!(waited);
        assert!(!tcp_quickack(&server.stream).unwrap());
    }

    #[test]
    fn every_kind_has_its_own_gate() {
        for (i, kind) in Unauthenticated::ALL.iter().enumerate() {
            assert_eq!(kind.index(), i);
        }
    }
}
