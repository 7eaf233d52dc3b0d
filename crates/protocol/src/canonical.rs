//! Canonical JSON (`runtime-protocol.md` §17).
//!
//! The canonical form binds a decision to exact parameters: objects sorted by key (Unicode code
//! point order, at every depth), no insignificant whitespace, strings in UTF-8 without ASCII
//! escaping, and numbers written the way JavaScript's `JSON.stringify` writes the IEEE-754
//! double, so that a peer in any language computes the same bytes.
//!
//! Two entry points: [`parse_json_strict`] reads JSON text and refuses what the canonical form
//! cannot represent (duplicate keys, unpaired surrogate escapes); [`canonical_json`] writes a
//! value. [`check_params`] applies the extra rules for tool-request params (an object, nesting
//! depth, no integers beyond ±(2^53 − 1)).

use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use crate::limits::{MAX_SAFE_INTEGER, PARAMS_DEPTH};

/// Why a value has no canonical form (all map to `invalid_params` on the tool plane).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CanonicalError {
    /// The text is not JSON (this includes unpaired surrogate escapes).
    #[error("not valid JSON: {0}")]
    Syntax(String),
    /// An object holds the same key twice.
    #[error("duplicate key {key:?} in an object")]
    DuplicateKey { key: String },
    /// A number with an integral value beyond ±(2^53 − 1), which peers cannot hash identically.
    #[error("number at {path} is an integer beyond ±(2^53 − 1) and cannot be hashed portably")]
    UnsafeInteger { path: String },
    /// NaN or an infinity (cannot occur in parsed JSON, only in constructed values).
    #[error("number at {path} is not finite")]
    NonFinite { path: String },
    /// Tool-request params must be a JSON object.
    #[error("params must be a JSON object, got {found}")]
    NotAnObject { found: &'static str },
    /// Nesting deeper than the limit.
    #[error("params nest deeper than {limit} levels")]
    TooDeep { limit: usize },
}

/// Parses JSON text, rejecting duplicate object keys and unpaired surrogate escapes.
pub fn parse_json_strict(text: &str) -> Result<Value, CanonicalError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = StrictValue.deserialize(&mut de).map_err(|e| classify(&e))?;
    de.end().map_err(|e| classify(&e))?;
    Ok(value)
}

/// The [`CanonicalError`] behind a strict parse's error: a duplicate key, or a syntax error.
pub(crate) fn classify(e: &serde_json::Error) -> CanonicalError {
    let text = e.to_string();
    if let Some(rest) = text.strip_prefix(DUPLICATE_PREFIX) {
        let key = rest.split(DUPLICATE_SUFFIX).next().unwrap_or_default();
        return CanonicalError::DuplicateKey {
            key: key.to_owned(),
        };
    }
    CanonicalError::Syntax(text)
}

const DUPLICATE_PREFIX: &str = "duplicate key \u{1}";
const DUPLICATE_SUFFIX: &str = "\u{1}";

/// The error a strict parse fails with on a repeated `key` ([`classify`] reads it back).
pub(crate) fn duplicate_key_error<E: de::Error>(key: &str) -> E {
    E::custom(format!("{DUPLICATE_PREFIX}{key}{DUPLICATE_SUFFIX}"))
}

/// Builds a `serde_json::Value`, failing on a repeated key in any object.
pub(crate) struct StrictValue;

impl<'de> DeserializeSeed<'de> for StrictValue {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(StrictVisitor)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("number is not finite"))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(StrictValue)? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(duplicate_key_error(&key));
            }
            let value = map.next_value_seed(StrictValue)?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

/// Writes the canonical JSON text of a value.
///
/// Fails only for non-finite numbers (which parsed JSON cannot contain). Integer range is not
/// checked here; [`check_params`] does that for tool-request params.
pub fn canonical_json(value: &Value) -> Result<String, CanonicalError> {
    let mut out = String::new();
    write_value(value, &mut out, &mut Vec::new())?;
    Ok(out)
}

/// [`canonical_json`] of `Value::Object(map)`, without building that value.
pub fn canonical_json_object(map: &Map<String, Value>) -> Result<String, CanonicalError> {
    let mut out = String::new();
    write_object(map, &mut out, &mut Vec::new())?;
    Ok(out)
}

