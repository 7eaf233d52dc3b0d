//! Delta reports (§7): what changed since the last report — actions done, new blockers with
//! the command that resolves each, approvals waiting, the deadline, next steps, evidence — as
//! data ([`DeltaReport`]), and its renderers: plain text, Markdown, JSON and Telegram
//! MarkdownV2 ([`telegram_messages`]: every reserved character escaped, at most 4096
//! characters per message, split on line boundaries, never inside an escape).

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::model::{ActionState, Goal, GoalState};

/// Telegram's limit on one message's text, in characters.
pub const TELEGRAM_MAX_CHARS: usize = 4096;

/// Why a report was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReportReason {
    /// The goal or an action changed state.
    Progress,
    /// A new blocker (an approval needed, a failure, a question).
    Blocked,
    /// A checkpoint was reached.
    Checkpoint,
    /// A checkpoint's contract was missed: escalation.
    CheckpointMissed,
    /// The goal is done.
    Done,
    /// The deadline: the fallback summary and blockers report.
    Deadline,
}

/// A blocker as reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportedBlocker {
    pub action: String,
    pub kind: String,
    pub reason: String,
    /// The exact command that resolves it.
    pub how_to_resolve: String,
}

/// One delta report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeltaReport {
    pub goal_id: String,
    pub objective: String,
    pub reason: ReportReason,
    pub state: GoalState,
    pub at: i64,
    /// Actions done since the last report (titles).
    pub done: Vec<String>,
    /// Blockers new since the last report (every open blocker in a missed-checkpoint or
    /// deadline report).
    pub new_blockers: Vec<ReportedBlocker>,
    /// Every approval waiting now: `title — command`.
    pub approvals_waiting: Vec<String>,
    /// `deadline in 42 min`, `deadline passed`, or empty.
    pub deadline: String,
    /// Checkpoint lines new since the last report.
    pub checkpoints: Vec<String>,
    /// What runs next (titles).
    pub next: Vec<String>,
    /// Evidence new since the last report (references).
    pub evidence: Vec<String>,
    /// Progress: actions done of the plan's total.
    pub progress: (usize, usize),
}

