//! OS-level confirmations (`runtime-protocol.md` §8.2 step 5, §9): a permission prompt, an
//! "open with" chooser, a payment sheet — a dialog the phone's system puts up after an action,
//! which the device reports as [`DeviceError::FrameworkConfirmationRequired`] and never taps.
//!
//! - **A request that ran without the user's approval of it** (allowed by `trusted_actions`, a
//!   standing approval, a session grant, the operator's own call): the bridge opens a
//!   confirmation of the dialog — summary `Android asks: <what the dialog says> (approving
//!   presses <the positive button>)`, announced with
//!   `runtime.confirmation.required`, listed and resolved like any other — and answers
//!   `needs_confirmation` / `framework_confirmation_required` pointing at it; that answer is the
//!   request's recorded final result. The dialog stays on the phone's screen meanwhile.
//!   Approving it asks the device to press the dialog's positive button once
//!   ([`openphone_device::PhoneDevice::resolve_dialog`]); the outcome is the confirmation's
//!   final result. The user denying it presses the negative button; the runtime withdrawing it
//!   (like its expiry) leaves the dialog on the screen, recording who withdrew it. It is
//!   one-shot: never lowered by autonomy, a standing approval or a session grant (the policy
//!   stack never sees it — it appears after the decision), `accept_for_session` makes no grant
//!   (`grants.rs`), and a confirming host may not resolve it (`confirm.rs`). The confirmation's
//!   identity is the request's with `#<dialog id>` after its idempotency key, so the request's
//!   own record and the dialog's never collide, and an identical retry joins the dialog's
//!   confirmation instead of opening the app again (`retry.rs`).
//! - **A request the user approved** (its confirmation, or a background job's review): the
//!   same — the user approved the request, not the dialog's content (a payment's amount, a
//!   permission's scope), so the bridge never presses it on that approval. The dialog opens its
//!   own confirmation, and the approved request's answer is `needs_confirmation` /
//!   `framework_confirmation_required` naming it. On a background review nobody is present: the
//!   confirmation waits for the user to decide later and the review's outcome records it,
//!   nothing pressed. (We deviate here from the spec's confirm-once row, §8.2 step 5.)
//!
//! Every answer given to a dialog is audited (a `confirmation_transition` record whose proof
//! names the dialog by id, kind and package, and who answered it); the dialog's text is not
//! (it can hold what was shared), only its digest, the id.
//!
//! A confirmation that expires leaves the dialog on the screen, as a phone nobody answers does.

use std::time::Duration;

use openphone_device::{DeviceError, PendingDialog};
use openphone_policy::{Autonomy, Caller, Context};
use openphone_protocol::endpoint::{ConfirmationRequired, Event};
use openphone_protocol::{Command, ErrorCode, ToolResult};
use openphone_store as store;
use openphone_store::{
    IdentityKey, MAX_PENDING_PER_RUNTIME, NewConfirmation, PendingInsert, SessionStatus,
};
use serde_json::{Map, Value, json};

use super::types::StoredRequest;
use super::{ToolBridge, needs_confirmation};
use crate::request::NormalizedRequest;

/// The part of a dialog confirmation's idempotency key after the request's own.
const DIALOG_KEY_MARK: &str = "#dlg-";

/// Who answered a dialog, as its audit record says.
const BY_USER: &str = "user";

/// The dialog a device's answer reports (`framework_confirmation_required` with the dialog's
/// kind, package and text in its details), if any.
pub(super) fn dialog_of(result: &ToolResult) -> Option<PendingDialog> {
    let error = result.error.as_ref()?;
    if error.code != ErrorCode::FrameworkConfirmationRequired {
        return None;
    }
    let details = error.details.as_ref()?;
    let text = |key: &str| details.get(key).and_then(Value::as_str);
    Some(PendingDialog::new(
        text("kind")?,
        text("package")?,
        text("summary")?,
    ))
}

/// Whether a stored confirmation asks about an OS dialog.
pub(super) fn is_dialog_confirmation(record: &store::ConfirmationRecord) -> bool {
    serde_json::from_value::<StoredRequest>(record.request.clone())
        .map(|s| s.dialog.is_some())
        .unwrap_or(false)
}

