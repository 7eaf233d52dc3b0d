//! Several phones, one bridge: the phones by id, the request's `device_id` resolved to one of
//! them before anything is decided, and the runtime's grant of that phone
//! (`[[runtimes]] devices`) checked there too (`crate::devices`).
//!
//! A daemon with one phone routes every request to it; a request that names no phone keeps no
//! device id, so its records are what they were before several phones existed. With several,
//! the resolved id travels with the request: into its audit records, its stored confirmation
//! (an approval runs on the same phone) and its execution.

use std::sync::{Arc, Mutex, RwLock};

use openphone_clock::Clock;
use openphone_device::PhoneDevice;
use openphone_policy::{Caller, Context, Role, Transport};
use openphone_protocol::{Command, ErrorCode, Executor, Registry, ToolRequest, ToolResult};
use openphone_store::{IdentityKey, Store};
use serde_json::{Map, json};

use super::{BridgeConfig, IdentityLocks, ToolBridge, retry};
use crate::devices::{DeviceGrants, DeviceRouteError, Devices};
use crate::events::EventBus;
use crate::locks::{read, write};
use crate::request::{NormalizedRequest, normalize};
use crate::services;

impl ToolBridge {
    /// A bridge over several phones: each request goes to the one its `device_id` names (the
    /// only one when there is one); the first is the phone whose world the daemon watches
    /// (device events, the runtime's notifications, page reads).
    pub fn with_devices(
        registry: &'static Registry,
        store: Arc<Store>,
        devices: Devices,
        clock: Arc<dyn Clock>,
        events: Arc<EventBus>,
        config: BridgeConfig,
    ) -> Self {
        Self {
            registry,
            store,
            device: Arc::clone(devices.primary().1),
            devices,
            device_grants: RwLock::new(DeviceGrants::all()),
            clock,
            events,
            config: RwLock::new(config),
            waiters: Mutex::default(),
            tasks: Mutex::default(),
            identity_locks: IdentityLocks::default(),
            expiry: tokio::sync::Mutex::new(()),
            expiry_wake: tokio::sync::Notify::new(),
            approvals: Mutex::default(),
            proofs: Mutex::default(),
            withdrawn_grants: Mutex::default(),
            services: services::Installed::default(),
            gating: crate::elevation::Gating::default(),
        }
    }

    /// The phones this bridge drives, by id.
    pub fn devices(&self) -> &Devices {
        &self.devices
    }

    /// Limits runtimes to some phones (`[[runtimes]] devices`); checked before anything runs.
    pub fn set_device_grants(&self, grants: DeviceGrants) {
        *write(&self.device_grants) = grants;
    }

    /// Which phones each runtime may act on.
    pub fn device_grants(&self) -> DeviceGrants {
        read(&self.device_grants).clone()
    }

    /// [`ToolBridge::invoke`] on the phone `device` names (`None`: the only phone).
    pub async fn invoke_on(
        &self,
        caller: &Caller,
        request: ToolRequest,
        context: Context,
        device: Option<String>,
    ) -> ToolResult {
        let started = self.now_ms();
        let keyed = retry::explicitly_keyed(&request);
        let req = self.normalize_on(request, device);
        // Boxed for the reason given in `ToolBridge::invoke`.
        Box::pin(self.process(caller, req, keyed, context, started, None)).await
    }

    /// `request` normalised, acting on the phone `device` names (blank: none named).
    pub(super) fn normalize_on(
        &self,
        request: ToolRequest,
        device: Option<String>,
    ) -> NormalizedRequest {
        let mut req = normalize(request);
        req.device_id = device
            .map(|d| d.trim().to_owned())
            .filter(|d| !d.is_empty());
        req
    }

    /// The phone `device` names, else the primary one.
    pub(super) fn device_or_primary(&self, device: Option<&str>) -> &Arc<dyn PhoneDevice> {
        device
            .and_then(|id| self.devices.get(id))
            .unwrap_or(&self.device)
    }

