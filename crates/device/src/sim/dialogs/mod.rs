//! OS-level dialogs on the simulated phone, the twin of what a real Android phone puts up:
//! a permission prompt (`com.android.permissioncontroller`) when an app that declares one comes
//! to the foreground for the first time, "Open with" (the `android` resolver) for a URL several
//! apps open, the share chooser (`android`) of `share.text`, and a payment sheet
//! (`com.google.android.gms`) when a declared app button is tapped. The declarations and the
//! dialog on screen are `SimState::system_dialogs` (`state/dialogs.rs`).
//!
//! A state-changing command that raises a dialog keeps its effect (the app is open, the share
//! recorded), shows the dialog above everything and answers
//! [`DeviceError::FrameworkConfirmationRequired`]. While a dialog is up, input belongs to it:
//! a tap (or `tap_element`) on its positive button or one of its choices is **not** performed —
//! it selects the choice and answers `FrameworkConfirmationRequired` again, because only the
//! user may answer; the negative button and Back dismiss it (the safe answer); a touch anywhere
//! else does nothing. Only [`SimPhone::resolve_dialog_now`] — what the bridge calls once the user
//! answered — presses the positive button.

use serde_json::{Value, json};

use crate::DeviceError;
use crate::dialog::PendingDialog;
use crate::params::Params;

mod check;
mod face;

pub(crate) use check::check;
pub(crate) use face::{draw, pending};

use super::actions::{launch, perform};
use super::commands::{Exec, Handler, Outcome, open_url};
use super::screens::{self, current_page};
use super::state::{
    Action, ActionRecord, AppRole, DialogKind, Overlay, PaymentRecord, PermissionState, SimState,
    SystemDialog,
};
use super::view::{Node, View};
use super::{ACTION_LOG_LIMIT, SimPhone};

/// The share chooser's targets, in the order shown (the first is preselected).
const SHARE_TARGETS: [(&str, &str); 3] = [
    ("messages", "Messages"),
    ("notes", "Notes"),
    ("copy", "Copy"),
];

/// The tool name the action log records dialog answers under.
const ANSWER_TOOL: &str = "system.dialog";

/// Runs one state-changing command with the dialogs in mind (see the module comment). Answers
/// the command's outcome, and the dialog it raised (the command's effect is kept either way).
pub(crate) fn run(
    handler: Handler,
    tool: &str,
    x: &mut Exec<'_>,
    p: Params<'_>,
) -> Result<(Outcome, Option<DeviceError>), DeviceError> {
    if x.st.system_dialogs.showing.is_some() {
        if let Some(answer) = input_on_dialog(tool, x, p)? {
            return Ok(answer);
        }
        // Commands that go through the system rather than the screen run beside it.
        return Ok((handler(x, p)?, None));
    }
    if let Some((dialog, result)) = intercepted(tool, x, p)? {
        let outcome = Outcome {
            result,
            summary: format!("{tool} raised a system dialog"),
        };
        return Ok(raise(x.st, dialog, tool, outcome));
    }
    let outcome = handler(x, p)?;
    Ok(after(x.st, tool, outcome))
}

/// Shows `dialog` and answers with the error the command reports.
fn raise(
    st: &mut SimState,
    dialog: DialogKind,
    tool: &str,
    mut outcome: Outcome,
) -> (Outcome, Option<DeviceError>) {
    st.nav.overlay = None;
    st.system_dialogs.showing = Some(SystemDialog {
        dialog,
        selected: 0,
        raised_by: tool.to_owned(),
        result: Some(outcome.result.clone()),
    });
    let pending = pending(st);
    if let Some(p) = &pending {
        outcome.summary = format!("{}; {}", outcome.summary, p.question());
    }
    (outcome, pending.map(|p| p.to_error()))
}

