//! A JSON object already written to text ([`ObjectText`]), and a kept object's text with one
//! integer member left to fill per use ([`ObjectTemplate`]): what a device answers a cached
//! read with, so that the endpoint's answer embeds the text and the audit hashes it without an
//! object tree being built or the text being parsed again (issue 34).
//!
//! Both are valid JSON by construction: the text is serde_json's own (`to_string` of a `Map`,
//! or its writer member by member), and a template only ever has an integer put in its gap.
//! So no one checks the text again, and there is no constructor from arbitrary text.

use std::fmt::Write as _;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::limits::MAX_SAFE_INTEGER;
use crate::sealed::writes_canonically;

/// A JSON object's text, compact, members in the `Map`'s order (serde_json's `to_string`), with
/// whether that text is also its canonical JSON (every object's keys in order, every number an
/// integer within ±(2^53 − 1): then its digest is the hash of the text).
#[derive(Clone)]
pub struct ObjectText {
    text: Arc<str>,
    canonical: bool,
}

impl ObjectText {
    /// Writes `map`.
    pub fn write(map: &Map<String, Value>) -> serde_json::Result<ObjectText> {
        Ok(ObjectText {
            text: Arc::from(serde_json::to_string(map)?),
            canonical: writes_canonically(map),
        })
    }

    /// The JSON text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The JSON text, shared (a copy of the handle, not of the text).
    pub fn shared_text(&self) -> Arc<str> {
        Arc::clone(&self.text)
    }

    /// `sha256:<hex>` of the object's canonical JSON (`None` for `{}`, as for an empty result).
    pub(crate) fn digest(&self) -> Option<String> {
        if &*self.text == "{}" {
            return None;
        }
        if self.canonical {
            return Some(format!("sha256:{}", crate::digest::sha256_hex(&self.text)));
        }
        let map: Map<String, Value> = serde_json::from_str(&self.text).ok()?;
        crate::object_hash(&map).ok()
    }
}

impl std::fmt::Debug for ObjectText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectText")
            .field("text", &&*self.text)
            .field("canonical", &self.canonical)
            .finish()
    }
}

/// An object's text cut where one member's value goes (`captured_at`, `device.time`: the time of
/// each use of a kept answer), filled with an integer by [`ObjectTemplate::fill`].
#[derive(Debug, Clone)]
pub struct ObjectTemplate {
    /// Everything before the gap (the whole text when the object has no such member).
    head: String,
    /// Everything after it; `None` when the object has no such member.
    tail: Option<String>,
    /// Whether the text is canonical with any safe integer in the gap.
    canonical: bool,
}

impl ObjectTemplate {
    /// `map`'s text as [`ObjectText::write`] writes it, cut where the value of the member at
    /// `slot` goes (a path of member names from the top: `["device", "time"]`). Without that
    /// member, the whole text, which [`ObjectTemplate::fill`] gives back as it is.
    pub fn new(map: &Map<String, Value>, slot: &[&str]) -> serde_json::Result<ObjectTemplate> {
        let mut out = Vec::with_capacity(4096);
        let mut gap = None;
        write_object(&mut out, map, slot, &mut gap)?;
        let text = String::from_utf8(out).map_err(serde::ser::Error::custom)?;
        let (head, tail) = match gap {
            Some(at) => (text[..at].to_owned(), Some(text[at..].to_owned())),
            None => (text, None),
        };
        // The flag of the rest of the object: whatever integer the member holds now is
        // replaced by 0 (a safe integer) to judge the rest.
        let canonical = match member(map, slot) {
            Some(Value::Number(n)) if n.as_i64() == Some(0) => writes_canonically(map),
            Some(_) => {
                let mut rest = map.clone();
                if let Some(at) = member_mut(&mut rest, slot) {
                    *at = Value::from(0);
                }
                writes_canonically(&rest)
            }
            None => writes_canonically(map),
        };
        Ok(ObjectTemplate {
            head,
            tail,
            canonical,
        })
    }

