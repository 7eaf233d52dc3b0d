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
use serde_json::{Map, Value};

use crate::limits::MAX_SAFE_INTEGER;
use crate::object_text::ObjectText;
use crate::tool_result::{ToolError, ToolResult, ToolStatus, is_false};

/// The JSON text of a result's `result` object, kept beside it ([`ToolResult::seal`]) or in its
/// place ([`ToolResult::ok_text`]). As a cache it is invisible: two results are equal whatever
/// their sealed texts, and it never travels as a member of its own.
#[derive(Clone, Default)]
pub struct Sealed(Kept);

#[derive(Clone, Default)]
enum Kept {
    /// No text: `result` is the object.
    #[default]
    None,
    /// `result` and its text, written by [`ToolResult::seal`].
    Cache(Arc<str>),
    /// The text only; `result` is empty until [`ToolResult::materialize`].
    Only(ObjectText),
}

impl Sealed {
    /// No text kept.
    pub const NONE: Sealed = Sealed(Kept::None);

    /// The text, when kept.
    pub fn text(&self) -> Option<&str> {
        match &self.0 {
            Kept::None => None,
            Kept::Cache(text) => Some(text),
            Kept::Only(object) => Some(object.text()),
        }
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
            Kept::None => f.write_str("Sealed(none)"),
            Kept::Cache(text) => write!(f, "Sealed({} bytes)", text.len()),
            Kept::Only(object) => write!(f, "Sealed(only: {})", object.text()),
        }
    }
}

