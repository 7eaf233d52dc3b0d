//! The scenario's timeline: things that happen by themselves at simulated times (a message
//! arrives at 10:05, a page changes at noon). The phone fires each entry once, in due order,
//! when its clock reaches it ([`crate::SimPhone::fire_due`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::WebPage;
use crate::world::Injection;

/// One timed entry: when (`at_ms`, or `after_ms` after `clock.start_ms`) and what (an
/// injection, or a web page that appears or changes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TimelineEntry {
    /// When it is due, Unix ms (give this or `after_ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_ms: Option<i64>,
    /// When it is due, in ms after the scenario's `clock.start_ms` (give this or `at_ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_ms: Option<i64>,
    /// What happens: a message, a call, a notification or a notification action, exactly as
    /// `openphone sim inject` makes it happen (give this or `web_page`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inject: Option<Injection>,
    /// A web page that appears, or replaces the page with the same URL (give this or
    /// `inject`). Raises no device event: a page changing is news from the web, which a
    /// `web` watcher notices when it next reads the page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub web_page: Option<WebPage>,
    /// Whether it has fired (set by the phone; a snapshot keeps it, so a restored phone never
    /// fires an entry twice).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fired: bool,
}

impl TimelineEntry {
    /// When the entry is due, for a scenario starting at `start_ms`.
    pub fn due_ms(&self, start_ms: i64) -> i64 {
        match (self.at_ms, self.after_ms) {
            (Some(at), _) => at,
            (None, Some(after)) => start_ms.saturating_add(after),
            (None, None) => start_ms,
        }
    }
}
