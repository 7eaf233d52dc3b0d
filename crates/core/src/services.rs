//! Runtime-owned commands: the ones the daemon serves itself (`executor: "runtime"` in the
//! manifest). Memory and watcher records are stored here; other families (background jobs,
//! live watchers) are served by a [`RuntimeService`] another crate implements and the daemon
//! installs on the bridge ([`crate::ToolBridge::install_service`]). A runtime-owned command
//! that nothing serves is reported as unsupported (policy layer 3), never pretended.

use std::sync::Arc;

use async_trait::async_trait;
use openphone_policy::Caller;
use openphone_protocol::{Command, Service};
use openphone_store::{NewMemory, NewWatcher, Store, StoreError, WatcherRecord, WatcherSelector};
use serde_json::{Value, json};

use openphone_device::DeviceError;

/// One call of a runtime-owned command, as a [`RuntimeService`] receives it: params already
/// validated against the manifest, the policy already passed (and any confirmation approved).
#[derive(Debug, Clone, Copy)]
pub struct ServiceCall<'a> {
    /// Who asked.
    pub caller: &'a Caller,
    /// The canonical command name.
    pub name: &'a str,
    /// The params (a JSON object, exactly as validated; plus the request's `reason`).
    pub params: &'a Value,
    /// The phone session of the request, if any.
    pub phone_session_id: Option<&'a str>,
    /// The runtime session of the request (`background-job:<id>` inside a job run).
    pub runtime_session_id: &'a str,
    /// The bridge's clock when the request arrived (Unix ms).
    pub now_ms: i64,
}

/// A family of runtime-owned commands served outside the core (background jobs, live
/// watchers). Installed by the daemon; consulted before the core's own services, so an
/// installed service may take over a command the core would otherwise serve.
#[async_trait]
pub trait RuntimeService: Send + Sync + 'static {
    /// Whether this service runs the canonical command `name`.
    fn serves(&self, name: &str) -> bool;

    /// Runs one call; the result object becomes the tool result's data.
    async fn execute(&self, call: ServiceCall<'_>) -> Result<Value, DeviceError>;
}

/// The installed services, in installation order.
#[derive(Default)]
pub(crate) struct Installed {
    services: std::sync::RwLock<Vec<Arc<dyn RuntimeService>>>,
}

impl Installed {
    pub(crate) fn install(&self, service: Arc<dyn RuntimeService>) {
        crate::locks::write(&self.services).push(service);
    }

    /// The installed service that runs `name`, if any.
    pub(crate) fn find(&self, name: &str) -> Option<Arc<dyn RuntimeService>> {
        crate::locks::read(&self.services)
            .iter()
            .find(|s| s.serves(name))
            .cloned()
    }
}

/// Whether the core itself serves a runtime-owned command: the manifest's `service` says
/// which family it belongs to, and the core serves the memory and watcher records.
pub fn serves(command: &Command) -> bool {
    match command.service {
        Some(Service::Memory | Service::Watchers) => true,
        Some(Service::Jobs | Service::Goals) | None => false,
    }
}

/// An `invalid_input` error naming `field` (the runtime-owned services' params checks).
pub fn invalid(field: &str, message: &str) -> DeviceError {
    DeviceError::InvalidInput {
        field: field.to_owned(),
        message: message.to_owned(),
    }
}

/// An internal error (a store failure) as a device error.
pub fn internal(e: impl std::fmt::Display) -> DeviceError {
    DeviceError::Internal {
        message: e.to_string(),
    }
}

/// The `limit` param: `default` when absent, capped at `max`, refused below 1.
pub fn limit(params: &Value, default: usize, max: usize) -> Result<usize, DeviceError> {
    match params.get("limit").and_then(Value::as_i64) {
        None => Ok(default),
        Some(n) if n >= 1 => Ok(usize::try_from(n).unwrap_or(max).min(max)),
        Some(_) => Err(invalid("limit", "must be at least 1")),
    }
}

