//! The retry budget's backoff (§8): 1 s doubling per attempt, capped at 60 s, with jitter.
//!
//! The jitter is derived from the goal, the action and the attempt (not from a random source),
//! so the same goal waits the same in every run of the simulator, while two actions that fail
//! together do not retry in lock-step.

/// The first backoff, ms.
pub const BASE_MS: i64 = 1_000;
/// The cap, ms.
pub const CAP_MS: i64 = 60_000;

/// The wait before attempt `attempts + 1`, after `attempts` attempts: `min(1 s · 2^(attempts−1),
/// 60 s)` plus a jitter of up to a quarter of that.
pub fn backoff_ms(attempts: u32, goal_id: &str, action_id: &str) -> i64 {
    let exponent = attempts.saturating_sub(1).min(16);
    let base = BASE_MS.saturating_mul(1_i64 << exponent).min(CAP_MS);
    let seed = crate::ids::digest_text(&format!("{goal_id}:{action_id}:{attempts}"));
    let spread = i64::from_str_radix(&seed[..8], 16).unwrap_or(0);
    base + spread % (base / 4 + 1)
}
