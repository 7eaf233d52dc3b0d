//! Keeping the simulated phone on disk: every state change bumps a generation; a
//! [`StateSink`] (the daemon's file in its data directory) is handed the latest whole state.
//!
//! Saving is a group commit: at most one save is in flight (an async mutex), and a save
//! writes the *latest* state, so every change made before it started is covered by it. A
//! caller that has to see its change on disk ([`SimPhone::flush`]) returns at once when a
//! save already covered its generation, and otherwise either waits for the one in flight
//! or becomes the next writer.

use std::fmt::Debug;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use tokio::sync::{Mutex, Notify};

use super::SimPhone;
use super::state::SimState;

/// Where the phone's state is kept (the daemon's `sim-state.json`). `save` must leave either
/// the previous or the new state behind, never a mix (write a temporary file, fsync, rename).
#[async_trait]
pub trait StateSink: Send + Sync + Debug {
    /// Stores `state`, replacing what was stored. The error names what failed.
    async fn save(&self, state: SimState) -> Result<(), String>;
}

/// The phone's change counter and the sink it is saved to.
#[derive(Debug, Default)]
pub(crate) struct Journal {
    /// Bumped under the state lock by every change, so a snapshot taken under that lock
    /// knows exactly which changes it holds.
    generation: AtomicU64,
    /// The highest generation the sink holds.
    saved: AtomicU64,
    /// One save at a time.
    writer: Mutex<()>,
    /// Wakes [`SimPhone::run_saver`] after a change.
    changed: Notify,
    sink: OnceLock<std::sync::Arc<dyn StateSink>>,
}

impl Journal {
    /// Records one change (call with the state lock held).
    pub(crate) fn bump(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_one();
    }

    /// The number of changes so far (read with the state lock held, it names the state).
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }
}

impl SimPhone {
    /// Saves the phone to `sink` from now on: [`SimPhone::flush`] writes to it, and a
    /// state-changing command, an injection or a runtime notification answers only once its
    /// change is saved. Only the first sink is kept; a second call returns `false`.
    pub fn persist_to(&self, sink: std::sync::Arc<dyn StateSink>) -> bool {
        // The state as it is now counts as unsaved: the first flush writes it.
        self.journal.bump();
        self.journal.sink.set(sink).is_ok()
    }

    /// Whether a sink is attached and holds every change made so far.
    pub fn is_saved(&self) -> bool {
        self.journal.sink.get().is_none()
            || self.journal.saved.load(Ordering::SeqCst)
                >= self.journal.generation.load(Ordering::SeqCst)
    }

    /// Writes the state to the sink unless a save already holds every change made before
    /// this call (nothing to do without a sink). Concurrent callers share one save.
    pub async fn flush(&self) -> Result<(), String> {
        let Some(sink) = self.journal.sink.get() else {
            return Ok(());
        };
        let target = self.journal.generation.load(Ordering::SeqCst);
        if self.journal.saved.load(Ordering::SeqCst) >= target {
            return Ok(());
        }
        let _writer = self.journal.writer.lock().await;
        if self.journal.saved.load(Ordering::SeqCst) >= target {
            return Ok(());
        }
        let (state, generation) = {
            let st = self.lock();
            (st.clone(), self.journal.generation.load(Ordering::SeqCst))
        };
        sink.save(state).await?;
        self.journal.saved.fetch_max(generation, Ordering::SeqCst);
        Ok(())
    }

    /// [`SimPhone::flush`] after a change the caller is about to acknowledge: a failed save
    /// is logged (the change happened; [`SimPhone::run_saver`] retries the save).
    pub(crate) async fn settle(&self) {
        if let Err(error) = self.flush().await {
            tracing::error!(%error, "the simulated phone's state could not be saved; retrying");
        }
    }

    /// The saver's loop (the daemon spawns it beside the timeline): saves every change that
    /// nobody flushed (the timeline's, direct calls'), retrying a failed save every
    /// `retry`, and saves once more when `shutdown` resolves.
    pub async fn run_saver(
        &self,
        retry: std::time::Duration,
        shutdown: impl std::future::Future<Output = ()>,
    ) {
        tokio::pin!(shutdown);
        'run: loop {
            tokio::select! {
                () = &mut shutdown => break 'run,
                () = self.journal.changed.notified() => {}
            }
            while let Err(error) = self.flush().await {
                tracing::error!(%error, "the simulated phone's state could not be saved; retrying");
                tokio::select! {
                    () = &mut shutdown => break 'run,
                    () = tokio::time::sleep(retry) => {}
                }
            }
        }
        if let Err(error) = self.flush().await {
            tracing::error!(%error, "the simulated phone's state could not be saved at shutdown");
        }
    }
}
