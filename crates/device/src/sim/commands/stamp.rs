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

    /// The template itself is `openphone_protocol::ObjectTemplate`'s (tested there); here, that a
    /// kept answer's text is its stamped value's, at the top and nested.
    #[test]
    fn a_kept_answers_text_is_its_stamped_value_written() {
        let value = json!({"device": {"time": 1, "t": "é\n\u{1}"}, "captured_at": 7});
        for now in [0, -1, 1_780_000_000_000, i64::MAX] {
            text(value.clone(), &["device", "time"], now);
            text(value.clone(), &["captured_at"], now);
            text(value.clone(), &["next", "time"], now);
        }
    }

    #[test]
    fn a_value_that_is_not_an_object_has_no_text() {
        assert!(Kept::new(json!([1]), &["x"]).stamped_text(1).is_none());
    }
}
