//! Every JSON example of `docs/endpoint.md` parses into the type it documents.
//!
//! Examples are fenced blocks whose info string names what they are: `json request` (a
//! request frame; its `method` picks the params type), `json response <method>` (a success
//! frame answering that method), `json event` (a notification; its `event` picks the payload
//! type) or `json error` (a failure frame). Every `json` block must carry one of these tags.
//! An example must read into its type, and writing that value back must reproduce every member
//! the example shows (so a misspelt or invented field fails too). Every method needs a
//! documented request and response, and every event the daemon sends an example.

use std::collections::BTreeSet;
use std::path::PathBuf;

use openphone_protocol::endpoint::*;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// One fenced `json` block.
pub(super) struct Example {
    pub(super) line: usize,
    pub(super) tag: Vec<String>,
    pub(super) text: String,
}

pub(super) fn doc_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/endpoint.md")
}

pub(super) fn examples(markdown: &str) -> Vec<Example> {
    let mut out = Vec::new();
    let mut open: Option<Example> = None;
    for (i, line) in markdown.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(info) = trimmed.strip_prefix("```") {
            match open.take() {
                Some(example) => out.push(example),
                None => {
                    let words: Vec<String> = info.split_whitespace().map(str::to_owned).collect();
                    if words.first().map(String::as_str) == Some("json") {
                        open = Some(Example {
                            line: i + 1,
                            tag: words[1..].to_vec(),
                            text: String::new(),
                        });
                    } else {
                        // A non-JSON block: skip to its end.
                        open = Some(Example {
                            line: 0,
                            tag: vec![],
                            text: String::new(),
                        });
                    }
                }
            }
        } else if let Some(example) = open.as_mut() {
            example.text.push_str(line);
            example.text.push('\n');
        }
    }
    assert!(open.is_none(), "an unclosed code block in docs/endpoint.md");
    out.retain(|e| e.line > 0);
    out
}

/// Every member of `doc` is in `typed` with the same value (arrays element by element).
fn covers(doc: &Value, typed: &Value, path: &str) -> Result<(), String> {
    match (doc, typed) {
        (Value::Object(d), Value::Object(t)) => {
            for (key, value) in d {
                let inner = format!("{path}.{key}");
                let Some(other) = t.get(key) else {
                    return Err(format!("{inner} is not a member of the type"));
                };
                covers(value, other, &inner)?;
            }
            Ok(())
        }
        (Value::Array(d), Value::Array(t)) if d.len() == t.len() => d
            .iter()
            .zip(t)
            .enumerate()
            .try_for_each(|(i, (d, t))| covers(d, t, &format!("{path}[{i}]"))),
        (d, t) if d == t => Ok(()),
        (d, t) => Err(format!("{path}: the example has {d}, the type writes {t}")),
    }
}

/// Reads `doc` as a `T` and checks that writing it back keeps every member shown.
fn check<T: Serialize + DeserializeOwned>(doc: &Value) -> Result<(), String> {
    let typed: T = serde_json::from_value(doc.clone()).map_err(|e| e.to_string())?;
    let back = serde_json::to_value(&typed).map_err(|e| e.to_string())?;
    covers(doc, &back, "$")
}

type Check = fn(&Value) -> Result<(), String>;

fn checks<M: Method>() -> (Check, Check) {
    (check::<M::Params>, check::<M::Result>)
}

/// The params and result checks of a method (exhaustive: a new method must be added here).
fn method_checks(method: MethodName) -> (Check, Check) {
    match method {
        MethodName::Hello => checks::<Hello>(),
        MethodName::ToolsList => checks::<ToolsList>(),
        MethodName::ToolsInvoke => checks::<ToolsInvoke>(),
        MethodName::ConfirmationsList => checks::<ConfirmationsList>(),
        MethodName::ConfirmationsResolve => checks::<ConfirmationsResolve>(),
        MethodName::InboxList => checks::<InboxList>(),
        MethodName::InboxResolve => checks::<InboxResolve>(),
        MethodName::EventsSubscribe => checks::<EventsSubscribe>(),
        MethodName::SessionsList => checks::<SessionsList>(),
        MethodName::SessionsGet => checks::<SessionsGet>(),
        MethodName::SessionsCancel => checks::<SessionsCancel>(),
        MethodName::AuditQuery => checks::<AuditQuery>(),
        MethodName::AttentionRequest => checks::<AttentionRequest>(),
        MethodName::RuntimeMessage => checks::<RuntimeMessage>(),
        MethodName::RuntimeList => checks::<RuntimeList>(),
        MethodName::RuntimeSelect => checks::<RuntimeSelect>(),
        MethodName::RuntimeElevate => checks::<RuntimeElevate>(),
        MethodName::RuntimeRevokeElevation => checks::<RuntimeRevokeElevation>(),
        MethodName::PolicyExplain => checks::<PolicyExplain>(),
        MethodName::ApprovalsList => checks::<ApprovalsList>(),
        MethodName::ApprovalsGrant => checks::<ApprovalsGrant>(),
        MethodName::ApprovalsRevoke => checks::<ApprovalsRevoke>(),
        MethodName::JobsList => checks::<JobsList>(),
        MethodName::JobsGet => checks::<JobsGet>(),
        MethodName::JobsCreate => checks::<JobsCreate>(),
        MethodName::JobsStop => checks::<JobsStop>(),
        MethodName::JobsPause => checks::<JobsPause>(),
        MethodName::JobsResume => checks::<JobsResume>(),
        MethodName::JobsWake => checks::<JobsWake>(),
        MethodName::JobsReview => checks::<JobsReview>(),
        MethodName::GoalsList => checks::<GoalsList>(),
        MethodName::GoalsGet => checks::<GoalsGet>(),
        MethodName::GoalsCreate => checks::<GoalsCreate>(),
        MethodName::GoalsPlan => checks::<GoalsPlan>(),
        MethodName::GoalsTick => checks::<GoalsTick>(),
        MethodName::GoalsAnswer => checks::<GoalsAnswer>(),
        MethodName::GoalsRetry => checks::<GoalsRetry>(),
        MethodName::GoalsPause => checks::<GoalsPause>(),
        MethodName::GoalsResume => checks::<GoalsResume>(),
        MethodName::GoalsAbort => checks::<GoalsAbort>(),
        MethodName::GoalsExplain => checks::<GoalsExplain>(),
        MethodName::GoalsExport => checks::<GoalsExport>(),
        MethodName::SimInject => checks::<SimInject>(),
        MethodName::DashboardLogin => checks::<DashboardLogin>(),
        MethodName::DevicesList => checks::<DevicesList>(),
    }
}

