//! `openphone.watchers.create`, `.list` and `.stop`, served by the watchers engine (a
//! [`RuntimeService`] installed on the bridge): creation checks every rule up front, so a
//! watcher that could never fire — or fire only into an error — is refused with the field
//! named.

use std::sync::Arc;

use async_trait::async_trait;
use openphone_core::services::{internal, limit, text, watcher_selector};
use openphone_core::{RuntimeService, ServiceCall};
use openphone_device::DeviceError;
use openphone_protocol::Registry;
use openphone_store::{NewWatcher, Store};
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
                let watcher = store
                    .create_watcher(
                        &NewWatcher {
                            runtime: call.caller.runtime.clone(),
                            params: spec.to_params(),
                        },
                        call.now_ms,
                    )
                    .map_err(internal)?;
                Ok(json!({ "created": true, "watcher": watcher }))
            }
            "openphone.watchers.list" => {
                let watchers = store
                    .list_watchers(
                        text(call.params, "query"),
                        Some(limit(call.params, 20, 100)?),
                    )
                    .map_err(internal)?;
                Ok(json!({ "watchers": watchers, "count": watchers.len() }))
            }
            "openphone.watchers.stop" => {
                let selector = watcher_selector(call.params)?;
                let stopped = store
                    .stop_watchers(&selector, call.now_ms)
                    .map_err(internal)?;
                Ok(json!({ "stopped": stopped.len(), "watchers": stopped }))
            }
            other => Err(DeviceError::UnsupportedTool {
                tool: other.to_owned(),
            }),
        }
    }
}
