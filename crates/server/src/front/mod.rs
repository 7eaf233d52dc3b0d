//! The front door: every connection is admitted before any HTTP is parsed, so a flood of peers
//! that never authenticate cannot exhaust the daemon (issue 11), and admission goes by
//! credential, so idle strangers can never keep a credential holder out (issue 28).
//!
//! accept → admit as *unauthenticated* → HTTP/1.1 with a header read timeout → a [`Ticket`] in
//! every request's extensions → the ticket moves to its credential's class (a valid bearer on
//! the upgrade as soon as its headers are read, a successful `hello`, an `/mcp` request past its
//! guard, a dashboard session) or the connection is closed at its hello deadline.
//!
//! The places ([`Places`]): `max_connections` in all, split into at most `max_unauthenticated`
//! for connections that have not authenticated yet and the rest for the three authenticated
//! classes (the operator, runtimes, MCP hosts). Each class keeps `reserved_per_class` places no
//! other class may take; the remainder is shared. An unauthenticated newcomer is never refused:
//! when the unauthenticated places are full, the oldest unauthenticated connection that has
//! sent nothing yet (else the oldest one) is closed and the newcomer takes its place. So a peer
//! holding idle sockets open only pushes out its own oldest ones, and a runtime or MCP host
//! that presents its token authenticates within its first request and leaves the
//! unauthenticated pool at once. An authenticated class over its share (its reserve and the
//! shared places) is refused with 503 at the moment it authenticates, and so is one credential
//! (a runtime's token, the MCP token) holding `max_connections_per_principal` already: within a
//! class, one token holder cannot crowd out the others (the operator is not capped). What remains: a peer
//! opening more than `max_unauthenticated` connections between a newcomer's accept and the
//! reading of its headers (microseconds) can push it out; the newcomer's retry gets in.
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
//! pushes out the ACK of what it has read when a wait for more lasts 5 ms with no
//! answer written ([`Tcp`], `ACK_PUSH_DELAY`), so a client that writes a request's headers and
//! body separately without `TCP_NODELAY` waits those 5 ms, not ~40 ms for our delayed
//! ACK, before its body may leave (issue 13); a request answered sooner has its ACK carried by
//! the answer (issue 34).

use std::path::Path;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use axum::http::HeaderValue;
use openphone_mcp::LOOPBACK_ORIGINS;
use tokio::net::UnixListener;

use crate::config::Limits;
use crate::lock::lock;

mod places;
pub mod serve;
mod tcp;

pub use places::{Class, Places, Ticket};
pub use tcp::Tcp;

/// `<data-dir>/endpoint.sock`: the endpoint on a Unix socket, for the user's own clients.
pub const ENDPOINT_SOCKET_FILE: &str = "endpoint.sock";

/// Descriptors kept free below the process's limit for the store, the listeners, the MCP
/// socket, logs and the operator's own connections.
const RESERVED_DESCRIPTORS: u64 = 64;

/// Where a connection came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Door {
    /// The TCP port: counted against the caps, closed at its deadline unless authenticated.
    Tcp,
    /// `endpoint.sock`; `owner`: the peer runs as the daemon's user.
    Local { owner: bool },
}

