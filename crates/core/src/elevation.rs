//! Elevated mode (seed 002 §2, layer 2 of OpenClaw's stack: elevated-mode gating): the user
//! grants one runtime a higher autonomy ceiling for a while — `openphone elevate hermes --to
//! trusted_actions --for 10m` — on top of the static `max_autonomy` of the configuration.
//!
//! - **Granted** only by the operator ([`ToolBridge::elevate`]), for a configured, enabled
//!   runtime, to a level looser than its configured ceiling, never above the configuration's
//!   cap (`[elevation] max_autonomy`, and a per-runtime cap in `[elevation.runtimes]`), for at
//!   most `[elevation] max_duration_secs`. A new grant replaces the runtime's earlier one.
//! - **Used** by the policy (`openphone_policy::Elevation`): while it lasts it lifts the
//!   runtime's ceiling in layer 4; the layer-4 verdict of every request it lifted names the
//!   grant, so each use is in that request's audit record. The risk floor and background
//!   parking are other layers: an elevation never lowers them. The cap is applied again at
//!   every lookup, so lowering it in the configuration takes effect at the next start even for
//!   a grant already stored.
//! - **Ends** on its own at `expires_at_ms` (the policy compares the time itself; the daemon's
//!   timer sweeps it with [`ToolBridge::expire_elevations`] and records the expiry) or when the
//!   user revokes it ([`ToolBridge::revoke_elevation`]).
//! - **Audited**: `elevation.granted` and `elevation.revoked` (`operator_action`) and
//!   `elevation.expired` (`background_event`), each with the grant's ids and levels, written
//!   before the change takes effect.
//! - **Announced**: once it has taken effect, each change is the event
//!   `runtime.elevation.changed` (to operators and the runtime concerned), so the dashboard
//!   and the CLI see it without reloading.
//! - **Not inherited**: an elevation lifts the runtime's own requests only. A job or a watcher
//!   the runtime creates while elevated runs under its own authority (the ceiling recorded
//!   when it was made), never the elevation's.
//! - **Durable**: a grant is kept in the store's settings (`elevation.<runtime>`), so a restart
//!   inside the window keeps it and one after it records the expiry.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, RwLock};

use openphone_policy::{Autonomy, Caller, Elevation};
use openphone_protocol::endpoint::{
    AuditCaller, AuditEntry, AuditKind, ElevationChange, ElevationChanged, ElevationInfo, Event,
};
use openphone_protocol::normalize_runtime_id;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::ToolBridge;
use crate::locks::lock;

/// The longest grant when the configuration says nothing: one hour.
pub const DEFAULT_MAX_DURATION_SECS: u64 = 3_600;

/// The settings key prefix of stored grants.
const KEY_PREFIX: &str = "elevation.";

/// `[elevation]`: what the user may grant with `openphone elevate`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ElevationConfig {
    /// The highest ceiling an elevation may grant any runtime (default `trusted_actions`;
    /// `ask_before_action` allows only lifting an `observe_only` runtime, `observe_only`
    /// turns elevation off).
    pub max_autonomy: Autonomy,
    /// The longest grant, in seconds (default 3600).
    pub max_duration_secs: u64,
    /// Per-runtime caps (runtime id → level); the stricter of this and `max_autonomy` holds.
    pub runtimes: BTreeMap<String, Autonomy>,
}

impl Default for ElevationConfig {
    fn default() -> Self {
        Self {
            max_autonomy: Autonomy::TrustedActions,
            max_duration_secs: DEFAULT_MAX_DURATION_SECS,
            runtimes: BTreeMap::new(),
        }
    }
}

impl ElevationConfig {
    /// The highest level `runtime` may be elevated to.
    pub fn cap(&self, runtime: &str) -> Autonomy {
        match self.runtimes.get(runtime) {
            Some(own) => own.stricter(self.max_autonomy),
            None => self.max_autonomy,
        }
    }

    /// Checks the table: a duration of at least one second, no more than a day.
    pub fn check(&self) -> Result<(), String> {
        if !(1..=86_400).contains(&self.max_duration_secs) {
            return Err(format!(
                "[elevation] max_duration_secs = {} is out of range (1 to 86400)",
                self.max_duration_secs
            ));
        }
        Ok(())
    }
}

