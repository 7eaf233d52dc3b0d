//! `openphone config path|check`: which configuration file the daemon commands use and why
//! (`--config`, `OPENPHONE_CONFIG`, the default location, or none), and whether it is valid —
//! the checks `serve` makes at start, the file and line of a problem, and the effective values
//! with secrets masked.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;
use openphone_server::{Config, ConfigLocation, ConfigSource};
use serde_json::{Value, json};

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print which configuration file `serve` (and `mcp serve --autostart`) would read, and
    /// why: `--config`, `OPENPHONE_CONFIG`, the default location
    /// ($XDG_CONFIG_HOME/openphone/config.toml, else ~/.config/openphone/config.toml), or none.
    Path {
        /// The file `--config` would name (as `serve --config`).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Check the configuration file as `serve` does at start, then print the effective
    /// configuration with secrets masked. Exits 1 naming the file (and line) of a problem.
    Check {
        /// The file to check (default: what `openphone config path` names).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cmd: ConfigCommand) -> Result<ExitCode> {
    match cmd {
        ConfigCommand::Path { config, json } => path(config.as_deref(), json),
        ConfigCommand::Check { config, json } => check(config.as_deref(), json),
    }
}

fn location_json(location: &ConfigLocation) -> Value {
    json!({
        "path": location.path,
        "source": location.source.as_str(),
        "reason": location.source.reason(),
        "exists": location.path.as_ref().map(|p| p.exists()),
        "default_path": location.default_path,
    })
}

fn path(flag: Option<&Path>, json: bool) -> Result<ExitCode> {
    let location = ConfigLocation::resolve(flag);
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&location_json(&location))?
        );
        return Ok(ExitCode::SUCCESS);
    }
    match &location.path {
        Some(path) => {
            println!("{}", path.display());
            let missing = if path.exists() {
                ""
            } else {
                "; it does not exist"
            };
            println!("  ({}{missing})", location.source.reason());
        }
        None => {
            println!("none");
            println!("  ({})", location.describe());
        }
    }
    if location.source != ConfigSource::Default
        && let Some(default) = &location.default_path
    {
        println!("  default location: {}", default.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs every check `serve` makes on a config before it starts anything.
pub fn validate(location: &ConfigLocation) -> Result<Config, String> {
    let config = location.load().map_err(|e| e.to_string())?;
    let file = location
        .path
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "the defaults".into());
    let name = |e: openphone_server::ConfigError| format!("{file}: {e}");
    config.check_mcp().map_err(name)?;
    config.check_store().map_err(name)?;
    config.check_endpoint().map_err(name)?;
    config.runtimes_config().map_err(name)?;
    config.credentials().map_err(name)?;
    Ok(config)
}

fn check(flag: Option<&Path>, json: bool) -> Result<ExitCode> {
    let location = ConfigLocation::resolve(flag);
    let text = match &location.path {
        Some(path) => std::fs::read_to_string(path).ok(),
        None => None,
    };
    match validate(&location) {
        Ok(_) => {
            let values = text
                .as_deref()
                .and_then(|t| toml_value(t).ok())
                .map(|mut v| {
                    mask(&mut v);
                    v
                })
                .unwrap_or_else(|| json!({}));
            if json {
                let out = json!({
                    "ok": true,
                    "config": location_json(&location),
                    "effective": values,
                });
                println!("{}", serde_json::to_string_pretty(&out)?);
            } else {
                println!("ok: {}", location.describe());
                let mut lines = Vec::new();
                flatten("", &values, &mut lines);
                if lines.is_empty() {
                    println!("  (every key at its default: no model, the simulated phone)");
                } else {
                    println!("effective settings (the rest at their defaults; secrets masked):");
                }
                for line in lines {
                    println!("  {line}");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(message) => {
            let line = text.as_deref().and_then(|t| problem_line(t, &message));
            let file = location.path.as_ref().map(|p| p.display().to_string());
            if json {
                let out = json!({
                    "ok": false,
                    "config": location_json(&location),
                    "error": message,
                    "file": file,
                    "line": line,
                });
                println!("{}", serde_json::to_string_pretty(&out)?);
            } else {
                let at = match (&file, line) {
                    (Some(f), Some(l)) => format!("{f}:{l}: "),
                    (Some(f), None) => format!("{f}: "),
                    _ => String::new(),
                };
                eprintln!("openphone config check: {at}{message}");
            }
            Ok(ExitCode::from(1))
        }
    }
}

fn toml_value(text: &str) -> Result<Value, String> {
    let table: toml::Table = toml::from_str(text).map_err(|e| e.to_string())?;
    serde_json::to_value(table).map_err(|e| e.to_string())
}

/// Whether a key holds a secret (its value is masked); `*_env`/`*_file` name where one is.
fn is_secret(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    !(key.ends_with("_env") || key.ends_with("_file"))
        && (key.ends_with("token")
            || key.contains("password")
            || key.contains("secret")
            || key.ends_with("api_key")
            || key.contains("setup_code"))
}

/// Replaces every secret's value with `"***"`.
pub fn mask(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if is_secret(key) && !v.is_null() {
                    *v = Value::String("***".into());
                } else {
                    mask(v);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(mask),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
    }
}

/// `table.key = value` lines, arrays of tables as `table[0].key`.
fn flatten(prefix: &str, value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                flatten(&path, v, out);
            }
        }
        Value::Array(items) if items.iter().any(Value::is_object) => {
            for (i, v) in items.iter().enumerate() {
                flatten(&format!("{prefix}[{i}]"), v, out);
            }
        }
        Value::Array(_) | Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {
            out.push(format!("{prefix} = {value}"));
        }
    }
}

/// The line of `text` a problem is on: the line TOML's parser names, else the first
/// non-comment line holding a quoted name or `key` from the message.
pub fn problem_line(text: &str, message: &str) -> Option<usize> {
    if let Some(rest) = message.split("at line ").nth(1) {
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if let Ok(line) = digits.parse() {
            return Some(line);
        }
    }
    let mut needles = Vec::new();
    for quote in ['"', '`'] {
        for inside in message.split(quote).skip(1).step_by(2) {
            if !inside.is_empty() && inside.len() < 80 {
                needles.push(if quote == '"' {
                    format!("\"{inside}\"")
                } else {
                    inside.to_owned()
                });
            }
        }
    }
    let lines: Vec<&str> = text.lines().collect();
    for needle in needles {
        let hit = lines.iter().position(|l| {
            let code = l.split('#').next().unwrap_or_default();
            code.contains(needle.as_str())
        });
        if let Some(i) = hit {
            return Some(i + 1);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_masked_and_names_of_secrets_are_not() {
        let mut v = json!({"runtimes": [{"id": "a", "token": "abcdefghijklmnopq",
            "token_env": "X"}], "goals": {"telegram_bot_token": "1:2"},
            "builtin": {"api_key_file": "/k"}});
        mask(&mut v);
        assert_eq!(v["runtimes"][0]["token"], "***");
        assert_eq!(v["runtimes"][0]["token_env"], "X");
        assert_eq!(v["goals"]["telegram_bot_token"], "***");
        assert_eq!(v["builtin"]["api_key_file"], "/k");
    }

    #[test]
    fn the_problem_line_comes_from_toml_or_the_quoted_name() {
        assert_eq!(
            problem_line("a\nb", "TOML parse error at line 2, column 1"),
            Some(2)
        );
        let text = "# \"x\"\n[[runtimes]]\nid = \"x\"\n";
        assert_eq!(problem_line(text, "runtime \"x\": bad"), Some(3));
        assert_eq!(problem_line(text, "nothing named"), None);
    }
}
