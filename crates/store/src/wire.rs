//! Closed enums stored as their wire strings, and small row-decoding helpers.

use rusqlite::Row;
use serde_json::Value;

use crate::error::{Result, SqlContext, StoreError};

pub(crate) use openphone_protocol::wire_enum;

/// The three canonical autonomy modes, defined once in `openphone_protocol`.
pub use openphone_protocol::Autonomy;

/// Decodes a stored wire string into a closed enum.
pub(crate) fn parse_enum<T>(
    parse: fn(&str) -> Option<T>,
    text: &str,
    op: &'static str,
    id: &str,
) -> Result<T> {
    parse(text).ok_or_else(|| StoreError::corrupt(op, id, format!("unknown value {text:?}")))
}

/// Decodes a stored JSON blob.
pub(crate) fn parse_json(text: &str, op: &'static str, id: &str) -> Result<Value> {
    serde_json::from_str(text).map_err(|e| StoreError::corrupt(op, id, e))
}

/// Encodes a JSON blob for storage.
pub(crate) fn to_json(value: &Value) -> String {
    // Serialising a `Value` to a string cannot fail (all keys are strings).
    value.to_string()
}

/// Reads a column, attaching the operation on failure.
pub(crate) fn col<T: rusqlite::types::FromSql>(
    row: &Row<'_>,
    name: &str,
    op: &'static str,
) -> Result<T> {
    row.get(name).ctx(op, name)
}

/// Parses the risk column.
pub(crate) fn parse_risk(
    text: &str,
    op: &'static str,
    id: &str,
) -> Result<openphone_protocol::Risk> {
    parse_enum(openphone_protocol::Risk::parse, text, op, id)
}

/// serde for `openphone_protocol::Risk` as its wire string. `Risk` now derives serde itself
/// (with the same strings); this module stays for code that names it in `#[serde(with)]`.
pub mod risk_serde {
    use openphone_protocol::Risk;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(risk: &Risk, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(risk.as_str())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Risk, D::Error> {
        let text = String::deserialize(d)?;
        Risk::parse(&text).ok_or_else(|| serde::de::Error::custom(format!("unknown risk {text:?}")))
    }

    /// The same for `Option<Risk>`.
    pub mod option {
        use openphone_protocol::Risk;
        use serde::{Deserialize, Deserializer, Serializer};

        pub fn serialize<S: Serializer>(risk: &Option<Risk>, s: S) -> Result<S::Ok, S::Error> {
            match risk {
                Some(r) => s.serialize_some(r.as_str()),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Risk>, D::Error> {
            match Option::<String>::deserialize(d)? {
                None => Ok(None),
                Some(text) => Risk::parse(&text)
                    .map(Some)
                    .ok_or_else(|| serde::de::Error::custom(format!("unknown risk {text:?}"))),
            }
        }
    }
}

/// Lower-case hex of length 64.
pub(crate) fn is_hex64(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Converts a `usize` limit for SQL.
pub(crate) fn sql_limit(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}
