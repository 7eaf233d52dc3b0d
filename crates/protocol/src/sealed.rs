//! A tool result's `result` object written to JSON text once, for two readers: the audit's
//! digest of the result ([`crate::object_hash`]) and the endpoint's answer, which embeds the
//! text as it is instead of walking the object a second time (issue 34: one serialisation of
//! a result, one hash pass).
//!
//! The text is serde_json's compact form of the `Map`. It is the canonical form too when every
//! number in it is an integer within ±(2^53 − 1): keys are in code-point order in both (a
//! `Map` sorts them; [`crate::canonical`] sorts by code point, which is UTF-8 byte order),
//! strings are escaped alike (only `"`, `\` and the C0 controls, with the same short forms and
//! lowercase `\u00xx`), and there is no whitespace. Then the digest is the hash of the text;
//! otherwise (a float, a larger integer, a map out of order) the digest is computed the
//! canonical way, and the text is still what the answer embeds.

use std::sync::Arc;

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::limits::MAX_SAFE_INTEGER;
use crate::tool_result::{ToolError, ToolResult, ToolStatus};

/// The JSON text of a result's `result` object, kept beside it ([`ToolResult::seal`]). A cache:
/// two results are equal whatever their sealed texts, and it never travels as a member.
#[derive(Clone, Default)]
pub struct Sealed(Option<Arc<RawValue>>);

impl Sealed {
    /// No text kept.
    pub const NONE: Sealed = Sealed(None);

    /// The text, when kept.
    pub fn text(&self) -> Option<&str> {
        self.0.as_deref().map(RawValue::get)
    }
}

impl PartialEq for Sealed {
    fn eq(&self, _other: &Sealed) -> bool {
        true
    }
}

impl std::fmt::Debug for Sealed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Some(text) => write!(f, "Sealed({} bytes)", text.get().len()),
            None => f.write_str("Sealed(none)"),
        }
    }
}

/// Whether serde_json's compact text of `map` is also its canonical text (see the module
/// documentation): every object's keys in order, every number a safe integer.
fn writes_canonically(map: &Map<String, Value>) -> bool {
    (*MAPS_SORTED || map.keys().is_sorted()) && map.values().all(value_writes_canonically)
}

/// Whether every `Map` keeps its keys sorted (serde_json without `preserve_order`, which
/// another crate of a build may turn on): then no object's order needs checking.
static MAPS_SORTED: std::sync::LazyLock<bool> = std::sync::LazyLock::new(|| {
    let mut probe = Map::new();
    for key in ["b", "c", "a"] {
        probe.insert(key.to_owned(), Value::Null);
    }
    probe.keys().is_sorted()
});

fn value_writes_canonically(value: &Value) -> bool {
    match value {
        Value::Null | Value::Bool(_) | Value::String(_) => true,
        Value::Number(n) => {
            let bound = MAX_SAFE_INTEGER as u64;
            n.as_i64().map_or_else(
                || n.as_u64().is_some_and(|u| u <= bound),
                |i| i.unsigned_abs() <= bound,
            )
        }
        Value::Array(items) => items.iter().all(value_writes_canonically),
        Value::Object(map) => writes_canonically(map),
    }
}

impl ToolResult {
    /// Writes `result` to JSON text once, keeps the text for [`ToolResult::to_raw_json`] and
    /// returns the result's digest (`sha256:<hex>` of its canonical JSON, as
    /// [`crate::object_hash`]; `None` for an empty result or one without a canonical form).
    ///
    /// Whoever changes `result` afterwards must call [`ToolResult::unseal`] (debug builds check
    /// the kept text against `result` when it is used).
    pub fn seal(&mut self) -> Option<String> {
        self.sealed = Sealed::NONE;
        if self.result.is_empty() {
            return None;
        }
        let Ok(raw) = serde_json::value::to_raw_value(&self.result) else {
            return crate::object_hash(&self.result).ok();
        };
        let digest = if writes_canonically(&self.result) {
            Some(format!("sha256:{}", crate::digest::sha256_hex(raw.get())))
        } else {
            crate::object_hash(&self.result).ok()
        };
        self.sealed = Sealed(Some(Arc::from(raw)));
        digest
    }

    /// The text kept by [`ToolResult::seal`], for a reader that needs `result` as JSON text
    /// (debug builds check it is still `result`'s).
    pub fn sealed_text(&self) -> Option<&str> {
        let text = self.sealed.text()?;
        self.debug_check_sealed(text);
        Some(text)
    }

    /// In debug builds, that `text` is still what `result` writes (the one check on a result
    /// changed after sealing without [`ToolResult::unseal`]).
    fn debug_check_sealed(&self, text: &str) {
        debug_assert_eq!(
            serde_json::to_string(&self.result).ok().as_deref(),
            Some(text),
            "a sealed result changed after it was sealed (call unseal)"
        );
    }

    /// Drops the text kept by [`ToolResult::seal`] (after a change to `result`).
    pub fn unseal(&mut self) {
        self.sealed = Sealed::NONE;
    }

