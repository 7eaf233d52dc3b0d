//! Typed manifest entries. Built only by [`crate::validate`], after every rule has passed.

use serde::Serialize;
use serde_json::Value;

crate::wire_enum!(
    /// Command risk; policy decisions use this scale.
    #[derive(PartialOrd, Ord)]
    Risk { Low = "low", Medium = "medium", High = "high" }
);

crate::wire_enum!(
    /// When a command asks the user.
    #[derive(PartialOrd, Ord)]
    Confirmation {
        /// A read; never asks.
        None = "none",
        /// Asks unless the effective autonomy is `trusted_actions`.
        AskBeforeAction = "ask_before_action",
        /// Asks in every mode.
        Always = "always",
    }
);

crate::wire_enum!(
    /// Exposure class used for runtime authorisation.
    #[derive(PartialOrd, Ord)]
    Exposure { SafeRead = "safe_read", PrivateRead = "private_read", Dangerous = "dangerous" }
);

crate::wire_enum!(
    /// Who serves a command.
    #[derive(PartialOrd, Ord)]
    Executor {
        /// The phone's device backend.
        Device = "device",
        /// A runtime-owned service of the daemon (memory, watchers, jobs).
        Runtime = "runtime",
    }
);

crate::wire_enum!(
    /// Which runtime-owned service serves a command (`executor: "runtime"`): the family the
    /// daemon routes it to.
    #[derive(PartialOrd, Ord)]
    Service {
        /// The memory records (served by the core).
        Memory = "memory",
        /// The watcher records and live watchers.
        Watchers = "watchers",
        /// Background jobs.
        Jobs = "jobs",
        /// Goals.
        Goals = "goals",
    }
);

crate::wire_enum!(
    /// Capability risk: a coarser scale than command risk, used for disclosure and grants.
    #[derive(PartialOrd, Ord)]
    CapabilityRisk { Low = "low", Medium = "medium", High = "high", Critical = "critical" }
);

crate::wire_enum!(
    /// Direction of a protocol event.
    #[derive(PartialOrd, Ord)]
    Direction {
        PhoneToRuntime = "phone_to_runtime",
        RuntimeToPhone = "runtime_to_phone",
        Bidirectional = "bidirectional",
    }
);

/// One command of the commands manifest.
#[derive(Debug, Clone, Serialize)]
pub struct Command {
    /// Canonical name, `openphone.<area>.<verb>`.
    pub name: String,
    /// Extra accepted names.
    pub aliases: Vec<String>,
    /// Model-tool (snake_case) name.
    pub android_tool: String,
    pub description: String,
    pub category: String,
    /// Whether the command changes device, account, communication or external state.
    pub mutating: bool,
    pub executor: Executor,
    pub risk: Risk,
    pub capability: String,
    pub confirmation: Confirmation,
    pub default_exposure: Exposure,
    /// May be offered over MCP.
    pub mcp: bool,
    /// May be granted to a remote runtime.
    pub remote_runtime: bool,
    pub input_schema: Value,
    pub output_schema: Value,
    pub deprecated: bool,
    pub superseded_by: Option<String>,
    /// The runtime-owned service that serves it; `Some` exactly for `executor: "runtime"`.
    pub service: Option<Service>,
    /// What a session grant of this command is pinned to (`approvals.md` §7): the params that
    /// name what it acts on — empty for a command that acts on no particular target (a tap, a
    /// key press). `None` for a command no session grant covers (a read, the risk floor).
    pub grant_targets: Option<Vec<String>>,
    /// A command this project adds that upstream does not have at all (`"project": true`:
    /// the goal commands); outside the upstream-compatible totals.
    pub project: bool,
    /// **\[project\]** The less risky command that reaches the user by another path (a draft
    /// instead of a send): what the goal layer's planner proposes when this one would be
    /// denied or needs approval (`goals.md` §4).
    pub safer_alternative: Option<SaferAlternative>,
}

/// `safer_alternative` of a command: the command, its params taken from this command's
/// params (target param → source param), and why it is safer, for a person.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SaferAlternative {
    /// Canonical name of a less risky command.
    pub command: String,
    /// Its params, each named after the param of this command it takes its value from.
    pub params: std::collections::BTreeMap<String, String>,
    /// Why it is safer.
    pub why: String,
}

impl Command {
    /// Every name the command answers to: canonical name, aliases, model-tool name.
    pub fn all_names(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.name.as_str())
            .chain(self.aliases.iter().map(String::as_str))
            .chain(std::iter::once(self.android_tool.as_str()))
    }

    /// The input property names the schema declares, in schema order.
    pub fn input_properties(&self) -> Vec<&str> {
        self.input_schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|m| m.keys().map(String::as_str).collect())
            .unwrap_or_default()
    }

    /// The required input names.
    pub fn required_inputs(&self) -> Vec<&str> {
        self.input_schema
            .get("required")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    }
}

/// One capability of the capabilities manifest.
#[derive(Debug, Clone, Serialize)]
pub struct Capability {
    pub id: String,
    pub risk: CapabilityRisk,
    pub description: Option<String>,
}

/// One event of the events manifest.
#[derive(Debug, Clone, Serialize)]
pub struct EventSpec {
    pub name: String,
    pub direction: Direction,
    pub description: Option<String>,
}

/// How a runtime's transport names protocol events.
#[derive(Debug, Clone, Serialize)]
pub struct TransportMapping {
    pub runtime: String,
    pub transport: String,
    pub events: Vec<WireMapping>,
}

/// One protocol event → wire name pair.
#[derive(Debug, Clone, Serialize)]
pub struct WireMapping {
    pub protocol: String,
    pub wire: String,
}
