//! One live node connection as the rest of the adapter uses it ([`Conn`]): requests with
//! their answers (30 s each), fire-and-forget sends, `node.event`, and the kill switch; the
//! errors of a request ([`RequestError`]); and the crate's one way to take a mutex. The loop
//! that opens and reads connections is `node.rs`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{Notify, mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;

use crate::wire::{self, Hello, WireError};

/// Per-request timeout.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Locks `mutex`, recovering the guard when another thread panicked while holding it.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Why a request on the connection failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RequestError {
    #[error("{0}")]
    Gateway(WireError),
    #[error("no answer within 30 s")]
    Timeout,
    #[error("the connection closed")]
    Closed,
}

impl RequestError {
    /// `details.code` of a gateway error.
    pub fn detail_code(&self) -> Option<&str> {
        match self {
            RequestError::Gateway(e) => e.detail_code(),
            _ => None,
        }
    }
}

/// One live connection (after `hello-ok`).
#[derive(Debug)]
pub(crate) struct Conn {
    pub(crate) tx: mpsc::UnboundedSender<Message>,
    pub(crate) pending: Mutex<HashMap<String, oneshot::Sender<Result<Value, WireError>>>>,
    pub(crate) next: AtomicU64,
    pub(crate) hello: Hello,
    /// This connection reached `ready` once (a later `PAIRING_CHANGED` means a zombie).
    pub(crate) was_ready: AtomicBool,
    /// Ready long enough to reset the backoff.
    pub(crate) stable: AtomicBool,
    /// Set to close this connection and reconnect at once.
    pub(crate) kill: Notify,
    pub(crate) killed: AtomicBool,
    /// `shutdown` event: reconnect after this long without counting a failure.
    pub(crate) restart_ms: AtomicU64,
}

impl Conn {
    /// Sends a request and waits for its answer (30 s).
    pub(crate) async fn request(&self, method: &str, params: Value) -> Result<Value, RequestError> {
        let id = format!("n-{}", self.next.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(id.clone(), tx);
        if self
            .tx
            .send(Message::text(wire::request(&id, method, params)))
            .is_err()
        {
            lock(&self.pending).remove(&id);
            return Err(RequestError::Closed);
        }
        match tokio::time::timeout(REQUEST_TIMEOUT, rx).await {
            Ok(Ok(Ok(payload))) => Ok(payload),
            Ok(Ok(Err(e))) => Err(RequestError::Gateway(e)),
            Ok(Err(_)) => Err(RequestError::Closed),
            Err(_) => {
                lock(&self.pending).remove(&id);
                Err(RequestError::Timeout)
            }
        }
    }

    /// Sends a request without waiting for its answer (progress chunks: the reply only says
    /// whether the caller streams). A reply to it is dropped when it arrives.
    pub(crate) fn send_only(&self, method: &str, params: Value) {
        let id = format!("n-{}", self.next.fetch_add(1, Ordering::Relaxed));
        let _ = self
            .tx
            .send(Message::text(wire::request(&id, method, params)));
    }

    /// `node.event` with a payload object (sent as `payloadJSON`).
    pub(crate) async fn node_event(
        &self,
        event: &str,
        payload: &Value,
    ) -> Result<Value, RequestError> {
        self.request("node.event", wire::node_event(event, payload))
            .await
    }

    /// Asks the read loop to close this connection (code 1000) and reconnect at once.
    pub(crate) fn kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
        self.kill.notify_one();
    }

    pub(crate) fn answer(&self, id: &str, result: Result<Value, WireError>) {
        if let Some(tx) = lock(&self.pending).remove(id) {
            let _ = tx.send(result);
        }
    }
}
