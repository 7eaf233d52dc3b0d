//! Whose authority a watcher works with (issue 28, item 5): its creator's.
//!
//! A watcher's checks and reactions are done by the daemon, on the built-in runtime, but
//! never with more than the runtime that created the watcher may do:
//! [`ToolBridge::creator_authority`] (the one computation, in the core) narrows `builtin` to
//! the intersection of the two runtimes' grants, tool policy and autonomy ceiling. The user's
//! own watchers (created by the operator or by `builtin`) work with `builtin`'s authority as
//! configured.
//!
//! - **At creation** a watcher whose source would read what its creator may not read, or
//!   whose stored tool call its creator may not call, is refused (`tool_not_granted`, naming
//!   the command and the missing grant). A source reads like a command ([`source_command`]):
//!   `message` like `openphone.messages.search`, `call` like `openphone.calls.search`,
//!   `notification` like `openphone.notifications.search`, `screen` *is*
//!   `openphone.screen.get`.
//! - **When it works** the same check is made again with the creator's authority *now*: a
//!   creator that lost the grant since has its watcher skip events and polls (logged), its
//!   `screen` polls are made as the narrowed `builtin`, its stored tool call runs as the
//!   narrowed `builtin` ([`crate::ToolCallRunner`]), and the jobs it creates record the
//!   creator as `created_by`, so they run with the creator's authority too.

use openphone_core::ToolBridge;
use openphone_core::authority::CreatorAuthority;
use openphone_policy::Caller;
use openphone_protocol::{BUILTIN_RUNTIME_ID, Command, Registry};

use crate::spec::Source;

/// The command a source reads like (the grant a watcher on it needs); `None` for `time`, and
/// for `web`, which reads a page through the device (no manifest command).
pub fn source_command(source: Source) -> Option<&'static str> {
    match source {
        Source::Message => Some("openphone.messages.search"),
        Source::Call => Some("openphone.calls.search"),
        Source::Notification => Some("openphone.notifications.search"),
        Source::Screen => Some("openphone.screen.get"),
        Source::Time | Source::Web => None,
    }
}

/// The built-in runtime as the bridge has it configured now (its entry in the runtime
/// table; as [`Caller::builtin`] when the bridge has no table).
pub fn builtin_caller(bridge: &ToolBridge, principal: &str) -> Caller {
    let caller = Caller::builtin(principal);
    match bridge
        .config()
        .runtimes
        .and_then(|table| table.get(BUILTIN_RUNTIME_ID).copied())
    {
        Some(configured) => caller.with_authorisation(configured),
        None => caller,
    }
}

/// The authority work for `creator` (a watcher's runtime, a job's `created_by`) runs with.
pub fn of(bridge: &ToolBridge, creator: &str, principal: &str) -> CreatorAuthority {
    bridge.creator_authority(&builtin_caller(bridge, principal), creator)
}

/// Why `authority` may not use `command`, for people (`None` when it may).
pub fn refusal(authority: &CreatorAuthority, command: &Command) -> Option<String> {
    if authority.permits(command) {
        return None;
    }
    let creator = authority.creator();
    let caller = authority.caller();
    let exposure = command.default_exposure;
    let why = if !caller.enabled {
        format!("runtime `{creator}` is disabled")
    } else if !caller.grants.contains(exposure) {
        format!(
            "it needs the `{}` grant, which runtime `{creator}` does not have",
            exposure.as_str()
        )
    } else if !command.remote_runtime {
        "only the built-in runtime's own work may use it".to_owned()
    } else {
        format!("the tool policy does not allow it to runtime `{creator}`")
    };
    Some(format!("`{}`: {why}", command.name))
}

/// [`refusal`] for a command named by its canonical name (an unknown name is no refusal: the
/// spec refuses it).
pub fn refusal_of(
    registry: &Registry,
    authority: &CreatorAuthority,
    command: &str,
) -> Option<String> {
    registry
        .resolve(command)
        .and_then(|command| refusal(authority, command))
}
