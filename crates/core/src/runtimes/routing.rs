//! `runtime.select` outlives a restart: the choice is kept in the store's settings
//! (`routing.<surface>` → `{"runtime": <id>, "over": <the configuration's route then>}`) and
//! restored when the manager is built.
//!
//! The configuration stays the default: selecting the configured route again forgets the
//! choice, and a stored choice is dropped (logged) when the configuration's route for that
//! surface is no longer the one it replaced (the operator edited the file since: the newer
//! word wins) or when its runtime is no longer configured.

use std::collections::BTreeMap;

use openphone_store::Store;
use serde_json::{Value, json};

use super::{Entry, Surface};

/// The settings key of a surface's stored choice.
fn key(surface: Surface) -> String {
    format!("routing.{}", surface.as_str())
}

/// Stores (or, when `runtime` is the configuration's route, forgets) the choice for `surface`.
pub(super) fn remember(
    store: &Store,
    surface: Surface,
    runtime: &str,
    configured: &str,
    now_ms: i64,
) -> Result<(), openphone_store::StoreError> {
    if runtime == configured {
        return store.delete_setting(&key(surface)).map(|_| ());
    }
    store.set_setting(
        &key(surface),
        &json!({"runtime": runtime, "over": configured}),
        now_ms,
    )
}

/// The routing with every stored choice that still holds applied over `configured`.
pub(super) fn restore(
    store: &Store,
    runtimes: &BTreeMap<String, Entry>,
    configured: BTreeMap<Surface, String>,
) -> BTreeMap<Surface, String> {
    let mut routing = configured;
    for surface in Surface::ALL {
        let stored = match store.get_setting(&key(surface)) {
            Ok(Some(stored)) => stored,
            Ok(None) => continue,
            Err(e) => {
                tracing::error!(error = %e, surface = surface.as_str(),
                    "reading the stored runtime choice; the configuration's route is used");
                continue;
            }
        };
        let field = |name: &str| stored.get(name).and_then(Value::as_str).map(str::to_owned);
        let (Some(runtime), Some(over)) = (field("runtime"), field("over")) else {
            tracing::warn!(
                surface = surface.as_str(),
                "a stored runtime choice is unreadable; the configuration's route is used"
            );
            continue;
        };
        let current = routing.get(&surface).cloned().unwrap_or_default();
        let why_not = if over != current {
            Some("the configuration's route changed since it was made")
        } else if !runtimes.contains_key(&runtime) {
            Some("its runtime is no longer configured")
        } else {
            None
        };
        match why_not {
            None => {
                tracing::info!(surface = surface.as_str(), runtime = %runtime,
                    "restored the runtime chosen with `runtimes select`");
                routing.insert(surface, runtime);
            }
            Some(why) => {
                tracing::warn!(surface = surface.as_str(), runtime = %runtime, reason = why,
                    "a stored runtime choice no longer holds; the configuration's route is used");
                if let Err(e) = store.delete_setting(&key(surface)) {
                    tracing::error!(error = %e, "forgetting a stale runtime choice");
                }
            }
        }
    }
    routing
}
