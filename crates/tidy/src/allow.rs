//! The allowlist: violations on the real tree that other work is removing. Each entry names
//! its rule, its file and why it is still here; an entry that no longer matches anything fails
//! the tidy tests (remove it), so the list only shrinks.

use crate::Violation;

/// One tolerated (rule, file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allowed {
    pub rule: &'static str,
    pub path: &'static str,
    pub why: &'static str,
}

/// Every tolerated violation.
pub const ALLOWED: &[Allowed] = &[];

/// The violations of `rule` the allowlist does not cover, and the allowlist entries of `rule`
/// that matched none (stale).
pub fn apply(rule: &str, violations: Vec<Violation>) -> (Vec<Violation>, Vec<Allowed>) {
    let entries: Vec<Allowed> = ALLOWED.iter().filter(|a| a.rule == rule).copied().collect();
    let stale = entries
        .iter()
        .filter(|a| !violations.iter().any(|v| v.path == a.path))
        .copied()
        .collect();
    let left = violations
        .into_iter()
        .filter(|v| !entries.iter().any(|a| a.path == v.path))
        .collect();
    (left, stale)
}
