//! `inbox.list` and `inbox.resolve` (operator only): everything that waits for the user in one
//! list (issue 31) — runtime confirmations, background job reviews and goal approvals — with
//! one id scheme (the full id, its short id = the first 8 hex digits of the uuid, or any unique
//! prefix of either), each decision routed to its kind's own rules:
//!
//! - a confirmation or a goal approval (a goal action's request is a runtime confirmation of
//!   the built-in runtime whose request id is `goal_<id>:<action>:<n>`) → the bridge's
//!   `resolve`, the path `confirmations.resolve` and `openphone goals approve` take;
//! - a job review (`job-confirm-…`) → `jobs.review`, which re-checks the record's digests.
//!
//! An item past its window is `expired`: deciding it is refused with the time it expired.

use openphone_core::Operator;
use openphone_jobs::StoredJob;
use openphone_protocol::endpoint::{
    ConfirmDecision, EndpointErrorCode, ErrorObject, InboxCounts, InboxItem, InboxKind,
    InboxListParams, InboxListResult, InboxOutcome, InboxResolveParams, InboxResolveResult,
    InboxState, JobsReviewParams, JobsReviewResult, ReviewDecision,
};
use openphone_protocol::review::ReviewView;
use openphone_protocol::{BUILTIN_RUNTIME_ID, ErrorCode, display_text};
use openphone_store::{ConfirmationRecord, ConfirmationState, JobFilter, JobStatus};
use serde_json::{Value, json};

use crate::conn::{Conn, internal};

/// How many timed-out confirmations `include_expired` lists (the most recent).
const EXPIRED_MAX: usize = 50;
/// The shortest prefix `inbox.resolve` accepts (a full id or short id is always longer).
const MIN_PREFIX: usize = 4;
/// How many job reviews the inbox reads at most (a job waits for one review at a time).
const REVIEWS_MAX: usize = 500;

/// `inbox.list {include_expired?}`: the items, oldest first, and the pending counts by kind.
pub(super) fn list(conn: &Conn, p: InboxListParams) -> Result<InboxListResult, ErrorObject> {
    let items = items(conn, p.include_expired)?;
    let counts = counts(&items);
    Ok(InboxListResult { items, counts })
}

/// The pending items by kind.
pub(crate) fn counts(items: &[InboxItem]) -> InboxCounts {
    let mut counts = InboxCounts::default();
    for item in items.iter().filter(|i| i.state == InboxState::Pending) {
        match item.kind {
            InboxKind::Confirmation => counts.confirmation += 1,
            InboxKind::JobReview => counts.job_review += 1,
            InboxKind::GoalApproval => counts.goal_approval += 1,
        }
        counts.total += 1;
    }
    counts
}

/// Every item, oldest first; expired ones only when asked for.
fn items(conn: &Conn, include_expired: bool) -> Result<Vec<InboxItem>, ErrorObject> {
    let bridge = &conn.state.bridge;
    let now = bridge.now_ms();
    let mut records = bridge.pending_confirmations(None).map_err(internal)?;
    if include_expired {
        records.extend(
            bridge
                .expired_confirmations(EXPIRED_MAX)
                .map_err(internal)?,
        );
    }
    let mut items: Vec<InboxItem> = records
        .iter()
        .map(|r| confirmation_item(conn, r, now))
        .collect();
    let reviews = conn
        .state
        .jobs
        .list_filtered(&JobFilter {
            statuses: vec![JobStatus::AwaitingReview],
            job_type: None,
            text: None,
            limit: Some(REVIEWS_MAX),
            created_by: None,
        })
        .map_err(internal)?;
    items.extend(reviews.iter().filter_map(|row| review_item(row, now)));
    if !include_expired {
        items.retain(|i| i.state == InboxState::Pending);
    }
    items.sort_by(|a, b| (a.created_at_ms, &a.id).cmp(&(b.created_at_ms, &b.id)));
    Ok(items)
}

/// The uuid part of an id (`runtime-confirm-<uuid>`, `job-confirm-<uuid>`); the id itself
/// when it has neither prefix.
fn uuid_of(id: &str) -> &str {
    id.strip_prefix("runtime-confirm-")
        .or_else(|| id.strip_prefix("job-confirm-"))
        .unwrap_or(id)
}

/// The first 8 characters of the uuid.
fn short_of(id: &str) -> String {
    uuid_of(id).chars().take(8).collect()
}