/// Which watchers `openphone.watchers.stop` names: `all: true` or `scope: "all"`, else a
/// `watcher_id`, else a `query`; none of them is `invalid_input` on `watcher_id`.
pub fn watcher_selector(params: &Value) -> Result<WatcherSelector, DeviceError> {
    let all = params.get("all").and_then(Value::as_bool) == Some(true)
        || text(params, "scope") == Some("all");
    if all {
        Ok(WatcherSelector::All)
    } else if let Some(id) = params.get("watcher_id").and_then(Value::as_i64) {
        Ok(WatcherSelector::Id(id))
    } else if let Some(q) = text(params, "query") {
        Ok(WatcherSelector::Query(q.to_owned()))
    } else {
        Err(invalid(
            "watcher_id",
            "name a watcher_id, a query, or all: true",
        ))
    }
}

/// The most active watchers one runtime may have (its own; the user's are counted apart), so
/// no runtime can fill the phone with watchers or crowd out anyone else's.
pub const MAX_ACTIVE_WATCHERS_PER_RUNTIME: usize = 32;
/// The most active watchers the operator (the user) may have.
pub const MAX_ACTIVE_WATCHERS_OPERATOR: usize = 128;

/// Whose watchers an owner sees, stops and counts: `None` (every watcher) for the operator
/// ([`crate::authority::OPERATOR_CREATOR`]), the owner's own otherwise. A watcher's owner is
/// the runtime it was created for (`WatcherRecord::runtime`).
pub fn watcher_scope(owner: &str) -> Option<&str> {
    (owner != crate::authority::OPERATOR_CREATOR).then_some(owner)
}

/// The owner a watcher command of `caller` in runtime session `runtime_session_id` acts for
/// (the id its watchers are recorded under): [`crate::authority::OPERATOR_CREATOR`] for the
/// operator (whatever its transport calls it), a runtime's own id, and for `builtin` doing a
/// runtime's work — its job, its goal, its watcher — that runtime's
/// ([`crate::authority::acting_for`]). Refused
/// (`work_owner_unknown`) when `builtin` works in a background session whose owner cannot be
/// read.
pub fn watcher_owner_for(
    store: &Store,
    caller: &Caller,
    runtime_session_id: &str,
) -> Result<String, DeviceError> {
    Ok(crate::authority::acting_for(store, caller, runtime_session_id)?.owner_id(caller))
}

/// How many active watchers `owner` may have.
pub fn watcher_quota(owner: &str) -> usize {
    if owner == crate::authority::OPERATOR_CREATOR {
        MAX_ACTIVE_WATCHERS_OPERATOR
    } else {
        MAX_ACTIVE_WATCHERS_PER_RUNTIME
    }
}

/// `watcher_not_found`: no watcher with this id that the caller may see (another runtime's
/// watcher answers exactly as a watcher that does not exist).
fn watcher_not_found(id: i64) -> DeviceError {
    DeviceError::Refused {
        code: "watcher_not_found",
        message: format!("no watcher has id {id}"),
    }
}

/// Stores a new watcher owned by `owner` ([`watcher_owner_for`]) within its quota
/// ([`watcher_quota`]); `watcher_limit_reached` when its own active watchers fill it.
pub fn create_watcher_for(
    store: &Store,
    owner: &str,
    params: Value,
    now_ms: i64,
) -> Result<WatcherRecord, DeviceError> {
    let quota = watcher_quota(owner);
    store
        .create_watcher_within(
            &NewWatcher {
                runtime: owner.to_owned(),
                params,
            },
            now_ms,
            Some(quota),
        )
        .map_err(|e| match e {
            StoreError::LimitReached { .. } => DeviceError::Refused {
                code: "watcher_limit_reached",
                message: format!(
                    "`{owner}` already has {quota} active watchers (the most one owner may \
                     have); stop one of its watchers first"
                ),
            },
            other => internal(other),
        })
}

