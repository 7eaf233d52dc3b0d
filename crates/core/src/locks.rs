//! Locking that survives a poisoned lock.
//!
//! A panic while a lock is held poisons it. The data behind the core's locks (maps of waiters,
//! tasks, identity locks, configuration, presence) stays consistent at every point a panic
//! could happen, so the core keeps using it rather than failing every later request.

use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Locks `m`, also when an earlier holder panicked.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Read-locks `l`, also when an earlier writer panicked.
pub(crate) fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(PoisonError::into_inner)
}

/// Write-locks `l`, also when an earlier holder panicked.
pub(crate) fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(PoisonError::into_inner)
}