/// Whether an item's window has passed.
fn state_of(expired: bool) -> InboxState {
    if expired {
        InboxState::Expired
    } else {
        InboxState::Pending
    }
}

/// A stored confirmation as an inbox item: a goal approval when the built-in runtime asks for
/// a goal action's request, else a confirmation.
fn confirmation_item(conn: &Conn, r: &ConfirmationRecord, now: i64) -> InboxItem {
    let expired = r.state == ConfirmationState::Timeout || now >= r.expires_at_ms;
    let goal = (r.identity.runtime == BUILTIN_RUNTIME_ID)
        .then(|| crate::goals::goal_of_request(&r.request_id))
        .flatten();
    let tool = r.identity.tool.clone();
    let device_id = r
        .request
        .pointer("/request/device_id")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let (kind, title, requested_by, goal_id, action_id) = match goal {
        Some(goal_id) => {
            let action = r
                .request_id
                .split(':')
                .nth(1)
                .unwrap_or_default()
                .to_owned();
            let objective = conn
                .state
                .goals
                .engine()
                .get(goal_id)
                .map_or_else(|_| goal_id.to_owned(), |g| g.objective);
            let objective = display_text(&objective).into_owned();
            (
                InboxKind::GoalApproval,
                format!("goal \"{objective}\" asks to run {tool} (action {action})"),
                objective,
                Some(goal_id.to_owned()),
                Some(action),
            )
        }
        None => {
            let runtime = display_text(&r.identity.runtime).into_owned();
            (
                InboxKind::Confirmation,
                format!("{runtime} asks to run {tool}"),
                runtime,
                None,
                None,
            )
        }
    };
    InboxItem {
        short_id: short_of(&r.confirmation_id),
        id: r.confirmation_id.clone(),
        kind,
        state: state_of(expired),
        title,
        summary: display_text(&r.summary).into_owned(),
        requested_by,
        tool: Some(tool),
        risk: Some(r.risk),
        device_id,
        created_at_ms: r.created_at_ms,
        expires_at_ms: Some(r.expires_at_ms),
        job_id: None,
        goal_id,
        action_id,
        phone_session_id: r.phone_session_id.clone(),
        session_grant_offered: !expired && conn.state.bridge.session_grant_offered(r),
        detail: json!({"request_id": r.request_id, "runtime": r.identity.runtime}),
        host: r.host.clone(),
    }
}

/// A job awaiting review as an inbox item (`None` when it holds no pending review record).
fn review_item(row: &StoredJob, now: i64) -> Option<InboxItem> {
    let job = &row.job;
    let view = ReviewView::of(&job.pending_tool_request_json)?;
    let id = view
        .confirmation_id()
        .filter(|id| !id.is_empty())
        .unwrap_or(&job.pending_confirmation_id)
        .to_owned();
    if id.is_empty() {
        return None;
    }
    let expires_at = view.expires_at();
    let created_at = view
        .stored()
        .get("created_at")
        .and_then(Value::as_i64)
        .unwrap_or(job.updated_at);
    let tool = view.tool().to_owned();
    let title = display_text(&job.title).into_owned();
    let requested_by = format!("job {}: {title}", job.id);
    Some(InboxItem {
        short_id: short_of(&id),
        id,
        kind: InboxKind::JobReview,
        state: state_of(now >= expires_at),
        title: format!("background job {} \"{title}\" asks to run {tool}", job.id),
        summary: display_text(view.summary()).into_owned(),
        requested_by,
        tool: Some(tool),
        risk: None,
        device_id: job.device_id.clone(),
        created_at_ms: created_at,
        expires_at_ms: Some(expires_at),
        job_id: Some(job.id),
        goal_id: None,
        action_id: None,
        phone_session_id: view
            .stored()
            .get("phone_session_id")
            .and_then(Value::as_str)
            .map(str::to_owned),
        session_grant_offered: false,
        detail: Value::Object(view.stored().clone()),
        host: row.host.clone(),
    })
}

/// What a given id or prefix names.
enum Found {
    /// One item of the inbox (pending or expired).
    Item(Box<InboxItem>),
    /// A full id the inbox does not hold (resolved, expired and settled, or unknown): its
    /// kind's own path says which.
    FullId(String),
}

/// The item `given` names: the full id, the short id, or a unique prefix of either.
fn find(conn: &Conn, given: &str) -> Result<Found, ErrorObject> {
    let q = given.trim().to_ascii_lowercase();
    if q.is_empty() {
        return Err(ErrorObject::invalid_params(
            "give an inbox id, short id or unique prefix; `openphone inbox` lists them",
        ));
    }
    let all = items(conn, true)?;
    pick(&all, given, &q)
}

