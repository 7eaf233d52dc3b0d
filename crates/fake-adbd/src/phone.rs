//! The simulated phone behind the fake device, driven only through its manifest commands
//! (`PhoneDevice::execute` with the command resolved from the embedded registry), exactly as
//! the tool bridge drives it.

use std::sync::Arc;

use openphone_device::dialog::PendingDialog;
use openphone_device::{CallOrigin, DeviceCall, DeviceError, PhoneDevice, SimPhone};
use openphone_protocol::Registry;
use serde_json::{Value, json};

/// The key of a result under which [`Phone::call`] reports the OS dialog the command raised
/// (or re-raised).
pub const DIALOG: &str = "os_dialog";

/// The phone and the manifest its commands come from.
#[derive(Debug, Clone)]
pub struct Phone {
    sim: Arc<SimPhone>,
    registry: &'static Registry,
}

/// Why a call failed: the device's typed error, rendered for a shell.
#[derive(Debug)]
pub struct CallError {
    /// The device's stable error code (`invalid_params`, …).
    pub code: String,
    /// The device's message.
    pub message: String,
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl From<DeviceError> for CallError {
    fn from(err: DeviceError) -> Self {
        Self {
            code: err.code().to_string(),
            message: err.to_string(),
        }
    }
}

impl Phone {
    /// Wraps a simulated phone.
    pub fn new(sim: Arc<SimPhone>) -> Result<Self, String> {
        let registry =
            Registry::embedded().map_err(|e| format!("the command manifest did not load: {e}"))?;
        Ok(Self { sim, registry })
    }

    /// The simulated phone itself.
    pub fn sim(&self) -> &Arc<SimPhone> {
        &self.sim
    }

    /// Runs the manifest command `tool` with `params` (a `reason` is added, as the bridge
    /// requires one).
    pub async fn call(&self, tool: &str, params: Value) -> Result<Value, CallError> {
        let Some(command) = self.registry.resolve(tool).filter(|c| c.name == tool) else {
            return Err(CallError {
                code: "unsupported_tool".into(),
                message: format!("{tool} is not a command of the manifest"),
            });
        };
        let mut params = params;
        if let Some(map) = params.as_object_mut() {
            map.entry("reason")
                .or_insert_with(|| json!("openphone-fake-adbd shell command"));
        }
        if let Err(errors) = self.registry.validate_params(command, &params) {
            return Err(CallError {
                code: "invalid_input".into(),
                message: errors
                    .iter()
                    .map(|e| format!("{}: {}", e.field, e.message))
                    .collect::<Vec<_>>()
                    .join("; "),
            });
        }
        let origin = CallOrigin {
            runtime: "adb-shell".into(),
            request_id: "fake-adbd".into(),
            phone_session_id: None,
        };
        let call = DeviceCall {
            command,
            params: &params,
            origin: &origin,
        };
        match self.sim.execute(call).await {
            Ok(value) => Ok(value),
            // On a real phone the action happened and a system dialog is now on screen; the
            // shell command itself succeeded. The dialog is reported beside the result.
            Err(DeviceError::FrameworkConfirmationRequired {
                kind,
                package,
                summary,
            }) => Ok(json!({ DIALOG: { "kind": kind, "package": package, "summary": summary } })),
            Err(e) => Err(e.into()),
        }
    }

    /// Whether an OS dialog (permission prompt, chooser, payment sheet) is on screen.
    pub async fn dialog_showing(&self) -> Result<bool, CallError> {
        let screen = self
            .call(
                "openphone.screen.get",
                json!({ "include_ui_tree": false, "include_activity": true }),
            )
            .await?;
        Ok(screen["screen"] == "system_dialog")
    }

    /// Presses the positive button of the dialog a result reported (what a finger on a real
    /// phone's "Allow" does).
    pub async fn press_dialog(&self, dialog: &Value) -> Result<Value, CallError> {
        let text = |k: &str| dialog[k].as_str().unwrap_or("").to_owned();
        let id = PendingDialog::id_of(&text("kind"), &text("package"), &text("summary"));
        Ok(self.sim.resolve_dialog(&id, true).await?)
    }

    /// The screen as `screen.get` reports it (tree included, no screenshot).
    pub async fn screen(&self) -> Result<Value, CallError> {
        self.call(
            "openphone.screen.get",
            json!({ "include_ui_tree": true, "include_activity": true }),
        )
        .await
    }

    /// The screen's size in pixels.
    pub async fn size(&self) -> Result<(i64, i64), CallError> {
        let screen = self
            .call(
                "openphone.screen.get",
                json!({ "include_ui_tree": false, "include_activity": false }),
            )
            .await?;
        Ok((
            screen["width"].as_i64().unwrap_or(0),
            screen["height"].as_i64().unwrap_or(0),
        ))
    }
}