/// Whether serde_json's compact text of `map` is also its canonical text (see the module
/// documentation): every object's keys in order, every number a safe integer.
pub(crate) fn writes_canonically(map: &Map<String, Value>) -> bool {
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
    /// An executed request whose result exists only as JSON text, for a caller that reads the
    /// answer as text (the endpoint's `tools.invoke`): `result` stays empty until
    /// [`ToolResult::materialize`]. Serialising it writes the text; [`ToolResult::seal`]
    /// digests it; [`ToolResult::unseal`] materialises it first.
    pub fn ok_text(runtime: &str, request_id: &str, object: ObjectText) -> ToolResult {
        ToolResult {
            sealed: Sealed(Kept::Only(object)),
            ..ToolResult::ok(runtime, request_id, Map::new())
        }
    }

    /// Whether `result` exists only as text ([`ToolResult::ok_text`]).
    pub fn is_text_only(&self) -> bool {
        matches!(self.sealed.0, Kept::Only(_))
    }

    /// The text of a result that exists only as text ([`ToolResult::ok_text`]), shared; `None`
    /// for any other.
    pub fn only_text(&self) -> Option<Arc<str>> {
        match &self.sealed.0 {
            Kept::Only(object) => Some(object.shared_text()),
            _ => None,
        }
    }

    /// Builds `result` from its text, for a result made by [`ToolResult::ok_text`] (the text is
    /// kept as the sealed cache); nothing for any other.
    pub fn materialize(&mut self) -> serde_json::Result<()> {
        let Kept::Only(object) = &self.sealed.0 else {
            return Ok(());
        };
        self.result = serde_json::from_str(object.text())?;
        self.sealed = Sealed(Kept::Cache(Arc::from(object.text())));
        Ok(())
    }

    /// Writes `result` to JSON text once, keeps the text for [`ToolResult::to_json_text`] and
    /// returns the result's digest (`sha256:<hex>` of its canonical JSON, as
    /// [`crate::object_hash`]; `None` for an empty result or one without a canonical form).
    /// A result that is text only keeps its text and returns its digest.
    ///
    /// Whoever changes `result` afterwards must call [`ToolResult::unseal`] (debug builds check
    /// the kept text against `result` when it is used).
    pub fn seal(&mut self) -> Option<String> {
        if let Kept::Only(object) = &self.sealed.0 {
            return object.digest();
        }
        self.sealed = Sealed::NONE;
        if self.result.is_empty() {
            return None;
        }
        let Ok(text) = serde_json::to_string(&self.result) else {
            return crate::object_hash(&self.result).ok();
        };
        let digest = if writes_canonically(&self.result) {
            Some(format!("sha256:{}", crate::digest::sha256_hex(&text)))
        } else {
            crate::object_hash(&self.result).ok()
        };
        self.sealed = Sealed(Kept::Cache(Arc::from(text)));
        digest
    }

    /// The text kept by [`ToolResult::seal`] or given to [`ToolResult::ok_text`], for a reader
    /// that needs `result` as JSON text (debug builds check a cache is still `result`'s).
    pub fn sealed_text(&self) -> Option<&str> {
        let text = self.sealed.text()?;
        self.debug_check_sealed(text);
        Some(text)
    }

    /// In debug builds, that `text` is still what `result` writes (the one check on a result
    /// changed after sealing without [`ToolResult::unseal`]).
    fn debug_check_sealed(&self, text: &str) {
        if self.is_text_only() {
            return;
        }
        debug_assert_eq!(
            serde_json::to_string(&self.result).ok().as_deref(),
            Some(text),
            "a sealed result changed after it was sealed (call unseal)"
        );
    }

    /// Drops the text kept by [`ToolResult::seal`] (after a change to `result`). A result that
    /// is text only is materialised first, so nothing is lost (and stays text only in the
    /// one case its text does not parse, which [`ObjectText`] rules out).
    pub fn unseal(&mut self) {
        if self.materialize().is_ok() {
            self.sealed = Sealed::NONE;
        }
    }

    /// The result's wire form as JSON text, the same as serialising the struct, with a kept
    /// `result` text copied in rather than written again (the endpoint's `tools.invoke` answer).
    pub fn to_json_text(&self) -> serde_json::Result<String> {
        let Some(result) = self.sealed.text() else {
            return serde_json::to_string(self);
        };
        self.debug_check_sealed(result);
        // The members of `Wire`, in its order and with its omissions (a test compares them).
        let mut out = Vec::with_capacity(result.len() + 192);
        out.extend_from_slice(b"{\"request_id\":");
        serde_json::to_writer(&mut out, &self.request_id)?;
        out.extend_from_slice(b",\"status\":");
        serde_json::to_writer(&mut out, &self.status)?;
        out.extend_from_slice(if self.requires_confirmation {
            b",\"requires_confirmation\":true,\"result\":"
        } else {
            b",\"requires_confirmation\":false,\"result\":"
        });
        out.extend_from_slice(result.as_bytes());
        out.extend_from_slice(b",\"audit_id\":");
        serde_json::to_writer(&mut out, &self.audit_id)?;
        if let Some(task) = &self.openphone_task_id {
            out.extend_from_slice(b",\"openphone_task_id\":");
            serde_json::to_writer(&mut out, task)?;
        }
        if self.replayed {
            out.extend_from_slice(b",\"replayed\":true");
        }
        if let Some(error) = &self.error {
            out.extend_from_slice(b",\"error\":");
            serde_json::to_writer(&mut out, error)?;
        }
        out.push(b'}');
        String::from_utf8(out).map_err(serde::ser::Error::custom)
    }

    fn wire<'a, R: Serialize>(&'a self, result: &'a R) -> Wire<'a, R> {
        Wire {
            request_id: &self.request_id,
            status: self.status,
            requires_confirmation: self.requires_confirmation,
            result,
            audit_id: &self.audit_id,
            openphone_task_id: &self.openphone_task_id,
            replayed: self.replayed,
            error: &self.error,
        }
    }
}

/// The wire form (`runtime-protocol.md` §12). A result that is text only is parsed for it (a
/// rare reader: an event's subscriber; the endpoint's answer is [`ToolResult::to_json_text`]).
impl Serialize for ToolResult {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.sealed.0 {
            Kept::Only(object) => {
                let result: Map<String, Value> =
                    serde_json::from_str(object.text()).map_err(serde::ser::Error::custom)?;
                self.wire(&result).serialize(serializer)
            }
            Kept::None | Kept::Cache(_) => self.wire(&self.result).serialize(serializer),
        }
    }
}

