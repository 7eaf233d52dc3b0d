//! The scenario's dialog declarations, checked when a scenario loads (`sim::validate`).

use super::super::ScenarioError;
use super::super::state::{DialogKind, SimState};
use super::SHARE_TARGETS;
use super::face::known_permission;

/// The scenario's dialog declarations refer to installed apps and say something.
pub(crate) fn check(st: &SimState) -> Result<(), ScenarioError> {
    let invalid = |path: String, message: &str| ScenarioError::Invalid {
        path,
        message: message.to_owned(),
    };
    let installed = |package: &str, path: String| {
        if st.app(package).is_some() {
            Ok(())
        } else {
            Err(invalid(path, "no installed app has this package"))
        }
    };
    let d = &st.system_dialogs;
    for (i, p) in d.permissions.iter().enumerate() {
        installed(
            &p.package,
            format!("system_dialogs.permissions[{i}].package"),
        )?;
        if p.permission.trim().is_empty() {
            return Err(invalid(
                format!("system_dialogs.permissions[{i}].permission"),
                "must not be empty",
            ));
        }
        if known_permission(&p.permission).is_none()
            && p.message.as_deref().is_none_or(|m| m.trim().is_empty())
        {
            return Err(invalid(
                format!("system_dialogs.permissions[{i}].message"),
                "an unknown permission needs the prompt's wording (`message`, after \"Allow <app> to\")",
            ));
        }
    }
    for (i, h) in d.url_handlers.iter().enumerate() {
        if h.url_prefix.trim().is_empty() {
            return Err(invalid(
                format!("system_dialogs.url_handlers[{i}].url_prefix"),
                "must not be empty",
            ));
        }
        if h.packages.len() < 2 {
            return Err(invalid(
                format!("system_dialogs.url_handlers[{i}].packages"),
                "needs at least two apps (one app opens a URL without asking)",
            ));
        }
        for (j, package) in h.packages.iter().enumerate() {
            installed(
                package,
                format!("system_dialogs.url_handlers[{i}].packages[{j}]"),
            )?;
        }
    }
    for (i, p) in d.payments.iter().enumerate() {
        installed(&p.package, format!("system_dialogs.payments[{i}].package"))?;
        for (field, value) in [
            ("element", &p.element),
            ("merchant", &p.merchant),
            ("amount", &p.amount),
        ] {
            if value.trim().is_empty() {
                return Err(invalid(
                    format!("system_dialogs.payments[{i}].{field}"),
                    "must not be empty",
                ));
            }
        }
    }
    if let Some(showing) = &d.showing {
        let choices = match &showing.dialog {
            DialogKind::OpenWith { packages, .. } => packages.len(),
            DialogKind::Share { share_id } => {
                if !st.shares.iter().any(|s| s.id == *share_id) {
                    return Err(invalid(
                        "system_dialogs.showing.dialog.share_id".into(),
                        "no share has this id",
                    ));
                }
                SHARE_TARGETS.len()
            }
            DialogKind::Permission { .. } | DialogKind::Payment { .. } => 1,
        };
        if showing.selected >= choices {
            return Err(invalid(
                "system_dialogs.showing.selected".into(),
                "no such choice",
            ));
        }
    }
    Ok(())
}
