//! The events manifest: a version-1 object whose `events` have unique names and known
//! directions, and whose transport mappings name manifest events with unique wire names.

use std::collections::HashSet;

use serde_json::Value;

use super::{Report, Rule, describe, non_empty_str, parse_object, version_exactly_one};
use crate::manifest::{Direction, EventSpec, TransportMapping, WireMapping};

/// Checks the events manifest; the events and transport mappings that passed.
pub(super) fn check(text: &str, r: &mut Report) -> (Vec<EventSpec>, Vec<TransportMapping>) {
    let mut events = Vec::new();
    let mut mappings = Vec::new();
    let Some(doc) = parse_object(text, Rule::EventsJson, r) else {
        return (events, mappings);
    };
    version_exactly_one(&doc, Rule::EventsVersion, r);
    let Some(items) = doc.get("events").and_then(Value::as_array) else {
        r.err(Rule::EventsArray, None, "`events` must be an array");
        return (events, mappings);
    };
    let mut seen = HashSet::new();
    for (i, item) in items.iter().enumerate() {
        let Some(name) = item.as_object().and_then(|o| non_empty_str(o, "name")) else {
            r.err(
                Rule::EventsArray,
                Some(&format!("events[{i}]")),
                "must be an object with a non-empty string `name`",
            );
            continue;
        };
        if !seen.insert(name.to_owned()) {
            r.err(
                Rule::EventUniqueNames,
                Some(name),
                "event name listed more than once",
            );
        }
        let direction = item
            .get("direction")
            .and_then(Value::as_str)
            .and_then(Direction::parse);
        let Some(direction) = direction else {
            r.err(
                Rule::EventDirection,
                Some(name),
                format!(
                    "direction must be phone_to_runtime, runtime_to_phone or bidirectional; found {}",
                    describe(item.get("direction"))
                ),
            );
            continue;
        };
        events.push(EventSpec {
            name: name.to_owned(),
            direction,
            description: item
                .get("description")
                .and_then(Value::as_str)
                .map(str::to_owned),
        });
    }
    match doc.get("transport_mappings") {
        None => {}
        Some(Value::Array(list)) => {
            for (i, m) in list.iter().enumerate() {
                let subject = format!("transport_mappings[{i}]");
                let Some(obj) = m.as_object() else {
                    r.err(
                        Rule::EventTransportMapping,
                        Some(&subject),
                        "must be an object",
                    );
                    continue;
                };
                let (Some(runtime), Some(transport)) = (
                    non_empty_str(obj, "runtime"),
                    non_empty_str(obj, "transport"),
                ) else {
                    r.err(
                        Rule::EventTransportMapping,
                        Some(&subject),
                        "needs non-empty `runtime` and `transport`",
                    );
                    continue;
                };
                let Some(pairs) = obj.get("events").and_then(Value::as_array) else {
                    r.err(
                        Rule::EventTransportMapping,
                        Some(&subject),
                        "`events` must be an array",
                    );
                    continue;
                };
                let mut wires = HashSet::new();
                let mut out = Vec::new();
                for pair in pairs {
                    let protocol = pair
                        .get("protocol")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    let wire = pair.get("wire").and_then(Value::as_str).unwrap_or_default();
                    if !seen.contains(protocol) {
                        r.err(
                            Rule::EventTransportMapping,
                            Some(&format!("{runtime}/{transport}")),
                            format!("maps `{protocol}`, which is not a manifest event"),
                        );
                    }
                    if wire.is_empty() {
                        r.err(
                            Rule::EventTransportMapping,
                            Some(&format!("{runtime}/{transport}")),
                            format!("`{protocol}` has an empty wire name"),
                        );
                    } else if !wires.insert(wire) {
                        r.err(
                            Rule::EventTransportMapping,
                            Some(&format!("{runtime}/{transport}")),
                            format!("wire name `{wire}` is used more than once"),
                        );
                    }
                    out.push(WireMapping {
                        protocol: protocol.to_owned(),
                        wire: wire.to_owned(),
                    });
                }
                mappings.push(TransportMapping {
                    runtime: runtime.to_owned(),
                    transport: transport.to_owned(),
                    events: out,
                });
            }
        }
        Some(_) => r.err(
            Rule::EventTransportMapping,
            None,
            "`transport_mappings` must be an array",
        ),
    }
    (events, mappings)
}