/// `openphone.watchers.list` for `owner`: the operator's lists every active watcher, a
/// runtime's only its own (each with `runtime`, its creator).
pub fn list_watchers_for(store: &Store, owner: &str, params: &Value) -> Result<Value, DeviceError> {
    let watchers = store
        .list_watchers_of(
            watcher_scope(owner),
            text(params, "query"),
            Some(limit(params, 20, 100)?),
        )
        .map_err(internal)?;
    Ok(json!({ "watchers": watchers, "count": watchers.len() }))
}

/// `openphone.watchers.stop` for `owner`: among the operator's every watcher, among a
/// runtime's only its own — `all: true` stops all of *its* watchers, a query matches only its
/// own, and an id that is not its own answers `watcher_not_found` as an unknown id does.
pub fn stop_watchers_for(
    store: &Store,
    owner: &str,
    params: &Value,
    now_ms: i64,
) -> Result<Value, DeviceError> {
    let selector = watcher_selector(params)?;
    let owner = watcher_scope(owner);
    if let WatcherSelector::Id(id) = selector {
        let visible = store
            .get_watcher(id)
            .map_err(internal)?
            .is_some_and(|w| owner.is_none_or(|o| w.runtime == o));
        if !visible {
            return Err(watcher_not_found(id));
        }
    }
    let stopped = store
        .stop_watchers_of(owner, &selector, now_ms)
        .map_err(internal)?;
    Ok(json!({ "stopped": stopped.len(), "watchers": stopped }))
}

/// A string param, trimmed; `None` when absent or blank.
pub fn text<'a>(params: &'a Value, key: &str) -> Option<&'a str> {
    params
        .get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// Executes a runtime-owned command (params already validated against the manifest) for
/// `caller` in runtime session `runtime_session_id` (whose work it is: [`watcher_owner_for`]).
pub fn execute(
    store: &Store,
    caller: &Caller,
    runtime_session_id: &str,
    name: &str,
    params: &Value,
    now_ms: i64,
) -> Result<Value, DeviceError> {
    match name {
        "openphone.memory.search" => {
            let hits = store
                .search_memory(text(params, "query"), limit(params, 10, 50)?)
                .map_err(internal)?;
            Ok(json!({ "memories": hits, "count": hits.len() }))
        }
        "openphone.memory.save" => {
            let body = text(params, "text").ok_or_else(|| invalid("text", "must not be empty"))?;
            let kind = text(params, "type").unwrap_or("fact");
            if !matches!(kind, "fact" | "preference" | "standing_instruction") {
                return Err(invalid(
                    "type",
                    "must be fact, preference or standing_instruction",
                ));
            }
            let confidence = params.get("confidence").and_then(Value::as_f64);
            if confidence.is_some_and(|c| !(0.0..=1.0).contains(&c)) {
                return Err(invalid("confidence", "must be between 0 and 1"));
            }
            let saved = store
                .save_memory(
                    &NewMemory {
                        text: body.to_owned(),
                        kind: kind.to_owned(),
                        subject: text(params, "subject").unwrap_or_default().to_owned(),
                        confidence,
                    },
                    now_ms,
                )
                .map_err(internal)?;
            Ok(json!({ "saved": true, "memory": saved }))
        }
        "openphone.watchers.list" => list_watchers_for(
            store,
            &watcher_owner_for(store, caller, runtime_session_id)?,
            params,
        ),
        "openphone.watchers.create" => {
            text(params, "title").ok_or_else(|| invalid("title", "must not be empty"))?;
            let owner = watcher_owner_for(store, caller, runtime_session_id)?;
            let watcher = create_watcher_for(store, &owner, params.clone(), now_ms)?;
            Ok(json!({ "created": true, "watcher": watcher }))
        }
        "openphone.watchers.stop" => stop_watchers_for(
            store,
            &watcher_owner_for(store, caller, runtime_session_id)?,
            params,
            now_ms,
        ),
        other => Err(DeviceError::UnsupportedTool {
            tool: other.to_owned(),
        }),
    }
}