    /// Whether tool lists offer `command`: this daemon runs it ([`ToolBridge::supports`]) and
    /// the primary phone does not already know its platform forbids it
    /// ([`PhoneDevice::unsupported_reason`]: a real phone whose shell may not send SMS, say).
    /// A call of such a command still reaches the phone, which answers
    /// `unsupported_on_device` with the reason and a workaround.
    pub fn offers(&self, command: &Command) -> bool {
        self.supports(command) && self.unsupported_reason(command).is_none()
    }

    /// Why the primary phone cannot do `command` although it knows it; `None` when it can
    /// (and for the commands the core serves).
    pub fn unsupported_reason(&self, command: &Command) -> Option<String> {
        match command.executor {
            Executor::Device => self.device.unsupported_reason(&command.name),
            Executor::Runtime => None,
        }
    }

    /// Whether the phone `device` (else the primary one) or the core runs `command`.
    pub(super) fn platform_supports_on(&self, command: &Command, device: Option<&str>) -> bool {
        match command.executor {
            Executor::Device => self.device_or_primary(device).supports(&command.name),
            Executor::Runtime => {
                self.services.find(&command.name).is_some() || services::serves(command)
            }
        }
    }

    /// The phone the stored or arriving request `req` runs on, or the refusal to give when it
    /// names none of the configured ones.
    pub(super) fn routed_device(
        &self,
        req: &NormalizedRequest,
    ) -> Result<&Arc<dyn PhoneDevice>, DeviceRouteError> {
        self.devices
            .resolve(req.device_id.as_deref())
            .map(|(_, device)| device)
    }

    /// In a fleet (a shared store, docs/fleet.md): the refusal for a phone this daemon does
    /// not drive but another host does, naming that host. Requests are not proxied between
    /// hosts.
    fn on_another_host(&self, device: Option<&str>) -> Option<String> {
        let fleet = self.store.fleet()?;
        let device = device?;
        let host = match fleet.host_of_device(device) {
            Ok(host) => host?,
            Err(e) => {
                tracing::warn!(error = %e, device, "fleet: cannot look up the phone's host");
                return None;
            }
        };
        (host != fleet.host_id()).then(|| {
            format!(
                "the phone {device:?} is attached to host {host:?}, not to this daemon (host \
                 {:?}): send the request to the daemon on {host}; nothing was executed",
                fleet.host_id()
            )
        })
    }

    /// The phone a request of `runtime` naming none goes to among several: the only phone it
    /// is granted (`[[runtimes]] devices = ["x"]`). `None` with one phone (the only one is
    /// the default anyway) or when the runtime may act on several.
    pub fn default_device_of(&self, runtime: &str) -> Option<String> {
        if !self.devices.several() {
            return None;
        }
        match read(&self.device_grants).of(runtime) {
            Some([only]) => Some(only.clone()),
            _ => None,
        }
    }

    /// The phone the request's phone session is bound to (among several), when the session is
    /// the caller's own (or the caller is the operator or the daemon itself).
    fn session_device(&self, caller: &Caller, req: &NormalizedRequest) -> Option<String> {
        if !self.devices.several() {
            return None;
        }
        let session = self
            .store
            .get_session(req.phone_session_id.as_deref()?)
            .ok()
            .flatten()?;
        let own = caller.role == Role::Operator
            || caller.transport == Transport::Internal
            || session.runtime_kind == caller.runtime;
        own.then_some(session.device_id).flatten()
    }

