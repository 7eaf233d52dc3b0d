//! The commands manifest: the manifest-level fields, each command on its own (required
//! fields, enum values, schemas, the confirmation and mutating rules, deprecation), then the
//! rules across commands (unique names, aliases and model-tool names; `superseded_by`
//! targets).

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::{Report, Rule, SchemaCompile, describe, non_empty_str, parse_object};
use crate::manifest::{Command, Confirmation, Executor, Exposure, Risk, SaferAlternative, Service};
use crate::version::{MAX_VERSION, MIN_VERSION, is_supported_version};

/// Information-only manifest-level deprecation of the commands manifest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManifestDeprecation {
    pub deprecated: bool,
    pub superseded_by: Option<String>,
}

/// The manifest version, its deprecation, the commands and their input validators (`None`
/// when not compiled at load).
pub(super) type CheckedCommands = (
    u32,
    ManifestDeprecation,
    Vec<Command>,
    Vec<Option<jsonschema::Validator>>,
);

/// Checks the commands manifest against the capability ids; `None` only after reporting an
/// error.
pub(super) fn check(
    text: &str,
    cap_ids: &HashSet<&str>,
    compile: SchemaCompile,
    r: &mut Report,
) -> Option<CheckedCommands> {
    let doc = parse_object(text, Rule::CommandsJson, r)?;
    let version = doc.get("version");
    if !is_supported_version(version) {
        r.err(
            Rule::CommandsVersion,
            None,
            format!(
                "unsupported manifest version: supported range is {MIN_VERSION}..={MAX_VERSION}, found {}",
                describe(version)
            ),
        );
    }
    let version = version
        .and_then(Value::as_f64)
        .map(|v| v as u32)
        .unwrap_or(0);
    let mut deprecation = ManifestDeprecation::default();
    match doc.get("deprecated") {
        None => {}
        Some(Value::Bool(b)) => deprecation.deprecated = *b,
        Some(other) => r.err(
            Rule::CommandsManifestDeprecation,
            None,
            format!("manifest-level `deprecated` must be a boolean, found {other}"),
        ),
    }
    match doc.get("superseded_by") {
        None => {}
        Some(Value::String(s)) => deprecation.superseded_by = Some(s.clone()),
        Some(other) => r.err(
            Rule::CommandsManifestDeprecation,
            None,
            format!("manifest-level `superseded_by` must be a string, found {other}"),
        ),
    }
    let Some(items) = doc.get("commands").and_then(Value::as_array) else {
        r.err(Rule::CommandsArray, None, "`commands` must be an array");
        return None;
    };

    let mut commands = Vec::new();
    let mut validators = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let Some(obj) = item.as_object() else {
            r.err(
                Rule::CommandsArray,
                Some(&format!("commands[{i}]")),
                "must be an object",
            );
            continue;
        };
        if let Some((cmd, validator)) = check_command(i, obj, cap_ids, compile, r) {
            commands.push(cmd);
            validators.push(validator);
        }
    }
    let entries: Vec<NameEntry<'_>> = items
        .iter()
        .filter_map(Value::as_object)
        .filter_map(|obj| {
            Some(NameEntry {
                name: non_empty_str(obj, "name")?,
                aliases: obj
                    .get("aliases")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default(),
                android_tool: obj.get("android_tool").and_then(Value::as_str),
            })
        })
        .collect();
    check_names(&entries, r);
    check_deprecations(&commands, r);
    check_safer_alternatives(&commands, r);
    Some((version, deprecation, commands, validators))
}