/// The item `q` (trimmed, lower case) names among `all`.
fn pick(all: &[InboxItem], given: &str, q: &str) -> Result<Found, ErrorObject> {
    let q = q.to_owned();
    if let Some(item) = all.iter().find(|i| i.id == q) {
        return Ok(Found::Item(Box::new(item.clone())));
    }
    if q.starts_with("runtime-confirm-") || q.starts_with("job-confirm-") {
        let whole = uuid_of(&q).len() >= 36;
        if whole {
            return Ok(Found::FullId(q));
        }
    }
    // The characters that name an item are its uuid's: a kind prefix (`runtime-confirm-`,
    // `job-confirm-`) only narrows the kind, so `runt` or `job-confirm-` alone names nothing.
    let wanted = uuid_of(&q);
    if wanted.chars().count() < MIN_PREFIX {
        return Err(ErrorObject::invalid_params(format!(
            "{given:?} is too short to name an inbox item: give at least {MIN_PREFIX} characters \
             of its short id (`openphone inbox` lists them)"
        )));
    }
    let kind_prefix = &q[..q.len() - wanted.len()];
    let matching: Vec<&InboxItem> = all
        .iter()
        .filter(|i| i.id.starts_with(kind_prefix) && uuid_of(&i.id).starts_with(wanted))
        .collect();
    match matching.as_slice() {
        [] => Err(ErrorObject::new(
            EndpointErrorCode::NotFound,
            format!(
                "nothing in the inbox matches {given:?}; `openphone inbox` lists what waits \
                 (`openphone inbox --all` also lists what expired)"
            ),
        )),
        [one] => Ok(Found::Item(Box::new((*one).clone()))),
        many => {
            let candidates: Vec<String> = many
                .iter()
                .map(|i| format!("{} ({}, {}): {}", i.id, i.kind, i.state, i.title))
                .collect();
            Err(ErrorObject::invalid_params(format!(
                "{given:?} matches {} inbox items; type more of the id: {}",
                many.len(),
                candidates.join("; ")
            )))
        }
    }
}

/// `inbox.resolve {id, decision}`: the item `id` names, decided through its kind's own path.
pub(super) async fn resolve(
    conn: &Conn,
    operator: &Operator,
    p: InboxResolveParams,
) -> Result<InboxResolveResult, ErrorObject> {
    let now = conn.state.bridge.now_ms();
    match find(conn, &p.id)? {
        Found::Item(item) => {
            if item.state == InboxState::Expired {
                return Err(expired(&item.id, item.kind, item.expires_at_ms, now));
            }
            match item.kind {
                InboxKind::Confirmation | InboxKind::GoalApproval => {
                    confirmation(conn, operator, &item.id, item.kind, p.decision, now).await
                }
                InboxKind::JobReview => review(conn, &item.id, p.decision, now).await,
            }
        }
        Found::FullId(id) if id.starts_with("job-confirm-") => {
            review(conn, &id, p.decision, now).await
        }
        Found::FullId(id) => {
            let kind = InboxKind::Confirmation;
            confirmation(conn, operator, &id, kind, p.decision, now).await
        }
    }
}

/// Decides a runtime confirmation or a goal approval through the bridge.
async fn confirmation(
    conn: &Conn,
    operator: &Operator,
    id: &str,
    kind: InboxKind,
    decision: ConfirmDecision,
    now: i64,
) -> Result<InboxResolveResult, ErrorObject> {
    let bridge = &conn.state.bridge;
    let result = match bridge.resolve(operator, id, decision).await {
        Ok(result) => result,
        Err(e) if e.code() == ErrorCode::PendingConfirmationNotFound => {
            return Err(not_pending(conn, id, now));
        }
        Err(e) => return Err(ErrorObject::new(e.code(), e.to_string())),
    };
    // The request's own status says how it ended (a re-check at approval may refuse it).
    let outcome = match decision {
        ConfirmDecision::Deny => InboxOutcome::Denied,
        ConfirmDecision::Approve | ConfirmDecision::AcceptForSession => InboxOutcome::Approved,
    };
    let message = format!(
        "{outcome} {id}: the request finished with status {}",
        result.status.as_str()
    );
    Ok(InboxResolveResult {
        id: id.to_owned(),
        kind,
        outcome,
        message,
        result: serde_json::to_value(&result).map_err(internal)?,
    })
}

