//! The wait between two attempts (`agent-jobs.md` §7.4).

use std::time::{Duration, UNIX_EPOCH};

use crate::config::RetryPolicy;

/// Whether an HTTP status is retried: 429 and every 5xx.
pub(crate) fn is_retryable_status(status: u16) -> bool {
    status == 429 || (500..=599).contains(&status)
}

/// The computed wait after failed attempt `failed` (1-based), before jitter:
/// `min(max_delay, base_delay × 2^(failed−1))`.
pub(crate) fn backoff(policy: &RetryPolicy, failed: u32) -> Duration {
    let exponent = failed.saturating_sub(1);
    let factor = 1u32.checked_shl(exponent).unwrap_or(u32::MAX);
    policy
        .base_delay
        .checked_mul(factor)
        .unwrap_or(Duration::MAX)
        .min(policy.max_delay)
}

/// Scales `delay` by a factor in `[0.5, 1.5)` drawn from `unit` (a number in `[0, 1)`).
pub(crate) fn apply_jitter(delay: Duration, unit: f64) -> Duration {
    let factor = 0.5 + unit.clamp(0.0, 1.0);
    Duration::try_from_secs_f64(delay.as_secs_f64() * factor).unwrap_or(delay)
}

/// A uniformly random number in `[0, 1)`; 0.5 (no change) if the OS has no randomness to give.
pub(crate) fn random_unit() -> f64 {
    let mut bytes = [0u8; 4];
    match getrandom::fill(&mut bytes) {
        Ok(()) => f64::from(u32::from_le_bytes(bytes)) / (f64::from(u32::MAX) + 1.0),
        Err(_) => 0.5,
    }
}

/// The wait a `Retry-After` value asks for: delta-seconds, or an HTTP date compared with
/// `now_ms` (Unix milliseconds; a date in the past asks for no wait). `None` when the value is
/// neither.
pub(crate) fn parse_retry_after(value: &str, now_ms: i64) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return Some(Duration::from_secs(value.parse().unwrap_or(u64::MAX)));
    }
    // Not in the RFC, but sent by some proxies: fractional seconds.
    if let Ok(seconds) = value.parse::<f64>()
        && seconds.is_finite()
        && seconds >= 0.0
    {
        return Duration::try_from_secs_f64(seconds).ok();
    }
    let date = httpdate::parse_http_date(value).ok()?;
    let date_ms = date.duration_since(UNIX_EPOCH).ok()?.as_millis();
    let date_ms = i64::try_from(date_ms).ok()?;
    let wait_ms = u64::try_from(date_ms.saturating_sub(now_ms)).unwrap_or(0);
    Some(Duration::from_millis(wait_ms))
}

/// The wait an OpenAI-style `retry-after-ms` header asks for.
pub(crate) fn parse_retry_after_ms(value: &str) -> Option<Duration> {
    let millis = value.trim().parse::<f64>().ok()?;
    if !millis.is_finite() || millis < 0.0 {
        return None;
    }
    Duration::try_from_secs_f64(millis / 1000.0).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> RetryPolicy {
        RetryPolicy {
            jitter: false,
            ..RetryPolicy::default()
        }
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let policy = policy();
        let waits: Vec<u64> = (1..=8).map(|k| backoff(&policy, k).as_secs()).collect();
        assert_eq!(waits, vec![1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(backoff(&policy, 200), Duration::from_secs(60));
        assert_eq!(backoff(&policy, 0), Duration::from_secs(1));
    }

    #[test]
    fn jitter_stays_within_half_either_way() {
        let base = Duration::from_secs(10);
        assert_eq!(apply_jitter(base, 0.0), Duration::from_secs(5));
        assert_eq!(apply_jitter(base, 0.5), base);
        assert!(apply_jitter(base, 0.999_999) < Duration::from_secs(15));
        for _ in 0..100 {
            let unit = random_unit();
            assert!((0.0..1.0).contains(&unit));
        }
    }

    #[test]
    fn retry_after_in_seconds_or_as_a_date() {
        // Sun, 06 Nov 1994 08:49:37 GMT = 784111777 s.
        let now_ms = 784_111_777_000 - 30_000;
        assert_eq!(parse_retry_after("7", now_ms), Some(Duration::from_secs(7)));
        assert_eq!(parse_retry_after(" 0 ", now_ms), Some(Duration::ZERO));
        assert_eq!(
            parse_retry_after("1.5", now_ms),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now_ms),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now_ms + 60_000),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now_ms), None);
        assert_eq!(parse_retry_after("-3", now_ms), None);
        assert_eq!(parse_retry_after("", now_ms), None);
        assert_eq!(
            parse_retry_after_ms("250"),
            Some(Duration::from_millis(250))
        );
        assert_eq!(parse_retry_after_ms("x"), None);
    }

    #[test]
    fn only_429_and_5xx_are_retried() {
        for status in [429, 500, 502, 503, 504, 599] {
            assert!(is_retryable_status(status), "{status}");
        }
        for status in [400, 401, 403, 404, 408, 422, 600] {
            assert!(!is_retryable_status(status), "{status}");
        }
    }
}
