//! Typed access to a command's params object.
//!
//! The tool bridge validates params against the manifest schema before they reach a device,
//! but a device is also driven directly (tests, the CLI, other backends), so every accessor
//! still checks types and turns every problem into [`DeviceError::InvalidInput`] naming the
//! field. Absent and `null` are treated alike.

use serde_json::{Map, Value};

use crate::DeviceError;

/// The latest accepted time, 9999-12-31T23:59:59.999Z.
pub(crate) const MAX_TIME_MS: i64 = 253_402_300_799_999;

/// A borrowed params object.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Params<'a> {
    map: &'a Map<String, Value>,
}

static EMPTY: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);

impl<'a> Params<'a> {
    /// Wraps `value`, which must be an object (or null, treated as `{}`).
    pub(crate) fn new(value: &'a Value) -> Result<Self, DeviceError> {
        match value {
            Value::Object(map) => Ok(Self { map }),
            Value::Null => Ok(Self { map: &EMPTY }),
            _ => Err(DeviceError::invalid(
                "params",
                "params must be a JSON object",
            )),
        }
    }

    fn get(&self, field: &str) -> Option<&'a Value> {
        match self.map.get(field) {
            None | Some(Value::Null) => None,
            Some(value) => Some(value),
        }
    }

    /// A string exactly as given.
    pub(crate) fn str_opt(&self, field: &str) -> Result<Option<&'a str>, DeviceError> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(_) => Err(DeviceError::invalid(field, "expected a string")),
        }
    }

    /// A trimmed string; empty or whitespace-only counts as absent.
    pub(crate) fn ident_opt(&self, field: &str) -> Result<Option<&'a str>, DeviceError> {
        Ok(self
            .str_opt(field)?
            .map(str::trim)
            .filter(|s| !s.is_empty()))
    }

    /// A required trimmed, non-empty string.
    pub(crate) fn ident_req(&self, field: &str) -> Result<&'a str, DeviceError> {
        match self.str_opt(field)? {
            None => Err(DeviceError::invalid(field, "is required")),
            Some(s) if s.trim().is_empty() => Err(DeviceError::invalid(field, "must not be empty")),
            Some(s) => Ok(s.trim()),
        }
    }

    /// A required string with visible content, returned untrimmed (typed text, bodies).
    pub(crate) fn text_req(&self, field: &str) -> Result<&'a str, DeviceError> {
        match self.str_opt(field)? {
            None => Err(DeviceError::invalid(field, "is required")),
            Some(s) if s.trim().is_empty() => Err(DeviceError::invalid(field, "must not be empty")),
            Some(s) => Ok(s),
        }
    }

    /// An integer (a JSON number with no fractional part).
    pub(crate) fn i64_opt(&self, field: &str) -> Result<Option<i64>, DeviceError> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::Number(n)) => {
                if let Some(i) = n.as_i64() {
                    Ok(Some(i))
                } else if let Some(f) = n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                {
                    // Integral floats (`5.0`) are integers in JSON Schema too.
                    #[allow(clippy::cast_possible_truncation)]
                    Ok(Some(f as i64))
                } else {
                    Err(DeviceError::invalid(field, "expected an integer"))
                }
            }
            Some(_) => Err(DeviceError::invalid(field, "expected an integer")),
        }
    }

    /// A required integer.
    pub(crate) fn i64_req(&self, field: &str) -> Result<i64, DeviceError> {
        self.i64_opt(field)?
            .ok_or_else(|| DeviceError::invalid(field, "is required"))
    }

    /// A required finite number.
    pub(crate) fn f64_req(&self, field: &str) -> Result<f64, DeviceError> {
        match self.get(field) {
            None => Err(DeviceError::invalid(field, "is required")),
            Some(Value::Number(n)) => match n.as_f64() {
                Some(f) if f.is_finite() => Ok(f),
                _ => Err(DeviceError::invalid(field, "expected a finite number")),
            },
            Some(_) => Err(DeviceError::invalid(field, "expected a number")),
        }
    }

    /// A boolean.
    pub(crate) fn bool_opt(&self, field: &str) -> Result<Option<bool>, DeviceError> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(DeviceError::invalid(field, "expected a boolean")),
        }
    }

    /// A result-count limit: absent → `default`; below 1 → invalid; above `max` → `max`.
    pub(crate) fn limit(
        &self,
        field: &str,
        default: usize,
        max: usize,
    ) -> Result<usize, DeviceError> {
        match self.i64_opt(field)? {
            None => Ok(default),
            Some(n) if n < 1 => Err(DeviceError::invalid(field, "must be at least 1")),
            Some(n) => Ok(usize::try_from(n).unwrap_or(max).min(max)),
        }
    }

    /// A non-negative Unix-millisecond time where 0 (or absent) means "unbounded".
    pub(crate) fn time_bound(&self, field: &str) -> Result<Option<i64>, DeviceError> {
        match self.i64_opt(field)? {
            None | Some(0) => Ok(None),
            Some(n) if !(0..=MAX_TIME_MS).contains(&n) => Err(DeviceError::invalid(
                field,
                "must be Unix milliseconds (up to year 9999), or 0 for unbounded",
            )),
            Some(n) => Ok(Some(n)),
        }
    }
}
