//! The front door's serving: each listener's accept loop (a TCP connection admitted by
//! [`Front`](super::Front) before any HTTP is parsed, `endpoint.sock` by the peer's account),
//! one HTTP/1.1 connection with its header read timeout and hello deadline, and [`hygiene`],
//! the check every TCP request passes before its route (one `Host`, a body in time).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, UnixListener};
use tokio::task::JoinSet;

use super::{Door, Tcp, Ticket, Unauthenticated};
use crate::shutdown::stopped;
use crate::state::AppState;

/// A request body that must arrive by a deadline; past it, reading fails and `timed_out` is
/// set (the request is answered 408 by [`hygiene`]).
struct TimedBody {
    inner: axum::body::Body,
    deadline: Pin<Box<tokio::time::Sleep>>,
    timed_out: Arc<AtomicBool>,
}

impl hyper::body::Body for TimedBody {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Pending => {
                if this.deadline.as_mut().poll(cx).is_ready() {
                    this.timed_out.store(true, Ordering::SeqCst);
                    let e = std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "request body not complete within [limits] body_read_timeout_ms",
                    );
                    return Poll::Ready(Some(Err(axum::Error::new(e))));
                }
                Poll::Pending
            }
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// A plain-text answer that closes the connection (lingering: [`Ticket::linger`]).
fn closing(status: axum::http::StatusCode, message: &'static str) -> axum::response::Response {
    use axum::response::IntoResponse;
    (
        status,
        [
            (axum::http::header::CONNECTION, "close"),
            (
                axum::http::header::CONTENT_TYPE,
                "text/plain; charset=utf-8",
            ),
        ],
        message,
    )
        .into_response()
}

/// Every TCP request, before its route: exactly one `Host` (two: 400, as RFC 9112 §3.2
/// requires), and a body that arrives within `[limits] body_read_timeout_ms` of the headers
/// (else 408). An answer given before the body was read (413, 408) closes the connection, and
/// the close lingers so the client reads the answer instead of a reset.
pub async fn hygiene(
    axum::extract::State(state): axum::extract::State<Arc<AppState>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    match Hygiene::admit(&state, req) {
        Ok((req, hygiene)) => hygiene.finish(next.run(req).await),
        Err(refused) => *refused,
    }
}

/// What [`hygiene`] keeps of a request it let through, to finish its answer: the
/// connection's ticket and whether the body's deadline passed. Also used by the direct route
/// of `POST /mcp` ([`connection`]), which passes the same checks without the router.
pub(crate) struct Hygiene {
    ticket: Option<Arc<Ticket>>,
    timed_out: Option<Arc<AtomicBool>>,
}

impl Hygiene {
    /// The checks before the route: the request (its body under the read deadline), or the
    /// refusal to answer (boxed: it is rare, and large).
    pub(crate) fn admit(
        state: &AppState,
        req: axum::extract::Request,
    ) -> Result<(axum::extract::Request, Hygiene), Box<axum::response::Response>> {
        use axum::http::{StatusCode, header};
        let ticket = req.extensions().get::<Arc<Ticket>>().cloned();
        let mut hosts = req.headers().get_all(header::HOST).iter();
        if hosts.next().is_some() && hosts.next().is_some() {
            if let Some(t) = &ticket {
                t.linger();
            }
            return Err(Box::new(closing(
                StatusCode::BAD_REQUEST,
                "Bad Request: more than one Host header\n",
            )));
        }
        if hyper::body::Body::is_end_stream(req.body()) {
            let timed_out = None;
            return Ok((req, Hygiene { ticket, timed_out }));
        }
        let timed_out = Arc::new(AtomicBool::new(false));
        let (parts, body) = req.into_parts();
        let timed = TimedBody {
            inner: body,
            deadline: Box::pin(tokio::time::sleep(state.front.body_read_timeout)),
            timed_out: timed_out.clone(),
        };
        let req = axum::extract::Request::from_parts(parts, axum::body::Body::new(timed));
        let timed_out = Some(timed_out);
        Ok((req, Hygiene { ticket, timed_out }))
    }

