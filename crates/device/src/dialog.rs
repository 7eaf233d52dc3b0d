//! OS-level dialogs: a permission prompt, an "open with" chooser, the share chooser, a payment
//! sheet — a window the phone's system (not the app the runtime drives) puts up after an
//! action, and that only the user may answer.
//!
//! A device that finds one on the screen after an action answers
//! [`DeviceError::FrameworkConfirmationRequired`] and never taps it. The bridge turns that into
//! a confirmation the user answers; on their answer it asks the device to press the dialog's
//! positive or negative button once ([`crate::PhoneDevice::resolve_dialog`]) — naming the
//! dialog by the [`PendingDialog::dialog_id`] derived from what the error said. The id is a
//! digest of the dialog's kind, package and text, so a device presses a button only on the very
//! dialog the user was shown: a different dialog that took its place has another id and is
//! refused ([`PendingDialog::gone`]).

use openphone_protocol::digest::sha256_hex;
use serde::{Deserialize, Serialize};

use crate::DeviceError;

/// Kinds of OS dialog, as [`DeviceError::FrameworkConfirmationRequired`] names them.
pub mod kind {
    /// A runtime permission prompt (`com.android.permissioncontroller`).
    pub const PERMISSION: &str = "permission";
    /// The share chooser or the "open with" resolver (package `android`).
    pub const CHOOSER: &str = "chooser";
    /// A payment sheet (`com.google.android.gms`).
    pub const PAYMENT: &str = "payment";
    /// Any other system dialog.
    pub const SYSTEM: &str = "system";
}

/// The package of Android's permission prompts.
pub const PERMISSION_CONTROLLER: &str = "com.android.permissioncontroller";
/// The package of the share chooser and the "open with" resolver.
pub const ANDROID_PACKAGE: &str = "android";
/// The package of Google Pay's payment sheet.
pub const GMS_PACKAGE: &str = "com.google.android.gms";

/// An OS dialog waiting for the user: what the device reported, and the id a device answers it
/// by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingDialog {
    /// A digest of `kind`, `package` and `summary` (`dlg-` and 24 hex digits).
    pub dialog_id: String,
    /// What kind of dialog ([`kind`]).
    pub kind: String,
    /// The package showing it.
    pub package: String,
    /// What the dialog says (its question), for the person asked.
    pub summary: String,
}

impl PendingDialog {
    /// The dialog with this kind, package and text.
    pub fn new(
        kind: impl Into<String>,
        package: impl Into<String>,
        summary: impl Into<String>,
    ) -> PendingDialog {
        let (kind, package, summary) = (kind.into(), package.into(), summary.into());
        PendingDialog {
            dialog_id: Self::id_of(&kind, &package, &summary),
            kind,
            package,
            summary,
        }
    }

    /// The id of the dialog with this kind, package and text.
    pub fn id_of(kind: &str, package: &str, summary: &str) -> String {
        // Lengths first, so no two different triples spell the same text.
        let text = format!(
            "{}:{kind}{}:{package}{}:{summary}",
            kind.len(),
            package.len(),
            summary.len()
        );
        let digest = sha256_hex(&text);
        format!("dlg-{}", digest.get(..24).unwrap_or(&digest))
    }

    /// The dialog a [`DeviceError::FrameworkConfirmationRequired`] reports; `None` for any other
    /// error.
    pub fn from_error(error: &DeviceError) -> Option<PendingDialog> {
        let DeviceError::FrameworkConfirmationRequired {
            kind,
            package,
            summary,
        } = error
        else {
            return None;
        };
        Some(PendingDialog::new(kind, package, summary))
    }

    /// The error a device answers with while this dialog is up.
    pub fn to_error(&self) -> DeviceError {
        DeviceError::FrameworkConfirmationRequired {
            kind: self.kind.clone(),
            package: self.package.clone(),
            summary: self.summary.clone(),
        }
    }

    /// What the user is asked: `Android asks: <summary>`.
    pub fn question(&self) -> String {
        format!("Android asks: {}", self.summary)
    }

    /// The error of a [`crate::PhoneDevice::resolve_dialog`] whose dialog is no longer on the
    /// screen (answered on the phone, or replaced by another): nothing was pressed.
    pub fn gone(dialog_id: &str) -> DeviceError {
        DeviceError::invalid(
            "dialog_id",
            format!(
                "dialog {dialog_id} is no longer on the screen (it was answered on the phone or \
                 another took its place); nothing was pressed — read the screen again"
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_names_kind_package_and_text_and_nothing_else() {
        let a = PendingDialog::new(kind::PERMISSION, PERMISSION_CONTROLLER, "Allow Camera?");
        let b = PendingDialog::new(kind::PERMISSION, PERMISSION_CONTROLLER, "Allow Camera?");
        assert_eq!(a.dialog_id, b.dialog_id);
        assert!(a.dialog_id.starts_with("dlg-") && a.dialog_id.len() == 28);
        let other = PendingDialog::new(kind::PERMISSION, PERMISSION_CONTROLLER, "Allow Maps?");
        assert_ne!(a.dialog_id, other.dialog_id);
        // The field boundaries count: moving text from one field to the next changes the id.
        assert_ne!(
            PendingDialog::id_of("ab", "c", "d"),
            PendingDialog::id_of("a", "bc", "d")
        );
        let back = PendingDialog::from_error(&a.to_error());
        assert_eq!(back, Some(a));
        assert_eq!(
            PendingDialog::from_error(&DeviceError::ClipboardEmpty),
            None
        );
    }
}