/// The report of what changed in `goal` since `goal.reported`, or `None` when nothing that
/// matters to the user changed and `force` is false. Marks what it covers as reported.
pub fn delta(goal: &mut Goal, reason: ReportReason, now: i64, force: bool) -> Option<DeltaReport> {
    // Taken out while it is compared with (it is rewritten below when a report is made).
    let last = std::mem::take(&mut goal.reported);
    let seen_blockers: HashSet<&str> = last.blockers.iter().map(String::as_str).collect();
    let seen_evidence: HashSet<&str> = last.evidence.iter().map(String::as_str).collect();
    let done: Vec<String> = goal
        .actions
        .iter()
        .filter(|a| {
            a.state == ActionState::Done && last.actions.get(&a.id) != Some(&ActionState::Done)
        })
        .map(|a| a.title.clone())
        .collect();
    let new_blockers: Vec<ReportedBlocker> = goal
        .blockers
        .iter()
        // A missed checkpoint and the deadline name every blocker, not only new ones.
        .filter(|b| {
            !seen_blockers.contains(b.id.as_str())
                || matches!(
                    reason,
                    ReportReason::CheckpointMissed | ReportReason::Deadline
                )
        })
        .map(|b| ReportedBlocker {
            action: b
                .action_id
                .as_deref()
                .and_then(|id| goal.action(id))
                .map_or_else(|| "goal".to_owned(), |a| a.title.clone()),
            kind: b.kind.as_str().to_owned(),
            reason: b.reason.clone(),
            how_to_resolve: b.how_to_resolve.clone(),
        })
        .collect();
    let checkpoints: Vec<String> = goal
        .checkpoints
        .iter()
        .filter(|c| c.evaluated_at.is_some() && !last.checkpoints.contains(&c.label))
        .map(|c| {
            format!(
                "{} {}{}: {}",
                c.label,
                match c.outcome {
                    crate::model::CheckpointOutcome::Met => "met",
                    crate::model::CheckpointOutcome::Missed => "MISSED",
                    crate::model::CheckpointOutcome::Pending => "pending",
                },
                if c.late { " (late)" } else { "" },
                c.note
            )
        })
        .collect();
    let evidence: Vec<String> = goal
        .evidence
        .iter()
        .filter(|e| !seen_evidence.contains(e.id.as_str()))
        .map(|e| format!("{} {}", e.id, e.reference))
        .collect();
    let state_changed = last.state != Some(goal.state);
    let matters =
        state_changed || !done.is_empty() || !new_blockers.is_empty() || !checkpoints.is_empty();
    if !matters && !force {
        goal.reported = last;
        return None;
    }
    let approvals_waiting = goal
        .actions
        .iter()
        .filter(|a| a.state == ActionState::NeedsApproval)
        .filter_map(|a| {
            a.resume_token
                .as_ref()
                .map(|t| format!("{} — openphone confirmations approve {t}", a.title))
        })
        .collect();
    let next = goal
        .actions
        .iter()
        .filter(|a| {
            matches!(
                a.state,
                ActionState::Ready | ActionState::Planned | ActionState::Running
            )
        })
        .take(5)
        .map(|a| a.title.clone())
        .collect();
    let deadline = match goal.deadline_at {
        None => String::new(),
        Some(d) if d > now => format!("deadline in {} min", (d - now).div_euclid(60_000)),
        Some(_) => "deadline passed".to_owned(),
    };
    let total = goal.actions.iter().filter(|a| !a.optional).count();
    let finished = goal
        .actions
        .iter()
        .filter(|a| !a.optional && a.state == ActionState::Done)
        .count();
    // Mark as reported.
    goal.reported.actions = goal
        .actions
        .iter()
        .map(|a| (a.id.clone(), a.state))
        .collect();
    goal.reported.blockers = goal.blockers.iter().map(|b| b.id.clone()).collect();
    goal.reported.checkpoints = goal
        .checkpoints
        .iter()
        .filter(|c| c.evaluated_at.is_some())
        .map(|c| c.label.clone())
        .collect();
    goal.reported.evidence = goal.evidence.iter().map(|e| e.id.clone()).collect();
    goal.reported.state = Some(goal.state);
    Some(DeltaReport {
        goal_id: goal.id.clone(),
        objective: goal.objective.clone(),
        reason,
        state: goal.state,
        at: now,
        done,
        new_blockers,
        approvals_waiting,
        deadline,
        checkpoints,
        next,
        evidence,
        progress: (finished, total),
    })
}

/// The sections of a report as (heading, lines), in order; empty sections left out.
fn sections(r: &DeltaReport) -> Vec<(&'static str, Vec<String>)> {
    let blockers = r
        .new_blockers
        .iter()
        .map(|b| {
            format!(
                "{} ({}): {} → {}",
                b.action, b.kind, b.reason, b.how_to_resolve
            )
        })
        .collect();
    let all = vec![
        ("Done", r.done.clone()),
        ("New blockers", blockers),
        ("Approvals waiting", r.approvals_waiting.clone()),
        ("Checkpoints", r.checkpoints.clone()),
        ("Next", r.next.clone()),
        ("Evidence", r.evidence.clone()),
    ];
    all.into_iter()
        .filter(|(_, lines)| !lines.is_empty())
        .collect()
}

fn headline(r: &DeltaReport) -> String {
    let mut line = format!(
        "Goal {} — {} ({}/{} done)",
        r.state, r.objective, r.progress.0, r.progress.1
    );
    if !r.deadline.is_empty() {
        line.push_str(", ");
        line.push_str(&r.deadline);
    }
    line
}

/// Plain text.
pub fn render_plain(r: &DeltaReport) -> String {
    let mut out = headline(r);
    out.push('\n');
    for (heading, lines) in sections(r) {
        out.push_str(heading);
        out.push_str(":\n");
        for l in lines {
            out.push_str("- ");
            out.push_str(&l);
            out.push('\n');
        }
    }
    out
}

