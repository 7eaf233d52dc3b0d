//! Session keys the daemon makes itself: the one constructor (and parser) of each, so no crate
//! spells a key's format.
//!
//! | key | whose | constructor | parser |
//! |---|---|---|---|
//! | `background-job:<job_id>` | a job's runs, its tool calls, its reviews' execution | [`background_job_session`] | [`background_job_of`] |
//! | `goal:<goal_id>` | a goal's main-session actions and tool checks | [`goal_session`] | [`goal_of`] |
//! | `goal:<goal_id>:<action_id>` | a goal action in its own session | [`goal_action_session`] | [`goal_of`] |
//! | `goal:<goal_id>:judge` | a goal's runtime-judge turns | [`goal_judge_session`] | [`goal_of`] |
//! | `watcher:<watcher_id>` | a watcher's own checks | [`watcher_session`] | [`watcher_of`] |

/// The prefix of a background job's session key.
const BACKGROUND_JOB_PREFIX: &str = "background-job:";
/// The prefix of a goal's session keys.
const GOAL_PREFIX: &str = "goal:";
/// The last part of a goal's runtime-judge session key.
const GOAL_JUDGE: &str = "judge";
/// The prefix of a watcher's session key.
const WATCHER_PREFIX: &str = "watcher:";

/// `background-job:<job_id>`: the runtime session and phone session of a background job's runs,
/// of its tool calls and of the execution of its reviews.
pub fn background_job_session(job_id: i64) -> String {
    format!("{BACKGROUND_JOB_PREFIX}{job_id}")
}

/// The text after `background-job:` when `session` is a background job's session key, else
/// `None`. The text is returned unparsed so a caller can name a malformed id in its error.
pub fn background_job_of(session: &str) -> Option<&str> {
    session.strip_prefix(BACKGROUND_JOB_PREFIX)
}

/// `goal:<goal_id>`: the runtime session of a goal's main-session actions, the scope of its
/// grants and the session of its tool-predicate checks.
pub fn goal_session(goal_id: &str) -> String {
    format!("{GOAL_PREFIX}{goal_id}")
}

/// `goal:<goal_id>:<action_id>`: the runtime session of a goal action that runs in its own
/// session.
pub fn goal_action_session(goal_id: &str, action_id: &str) -> String {
    format!("{GOAL_PREFIX}{goal_id}:{action_id}")
}

/// `goal:<goal_id>:judge`: the runtime session of a goal's runtime-judge turns.
pub fn goal_judge_session(goal_id: &str) -> String {
    goal_action_session(goal_id, GOAL_JUDGE)
}

/// `goal:<goal_id>:`: what every per-action (and judge) session key of goal `goal_id` starts
/// with (not the main session `goal:<goal_id>`).
pub fn goal_action_sessions_prefix(goal_id: &str) -> String {
    goal_action_session(goal_id, "")
}

/// The goal id of any of a goal's session keys (`goal:<id>`, `goal:<id>:<action>`,
/// `goal:<id>:judge`): the text after `goal:` up to the next `:`, else `None` when `session`
/// is not a goal's. The id may be empty (`goal:`, `goal::x`); callers refuse that themselves.
pub fn goal_of(session: &str) -> Option<&str> {
    session
        .strip_prefix(GOAL_PREFIX)
        .map(|rest| rest.split(':').next().unwrap_or(rest))
}

/// `watcher:<watcher_id>`: the runtime session of a watcher's own checks (its screen reads).
pub fn watcher_session(watcher_id: i64) -> String {
    format!("{WATCHER_PREFIX}{watcher_id}")
}

/// The watcher id text of a watcher's session key: the text after `watcher:` up to the next
/// `:`, unparsed so a caller can refuse a malformed id, else `None` when `session` is not a
/// watcher's.
pub fn watcher_of(session: &str) -> Option<&str> {
    session
        .strip_prefix(WATCHER_PREFIX)
        .map(|rest| rest.split(':').next().unwrap_or(rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn background_job_keys_round_trip() {
        assert_eq!(background_job_session(12), "background-job:12");
        assert_eq!(background_job_of("background-job:12"), Some("12"));
        assert_eq!(background_job_of("background-job:x"), Some("x"));
        assert_eq!(background_job_of("goal:3"), None);
    }

    #[test]
    fn goal_keys_round_trip() {
        assert_eq!(goal_session("goal_01ABC"), "goal:goal_01ABC");
        assert_eq!(
            goal_action_session("goal_01ABC", "step"),
            "goal:goal_01ABC:step"
        );
        assert_eq!(goal_judge_session("goal_01ABC"), "goal:goal_01ABC:judge");
        assert_eq!(
            goal_action_sessions_prefix("goal_01ABC"),
            "goal:goal_01ABC:"
        );
        for key in [
            goal_session("goal_01ABC"),
            goal_action_session("goal_01ABC", "step"),
            goal_judge_session("goal_01ABC"),
        ] {
            assert_eq!(goal_of(&key), Some("goal_01ABC"));
        }
        assert!(goal_action_session("g", "a").starts_with(&goal_action_sessions_prefix("g")));
        assert!(!goal_session("g").starts_with(&goal_action_sessions_prefix("g")));
    }

    #[test]
    fn malformed_goal_keys() {
        assert_eq!(goal_of("goal:"), Some(""));
        assert_eq!(goal_of("goal::step"), Some(""));
        assert_eq!(goal_of("background-job:4"), None);
        assert_eq!(goal_of("watcher:4"), None);
        assert_eq!(goal_of("goals:x"), None);
        assert_eq!(goal_of(" goal:x"), None);
        assert_eq!(goal_of(""), None);
    }

    #[test]
    fn watcher_keys_round_trip() {
        assert_eq!(watcher_session(7), "watcher:7");
        assert_eq!(watcher_of(&watcher_session(7)), Some("7"));
        assert_eq!(watcher_of("watcher:7:x"), Some("7"));
    }

    #[test]
    fn malformed_watcher_keys() {
        assert_eq!(watcher_of("watcher:"), Some(""));
        assert_eq!(watcher_of("watcher:x"), Some("x"));
        assert_eq!(watcher_of("watchers:7"), None);
        assert_eq!(watcher_of("goal:7"), None);
        assert_eq!(watcher_of("background-job:7"), None);
    }
}
