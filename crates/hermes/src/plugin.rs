//! How Hermes gets the phone's tools: a Hermes plugin (`plugin/__init__.py`, standard-library
//! Python of this crate) written into `$HERMES_HOME/plugins/openphone/` with the tool list
//! (`tools.json`, derived from the manifest for this runtime's authorisation and tool policy)
//! and the daemon's loopback tool endpoint with its token (`endpoint.json`, 0600), then
//! enabled with Hermes' own `hermes plugins enable openphone`.
//!
//! Why a plugin and not an MCP server entry: a plugin's execution middleware receives the
//! model's tool-call id and the Hermes session id with every call, which Hermes' MCP client
//! does not send, so each call runs in the phone session that asked Hermes, with an
//! idempotency key derived from the tool-call id.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use openphone_policy::{Caller, ToolPolicy};
use openphone_protocol::{Command, Registry};
use serde_json::{Value, json};

/// The plugin's name (its directory under `plugins/` and its `plugins.enabled` entry).
pub const PLUGIN_NAME: &str = "openphone";
const PLUGIN_PY: &str = include_str!("../plugin/__init__.py");
const PLUGIN_YAML: &str = "name: openphone\nversion: \"1\"\ndescription: \"The phone's tools, \
     through the OpenPhone daemon (written by the daemon; rewritten at its start)\"\n";

/// One phone tool as Hermes sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct HermesTool {
    /// The manifest's canonical command.
    pub command: String,
    /// The tool name (`phone_<model-tool name>`).
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

/// The tools this runtime may see and the daemon can run, in manifest order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolSurface {
    tools: Vec<HermesTool>,
    by_name: BTreeMap<String, usize>,
}

impl ToolSurface {
    /// The surface `caller` gets under `tool_policy` (policy layers 1 and 2), keeping only
    /// what `runnable` accepts (the phone supports it or a daemon service answers it).
    pub fn new(
        registry: &'static Registry,
        caller: &Caller,
        tool_policy: &ToolPolicy,
        runnable: impl Fn(&Command) -> bool,
    ) -> ToolSurface {
        let tools: Vec<HermesTool> = registry
            .commands()
            .filter(|c| {
                !c.deprecated
                    && c.remote_runtime
                    && openphone_policy::visible(c, caller, tool_policy)
                    && runnable(c)
            })
            .map(|c| HermesTool {
                command: c.name.clone(),
                name: format!("phone_{}", c.android_tool),
                description: c.description.clone(),
                parameters: c.input_schema.clone(),
            })
            .collect();
        let by_name = tools
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), i))
            .collect();
        ToolSurface { tools, by_name }
    }

    pub fn tools(&self) -> &[HermesTool] {
        &self.tools
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&HermesTool> {
        self.by_name.get(name).map(|i| &self.tools[*i])
    }

    /// `tools.json`.
    pub fn to_json(&self) -> Value {
        Value::Array(
            self.tools
                .iter()
                .map(|t| {
                    json!({"name": t.name, "command": t.command,
                        "description": t.description, "parameters": t.parameters})
                })
                .collect(),
        )
    }
}

/// The plugin's directory in `home`.
pub fn plugin_dir(home: &Path) -> PathBuf {
    home.join("plugins").join(PLUGIN_NAME)
}

/// Writes the plugin, its tool list and the endpoint (`url`, `token`; the file 0600).
pub fn install(
    home: &Path,
    surface: &ToolSurface,
    url: &str,
    token: &str,
) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let dir = plugin_dir(home);
    std::fs::create_dir_all(&dir)?;
    write_atomic(&dir.join("plugin.yaml"), PLUGIN_YAML.as_bytes(), 0o644)?;
    write_atomic(&dir.join("__init__.py"), PLUGIN_PY.as_bytes(), 0o644)?;
    let tools = serde_json::to_vec_pretty(&surface.to_json()).map_err(std::io::Error::other)?;
    write_atomic(&dir.join("tools.json"), &tools, 0o644)?;
    let endpoint =
        serde_json::to_vec(&json!({"url": url, "token": token})).map_err(std::io::Error::other)?;
    // The token file is created 0600 before anything is written into it.
    let path = dir.join("endpoint.json");
    let tmp = dir.join(".endpoint.json.tmp");
    let _ = std::fs::remove_file(&tmp);
    {
        use std::io::Write as _;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(&endpoint)?;
    }
    std::fs::rename(&tmp, &path)?;
    Ok(dir)
}

/// Whether Hermes' `config.yaml` in `home` lists the plugin under `plugins: enabled:` (a
/// line-based read of the one list it needs; `hermes plugins enable` writes that form).
pub fn enabled_in(home: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(home.join("config.yaml")) else {
        return false;
    };
    let mut in_plugins = false;
    let mut in_enabled = false;
    for line in text.lines() {
        let trimmed = line.trim_end();
        if trimmed.is_empty() || trimmed.trim_start().starts_with('#') {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        if indent == 0 {
            in_plugins = trimmed == "plugins:";
            in_enabled = false;
            continue;
        }
        if !in_plugins {
            continue;
        }
        let item = trimmed.trim_start();
        if let Some(rest) = item.strip_prefix("enabled:") {
            let rest = rest.trim();
            if rest.starts_with('[') {
                return rest
                    .trim_matches(|c| c == '[' || c == ']')
                    .split(',')
                    .any(|n| n.trim().trim_matches(['"', '\'']) == PLUGIN_NAME);
            }
            in_enabled = true;
            continue;
        }
        if in_enabled {
            match item.strip_prefix("- ") {
                Some(name) if name.trim().trim_matches(['"', '\'']) == PLUGIN_NAME => {
                    return true;
                }
                Some(_) => {}
                None => in_enabled = false,
            }
        }
    }
    false
}

fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_enabled_list_is_read_in_both_yaml_forms() {
        let dir = tempfile::tempdir().unwrap();
        let write = |t: &str| std::fs::write(dir.path().join("config.yaml"), t).unwrap();
        assert!(!enabled_in(dir.path()));
        write(
            "model:\n  default: x\nplugins:\n  enabled:\n    - other\n    - openphone\n  disabled: []\n",
        );
        assert!(enabled_in(dir.path()));
        write("plugins:\n  enabled: [other, \"openphone\"]\n");
        assert!(enabled_in(dir.path()));
        write("plugins:\n  enabled:\n    - other\n  disabled:\n    - openphone\n");
        assert!(!enabled_in(dir.path()));
        write("other:\n  enabled:\n    - openphone\n");
        assert!(!enabled_in(dir.path()));
    }

    #[test]
    fn the_endpoint_file_is_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let plugin = install(
            dir.path(),
            &ToolSurface::default(),
            "http://127.0.0.1:1/call",
            "t",
        )
        .unwrap();
        let mode = std::fs::metadata(plugin.join("endpoint.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(plugin.join("__init__.py").exists());
    }
}
