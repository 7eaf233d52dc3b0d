//! What a background run reports: the notification summary of its answer, its `last_result`
//! (the answer and one line tracing the run) and where its record is.

use openphone_jobs::limits::LAST_RESULT_MAX_CHARS;
use openphone_jobs::model::truncate_chars;

/// The failure kind of a run that noticed its stop (the scheduler discards the report: the job
/// is already `stopped`, or its run was repaired).
pub const RUN_STOPPED: &str = "run_stopped";

/// The longest trace of tool calls kept in `last_result` (characters).
const TRACE_CHARS: usize = 1_000;

/// Where a run's record is: `transcript:background-job:<id>#<first seq>`.
pub(super) fn output_ref(session: &str, first_seq: Option<i64>) -> String {
    match first_seq {
        Some(seq) => format!("transcript:{session}#{seq}"),
        None => format!("transcript:{session}"),
    }
}

/// What a run did besides its answer, for `last_result`.
pub(super) struct Trace<'a> {
    pub(super) turns: u32,
    pub(super) tool_calls: u32,
    /// `<tool> <status>` per call.
    pub(super) calls: &'a [String],
    /// A context that could not be read.
    pub(super) note: Option<&'a str>,
    pub(super) session: &'a str,
}

/// `last_result`: the answer, then one line tracing the run (turns, tool calls, a context
/// that could not be read), at most 4000 characters (the answer is cut first).
pub(super) fn result_text(answer: &str, run: &Trace<'_>) -> String {
    let mut trace = format!(
        "[run: {} model turn(s), {} tool call(s)",
        run.turns, run.tool_calls
    );
    if !run.calls.is_empty() {
        trace.push_str(": ");
        trace.push_str(&openphone_core::summary::cut(
            &run.calls.join(", "),
            TRACE_CHARS,
        ));
    }
    if let Some(note) = run.note {
        trace.push_str("; ");
        trace.push_str(&openphone_core::summary::cut(note, 300));
    }
    trace.push_str("; transcript ");
    trace.push_str(run.session);
    trace.push(']');
    let room = LAST_RESULT_MAX_CHARS.saturating_sub(trace.chars().count() + 2);
    let answer = openphone_core::summary::cut(answer, room);
    truncate_chars(&format!("{answer}\n\n{trace}"), LAST_RESULT_MAX_CHARS)
}

/// The notification summary of an answer (§4): its text with whitespace folded, cut to at most
/// `max` characters on a word boundary (ending with `…` when cut). `None` for an empty answer.
pub fn summary_of(answer: &str, max: usize) -> Option<String> {
    let text = answer.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.is_empty() || max == 0 {
        return None;
    }
    if text.chars().count() <= max {
        return Some(text);
    }
    let room = max.saturating_sub(1);
    let head: String = text.chars().take(room).collect();
    let at_word_end = text.chars().nth(room) == Some(' ');
    let kept = if at_word_end {
        head.as_str()
    } else {
        match head.rfind(' ') {
            Some(space) if space > 0 => &head[..space],
            // One word longer than the room: cut inside it.
            _ => head.as_str(),
        }
    };
    Some(format!("{}…", kept.trim_end()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn summaries_are_cut_on_a_word_boundary() {
        assert_eq!(summary_of("  ", 240), None);
        assert_eq!(
            summary_of("Two  meetings\ntoday.", 240).as_deref(),
            Some("Two meetings today.")
        );
        let long = "word ".repeat(100);
        let cut = summary_of(&long, 240).unwrap();
        assert!(cut.chars().count() <= 240, "{}", cut.chars().count());
        assert!(cut.ends_with("word…"), "{cut}");
        // A cut that falls right at the end of a word keeps the word.
        assert_eq!(summary_of("abc def ghi", 8).as_deref(), Some("abc def…"));
        assert_eq!(summary_of("abcdefghij", 5).as_deref(), Some("abcd…"));
    }
}
