//! Calls in flight per MCP client (`mcp.md` §10; issue 11: one host's eight waiting calls
//! blocked every other host sharing the default token).
//!
//! The limit counts per client, not per token. A client is its connection on the socket, or
//! its session over HTTP in the handshake era: each [`super::PhoneMcp`] holds its own
//! [`ConnectionSlots`]. A 2026-07-28 request has neither (each arrives on its own, with a fresh
//! handler), so those are counted per runtime and declared client (`clientInfo` name and
//! version) in [`KeyedSlots`], whose entries live only while a call holds them. A host that
//! lies about its name only shares a count with the host it names, under the same token.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::sync::lock;

/// MCP calls one client may have in flight at once.
pub const MAX_IN_FLIGHT_PER_CLIENT: usize = 8;

/// client key → its places, while a call holds one.
type KeyedMap = Arc<Mutex<HashMap<String, Arc<Semaphore>>>>;

/// A place held by one call until it is dropped.
pub(super) struct Slot {
    permit: Option<OwnedSemaphorePermit>,
    /// The keyed map and key to clean up after the last holder.
    release: Option<(KeyedMap, String)>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let Some((map, key)) = self.release.take() else {
            return;
        };
        let mut map = lock(&map);
        self.permit.take();
        // Only the map holds it now: no call of this client is in flight.
        if map.get(&key).is_some_and(|s| Arc::strong_count(s) == 1) {
            map.remove(&key);
        }
    }
}

/// The places of one connection or HTTP session.
#[derive(Debug, Clone)]
pub(super) struct ConnectionSlots(Arc<Semaphore>);

impl Default for ConnectionSlots {
    fn default() -> Self {
        ConnectionSlots(Arc::new(Semaphore::new(MAX_IN_FLIGHT_PER_CLIENT)))
    }
}

impl ConnectionSlots {
    /// A place, or `None` when [`MAX_IN_FLIGHT_PER_CLIENT`] calls are in flight.
    pub(super) fn take(&self) -> Option<Slot> {
        let permit = Arc::clone(&self.0).try_acquire_owned().ok()?;
        Some(Slot {
            permit: Some(permit),
            release: None,
        })
    }
}

/// The places of clients known only by a key (2026-07-28 requests), kept while in use.
#[derive(Debug, Default)]
pub(super) struct KeyedSlots {
    map: KeyedMap,
}

impl KeyedSlots {
    /// A place for the client `key`, or `None` when it has [`MAX_IN_FLIGHT_PER_CLIENT`] calls
    /// in flight.
    pub(super) fn take(&self, key: &str) -> Option<Slot> {
        let semaphore = {
            let mut map = lock(&self.map);
            Arc::clone(
                map.entry(key.to_owned())
                    .or_insert_with(|| Arc::new(Semaphore::new(MAX_IN_FLIGHT_PER_CLIENT))),
            )
        };
        let permit = semaphore.try_acquire_owned().ok();
        let slot = Slot {
            permit,
            release: Some((Arc::clone(&self.map), key.to_owned())),
        };
        // Without a permit the slot is dropped at once, removing an entry nobody holds.
        slot.permit.is_some().then_some(slot)
    }

    /// How many clients have calls in flight.
    #[cfg(test)]
    fn clients(&self) -> usize {
        lock(&self.map).len()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn keyed_entries_live_only_while_a_call_holds_them() {
        let slots = KeyedSlots::default();
        let held: Vec<Slot> = (0..MAX_IN_FLIGHT_PER_CLIENT)
            .map(|_| slots.take("mcp\nA").unwrap())
            .collect();
        assert!(slots.take("mcp\nA").is_none());
        let other = slots.take("mcp\nB").unwrap();
        assert_eq!(slots.clients(), 2);
        drop(held);
        drop(other);
        assert_eq!(slots.clients(), 0);
    }

    #[test]
    fn each_connection_counts_its_own_calls() {
        let a = ConnectionSlots::default();
        let b = ConnectionSlots::default();
        let held: Vec<Slot> = (0..MAX_IN_FLIGHT_PER_CLIENT)
            .map(|_| a.take().unwrap())
            .collect();
        assert!(a.take().is_none());
        assert!(b.take().is_some());
        drop(held);
        assert!(a.take().is_some());
    }
}