/// Markdown.
pub fn render_markdown(r: &DeltaReport) -> String {
    let mut out = format!("### {}\n", headline(r));
    for (heading, lines) in sections(r) {
        out.push_str(&format!("\n**{heading}**\n\n"));
        for l in lines {
            out.push_str("- ");
            out.push_str(&l);
            out.push('\n');
        }
    }
    out
}

/// JSON (the report's own serialisation, pretty-printed).
pub fn render_json(r: &DeltaReport) -> String {
    serde_json::to_string_pretty(r).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

/// The characters Telegram MarkdownV2 reserves outside entities.
pub const TELEGRAM_RESERVED: &[char] = &[
    '_', '*', '[', ']', '(', ')', '~', '`', '>', '#', '+', '-', '=', '|', '{', '}', '.', '!', '\\',
];

/// Escapes every reserved character of MarkdownV2 with a backslash.
pub fn escape_markdown_v2(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if TELEGRAM_RESERVED.contains(&c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The report as Telegram MarkdownV2 lines (bold headings; everything else escaped).
pub fn render_telegram_lines(r: &DeltaReport) -> Vec<String> {
    let mut lines = vec![format!("*{}*", escape_markdown_v2(&headline(r)))];
    for (heading, items) in sections(r) {
        lines.push(String::new());
        lines.push(format!("*{}*", escape_markdown_v2(heading)));
        for item in items {
            lines.push(format!("• {}", escape_markdown_v2(&item)));
        }
    }
    lines
}

/// Splits rendered MarkdownV2 lines into messages of at most [`TELEGRAM_MAX_CHARS`]
/// characters, on line boundaries. A single line longer than that is cut between characters
/// but never between a backslash and the character it escapes (nor inside a bold marker
/// pair: a cut line is emitted as plain escaped text continuing on the next message).
pub fn split_messages(lines: &[String]) -> Vec<String> {
    let mut messages: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut current_len = 0usize;
    for line in lines {
        let len = line.chars().count();
        let extra = if current.is_empty() { len } else { len + 1 };
        if current_len + extra <= TELEGRAM_MAX_CHARS {
            if !current.is_empty() {
                current.push('\n');
            }
            current.push_str(line);
            current_len += extra;
            continue;
        }
        if !current.is_empty() {
            messages.push(std::mem::take(&mut current));
            current_len = 0;
        }
        if len <= TELEGRAM_MAX_CHARS {
            current.push_str(line);
            current_len = len;
        } else {
            for piece in cut_line(line) {
                messages.push(piece);
            }
        }
    }
    if !current.is_empty() {
        messages.push(current);
    }
    messages
}

/// Cuts one over-long line into pieces of at most [`TELEGRAM_MAX_CHARS`] characters, never
/// between an escaping backslash and the character it escapes.
fn cut_line(line: &str) -> Vec<String> {
    // A bold line cut in two would leave unbalanced markers: cut it as plain text.
    let plain = line
        .strip_prefix('*')
        .and_then(|l| l.strip_suffix('*'))
        .filter(|inner| !ends_in_open_escape(&inner.chars().collect::<Vec<_>>()))
        .unwrap_or(line);
    let chars: Vec<char> = plain.chars().collect();
    let mut pieces = Vec::new();
    let mut start = 0;
    while start < chars.len() {
        let mut end = (start + TELEGRAM_MAX_CHARS).min(chars.len());
        if end < chars.len() && ends_in_open_escape(&chars[start..end]) {
            end -= 1;
        }
        pieces.push(chars[start..end].iter().collect());
        start = end;
    }
    pieces
}

/// Whether `chars` ends with a backslash that escapes the next character (an odd run of
/// backslashes).
fn ends_in_open_escape(chars: &[char]) -> bool {
    chars.iter().rev().take_while(|c| **c == '\\').count() % 2 == 1
}

/// The report as Telegram MarkdownV2 messages, ready for `sendMessage`.
pub fn telegram_messages(r: &DeltaReport) -> Vec<String> {
    split_messages(&render_telegram_lines(r))
}