/// One step of the path to a value, kept as borrowed pieces and written out only for an
/// error (formatting a path string for every element showed in profiles).
#[derive(Clone, Copy)]
enum Step<'a> {
    Index(usize),
    Key(&'a str),
}

fn path_text(path: &[Step<'_>]) -> String {
    let mut text = String::from("$");
    for step in path {
        match step {
            Step::Index(i) => text.push_str(&format!("[{i}]")),
            Step::Key(k) => {
                text.push('.');
                text.push_str(k);
            }
        }
    }
    text
}

/// Appends text to a canonical-JSON sink (a `String`, or a hasher: `digest.rs`). Writing to
/// either cannot fail; a sink that could would lose nothing the digest relies on.
#[inline]
fn push_str(out: &mut impl fmt::Write, text: &str) {
    let _ = out.write_str(text);
}

#[inline]
fn push(out: &mut impl fmt::Write, c: char) {
    let _ = out.write_char(c);
}

/// Writes the canonical JSON text of `value` into any sink (the digests hash it as it is
/// written, without building the text).
pub fn write_canonical(value: &Value, out: &mut impl fmt::Write) -> Result<(), CanonicalError> {
    write_value(value, out, &mut Vec::new())
}

/// [`write_canonical`] of `Value::Object(map)`, without building that value.
pub fn write_canonical_object(
    map: &Map<String, Value>,
    out: &mut impl fmt::Write,
) -> Result<(), CanonicalError> {
    write_object(map, out, &mut Vec::new())
}

fn write_value<'a>(
    value: &'a Value,
    out: &mut impl fmt::Write,
    path: &mut Vec<Step<'a>>,
) -> Result<(), CanonicalError> {
    match value {
        Value::Null => push_str(out, "null"),
        Value::Bool(true) => push_str(out, "true"),
        Value::Bool(false) => push_str(out, "false"),
        Value::Number(n) => write_number(n, out, path)?,
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            push(out, '[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    push(out, ',');
                }
                path.push(Step::Index(i));
                write_value(item, out, path)?;
                path.pop();
            }
            push(out, ']');
        }
        Value::Object(map) => write_object(map, out, path)?,
    }
    Ok(())
}

fn write_object<'a>(
    map: &'a Map<String, Value>,
    out: &mut impl fmt::Write,
    path: &mut Vec<Step<'a>>,
) -> Result<(), CanonicalError> {
    push(out, '{');
    // `Map` is sorted unless serde_json's `preserve_order` feature is on (another crate in the
    // build may turn it on): walk it as it is when its keys are in order, else sort them.
    if map.keys().is_sorted() {
        for (i, (key, v)) in map.iter().enumerate() {
            write_member(i, key, v, out, path)?;
        }
    } else {
        let mut members: Vec<(&String, &Value)> = map.iter().collect();
        members.sort_unstable_by(|a, b| a.0.cmp(b.0));
        for (i, (key, v)) in members.into_iter().enumerate() {
            write_member(i, key, v, out, path)?;
        }
    }
    push(out, '}');
    Ok(())
}

fn write_member<'a>(
    i: usize,
    key: &'a str,
    value: &'a Value,
    out: &mut impl fmt::Write,
    path: &mut Vec<Step<'a>>,
) -> Result<(), CanonicalError> {
    if i > 0 {
        push(out, ',');
    }
    write_string(key, out);
    push(out, ':');
    path.push(Step::Key(key));
    write_value(value, out, path)?;
    path.pop();
    Ok(())
}

/// Writes `s` as a canonical JSON string (quoted, escaped).
pub(crate) fn write_string(s: &str, out: &mut impl fmt::Write) {
    push(out, '"');
    // Every character that needs escaping is ASCII, so runs between them are copied whole.
    let mut run = 0;
    for (i, byte) in s.bytes().enumerate() {
        let escaped = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x08 => "\\b",
            b'\t' => "\\t",
            b'\n' => "\\n",
            0x0c => "\\f",
            b'\r' => "\\r",
            0x00..=0x1f => "",
            _ => continue,
        };
        push_str(out, &s[run..i]);
        if escaped.is_empty() {
            let _ = write!(out, "\\u{:04x}", byte);
        } else {
            push_str(out, escaped);
        }
        run = i + 1;
    }
    push_str(out, &s[run..]);
    push(out, '"');
}

