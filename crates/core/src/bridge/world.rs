//! The phone's own world through the bridge: its event stream, the operator's injections
//! (`sim.inject`, audited before they are applied), the runtime's own notifications and page
//! reads. The device stays private to the bridge; these are the only ways to it besides tool
//! requests.

use openphone_device::{DeviceError, DeviceEvent, Injection, PageContent, SystemNotification};
use openphone_policy::Caller;
use openphone_protocol::ErrorCode;
use openphone_protocol::endpoint::{AuditCaller, AuditKind};
use openphone_store::{AuditEntry, AuditRecord};
use tokio::sync::broadcast;

use super::ToolBridge;
use super::types::Operator;

/// Why an injection was refused.
#[derive(Debug, thiserror::Error)]
pub enum WorldError {
    /// The caller is not the operator: only the user moves the phone's world.
    #[error("only the operator can make things happen on the simulated phone")]
    Forbidden,
    /// The injection could not be described for the audit (its canonical JSON).
    #[error("the injection cannot be recorded: {0}")]
    Unhashable(String),
    /// The audit record could not be written, so nothing was injected.
    #[error("the audit record could not be written, nothing was injected: {0}")]
    AuditUnavailable(String),
    /// The phone refused it (nothing changed).
    #[error(transparent)]
    Device(#[from] DeviceError),
}

impl WorldError {
    /// The error code a client sees.
    pub fn code(&self) -> ErrorCode {
        match self {
            WorldError::Forbidden => ErrorCode::Denied,
            WorldError::AuditUnavailable(_) => ErrorCode::AuditUnavailable,
            WorldError::Unhashable(_) => ErrorCode::InvalidParams,
            WorldError::Device(DeviceError::DeviceOffline { .. }) => {
                ErrorCode::FrameworkUnavailable
            }
            WorldError::Device(DeviceError::UnsupportedTool { .. }) => {
                ErrorCode::ToolNotSupportedByPhonePlatform
            }
            WorldError::Device(DeviceError::Internal { .. }) => ErrorCode::ToolError,
            WorldError::Device(_) => ErrorCode::InvalidParams,
        }
    }
}

/// An applied injection.
#[derive(Debug, Clone, PartialEq)]
pub struct Injected {
    /// The events it raised, in order.
    pub events: Vec<DeviceEvent>,
    /// The `operator_action` audit record written before it was applied.
    pub audit: AuditRecord,
}

impl ToolBridge {
    /// The phone's own events (messages, calls, notifications nobody's tool call caused);
    /// `None` when the device cannot observe them.
    pub fn device_events(&self) -> Option<broadcast::Receiver<DeviceEvent>> {
        self.device.subscribe()
    }

    /// Every phone's own events, each with its id among several (`None` on a daemon with one
    /// phone, whose events name none); phones that cannot observe them are left out.
    pub fn every_device_events(&self) -> Vec<(Option<String>, broadcast::Receiver<DeviceEvent>)> {
        let several = self.devices.several();
        self.devices
            .iter()
            .filter_map(|(id, device)| {
                let rx = device.subscribe()?;
                Some((several.then(|| id.to_owned()), rx))
            })
            .collect()
    }

    /// Makes something happen on the phone for the operator `caller`: an `operator_action`
    /// audit record (`tool` = `sim.inject.<kind>`, `params_hash` of the injection, never its
    /// text) is written first — nothing happens without it — then the device applies it. A
    /// refusal by the device is recorded too (a second record with its error code).
    pub async fn inject(
        &self,
        caller: &Caller,
        injection: &Injection,
    ) -> Result<Injected, WorldError> {
        let operator = Operator::from_caller(caller).ok_or(WorldError::Forbidden)?;
        let params =
            serde_json::to_value(injection).map_err(|e| WorldError::Unhashable(e.to_string()))?;
        let params_hash = openphone_protocol::params_hash(&params)
            .map_err(|e| WorldError::Unhashable(e.to_string()))?;
        let request_id = format!("sim-inject-{}", uuid::Uuid::new_v4());
        let entry = AuditEntry {
            audit_id: format!("operator:{}:{request_id}", operator.label()),
            kind: AuditKind::OperatorAction,
            at_ms: self.now_ms(),
            runtime: caller.runtime.clone(),
            caller: AuditCaller {
                runtime: caller.runtime.clone(),
                transport: caller.transport.as_str().to_owned(),
                principal: caller.principal.clone(),
            },
            request_id,
            tool: Some(format!("sim.inject.{}", injection.kind())),
            mutating: Some(true),
            params_hash: Some(params_hash),
            ..AuditEntry::default()
        };
        let audit = self
            .store
            .append_audit_async(entry.clone())
            .await
            .map_err(|e| WorldError::AuditUnavailable(e.to_string()))?;
        match self.device.inject_all(injection).await {
            Ok(events) => Ok(Injected { events, audit }),
            Err(error) => {
                let refused = AuditEntry {
                    at_ms: self.now_ms(),
                    error_code: Some(error.code().to_owned()),
                    ..entry
                };
                if let Err(e) = self.store.append_audit_async(refused).await {
                    tracing::error!(error = %e, "recording a refused injection");
                }
                Err(WorldError::Device(error))
            }
        }
    }

    /// Posts (or updates in place, by key) one of the runtime's own notifications in the
    /// phone's shade. Not a tool request: the phone's system UI showing the runtime's news.
    pub async fn post_notification(
        &self,
        notification: &SystemNotification,
    ) -> Result<String, DeviceError> {
        self.device.post_notification(notification).await
    }

    /// Removes one of the runtime's own notifications; `Ok(false)` when it was not there.
    pub async fn withdraw_notification(&self, key: &str) -> Result<bool, DeviceError> {
        self.device.withdraw_notification(key).await
    }

    /// Reads a web page as the phone's browser would load it, nothing shown (a read; what
    /// `web` watchers poll, as the manifest has no page-reading command yet).
    pub async fn fetch_page(&self, url: &str) -> Result<PageContent, DeviceError> {
        self.device.fetch_page(url).await
    }
}
