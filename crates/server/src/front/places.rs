//! The places of the TCP port (see the module above): the per-class and per-credential counts,
//! the order of unauthenticated connections that a newcomer may push out, and the [`Ticket`]
//! each connection holds its place with.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::Door;
use crate::lock::lock;

/// The class an authenticated connection is counted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// The operator token, a dashboard session.
    Operator,
    /// A runtime token on the endpoint.
    Runtime,
    /// A runtime token on `/mcp`.
    Mcp,
}

impl Class {
    const ALL: [Class; 3] = [Class::Operator, Class::Runtime, Class::Mcp];

    fn index(self) -> usize {
        match self {
            Class::Operator => 0,
            Class::Runtime => 1,
            Class::Mcp => 2,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Class::Operator => "operator",
            Class::Runtime => "runtime",
            Class::Mcp => "mcp",
        }
    }
}

/// Where a ticket stands in the places.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Unauthenticated,
    Authenticated(Class),
    /// Pushed out by a newcomer: the connection closes.
    Evicted,
}

/// An unauthenticated connection in the admission order.
#[derive(Debug)]
struct Waiting {
    seq: u64,
    /// Never upgraded while the counts are locked except to evict it: dropping the last
    /// holder of a ticket locks the counts.
    ticket: Weak<Ticket>,
    heard: Arc<AtomicBool>,
}

/// The counts behind the places.
#[derive(Debug, Default)]
struct Counts {
    /// Unauthenticated connections, oldest first.
    unauthenticated: Vec<Waiting>,
    authenticated: [usize; 3],
    /// Authenticated connections per capped credential (runtime tokens, the MCP token).
    per_principal: std::collections::HashMap<String, usize>,
    next_seq: u64,
}

/// The TCP port's places: unauthenticated, and per authenticated class.
#[derive(Debug)]
pub struct Places {
    pub(super) max_unauthenticated: usize,
    /// Places for the authenticated classes together (`max_connections - max_unauthenticated`).
    authenticated: usize,
    pub(super) reserved: usize,
    /// Most authenticated connections one runtime or MCP credential holds at once.
    per_principal: usize,
    counts: Mutex<Counts>,
}

impl Places {
    pub(super) fn new(
        max_connections: usize,
        max_unauthenticated: usize,
        reserved: usize,
        per_principal: usize,
    ) -> Places {
        // The reserves fit beside at least one unauthenticated place.
        let reserved = reserved.min(max_connections.saturating_sub(1) / 3);
        let max_unauthenticated = max_unauthenticated
            .min(max_connections.saturating_sub(3 * reserved))
            .max(1);
        Places {
            max_unauthenticated,
            // At least one, however small the caps: authenticating must be possible.
            authenticated: max_connections.saturating_sub(max_unauthenticated).max(1),
            reserved,
            per_principal: per_principal.max(1),
            counts: Mutex::new(Counts::default()),
        }
    }

    /// Makes room for one more unauthenticated connection: over the cap, the oldest that has
    /// sent nothing yet (else the oldest) is marked evicted and returned, to be told to close
    /// (and dropped) once the counts are unlocked.
    fn make_room(&self, counts: &mut Counts) -> Option<Arc<Ticket>> {
        while counts.unauthenticated.len() >= self.max_unauthenticated {
            let i = counts
                .unauthenticated
                .iter()
                .position(|w| !w.heard.load(Ordering::SeqCst))
                .unwrap_or(0);
            let waiting = counts.unauthenticated.remove(i);
            // `None`: that ticket is being dropped right now; its place is free anyway.
            if let Some(victim) = waiting.ticket.upgrade() {
                *lock(&victim.place) = Place::Evicted;
                return Some(victim);
            }
        }
        None
    }

    /// Whether class `c` may count one more connection: the others' unused reserves stay free.
    fn room_for(&self, counts: &Counts, c: Class) -> bool {
        let used: usize = counts.authenticated.iter().sum();
        let kept: usize = Class::ALL
            .iter()
            .filter(|o| **o != c)
            .map(|o| {
                self.reserved
                    .saturating_sub(counts.authenticated[o.index()])
            })
            .sum();
        used + 1 + kept <= self.authenticated
    }
}

/// One connection's place in the caps, shared by its HTTP connection and, after an upgrade,
/// its WebSocket. Dropping the last holder frees the place.
#[derive(Debug)]
pub struct Ticket {
    door: Door,
    /// The daemon's own port the connection came in on (TCP only): the dashboard's origin.
    local_port: Option<u16>,
    hello_deadline: Instant,
    places: Option<Arc<Places>>,
    seq: u64,
    place: Mutex<Place>,
    /// The capped credential this connection is counted against, once authenticated.
    principal: Mutex<Option<String>>,
    /// The peer has sent something (set by [`Tcp`]).
    pub(super) heard: Arc<AtomicBool>,
    /// The connection was answered before its request body was read: its close lingers.
    pub(super) linger: Arc<AtomicBool>,
    /// Turns `true` when the connection is evicted.
    pub(super) evicted: watch::Sender<bool>,
}