fn write_number(
    n: &Number,
    out: &mut impl fmt::Write,
    path: &[Step<'_>],
) -> Result<(), CanonicalError> {
    if let Some(i) = n.as_i64() {
        if i.unsigned_abs() <= MAX_SAFE_INTEGER as u64 {
            let _ = write!(out, "{i}");
            return Ok(());
        }
    } else if let Some(u) = n.as_u64()
        && u <= MAX_SAFE_INTEGER as u64
    {
        let _ = write!(out, "{u}");
        return Ok(());
    }
    // Everything else is written as JavaScript would write the double it denotes.
    let f = n.as_f64().ok_or_else(|| CanonicalError::NonFinite {
        path: path_text(path),
    })?;
    push_str(
        out,
        &format_js_number(f).ok_or_else(|| CanonicalError::NonFinite {
            path: path_text(path),
        })?,
    );
    Ok(())
}

/// Formats a double as ECMAScript's Number-to-String does (`JSON.stringify`); `None` for NaN
/// and infinities.
pub fn format_js_number(value: f64) -> Option<String> {
    if !value.is_finite() {
        return None;
    }
    if value == 0.0 {
        return Some("0".to_owned()); // also -0
    }
    // Rust's `{:e}` gives the shortest digit string that round-trips: "d[.ddd]e<exp>".
    let sci = format!("{:e}", value.abs());
    let (mantissa, exp) = sci.split_once('e')?;
    let exp: i32 = exp.parse().ok()?;
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let k = i32::try_from(digits.len()).ok()?;
    let n = exp + 1; // the value is 0.<digits> × 10^n
    let mut out = String::new();
    if value < 0.0 {
        out.push('-');
    }
    if k <= n && n <= 21 {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', (n - k) as usize));
    } else if 0 < n && n <= 21 {
        let (int, frac) = digits.split_at(n as usize);
        out.push_str(int);
        out.push('.');
        out.push_str(frac);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-n) as usize));
        out.push_str(&digits);
    } else {
        let (first, rest) = digits.split_at(1);
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        out.push('e');
        out.push(if n > 0 { '+' } else { '-' });
        out.push_str(&(n - 1).abs().to_string());
    }
    Some(out)
}

/// The extra rules for tool-request params: an object, nested at most [`PARAMS_DEPTH`] deep,
/// holding no number with an integral value beyond ±(2^53 − 1).
///
/// "Integer" follows JSON Schema: any number whose value is integral, so `1e300` counts too
/// (every double of that magnitude is integral).
pub fn check_params(params: &Value) -> Result<(), CanonicalError> {
    if !params.is_object() {
        return Err(CanonicalError::NotAnObject {
            found: json_type_name(params),
        });
    }
    check_depth_and_numbers(params, 1, &mut String::from("$"))
}

fn check_depth_and_numbers(
    value: &Value,
    depth: usize,
    path: &mut String,
) -> Result<(), CanonicalError> {
    match value {
        Value::Number(n) => {
            let unsafe_int = match (n.as_i64(), n.as_u64(), n.as_f64()) {
                (Some(i), _, _) => i.unsigned_abs() > MAX_SAFE_INTEGER as u64,
                (None, Some(u), _) => u > MAX_SAFE_INTEGER as u64,
                (None, None, Some(f)) => f.fract() == 0.0 && f.abs() > MAX_SAFE_INTEGER,
                (None, None, None) => false,
            };
            if unsafe_int {
                return Err(CanonicalError::UnsafeInteger { path: path.clone() });
            }
        }
        Value::Array(items) => {
            if depth > PARAMS_DEPTH {
                return Err(CanonicalError::TooDeep {
                    limit: PARAMS_DEPTH,
                });
            }
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                check_depth_and_numbers(item, depth + 1, path)?;
                path.truncate(len);
            }
        }
        Value::Object(map) => {
            if depth > PARAMS_DEPTH {
                return Err(CanonicalError::TooDeep {
                    limit: PARAMS_DEPTH,
                });
            }
            for (key, item) in map {
                let len = path.len();
                path.push('.');
                path.push_str(key);
                check_depth_and_numbers(item, depth + 1, path)?;
                path.truncate(len);
            }
        }
        Value::Null | Value::Bool(_) | Value::String(_) => {}
    }
    Ok(())
}

/// The JSON type name of a value, for messages.
pub fn json_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
