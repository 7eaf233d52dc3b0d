//! The `[builtin]` table of the daemon's configuration: which model the built-in runtime
//! talks to, and the bounds of one run.

use std::path::PathBuf;
use std::time::Duration;

use openphone_model::{ApiKey, ModelConfig};
use serde::{Deserialize, Serialize};

/// The `[builtin]` table. Every key but `base_url` and `model` has a default; an unknown key
/// is an error naming it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuiltinConfig {
    /// The API root of an OpenAI-compatible server, e.g. `http://127.0.0.1:11434/v1`.
    pub base_url: String,
    /// The model name sent with every request, e.g. `llama3.2`.
    pub model: String,
    /// The environment variable holding the API key (for hosted providers).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Or a file holding it (trimmed; its contents are never logged).
    #[serde(default)]
    pub api_key_file: Option<PathBuf>,
    /// The model reads images: screenshots go to it as image parts. Default false (screenshot
    /// bytes are left out of tool results).
    #[serde(default)]
    pub vision: bool,
    /// Ask for streamed answers. Default true.
    #[serde(default = "default_stream")]
    pub stream: bool,
    /// Model calls per run (a run is the work on one user message). Default 16.
    #[serde(default = "default_max_turns")]
    pub max_turns: u32,
    /// Tool calls per run. Default 32.
    #[serde(default = "default_max_tool_calls")]
    pub max_tool_calls: u32,
    /// Wall-clock budget of one run in seconds, not counting the time spent waiting for the
    /// user's decision on a confirmation. Default 300.
    #[serde(default = "default_run_budget_secs")]
    pub run_budget_secs: u64,
    /// The answer's token cap per model call. Default 1024.
    #[serde(default = "default_max_tokens")]
    pub max_tokens: u32,
    /// How long one model call may go without receiving anything, in seconds. Default 120.
    #[serde(default = "default_request_timeout_secs")]
    pub request_timeout_secs: u64,
    /// How long a confirmation the loop asks for waits for the user, in seconds (at most
    /// 600). Default 120.
    #[serde(default = "default_confirmation_timeout_secs")]
    pub confirmation_timeout_secs: u64,
    /// The most characters of earlier conversation sent to the model with each call (the
    /// system prompt and the tool list not counted). Over it, the bodies of the oldest tool
    /// results are left out first, then the oldest exchanges. Default 120000.
    #[serde(default = "default_max_history_chars")]
    pub max_history_chars: u32,
    /// Model calls per background job run (`agent_turn` on the built-in loop, see
    /// `docs/core.md`, Background runs). Default 16 (`agent-jobs.md` §7.1).
    #[serde(default = "default_max_turns")]
    pub background_max_turns: u32,
    /// A second model for background jobs: their runs use it instead of the table's own
    /// model (the interactive loop never does).
    #[serde(default)]
    pub background_model: Option<ModelEndpoint>,
}

/// Another model endpoint: `[builtin.background_model]`. Unset keys take the values of the
/// `[builtin]` table's defaults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelEndpoint {
    /// The API root.
    pub base_url: String,
    /// The model name.
    pub model: String,
    /// The environment variable holding the API key.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Or a file holding it.
    #[serde(default)]
    pub api_key_file: Option<PathBuf>,
    /// The model reads images.
    #[serde(default)]
    pub vision: bool,
    /// Ask for streamed answers. Default true.
    #[serde(default = "default_stream")]
    pub stream: bool,
    /// The answer's token cap per call. Default 1024.
    #[serde(default = "default_max_tokens")]
    pub max_tokens: u32,
    /// How long one call may go without receiving anything, in seconds. Default 120.
    #[serde(default = "default_request_timeout_secs")]
    pub request_timeout_secs: u64,
}

fn default_stream() -> bool {
    true
}
fn default_max_turns() -> u32 {
    16
}
fn default_max_tool_calls() -> u32 {
    32
}
fn default_run_budget_secs() -> u64 {
    300
}
fn default_max_tokens() -> u32 {
    1024
}
fn default_request_timeout_secs() -> u64 {
    120
}
fn default_confirmation_timeout_secs() -> u64 {
    120
}
fn default_max_history_chars() -> u32 {
    120_000
}

