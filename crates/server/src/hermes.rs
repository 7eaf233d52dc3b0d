//! The Hermes adapters of the `kind = "hermes"` runtimes (`docs/hermes.md`), built and
//! started with the daemon.

use std::path::Path;
use std::sync::Arc;

use openphone_core::{RuntimeManager, ToolBridge};
use openphone_protocol::Registry;

use crate::config::Config;

/// Builds and starts one adapter per Hermes runtime; `Err` is a configuration problem.
pub(crate) fn start(
    config: &Config,
    data_dir: &Path,
    bridge: &Arc<ToolBridge>,
    manager: &Arc<RuntimeManager>,
    registry: &'static Registry,
) -> Result<Vec<openphone_hermes::HermesAdapter>, String> {
    let mut adapters = Vec::new();
    for table in config.hermes_runtimes().map_err(|e| e.to_string())? {
        let adapter = openphone_hermes::HermesAdapter::new(openphone_hermes::AdapterSetup {
            config: table.clone(),
            data_dir: data_dir.to_path_buf(),
            bridge: Arc::clone(bridge),
            manager: Arc::clone(manager),
            registry,
            tool_policy: config.tool_policy.clone(),
        })
        .map_err(|e| e.to_string())?;
        adapter.start();
        tracing::info!(
            runtime = %table.runtime_id,
            tools = adapter.surface().tools().len(),
            "Hermes adapter starting"
        );
        adapters.push(adapter);
    }
    Ok(adapters)
}
