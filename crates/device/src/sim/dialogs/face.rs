//! How a system dialog looks: who shows it (package, activity), what it asks (the question a
//! device reports and the user is shown) and its elements, with Android's own ids.

use crate::dialog::{self as os, PendingDialog};

use super::super::model::snippet;
use super::super::state::{Action, DialogKind, SimState};
use super::super::view::{Column, NAV_H, Node, PAD, Rect, STATUS_H, Style, Ui};
use super::SHARE_TARGETS;

/// The dialog on screen as a device reports it, if any.
pub(crate) fn pending(st: &SimState) -> Option<PendingDialog> {
    let face = face(st)?;
    Some(PendingDialog::new(face.kind, face.package, face.summary))
}

/// How a dialog looks: who shows it and what it asks.
struct Face {
    kind: &'static str,
    package: &'static str,
    activity: &'static str,
    title: String,
    summary: String,
}

fn face(st: &SimState) -> Option<Face> {
    let dialog = st.system_dialogs.showing.as_ref()?;
    let label = |package: &str| {
        st.app(package)
            .map_or_else(|| package.to_owned(), |a| a.label.clone())
    };
    Some(match &dialog.dialog {
        DialogKind::Permission {
            package,
            permission,
        } => {
            let decl = st
                .system_dialogs
                .permissions
                .iter()
                .find(|d| &d.package == package && &d.permission == permission);
            let does = decl
                .and_then(|d| d.message.clone())
                .or_else(|| known_permission(permission).map(|(m, _)| m.to_owned()))
                .unwrap_or_else(|| format!("use {permission}"));
            Face {
                kind: os::kind::PERMISSION,
                package: os::PERMISSION_CONTROLLER,
                activity: "com.android.permissioncontroller/.permission.ui.GrantPermissionsActivity",
                title: "Permission".into(),
                summary: format!("Allow {} to {does}?", label(package)),
            }
        }
        DialogKind::OpenWith { url, packages } => {
            let chosen = packages
                .get(dialog.selected)
                .map_or_else(String::new, |p| label(p));
            Face {
                kind: os::kind::CHOOSER,
                package: os::ANDROID_PACKAGE,
                activity: "android/com.android.internal.app.ResolverActivity",
                title: "Open with".into(),
                summary: format!("Open {url} with {chosen}?"),
            }
        }
        DialogKind::Share { share_id } => {
            let share = st.shares.iter().find(|s| s.id == *share_id);
            let text = share.map_or_else(String::new, |s| snippet(&s.text, 60));
            let target = SHARE_TARGETS
                .get(dialog.selected)
                .map_or("Messages", |(_, l)| *l);
            Face {
                kind: os::kind::CHOOSER,
                package: os::ANDROID_PACKAGE,
                activity: "android/com.android.internal.app.ChooserActivity",
                title: share
                    .and_then(|s| s.chooser_title.clone())
                    .unwrap_or_else(|| "Share".into()),
                summary: format!("Share \"{text}\" with {target}?"),
            }
        }
        DialogKind::Payment {
            merchant, amount, ..
        } => Face {
            kind: os::kind::PAYMENT,
            package: os::GMS_PACKAGE,
            activity: "com.google.android.gms/.wallet.activity.PaymentActivity",
            title: "Google Pay".into(),
            summary: format!("Pay {amount} to {merchant}?"),
        },
    })
}

/// Android's wording of a known permission's prompt, and whether it offers "While using the
/// app" (a foreground-only grant) instead of "Allow".
pub(super) fn known_permission(name: &str) -> Option<(&'static str, bool)> {
    Some(match name {
        "camera" => ("take pictures and record video", true),
        "microphone" => ("record audio", true),
        "location" => ("access this device's location", true),
        "contacts" => ("access your contacts", false),
        "calendar" => ("access your calendar", false),
        "sms" => ("send and view SMS messages", false),
        "phone" => ("make and manage phone calls", false),
        "notifications" => ("send you notifications", false),
        "photos" => ("access photos and videos on this device", false),
        _ => return None,
    })
}

