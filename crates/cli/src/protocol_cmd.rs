//! `openphone protocol …`: offline tools over the manifests and canonical JSON.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use openphone_protocol::canonical::parse_json_strict;
use openphone_protocol::{ManifestErrors, ManifestFile, ManifestSources, Registry, value_hash};
use serde_json::{Value, json};

#[derive(Debug, Subcommand)]
pub enum ProtocolCommand {
    /// Validate the manifests against every load-time rule and print counts.
    ///
    /// Exits 1 and names each broken rule and command when the manifests are invalid.
    Check {
        #[command(flatten)]
        source: ManifestDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// List the commands of the manifest.
    Commands {
        #[command(flatten)]
        source: ManifestDir,
        /// Print every command in full as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Read one JSON value on stdin and print its canonical hash, `sha256:<hex>`.
    ///
    /// Keys are sorted by code point, whitespace removed, numbers written as JavaScript
    /// writes them. Input that is not JSON (or repeats a key) exits 2.
    Hash,
    /// Validate tool params against a command's input schema; prints `ok` or field errors.
    ValidateParams {
        /// Command name, alias or model-tool name (e.g. `openphone.ui.tap`, `sms.send`, `tap`).
        command: String,
        /// The params as a JSON object, e.g. '{"x": 10, "y": 20, "reason": "press OK"}'.
        params: String,
        #[command(flatten)]
        source: ManifestDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub struct ManifestDir {
    /// Read the manifests from this directory (holding `openphone-commands.json` etc., or a
    /// checkout with `runtime/protocol/`) instead of the ones built into the binary.
    #[arg(long, value_name = "DIR")]
    manifest_dir: Option<PathBuf>,
}

impl ManifestDir {
    fn sources(&self) -> Result<ManifestSources> {
        let Some(dir) = &self.manifest_dir else {
            return Ok(ManifestSources::embedded());
        };
        let nested = dir.join("runtime/protocol");
        let dir = if nested.join(ManifestFile::Commands.file_name()).is_file() {
            nested
        } else {
            dir.clone()
        };
        let read = |file: ManifestFile| -> Result<std::borrow::Cow<'static, str>> {
            let path = dir.join(file.file_name());
            Ok(std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read manifest {}", path.display()))?
                .into())
        };
        Ok(ManifestSources {
            commands: read(ManifestFile::Commands)?,
            events: read(ManifestFile::Events)?,
            capabilities: read(ManifestFile::Capabilities)?,
            runtime_schema: read(ManifestFile::RuntimeSchema)?,
        })
    }

    fn label(&self) -> String {
        self.manifest_dir.as_deref().map_or_else(
            || "built-in manifests".to_owned(),
            |p: &Path| p.display().to_string(),
        )
    }
}

pub fn run(cmd: ProtocolCommand) -> Result<ExitCode> {
    match cmd {
        ProtocolCommand::Check { source, json } => check(&source, json),
        ProtocolCommand::Commands { source, json } => commands(&source, json),
        ProtocolCommand::Hash => hash(),
        ProtocolCommand::ValidateParams {
            command,
            params,
            source,
            json,
        } => validate_params(&source, &command, &params, json),
    }
}

fn counts<'a>(items: impl Iterator<Item = &'a str>) -> BTreeMap<&'a str, usize> {
    let mut m = BTreeMap::new();
    for i in items {
        *m.entry(i).or_default() += 1;
    }
    m
}

fn errors_json(errors: &ManifestErrors) -> Value {
    Value::Array(
        errors
            .0
            .iter()
            .map(|e| {
                json!({
                    "file": e.rule.file().file_name(),
                    "rule": e.rule.id(),
                    "subject": e.subject,
                    "message": e.message,
                })
            })
            .collect(),
    )
}

fn check(source: &ManifestDir, as_json: bool) -> Result<ExitCode> {
    let registry = match Registry::load(&source.sources()?) {
        Ok(r) => r,
        Err(errors) => {
            if as_json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(
                        &json!({"ok": false, "errors": errors_json(&errors)})
                    )?
                );
            } else {
                eprintln!("{}: {errors}", source.label());
            }
            return Ok(ExitCode::from(1));
        }
    };
    let cmds: Vec<_> = registry.commands().collect();
    let names: usize = cmds.iter().map(|c| 1 + c.aliases.len()).sum();
    let by_risk = counts(cmds.iter().map(|c| c.risk.as_str()));
    let by_confirmation = counts(cmds.iter().map(|c| c.confirmation.as_str()));
    let by_exposure = counts(cmds.iter().map(|c| c.default_exposure.as_str()));
    let by_executor = counts(cmds.iter().map(|c| c.executor.as_str()));
    let mutating = cmds.iter().filter(|c| c.mutating).count();
    let not_mcp: Vec<&str> = cmds
        .iter()
        .filter(|c| !c.mcp)
        .map(|c| c.name.as_str())
        .collect();
    let warnings: Vec<String> = registry
        .warnings()
        .iter()
        .map(ToString::to_string)
        .collect();
    if as_json {
        let out = json!({
            "ok": true,
            "version": registry.commands_version(),
            "commands": cmds.len(),
            "names_including_aliases": names,
            "events": registry.events().len(),
            "capabilities": registry.capabilities().len(),
            "mutating": mutating,
            "by_risk": by_risk,
            "by_confirmation": by_confirmation,
            "by_exposure": by_exposure,
            "by_executor": by_executor,
            "not_over_mcp": not_mcp,
            "warnings": warnings,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        let fmt = |m: &BTreeMap<&str, usize>| {
            m.iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        println!(
            "{}: ok (protocol version {})",
            source.label(),
            registry.commands_version()
        );
        println!(
            "commands: {} ({names} names with aliases, {mutating} mutating)",
            cmds.len()
        );
        println!("  risk:         {}", fmt(&by_risk));
        println!("  confirmation: {}", fmt(&by_confirmation));
        println!("  exposure:     {}", fmt(&by_exposure));
        println!("  executor:     {}", fmt(&by_executor));
        println!("  not over MCP: {}", not_mcp.join(", "));
        println!("events: {}", registry.events().len());
        println!("capabilities: {}", registry.capabilities().len());
        for w in &warnings {
            println!("warning: {w}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn load(source: &ManifestDir) -> Result<Registry> {
    Registry::load(&source.sources()?).map_err(|e| anyhow::anyhow!("{}: {e}", source.label()))
}

fn commands(source: &ManifestDir, as_json: bool) -> Result<ExitCode> {
    let registry = load(source)?;
    if as_json {
        let all: Vec<_> = registry.commands().collect();
        println!("{}", serde_json::to_string_pretty(&all)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<36} {:<24} {:<7} {:<18} {:<13} MCP",
        "COMMAND", "MODEL TOOL", "RISK", "CONFIRMATION", "EXPOSURE"
    );
    for c in registry.commands() {
        println!(
            "{:<36} {:<24} {:<7} {:<18} {:<13} {}",
            c.name,
            c.android_tool,
            c.risk.as_str(),
            c.confirmation.as_str(),
            c.default_exposure.as_str(),
            if c.mcp { "yes" } else { "no" }
        );
        if !c.aliases.is_empty() {
            println!("    aliases: {}", c.aliases.join(", "));
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn hash() -> Result<ExitCode> {
    let mut input = String::new();
    std::io::stdin()
        .read_to_string(&mut input)
        .context("cannot read stdin (it must be UTF-8 JSON text)")?;
    let value = parse_json_strict(input.trim()).context("stdin is not a JSON value")?;
    println!("{}", value_hash(&value)?);
    Ok(ExitCode::SUCCESS)
}

fn validate_params(
    source: &ManifestDir,
    command: &str,
    params: &str,
    as_json: bool,
) -> Result<ExitCode> {
    let registry = load(source)?;
    let Some(cmd) = registry.resolve(command) else {
        bail!("unknown command {command:?} (see `openphone protocol commands`)");
    };
    let params = parse_json_strict(params).context("params are not valid JSON")?;
    let outcome = registry.validate_params(cmd, &params);
    if as_json {
        let out = match &outcome {
            Ok(()) => json!({"ok": true, "command": cmd.name}),
            Err(errors) => json!({"ok": false, "command": cmd.name, "errors": errors}),
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        match &outcome {
            Ok(()) => println!("ok"),
            Err(errors) => {
                for e in errors {
                    println!("{}: {e}", cmd.name);
                }
            }
        }
    }
    Ok(if outcome.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
