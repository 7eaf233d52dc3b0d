//! The crate's one poison-recovering lock.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `mutex`, recovering the guard if a thread panicked while holding it: every value this
/// crate keeps behind a mutex (call bookkeeping, per-runtime slots) stays consistent between
/// statements, so a panic elsewhere must not take the connection down with it.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
