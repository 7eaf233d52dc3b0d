//! Injectable time for the OpenPhone runtime.
//!
//! Everything in the runtime that needs "now" — the simulated phone, the store's timestamps,
//! confirmation timeouts, job schedules and goal deadlines — asks an [`Arc<dyn Clock>`]
//! instead of reading the system time, so tests can run in simulated time:
//!
//! - [`SystemClock`] reads the operating system's wall clock (the daemon's default);
//! - [`ManualClock`] holds a time that only moves when told to ([`ManualClock::set`],
//!   [`ManualClock::advance`]). Clones share the same time, so a test can keep one handle and
//!   give another to the code under test.
//!
//! Time is Unix milliseconds as `i64`, the unit of the wire protocol.
//!
//! This crate is the only place that reads the operating system's clocks: clippy's
//! `disallowed-methods` (see `clippy.toml` at the workspace root) refuses `SystemTime::now` and
//! `Instant::now` everywhere else. Code that only measures how long something took, for a
//! benchmark or a metric, uses a [`Stopwatch`], which never stands in for "now".
//!
//! [`human`] turns instants into text a person reads (local time with the zone, "in 2 h") and
//! reads the times a person writes (RFC 3339, `in 2h`, `tomorrow 09:00`).
//!
//! [`Arc<dyn Clock>`]: std::sync::Arc

#![deny(missing_docs)]

pub mod human;

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A source of the current time in Unix milliseconds.
pub trait Clock: Send + Sync + Debug {
    /// The current time, Unix milliseconds.
    fn now_ms(&self) -> i64;
}

/// The operating system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[allow(clippy::disallowed_methods)] // reason: the one wall-clock read of the runtime
    fn now_ms(&self) -> i64 {
        match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(since) => i64::try_from(since.as_millis()).unwrap_or(i64::MAX),
            // A clock set before 1970: report negative milliseconds rather than panicking.
            Err(before) => i64::try_from(before.duration().as_millis()).map_or(i64::MIN, |ms| -ms),
        }
    }
}

/// Measures elapsed time on the monotonic clock, for benchmarks and metrics only: it answers
/// "how long did this take", never "what time is it", so it is not injected.
#[derive(Debug, Clone, Copy)]
pub struct Stopwatch {
    started: Instant,
}

impl Stopwatch {
    /// A stopwatch running from now.
    #[allow(clippy::disallowed_methods)] // reason: elapsed-time measurement, not a time of day
    pub fn start() -> Stopwatch {
        Stopwatch {
            started: Instant::now(),
        }
    }

    /// The time since [`Stopwatch::start`].
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}

/// A clock that only moves when told to. Clones share one time.
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    now: Arc<AtomicI64>,
}

impl ManualClock {
    /// A clock standing at `start_ms`.
    pub fn new(start_ms: i64) -> Self {
        Self {
            now: Arc::new(AtomicI64::new(start_ms)),
        }
    }

    /// Moves the clock to `ms` (backwards too: tests of clock skew need it).
    pub fn set(&self, ms: i64) {
        self.now.store(ms, Ordering::SeqCst);
    }

    /// Moves the clock forward by `delta_ms` (saturating) and returns the new time.
    pub fn advance(&self, delta_ms: i64) -> i64 {
        let mut current = self.now.load(Ordering::SeqCst);
        loop {
            let next = current.saturating_add(delta_ms);
            match self
                .now
                .compare_exchange(current, next, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return next,
                Err(actual) => current = actual,
            }
        }
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.now.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_clones_share_time() {
        let clock = ManualClock::new(1_000);
        let shared = clock.clone();
        assert_eq!(shared.advance(500), 1_500);
        assert_eq!(clock.now_ms(), 1_500);
        clock.set(10);
        assert_eq!(shared.now_ms(), 10);
        assert_eq!(clock.advance(i64::MAX), i64::MAX);
    }

    #[test]
    fn manual_clock_is_thread_safe() {
        let clock = ManualClock::new(0);
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let clock = clock.clone();
                std::thread::spawn(move || {
                    for _ in 0..1_000 {
                        clock.advance(1);
                    }
                })
            })
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
        assert_eq!(clock.now_ms(), 4_000);
    }

    #[test]
    fn system_clock_is_after_2020_and_usable_as_dyn() {
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        assert!(clock.now_ms() > 1_577_836_800_000);
    }
}
