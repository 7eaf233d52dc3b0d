//! `openphone.watchers.create`, `.list` and `.stop`, served by the watchers engine (a
//! [`RuntimeService`] installed on the bridge): creation checks every rule up front, so a
//! watcher that could never fire — or fire only into an error — is refused with the field
//! named. Every watcher belongs to the runtime that created it: a runtime lists, stops and
//! counts against its quota only its own, the operator all of them
//! (`openphone_core::services::{list_watchers_for, stop_watchers_for, create_watcher_for}`).
//! Work `builtin` does for a runtime — that runtime's job, goal or watcher — is that
//! runtime's: a watcher created there belongs to the runtime and is checked against its
//! authority, and one whose owner cannot be read is refused, never the user's
//! (`openphone_core::authority::acting_for`).

use std::sync::{Arc, Weak};

use async_trait::async_trait;
use openphone_core::services::{
    create_watcher_for, list_watchers_for, stop_watchers_for, watcher_owner_for,
};
use openphone_core::{RuntimeService, ServiceCall, ToolBridge};
use openphone_device::DeviceError;
use openphone_protocol::{Registry, Service};
use openphone_store::Store;
use serde_json::{Value, json};

use crate::spec::{Reaction, SpecContext, WatcherSpec};

/// The watcher commands on the bridge. It holds the store, not the engine (the bridge holds
/// the service, the engine holds the bridge).
#[derive(Debug, Clone)]
pub struct WatchersService {
    store: Arc<Store>,
    /// The bridge that serves these commands (weakly: the bridge holds the service), for the
    /// creator's authority at creation.
    bridge: Weak<ToolBridge>,
    registry: &'static Registry,
    judge: bool,
    jobs: bool,
    /// Raised when a watcher is created, so the engine's driver looks at when to tick again.
    created: Option<Arc<tokio::sync::Notify>>,
}

impl WatchersService {
    /// The commands over `store` (the watchers' tables, handed over by the daemon), served on
    /// `bridge`; `judge`: a model can judge `semantic_match`; `jobs`: job reactions can run.
    pub fn new(
        store: Arc<Store>,
        bridge: &Arc<ToolBridge>,
        registry: &'static Registry,
        judge: bool,
        jobs: bool,
    ) -> WatchersService {
        WatchersService {
            store,
            bridge: Arc::downgrade(bridge),
            registry,
            judge,
            jobs,
            created: None,
        }
    }

    /// These commands, raising `created` after every watcher they create.
    pub fn waking(mut self, created: Arc<tokio::sync::Notify>) -> WatchersService {
        self.created = Some(created);
        self
    }
}

impl WatchersService {
    /// Refuses a watcher whose source reads, or whose stored tool call calls, what its creator
    /// (`creator`, the owner it is created for) may not (`crate::authority`):
    /// `tool_not_granted`, naming the command and why.
    fn within_creators_authority(
        &self,
        creator: &str,
        spec: &WatcherSpec,
    ) -> Result<(), DeviceError> {
        let Some(bridge) = self.bridge.upgrade() else {
            return Err(DeviceError::Internal {
                message: "the tool bridge is gone (the daemon is stopping)".to_owned(),
            });
        };
        let authority = crate::authority::of(&bridge, creator, "watchers");
        let mut uses = Vec::new();
        if let Some(command) = crate::authority::source_command(spec.source) {
            uses.push((
                format!("a `{}` watcher reads like", spec.source.as_str()),
                command,
            ));
        }
        if let Reaction::Tool { tool, .. } = &spec.reaction {
            uses.push(("its `delivery.tool` calls".to_owned(), tool.as_str()));
        }
        for (what, command) in uses {
            if let Some(why) = crate::authority::refusal_of(self.registry, &authority, command) {
                return Err(DeviceError::Refused {
                    code: "tool_not_granted",
                    message: format!(
                        "{what} {why}; a watcher works with the authority of the runtime \
                         that creates it"
                    ),
                });
            }
        }
        Ok(())
    }
}

#[async_trait]
impl RuntimeService for WatchersService {
    /// The manifest's commands of the watchers service, by canonical name.
    fn serves(&self, name: &str) -> bool {
        self.registry
            .resolve(name)
            .is_some_and(|c| c.name == name && c.service == Some(Service::Watchers))
    }

    async fn execute(&self, call: ServiceCall<'_>) -> Result<Value, DeviceError> {
        let store = &self.store;
        if !self.serves(call.name) {
            return Err(DeviceError::UnsupportedTool {
                tool: call.name.to_owned(),
            });
        }
        // Whose watchers these are: the caller's own, or — for `builtin` doing a runtime's
        // work — that runtime's; refused when that cannot be told.
        let owner = watcher_owner_for(store, call.caller, call.runtime_session_id)?;
        match call.name {
            "openphone.watchers.create" => {
                let ctx = SpecContext {
                    registry: self.registry,
                    now_ms: call.now_ms,
                    judge: self.judge,
                    jobs: self.jobs,
                    runtime: &owner,
                };
                let spec = WatcherSpec::from_params(call.params, &ctx)
                    .map_err(crate::WatchersError::into_device)?;
                self.within_creators_authority(&owner, &spec)?;
                let watcher = create_watcher_for(store, &owner, spec.to_params(), call.now_ms)?;
                if let Some(created) = &self.created {
                    created.notify_one();
                }
                Ok(json!({ "created": true, "watcher": watcher }))
            }
            "openphone.watchers.list" => list_watchers_for(store, &owner, call.params),
            "openphone.watchers.stop" => stop_watchers_for(store, &owner, call.params, call.now_ms),
            other => Err(DeviceError::UnsupportedTool {
                tool: other.to_owned(),
            }),
        }
    }
}