/// Checks one command on its own; `None` when it cannot be built.
fn check_command(
    index: usize,
    obj: &Map<String, Value>,
    cap_ids: &HashSet<&str>,
    compile: SchemaCompile,
    r: &mut Report,
) -> Option<(Command, Option<jsonschema::Validator>)> {
    let placeholder = format!("commands[{index}]");
    let name = non_empty_str(obj, "name");
    let subject = name.unwrap_or(&placeholder).to_owned();
    let s = Some(subject.as_str());
    let before = r.errors.len();

    for key in [
        "name",
        "android_tool",
        "description",
        "category",
        "default_exposure",
        "capability",
    ] {
        if non_empty_str(obj, key).is_none() {
            r.err(
                Rule::CommandRequiredFields,
                s,
                format!(
                    "`{key}` must be a non-empty string, found {}",
                    describe(obj.get(key))
                ),
            );
        }
    }
    // `resolve` trims what it looks up, so a padded name could never be found.
    if let Some(name) = name
        && name.trim() != name
    {
        r.err(
            Rule::CommandRequiredFields,
            s,
            format!("`name` {name:?} must not begin or end with whitespace"),
        );
    }
    for key in ["input_schema", "output_schema"] {
        if !obj.get(key).is_some_and(Value::is_object) {
            r.err(
                Rule::CommandRequiredFields,
                s,
                format!("`{key}` must be an object"),
            );
        }
    }
    let aliases: Vec<String> = match obj.get("aliases") {
        None => Vec::new(),
        Some(Value::Array(list))
            if list
                .iter()
                .all(|a| a.as_str().is_some_and(|a| !a.is_empty() && a.trim() == a)) =>
        {
            list.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        }
        Some(other) => {
            r.err(
                Rule::CommandRequiredFields,
                s,
                format!(
                    "`aliases` must be an array of non-empty strings without surrounding \
                     whitespace, found {other}"
                ),
            );
            Vec::new()
        }
    };
    let android_tool = non_empty_str(obj, "android_tool").unwrap_or_default();
    if !android_tool.is_empty() && !is_model_tool_name(android_tool) {
        r.err(
            Rule::CommandModelToolFormat,
            s,
            format!("android_tool {android_tool:?} must match ^[a-z][a-z0-9_]{{0,79}}$"),
        );
    }

    let risk = parse_enum(obj, "risk", Risk::parse, "low, medium, high", s, r);
    let confirmation = parse_enum(
        obj,
        "confirmation",
        Confirmation::parse,
        "none, ask_before_action, always",
        s,
        r,
    );
    let exposure = parse_enum(
        obj,
        "default_exposure",
        Exposure::parse,
        "safe_read, private_read, dangerous",
        s,
        r,
    );
    let executor = parse_enum(obj, "executor", Executor::parse, "device, runtime", s, r);
    let mut flag = |key: &str| match obj.get(key) {
        Some(Value::Bool(b)) => Some(*b),
        other => {
            r.err(
                Rule::CommandEnumValues,
                s,
                format!("`{key}` must be a boolean, found {}", describe(other)),
            );
            None
        }
    };
    let mcp = flag("mcp");
    let remote_runtime = flag("remote_runtime");
    let mutating = flag("mutating");

    let capability = non_empty_str(obj, "capability").unwrap_or_default();
    if !capability.is_empty() && !cap_ids.contains(capability) {
        r.err(
            Rule::CommandCapabilityExists,
            s,
            format!("capability {capability:?} is not in the capabilities manifest"),
        );
    }

    let input_schema = obj.get("input_schema").cloned().unwrap_or(Value::Null);
    let output_schema = obj.get("output_schema").cloned().unwrap_or(Value::Null);
    if input_schema.is_object() {
        if input_schema.get("type").and_then(Value::as_str) != Some("object") {
            r.err(
                Rule::CommandInputSchemaShape,
                s,
                "input_schema must have \"type\": \"object\"",
            );
        }
        let requires_reason = input_schema
            .get("required")
            .and_then(Value::as_array)
            .is_some_and(|req| req.iter().any(|v| v.as_str() == Some("reason")));
        if !requires_reason {
            r.err(
                Rule::CommandInputSchemaShape,
                s,
                "input_schema.required must contain \"reason\"",
            );
        }
    }
    let at_load = compile == SchemaCompile::AtLoad;
    let validator = if at_load && input_schema.is_object() {
        match jsonschema::draft202012::new(&input_schema) {
            Ok(v) => Some(v),
            Err(e) => {
                r.err(
                    Rule::CommandSchemaCompiles,
                    s,
                    format!("input_schema does not compile: {e}"),
                );
                None
            }
        }
    } else {
        None
    };
    if at_load
        && output_schema.is_object()
        && let Err(e) = jsonschema::draft202012::new(&output_schema)
    {
        {
            r.err(
                Rule::CommandSchemaCompiles,
                s,
                format!("output_schema does not compile: {e}"),
            );
        }
    }

    if let (Some(risk), Some(confirmation)) = (risk, confirmation)
        && (confirmation == Confirmation::Always) != (risk == Risk::High)
    {
        {
            r.err(
                Rule::CommandHighRiskAlwaysConfirms,
                s,
                format!("confirmation must be \"always\" exactly when risk is \"high\" (risk {risk}, confirmation {confirmation})"),
            );
        }
    }
    if let (Some(mutating), Some(confirmation)) = (mutating, confirmation) {
        let expected = confirmation != Confirmation::None;
        if mutating != expected {
            r.err(
                Rule::CommandMutatingFlag,
                s,
                format!("mutating is {mutating} but confirmation {confirmation} means mutating must be {expected}"),
            );
        }
    }
    if let (Some(confirmation), Some(exposure)) = (confirmation, exposure) {
        let read = matches!(exposure, Exposure::SafeRead | Exposure::PrivateRead);
        if (confirmation == Confirmation::None) != read {
            r.warn(
                Rule::WarnReadExposure,
                &subject,
                format!("confirmation {confirmation} with exposure {exposure}"),
            );
        }
        if confirmation != Confirmation::None && exposure != Exposure::Dangerous {
            r.warn(
                Rule::WarnConfirmingIsDangerous,
                &subject,
                format!("confirming command has exposure {exposure}"),
            );
        }
    }

    let service = check_service(obj, executor, s, r);
    let grant_targets = check_grant_targets(obj, mutating, &input_schema, s, r);
    let safer_alternative = check_safer_alternative(obj, &input_schema, s, r);

    let deprecated = match obj.get("deprecated") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            r.err(
                Rule::CommandDeprecation,
                s,
                format!("`deprecated` must be a boolean, found {other}"),
            );
            false
        }
    };
    let superseded_by = match obj.get("superseded_by") {
        None => None,
        Some(Value::String(t)) if !t.trim().is_empty() => {
            if !deprecated {
                r.err(
                    Rule::CommandDeprecation,
                    s,
                    "`superseded_by` requires \"deprecated\": true",
                );
            }
            Some(t.trim().to_owned())
        }
        Some(other) => {
            r.err(
                Rule::CommandDeprecation,
                s,
                format!("`superseded_by` must be a non-empty string, found {other}"),
            );
            None
        }
    };

    if r.errors.len() != before {
        return None;
    }
    let (Some(name), Some(risk), Some(confirmation), Some(exposure), Some(executor)) =
        (name, risk, confirmation, exposure, executor)
    else {
        return None;
    };
    let (Some(mcp), Some(remote_runtime), Some(mutating)) = (mcp, remote_runtime, mutating) else {
        return None;
    };
    let text = |key: &str| non_empty_str(obj, key).unwrap_or_default().to_owned();
    Some((
        Command {
            name: name.to_owned(),
            aliases,
            android_tool: android_tool.to_owned(),
            description: text("description"),
            category: text("category"),
            mutating,
            executor,
            risk,
            capability: capability.to_owned(),
            confirmation,
            default_exposure: exposure,
            mcp,
            remote_runtime,
            input_schema,
            output_schema,
            deprecated,
            superseded_by,
            service,
            grant_targets,
            project: obj.get("project").and_then(Value::as_bool).unwrap_or(false),
            safer_alternative,
        },
        validator,
    ))
}