/// The longest confirmation wait the bridge accepts, in seconds.
const MAX_CONFIRMATION_TIMEOUT_SECS: u64 = 600;

/// A `[builtin]` table that cannot be used, with the key at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("[builtin]: {0}")]
pub struct BuiltinConfigError(pub String);

fn problem(message: impl Into<String>) -> BuiltinConfigError {
    BuiltinConfigError(message.into())
}

impl BuiltinConfig {
    /// A table for `base_url` and `model` with every other key at its default.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> BuiltinConfig {
        BuiltinConfig {
            base_url: base_url.into(),
            model: model.into(),
            api_key_env: None,
            api_key_file: None,
            vision: false,
            stream: default_stream(),
            max_turns: default_max_turns(),
            max_tool_calls: default_max_tool_calls(),
            run_budget_secs: default_run_budget_secs(),
            max_tokens: default_max_tokens(),
            request_timeout_secs: default_request_timeout_secs(),
            confirmation_timeout_secs: default_confirmation_timeout_secs(),
            max_history_chars: default_max_history_chars(),
            background_max_turns: default_max_turns(),
            background_model: None,
        }
    }

    /// Checks what can be checked without the environment: `base_url` and `model` set, every
    /// limit above zero, at most one key source, the confirmation wait within 600 s.
    pub fn check(&self) -> Result<(), BuiltinConfigError> {
        check_endpoint(
            "",
            &self.base_url,
            &self.model,
            self.api_key_env.as_deref(),
            self.api_key_file.as_ref(),
        )?;
        let limits = [
            ("max_turns", u64::from(self.max_turns)),
            ("max_tool_calls", u64::from(self.max_tool_calls)),
            ("run_budget_secs", self.run_budget_secs),
            ("max_tokens", u64::from(self.max_tokens)),
            ("request_timeout_secs", self.request_timeout_secs),
            ("confirmation_timeout_secs", self.confirmation_timeout_secs),
            ("max_history_chars", u64::from(self.max_history_chars)),
            ("background_max_turns", u64::from(self.background_max_turns)),
        ];
        if let Some((key, _)) = limits.iter().find(|(_, value)| *value == 0) {
            return Err(problem(format!("{key} must be above zero")));
        }
        if self.confirmation_timeout_secs > MAX_CONFIRMATION_TIMEOUT_SECS {
            return Err(problem(format!(
                "confirmation_timeout_secs is at most {MAX_CONFIRMATION_TIMEOUT_SECS}"
            )));
        }
        if let Some(background) = &self.background_model {
            background.check()?;
        }
        Ok(())
    }

    /// The model client's configuration, the API key read from `api_key_env` or
    /// `api_key_file` now. Retries keep the client's defaults.
    pub fn model_config(&self) -> Result<ModelConfig, BuiltinConfigError> {
        self.check()?;
        Ok(ModelConfig {
            base_url: self.base_url.trim().to_owned(),
            model: self.model.trim().to_owned(),
            api_key: read_key("", self.api_key_env.as_deref(), self.api_key_file.as_ref())?,
            vision: self.vision,
            stream: self.stream,
            request_timeout: Duration::from_secs(self.request_timeout_secs),
            max_tokens: Some(self.max_tokens),
            ..ModelConfig::default()
        })
    }

    /// The model client's configuration for background job runs: the
    /// `[builtin.background_model]` endpoint when it is set, else the table's own model. The
    /// API key is read now.
    pub fn background_model_config(&self) -> Result<ModelConfig, BuiltinConfigError> {
        self.check()?;
        match &self.background_model {
            Some(endpoint) => endpoint.model_config(),
            None => self.model_config(),
        }
    }

    /// The run's wall-clock budget.
    pub fn run_budget(&self) -> Duration {
        Duration::from_secs(self.run_budget_secs)
    }
}

