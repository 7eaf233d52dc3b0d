//! A kept read answer (a cached `screen.get`, a cached plain `device.status`) and the one
//! member every call fills with its own time (`captured_at`, `device.time`): handed out as a
//! value ([`Kept::stamped`], a copy of the tree) or as JSON text ([`Kept::stamped_text`],
//! the answer's text written once around that member, with the call's time put in).

use std::fmt::Write as _;
use std::sync::OnceLock;

use openphone_protocol::ObjectText;
use serde_json::{Map, Value, json};

/// The largest integer every JSON reader keeps exactly (2^53 − 1).
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// An answer kept by a cache, with where its per-call time goes.
#[derive(Debug)]
pub(crate) struct Kept {
    value: Value,
    /// The member the time goes in, by name from the top (`["device", "time"]`). An answer
    /// without it is handed out as it is.
    slot: &'static [&'static str],
    /// The answer's text around the slot, written at the first text read (a caller that
    /// only reads values never pays for it); `None` if the answer is not an object.
    template: OnceLock<Option<Template>>,
}

/// An answer's JSON text, as `serde_json::to_string` writes it, cut where the slot's value is.
#[derive(Debug)]
struct Template {
    /// Everything before the slot's value (the whole text when there is no slot).
    head: String,
    /// Everything after it; `None` when the answer has no slot.
    tail: Option<String>,
    /// Whether the text is canonical whatever safe integer fills the slot.
    canonical: bool,
}

impl Kept {
    /// `value` kept, its time in the member at `slot`.
    pub(crate) fn new(value: Value, slot: &'static [&'static str]) -> Kept {
        Kept {
            value,
            slot,
            template: OnceLock::new(),
        }
    }

    /// A copy of the answer with `now` in its slot.
    pub(crate) fn stamped(&self, now: i64) -> Value {
        let mut answer = self.value.clone();
        if let Some(at) = member_mut(&mut answer, self.slot) {
            *at = json!(now);
        }
        answer
    }

    /// The text of [`Kept::stamped`]`(now)` without building it: the kept text with `now`
    /// written in its slot (one allocation, and `from_written`'s parse). `None` only if the
    /// answer is not an object (the caller answers [`Kept::stamped`] then).
    pub(crate) fn stamped_text(&self, now: i64) -> Option<ObjectText> {
        let template = self
            .template
            .get_or_init(|| Template::write(&self.value, self.slot))
            .as_ref()?;
        let Some(tail) = &template.tail else {
            return ObjectText::from_written(template.head.clone(), template.canonical).ok();
        };
        let mut text = String::with_capacity(template.head.len() + tail.len() + 20);
        text.push_str(&template.head);
        // `i64`'s decimal form is serde_json's (itoa) form of the integer.
        let _ = write!(text, "{now}");
        text.push_str(tail);
        // A clock's ms is a safe integer (until the year 287396), which leaves the flag as
        // the rest of the answer has it; one beyond is written exactly but is not canonical.
        let canonical = template.canonical && now.unsigned_abs() <= MAX_SAFE_INTEGER;
        ObjectText::from_written(text, canonical).ok()
    }
}

impl Template {
    fn write(value: &Value, slot: &[&str]) -> Option<Template> {
        let Value::Object(map) = value else {
            return None;
        };
        let mut out = Vec::with_capacity(16 * 1024);
        let mut split = None;
        write_object(&mut out, map, slot, &mut split).ok()?;
        let tail = match split {
            Some(at) => Some(String::from_utf8(out.split_off(at)).ok()?),
            None => None,
        };
        let head = String::from_utf8(out).ok()?;
        // The flag of the rest of the answer: the kept time is a safe integer in practice
        // (then the answer's own flag is it); a kept time beyond is replaced by one that is.
        let canonical = match member(value, slot) {
            Some(at)
                if at
                    .as_i64()
                    .is_none_or(|t| t.unsigned_abs() > MAX_SAFE_INTEGER) =>
            {
                let mut safe = value.clone();
                if let Some(at) = member_mut(&mut safe, slot) {
                    *at = json!(0);
                }
                safe.as_object().is_some_and(ObjectText::writes_canonically)
            }
            Some(_) | None => ObjectText::writes_canonically(map),
        };
        Some(Template {
            head,
            tail,
            canonical,
        })
    }
}

/// Writes `map` as serde_json's compact writer does (`{`, members as `"key":value` joined by
/// `,` in the map's order, `}`), member by member so as to know where the slot's value goes:
/// it is left out, and `split` gets its offset. The key is matched as a member at each level,
/// never searched for in the text (a string or a nested object may hold the same name).
fn write_object(
    out: &mut Vec<u8>,
    map: &Map<String, Value>,
    slot: &[&str],
    split: &mut Option<usize>,
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
            (Some((name, [])), _) if key == name => *split = Some(out.len()),
            (Some((name, rest)), Value::Object(inner)) if key == name => {
                write_object(out, inner, rest, split)?;
            }
            _ => serde_json::to_writer(&mut *out, value)?,
        }
    }
    out.push(b'}');
    Ok(())
}

fn member<'a>(value: &'a Value, slot: &[&str]) -> Option<&'a Value> {
    slot.iter().try_fold(value, |at, key| at.get(key))
}

fn member_mut<'a>(value: &'a mut Value, slot: &[&str]) -> Option<&'a mut Value> {
    slot.iter().try_fold(value, |at, key| at.get_mut(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(value: Value, slot: &'static [&'static str], now: i64) -> String {
        let kept = Kept::new(value, slot);
        let text = kept.stamped_text(now).unwrap();
        let expected = serde_json::to_string(&kept.stamped(now)).unwrap();
        assert_eq!(text.text(), expected);
        expected
    }

    #[test]
    fn the_slot_is_the_member_not_a_string_or_a_nested_key_of_the_same_name() {
        let value = json!({
            "a": "\"captured_at\":1", "b": {"captured_at": 5}, "captured_at": 7,
            "z": ["captured_at", {"captured_at": 2}]
        });
        let written = text(value, &["captured_at"], 123);
        assert!(written.contains("},\"captured_at\":123,\"z\""), "{written}");
    }

    #[test]
    fn a_nested_slot_a_missing_slot_and_odd_times() {
        let value = json!({"device": {"time": 1, "t": "é\n\u{1}"}, "next": null});
        for now in [0, -1, 1_780_000_000_000, i64::MAX, i64::MIN] {
            text(value.clone(), &["device", "time"], now);
            text(value.clone(), &["captured_at"], now);
            text(value.clone(), &["next", "time"], now);
        }
        // A kept time that is not a safe integer: the flag is still the rest's.
        let big = json!({"captured_at": i64::MAX, "f": 1});
        let kept = Kept::new(big, &["captured_at"]);
        assert_eq!(
            kept.stamped_text(5).unwrap().text(),
            "{\"captured_at\":5,\"f\":1}"
        );
    }

    #[test]
    fn a_value_that_is_not_an_object_has_no_text() {
        assert!(Kept::new(json!([1]), &["x"]).stamped_text(1).is_none());
    }
}
