//! A kept read answer (a cached `screen.get`, a cached plain `device.status`) and the one
//! member every call fills with its own time (`captured_at`, `device.time`): handed out as a
//! value ([`Kept::stamped`], a copy of the tree) or as JSON text ([`Kept::stamped_text`],
//! the answer's text written once around that member, with the call's time put in).

use std::sync::OnceLock;

use openphone_protocol::{ObjectTemplate, ObjectText};
use serde_json::{Value, json};

/// An answer kept by a cache, with where its per-call time goes.
#[derive(Debug)]
pub(crate) struct Kept {
    value: Value,
    /// The member the time goes in, by name from the top (`["device", "time"]`). An answer
    /// without it is handed out as it is.
    slot: &'static [&'static str],
    /// The answer's text around the slot, written at the first text read (a caller that
    /// only reads values never pays for it); `None` if the answer is not an object.
    template: OnceLock<Option<ObjectTemplate>>,
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
    /// written in its slot (one allocation). `None` only if the answer is not an object (the
    /// caller answers [`Kept::stamped`] then).
    pub(crate) fn stamped_text(&self, now: i64) -> Option<ObjectText> {
        let template = self
            .template
            .get_or_init(|| match &self.value {
                Value::Object(map) => ObjectTemplate::new(map, self.slot).ok(),
                _ => None,
            })
            .as_ref()?;
        Some(template.fill(now))
    }
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
