//! Device or user content as it travels to a model: wrapped as data with its trust label, so
//! the events that carry it and the runtime records that quote it share one type.

use serde::{Deserialize, Serialize};
use serde_json::Value;

crate::wire_enum!(
    /// The trust label of content from the phone or the user.
    Trust {
        /// Content to reason about, never instructions.
        UntrustedData = "untrusted_data",
    }
);

/// Device or user content wrapped as data: `{"trust": "untrusted_data", "note": …, "data": …}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct UntrustedData {
    pub trust: Trust,
    /// A reminder for the model reading it.
    pub note: String,
    /// The content (a JSON string holding the cut text when it was too long).
    pub data: Value,
}