/// [`ToolResult`]'s wire form, `result` as an object or as text: the members, their order and
/// omissions of `runtime-protocol.md` §12 (a unit test compares it with the derived form).
#[derive(Serialize)]
struct Wire<'a, R> {
    request_id: &'a str,
    status: ToolStatus,
    requires_confirmation: bool,
    result: &'a R,
    audit_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    openphone_task_id: &'a Option<String>,
    #[serde(skip_serializing_if = "is_false")]
    replayed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: &'a Option<ToolError>,
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
            assert_eq!(result.to_json_text().unwrap(), plain);
            result.seal();
            assert_eq!(result.sealed.text().is_some(), !result.result.is_empty());
            assert_eq!(result.to_json_text().unwrap(), plain);
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

    /// `ToolResult` as serde's derive wrote it before `Serialize` was written by hand.
    #[derive(Serialize)]
    struct Derived<'a> {
        request_id: &'a str,
        status: ToolStatus,
        requires_confirmation: bool,
        result: &'a Map<String, Value>,
        audit_id: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        openphone_task_id: &'a Option<String>,
        #[serde(skip_serializing_if = "is_false")]
        replayed: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: &'a Option<ToolError>,
    }

    fn derived(r: &ToolResult) -> String {
        serde_json::to_string(&Derived {
            request_id: &r.request_id,
            status: r.status,
            requires_confirmation: r.requires_confirmation,
            result: &r.result,
            audit_id: &r.audit_id,
            openphone_task_id: &r.openphone_task_id,
            replayed: r.replayed,
            error: &r.error,
        })
        .unwrap()
    }

    #[test]
    fn the_hand_written_serialisation_is_the_derived_one() {
        for mut result in results() {
            assert_eq!(serde_json::to_string(&result).unwrap(), derived(&result));
            result.seal();
            assert_eq!(serde_json::to_string(&result).unwrap(), derived(&result));
        }
    }

    /// `result` as text only, with everything else of `r`.
    fn text_only(r: &ToolResult) -> ToolResult {
        ToolResult {
            sealed: Sealed(Kept::Only(ObjectText::write(&r.result).unwrap())),
            result: Map::new(),
            ..r.clone()
        }
    }

    #[test]
    fn a_text_only_result_digests_answers_and_serialises_as_its_object() {
        for r in results() {
            let plain = serde_json::to_string(&r).unwrap();
            let expected = if r.result.is_empty() {
                None
            } else {
                crate::object_hash(&r.result).ok()
            };
            let mut only = text_only(&r);
            assert!(only.is_text_only());
            assert_eq!(only.seal(), expected, "{:?}", r.result);
            assert!(only.is_text_only(), "sealing keeps the text");
            assert_eq!(only.to_json_text().unwrap(), plain);
            assert_eq!(serde_json::to_string(&only).unwrap(), plain);
            assert_eq!(
                serde_json::to_value(&only).unwrap(),
                serde_json::to_value(&r).unwrap()
            );
            let mut built = only.clone();
            built.materialize().unwrap();
            assert!(!built.is_text_only());
            assert_eq!(built, r);
            assert_eq!(built.sealed_text(), only.sealed_text());
            let mut unsealed = only.clone();
            unsealed.unseal();
            assert_eq!(unsealed, r, "unseal materialises, losing nothing");
            assert!(unsealed.sealed.text().is_none());
        }
    }

    #[test]
    fn ok_text_is_ok_with_the_audit_id_of_ok() {
        let object = ObjectText::write(&map(json!({"a": 1}))).unwrap();
        let r = ToolResult::ok_text("rt", "q", object);
        let plain = ToolResult::ok("rt", "q", map(json!({"a": 1})));
        assert_eq!(
            r.to_json_text().unwrap(),
            serde_json::to_string(&plain).unwrap()
        );
        assert_eq!((r.status, &r.audit_id), (plain.status, &plain.audit_id));
    }

    #[test]
    fn a_filled_template_is_a_text_only_result_of_its_object() {
        let object = map(json!({"captured_at": 0, "f": 0.5, "t": "x"}));
        let template = crate::ObjectTemplate::new(&object, &["captured_at"]).unwrap();
        let mut r = ToolResult::ok_text("r", "q", template.fill(42));
        let mut expected = object.clone();
        expected.insert("captured_at".into(), json!(42));
        assert_eq!(
            r.seal(),
            crate::object_hash(&expected).ok(),
            "a text that is not canonical takes the canonical digest"
        );
        let plain = ToolResult::ok("r", "q", expected);
        assert_eq!(
            r.to_json_text().unwrap(),
            serde_json::to_string(&plain).unwrap()
        );
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
            let mut only = text_only(&r);
            proptest::prop_assert_eq!(r.seal(), expected.clone());
            let raw = r.to_json_text().unwrap();
            proptest::prop_assert_eq!(&raw, &plain);
            proptest::prop_assert_eq!(only.seal(), expected);
            let raw = only.to_json_text().unwrap();
            proptest::prop_assert_eq!(&raw, &plain);
            only.materialize().unwrap();
            proptest::prop_assert_eq!(only, r);
        }
    }
}