/// What a command raises before it runs: "Open with" for a URL several apps open, a payment
/// sheet for a tap on a declared button. The command's own effect does not happen.
fn intercepted(
    tool: &str,
    x: &mut Exec<'_>,
    p: Params<'_>,
) -> Result<Option<(DialogKind, Value)>, DeviceError> {
    match tool {
        "openphone.url.open" => {
            let url = p.ident_req("url")?.trim();
            let Some(packages) = handlers_of(x.st, url) else {
                return Ok(None);
            };
            let result = json!({ "opened": false, "url": url, "handlers": packages });
            Ok(Some((
                DialogKind::OpenWith {
                    url: url.to_owned(),
                    packages,
                },
                result,
            )))
        }
        "openphone.ui.tap" | "openphone.ui.tap_element" => {
            let view = screens::build(x.st, x.now);
            let Some(node) = target(&view, tool, p)? else {
                return Ok(None);
            };
            let Some(fg) = x.st.nav.foreground.clone() else {
                return Ok(None);
            };
            let declared =
                x.st.system_dialogs
                    .payments
                    .iter()
                    .find(|d| d.package == fg && d.element == node.id);
            let (Some(decl), true) = (declared, node.enabled && node.clickable) else {
                return Ok(None);
            };
            let result =
                json!({ "action": "tap", "element": node.id, "effect": "raised a payment sheet" });
            Ok(Some((
                DialogKind::Payment {
                    package: decl.package.clone(),
                    merchant: decl.merchant.clone(),
                    amount: decl.amount.clone(),
                },
                result,
            )))
        }
        _ => Ok(None),
    }
}

/// The node a tap command touches, if any.
fn target<'v>(view: &'v View, tool: &str, p: Params<'_>) -> Result<Option<&'v Node>, DeviceError> {
    if tool == "openphone.ui.tap_element" {
        let id = p.ident_req("element_id")?;
        return Ok(view.nodes.iter().find(|n| n.id == id));
    }
    let (px, py) = (p.f64_req("x")?, p.f64_req("y")?);
    Ok(view
        .nodes
        .iter()
        .rev()
        .find(|n| n.bounds.contains(px, py) && (n.clickable || n.editable)))
}

/// The installed apps that open `url`, when there are several.
fn handlers_of(st: &SimState, url: &str) -> Option<Vec<String>> {
    let decl = st
        .system_dialogs
        .url_handlers
        .iter()
        .find(|h| url.starts_with(&h.url_prefix))?;
    let packages: Vec<String> = decl
        .packages
        .iter()
        .filter(|p| st.app(p).is_some())
        .cloned()
        .collect();
    (packages.len() >= 2).then_some(packages)
}

/// After a command (or an answer) ran: the share sheet it opened is the system chooser, and an
/// app that came to the foreground asks its first unanswered permission.
fn after(st: &mut SimState, tool: &str, outcome: Outcome) -> (Outcome, Option<DeviceError>) {
    if st.system_dialogs.showing.is_some() {
        return (outcome, None);
    }
    if let Some(Overlay::ShareSheet { share_id }) = st.nav.overlay {
        return raise(st, DialogKind::Share { share_id }, tool, outcome);
    }
    let asks = st.nav.foreground.as_ref().and_then(|fg| {
        st.system_dialogs
            .permissions
            .iter()
            .find(|d| &d.package == fg && d.state == PermissionState::Ask)
    });
    if let Some(decl) = asks {
        let dialog = DialogKind::Permission {
            package: decl.package.clone(),
            permission: decl.permission.clone(),
        };
        return raise(st, dialog, tool, outcome);
    }
    (outcome, None)
}

/// How a press on a dialog's element answers it.
enum Press {
    /// The positive button (or the preselected choice).
    Accept,
    /// Another choice of a chooser.
    Select(usize),
    /// The negative button.
    Deny,
}

fn press_of(dialog: &SystemDialog, id: &str) -> Option<Press> {
    match &dialog.dialog {
        DialogKind::Permission { .. } => match id {
            "permission_allow_button"
            | "permission_allow_foreground_only_button"
            | "permission_allow_one_time_button" => Some(Press::Accept),
            "permission_deny_button" => Some(Press::Deny),
            _ => None,
        },
        DialogKind::OpenWith { packages, .. } => match id {
            "button_once" | "button_always" => Some(Press::Accept),
            _ => id
                .strip_prefix("resolver_item_")
                .and_then(|i| i.parse::<usize>().ok())
                .filter(|i| *i < packages.len())
                .map(Press::Select),
        },
        DialogKind::Share { .. } => SHARE_TARGETS
            .iter()
            .position(|(t, _)| id.strip_prefix("share_target_") == Some(t))
            .map(Press::Select),
        DialogKind::Payment { .. } => match id {
            "pay_button" => Some(Press::Accept),
            "cancel_button" => Some(Press::Deny),
            _ => None,
        },
    }
}