    /// The object's text with `value` as the member's value (one allocation; `i64`'s decimal
    /// form is serde_json's form of the integer).
    pub fn fill(&self, value: i64) -> ObjectText {
        let Some(tail) = &self.tail else {
            return ObjectText {
                text: Arc::from(self.head.as_str()),
                canonical: self.canonical,
            };
        };
        let mut text = String::with_capacity(self.head.len() + tail.len() + 20);
        text.push_str(&self.head);
        let _ = write!(text, "{value}");
        text.push_str(tail);
        ObjectText {
            text: Arc::from(text),
            // An integer beyond ±(2^53 − 1) is written exactly but is not canonical JSON.
            canonical: self.canonical && value.unsigned_abs() <= MAX_SAFE_INTEGER as u64,
        }
    }
}

/// Writes `map` as serde_json's compact writer does (`{`, `"key":value` members joined by `,` in
/// the map's order, `}`), member by member so as to know where the slot's value goes: it is left
/// out and `gap` gets its offset. The slot is matched as a member at each level, never searched
/// for in the text (a string, or a nested object, may hold the same name).
fn write_object(
    out: &mut Vec<u8>,
    map: &Map<String, Value>,
    slot: &[&str],
    gap: &mut Option<usize>,
) -> serde_json::Result<()> {
    out.push(b'{');
    for (i, (key, value)) in map.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        // A key is escaped as a string value is.
        serde_json::to_writer(&mut *out, key)?;
        out.push(b':');
        match (slot.split_first(), value) {
            (Some((name, [])), _) if key == name => *gap = Some(out.len()),
            (Some((name, rest)), Value::Object(inner)) if key == name => {
                write_object(out, inner, rest, gap)?;
            }
            _ => serde_json::to_writer(&mut *out, value)?,
        }
    }
    out.push(b'}');
    Ok(())
}

fn member<'a>(map: &'a Map<String, Value>, slot: &[&str]) -> Option<&'a Value> {
    let (first, rest) = slot.split_first()?;
    rest.iter()
        .try_fold(map.get(*first)?, |at, key| at.get(key))
}

fn member_mut<'a>(map: &'a mut Map<String, Value>, slot: &[&str]) -> Option<&'a mut Value> {
    let (first, rest) = slot.split_first()?;
    rest.iter()
        .try_fold(map.get_mut(*first)?, |at, key| at.get_mut(key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!("an object"),
        }
    }

    /// The template's text for `now`, checked against the object written with `now` put in.
    fn filled(v: Value, slot: &[&str], now: i64) -> ObjectText {
        let map = object(v);
        let text = ObjectTemplate::new(&map, slot).unwrap().fill(now);
        let mut expected = map.clone();
        if let Some(at) = member_mut(&mut expected, slot) {
            *at = json!(now);
        }
        assert_eq!(text.text(), serde_json::to_string(&expected).unwrap());
        assert_eq!(
            text.canonical,
            writes_canonically(&expected),
            "{}",
            text.text()
        );
        text
    }

    #[test]
    fn the_gap_is_the_member_not_a_string_or_a_nested_key_of_the_same_name() {
        let v = json!({
            "a": "\"captured_at\":1", "b": {"captured_at": 5}, "captured_at": 7,
            "z": ["captured_at", {"captured_at": 2}]
        });
        let text = filled(v, &["captured_at"], 123);
        assert!(
            text.text().contains("},\"captured_at\":123,\"z\""),
            "{text:?}"
        );
    }

    #[test]
    fn a_nested_gap_a_missing_member_and_any_integer() {
        let v = json!({"device": {"time": 1, "t": "é\n\u{1}"}, "next": null});
        for now in [
            0,
            -1,
            1_780_000_000_000,
            (1 << 53) - 1,
            1 << 53,
            i64::MAX,
            i64::MIN,
        ] {
            filled(v.clone(), &["device", "time"], now);
            filled(v.clone(), &["captured_at"], now);
            filled(v.clone(), &["next", "time"], now);
        }
        // A member holding something else now (a float, a large integer): the rest decides.
        for held in [json!(0.5), json!(u64::MAX), json!("x")] {
            filled(json!({"captured_at": held, "f": 1}), &["captured_at"], 5);
            filled(json!({"captured_at": held, "f": 0.5}), &["captured_at"], 5);
        }
    }

    #[test]
    fn the_digest_is_the_canonical_object_hash() {
        for v in [
            json!({"a": 1, "b": [true, null]}),
            json!({"f": 0.5}),
            json!({}),
        ] {
            let map = object(v);
            let expected = if map.is_empty() {
                None
            } else {
                crate::object_hash(&map).ok()
            };
            assert_eq!(ObjectText::write(&map).unwrap().digest(), expected);
        }
    }
}
