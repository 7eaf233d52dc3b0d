//! Delivery (`agent-jobs.md` §4): what a job's notification says, and the delivery state
//! recorded after the notifier answered. Delivery is its own fact: a run that finished and a
//! user who was told are different things, and a failed delivery is retried from the stored
//! output, never by running the job again.

use openphone_protocol::display_text;
use openphone_store::{DeliveryState, Store, StoreError};

use crate::limits::SUMMARY_MAX_CHARS;
use crate::model::{AgentJob, AgentJobExt, truncate_chars};

// Every text below is shown to a person on the phone, so every one goes through
// `display_text`, the one escape of foreground confirmations: a bidi override or a
// zero-width character in a title, a summary or a model's answer reads `\u{202E}`, never
// reorders or hides what the notification says.

/// The body of a completion notification (§4): `notification_text` exactly when set (no
/// prefix, suffix or template expansion); else the run's short summary (≤ 240 characters);
/// else `<title> finished`. Never `last_result`. Shown escaped ([`display_text`]).
pub fn completion_body(job: &AgentJob, summary: Option<&str>) -> String {
    if let Some(text) = job.notification_text() {
        return display_text(text).into_owned();
    }
    match summary.map(str::trim).filter(|s| !s.is_empty()) {
        Some(summary) => truncate_chars(&display_text(summary), SUMMARY_MAX_CHARS),
        None => format!("{} finished", display_text(&job.title)),
    }
}

/// The title of a job's completion notification: the job's title, shown escaped.
pub fn completion_title(job: &AgentJob) -> String {
    display_text(&job.title).into_owned()
}

/// The title of a job's failure alert (§7.6).
pub fn failure_title(job: &AgentJob) -> String {
    format!("Background job failed: {}", display_text(&job.title))
}

/// The title of the alert for an approved action whose outcome is unknown (§9.10).
pub fn stopped_title(title: &str) -> String {
    format!("Background job stopped: {}", display_text(title))
}

/// The title of a review's notification (§9.4).
pub fn review_title(title: &str) -> String {
    format!("Review: {}", display_text(title))
}

/// The body of a review's notification (§9.4): the exact action (the record's summary, shown
/// escaped whatever the stored record holds) and the minutes left.
pub fn review_body(summary: &str, minutes: i64) -> String {
    format!("{}\nExpires in {minutes} min.", display_text(summary))
}

/// The body of a failure alert (§7.6): its own wording — the number of consecutive failures
/// and the next attempt, or that the job gave up; never `notification_text`, never the trace.
pub fn failure_body(job: &AgentJob, now_ms: i64) -> String {
    let failures = job.failure_count;
    let times = if failures == 1 { "time" } else { "times" };
    if job.status == openphone_store::JobStatus::Failed {
        format!("Failed {failures} {times} in a row and gave up. It will not run again.")
    } else {
        let minutes = ((job.next_run_at - now_ms).max(0) + 59_999) / 60_000;
        let unit = if minutes == 1 { "minute" } else { "minutes" };
        format!("Failed {failures} {times} in a row. Next attempt in {minutes} {unit}.")
    }
}

/// The notification key of a job's result (one per job, updated in place).
pub fn result_key(job_id: i64) -> String {
    format!("job-{job_id}-result")
}

/// The notification key of a job's failure alert (one per job, updated in place, §7.6).
pub fn failure_key(job_id: i64) -> String {
    format!("job-{job_id}-failure")
}

/// The notification key of a background review (`review-<confirmation id>`).
pub fn review_key(confirmation_id: &str) -> String {
    format!("review-{confirmation_id}")
}

/// The confirmation id a review notification key names, if it is one.
pub fn review_of_key(key: &str) -> Option<&str> {
    key.strip_prefix("review-")
        .filter(|id| id.starts_with("job-confirm-"))
}

/// What a job's pending delivery announces, read from the stored job: the outcome of its
/// latest run decides, never the event that happened to carry it (issue 32: a third failure
/// in a row was announced twice, as a failure and as "`<title>` finished").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Announcement {
    /// The run completed: the result notification ([`completion_body`]).
    Completion,
    /// The run failed: the failure alert ([`failure_body`]), never a completion.
    FailureAlert,
    /// An approved action's outcome is unknown after a crash (§9.10): the stopped alert.
    OutcomeUnknown,
}

/// What the delivery of `job`'s latest outcome announces.
pub fn announcement(job: &AgentJob) -> Announcement {
    if job.phase == openphone_store::JobPhase::ReviewResolutionUnknown {
        Announcement::OutcomeUnknown
    } else if job.failure_count > 0 || job.status == openphone_store::JobStatus::Failed {
        Announcement::FailureAlert
    } else {
        Announcement::Completion
    }
}