    /// Binds a new phone session of `runtime` to its phone: the one `requested` names, else
    /// the one it is already bound to (a continued session), else the only phone `runtime` is
    /// granted; with one phone none is stored (its calls go to it anyway). Returns the bound
    /// id. A named phone that is not configured is refused with the ids (check with
    /// [`Devices::resolve`] before making the session).
    pub fn bind_session_device(
        &self,
        phone_session_id: &str,
        runtime: &str,
        requested: Option<&str>,
    ) -> Result<Option<String>, String> {
        let device = match requested {
            Some(id) => Some(
                self.devices
                    .resolve(Some(id))
                    .map_err(|e| e.to_string())?
                    .0
                    .to_owned(),
            ),
            None => {
                let bound = self
                    .store
                    .get_session(phone_session_id)
                    .map_err(|e| e.to_string())?
                    .and_then(|s| s.device_id);
                if bound.is_some() {
                    return Ok(bound);
                }
                self.default_device_of(runtime)
            }
        };
        let Some(device) = device.filter(|_| self.devices.several()) else {
            return Ok(None);
        };
        self.store
            .set_session_device(phone_session_id, Some(&device))
            .map_err(|e| e.to_string())?;
        Ok(Some(device))
    }

    /// The identity of `req` as `tool` (its params digest `params_digest`) made by `runtime`.
    /// With several phones the phone is part of it: the same idempotency key reused on another
    /// phone is another action, never a replay of the first phone's result (the key is
    /// suffixed `@<device_id>`; device ids hold no `@`, so no key can collide).
    pub(super) fn identity_of(
        &self,
        runtime: &str,
        req: &NormalizedRequest,
        tool: &str,
        params_digest: &str,
    ) -> IdentityKey {
        let mut identity = IdentityKey::new(
            runtime,
            &req.runtime_session_id,
            tool,
            params_digest,
            &req.idempotency_key,
            &req.request_id,
        );
        if let Some(device) = req.device_id.as_deref().filter(|_| self.devices.several()) {
            identity.idempotency_key = format!("{}@{device}", identity.idempotency_key);
        }
        identity
    }

    /// Step 0 of a request: its phone. A device command (or any request naming a phone) is
    /// routed to the phone it names, the only one by default; naming none among several, or
    /// one not configured, is `invalid_params` listing the ids, and a phone the caller's
    /// runtime is not granted is `tool_not_granted` naming it. With several phones the resolved
    /// id is written into `req`. Returns the refusal, if any, for after validation.
    pub(super) fn route_device(
        &self,
        caller: &Caller,
        req: &mut NormalizedRequest,
    ) -> Option<ToolResult> {
        let on_device = self
            .registry
            .resolve(&req.tool)
            .is_some_and(|c| c.executor == Executor::Device);
        if !on_device && req.device_id.is_none() {
            return None;
        }
        let refuse = |code: ErrorCode, message: String, ids: &[String]| {
            let mut details = Map::new();
            details.insert("devices".into(), json!(ids));
            Some(
                ToolResult::failure(&caller.runtime, &req.request_id, code, message)
                    .with_details(details),
            )
        };
        let requested = req
            .device_id
            .clone()
            .or_else(|| self.session_device(caller, req))
            .or_else(|| self.default_device_of(&caller.runtime));
        let id = match self.devices.resolve(requested.as_deref()) {
            Ok((id, _)) => id.to_owned(),
            Err(e) => {
                if let Some(message) = self.on_another_host(requested.as_deref()) {
                    return refuse(ErrorCode::DeviceNotFound, message, e.ids());
                }
                return refuse(ErrorCode::InvalidParams, e.to_string(), e.ids());
            }
        };
        if on_device {
            let grants = read(&self.device_grants);
            if !grants.allows(&caller.runtime, &id) {
                let granted = grants.of(&caller.runtime).unwrap_or_default().to_vec();
                let message = format!(
                    "runtime `{}` is not granted the phone {id:?} (its `[[runtimes]] devices`: {}); \
                     nothing was executed",
                    caller.runtime,
                    if granted.is_empty() {
                        "none".to_owned()
                    } else {
                        granted.join(", ")
                    }
                );
                return refuse(ErrorCode::ToolNotGranted, message, &granted);
            }
        }
        if self.devices.several() {
            req.device_id = Some(id);
        }
        None
    }
}
