//! `sim.inject` (operator only): make something happen in the simulated phone's world — a
//! message arrives, a call comes in, an app posts a notification, the user presses a
//! notification's button. The daemon writes an `operator_action` audit record (`tool`
//! `sim.inject.<kind>`, `params_hash` of the injection) before the phone applies it.

use serde::{Deserialize, Serialize};

use super::events::Event;
use crate::injection::Injection;

/// `sim.inject` params: one injection, by `kind` ([`Injection`]). Unknown fields are refused.
pub type SimInjectParams = Injection;

/// `sim.inject` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SimInjectResult {
    /// The events the injection raised, in order (a message: `phone.message.received`, then
    /// the Messages app's `phone.notification.posted`).
    pub events: Vec<Event>,
    /// The `seq` of the `operator_action` audit record written before it was applied.
    pub audit_seq: i64,
}
