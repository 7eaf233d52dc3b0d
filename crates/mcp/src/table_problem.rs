//! Why the manifest cannot be offered over MCP: every broken rule of the name table
//! (`mcp.md` §4.2, §4.3), listed in one [`CatalogueError`]. Below both the table
//! (`catalogue.rs`) and the call errors (`call.rs`) that carry it.

use std::fmt;

/// One broken name-table rule (`mcp.md` §4.2, §4.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableProblem {
    /// A derived name does not match `^[a-zA-Z0-9_-]{1,64}$`.
    NotPortable { command: String, tool: String },
    /// Two commands derive the same exposed name.
    Collision {
        tool: String,
        first: String,
        second: String,
    },
    /// An exposed name equals another command's canonical name, alias or model-tool name.
    Shadows {
        tool: String,
        command: String,
        other: String,
    },
    /// An input or output schema is not a JSON object with `type: "object"`.
    SchemaNotObject {
        command: String,
        which: &'static str,
    },
}

impl fmt::Display for TableProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TableProblem::NotPortable { command, tool } => write!(
                f,
                "{command}: exposed name {tool:?} does not match ^[a-zA-Z0-9_-]{{1,64}}$"
            ),
            TableProblem::Collision {
                tool,
                first,
                second,
            } => write!(
                f,
                "{first} and {second} both derive the exposed name {tool:?}"
            ),
            TableProblem::Shadows {
                tool,
                command,
                other,
            } => write!(
                f,
                "exposed name {tool:?} of {command} is also a name of {other}"
            ),
            TableProblem::SchemaNotObject { command, which } => {
                write!(
                    f,
                    "{command}: {which} must be an object schema with type \"object\""
                )
            }
        }
    }
}

/// The manifest cannot be offered over MCP; every broken rule is listed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the command manifest cannot be offered over MCP: {}", join(.0))]
pub struct CatalogueError(pub Vec<TableProblem>);

fn join(problems: &[TableProblem]) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}