impl ModelEndpoint {
    /// The same checks as [`BuiltinConfig::check`] for this endpoint.
    pub fn check(&self) -> Result<(), BuiltinConfigError> {
        check_endpoint(
            "background_model.",
            &self.base_url,
            &self.model,
            self.api_key_env.as_deref(),
            self.api_key_file.as_ref(),
        )?;
        if self.max_tokens == 0 || self.request_timeout_secs == 0 {
            return Err(problem(
                "background_model: max_tokens and request_timeout_secs must be above zero",
            ));
        }
        Ok(())
    }

    /// The model client's configuration, the API key read now.
    pub fn model_config(&self) -> Result<ModelConfig, BuiltinConfigError> {
        self.check()?;
        Ok(ModelConfig {
            base_url: self.base_url.trim().to_owned(),
            model: self.model.trim().to_owned(),
            api_key: read_key(
                "background_model.",
                self.api_key_env.as_deref(),
                self.api_key_file.as_ref(),
            )?,
            vision: self.vision,
            stream: self.stream,
            request_timeout: Duration::from_secs(self.request_timeout_secs),
            max_tokens: Some(self.max_tokens),
            ..ModelConfig::default()
        })
    }
}

fn check_endpoint(
    prefix: &str,
    base_url: &str,
    model: &str,
    key_env: Option<&str>,
    key_file: Option<&PathBuf>,
) -> Result<(), BuiltinConfigError> {
    if base_url.trim().is_empty() {
        return Err(problem(format!(
            "{prefix}base_url is empty: set the API root of an OpenAI-compatible server, e.g. \
             http://127.0.0.1:11434/v1"
        )));
    }
    if model.trim().is_empty() {
        return Err(problem(format!(
            "{prefix}model is empty: set the model name, e.g. llama3.2"
        )));
    }
    if key_env.is_some() && key_file.is_some() {
        return Err(problem(format!(
            "set one of {prefix}api_key_env and {prefix}api_key_file, not both"
        )));
    }
    if key_env.is_some_and(|name| name.trim().is_empty()) {
        return Err(problem(format!("{prefix}api_key_env is empty")));
    }
    Ok(())
}

