//! Per-credential token buckets, timed by the daemon's injected clock.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use openphone_clock::Clock;

use crate::lock::lock;

/// Token buckets keyed by credential; every request takes one token.
pub struct RateLimiter {
    per_sec: f64,
    burst: f64,
    clock: Arc<dyn Clock>,
    /// Tokens left and when the bucket was last filled (clock milliseconds).
    buckets: Mutex<HashMap<String, (f64, i64)>>,
}

impl fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimiter")
            .field("per_sec", &self.per_sec)
            .field("burst", &self.burst)
            .finish_non_exhaustive()
    }
}

impl RateLimiter {
    /// Buckets of `burst` tokens refilled at `per_sec` tokens a second, read on `clock`.
    pub fn new(per_sec: f64, burst: f64, clock: Arc<dyn Clock>) -> Self {
        Self {
            per_sec: per_sec.max(0.001),
            burst: burst.max(1.0),
            clock,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one token for `key`; `Err(retry_after_ms)` when the bucket is empty.
    pub fn take(&self, key: &str) -> Result<(), u64> {
        self.take_at(key, self.clock.now_ms())
    }

    /// [`RateLimiter::take`] at clock time `now_ms`. A clock that went backwards refills
    /// nothing.
    fn take_at(&self, key: &str, now_ms: i64) -> Result<(), u64> {
        let mut buckets = lock(&self.buckets);
        // Looked up before it is inserted: the key is copied only for a new bucket.
        if let Some(bucket) = buckets.get_mut(key) {
            return self.spend(bucket, now_ms);
        }
        let mut bucket = (self.burst, now_ms);
        let taken = self.spend(&mut bucket, now_ms);
        buckets.insert(key.to_owned(), bucket);
        taken
    }

    /// Refills `bucket` (tokens, last refill) up to `now_ms` and takes one token from it.
    fn spend(&self, bucket: &mut (f64, i64), now_ms: i64) -> Result<(), u64> {
        let (tokens, last) = (&mut bucket.0, &mut bucket.1);
        let elapsed_secs = now_ms.saturating_sub(*last).max(0) as f64 / 1000.0;
        *tokens = (*tokens + elapsed_secs * self.per_sec).min(self.burst);
        *last = now_ms.max(*last);
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            Ok(())
        } else {
            let wait = (1.0 - *tokens) / self.per_sec;
            Err((wait * 1000.0).ceil() as u64)
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use openphone_clock::ManualClock;

    #[test]
    fn burst_then_refill() {
        let rl = RateLimiter::new(10.0, 3.0, Arc::new(ManualClock::new(0)));
        let t0 = 1_000_000;
        for _ in 0..3 {
            rl.take_at("a", t0).unwrap();
        }
        let retry = rl.take_at("a", t0).unwrap_err();
        assert!((1..=100).contains(&retry), "{retry}");
        rl.take_at("b", t0).unwrap();
        rl.take_at("a", t0 + 100).unwrap();
    }

    #[test]
    fn takes_time_from_the_injected_clock() {
        let clock = ManualClock::new(5_000);
        let rl = RateLimiter::new(1.0, 1.0, Arc::new(clock.clone()));
        rl.take("a").unwrap();
        assert_eq!(rl.take("a"), Err(1000));
        clock.advance(1000);
        rl.take("a").unwrap();
        // Backwards: nothing refills, nothing breaks.
        clock.set(0);
        assert!(rl.take("a").is_err());
    }
}