    /// The result as the endpoint's answer embeds it: the same JSON text as serialising the
    /// struct, with the sealed `result` text copied in rather than written again.
    pub fn to_raw_json(&self) -> serde_json::Result<Box<RawValue>> {
        let Some(result) = self.sealed.0.as_deref() else {
            return serde_json::value::to_raw_value(self);
        };
        self.debug_check_sealed(result.get());
        serde_json::value::to_raw_value(&Wire {
            request_id: &self.request_id,
            status: self.status,
            requires_confirmation: self.requires_confirmation,
            result,
            audit_id: &self.audit_id,
            openphone_task_id: &self.openphone_task_id,
            replayed: self.replayed,
            error: &self.error,
        })
    }
}

/// [`ToolResult`]'s wire form with `result` as text: the same members, in the same order, with
/// the same omissions (a unit test compares the two).
#[derive(Serialize)]
struct Wire<'a> {
    request_id: &'a str,
    status: ToolStatus,
    requires_confirmation: bool,
    result: &'a RawValue,
    audit_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    openphone_task_id: &'a Option<String>,
    #[serde(skip_serializing_if = "is_false")]
    replayed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: &'a Option<ToolError>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!("an object"),
        }
    }

    fn results() -> Vec<ToolResult> {
        let nested = map(json!({
            "b": [1, -2, {"z": null, "a": "t\u{1}\"\\\n\t\u{7f}é😀"}],
            "a": {"k": true, "j": 9_007_199_254_740_991_i64},
            "é": "non-ascii key", "Z": ""
        }));
        let floats = map(json!({"level": 0.5, "big": 1e21, "small": 1e-7, "neg": -0.0}));
        let unsafe_int =
            map(json!({"n": 9_007_199_254_740_993_u64, "m": -9_007_199_254_740_993_i64}));
        let mut replayed = ToolResult::ok("r", "q3", nested.clone());
        replayed.replayed = true;
        replayed.openphone_task_id = Some("task-1".into());
        let failed = ToolResult::failure("r", "q4", ErrorCode::ToolError, "broke")
            .with_details(map(json!({"why": "x"})));
        vec![
            ToolResult::ok("r", "q1", nested),
            ToolResult::ok("r", "q2", floats),
            ToolResult::ok("r", "q5", unsafe_int),
            ToolResult::ok("r", "q6", Map::new()),
            replayed,
            failed,
        ]
    }

    #[test]
    fn seal_digest_equals_the_canonical_object_hash() {
        for mut result in results() {
            let expected = if result.result.is_empty() {
                None
            } else {
                crate::object_hash(&result.result).ok()
            };
            assert_eq!(result.seal(), expected, "{:?}", result.result);
        }
    }

    #[test]
    fn sealed_wire_text_equals_the_struct_serialised() {
        for mut result in results() {
            let plain = serde_json::to_string(&result).unwrap();
            assert_eq!(result.to_raw_json().unwrap().get(), plain);
            result.seal();
            assert_eq!(result.sealed.text().is_some(), !result.result.is_empty());
            assert_eq!(result.to_raw_json().unwrap().get(), plain);
        }
    }

    #[test]
    fn sealed_text_is_a_cache_invisible_to_equality_and_serde() {
        let mut a = results().remove(0);
        let b = a.clone();
        a.seal();
        assert_eq!(a, b);
        let back: ToolResult = serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
        assert!(back.sealed.text().is_none());
        assert_eq!(back, b);
        a.unseal();
        assert!(a.sealed.text().is_none());
    }

    #[test]
    fn floats_and_large_integers_take_the_canonical_digest() {
        let floats = results().remove(1);
        assert!(!writes_canonically(&floats.result));
        let big = results().remove(2);
        assert!(!writes_canonically(&big.result));
        assert!(writes_canonically(&results().remove(0).result));
    }

    fn leaf() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|i| json!(i)),
            (-1_000_000_i64..1_000_000).prop_map(|i| json!(i)),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| json!(f)),
            any::<String>().prop_map(Value::String),
            "[a-c\\\"\u{0}-\u{1f}\u{7f}é😀]{0,6}".prop_map(Value::String),
        ]
    }

    fn object() -> impl proptest::strategy::Strategy<Value = Map<String, Value>> {
        use proptest::prelude::*;
        let value = leaf().prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map(any::<String>(), inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        });
        proptest::collection::btree_map(any::<String>(), value, 0..5)
            .prop_map(|m| m.into_iter().collect())
    }

    proptest::proptest! {
        #[test]
        fn sealing_any_result_keeps_its_digest_and_wire_text(result in object()) {
            let mut r = ToolResult::ok("r", "q", result);
            let plain = serde_json::to_string(&r).unwrap();
            let expected = if r.result.is_empty() { None } else { crate::object_hash(&r.result).ok() };
            proptest::prop_assert_eq!(r.seal(), expected);
            let raw = r.to_raw_json().unwrap();
            proptest::prop_assert_eq!(raw.get(), plain);
        }
    }
}