/// Draws the dialog on screen (if any) above everything but the navigation bar; whatever lies
/// under it stays visible but cannot be touched. Answers the package, activity and title the
/// screen then reports.
pub(crate) fn draw(ui: &mut Ui, root: usize, st: &SimState) -> Option<(String, String, String)> {
    let face = face(st)?;
    let dialog = st.system_dialogs.showing.as_ref()?;
    for node in ui.nodes.iter_mut().skip(1) {
        if node.parent.is_some() {
            node.clickable = false;
            node.long_clickable = false;
            node.editable = false;
            node.scrollable = false;
            node.focused = false;
        }
    }
    let (w, h) = (ui.w, ui.h);
    ui.add(
        Some(root),
        Node::new(
            "dialog_scrim",
            "android.view.View",
            Rect::new(0, STATUS_H, w, h - NAV_H),
        )
        .style(Style::Scrim),
    );
    let top = h / 3;
    let panel = ui.add(
        Some(root),
        Node::new(
            "dialog_panel",
            "android.widget.LinearLayout",
            Rect::new(PAD, top, w - PAD, h - NAV_H - PAD),
        )
        .style(Style::Panel),
    );
    let mut col = Column {
        parent: Some(panel),
        y: top + 32,
        left: 2 * PAD,
        right: w - 2 * PAD,
        bottom: h - NAV_H - PAD,
    };
    let button = |col: &mut Column, ui: &mut Ui, id: &str, label: &str| {
        col.button(ui, id, label, Action::None, true);
    };
    match &dialog.dialog {
        DialogKind::Permission { permission, .. } => {
            col.text(ui, "permission_message", &face.summary);
            if known_permission(permission).is_some_and(|(_, fg)| fg) {
                button(
                    &mut col,
                    ui,
                    "permission_allow_foreground_only_button",
                    "While using the app",
                );
                button(
                    &mut col,
                    ui,
                    "permission_allow_one_time_button",
                    "Only this time",
                );
            } else {
                button(&mut col, ui, "permission_allow_button", "Allow");
            }
            button(&mut col, ui, "permission_deny_button", "Don't allow");
        }
        DialogKind::OpenWith { url, packages } => {
            col.text(
                ui,
                "resolver_title",
                &format!("Open {} with", snippet(url, 60)),
            );
            for (i, package) in packages.iter().enumerate() {
                let label = st
                    .app(package)
                    .map_or(package.as_str(), |a| a.label.as_str());
                if let Some(idx) = col.place(
                    ui,
                    Node::new(
                        format!("resolver_item_{i}"),
                        "android.widget.LinearLayout",
                        Rect::default(),
                    )
                    .text(label)
                    .style(Style::Row)
                    .on_tap(Action::None),
                    120,
                ) && let Some(node) = ui.nodes.get_mut(idx)
                {
                    node.checked = Some(i == dialog.selected);
                }
            }
            button(&mut col, ui, "button_once", "Just once");
            button(&mut col, ui, "button_always", "Always");
        }
        DialogKind::Share { share_id } => {
            col.text(ui, "share_title", &face.title);
            if let Some(share) = st.shares.iter().find(|s| s.id == *share_id) {
                col.text(ui, "share_preview", &snippet(&share.text, 120));
            }
            for (target, label) in SHARE_TARGETS {
                button(&mut col, ui, &format!("share_target_{target}"), label);
            }
        }
        DialogKind::Payment {
            merchant, amount, ..
        } => {
            col.text(ui, "payment_merchant", &format!("Pay {merchant}"));
            col.text(ui, "payment_amount", amount);
            button(&mut col, ui, "pay_button", "Pay");
            button(&mut col, ui, "cancel_button", "Cancel");
        }
    }
    Some((
        face.package.to_owned(),
        face.activity.to_owned(),
        face.title,
    ))
}