    /// The answer as it leaves: 408 when the body missed its deadline; a 413 or 408 closes
    /// the connection (lingering).
    pub(crate) fn finish(self, mut response: axum::response::Response) -> axum::response::Response {
        use axum::http::{StatusCode, header};
        if self
            .timed_out
            .as_ref()
            .is_some_and(|t| t.load(Ordering::SeqCst))
        {
            tracing::debug!("a request body did not arrive in time; answered 408");
            response = closing(
                StatusCode::REQUEST_TIMEOUT,
                "Request Timeout: the body did not arrive within [limits] body_read_timeout_ms\n",
            );
        }
        if matches!(
            response.status(),
            StatusCode::PAYLOAD_TOO_LARGE | StatusCode::REQUEST_TIMEOUT
        ) {
            response.headers_mut().insert(
                header::CONNECTION,
                axum::http::HeaderValue::from_static("close"),
            );
            if let Some(t) = &self.ticket {
                t.linger();
            }
        }
        response
    }
}

/// What a listener serves: its router and, on the TCP port with MCP on, the `/mcp` service,
/// which `POST /mcp` reaches without the router (see `connection`).
#[derive(Clone)]
pub struct App {
    router: Router,
    mcp: Option<openphone_mcp::McpHttpService>,
}

impl App {
    /// `router` alone: every request goes through it.
    pub fn new(router: Router) -> App {
        App { router, mcp: None }
    }

    /// `router`, with `POST /mcp` going straight to `mcp` behind the same checks
    /// (`crate::mcp::post`); the router keeps `/mcp` for its other methods.
    pub fn with_mcp(router: Router, mcp: openphone_mcp::McpHttpService) -> App {
        App {
            router,
            mcp: Some(mcp),
        }
    }
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
    /// The next admitted connection (TCP connections are never refused here: see
    /// [`Front::admit`]).
    async fn accept(&self, state: &AppState) -> std::io::Result<(Box<dyn Io>, Arc<Ticket>)> {
        match self {
            Listener::Tcp(listener) => {
                let (stream, _) = listener.accept().await?;
                let port = stream.local_addr().ok().map(|a| a.port());
                let (ticket, evicted) = state.front.admit(port);
                if let Some(victim) = evicted {
                    victim.evicted.send_replace(true);
                    drop(victim);
                    state
                        .front
                        .note(state.bridge.now_ms(), Unauthenticated::Evicted);
                }
                let tcp = Tcp::new(stream)
                    .heard_by(ticket.heard.clone())
                    .lingering_if(ticket.linger.clone());
                Ok((Box::new(tcp), ticket))
            }
            Listener::Local(listener) => {
                let (stream, _) = listener.accept().await?;
                let me = rustix::process::getuid().as_raw();
                let owner = stream.peer_cred().is_ok_and(|c| c.uid() == me);
                let ticket = Ticket::new(Door::Local { owner }, state.front.hello_timeout, None, 0);
                Ok((Box::new(stream), Arc::new(ticket)))
            }
        }
    }
}

/// Serves `listener` with `app` until shutdown, then lets open HTTP connections finish (at
/// most 10 s). Upgraded WebSockets live on in their own tasks.
pub async fn serve(state: Arc<AppState>, listener: Listener, app: App) {
    let mut stop = state.shutdown.clone();
    let mut tasks: JoinSet<()> = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept(&state) => match accepted {
                Ok((io, ticket)) => {
                    tasks.spawn(connection(state.clone(), io, ticket, app.clone()));
                }
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
///
/// `POST /mcp` — every MCP call — skips the router: matching the path and the two
/// middleware layers' clone of their inner service per request cost ~7 k instructions and ~20
/// allocations a call. It passes the same checks ([`Hygiene`], then the guard), as functions.
async fn connection(state: Arc<AppState>, io: Box<dyn Io>, ticket: Arc<Ticket>, app: App) {
    use futures_util::future::Either;
    let for_requests = ticket.clone();
    let for_mcp = state.clone();
    let App { router, mcp } = app;
    let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
        req.extensions_mut().insert(for_requests.clone());
        match &mcp {
            Some(mcp) if req.method() == axum::http::Method::POST && req.uri().path() == "/mcp" => {
                let (state, mcp) = (for_mcp.clone(), mcp.clone());
                let req = req.map(axum::body::Body::new);
                Either::Left(async move {
                    Ok::<_, std::convert::Infallible>(crate::mcp::post(state, mcp, req).await)
                })
            }
            _ => {
                let mut router = router.clone();
                Either::Right(tower_service::Service::call(&mut router, req))
            }
        }
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
            () = ticket.evicted(), if watching => return,
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
