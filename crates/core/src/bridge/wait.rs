//! The one wait for a request's final result.
//!
//! A request that needs confirmation is answered at once with `needs_confirmation`; its final
//! result comes when the confirmation ends (approved and executed, denied, expired or
//! withdrawn). [`ToolBridge::wait_for_final`] is the only way to wait for it: every front end
//! (the endpoint, MCP, in-process callers) calls it with its own stop future (shutdown,
//! cancellation, a local deadline) and only translates the outcome.
//!
//! `replayed` means the result was recorded before the request it answers arrived (a keyed
//! retry answered from the stored final result, or a retry without a key joined to a
//! confirmation decided a moment ago, `retry.rs`). A result obtained by waiting came about
//! after its request arrived, so it is never `replayed`; a retry that joined a pending
//! confirmation waits here for that confirmation's outcome like its original caller.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use openphone_clock::Stopwatch;
use openphone_policy::{Caller, Context};
use openphone_protocol::{ToolRequest, ToolResult};
use openphone_store as store;
use tokio::sync::watch;

use super::{ToolBridge, parse_result};
use crate::locks::lock;

/// How [`ToolBridge::wait_for_final`] ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Waited {
    /// The request's final result, addressed to the request that waited (its `request_id`
    /// and `audit_id`), with `replayed` false. A `first` answer that was already final comes
    /// back unchanged.
    Final(ToolResult),
    /// No final result: the stop future completed first (or, with a broken store, none could
    /// be read). Holds the `first` answer unchanged; the confirmation stays as it was.
    Stopped(ToolResult),
}

impl Waited {
    /// The result either way: the final one, or the unchanged first answer.
    pub fn into_result(self) -> ToolResult {
        match self {
            Waited::Final(result) | Waited::Stopped(result) => result,
        }
    }
}

/// The confirmation a `needs_confirmation` answer waits on (not a background park).
pub fn waiting_on(result: &ToolResult) -> Option<String> {
    result
        .pending_confirmation()
        .map(|pending| pending.confirmation_id)
}

/// A subscription to one confirmation's final result; leaving removes the map entry when no
/// one else waits for it (also when the wait is dropped half-way).
struct Subscription<'a> {
    waiters: &'a Mutex<HashMap<String, watch::Sender<Option<ToolResult>>>>,
    confirmation_id: &'a str,
    rx: Option<watch::Receiver<Option<ToolResult>>>,
}

impl Drop for Subscription<'_> {
    fn drop(&mut self) {
        let mut waiters = lock(self.waiters);
        self.rx.take();
        if waiters
            .get(self.confirmation_id)
            .is_some_and(|tx| tx.receiver_count() == 0)
        {
            waiters.remove(self.confirmation_id);
        }
    }
}

impl ToolBridge {
    /// Waits for the final result of the request `first` answered.
    ///
    /// If `first` is not waiting on a confirmation (it is final already, or a background
    /// park), returns `Final(first.clone())` at once. Otherwise waits until the confirmation
    /// has a final result (approved and executed, denied, expired, withdrawn) and returns it
    /// re-addressed to `first` (its `request_id` and `audit_id`; `replayed` false, since the
    /// result came about after the request arrived), or returns `Stopped(first.clone())` as
    /// soon as `stop` completes (shutdown, cancellation, a caller's local deadline). A final
    /// result that is already there wins over a `stop` that is already complete.
    pub async fn wait_for_final(
        &self,
        first: &ToolResult,
        stop: impl Future<Output = ()>,
    ) -> Waited {
        let Some(confirmation_id) = waiting_on(first) else {
            return Waited::Final(first.clone());
        };
        tokio::select! {
            biased;
            outcome = self.final_result(&confirmation_id) => match outcome {
                Some(result) => Waited::Final(result.answering(first)),
                None => Waited::Stopped(first.clone()),
            },
            () = stop => Waited::Stopped(first.clone()),
        }
    }

    /// Like [`ToolBridge::invoke`], but a request that needs confirmation is answered only when
    /// final: after approval and execution, denial, or expiry.
    pub async fn invoke_and_wait(
        &self,
        caller: &Caller,
        request: ToolRequest,
        context: Context,
    ) -> ToolResult {
        let first = self.invoke(caller, request, context).await;
        self.wait_for_final(&first, std::future::pending())
            .await
            .into_result()
    }

    /// The final result of a confirmation as recorded (addressed to the request that created
    /// it), waiting for it; `None` when the confirmation is unknown, or when one that is
    /// already resolved gets no final result within ten minutes (which only a broken store
    /// can cause).
    async fn final_result(&self, confirmation_id: &str) -> Option<ToolResult> {
        // Subscribe before reading the store so a resolution in between is not missed.
        let rx = lock(&self.waiters)
            .entry(confirmation_id.to_owned())
            .or_insert_with(|| watch::channel(None).0)
            .subscribe();
        let mut subscription = Subscription {
            waiters: &self.waiters,
            confirmation_id,
            rx: Some(rx),
        };
        let rx = subscription.rx.as_mut()?;
        self.wait_loop(confirmation_id, rx).await
    }

    async fn wait_loop(
        &self,
        confirmation_id: &str,
        rx: &mut watch::Receiver<Option<ToolResult>>,
    ) -> Option<ToolResult> {
        const RESOLVED_GRACE: Duration = Duration::from_secs(600);
        const POLL: Duration = Duration::from_secs(1);
        // Elapsed time only (how long an approved request has been executing), never compared
        // with recorded times: a monotonic stopwatch, not the bridge's clock.
        let mut resolved_since: Option<Stopwatch> = None;
        loop {
            let record = match self.store.get_confirmation(confirmation_id) {
                Ok(Some(r)) => r,
                Ok(None) => return None,
                Err(e) => {
                    tracing::error!(error = %e, "reading confirmation");
                    return None;
                }
            };
            // The answer handed over by the resolution comes first: it is what the resolver's
            // audit allows to go out (`audit_unavailable` when the outcome's record could not be
            // written), where the stored final result is the raw outcome.
            if let Some(result) = rx.borrow_and_update().clone() {
                return Some(result);
            }
            if let Some(result) = record.final_result.as_ref().and_then(parse_result) {
                return Some(result);
            }
            if record.state == store::ConfirmationState::Pending {
                let remaining = record.expires_at_ms - self.now_ms();
                if remaining <= 0 {
                    // Time it out ourselves; if that did not settle it, back off briefly
                    // rather than spin.
                    if self.expire_due().await == 0 {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    continue;
                }
                // Wake on resolution, or at expiry (re-checked at least every second, so a
                // clock that jumps is noticed).
                let wait = Duration::from_millis(u64::try_from(remaining).unwrap_or(1)).min(POLL);
                let _ = tokio::time::timeout(wait, rx.changed()).await;
                continue;
            }
            // Approved and executing (or resolved, result being recorded): wait for it.
            let since = resolved_since.get_or_insert_with(Stopwatch::start);
            if since.elapsed() > RESOLVED_GRACE {
                return None;
            }
            let _ = tokio::time::timeout(POLL, rx.changed()).await;
        }
    }
}
