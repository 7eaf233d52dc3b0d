//! The crate's one way to take a mutex.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `mutex`, recovering the guard when another thread panicked while holding it: every
/// value the crate keeps behind a mutex (subscriptions, rate buckets, a task handle) stays
/// consistent between statements, so a poisoned lock holds nothing half-written.
pub(crate) fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
