//! Runtime identifiers (`runtime-protocol.md` §2.1): the fixed ids, one constant each, and the
//! normalisation of a configured or requested id.

/// The id of the daemon's own runtime (the built-in agent, goal runner, jobs, watchers and
/// background reviews). The one spelling of `"builtin"`: every other crate uses this constant.
pub const BUILTIN_RUNTIME_ID: &str = "builtin";

/// Why a runtime id was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuntimeIdError {
    #[error("runtime id is empty")]
    Empty,
    #[error("\"auto\" selects a runtime; it is not a runtime identity")]
    Auto,
    #[error("runtime id {0:?} must be 1–64 characters from [a-z0-9_.-]")]
    Invalid(String),
}

/// Normalises a runtime id: trim, lower-case, then map the built-in aliases (`phone`, `local`,
/// `local_phone_runtime` → `builtin`). Refuses empty ids, `auto` and ids outside
/// `[a-z0-9_.-]{1,64}`; the error names the id.
pub fn normalize_runtime_id(raw: &str) -> Result<String, RuntimeIdError> {
    let id = raw.trim().to_lowercase();
    let id = match id.as_str() {
        "" => return Err(RuntimeIdError::Empty),
        "auto" => return Err(RuntimeIdError::Auto),
        "phone" | "local" | "local_phone_runtime" => BUILTIN_RUNTIME_ID.to_owned(),
        _ => id,
    };
    let valid = id.len() <= 64
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '.' | '-'));
    if valid {
        Ok(id)
    } else {
        Err(RuntimeIdError::Invalid(raw.trim().to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_case_and_whitespace_normalise() {
        assert_eq!(normalize_runtime_id(" Phone ").unwrap(), "builtin");
        assert_eq!(
            normalize_runtime_id("LOCAL_PHONE_RUNTIME").unwrap(),
            "builtin"
        );
        assert_eq!(normalize_runtime_id("Hermes").unwrap(), "hermes");
        assert_eq!(
            normalize_runtime_id("my-agent.v2_x").unwrap(),
            "my-agent.v2_x"
        );
    }

    #[test]
    fn bad_ids_are_refused_naming_the_id() {
        assert_eq!(normalize_runtime_id("  "), Err(RuntimeIdError::Empty));
        assert_eq!(normalize_runtime_id("auto"), Err(RuntimeIdError::Auto));
        let e = normalize_runtime_id("my agent").unwrap_err();
        assert!(e.to_string().contains("my agent"));
        assert!(normalize_runtime_id(&"a".repeat(65)).is_err());
        assert!(normalize_runtime_id("agent/1").is_err());
    }
}
