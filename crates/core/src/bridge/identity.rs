//! The per-identity lock: requests with the same identity key (runtime + runtime session +
//! tool + params digest + idempotency key) are replayed, confirmed or executed one at a time,
//! so a retry can never run beside (or after) the original: it finds the recorded result or
//! the live confirmation. The same locks serialise identical calls without a key on their
//! join key (`retry.rs`), so the second finds the first's confirmation.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use openphone_store::IdentityKey;

use super::ToolBridge;
use crate::locks::lock;

type KeyLock = Arc<tokio::sync::Mutex<()>>;

/// identity key → its lock, present while someone holds or waits for it.
#[derive(Default)]
pub(super) struct IdentityLocks {
    map: Arc<Mutex<HashMap<String, KeyLock>>>,
}

/// Holds an identity key's lock; drops the map entry when nobody else waits for it.
pub(super) struct KeyGuard {
    guard: Option<tokio::sync::OwnedMutexGuard<()>>,
    lock: KeyLock,
    map: Arc<Mutex<HashMap<String, KeyLock>>>,
    key: String,
}

impl Drop for KeyGuard {
    fn drop(&mut self) {
        let mut map = lock(&self.map);
        self.guard.take();
        // Only the map and this guard hold the lock: nobody is waiting.
        if Arc::strong_count(&self.lock) == 2 {
            map.remove(&self.key);
        }
    }
}

impl ToolBridge {
    /// Waits for, then holds, the lock of `identity` until the guard is dropped.
    pub(super) async fn lock_identity(&self, identity: &IdentityKey) -> KeyGuard {
        self.lock_key(identity.describe()).await
    }

    /// Waits for, then holds, the lock named `key` (an identity key's description, or a
    /// retry's join key, `retry.rs`: those start with `retry `, which no identity key does).
    pub(super) async fn lock_key(&self, key: String) -> KeyGuard {
        let map = &self.identity_locks.map;
        let key_lock = Arc::clone(
            lock(map)
                .entry(key.clone())
                .or_insert_with(|| Arc::new(tokio::sync::Mutex::new(()))),
        );
        let guard = Arc::clone(&key_lock).lock_owned().await;
        KeyGuard {
            guard: Some(guard),
            lock: key_lock,
            map: Arc::clone(map),
            key,
        }
    }
}