/// The identity of the confirmation of `dialog`, raised by the request of identity `of` (itself
/// perhaps a dialog's).
fn dialog_identity(of: &IdentityKey, dialog: &PendingDialog) -> IdentityKey {
    let base = of
        .idempotency_key
        .rsplit_once(DIALOG_KEY_MARK)
        .map_or(of.idempotency_key.as_str(), |(base, _)| base);
    let id = dialog.dialog_id.trim_start_matches("dlg-");
    IdentityKey {
        idempotency_key: format!("{base}{DIALOG_KEY_MARK}{id}"),
        ..of.clone()
    }
}

/// The longest question a dialog's confirmation shows (characters), as other summaries.
const MAX_QUESTION: usize = 220;

/// What the user is shown: `Android asks: <question>`, with the characters that change how
/// text reads escaped (the question is the phone's text, an app's label or a URL inside it).
fn question(dialog: &PendingDialog) -> String {
    let asked: String = openphone_protocol::display_text(&dialog.question())
        .chars()
        .take(MAX_QUESTION)
        .collect();
    format!("{asked} (approving presses {})", positive_button(dialog))
}

/// The button approving a dialog's confirmation presses, as the user is told.
fn positive_button(dialog: &PendingDialog) -> &'static str {
    use openphone_device::dialog::kind;
    match dialog.kind.as_str() {
        kind::PERMISSION => "\"Allow\"",
        kind::PAYMENT => "\"Pay\"",
        kind::CHOOSER => "\"Just once\" / the app it names",
        _ => "\"OK\"",
    }
}

/// The dialog as audit records and results name it: id, kind and package (not its text).
fn dialog_note(dialog: &PendingDialog, answer: &str, by: &str) -> Map<String, Value> {
    let mut note = Map::new();
    note.insert(
        "os_dialog".into(),
        json!({
            "dialog_id": dialog.dialog_id,
            "kind": dialog.kind,
            "package": dialog.package,
            "answer": answer,
            "answered_by": by,
        }),
    );
    note
}

/// What the caller learns about the dialog with an outcome.
fn dialog_detail(dialog: &PendingDialog, answer: &str, by: &str) -> Value {
    json!({
        "dialog_id": dialog.dialog_id,
        "kind": dialog.kind,
        "package": dialog.package,
        "asked": dialog.summary,
        "answer": answer,
        "answered_by": by,
    })
}