/// What an unauthenticated peer did, for the rate-limited log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unauthenticated {
    /// An unauthenticated connection closed to make room for a newcomer.
    Evicted,
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
        Unauthenticated::Evicted,
        Unauthenticated::HelloTimeout,
        Unauthenticated::SlowHeaders,
        Unauthenticated::OversizeFrame,
        Unauthenticated::WrongToken,
        Unauthenticated::ForeignOrigin,
    ];

    fn index(self) -> usize {
        match self {
            Unauthenticated::Evicted => 0,
            Unauthenticated::HelloTimeout => 1,
            Unauthenticated::SlowHeaders => 2,
            Unauthenticated::OversizeFrame => 3,
            Unauthenticated::WrongToken => 4,
            Unauthenticated::ForeignOrigin => 5,
        }
    }

    fn message(self) -> &'static str {
        match self {
            Unauthenticated::Evicted => {
                "the oldest unauthenticated connection closed to make room for a newcomer ([limits] max_unauthenticated)"
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
    places: Arc<Places>,
    max_connections: usize,
    hello_timeout: Duration,
    header_read_timeout: Duration,
    body_read_timeout: Duration,
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
        let places = Places::new(
            max_connections,
            limits.max_unauthenticated,
            limits.reserved_per_class,
            limits.max_connections_per_principal,
        );
        if places.max_unauthenticated < limits.max_unauthenticated {
            tracing::warn!(
                configured = limits.max_unauthenticated,
                effective = places.max_unauthenticated,
                "max_unauthenticated lowered so that each class's reserved places fit"
            );
        }
        Front {
            places: Arc::new(places),
            max_connections,
            hello_timeout: Duration::from_millis(limits.hello_timeout_ms),
            header_read_timeout: Duration::from_millis(limits.header_read_timeout_ms),
            body_read_timeout: Duration::from_millis(limits.body_read_timeout_ms),
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
        self.places.max_unauthenticated
    }

    /// Places each authenticated class keeps for itself.
    pub fn reserved_per_class(&self) -> usize {
        self.places.reserved
    }

    /// How long a request's body may take to arrive once its headers are in.
    pub fn body_read_timeout(&self) -> Duration {
        self.body_read_timeout
    }

    /// How long a connection may take to authenticate.
    pub fn hello_timeout(&self) -> Duration {
        self.hello_timeout
    }

    /// An unauthenticated place for a new TCP connection, never refused: over the cap the
    /// oldest unauthenticated connection that has sent nothing (else the oldest) is evicted
    /// and returned beside the new ticket, to be told to close.
    fn admit(&self, local_port: Option<u16>) -> (Arc<Ticket>, Option<Arc<Ticket>>) {
        self.places.admit(self.hello_timeout, local_port)
    }

    /// Whether an upgrade's `Origin` is accepted: a loopback origin or a configured one.
    pub fn origin_allowed(&self, origin: &HeaderValue) -> bool {
        origin
            .to_str()
            .is_ok_and(|o| origin_allowed(o, &self.extra_origins))
    }

    /// Logs what an unauthenticated peer did, at most once a second per kind.
    pub fn note(&self, now_ms: i64, what: Unauthenticated) {
        if let Some(suppressed) = self.gates[what.index()].pass(now_ms) {
            tracing::warn!(suppressed_since_last = suppressed, "{}", what.message());
        }
    }
}

/// Whether an `Origin` value is accepted: a loopback origin on any port, or a configured one
/// (exact, or with `:*` for any port).
pub fn origin_allowed(origin: &str, extra: &[String]) -> bool {
    let origin = origin.trim().to_ascii_lowercase();
    let patterns = LOOPBACK_ORIGINS
        .iter()
        .map(|s| (*s).to_owned())
        .chain(extra.iter().map(|s| s.to_ascii_lowercase()));
    for pattern in patterns {
        if pattern == origin {
            return true;
        }
        if let Some(prefix) = pattern.strip_suffix(":*") {
            if origin == prefix {
                return true;
            }
            if let Some(port) = origin
                .strip_prefix(prefix)
                .and_then(|rest| rest.strip_prefix(':'))
                && !port.is_empty()
                && port.bytes().all(|b| b.is_ascii_digit())
            {
                return true;
            }
        }
    }
    false
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::atomic::Ordering;

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
    async fn a_newcomer_over_the_cap_pushes_out_the_oldest_idle_stranger() {
        let limits = Limits {
            max_connections: 10,
            max_unauthenticated: 2,
            reserved_per_class: 1,
            ..Limits::default()
        };
        let front = Front::new(&limits, Vec::new(), None);
        let (a, none) = front.admit(None);
        assert!(none.is_none());
        let (b, _) = front.admit(None);
        // `a` has spoken, `b` has not: `b` goes first although `a` is older.
        a.heard.store(true, Ordering::SeqCst);
        let (c, evicted) = front.admit(None);
        let evicted = evicted.unwrap();
        assert!(Arc::ptr_eq(&evicted, &b));
        assert!(
            !b.authenticated(Class::Runtime),
            "an evicted ticket stays out"
        );
        drop((evicted, b));
        // Both left have spoken now: the oldest goes.
        c.heard.store(true, Ordering::SeqCst);
        let (d, evicted) = front.admit(None);
        assert!(Arc::ptr_eq(&evicted.unwrap(), &a));
        // An authenticated connection leaves the unauthenticated places: no eviction.
        assert!(c.authenticated(Class::Mcp));
        assert!(c.is_authenticated());
        let (e, evicted) = front.admit(None);
        assert!(evicted.is_none());
        drop((a, c, d, e));
    }

    #[tokio::test]
    async fn each_class_keeps_its_reserve() {
        // 10 places: 2 unauthenticated, 8 authenticated of which 2 reserved per class.
        let limits = Limits {
            max_connections: 10,
            max_unauthenticated: 2,
            reserved_per_class: 2,
            ..Limits::default()
        };
        let front = Front::new(&limits, Vec::new(), None);
        let mut held = Vec::new();
        // Runtimes may take their reserve and the 2 shared places, not the others' reserves.
        for _ in 0..4 {
            let (t, _) = front.admit(None);
            assert!(t.authenticated(Class::Runtime));
            held.push(t);
        }
        let (t, _) = front.admit(None);
        assert!(!t.authenticated(Class::Runtime));
        assert!(!t.is_authenticated());
        // MCP hosts and the operator still get theirs.
        for class in [Class::Mcp, Class::Mcp, Class::Operator, Class::Operator] {
            let (t, _) = front.admit(None);
            assert!(t.authenticated(class), "{class:?}");
            held.push(t);
        }
        let (t, _) = front.admit(None);
        assert!(!t.authenticated(Class::Operator));
        // A place freed is a place again.
        held.remove(0);
        let (t, _) = front.admit(None);
        assert!(t.authenticated(Class::Operator));
    }

    #[test]
    fn the_connection_cap_fits_the_descriptor_limit() {
        let limits = Limits::default();
        let front = Front::new(&limits, Vec::new(), Some(256));
        assert_eq!(front.max_connections(), 192);
        assert_eq!(front.max_unauthenticated(), 128);
        let front = Front::new(&limits, Vec::new(), Some(100));
        assert_eq!(front.max_connections(), 36);
        // The three reserves of 8 fit beside the unauthenticated places.
        assert_eq!(front.max_unauthenticated(), 12);
        let front = Front::new(&limits, Vec::new(), None);
        assert_eq!(front.max_connections(), limits.max_connections);
    }

    #[test]
    fn every_kind_has_its_own_gate() {
        for (i, kind) in Unauthenticated::ALL.iter().enumerate() {
            assert_eq!(kind.index(), i);
        }
    }
}