/// `service`: given exactly for a runtime-owned command, one of the services.
fn check_service(
    obj: &Map<String, Value>,
    executor: Option<Executor>,
    s: Option<&str>,
    r: &mut Report,
) -> Option<Service> {
    let service = match obj.get("service") {
        None => None,
        Some(Value::String(t)) => match Service::parse(t) {
            Some(service) => Some(service),
            None => {
                r.err(
                    Rule::CommandProjectFields,
                    s,
                    format!("`service` must be one of memory, watchers, jobs, goals, found {t:?}"),
                );
                return None;
            }
        },
        Some(other) => {
            r.err(
                Rule::CommandProjectFields,
                s,
                format!("`service` must be a string, found {other}"),
            );
            return None;
        }
    };
    if let Some(executor) = executor
        && service.is_some() != (executor == Executor::Runtime)
    {
        r.err(
            Rule::CommandProjectFields,
            s,
            format!(
                "`service` must be given exactly for executor \"runtime\" (executor {executor})"
            ),
        );
    }
    service
}

/// `grant_targets`: absent, or on a state-changing command a list of params its input schema
/// declares.
fn check_grant_targets(
    obj: &Map<String, Value>,
    mutating: Option<bool>,
    input_schema: &Value,
    s: Option<&str>,
    r: &mut Report,
) -> Option<Vec<String>> {
    let list = obj.get("grant_targets")?;
    let Some(items) = list.as_array() else {
        r.err(
            Rule::CommandProjectFields,
            s,
            format!("`grant_targets` must be an array of param names, found {list}"),
        );
        return None;
    };
    if mutating == Some(false) {
        r.err(
            Rule::CommandProjectFields,
            s,
            "`grant_targets` is only for a state-changing command",
        );
    }
    let declared = input_schema.get("properties").and_then(Value::as_object);
    let mut targets = Vec::new();
    for item in items {
        match item.as_str() {
            Some(name) if declared.is_some_and(|props| props.contains_key(name)) => {
                targets.push(name.to_owned());
            }
            _ => r.err(
                Rule::CommandProjectFields,
                s,
                format!("grant target {item} is not a param of the input schema"),
            ),
        }
    }
    Some(targets)
}

