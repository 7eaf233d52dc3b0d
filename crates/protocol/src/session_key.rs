//! Session keys the daemon makes itself: the one constructor (and parser) of each, so no crate
//! spells a key's format.

/// The prefix of a background job's session key.
const BACKGROUND_JOB_PREFIX: &str = "background-job:";

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
}