impl ToolBridge {
    /// After a state-changing request ran without a confirmation of its own: a dialog it raised
    /// becomes the user's confirmation — also for a request the user approved on a background
    /// review (`reviewed`): nobody is present, so the confirmation waits for the user to decide
    /// later and the review's outcome records it (`framework_confirmation_required`), nothing
    /// pressed.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn after_direct(
        &self,
        caller: &Caller,
        req: &NormalizedRequest,
        command: &Command,
        identity: &IdentityKey,
        context: &Context,
        reviewed: bool,
        result: ToolResult,
    ) -> ToolResult {
        let Some(dialog) = dialog_of(&result) else {
            return result;
        };
        if reviewed {
            tracing::info!(dialog = %dialog.dialog_id, request = %req.request_id,
                "an OS dialog raised by a reviewed background request is left for the user");
        }
        let stored = StoredRequest {
            caller: caller.clone(),
            request: req.clone(),
            context: context.clone(),
            keyed: None,
            dialog: Some(dialog),
        };
        let autonomy = self.autonomy_of(caller, req);
        self.open_dialog(&stored, command, identity, autonomy).await
    }

    /// After a request the user approved ran (`stored`; its params digest `params_digest`): a
    /// dialog it raised is never pressed on that approval — the user approved the request, not
    /// the dialog's content (an amount, a permission's scope) — but opens its own one-shot
    /// confirmation, and the approved request's answer names it.
    pub(super) async fn after_approved(
        &self,
        stored: &StoredRequest,
        command: &Command,
        params_digest: &str,
        result: ToolResult,
    ) -> ToolResult {
        let Some(dialog) = dialog_of(&result) else {
            return result;
        };
        let (caller, req) = (&stored.caller, &stored.request);
        let identity = self.identity_of(&caller.runtime, req, &command.name, params_digest);
        let next_stored = StoredRequest {
            dialog: Some(dialog),
            ..stored.clone()
        };
        let autonomy = self.autonomy_of(caller, req);
        self.open_dialog(&next_stored, command, &identity, autonomy)
            .await
    }

    /// Approval of a dialog's confirmation (`stored.dialog`, confirmation identity
    /// `identity`): the positive button, pressed once.
    pub(super) async fn approve_dialog(
        &self,
        stored: &StoredRequest,
        command: &Command,
        identity: &IdentityKey,
        dialog: &PendingDialog,
    ) -> ToolResult {
        let (caller, req) = (&stored.caller, &stored.request);
        match self.press(req, dialog, true).await {
            Ok(value) => {
                let result = self.answered(caller, req, dialog, value, BY_USER);
                self.audit_answer(
                    caller,
                    req,
                    None,
                    dialog,
                    "accepted",
                    BY_USER,
                    Some(&result),
                );
                result
            }
            Err(e) => match PendingDialog::from_error(&e) {
                Some(next) => {
                    self.audit_answer(caller, req, None, dialog, "accepted", BY_USER, None);
                    let next_stored = StoredRequest {
                        dialog: Some(next),
                        ..stored.clone()
                    };
                    let autonomy = self.autonomy_of(caller, req);
                    self.open_dialog(&next_stored, command, identity, autonomy)
                        .await
                }
                None => {
                    let result = self.confirm_failed(caller, req, dialog, &e);
                    self.audit_answer(caller, req, None, dialog, "failed", BY_USER, Some(&result));
                    result
                }
            },
        }
    }

    /// Its runtime withdrew a dialog's confirmation (`by`: who): nothing is pressed — only the
    /// user's denial presses the negative button — and the dialog stays on the screen, as on
    /// expiry. Answers what to add to the withdrawal's details.
    pub(super) fn leave_dialog(
        &self,
        stored: &StoredRequest,
        confirmation_id: &str,
        by: &str,
    ) -> Option<Map<String, Value>> {
        let dialog = stored.dialog.as_ref()?;
        let (caller, req) = (&stored.caller, &stored.request);
        let answer = "left_on_screen";
        self.audit_answer(caller, req, Some(confirmation_id), dialog, answer, by, None);
        let mut details = Map::new();
        details.insert("os_dialog".into(), dialog_detail(dialog, answer, by));
        Some(details)
    }

    /// The user denied a dialog's confirmation: the negative button, pressed once. Answers
    /// what to add to the denial's details.
    pub(super) async fn dismiss_dialog(
        &self,
        stored: &StoredRequest,
        confirmation_id: &str,
    ) -> Option<Map<String, Value>> {
        let dialog = stored.dialog.as_ref()?;
        let (caller, req) = (&stored.caller, &stored.request);
        let pressed = self.press(req, dialog, false).await;
        let (answer, error) = match &pressed {
            Ok(_) => ("dismissed", None),
            Err(e) if PendingDialog::from_error(e).is_some() => ("dismissed", None),
            Err(e) => ("failed", Some(e.to_string())),
        };
        self.audit_answer(
            caller,
            req,
            Some(confirmation_id),
            dialog,
            answer,
            BY_USER,
            None,
        );
        let mut details = Map::new();
        details.insert("os_dialog".into(), dialog_detail(dialog, answer, BY_USER));
        if let Some(error) = error {
            details.insert("dialog_error".into(), json!(error));
        }
        // Dismissing it made the phone ask something else (the app's next permission).
        if let Err(e) = pressed
            && let Some(next) = PendingDialog::from_error(&e)
            && let Some(command) = self.registry.resolve(&req.tool)
        {
            let base = self
                .store
                .get_confirmation(confirmation_id)
                .ok()
                .flatten()
                .map(|r| r.identity);
            if let Some(base) = base {
                let next_stored = StoredRequest {
                    dialog: Some(next),
                    ..stored.clone()
                };
                let autonomy = self.autonomy_of(caller, req);
                let asked = self
                    .open_dialog(&next_stored, command, &base, autonomy)
                    .await;
                if let Some(pending) = asked.pending_confirmation() {
                    details.insert(
                        "next_confirmation_id".into(),
                        json!(pending.confirmation_id),
                    );
                }
            }
        }
        Some(details)
    }

    /// Asks the request's phone to press the dialog's positive (`accept`) or negative button,
    /// within the request's timeout.
    async fn press(
        &self,
        req: &NormalizedRequest,
        dialog: &PendingDialog,
        accept: bool,
    ) -> Result<Value, DeviceError> {
        let device = self
            .routed_device(req)
            .map_err(|e| DeviceError::invalid("device_id", e.to_string()))?;
        let timeout = Duration::from_millis(u64::try_from(req.timeout_ms).unwrap_or(30_000));
        match tokio::time::timeout(timeout, device.resolve_dialog(&dialog.dialog_id, accept)).await
        {
            Ok(answered) => answered,
            Err(_elapsed) => Err(DeviceError::Internal {
                message: format!(
                    "the phone did not answer within {} ms; whether the dialog was answered is \
                     unknown",
                    req.timeout_ms
                ),
            }),
        }
    }

    /// The outcome of a dialog the phone answered: the device's answer, with the dialog named.
    fn answered(
        &self,
        caller: &Caller,
        req: &NormalizedRequest,
        dialog: &PendingDialog,
        value: Value,
        by: &str,
    ) -> ToolResult {
        let mut map = match value {
            Value::Object(map) => map,
            other => {
                let mut map = Map::new();
                map.insert("value".into(), other);
                map
            }
        };
        map.insert("os_dialog".into(), dialog_detail(dialog, "accepted", by));
        ToolResult::ok(&caller.runtime, &req.request_id, map)
    }

    fn confirm_failed(
        &self,
        caller: &Caller,
        req: &NormalizedRequest,
        dialog: &PendingDialog,
        error: &DeviceError,
    ) -> ToolResult {
        let mut details = Map::new();
        details.insert("os_dialog".into(), dialog_detail(dialog, "failed", BY_USER));
        details.insert("device_error".into(), json!(error.code()));
        ToolResult::failure(
            &caller.runtime,
            &req.request_id,
            ErrorCode::FrameworkConfirmationFailed,
            format!(
                "the phone's dialog ({}) could not be confirmed: {error}; it may still be on the \
                 screen — read the screen and ask the user",
                dialog.summary
            ),
        )
        .with_details(details)
    }

    /// The effective autonomy to name in a dialog's confirmation event.
    fn autonomy_of(&self, caller: &Caller, req: &NormalizedRequest) -> Autonomy {
        self.session_autonomy(caller, req.phone_session_id.as_deref())
            .unwrap_or(Autonomy::AskBeforeAction)
    }

    /// Opens the user's confirmation of `stored.dialog`, raised by the request of identity
    /// `of`, and answers `needs_confirmation` / `framework_confirmation_required` pointing at it.
    async fn open_dialog(
        &self,
        stored: &StoredRequest,
        command: &Command,
        of: &IdentityKey,
        autonomy: Autonomy,
    ) -> ToolResult {
        let (caller, req) = (&stored.caller, &stored.request);
        let runtime = &caller.runtime;
        let Some(dialog) = stored.dialog.as_ref() else {
            return ToolResult::failure(
                runtime,
                &req.request_id,
                ErrorCode::ToolError,
                "no dialog to ask about",
            );
        };
        let now = self.now_ms();
        let request = match serde_json::to_value(stored) {
            Ok(v) => v,
            Err(e) => return self.dialog_unrecorded(caller, req, dialog, &e.to_string()),
        };
        let new = NewConfirmation {
            confirmation_id: format!("runtime-confirm-{}", uuid::Uuid::new_v4()),
            identity: dialog_identity(of, dialog),
            request_id: req.request_id.clone(),
            request,
            phone_session_id: req.phone_session_id.clone(),
            summary: question(dialog),
            risk: command.risk,
            created_at_ms: now,
            expires_at_ms: now + req.timeout_ms.max(1),
        };
        let (record, created) = match self.store.insert_pending(&new, MAX_PENDING_PER_RUNTIME) {
            Ok(PendingInsert::Created(r)) => {
                self.expiry_moved();
                (r, true)
            }
            Ok(PendingInsert::Existing(r)) => (r, false),
            Ok(PendingInsert::TooMany { pending }) => {
                return ToolResult::failure(
                    runtime,
                    &req.request_id,
                    ErrorCode::RateLimited,
                    format!(
                        "{runtime} already has {pending} confirmations waiting for the user; the \
                         phone's dialog ({}) is still on the screen",
                        dialog.summary
                    ),
                );
            }
            Err(e) => return self.dialog_unrecorded(caller, req, dialog, &e.to_string()),
        };
        let note = dialog_note(dialog, "asked", BY_USER);
        if let Err(e) = self.audit_transition_noted(
            &record,
            stored,
            store::AuditConfirmation::Pending,
            None,
            None,
            Some(note),
        ) {
            return self.dialog_unrecorded(caller, req, dialog, &e.to_string());
        }
        let mut answer = needs_confirmation(runtime, &req.request_id, &record);
        if let Some(error) = answer.error.as_mut() {
            error.code = ErrorCode::FrameworkConfirmationRequired;
            error.message = format!(
                "{}: the phone shows a system dialog only the user may answer; waiting for \
                 their answer",
                question(dialog)
            );
            let mut details = Map::new();
            details.insert("os_dialog".into(), dialog_detail(dialog, "asked", BY_USER));
            error.details = Some(details);
        }
        let required = ConfirmationRequired {
            confirmation_id: record.confirmation_id.clone(),
            request_id: req.request_id.clone(),
            runtime: runtime.clone(),
            runtime_session_id: req.runtime_session_id.clone(),
            tool: command.name.clone(),
            summary: record.summary.clone(),
            reason: req.reason.clone().unwrap_or_default(),
            autonomy,
            timeout_ms: record.expires_at_ms - record.created_at_ms,
            expires_at_ms: record.expires_at_ms,
            risk: command.risk,
            phone_session_id: req.phone_session_id.clone(),
            created,
            session_grant_offered: false,
            result: answer.clone(),
        };
        self.publish(&Event::ConfirmationRequired(required), runtime);
        self.touch_session(
            caller,
            req.phone_session_id.as_deref(),
            SessionStatus::WaitingForConfirmation,
        );
        answer
    }

    /// The dialog could not be put to the user (the store or the audit log failed).
    fn dialog_unrecorded(
        &self,
        caller: &Caller,
        req: &NormalizedRequest,
        dialog: &PendingDialog,
        error: &str,
    ) -> ToolResult {
        tracing::error!(error = %error, dialog = %dialog.dialog_id, "recording an OS dialog's confirmation");
        ToolResult::failure(
            &caller.runtime,
            &req.request_id,
            ErrorCode::AuditUnavailable,
            format!(
                "the phone shows a system dialog ({}) but could not record the question for the \
                 user; it is still on the screen — answer it on the phone",
                dialog.summary
            ),
        )
    }

    /// The audit record of an answer given to a dialog.
    #[allow(clippy::too_many_arguments)]
    fn audit_answer(
        &self,
        caller: &Caller,
        req: &NormalizedRequest,
        confirmation_id: Option<&str>,
        dialog: &PendingDialog,
        answer: &str,
        by: &str,
        result: Option<&ToolResult>,
    ) {
        let state = match answer {
            "accepted" => store::AuditConfirmation::Approved,
            _ => store::AuditConfirmation::Denied,
        };
        let entry = store::AuditEntry {
            audit_id: openphone_protocol::audit_id(&caller.runtime, &req.request_id),
            kind: store::AuditKind::ConfirmationTransition,
            at_ms: self.now_ms(),
            runtime: caller.runtime.clone(),
            caller: store::Caller {
                runtime: caller.runtime.clone(),
                transport: caller.transport.as_str().to_owned(),
                principal: caller.principal.clone(),
            },
            phone_session_id: req.phone_session_id.clone(),
            runtime_session_id: Some(req.session_scope().to_owned()),
            request_id: req.request_id.clone(),
            idempotency_key: Some(req.idempotency_key.clone()),
            tool: Some(req.tool.clone()),
            risk: None,
            mutating: Some(true),
            autonomy: None,
            decision: None,
            proof_digest: None,
            policy_proof: Some(Value::Object(dialog_note(dialog, answer, by))),
            confirmation_id: confirmation_id.map(str::to_owned),
            confirmation: Some(state),
            status: result.map(|r| r.status),
            error_code: result.and_then(|r| r.error.as_ref().map(|e| e.code.as_str().to_owned())),
            duration_ms: None,
            params_hash: None,
            result_digest: result
                .filter(|r| !r.result.is_empty())
                .and_then(|r| openphone_protocol::object_hash(&r.result).ok()),
            device_id: req.device_id.clone(),
        };
        if let Err(e) = self.append_audit(&entry) {
            tracing::error!(error = %e, dialog = %dialog.dialog_id, "auditing an OS dialog's answer");
        }
    }
}