/// `safer_alternative`: absent, or `{command, params, why}` whose `params` map names of the
/// alternative's params to params this command's input schema declares (the alternative's
/// side is checked across commands, [`check_safer_alternatives`]).
fn check_safer_alternative(
    obj: &Map<String, Value>,
    input_schema: &Value,
    s: Option<&str>,
    r: &mut Report,
) -> Option<SaferAlternative> {
    let value = obj.get("safer_alternative")?;
    let bad = |r: &mut Report, why: String| {
        r.err(
            Rule::CommandProjectFields,
            s,
            format!("`safer_alternative` {why}"),
        );
    };
    let Some(alt) = value.as_object() else {
        bad(
            r,
            format!("must be an object {{command, params, why}}, found {value}"),
        );
        return None;
    };
    if let Some(key) = alt
        .keys()
        .find(|k| !["command", "params", "why"].contains(&k.as_str()))
    {
        bad(r, format!("has an unknown member {key:?}"));
    }
    let (Some(command), Some(why)) = (non_empty_str(alt, "command"), non_empty_str(alt, "why"))
    else {
        bad(r, "needs a non-empty `command` and `why`".to_owned());
        return None;
    };
    let declared = input_schema.get("properties").and_then(Value::as_object);
    let mut params = std::collections::BTreeMap::new();
    for (target, source) in alt
        .get("params")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        match source.as_str() {
            Some(source) if declared.is_some_and(|p| p.contains_key(source)) => {
                params.insert(target.clone(), source.to_owned());
            }
            _ => bad(
                r,
                format!("maps {target:?} from {source}, not a param of this command"),
            ),
        }
    }
    Some(SaferAlternative {
        command: command.to_owned(),
        params,
        why: why.to_owned(),
    })
}

/// `safer_alternative` names another known command (its canonical name) of lower risk, whose
/// input schema declares every mapped param, each of its required params (but `reason`) mapped.
fn check_safer_alternatives(commands: &[Command], r: &mut Report) {
    for cmd in commands {
        let Some(alt) = &cmd.safer_alternative else {
            continue;
        };
        let s = Some(cmd.name.as_str());
        let Some(target) = commands.iter().find(|c| c.name == alt.command) else {
            r.err(
                Rule::CommandProjectFields,
                s,
                format!(
                    "`safer_alternative` names {:?}, no command's canonical name",
                    alt.command
                ),
            );
            continue;
        };
        if target.risk >= cmd.risk {
            r.err(
                Rule::CommandProjectFields,
                s,
                format!(
                    "`safer_alternative` {} is {} risk, not below this command's {}",
                    target.name, target.risk, cmd.risk
                ),
            );
        }
        let declared = target.input_properties();
        for name in alt
            .params
            .keys()
            .filter(|n| !declared.contains(&n.as_str()))
        {
            r.err(
                Rule::CommandProjectFields,
                s,
                format!(
                    "`safer_alternative` maps {name:?}, not a param of {}",
                    target.name
                ),
            );
        }
        for name in target
            .required_inputs()
            .into_iter()
            .filter(|n| *n != "reason" && !alt.params.contains_key(*n))
        {
            r.err(
                Rule::CommandProjectFields,
                s,
                format!(
                    "`safer_alternative` leaves {name:?}, required by {}, unmapped",
                    target.name
                ),
            );
        }
    }
}

