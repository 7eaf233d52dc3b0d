//! Per-credential token buckets.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

/// Token buckets keyed by credential; every request takes one token.
#[derive(Debug)]
pub struct RateLimiter {
    per_sec: f64,
    burst: f64,
    buckets: Mutex<HashMap<String, (f64, Instant)>>,
}

impl RateLimiter {
    pub fn new(per_sec: f64, burst: f64) -> Self {
        Self {
            per_sec: per_sec.max(0.001),
            burst: burst.max(1.0),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one token for `key`; `Err(retry_after_ms)` when the bucket is empty.
    pub fn take(&self, key: &str) -> Result<(), u64> {
        self.take_at(key, Instant::now())
    }

    fn take_at(&self, key: &str, now: Instant) -> Result<(), u64> {
        let mut buckets = self
            .buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (tokens, last) = buckets.entry(key.to_owned()).or_insert((self.burst, now));
        let elapsed = now.saturating_duration_since(*last).as_secs_f64();
        *tokens = (*tokens + elapsed * self.per_sec).min(self.burst);
        *last = now;
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
    use std::time::Duration;

    #[test]
    fn burst_then_refill() {
        let rl = RateLimiter::new(10.0, 3.0);
        let t0 = Instant::now();
        for _ in 0..3 {
            rl.take_at("a", t0).unwrap();
        }
        let retry = rl.take_at("a", t0).unwrap_err();
        assert!((1..=100).contains(&retry), "{retry}");
        rl.take_at("b", t0).unwrap();
        rl.take_at("a", t0 + Duration::from_millis(100)).unwrap();
    }
}
