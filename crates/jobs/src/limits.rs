//! The numbers of `agent-jobs.md` §6.1 and the limits of a job record (§2), in one place.
//! Values marked **\[project\]** are this project's own choices.

/// A wake is never scheduled earlier than now plus this (15 s).
pub const MIN_WAKE_DELAY_MS: i64 = 15_000;
/// A run started longer ago than this is stale and repaired (10 min).
pub const STALE_RUN_MS: i64 = 600_000;
/// At most this many jobs are claimed per tick.
pub const CLAIMS_PER_TICK: usize = 3;
/// A recurring job never runs more often than this (15 s).
pub const INTERVAL_FLOOR_MS: i64 = 15_000;
/// The run that fails for this many consecutive times ends the job as `failed`.
pub const TERMINAL_FAILURES: i64 = 6;
/// From this many consecutive failures on, a failure alert is raised.
pub const ALERT_FAILURES: i64 = 3;
/// How long a background review waits for the user (15 min).
pub const REVIEW_WINDOW_MS: i64 = 900_000;
/// **\[project\]** Wall-clock budget of one run (8 min), below [`STALE_RUN_MS`] so a live run is
/// never repaired as stale.
pub const RUN_BUDGET_MS: i64 = 480_000;
// A live run is never repaired as stale (§12): refuse to build otherwise.
const _: () = assert!(RUN_BUDGET_MS < STALE_RUN_MS);

/// **\[project\]** Model turns per `agent_turn` run.
pub const MODEL_TURNS_PER_RUN: u32 = 16;
/// **\[project\]** Runners active at once.
pub const MAX_RUNNERS: usize = 3;
/// Jobs kept in the store (terminal ones are trimmed to make room).
pub const MAX_JOBS: usize = 200;
/// **\[project\]** Jobs a listing returns by default.
pub const LIST_DEFAULT: usize = 20;
/// Jobs a listing returns at most.
pub const LIST_MAX: usize = 50;
/// **\[project\]** How long a stopped run may take to notice the stop before it is aborted.
pub const STOP_GRACE_MS: i64 = 5_000;

/// `last_result` is cut to this many characters.
pub const LAST_RESULT_MAX_CHARS: usize = 4_000;
/// `phase` is at most this many characters.
pub const PHASE_MAX_CHARS: usize = 120;
/// `progress_text` is at most this many characters.
pub const PROGRESS_TEXT_MAX_CHARS: usize = 4_000;
/// `checkpoint_json` and `pending_tool_request_json`, serialised, are at most this long.
pub const CHECKPOINT_MAX_CHARS: usize = 12_000;
/// `pending_confirmation_id` and `resume_token` are at most this many characters.
pub const CONFIRMATION_ID_MAX_CHARS: usize = 200;
/// `last_surface_id` is at most this many characters.
pub const SURFACE_ID_MAX_CHARS: usize = 160;
/// A user-facing completion summary is at most this many characters (§4).
pub const SUMMARY_MAX_CHARS: usize = 240;

/// **\[project\]** Creation limits (§5 names no numbers; these keep a record bounded).
pub mod create {
    /// Characters of a title.
    pub const TITLE_MAX_CHARS: usize = 200;
    /// Characters of a prompt.
    pub const PROMPT_MAX_CHARS: usize = 16_000;
    /// Serialised characters of `payload`.
    pub const PAYLOAD_MAX_CHARS: usize = 12_000;
    /// Serialised characters of `schedule` and of `delivery`.
    pub const OBJECT_MAX_CHARS: usize = 4_000;
    /// Characters of `notification_text`.
    pub const NOTIFICATION_TEXT_MAX_CHARS: usize = 1_000;
    /// Characters of the id in `session:<id>` (a phone session id).
    pub const SESSION_ID_MAX_CHARS: usize = 160;
    /// The latest accepted due time: the end of year 9999 (Unix ms).
    pub const MAX_TIME_MS: i64 = 253_402_300_799_999;
    /// The longest accepted interval: 366 days.
    pub const MAX_INTERVAL_MS: i64 = 366 * 24 * 3_600_000;
}
