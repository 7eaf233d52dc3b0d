//! Schedule arithmetic as pure functions: the retry backoff (§7.6), the recurring interval with
//! its floor (§5, §7.5) and the single next wake (§6.4).

#[cfg(doc)]
use crate::limits::MIN_WAKE_DELAY_MS;

/// One minute in milliseconds.
const MINUTE_MS: i64 = 60_000;

/// The wait before the next run after `failures` consecutive failures:
/// `2^(min(max(n, 1), 6) − 1)` minutes — 1, 2, 4, 8, 16, then 32 minutes at most.
pub fn backoff_ms(failures: i64) -> i64 {
    let exponent = failures.clamp(1, 6) - 1;
    MINUTE_MS << exponent
}

/// When the scheduler should wake next, given the earliest moment something about the jobs
/// needs it (`candidate`, 0 = now), the time now and the minimum delay (15 s,
/// [`MIN_WAKE_DELAY_MS`]): `max(candidate, now + min_delay_ms)`; `None` when nothing needs it.
pub fn wake_at(candidate: Option<i64>, now_ms: i64, min_delay_ms: i64) -> Option<i64> {
    candidate.map(|at| at.max(now_ms.saturating_add(min_delay_ms)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::MIN_WAKE_DELAY_MS;

    #[test]
    fn backoff_ladder() {
        let minutes: Vec<i64> = (0..=8).map(|n| backoff_ms(n) / MINUTE_MS).collect();
        assert_eq!(minutes, [1, 1, 2, 4, 8, 16, 32, 32, 32]);
        assert_eq!(backoff_ms(-3), MINUTE_MS);
        assert_eq!(backoff_ms(i64::MAX), 32 * MINUTE_MS);
    }

    #[test]
    fn the_wake_is_never_sooner_than_the_minimum_delay() {
        let now = 1_000_000;
        let delay = MIN_WAKE_DELAY_MS;
        assert_eq!(wake_at(None, now, delay), None);
        assert_eq!(wake_at(Some(0), now, delay), Some(now + delay));
        assert_eq!(wake_at(Some(now + 5), now, delay), Some(now + delay));
        assert_eq!(wake_at(Some(now + 60_000), now, delay), Some(now + 60_000));
    }
}
