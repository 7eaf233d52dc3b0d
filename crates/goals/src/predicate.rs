//! The JSON predicate of `expect` and `tool_predicate` checks: a JSON pointer into a read
//! command's result and a test of the value found there.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A test of one value in a result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Predicate {
    /// A JSON pointer (`/events/0/start_at`); empty: the whole result.
    #[serde(default)]
    pub pointer: String,
    /// The test.
    pub op: PredicateOp,
    /// The operand of `equals` and `contains`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
}

/// What a predicate tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PredicateOp {
    /// Something is at the pointer.
    Exists,
    /// The value equals `value`.
    Equals,
    /// A string containing `value` (a string), or an array with an element equal to
    /// `value`, or an array with an element containing it anywhere (an object whose members
    /// include every member of `value`).
    Contains,
    /// A non-empty array, object or string.
    NotEmpty,
}

impl Predicate {
    /// Whether `result` satisfies the predicate, and what was found (for evidence and
    /// explanations).
    pub fn check(&self, result: &Value) -> (bool, String) {
        let found = result.pointer(&self.pointer);
        let holds = match (self.op, found) {
            (_, None) => false,
            (PredicateOp::Exists, Some(_)) => true,
            (PredicateOp::Equals, Some(v)) => self.value.as_ref() == Some(v),
            (PredicateOp::Contains, Some(v)) => self.value.as_ref().is_some_and(|w| contains(v, w)),
            (PredicateOp::NotEmpty, Some(v)) => match v {
                Value::Array(a) => !a.is_empty(),
                Value::Object(o) => !o.is_empty(),
                Value::String(s) => !s.is_empty(),
                Value::Null => false,
                Value::Bool(_) | Value::Number(_) => true,
            },
        };
        let shown = match found {
            None => format!("nothing at {:?}", self.pointer),
            Some(v) => {
                let text = v.to_string();
                let cut: String = text.chars().take(120).collect();
                format!("{:?} = {cut}", self.pointer)
            }
        };
        (holds, shown)
    }
}

/// `haystack` contains `needle` (see [`PredicateOp::Contains`]).
fn contains(haystack: &Value, needle: &Value) -> bool {
    match (haystack, needle) {
        (Value::String(h), Value::String(n)) => h.contains(n.as_str()),
        (Value::Array(items), n) => items.iter().any(|i| i == n || subset(n, i)),
        (h, n) => subset(n, h),
    }
}

/// Every member of the object `part` is in the object `whole` with an equal value.
fn subset(part: &Value, whole: &Value) -> bool {
    match (part, whole) {
        (Value::Object(p), Value::Object(w)) => {
            p.iter().all(|(k, v)| w.get(k).is_some_and(|x| x == v))
        }
        _ => false,
    }
}