/// Why a confirmation the bridge would not resolve is not pending — expired (with the time),
/// already resolved, or unknown — as `pending_confirmation_not_found`, the code
/// `confirmations.resolve` always gave.
pub(super) fn not_pending(conn: &Conn, id: &str, now: i64) -> ErrorObject {
    let message = match conn.state.bridge.confirmation(id) {
        Ok(Some(r)) if r.state == ConfirmationState::Timeout || now >= r.expires_at_ms => {
            expired_text(id, InboxKind::Confirmation, Some(r.expires_at_ms), now)
        }
        Ok(Some(r)) => format!(
            "{id} is no longer pending: it was already resolved ({}); nothing changed",
            r.state.as_str()
        ),
        Ok(None) => format!("no pending confirmation {id:?}; `openphone inbox` lists what waits"),
        Err(e) => return internal(e),
    };
    ErrorObject::new(ErrorCode::PendingConfirmationNotFound, message)
}

/// Decides a job review through `jobs.review` (which checks the record's digests).
async fn review(
    conn: &Conn,
    id: &str,
    decision: ConfirmDecision,
    now: i64,
) -> Result<InboxResolveResult, ErrorObject> {
    let decision = match decision {
        ConfirmDecision::Approve => ReviewDecision::Approve,
        ConfirmDecision::Deny => ReviewDecision::Deny,
        ConfirmDecision::AcceptForSession => {
            return Err(ErrorObject::invalid_params(format!(
                "{id} is a background job's review: it approves this one call only, so \
                 accept_for_session (--for-session) does not apply; approve it plainly"
            )));
        }
    };
    // The review's window, read before the tap (a settled review no longer says it).
    let expires_at = review_expiry(conn, id);
    let answer = super::jobs::review(
        conn,
        JobsReviewParams {
            confirmation_id: id.to_owned(),
            decision,
        },
    )
    .await?;
    review_answer(id, decision, &answer, expires_at, now)
}

/// When the pending review `id` expires, if a job awaiting review holds it.
fn review_expiry(conn: &Conn, id: &str) -> Option<i64> {
    let rows = conn
        .state
        .jobs
        .list_filtered(&JobFilter {
            statuses: vec![JobStatus::AwaitingReview],
            job_type: None,
            text: None,
            limit: Some(REVIEWS_MAX),
            created_by: None,
        })
        .ok()?;
    rows.iter().find_map(|row| {
        let view = ReviewView::of(&row.job.pending_tool_request_json)?;
        (view.confirmation_id() == Some(id)).then(|| view.expires_at())
    })
}

/// The `jobs.review` answer as an inbox result, or the error it amounts to.
fn review_answer(
    id: &str,
    decision: ReviewDecision,
    answer: &JobsReviewResult,
    expires_at: Option<i64>,
    now: i64,
) -> Result<InboxResolveResult, ErrorObject> {
    let code = answer.code.parse::<ErrorCode>().ok();
    let status = answer.result_status.as_deref().unwrap_or("?");
    let (outcome, message) = match code {
        Some(ErrorCode::BackgroundReviewResolved) => match (decision, status) {
            (ReviewDecision::Deny, _) => (
                InboxOutcome::Denied,
                format!("denied {}: nothing ran; the job resumes", short_of(id)),
            ),
            (ReviewDecision::Approve, "ok") => (
                InboxOutcome::Approved,
                format!(
                    "approved {}: the call ran once; the job resumes",
                    short_of(id)
                ),
            ),
            (ReviewDecision::Approve, other) => (
                InboxOutcome::Refused,
                format!(
                    "approved {}, but the call was refused when checked again ({other}{}): \
                     nothing ran; the job resumes with the refusal",
                    short_of(id),
                    answer
                        .reason
                        .as_deref()
                        .map(|r| format!(", {r}"))
                        .unwrap_or_default()
                ),
            ),
        },
        Some(ErrorCode::BackgroundReviewExpired) => {
            return Err(expired(id, InboxKind::JobReview, expires_at, now));
        }
        Some(ErrorCode::JobNotFound) => {
            return Err(ErrorObject::new(
                EndpointErrorCode::NotFound,
                format!("no inbox item {id:?}; `openphone inbox` lists what waits"),
            ));
        }
        _ => {
            let code = code.unwrap_or(ErrorCode::ToolError);
            return Err(ErrorObject::new(
                code,
                format!(
                    "{id}: {}{}; nothing changed",
                    answer.code,
                    answer
                        .reason
                        .as_deref()
                        .map(|r| format!(" ({r})"))
                        .unwrap_or_default()
                ),
            ));
        }
    };
    Ok(InboxResolveResult {
        id: id.to_owned(),
        kind: InboxKind::JobReview,
        outcome,
        message,
        result: serde_json::to_value(answer).map_err(internal)?,
    })
}

