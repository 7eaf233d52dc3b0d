//! The failure reasons of a run (`agent-jobs.md` §7.8), written exactly as the specification
//! spells them into `last_result` and the attempt ledger.

use std::fmt;

/// The kind of an unexpected run error: the run outlived its budget.
pub const RUN_BUDGET_EXCEEDED: &str = "run_budget_exceeded";
/// The kind of an unexpected run error: the runner panicked.
pub const RUNNER_PANICKED: &str = "runner_panicked";
/// The kind of an unexpected run error: the runner's task was cancelled without a stop.
pub const RUNNER_CANCELLED: &str = "runner_cancelled";

/// Why a run failed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FailureReason {
    /// No device backend or executor.
    FrameworkUnavailable,
    /// No background model is configured (also: no runner for `agent_turn` is installed).
    ModelUnconfigured,
    /// The execution context could not be opened.
    TaskStartFailed,
    /// An unexpected error in the run; `kind` is a short `snake_case` word such as
    /// `run_budget_exceeded` or `model_http_503`.
    JobError {
        /// What went wrong.
        kind: String,
    },
    /// The external background runtime is missing or not connected.
    DispatchUnavailable {
        /// The runtime's id.
        runtime: String,
    },
    /// Sending the job to the external runtime failed.
    DispatchFailed {
        /// The runtime's id.
        runtime: String,
        /// What went wrong.
        kind: String,
    },
    /// The run was found stale and repaired.
    StuckRunningRepaired,
}

impl FailureReason {
    /// `job_error:<kind>`, with `kind` reduced to letters, digits and `_` (anything else
    /// becomes `_`) and to at most 80 characters, so it stays one token in `last_result`.
    pub fn job_error(kind: &str) -> FailureReason {
        FailureReason::JobError { kind: token(kind) }
    }

    /// `runtime_background_dispatch_unavailable:<runtime>`.
    pub fn dispatch_unavailable(runtime: &str) -> FailureReason {
        FailureReason::DispatchUnavailable {
            runtime: token(runtime),
        }
    }

    /// `runtime_background_dispatch_failed:<runtime>:<kind>`.
    pub fn dispatch_failed(runtime: &str, kind: &str) -> FailureReason {
        FailureReason::DispatchFailed {
            runtime: token(runtime),
            kind: token(kind),
        }
    }

    /// Reads a reason back from its text (the inverse of `Display`).
    pub fn parse(text: &str) -> Option<FailureReason> {
        match text {
            "framework_unavailable" => return Some(FailureReason::FrameworkUnavailable),
            "model_unconfigured" => return Some(FailureReason::ModelUnconfigured),
            "task_start_failed" => return Some(FailureReason::TaskStartFailed),
            "stuck_running_repaired" => return Some(FailureReason::StuckRunningRepaired),
            _ => {}
        }
        if let Some(kind) = text.strip_prefix("job_error:") {
            return is_token(kind).then(|| FailureReason::job_error(kind));
        }
        if let Some(runtime) = text.strip_prefix("runtime_background_dispatch_unavailable:") {
            return is_token(runtime).then(|| FailureReason::dispatch_unavailable(runtime));
        }
        let rest = text.strip_prefix("runtime_background_dispatch_failed:")?;
        let (runtime, kind) = rest.split_once(':')?;
        (is_token(runtime) && is_token(kind)).then(|| FailureReason::dispatch_failed(runtime, kind))
    }
}

impl fmt::Display for FailureReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FailureReason::FrameworkUnavailable => f.write_str("framework_unavailable"),
            FailureReason::ModelUnconfigured => f.write_str("model_unconfigured"),
            FailureReason::TaskStartFailed => f.write_str("task_start_failed"),
            FailureReason::JobError { kind } => write!(f, "job_error:{kind}"),
            FailureReason::DispatchUnavailable { runtime } => {
                write!(f, "runtime_background_dispatch_unavailable:{runtime}")
            }
            FailureReason::DispatchFailed { runtime, kind } => {
                write!(f, "runtime_background_dispatch_failed:{runtime}:{kind}")
            }
            FailureReason::StuckRunningRepaired => f.write_str("stuck_running_repaired"),
        }
    }
}

const TOKEN_MAX_CHARS: usize = 80;

fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.'
}

fn is_token(text: &str) -> bool {
    !text.is_empty() && text.chars().count() <= TOKEN_MAX_CHARS && text.chars().all(is_token_char)
}

fn token(text: &str) -> String {
    let cleaned: String = text
        .trim()
        .chars()
        .take(TOKEN_MAX_CHARS)
        .map(|c| if is_token_char(c) { c } else { '_' })
        .collect();
    if cleaned.is_empty() {
        "unknown".to_owned()
    } else {
        cleaned
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_spelled_as_the_spec_and_read_back() {
        let cases = [
            (FailureReason::FrameworkUnavailable, "framework_unavailable"),
            (FailureReason::ModelUnconfigured, "model_unconfigured"),
            (FailureReason::TaskStartFailed, "task_start_failed"),
            (
                FailureReason::job_error(RUN_BUDGET_EXCEEDED),
                "job_error:run_budget_exceeded",
            ),
            (
                FailureReason::job_error("model_http_503"),
                "job_error:model_http_503",
            ),
            (
                FailureReason::dispatch_unavailable("openclaw"),
                "runtime_background_dispatch_unavailable:openclaw",
            ),
            (
                FailureReason::dispatch_failed("hermes", "send_timeout"),
                "runtime_background_dispatch_failed:hermes:send_timeout",
            ),
            (
                FailureReason::StuckRunningRepaired,
                "stuck_running_repaired",
            ),
        ];
        for (reason, text) in cases {
            assert_eq!(reason.to_string(), text);
            assert_eq!(FailureReason::parse(text), Some(reason));
        }
        assert_eq!(FailureReason::parse("job_error:"), None);
        assert_eq!(FailureReason::parse("something_else"), None);
    }

    #[test]
    fn kinds_stay_one_token() {
        assert_eq!(
            FailureReason::job_error("bad thing: x\ny").to_string(),
            "job_error:bad_thing__x_y"
        );
        assert_eq!(
            FailureReason::job_error("  ").to_string(),
            "job_error:unknown"
        );
        let long = "k".repeat(200);
        assert_eq!(
            FailureReason::job_error(&long).to_string().len(),
            "job_error:".len() + 80
        );
    }
}
