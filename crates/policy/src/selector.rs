//! One entry of a tool list (`*`, `group:<category>` or a command name), parsed and matched
//! against a manifest command. Below the tool lists and the profiles that both use it.

use std::fmt;

use openphone_protocol::Command;
use serde::{Deserialize, Serialize};

use crate::error::PolicyError;

/// One entry of a tool list: a command name (canonical, alias or model-tool name), a category
/// group `group:<category>`, or `*`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum ToolSelector {
    /// `*`: every command.
    All,
    /// `group:<category>`: every command of a manifest category.
    Group(String),
    /// One command by any of its names.
    Name(String),
}

impl ToolSelector {
    /// Parses an entry (trimmed). Empty entries and `group:` without a category are errors.
    pub fn parse(raw: &str) -> Result<ToolSelector, PolicyError> {
        let raw = raw.trim();
        if raw.is_empty() {
            return Err(PolicyError::EmptyToolSelector);
        }
        if raw == "*" {
            return Ok(ToolSelector::All);
        }
        if let Some(category) = raw.strip_prefix("group:") {
            let category = category.trim();
            if category.is_empty() {
                return Err(PolicyError::EmptyToolGroup);
            }
            return Ok(ToolSelector::Group(category.to_owned()));
        }
        Ok(ToolSelector::Name(raw.to_owned()))
    }

    /// Whether the entry selects the command.
    pub fn matches(&self, command: &Command) -> bool {
        match self {
            ToolSelector::All => true,
            ToolSelector::Group(category) => command.category == *category,
            ToolSelector::Name(name) => command.all_names().any(|n| n == name),
        }
    }
}

impl TryFrom<String> for ToolSelector {
    type Error = PolicyError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        ToolSelector::parse(&value)
    }
}

impl From<ToolSelector> for String {
    fn from(value: ToolSelector) -> String {
        value.to_string()
    }
}

impl fmt::Display for ToolSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToolSelector::All => f.write_str("*"),
            ToolSelector::Group(category) => write!(f, "group:{category}"),
            ToolSelector::Name(name) => f.write_str(name),
        }
    }
}
