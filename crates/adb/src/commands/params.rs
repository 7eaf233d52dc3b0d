//! Typed reads of a command's params: the bridge validated them against the manifest schema,
//! but a device is also driven directly, so every read still checks its type and answers
//! `invalid_input` naming the field.

use openphone_device::DeviceError;
use serde_json::{Map, Value};

/// A params object.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Params<'a> {
    map: Option<&'a Map<String, Value>>,
}

impl<'a> Params<'a> {
    pub(crate) fn new(value: &'a Value) -> Result<Self, DeviceError> {
        match value {
            Value::Object(map) => Ok(Self { map: Some(map) }),
            Value::Null => Ok(Self { map: None }),
            _ => Err(DeviceError::invalid(
                "params",
                "params must be a JSON object",
            )),
        }
    }

    fn get(&self, field: &str) -> Option<&'a Value> {
        self.map.and_then(|m| m.get(field)).filter(|v| !v.is_null())
    }

    /// A string as given.
    pub(crate) fn str_opt(&self, field: &str) -> Result<Option<&'a str>, DeviceError> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(_) => Err(DeviceError::invalid(field, "expected a string")),
        }
    }

    /// A trimmed, non-empty string (blank counts as absent).
    pub(crate) fn ident_opt(&self, field: &str) -> Result<Option<&'a str>, DeviceError> {
        Ok(self
            .str_opt(field)?
            .map(str::trim)
            .filter(|s| !s.is_empty()))
    }

    /// A required trimmed, non-empty string.
    pub(crate) fn ident_req(&self, field: &str) -> Result<&'a str, DeviceError> {
        self.ident_opt(field)?
            .ok_or_else(|| DeviceError::invalid(field, "is required"))
    }

    pub(crate) fn bool_opt(&self, field: &str) -> Result<Option<bool>, DeviceError> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(DeviceError::invalid(field, "expected true or false")),
        }
    }

    pub(crate) fn i64_opt(&self, field: &str) -> Result<Option<i64>, DeviceError> {
        match self.get(field) {
            None => Ok(None),
            Some(v) => v
                .as_i64()
                .or_else(|| v.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
                .map(Some)
                .ok_or_else(|| DeviceError::invalid(field, "expected an integer")),
        }
    }

    /// A required number (coordinates).
    pub(crate) fn f64_req(&self, field: &str) -> Result<f64, DeviceError> {
        self.get(field)
            .and_then(Value::as_f64)
            .filter(|f| f.is_finite())
            .ok_or_else(|| DeviceError::invalid(field, "is required and must be a number"))
    }

    /// A limit: default when absent, 1..=max.
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
}