/// `pending_confirmation_not_found` (`background.review_expired` for a job review): the item
/// expired, and when.
fn expired(id: &str, kind: InboxKind, expires_at: Option<i64>, now: i64) -> ErrorObject {
    let code = match kind {
        InboxKind::JobReview => ErrorCode::BackgroundReviewExpired,
        InboxKind::Confirmation | InboxKind::GoalApproval => ErrorCode::PendingConfirmationNotFound,
    };
    ErrorObject::new(code, expired_text(id, kind, expires_at, now))
}

/// `<id> (<kind>) expired at <local time> (<how long ago>); …`.
fn expired_text(id: &str, kind: InboxKind, expires_at: Option<i64>, now: i64) -> String {
    let when = expires_at.map_or_else(
        || "before it was decided".to_owned(),
        |at| format!("at {}", openphone_clock::human::format_local(at, now)),
    );
    format!("{id} ({kind}) expired {when}; nothing ran, and it can no longer be decided")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_ids_are_the_first_eight_hex_digits_of_the_uuid() {
        let id = "job-confirm-3f2a9c01-0000-4000-8000-000000000000";
        assert_eq!(short_of(id), "3f2a9c01");
        assert_eq!(uuid_of("runtime-confirm-abc"), "abc");
    }

    fn item(id: &str, kind: InboxKind) -> InboxItem {
        InboxItem {
            id: id.to_owned(),
            short_id: short_of(id),
            kind,
            state: InboxState::Pending,
            title: "t".to_owned(),
            summary: "s".to_owned(),
            requested_by: "r".to_owned(),
            tool: None,
            risk: None,
            device_id: None,
            created_at_ms: 0,
            expires_at_ms: None,
            job_id: None,
            goal_id: None,
            action_id: None,
            phone_session_id: None,
            session_grant_offered: false,
            detail: serde_json::Value::Null,
            host: None,
        }
    }

    fn picked(all: &[InboxItem], given: &str) -> Result<String, String> {
        match pick(all, given, &given.trim().to_ascii_lowercase()) {
            Ok(Found::Item(i)) => Ok(i.id.clone()),
            Ok(Found::FullId(id)) => Ok(id),
            Err(e) => Err(e.message),
        }
    }

    #[test]
    fn a_kind_prefix_alone_names_no_inbox_item() {
        // The review found `runt` or `runtime-confirm-` approving the one pending item.
        let all = [
            item(
                "runtime-confirm-3f2a9c01-0000-4000-8000-000000000000",
                InboxKind::Confirmation,
            ),
            item(
                "job-confirm-3f2b0000-0000-4000-8000-000000000000",
                InboxKind::JobReview,
            ),
        ];
        for given in ["runtime-confirm-", "job-confirm-", "runtime-confirm-3f"] {
            let e = picked(&all[..1], given).unwrap_err();
            assert!(e.contains("too short"), "{given}: {e}");
        }
        for given in ["runt", "job-", "runtime-c"] {
            let e = picked(&all[..1], given).unwrap_err();
            assert!(e.contains("nothing in the inbox matches"), "{given}: {e}");
        }
        assert_eq!(picked(&all, "3f2a").unwrap(), all[0].id);
        assert_eq!(picked(&all, "job-confirm-3f2b").unwrap(), all[1].id);
        // A kind prefix narrows: the confirmation's uuid prefix under the job kind is not it.
        assert!(
            picked(&all, "job-confirm-3f2a")
                .unwrap_err()
                .contains("nothing")
        );
        let e = picked(&all, "3f2").unwrap_err();
        assert!(e.contains("too short"), "{e}");
        let both = [
            all[0].clone(),
            item(
                "job-confirm-3f2a9c99-0000-4000-8000-000000000000",
                InboxKind::JobReview,
            ),
        ];
        let e = picked(&both, "3f2a9c").unwrap_err();
        assert!(e.contains("matches 2 inbox items"), "{e}");
        assert!(e.contains(&both[0].id) && e.contains(&both[1].id), "{e}");
    }
}
