//! `openphone.watchers.create`, `.list` and `.stop`, served by the watchers engine (a
//! [`RuntimeService`] installed on the bridge): creation checks every rule up front, so a
//! watcher that could never fire — or fire only into an error — is refused with the field
//! named. Every watcher belongs to the runtime that created it: a runtime lists, stops and
//! counts against its quota only its own, the operator all of them
//! (`openphone_core::services::{list_watchers_for, stop_watchers_for, create_watcher_for}`).

use std::sync::Arc;

use async_trait::async_trait;
use openphone_core::services::{create_watcher_for, list_watchers_for, stop_watchers_for};
use openphone_core::{RuntimeService, ServiceCall};
use openphone_device::DeviceError;
use openphone_protocol::Registry;
use openphone_store::Store;
use serde_json::{Value, json};

use crate::spec::{SpecContext, WatcherSpec};

/// The watcher commands on the bridge. It holds the store, not the engine (the bridge holds
/// the service, the engine holds the bridge).
#[derive(Debug, Clone)]
pub struct WatchersService {
    store: Arc<Store>,
    registry: &'static Registry,
    judge: bool,
    jobs: bool,
}

impl WatchersService {
    /// The commands over `store`; `judge`: a model can judge `semantic_match`; `jobs`: job
    /// reactions can run.
    pub fn new(
        store: Arc<Store>,
        registry: &'static Registry,
        judge: bool,
        jobs: bool,
    ) -> WatchersService {
        WatchersService {
            store,
            registry,
            judge,
            jobs,
        }
    }
}

#[async_trait]
impl RuntimeService for WatchersService {
    fn serves(&self, name: &str) -> bool {
        matches!(
            name,
            "openphone.watchers.create" | "openphone.watchers.list" | "openphone.watchers.stop"
        )
    }

    async fn execute(&self, call: ServiceCall<'_>) -> Result<Value, DeviceError> {
        let store = &self.store;
        match call.name {
            "openphone.watchers.create" => {
                let ctx = SpecContext {
                    registry: self.registry,
                    now_ms: call.now_ms,
                    judge: self.judge,
                    jobs: self.jobs,
                    runtime: &call.caller.runtime,
                };
                let spec = WatcherSpec::from_params(call.params, &ctx)
                    .map_err(crate::WatchersError::into_device)?;
                let watcher =
                    create_watcher_for(store, call.caller, spec.to_params(), call.now_ms)?;
                Ok(json!({ "created": true, "watcher": watcher }))
            }
            "openphone.watchers.list" => list_watchers_for(store, call.caller, call.params),
            "openphone.watchers.stop" => {
                stop_watchers_for(store, call.caller, call.params, call.now_ms)
            }
            other => Err(DeviceError::UnsupportedTool {
                tool: other.to_owned(),
            }),
        }
    }
}