/// Why an elevation was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ElevationRefusal {
    /// Not the operator, or above what the configuration allows.
    Forbidden(String),
    /// A bad level, runtime or duration.
    Invalid(String),
    /// The audit or the store could not record it (nothing changed).
    Unrecorded(String),
}

impl std::fmt::Display for ElevationRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ElevationRefusal::Forbidden(m)
            | ElevationRefusal::Invalid(m)
            | ElevationRefusal::Unrecorded(m) => f.write_str(m),
        }
    }
}

/// The bridge's elevations: the configuration and the grants (read from the store on first
/// use).
#[derive(Debug, Default)]
pub(crate) struct Elevations {
    config: RwLock<ElevationConfig>,
    grants: Mutex<Option<BTreeMap<String, ElevationInfo>>>,
}

/// What the bridge keeps of seed 002 §2's layer 2: the elevations and the `[wake]` table.
#[derive(Debug, Default)]
pub(crate) struct Gating {
    pub(crate) elevations: Elevations,
    pub(crate) wake: crate::wake::WakeState,
}

fn to_ms(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

impl ToolBridge {
    /// Replaces the `[elevation]` configuration (at start).
    pub fn set_elevation_config(&self, config: ElevationConfig) {
        *self
            .gating
            .elevations
            .config
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = config;
    }

    fn elevation_config(&self) -> ElevationConfig {
        self.gating
            .elevations
            .config
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The grants, loaded from the store the first time.
    fn grants(&self) -> MutexGuard<'_, Option<BTreeMap<String, ElevationInfo>>> {
        let mut guard = lock(&self.gating.elevations.grants);
        if guard.is_none() {
            let mut loaded = BTreeMap::new();
            match self.store().list_settings() {
                Ok(settings) => {
                    for s in settings
                        .into_iter()
                        .filter(|s| s.key.starts_with(KEY_PREFIX))
                    {
                        match serde_json::from_value::<ElevationInfo>(s.value) {
                            Ok(grant) => {
                                loaded.insert(grant.runtime.clone(), grant);
                            }
                            Err(e) => tracing::warn!(key = %s.key, error = %e,
                                "an unreadable elevation grant is ignored"),
                        }
                    }
                }
                Err(e) => tracing::error!(error = %e, "reading the elevation grants"),
            }
            *guard = Some(loaded);
        }
        guard
    }

    /// The elevation the policy applies to `runtime`'s requests: its grant, capped by the
    /// configuration as it is now (`None` without one; an expired one is the policy's to
    /// ignore).
    pub(crate) fn elevation_for(&self, runtime: &str) -> Option<Elevation> {
        let grant = self.grants().as_ref()?.get(runtime).cloned()?;
        let cap = self.elevation_config().cap(runtime);
        Some(Elevation {
            grant_id: grant.grant_id,
            to: grant.to.stricter(cap),
            expires_at_ms: to_ms(grant.expires_at_ms),
        })
    }

    /// The elevations active now, by runtime.
    pub fn elevations(&self) -> Vec<ElevationInfo> {
        let now = self.now_ms();
        self.grants()
            .as_ref()
            .map(|g| {
                g.values()
                    .filter(|e| e.expires_at_ms > now)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Grants `runtime` the ceiling `to` for `duration_secs` (see the module documentation for
    /// every check). Recorded in the audit log first, then stored.
    pub fn elevate(
        &self,
        operator: &Caller,
        runtime: &str,
        to: &str,
        duration_secs: u64,
    ) -> Result<(ElevationInfo, Option<ElevationInfo>), ElevationRefusal> {
        if !operator.is_operator() {
            return Err(ElevationRefusal::Forbidden(
                "only the operator may grant an elevation".into(),
            ));
        }
        let runtime = normalize_runtime_id(runtime)
            .map_err(|e| ElevationRefusal::Invalid(format!("runtime: {e}")))?;
        let to = Autonomy::parse_canonical(to.trim()).ok_or_else(|| {
            ElevationRefusal::Invalid(format!(
                "unknown level {:?}: use ask_before_action or trusted_actions",
                openphone_protocol::log_value(to)
            ))
        })?;
        let configured = self.configured_ceiling(&runtime)?;
        if to.strictness() >= configured.strictness() {
            return Err(ElevationRefusal::Invalid(format!(
                "runtime `{runtime}` already runs with a ceiling of {configured}; an elevation \
                 to {to} would change nothing"
            )));
        }
        let config = self.elevation_config();
        let cap = config.cap(&runtime);
        if to.strictness() < cap.strictness() {
            return Err(ElevationRefusal::Forbidden(format!(
                "the configuration allows elevating `{runtime}` to {cap} at most, not {to} \
                 ([elevation] max_autonomy, [elevation.runtimes])"
            )));
        }
        if duration_secs == 0 || duration_secs > config.max_duration_secs {
            return Err(ElevationRefusal::Invalid(format!(
                "an elevation lasts 1 to {} seconds ([elevation] max_duration_secs), not {}",
                config.max_duration_secs, duration_secs
            )));
        }
        let now = self.now_ms();
        let grant = ElevationInfo {
            grant_id: format!("elev-{}", uuid::Uuid::new_v4()),
            runtime: runtime.clone(),
            to,
            granted_at_ms: now,
            expires_at_ms: now.saturating_add(
                i64::try_from(duration_secs.saturating_mul(1_000)).unwrap_or(i64::MAX),
            ),
            granted_by: operator.principal.clone(),
        };
        let mut grants = self.grants();
        let replaced = grants.as_ref().and_then(|g| g.get(&runtime).cloned());
        let mut proof = grant_json(&grant);
        if let (Some(old), Some(map)) = (&replaced, proof.as_object_mut()) {
            map.insert("replaces".into(), json!(old.grant_id));
        }
        if let Some(map) = proof.as_object_mut() {
            map.insert("configured_ceiling".into(), json!(configured.as_str()));
            map.insert("cap".into(), json!(cap.as_str()));
        }
        self.record_elevation(
            AuditKind::OperatorAction,
            "elevation.granted",
            operator,
            &grant,
            proof,
        )?;
        let value = serde_json::to_value(&grant)
            .map_err(|e| ElevationRefusal::Unrecorded(e.to_string()))?;
        self.store()
            .set_setting(&format!("{KEY_PREFIX}{runtime}"), &value, now)
            .map_err(|e| ElevationRefusal::Unrecorded(e.to_string()))?;
        grants
            .get_or_insert_with(BTreeMap::new)
            .insert(runtime, grant.clone());
        drop(grants);
        self.expiry_moved();
        self.announce_elevation(ElevationChange::Granted, &grant, replaced.clone(), now);
        Ok((grant, replaced))
    }

    /// Ends `runtime`'s elevation now; `Ok(None)` when it had none (or it had expired).
    pub fn revoke_elevation(
        &self,
        operator: &Caller,
        runtime: &str,
    ) -> Result<Option<ElevationInfo>, ElevationRefusal> {
        if !operator.is_operator() {
            return Err(ElevationRefusal::Forbidden(
                "only the operator may revoke an elevation".into(),
            ));
        }
        let runtime = normalize_runtime_id(runtime)
            .map_err(|e| ElevationRefusal::Invalid(format!("runtime: {e}")))?;
        let now = self.now_ms();
        let mut grants = self.grants();
        let Some(grant) = grants.as_ref().and_then(|g| g.get(&runtime).cloned()) else {
            return Ok(None);
        };
        if grant.expires_at_ms <= now {
            // Its expiry is the sweep's to record.
            return Ok(None);
        }
        // Out of the store first: a revoke the next start would undo is no revoke, so a
        // failed delete fails the call and the grant stays in force (nothing changed).
        self.store()
            .delete_setting(&format!("{KEY_PREFIX}{runtime}"))
            .map_err(|e| {
                ElevationRefusal::Unrecorded(format!(
                    "the elevation of {runtime} could not be removed from the store ({e}); it \
                     is still in force"
                ))
            })?;
        if let Some(g) = grants.as_mut() {
            g.remove(&runtime);
        }
        let mut proof = grant_json(&grant);
        if let Some(map) = proof.as_object_mut() {
            map.insert("revoked_at_ms".into(), json!(now));
        }
        self.record_elevation(
            AuditKind::OperatorAction,
            "elevation.revoked",
            operator,
            &grant,
            proof,
        )?;
        drop(grants);
        self.announce_elevation(ElevationChange::Revoked, &grant, None, now);
        Ok(Some(grant))
    }

    /// Records the expiry of every grant whose time has passed and forgets it; returns how
    /// many. The daemon's timer calls it every second (the policy never applies an expired
    /// grant meanwhile).
    pub fn expire_elevations(&self) -> usize {
        let now = self.now_ms();
        let mut grants = self.grants();
        let Some(map) = grants.as_mut() else {
            return 0;
        };
        let due: Vec<ElevationInfo> = map
            .values()
            .filter(|g| g.expires_at_ms <= now)
            .cloned()
            .collect();
        let system = Caller::operator("elevation", openphone_policy::Transport::Internal, "timer");
        let mut n = 0;
        for grant in due {
            let mut proof = grant_json(&grant);
            if let Some(m) = proof.as_object_mut() {
                m.insert("expired_at_ms".into(), json!(now));
            }
            if let Err(e) = self.record_elevation(
                AuditKind::BackgroundEvent,
                "elevation.expired",
                &system,
                &grant,
                proof,
            ) {
                // Retried on the next tick; the policy already ignores it.
                tracing::error!(error = %e, "recording an elevation's expiry");
                continue;
            }
            map.remove(&grant.runtime);
            if let Err(e) = self
                .store()
                .delete_setting(&format!("{KEY_PREFIX}{}", grant.runtime))
            {
                tracing::error!(error = %e, "removing an expired elevation");
            }
            self.announce_elevation(ElevationChange::Expired, &grant, None, now);
            n += 1;
        }
        n
    }

    /// Publishes `runtime.elevation.changed` to operators and the runtime concerned; a bus
    /// that refuses it is logged (the change itself stands, audited).
    fn announce_elevation(
        &self,
        change: ElevationChange,
        grant: &ElevationInfo,
        replaced: Option<ElevationInfo>,
        at_ms: i64,
    ) {
        let event = Event::ElevationChanged(ElevationChanged {
            change,
            elevation: grant.clone(),
            replaced,
            at_ms,
        });
        let audience = crate::events::Audience {
            runtime: Some(grant.runtime.clone()),
            operators: true,
        };
        if let Err(e) = self.events().publish(&event, audience) {
            tracing::error!(error = %e, runtime = %grant.runtime,
                "announcing an elevation change");
        }
    }

    /// The runtime's configured ceiling; refused when it is not a configured, enabled runtime.
    fn configured_ceiling(&self, runtime: &str) -> Result<Autonomy, ElevationRefusal> {
        match &self.config().runtimes {
            Some(runtimes) => match runtimes.get(runtime) {
                Some(auth) if auth.enabled => Ok(auth.max_autonomy),
                Some(_) => Err(ElevationRefusal::Invalid(format!(
                    "runtime `{runtime}` is disabled in the configuration"
                ))),
                None => Err(ElevationRefusal::Invalid(format!(
                    "runtime `{runtime}` is not configured"
                ))),
            },
            // No runtime table (embedded use, tests): the remote default ceiling.
            None => Ok(Autonomy::AskBeforeAction),
        }
    }

    fn record_elevation(
        &self,
        kind: AuditKind,
        what: &str,
        by: &Caller,
        grant: &ElevationInfo,
        proof: Value,
    ) -> Result<(), ElevationRefusal> {
        let entry = AuditEntry {
            audit_id: format!("elevation:{}:{}", grant.runtime, grant.grant_id),
            kind,
            at_ms: self.now_ms(),
            runtime: grant.runtime.clone(),
            caller: AuditCaller {
                runtime: by.runtime.clone(),
                transport: by.transport.as_str().to_owned(),
                principal: by.principal.clone(),
            },
            request_id: format!("{what}-{}", grant.grant_id),
            tool: Some(what.to_owned()),
            autonomy: Some(grant.to),
            policy_proof: Some(proof),
            ..AuditEntry::default()
        };
        self.store()
            .append_audit(&entry)
            .map(|_| ())
            .map_err(|e| ElevationRefusal::Unrecorded(format!("the audit log refused it: {e}")))
    }
}

fn grant_json(grant: &ElevationInfo) -> Value {
    json!({
        "schema": "openphone.elevation.v1",
        "grant_id": grant.grant_id,
        "runtime": grant.runtime,
        "to": grant.to.as_str(),
        "granted_at_ms": grant.granted_at_ms,
        "expires_at_ms": grant.expires_at_ms,
        "granted_by": grant.granted_by,
    })
}