/// Records what became of the delivery of the result the job had when its run ended at
/// `last_run_at`: written only while that delivery is still `pending` (a later run's result
/// is not touched). Returns whether it was written.
pub fn record_delivery(
    store: &Store,
    job_id: i64,
    last_run_at: i64,
    state: DeliveryState,
) -> Result<bool, StoreError> {
    for _ in 0..8 {
        let Some(mut row) = store.get_job(job_id)? else {
            return Ok(false);
        };
        if row.delivery_state != Some(DeliveryState::Pending) || row.job.last_run_at != last_run_at
        {
            return Ok(false);
        }
        row.delivery_state = Some(state);
        match store.update_job(&row) {
            Ok(_) => return Ok(true),
            Err(StoreError::Conflict { .. }) => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job() -> AgentJob {
        serde_json::from_value(json!({
            "id": 7, "type": "agent_turn", "title": "Release notes", "prompt": "p",
            "payload_json": {}, "schedule_json": {}, "session_target": "main",
            "delivery_json": {"mode": "notification"}, "status": "completed",
            "created_at": 1, "updated_at": 1, "next_run_at": 0, "running_at": 0,
            "last_run_at": 5, "last_result": "TRACE: tool calls …", "failure_count": 0,
            "failure_alert_at": 0, "phase": "completed", "progress_text": "",
            "progress_current": 0, "progress_total": 0, "checkpoint_json": {},
            "pending_confirmation_id": "", "pending_tool_request_json": {},
            "last_surface_id": "", "resume_token": "", "last_event_at": 1,
            "unread_result": true, "paused_at": 0
        }))
        .unwrap()
    }

    #[test]
    fn notification_wording_follows_the_rules() {
        let mut j = job();
        assert_eq!(completion_body(&j, None), "Release notes finished");
        assert_eq!(
            completion_body(&j, Some("  3 new entries ")),
            "3 new entries"
        );
        let long = "x".repeat(300);
        assert_eq!(completion_body(&j, Some(&long)).chars().count(), 240);
        j.delivery_json
            .insert("notification_text".into(), json!("Release notes changed"));
        assert_eq!(
            completion_body(&j, Some("a summary")),
            "Release notes changed",
            "notification_text is used verbatim"
        );
        assert!(!completion_body(&j, None).contains("TRACE"));
        j.failure_count = 3;
        j.status = openphone_store::JobStatus::Queued;
        j.next_run_at = 10 + 4 * 60_000;
        assert_eq!(
            failure_body(&j, 10),
            "Failed 3 times in a row. Next attempt in 4 minutes."
        );
        j.status = openphone_store::JobStatus::Failed;
        j.failure_count = 6;
        assert!(failure_body(&j, 10).contains("gave up"));
        assert!(!failure_body(&j, 10).contains("Release notes changed"));
    }

    #[test]
    fn every_notification_text_shows_bidi_and_zero_width_characters_escaped() {
        let mut j = job();
        j.title = "Pay\u{202e}lla\u{202c}".to_owned();
        assert_eq!(completion_title(&j), r"Pay\u{202E}lla\u{202C}");
        assert_eq!(
            failure_title(&j),
            r"Background job failed: Pay\u{202E}lla\u{202C}"
        );
        assert_eq!(
            completion_body(&j, None),
            r"Pay\u{202E}lla\u{202C} finished"
        );
        assert_eq!(
            completion_body(&j, Some("sent to +1555\u{200b}0100")),
            r"sent to +1555\u{200B}0100"
        );
        assert_eq!(review_title("a\u{2066}b"), r"Review: a\u{2066}b");
        assert_eq!(
            review_body("messages send with {\"to\":\"+1\u{feff}\"}", 15),
            "messages send with {\"to\":\"+1\\u{FEFF}\"}\nExpires in 15 min."
        );
        assert_eq!(
            stopped_title("x\u{200d}"),
            r"Background job stopped: x\u{200D}"
        );
        j.delivery_json
            .insert("notification_text".into(), json!("done\u{202e}"));
        assert_eq!(completion_body(&j, None), r"done\u{202E}");
    }

    #[test]
    fn a_failed_run_is_announced_as_a_failure_never_as_finished() {
        let mut j = job();
        assert_eq!(announcement(&j), Announcement::Completion);
        j.status = openphone_store::JobStatus::Queued;
        j.failure_count = 3;
        assert_eq!(announcement(&j), Announcement::FailureAlert);
        j.status = openphone_store::JobStatus::Failed;
        j.failure_count = 6;
        assert_eq!(announcement(&j), Announcement::FailureAlert);
        j.failure_count = 0;
        j.phase = openphone_store::JobPhase::ReviewResolutionUnknown;
        assert_eq!(announcement(&j), Announcement::OutcomeUnknown);
    }

    #[test]
    fn review_keys_round_trip() {
        assert_eq!(
            review_of_key(&review_key("job-confirm-abc")),
            Some("job-confirm-abc")
        );
        assert_eq!(review_of_key("job-7-result"), None);
        assert_eq!(review_of_key("review-other"), None);
    }
}