/// Input while a dialog is up; `None` for commands that do not touch the screen.
fn input_on_dialog(
    tool: &str,
    x: &mut Exec<'_>,
    p: Params<'_>,
) -> Result<Option<(Outcome, Option<DeviceError>)>, DeviceError> {
    let Some(dialog) = x.st.system_dialogs.showing.clone() else {
        return Ok(None);
    };
    let done = |effect: String, extra: Value| {
        let mut result = json!({ "action": tool, "effect": effect });
        if let (Some(map), Value::Object(more)) = (result.as_object_mut(), extra) {
            map.extend(more);
        }
        Some((
            Outcome {
                result,
                summary: effect,
            },
            None,
        ))
    };
    match tool {
        "openphone.ui.tap" | "openphone.ui.tap_element" => {
            let view = screens::build(x.st, x.now);
            let node = target(&view, tool, p)?;
            if tool == "openphone.ui.tap_element" && node.is_none() {
                return Err(DeviceError::ElementNotFound {
                    element_id: p.ident_req("element_id")?.to_owned(),
                });
            }
            let id = node.map(|n| n.id.clone()).unwrap_or_default();
            match press_of(&dialog, &id) {
                Some(Press::Accept) => Ok(Some(ask_again(x.st, &id))),
                Some(Press::Select(i)) => {
                    if let Some(showing) = &mut x.st.system_dialogs.showing {
                        showing.selected = i;
                    }
                    Ok(Some(ask_again(x.st, &id)))
                }
                Some(Press::Deny) => {
                    let effect = answer(x.st, false, x.now)?;
                    let outcome = Outcome {
                        result: json!({ "action": "tap", "element": id, "effect": effect }),
                        summary: effect,
                    };
                    Ok(Some(after(x.st, tool, outcome)))
                }
                None => Ok(done(
                    "nothing happened: a system dialog covers the screen".into(),
                    json!({ "element": id }),
                )),
            }
        }
        "openphone.input.press_key" if p.ident_req("key")?.eq_ignore_ascii_case("back") => {
            let effect = answer(x.st, false, x.now)?;
            let outcome = Outcome {
                result: json!({ "action": "press_key", "key": "back", "effect": effect }),
                summary: effect,
            };
            Ok(Some(after(x.st, tool, outcome)))
        }
        "openphone.input.press_key"
        | "openphone.ui.long_press"
        | "openphone.ui.long_press_element"
        | "openphone.ui.swipe" => Ok(done(
            "nothing happened: a system dialog is on top (Back dismisses it)".into(),
            Value::Null,
        )),
        "openphone.ui.type_text" | "openphone.clipboard.paste" => {
            let asked = pending(x.st).map_or_else(String::new, |d| d.summary);
            Err(DeviceError::invalid(
                "text",
                format!(
                    "a system dialog has the screen ({asked}); nothing was typed — it must be \
                     answered first"
                ),
            ))
        }
        _ => Ok(None),
    }
}

/// A press on the dialog's positive side: not performed, the user is asked.
fn ask_again(st: &SimState, id: &str) -> (Outcome, Option<DeviceError>) {
    let pending = pending(st);
    let summary = pending
        .as_ref()
        .map_or_else(String::new, PendingDialog::question);
    let outcome = Outcome {
        result: json!({ "action": "tap", "element": id, "effect": "left for the user" }),
        summary: format!("tap on {id} left for the user: {summary}"),
    };
    (outcome, pending.map(|p| p.to_error()))
}

/// Answers the dialog on screen: the positive button (`accept`) or the negative one. Returns
/// what happened, in a sentence.
fn answer(st: &mut SimState, accept: bool, now: i64) -> Result<String, DeviceError> {
    let Some(dialog) = st.system_dialogs.showing.take() else {
        return Err(DeviceError::invalid(
            "dialog_id",
            "no system dialog is on the screen",
        ));
    };
    let label = |st: &SimState, package: &str| {
        st.app(package)
            .map_or_else(|| package.to_owned(), |a| a.label.clone())
    };
    match (&dialog.dialog, accept) {
        (
            DialogKind::Permission {
                package,
                permission,
            },
            _,
        ) => {
            let state = if accept {
                PermissionState::Granted
            } else {
                PermissionState::Denied
            };
            for decl in &mut st.system_dialogs.permissions {
                if &decl.package == package && &decl.permission == permission {
                    decl.state = state;
                }
            }
            let app = label(st, package);
            Ok(if accept {
                format!("allowed {app} the {permission} permission")
            } else {
                format!("denied {app} the {permission} permission")
            })
        }
        (DialogKind::OpenWith { url, packages }, true) => {
            let package = packages.get(dialog.selected).cloned().unwrap_or_default();
            let app = label(st, &package);
            let is_browser = st.app(&package).and_then(|a| a.role) == Some(AppRole::Browser);
            if is_browser {
                open_url(st, url, now)?;
            } else {
                launch(st, &package, now)?;
            }
            Ok(format!("opened {url} with {app}"))
        }
        (DialogKind::Share { share_id }, true) => {
            let target = SHARE_TARGETS
                .get(dialog.selected)
                .map_or("messages", |(t, _)| *t);
            let share_id = *share_id;
            let effect = perform(
                st,
                &Action::ShareTo {
                    share_id,
                    target: target.to_owned(),
                },
                now,
            )?;
            Ok(format!("shared with {target}: {effect}"))
        }
        (
            DialogKind::Payment {
                package,
                merchant,
                amount,
            },
            true,
        ) => {
            st.system_dialogs.paid.push(PaymentRecord {
                package: package.clone(),
                merchant: merchant.clone(),
                amount: amount.clone(),
                at_ms: now,
            });
            Ok(format!("paid {amount} to {merchant}"))
        }
        (DialogKind::OpenWith { .. }, false) => Ok("dismissed \"Open with\"".into()),
        (DialogKind::Share { .. }, false) => Ok("dismissed the share chooser".into()),
        (DialogKind::Payment { .. }, false) => Ok("cancelled the payment".into()),
    }
}

