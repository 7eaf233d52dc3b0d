//! Helpers to load the shipped manifests as editable JSON and re-validate them.

use std::borrow::Cow;

use openphone_protocol::{ManifestErrors, ManifestSources, Registry};
use serde_json::Value;

/// The shipped manifests as JSON values: (commands, events, capabilities, runtime schema).
pub struct Docs {
    pub commands: Value,
    pub events: Value,
    pub capabilities: Value,
    pub runtime_schema: Value,
}

impl Docs {
    pub fn shipped() -> Self {
        let s = ManifestSources::embedded();
        Self {
            commands: serde_json::from_str(&s.commands).unwrap(),
            events: serde_json::from_str(&s.events).unwrap(),
            capabilities: serde_json::from_str(&s.capabilities).unwrap(),
            runtime_schema: serde_json::from_str(&s.runtime_schema).unwrap(),
        }
    }

    pub fn sources(&self) -> ManifestSources {
        ManifestSources {
            commands: Cow::Owned(self.commands.to_string()),
            events: Cow::Owned(self.events.to_string()),
            capabilities: Cow::Owned(self.capabilities.to_string()),
            runtime_schema: Cow::Owned(self.runtime_schema.to_string()),
        }
    }

    pub fn load(&self) -> Result<Registry, ManifestErrors> {
        Registry::load(&self.sources())
    }

    /// The command object with this canonical name.
    pub fn command(&mut self, name: &str) -> &mut serde_json::Map<String, Value> {
        self.commands["commands"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no command {name}"))
            .as_object_mut()
            .unwrap()
    }
}

pub use openphone_test_support::registry;