#[derive(Default)]
struct Seen {
    requests: BTreeSet<&'static str>,
    responses: BTreeSet<&'static str>,
    events: BTreeSet<String>,
    errors: usize,
}

fn check_example(example: &Example, seen: &mut Seen) -> Result<(), String> {
    let value: Value = serde_json::from_str(&example.text).map_err(|e| format!("not JSON: {e}"))?;
    let tag: Vec<&str> = example.tag.iter().map(String::as_str).collect();
    match tag.as_slice() {
        ["request"] => {
            let request = parse_request(&example.text)
                .map_err(|r| format!("refused request: {}", r.error))?;
            let method = request
                .method_name()
                .ok_or_else(|| format!("no method {:?}", request.method))?;
            seen.requests.insert(method.as_str());
            let (params, _) = method_checks(method);
            params(&Value::Object(request.params)).map_err(|e| format!("params: {e}"))
        }
        ["response", name] => {
            let method = MethodName::parse(name).ok_or_else(|| format!("no method {name:?}"))?;
            seen.responses.insert(method.as_str());
            check::<Response>(&value)?;
            let (_, result) = method_checks(method);
            result(&value["result"]).map_err(|e| format!("result: {e}"))
        }
        ["event"] => {
            check::<EventNotification>(&value)?;
            let name = value["params"]["event"].as_str().unwrap_or_default();
            seen.events.insert(name.to_owned());
            Ok(())
        }
        ["error"] => {
            seen.errors += 1;
            check::<ErrorResponse>(&value)
        }
        other => Err(format!(
            "untagged or unknown tag {other:?}: mark the block `json request`, \
             `json response <method>`, `json event` or `json error`"
        )),
    }
}

#[test]
fn every_documented_example_parses_into_its_type() {
    let path = doc_path();
    let markdown = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let examples = examples(&markdown);
    let mut seen = Seen::default();
    let failures: Vec<String> = examples
        .iter()
        .filter_map(|e| {
            check_example(e, &mut seen).err().map(|why| {
                format!(
                    "docs/endpoint.md line {} ({}): {why}",
                    e.line,
                    e.tag.join(" ")
                )
            })
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    let all: BTreeSet<&str> = MethodName::ALL.iter().map(|m| m.as_str()).collect();
    let no_request: Vec<&&str> = all.difference(&seen.requests).collect();
    let no_response: Vec<&&str> = all.difference(&seen.responses).collect();
    assert!(
        no_request.is_empty(),
        "methods without a request example: {no_request:?}"
    );
    assert!(
        no_response.is_empty(),
        "methods without a response example: {no_response:?}"
    );
    let events: BTreeSet<String> = Event::NAMES.iter().map(|n| (*n).to_owned()).collect();
    let no_event: Vec<&String> = events.difference(&seen.events).collect();
    assert!(
        no_event.is_empty(),
        "events without an example: {no_event:?}"
    );
    assert!(seen.errors > 0, "no error example");
}

#[test]
fn the_checker_catches_a_drifting_example() {
    let doc = "```json response runtime.select\n\
               {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"surface\":\"chat\",\"runtime\":\"hermes\",\"extra\":1}}\n\
               ```\n\
               ```json\n{}\n```\n\
               ```\nnot json\n```\n";
    let found = examples(doc);
    assert_eq!(found.len(), 2);
    let mut seen = Seen::default();
    let err = check_example(&found[0], &mut seen).unwrap_err();
    assert!(err.contains("$.extra"), "{err}");
    let err = check_example(&found[1], &mut seen).unwrap_err();
    assert!(err.contains("untagged"), "{err}");
}