/// The key from the environment variable or the file; `None` without either. The key itself
/// never appears in an error.
fn read_key(
    prefix: &str,
    key_env: Option<&str>,
    key_file: Option<&PathBuf>,
) -> Result<Option<ApiKey>, BuiltinConfigError> {
    let key = match (key_env, key_file) {
        (Some(name), _) => {
            let name = name.trim();
            match std::env::var(name) {
                Ok(value) if !value.trim().is_empty() => value.trim().to_owned(),
                Ok(_) => {
                    return Err(problem(format!(
                        "{prefix}api_key_env: the environment variable {name} is empty"
                    )));
                }
                Err(std::env::VarError::NotPresent) => {
                    return Err(problem(format!(
                        "{prefix}api_key_env: the environment variable {name} is not set in the \
                         daemon's environment"
                    )));
                }
                Err(std::env::VarError::NotUnicode(_)) => {
                    return Err(problem(format!(
                        "{prefix}api_key_env: the environment variable {name} is not valid UTF-8"
                    )));
                }
            }
        }
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                problem(format!(
                    "{prefix}api_key_file: cannot read {}: {e}",
                    path.display()
                ))
            })?;
            let key = text.trim();
            if key.is_empty() {
                return Err(problem(format!(
                    "{prefix}api_key_file: {} is empty",
                    path.display()
                )));
            }
            if key.chars().any(char::is_whitespace) {
                return Err(problem(format!(
                    "{prefix}api_key_file: {} holds more than one word; it must hold the key only",
                    path.display()
                )));
            }
            key.to_owned()
        }
        (None, None) => return Ok(None),
    };
    Ok(Some(ApiKey::new(key)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn defaults_and_unknown_keys() {
        let config: BuiltinConfig =
            toml_like(r#"{"base_url": "http://127.0.0.1:11434/v1", "model": "llama3.2"}"#);
        assert_eq!(
            config,
            BuiltinConfig::new("http://127.0.0.1:11434/v1", "llama3.2")
        );
        assert_eq!(
            (
                config.max_turns,
                config.max_tool_calls,
                config.run_budget_secs
            ),
            (16, 32, 300)
        );
        assert_eq!(
            (config.max_tokens, config.request_timeout_secs),
            (1024, 120)
        );
        assert!(config.stream && !config.vision);
        assert_eq!(config.background_max_turns, 16);
        let error = serde_json::from_str::<BuiltinConfig>(
            r#"{"base_url": "http://h/v1", "model": "m", "max_turn": 3}"#,
        )
        .unwrap_err();
        assert!(error.to_string().contains("max_turn"), "{error}");
        let background: BuiltinConfig = toml_like(
            r#"{"base_url": "http://h/v1", "model": "m",
                "background_model": {"base_url": "http://g/v1", "model": "small"}}"#,
        );
        let model = background.background_model_config().unwrap();
        assert_eq!(
            (model.base_url.as_str(), model.model.as_str()),
            ("http://g/v1", "small")
        );
        // Without a background model, jobs use the table's own.
        let model = config.background_model_config().unwrap();
        assert_eq!(model.model, "llama3.2");
    }

    fn toml_like(json: &str) -> BuiltinConfig {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn checks_name_the_key() {
        let ok = BuiltinConfig::new("http://h/v1", "m");
        let cases = [
            (
                BuiltinConfig {
                    base_url: " ".into(),
                    ..ok.clone()
                },
                "base_url",
            ),
            (
                BuiltinConfig {
                    model: String::new(),
                    ..ok.clone()
                },
                "model",
            ),
            (
                BuiltinConfig {
                    max_turns: 0,
                    ..ok.clone()
                },
                "max_turns",
            ),
            (
                BuiltinConfig {
                    run_budget_secs: 0,
                    ..ok.clone()
                },
                "run_budget_secs",
            ),
            (
                BuiltinConfig {
                    background_max_turns: 0,
                    ..ok.clone()
                },
                "background_max_turns",
            ),
            (
                BuiltinConfig {
                    confirmation_timeout_secs: 601,
                    ..ok.clone()
                },
                "confirmation_timeout_secs",
            ),
            (
                BuiltinConfig {
                    api_key_env: Some("A".into()),
                    api_key_file: Some("k".into()),
                    ..ok.clone()
                },
                "not both",
            ),
        ];
        for (config, needle) in cases {
            let error = config.check().unwrap_err().to_string();
            assert!(
                error.starts_with("[builtin]: ") && error.contains(needle),
                "{error}"
            );
        }
        ok.check().unwrap();
    }

    #[test]
    fn keys_come_from_a_file_or_the_environment_and_never_show() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        std::fs::write(&path, "sk-file-secret\n").unwrap();
        let config = BuiltinConfig {
            api_key_file: Some(path.clone()),
            ..BuiltinConfig::new("http://h/v1", "m")
        };
        let model = config.model_config().unwrap();
        assert_eq!(model.api_key, Some(ApiKey::new("sk-file-secret")));
        assert_eq!(model.max_tokens, Some(1024));

        std::fs::write(&path, "two words").unwrap();
        let error = config.model_config().unwrap_err().to_string();
        assert!(error.contains("more than one word"), "{error}");
        assert!(!error.contains("two words"), "{error}");

        let missing = BuiltinConfig {
            api_key_env: Some("OPENPHONE_AGENT_TEST_SURELY_UNSET".into()),
            ..BuiltinConfig::new("http://h/v1", "m")
        };
        let error = missing.model_config().unwrap_err().to_string();
        assert!(error.contains("is not set"), "{error}");
        let none = BuiltinConfig::new("http://h/v1", "m")
            .model_config()
            .unwrap();
        assert_eq!(none.api_key, None);
    }
}