fn parse_enum<T>(
    obj: &Map<String, Value>,
    key: &str,
    parse: fn(&str) -> Option<T>,
    allowed: &str,
    subject: Option<&str>,
    r: &mut Report,
) -> Option<T> {
    let parsed = obj.get(key).and_then(Value::as_str).and_then(parse);
    if parsed.is_none() {
        r.err(
            Rule::CommandEnumValues,
            subject,
            format!(
                "`{key}` must be one of {allowed}; found {}",
                describe(obj.get(key))
            ),
        );
    }
    parsed
}

/// `^[a-z][a-z0-9_]{0,79}$`.
fn is_model_tool_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && s.len() <= 80
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// The names one raw command entry declares (checked even when other rules fail for it).
struct NameEntry<'a> {
    name: &'a str,
    aliases: Vec<&'a str>,
    android_tool: Option<&'a str>,
}

/// Rules 4 and 5: names, aliases and model-tool names are all distinct.
fn check_names(entries: &[NameEntry<'_>], r: &mut Report) {
    // Canonical names first, so an alias that equals a name is blamed on the alias's owner.
    let mut owners: HashMap<&str, &str> = HashMap::new();
    for e in entries {
        if let Some(owner) = owners.insert(e.name, e.name) {
            r.err(
                Rule::CommandUniqueNames,
                Some(e.name),
                format!("name {:?} is declared twice (first by {owner})", e.name),
            );
        }
    }
    let names: HashSet<&str> = owners.keys().copied().collect();
    for e in entries {
        for alias in &e.aliases {
            if names.contains(alias) {
                r.err(
                    Rule::CommandUniqueNames,
                    Some(e.name),
                    format!("alias {alias:?} equals the canonical name of a command"),
                );
            } else if let Some(owner) = owners.insert(alias, e.name) {
                r.err(
                    Rule::CommandUniqueNames,
                    Some(e.name),
                    format!("alias {alias:?} is already declared by {owner}"),
                );
            }
        }
    }
    let mut tools: HashMap<&str, &str> = HashMap::new();
    for e in entries {
        let Some(tool) = e.android_tool else { continue };
        if let Some(owner) = owners.get(tool) {
            r.err(
                Rule::CommandUniqueModelTool,
                Some(e.name),
                format!("android_tool {tool:?} collides with a name or alias of {owner}"),
            );
        }
        if let Some(owner) = tools.insert(tool, e.name) {
            r.err(
                Rule::CommandUniqueModelTool,
                Some(e.name),
                format!("android_tool {tool:?} is already used by {owner}"),
            );
        }
    }
}

/// Rule 9: `superseded_by` names a known command other than the command itself.
fn check_deprecations(commands: &[Command], r: &mut Report) {
    for cmd in commands {
        let Some(target) = &cmd.superseded_by else {
            continue;
        };
        let own = std::iter::once(&cmd.name)
            .chain(cmd.aliases.iter())
            .any(|n| n == target);
        if own {
            r.err(
                Rule::CommandDeprecation,
                Some(&cmd.name),
                format!("superseded_by {target:?} names the command itself"),
            );
            continue;
        }
        let known = commands
            .iter()
            .any(|c| c.name == *target || c.aliases.iter().any(|a| a == target));
        if !known {
            r.err(
                Rule::CommandDeprecation,
                Some(&cmd.name),
                format!("superseded_by {target:?} names no known command or alias"),
            );
        }
    }
}
