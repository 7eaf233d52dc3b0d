//! The capabilities manifest: a version-1 object whose `capabilities` are unique ids, each
//! with a known risk.

use std::collections::HashSet;

use serde_json::Value;

use super::{Report, Rule, describe, non_empty_str, parse_object, version_exactly_one};
use crate::manifest::{Capability, CapabilityRisk};

/// Checks the capabilities manifest; the capabilities that passed.
pub(super) fn check(text: &str, r: &mut Report) -> Vec<Capability> {
    let mut out = Vec::new();
    let Some(doc) = parse_object(text, Rule::CapabilitiesJson, r) else {
        return out;
    };
    version_exactly_one(&doc, Rule::CapabilitiesVersion, r);
    let Some(items) = doc.get("capabilities").and_then(Value::as_array) else {
        r.err(
            Rule::CapabilitiesArray,
            None,
            "`capabilities` must be an array",
        );
        return out;
    };
    let mut seen = HashSet::new();
    for (i, item) in items.iter().enumerate() {
        let Some(obj) = item.as_object() else {
            r.err(
                Rule::CapabilitiesArray,
                Some(&format!("capabilities[{i}]")),
                "must be an object",
            );
            continue;
        };
        let Some(id) = non_empty_str(obj, "id") else {
            r.err(
                Rule::CapabilitiesArray,
                Some(&format!("capabilities[{i}]")),
                "needs a non-empty string `id`",
            );
            continue;
        };
        if !seen.insert(id.to_owned()) {
            r.err(
                Rule::CapabilityUniqueIds,
                Some(id),
                "capability id listed more than once",
            );
        }
        let risk = obj
            .get("risk")
            .and_then(Value::as_str)
            .and_then(CapabilityRisk::parse);
        let Some(risk) = risk else {
            r.err(
                Rule::CapabilityRiskValue,
                Some(id),
                format!(
                    "risk must be one of low, medium, high, critical; found {}",
                    describe(obj.get("risk"))
                ),
            );
            continue;
        };
        out.push(Capability {
            id: id.to_owned(),
            risk,
            description: obj
                .get("description")
                .and_then(Value::as_str)
                .map(str::to_owned),
        });
    }
    out
}