impl Ticket {
    pub(super) fn new(
        door: Door,
        hello_timeout: Duration,
        places: Option<Arc<Places>>,
        seq: u64,
    ) -> Ticket {
        Ticket {
            door,
            local_port: None,
            // The deadline of a timer started now: no clock is read.
            hello_deadline: tokio::time::sleep(hello_timeout).deadline(),
            places,
            seq,
            place: Mutex::new(Place::Unauthenticated),
            principal: Mutex::new(None),
            heard: Arc::new(AtomicBool::new(false)),
            linger: Arc::new(AtomicBool::new(false)),
            evicted: watch::channel(false).0,
        }
    }

    /// Where the connection came in.
    pub fn door(&self) -> Door {
        self.door
    }

    /// The daemon's port this TCP connection came in on (`None` on `endpoint.sock`).
    pub fn local_port(&self) -> Option<u16> {
        self.local_port
    }

    /// When a connection that has not authenticated (or said `hello`) is closed.
    pub fn hello_deadline(&self) -> Instant {
        self.hello_deadline
    }

    /// The peer proved a credential of class `class`: it leaves the unauthenticated places
    /// and is counted in its class. `false` (and nothing changes) when the class has no room
    /// left or the connection was already evicted: the caller refuses (503). Counting again
    /// (a second request on a kept-alive connection) is a no-op. The operator's connections
    /// are counted only by class; see [`Ticket::authenticated_as`] for the others.
    pub fn authenticated(&self, class: Class) -> bool {
        self.count(class, None)
    }

    /// As [`Ticket::authenticated`], also counted against `principal` (a runtime or MCP
    /// credential, e.g. `runtime:hermes`): `false` when that credential already holds
    /// `max_connections_per_principal` connections, so one token holder cannot take its whole
    /// class's places from the others.
    pub fn authenticated_as(&self, class: Class, principal: &str) -> bool {
        self.count(class, (class != Class::Operator).then_some(principal))
    }

    fn count(&self, class: Class, principal: Option<&str>) -> bool {
        let Some(places) = &self.places else {
            *lock(&self.place) = Place::Authenticated(class);
            return true;
        };
        let mut counts = lock(&places.counts);
        let mut place = lock(&self.place);
        match *place {
            Place::Authenticated(_) => true,
            Place::Evicted => false,
            Place::Unauthenticated => {
                if !places.room_for(&counts, class) {
                    tracing::warn!(
                        class = class.as_str(),
                        "an authenticated connection refused (503): its class has no room \
                         left ([limits] max_connections, reserved_per_class)"
                    );
                    return false;
                }
                if let Some(p) = principal {
                    let held = counts.per_principal.get(p).copied().unwrap_or(0);
                    if held >= places.per_principal {
                        tracing::warn!(
                            class = class.as_str(),
                            held,
                            "an authenticated connection refused (503): its credential holds \
                             [limits] max_connections_per_principal connections already"
                        );
                        return false;
                    }
                    counts.per_principal.insert(p.to_owned(), held + 1);
                    *lock(&self.principal) = Some(p.to_owned());
                }
                counts.unauthenticated.retain(|w| w.seq != self.seq);
                counts.authenticated[class.index()] += 1;
                *place = Place::Authenticated(class);
                true
            }
        }
    }

    /// The connection is answered before its request body was read (413, 408): it closes
    /// after this answer, lingering so that the answer is not lost to a reset.
    pub fn linger(&self) {
        self.linger.store(true, Ordering::SeqCst);
    }

    pub fn is_authenticated(&self) -> bool {
        matches!(*lock(&self.place), Place::Authenticated(_))
    }

    /// Resolves when a newcomer pushed this (unauthenticated) connection out.
    pub async fn evicted(&self) {
        let mut rx = self.evicted.subscribe();
        let _ = rx.wait_for(|v| *v).await;
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if let Some(places) = &self.places {
            let mut counts = lock(&places.counts);
            match *lock(&self.place) {
                Place::Unauthenticated => counts.unauthenticated.retain(|w| w.seq != self.seq),
                Place::Authenticated(c) => {
                    let n = &mut counts.authenticated[c.index()];
                    *n = n.saturating_sub(1);
                    if let Some(p) = lock(&self.principal).take()
                        && let Some(held) = counts.per_principal.get_mut(&p)
                    {
                        *held = held.saturating_sub(1);
                        if *held == 0 {
                            counts.per_principal.remove(&p);
                        }
                    }
                }
                Place::Evicted => {}
            }
        }
    }
}

impl Places {
    /// An unauthenticated place for a new TCP connection, never refused: over the cap the
    /// oldest unauthenticated connection that has sent nothing (else the oldest) is evicted
    /// and returned beside the new ticket, to be told to close.
    pub(super) fn admit(
        self: &Arc<Self>,
        hello_timeout: Duration,
        local_port: Option<u16>,
    ) -> (Arc<Ticket>, Option<Arc<Ticket>>) {
        let mut counts = lock(&self.counts);
        let evicted = self.make_room(&mut counts);
        let seq = counts.next_seq;
        counts.next_seq += 1;
        let mut ticket = Ticket::new(Door::Tcp, hello_timeout, Some(self.clone()), seq);
        ticket.local_port = local_port;
        let ticket = Arc::new(ticket);
        counts.unauthenticated.push(Waiting {
            seq,
            ticket: Arc::downgrade(&ticket),
            heard: ticket.heard.clone(),
        });
        drop(counts);
        (ticket, evicted)
    }
}
