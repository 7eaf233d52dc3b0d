//! The tools offered to the model: the manifest commands the `builtin` runtime may use, under
//! their model-tool names (`android_tool`), with the manifest's descriptions and input
//! schemas. Nothing here is written by hand: the list is derived from the manifest, the
//! policy's `visible` (layers 1 and 2 for the built-in caller and the configured tool policy)
//! and what this daemon can run.

use std::collections::BTreeMap;

use openphone_model::ToolSpec;
use openphone_policy::{Caller, ToolPolicy};
use openphone_protocol::{Command, Registry};

/// The tool list of the built-in runtime and the way back from a tool name to its command.
#[derive(Debug, Clone)]
pub struct ToolCatalogue {
    registry: &'static Registry,
    specs: Vec<ToolSpec>,
    /// model-tool name → canonical command name.
    by_tool: BTreeMap<String, String>,
}

impl ToolCatalogue {
    /// The commands `caller` may see under `tool_policy` that `runnable` accepts (the
    /// device supports it, or the daemon serves it), in manifest order.
    pub fn new(
        registry: &'static Registry,
        caller: &Caller,
        tool_policy: &ToolPolicy,
        runnable: impl Fn(&Command) -> bool,
    ) -> ToolCatalogue {
        let mut specs = Vec::new();
        let mut by_tool = BTreeMap::new();
        for command in registry.commands() {
            if command.deprecated
                || !openphone_policy::visible(command, caller, tool_policy)
                || !runnable(command)
            {
                continue;
            }
            specs.push(ToolSpec {
                name: command.android_tool.clone(),
                description: command.description.clone(),
                parameters: command.input_schema.clone(),
            });
            by_tool.insert(command.android_tool.clone(), command.name.clone());
        }
        ToolCatalogue {
            registry,
            specs,
            by_tool,
        }
    }

    /// This catalogue without the commands `keep` refuses (a runtime's job is offered only
    /// what its creator's authority allows).
    pub fn narrowed(&self, keep: impl Fn(&Command) -> bool) -> ToolCatalogue {
        let mut narrowed = ToolCatalogue {
            registry: self.registry,
            specs: Vec::new(),
            by_tool: BTreeMap::new(),
        };
        for spec in &self.specs {
            let Some(canonical) = self.by_tool.get(&spec.name) else {
                continue;
            };
            let Some(command) = self.registry.resolve(canonical) else {
                continue;
            };
            if keep(command) {
                narrowed.specs.push(spec.clone());
                narrowed
                    .by_tool
                    .insert(spec.name.clone(), canonical.clone());
            }
        }
        narrowed
    }

    /// The tool specs sent with every model call.
    pub fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }

    /// The command a tool call names: its model-tool name, or any other name of an offered
    /// command (models sometimes use the canonical name). `None` for anything not offered.
    pub fn command(&self, name: &str) -> Option<&'static Command> {
        let name = name.trim();
        let canonical = match self.by_tool.get(name) {
            Some(canonical) => canonical.as_str(),
            None => self.registry.resolve(name).map(|c| c.name.as_str())?,
        };
        let command = self.registry.resolve(canonical)?;
        self.by_tool
            .contains_key(&command.android_tool)
            .then_some(command)
    }

    /// The model-tool names on offer, for an error that lists them.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.specs.iter().map(|s| s.name.as_str())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use openphone_policy::ToolList;

    use openphone_test_support::registry;

    #[test]
    fn offers_manifest_names_schemas_and_maps_back() {
        let caller = Caller::builtin("daemon");
        let all = ToolCatalogue::new(registry(), &caller, &ToolPolicy::default(), |_| true);
        let send = all
            .specs()
            .iter()
            .find(|s| s.name == "messages_send")
            .unwrap();
        let command = registry().resolve("openphone.messages.send").unwrap();
        assert_eq!(send.description, command.description);
        assert_eq!(send.parameters, command.input_schema);
        assert_eq!(all.command("messages_send").unwrap().name, command.name);
        assert_eq!(
            all.command("openphone.messages.send").unwrap().name,
            command.name
        );
        assert!(all.command("no_such_tool").is_none());
        let names: Vec<&str> = all.names().collect();
        assert_eq!(names.len(), all.specs().len());
    }

    #[test]
    fn the_tool_policy_and_the_device_narrow_the_list() {
        let caller = Caller::builtin("daemon");
        let mut policy = ToolPolicy::default();
        policy.runtimes.insert(
            "builtin".into(),
            ToolList {
                deny: vec![openphone_policy::ToolSelector::parse("messages_send").unwrap()],
                ..ToolList::default()
            },
        );
        let narrowed = ToolCatalogue::new(registry(), &caller, &policy, |c| {
            c.name != "openphone.contacts.search"
        });
        assert!(narrowed.command("messages_send").is_none());
        assert!(narrowed.command("contacts_search").is_none());
        assert!(narrowed.command("messages_search").is_some());
    }
}
