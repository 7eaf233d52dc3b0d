//! Serialising a typed value as a JSON object whose members are in key order: how the replies
//! that were built as `serde_json` maps (sorted by key) keep their exact bytes now that they
//! are typed. Use it with `#[serde(serialize_with = "in_key_order")]`.

use serde::{Serialize, Serializer};

/// Writes `value` with every object's members in key order (through `serde_json::Value`).
pub(crate) fn in_key_order<T: Serialize, S: Serializer>(
    value: &T,
    s: S,
) -> Result<S::Ok, S::Error> {
    match serde_json::to_value(value) {
        Ok(value) => value.serialize(s),
        Err(e) => Err(serde::ser::Error::custom(e)),
    }
}