/// The screen's identity for results: package, activity, title and the page beneath.
fn brief(st: &SimState, now: i64) -> Value {
    let view = screens::build(st, now);
    let screen = if st.system_dialogs.showing.is_some() {
        "system_dialog".to_owned()
    } else {
        current_page(st).map_or_else(
            || "home".to_owned(),
            |(_, p, _)| screens::route_name(&p.route),
        )
    };
    json!({ "package": view.package, "activity": view.activity, "title": view.title, "screen": screen })
}

impl SimPhone {
    /// Answers the dialog on screen, once the user decided: `accept` presses its positive
    /// button (with the preselected choice of a chooser), otherwise its negative one. Refused
    /// when the dialog on screen is not `dialog_id` ([`PendingDialog::gone`]); a dialog the
    /// answer raises (the app's next permission) is answered with
    /// [`DeviceError::FrameworkConfirmationRequired`], the answer itself kept.
    pub fn resolve_dialog_now(&self, dialog_id: &str, accept: bool) -> Result<Value, DeviceError> {
        self.check_online()?;
        let now = self.clock.now_ms();
        let mut guard = self.lock();
        if pending(&guard).is_none_or(|d| d.dialog_id != dialog_id) {
            return Err(PendingDialog::gone(dialog_id));
        }
        let log = std::mem::take(&mut guard.action_log);
        let mut work = guard.clone();
        let asked = pending(&work);
        let held = work
            .system_dialogs
            .showing
            .as_ref()
            .and_then(|d| d.result.clone());
        let answered = match answer(&mut work, accept, now) {
            Ok(effect) => effect,
            Err(e) => {
                guard.action_log = log;
                return Err(e);
            }
        };
        let outcome = Outcome {
            result: json!({
                "dialog_id": dialog_id,
                "kind": asked.as_ref().map(|d| d.kind.clone()),
                "package": asked.as_ref().map(|d| d.package.clone()),
                "asked": asked.as_ref().map(|d| d.summary.clone()),
                "accepted": accept,
                "effect": answered,
                "result": held,
            }),
            summary: answered,
        };
        let (mut outcome, raised) = after(&mut work, ANSWER_TOOL, outcome);
        if raised.is_some()
            && let Some(next) = &mut work.system_dialogs.showing
        {
            // The next dialog hands back what the command that started it all answered.
            next.result.clone_from(&held);
        }
        if let Some(map) = outcome.result.as_object_mut() {
            map.insert("screen".into(), brief(&work, now));
        }
        work.action_log = log;
        let seq = work.action_log.back().map_or(1, |r| r.seq + 1);
        work.action_log.push_back(ActionRecord {
            seq,
            at_ms: now,
            tool: ANSWER_TOOL.to_owned(),
            params: json!({ "dialog_id": dialog_id, "accept": accept }),
            summary: outcome.summary.clone(),
        });
        while work.action_log.len() > ACTION_LOG_LIMIT {
            work.action_log.pop_front();
        }
        *guard = work;
        // Under the lock, as every change: the screen cache reads the generation there.
        self.journal.bump();
        drop(guard);
        match raised {
            Some(e) => Err(e),
            None => Ok(outcome.result),
        }
    }

    /// The OS dialog on the screen now, as the device reports it.
    pub fn pending_dialog(&self) -> Option<PendingDialog> {
        pending(&self.lock())
    }
}
