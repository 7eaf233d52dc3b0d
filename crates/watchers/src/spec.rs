//! What a watcher watches and what it does when it fires: the `watchers.create` params read
//! into a [`WatcherSpec`], with every rule checked at creation (an error names the field), and
//! the spec written back as the canonical params the store keeps.

#![deny(clippy::wildcard_enum_match_arm)]

use openphone_protocol::Registry;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::WatchersError;
use crate::template;

/// The shortest polling period (ms).
pub const MIN_INTERVAL_MS: i64 = 15_000;
/// The polling period of a `web` watcher that names none (ms).
pub const DEFAULT_WEB_INTERVAL_MS: i64 = 300_000;
/// The polling period of a `screen` watcher that names none (ms).
pub const DEFAULT_SCREEN_INTERVAL_MS: i64 = 60_000;
/// The longest polling or repeat period (ms): one year.
pub const MAX_INTERVAL_MS: i64 = 31_536_000_000;
/// The latest accepted time (Unix ms, the year 9999).
const MAX_TIME_MS: i64 = 253_402_300_799_999;
/// Longest query, prompt or notification text (characters).
const MAX_TEXT: usize = 4_000;

/// Where a watcher's trigger comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Incoming messages (device events).
    Message,
    /// Calls (device events).
    Call,
    /// Notifications other apps post (device events).
    Notification,
    /// The screen's text, read through the bridge every `interval_ms`.
    Screen,
    /// A point in time (and a repeat interval).
    Time,
    /// A web page, read every `interval_ms`.
    Web,
}

impl Source {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Message => "message",
            Source::Call => "call",
            Source::Notification => "notification",
            Source::Screen => "screen",
            Source::Time => "time",
            Source::Web => "web",
        }
    }

    fn parse(text: &str) -> Option<Source> {
        match text {
            "message" => Some(Source::Message),
            "call" => Some(Source::Call),
            "notification" => Some(Source::Notification),
            "screen" => Some(Source::Screen),
            "time" => Some(Source::Time),
            "web" => Some(Source::Web),
            _ => None,
        }
    }

    /// Whether the engine reads it periodically.
    pub fn polled(self) -> bool {
        matches!(self, Source::Screen | Source::Web)
    }
}

/// How a match is decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Evaluator {
    /// The text contains `query` (case-insensitive).
    TextContains,
    /// What is read differs from what was read before (`web`, `screen`).
    HashChange,
    /// A model judges that the text meets the condition `query` (needs a [`crate::Judge`]).
    SemanticMatch,
}

/// When a message or call watcher alerts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotifyOn {
    /// On a matching message or call (`reply`, `call`).
    Match,
    /// Only when the deadline passes without one (`no_reply`, `no_call`).
    Absence,
}

/// Which calls count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallDirection {
    /// Both.
    Any,
    /// Calls to the phone.
    Incoming,
    /// Calls from the phone.
    Outgoing,
}

/// What a watcher does when it fires.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Reaction {
    /// No reaction: an attention request on the `watcher` surface, the event as untrusted
    /// data.
    Attention,
    /// An `agent_turn` job (`agent-jobs.md` §11).
    Prompt {
        /// The reaction prompt (may hold `{{event.*}}` / `{{watcher.*}}` templates).
        prompt: String,
        /// The job's delivery is `silent` (else `notification`).
        silent: bool,
        /// The completion notification's text (templates allowed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        notification_text: Option<String>,
        /// The job's session target (default `isolated`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session_target: Option<String>,
    },
    /// A stored tool call, run by a `system_event` job.
    Tool {
        /// The canonical command name.
        tool: String,
        /// Its arguments (templates in string values).
        arguments: Map<String, Value>,
        /// The job's delivery is `silent` (else `notification`).
        silent: bool,
    },
}

impl Reaction {
    /// The wire name of the reaction (`watcher.fired`'s `reaction`).
    pub fn name(&self) -> &'static str {
        match self {
            Reaction::Attention => "attention",
            Reaction::Prompt { .. } => "agent_job",
            Reaction::Tool { .. } => "tool_call",
        }
    }

    /// Whether it creates a job (needs the scheduler).
    pub fn makes_job(&self) -> bool {
        !matches!(self, Reaction::Attention)
    }
}

/// A validated watcher.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WatcherSpec {
    /// Shown to the user.
    pub title: String,
    pub source: Source,
    /// `None`: every event that passes the filters matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluator: Option<Evaluator>,
    /// The text to look for, or the condition to judge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// The structured condition, kept as given (judged with the query by `semantic_match`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<Value>,
    /// The page (`web`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The sender (`message`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// The caller (`call`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number: Option<String>,
    /// Any sender or caller.
    #[serde(default)]
    pub match_any: bool,
    /// Which calls count (`call`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<CallDirection>,
    /// The SMS thread (`message`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<i64>,
    /// The cut-off (Unix ms) of a `message` or `call` watcher.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_at: Option<i64>,
    pub notify_on: NotifyOn,
    /// Keeps watching after a firing.
    #[serde(default)]
    pub recurring: bool,
    /// When a `time` watcher first fires (Unix ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_run_at: Option<i64>,
    /// The repeat period of a `time` watcher, the polling period of `web` and `screen`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_ms: Option<i64>,
    pub reaction: Reaction,
}

/// What creation needs besides the params.
pub struct SpecContext<'a> {
    /// The command manifest (to resolve a stored tool call).
    pub registry: &'static Registry,
    /// Now (Unix ms).
    pub now_ms: i64,
    /// A model can judge `semantic_match`.
    pub judge: bool,
    /// Jobs can be created (a `delivery.prompt` or `delivery.tool` reaction).
    pub jobs: bool,
    /// Reserved for the future: the creating runtime.
    pub runtime: &'a str,
}

fn invalid(field: &str, message: impl Into<String>) -> WatchersError {
    WatchersError::Invalid {
        field: field.to_owned(),
        message: message.into(),
    }
}

fn string<'a>(map: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, WatchersError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => {
            let t = s.trim();
            if t.chars().count() > MAX_TEXT {
                return Err(invalid(key, format!("longer than {MAX_TEXT} characters")));
            }
            Ok((!t.is_empty()).then_some(t))
        }
        Some(_) => Err(invalid(key, "must be a string")),
    }
}

fn integer(map: &Map<String, Value>, key: &str) -> Result<Option<i64>, WatchersError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_i64()
            .map(Some)
            .ok_or_else(|| invalid(key, "must be an integer")),
    }
}

fn boolean(map: &Map<String, Value>, key: &str) -> Result<Option<bool>, WatchersError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(invalid(key, "must be true or false")),
    }
}

fn object<'a>(
    map: &'a Map<String, Value>,
    key: &str,
) -> Result<Option<&'a Map<String, Value>>, WatchersError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(o)) => Ok(Some(o)),
        Some(_) => Err(invalid(key, "must be an object")),
    }
}

fn time(field: &str, value: i64) -> Result<i64, WatchersError> {
    if (1..=MAX_TIME_MS).contains(&value) {
        Ok(value)
    } else {
        Err(invalid(
            field,
            "must be Unix milliseconds between 1970 and the year 9999",
        ))
    }
}

fn http_url(url: &str) -> bool {
    (url.starts_with("https://") || url.starts_with("http://"))
        && url.len() > 8
        && !url.contains(char::is_whitespace)
}

impl WatcherSpec {
    /// Reads and checks `watchers.create` params (an object; `reason` and `_`-keys ignored).
    #[allow(clippy::too_many_lines)]
    pub fn from_params(
        params: &Value,
        ctx: &SpecContext<'_>,
    ) -> Result<WatcherSpec, WatchersError> {
        let Value::Object(p) = params else {
            return Err(invalid("params", "must be a JSON object"));
        };
        let title = string(p, "title")?
            .ok_or_else(|| invalid("title", "is required and must not be blank"))?
            .to_owned();
        let source = match (string(p, "source")?, string(p, "type")?) {
            (Some(s), _) => Source::parse(&s.to_lowercase()).ok_or_else(|| {
                invalid(
                    "source",
                    format!(
                        "unknown source {s:?}: use message, call, notification, screen, time or web"
                    ),
                )
            })?,
            (None, Some(t)) => match t.to_lowercase().as_str() {
                "message_reply" | "message" => Source::Message,
                "call_back" | "call" => Source::Call,
                "web_change" | "web" => Source::Web,
                "notification" => Source::Notification,
                "time" => Source::Time,
                "screen" => Source::Screen,
                other => {
                    return Err(invalid(
                        "type",
                        format!(
                            "unknown type {other:?}: use message_reply, call_back, web_change, \
                             notification or time (or give source)"
                        ),
                    ));
                }
            },
            (None, None) if string(p, "url")?.is_some() => Source::Web,
            (None, None) => {
                return Err(invalid(
                    "source",
                    "is required: message, call, notification, screen, time or web",
                ));
            }
        };
        let query = string(p, "query")?.map(str::to_owned);
        let condition = match p.get("condition") {
            None | Some(Value::Null) => None,
            Some(Value::Object(o)) if o.is_empty() => None,
            Some(v @ Value::Object(_)) => Some(v.clone()),
            Some(_) => return Err(invalid("condition", "must be an object")),
        };
        let evaluator = match string(p, "evaluator")? {
            None => None,
            Some(e) => Some(match e.to_lowercase().as_str() {
                "text_contains" => Evaluator::TextContains,
                "hash_change" => Evaluator::HashChange,
                "semantic_match" => Evaluator::SemanticMatch,
                other => {
                    return Err(invalid(
                        "evaluator",
                        format!(
                            "unknown evaluator {other:?}: use text_contains, hash_change or \
                             semantic_match"
                        ),
                    ));
                }
            }),
        };
        // A query without an evaluator looks for the text; a polled source without either
        // watches for any change.
        let evaluator = match (evaluator, &query) {
            (Some(e), _) => Some(e),
            (None, Some(_)) if source != Source::Time => Some(Evaluator::TextContains),
            (None, _) if source.polled() => Some(Evaluator::HashChange),
            (None, _) => None,
        };
        match evaluator {
            Some(Evaluator::HashChange) if !source.polled() => {
                return Err(invalid(
                    "evaluator",
                    "hash_change watches a page or the screen (source web or screen)",
                ));
            }
            Some(Evaluator::TextContains) if query.is_none() => {
                return Err(invalid("query", "text_contains needs the text to look for"));
            }
            Some(Evaluator::SemanticMatch) if query.is_none() && condition.is_none() => {
                return Err(invalid(
                    "query",
                    "semantic_match needs the condition to judge (query or condition)",
                ));
            }
            Some(Evaluator::SemanticMatch) if !ctx.judge => {
                return Err(invalid(
                    "evaluator",
                    "semantic_match needs a model to judge it and none is configured: use \
                     text_contains, or configure the built-in runtime's model",
                ));
            }
            Some(_) if source == Source::Time => {
                return Err(invalid("evaluator", "a time watcher has no evaluator"));
            }
            Some(Evaluator::HashChange | Evaluator::TextContains | Evaluator::SemanticMatch)
            | None => {}
        }

        let url = string(p, "url")?.map(str::to_owned);
        let address = string(p, "address")?.map(str::to_owned);
        let number = string(p, "number")?.map(str::to_owned);
        let match_any = boolean(p, "match_any")?.unwrap_or(false);
        let thread_id = integer(p, "thread_id")?;
        if thread_id.is_some_and(|t| t <= 0) {
            return Err(invalid("thread_id", "must be a positive thread id"));
        }
        let direction = match string(p, "direction")?.map(str::to_lowercase).as_deref() {
            None | Some("any") => None,
            Some("incoming") => Some(CallDirection::Incoming),
            Some("outgoing") => Some(CallDirection::Outgoing),
            Some(other) => {
                return Err(invalid(
                    "direction",
                    format!("unknown direction {other:?}: use any, incoming or outgoing"),
                ));
            }
        };
        let deadline_at = integer(p, "deadline_at")?
            .filter(|d| *d != 0)
            .map(|d| time("deadline_at", d))
            .transpose()?;
        let recurring = boolean(p, "recurring")?.unwrap_or(false);
        let schedule = object(p, "schedule")?;
        let next_run_at = match integer(p, "next_run_at")?.filter(|t| *t != 0) {
            Some(t) => Some(time("next_run_at", t)?),
            None => schedule
                .map(|s| integer(s, "next_run_at"))
                .transpose()
                .map_err(|_| invalid("schedule.next_run_at", "must be an integer"))?
                .flatten()
                .filter(|t| *t != 0)
                .map(|t| time("schedule.next_run_at", t))
                .transpose()?,
        };
        let interval_ms = match integer(p, "interval_ms")?.filter(|i| *i != 0) {
            Some(i) => Some(i),
            None => schedule
                .map(|s| integer(s, "interval_ms"))
                .transpose()
                .map_err(|_| invalid("schedule.interval_ms", "must be an integer"))?
                .flatten()
                .filter(|i| *i != 0),
        };
        if let Some(i) = interval_ms
            && !(MIN_INTERVAL_MS..=MAX_INTERVAL_MS).contains(&i)
        {
            return Err(invalid(
                "interval_ms",
                format!("must be between {MIN_INTERVAL_MS} ms and one year"),
            ));
        }
        let notify_on = match string(p, "notify_on")?.map(str::to_lowercase).as_deref() {
            None => NotifyOn::Match,
            Some("reply" | "call" | "match" | "change" | "notification") => NotifyOn::Match,
            Some("no_reply") if source == Source::Message => NotifyOn::Absence,
            Some("no_call") if source == Source::Call => NotifyOn::Absence,
            Some(other) => {
                return Err(invalid(
                    "notify_on",
                    format!(
                        "{other:?} does not apply to a {} watcher: message watchers take reply \
                         or no_reply, call watchers call or no_call",
                        source.as_str()
                    ),
                ));
            }
        };
        if deadline_at.is_some() && !matches!(source, Source::Message | Source::Call) {
            return Err(invalid(
                "deadline_at",
                "applies to message and call watchers (a time watcher takes next_run_at)",
            ));
        }
        if notify_on == NotifyOn::Absence {
            let Some(deadline) = deadline_at else {
                return Err(invalid(
                    "deadline_at",
                    "no_reply and no_call need the cut-off time",
                ));
            };
            if deadline <= ctx.now_ms {
                return Err(invalid("deadline_at", "is already in the past"));
            }
            if recurring {
                return Err(invalid(
                    "recurring",
                    "a no_reply or no_call watcher fires at most once, at its deadline",
                ));
            }
        }
        match source {
            Source::Message => {
                if address.is_none() && thread_id.is_none() && !match_any && query.is_none() {
                    return Err(invalid(
                        "address",
                        "say whose messages to watch: address, thread_id, or match_any=true",
                    ));
                }
            }
            Source::Call => {
                if number.is_none() && !match_any {
                    return Err(invalid(
                        "number",
                        "say whose calls to watch: number, or match_any=true for any caller",
                    ));
                }
            }
            Source::Notification => {
                if query.is_none() && !match_any {
                    return Err(invalid(
                        "query",
                        "say which notifications: a query, or match_any=true for every one",
                    ));
                }
            }
            Source::Web => {
                let url = url
                    .as_deref()
                    .ok_or_else(|| invalid("url", "a web watcher needs the page's address"))?;
                if !http_url(url) {
                    return Err(invalid("url", "must be an http(s) URL"));
                }
            }
            Source::Screen => {}
            Source::Time => {
                if next_run_at.is_none() {
                    return Err(invalid(
                        "next_run_at",
                        "a time watcher needs when to fire (next_run_at, Unix ms)",
                    ));
                }
                if recurring && interval_ms.is_none() {
                    return Err(invalid(
                        "interval_ms",
                        "a recurring time watcher needs its repeat interval",
                    ));
                }
            }
        }
        let interval_ms = match source {
            Source::Web => Some(interval_ms.unwrap_or(DEFAULT_WEB_INTERVAL_MS)),
            Source::Screen => Some(interval_ms.unwrap_or(DEFAULT_SCREEN_INTERVAL_MS)),
            Source::Time => interval_ms,
            Source::Message | Source::Call | Source::Notification => None,
        };
        let recurring = recurring || (source == Source::Time && interval_ms.is_some());
        let reaction = reaction(p, source, address.as_deref(), number.as_deref(), ctx)?;
        Ok(WatcherSpec {
            title,
            source,
            evaluator,
            query,
            condition,
            url,
            address,
            number,
            match_any,
            direction,
            thread_id,
            deadline_at,
            notify_on,
            recurring,
            next_run_at,
            interval_ms,
            reaction,
        })
    }

    /// The canonical params the store keeps (`source` first-class, defaults written out).
    pub fn to_params(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// Reads the canonical params back (what [`WatcherSpec::to_params`] wrote).
    pub fn from_stored(params: &Value) -> Result<WatcherSpec, WatchersError> {
        serde_json::from_value(params.clone()).map_err(|e| WatchersError::Invalid {
            field: "params".to_owned(),
            message: format!("a stored watcher no longer reads: {e}"),
        })
    }
}

/// The reaction: `delivery.prompt` / `prompt`, `delivery.tool` + `delivery.arguments` /
/// `tool` + `arguments`, the legacy `sms_body`, or none.
fn reaction(
    p: &Map<String, Value>,
    source: Source,
    address: Option<&str>,
    number: Option<&str>,
    ctx: &SpecContext<'_>,
) -> Result<Reaction, WatchersError> {
    let delivery = object(p, "delivery")?;
    let empty = Map::new();
    let d = delivery.unwrap_or(&empty);
    let field = |key: &str| {
        if d.contains_key(key) {
            format!("delivery.{key}")
        } else {
            key.to_owned()
        }
    };
    let pick_string = |key: &str| -> Result<Option<String>, WatchersError> {
        match string(d, key).map_err(|_| invalid(&format!("delivery.{key}"), "must be a string"))? {
            Some(v) => Ok(Some(v.to_owned())),
            None => Ok(string(p, key)?.map(str::to_owned)),
        }
    };
    let mode = string(d, "mode")
        .map_err(|_| invalid("delivery.mode", "must be a string"))?
        .map(str::to_lowercase);
    let notify = boolean(d, "notify")
        .map_err(|_| invalid("delivery.notify", "must be true or false"))?
        .unwrap_or(true);
    let silent = !notify || mode.as_deref() == Some("silent");
    let prompt = pick_string("prompt")?;
    let tool = pick_string("tool")?;
    let notification_text = string(d, "notification_text")
        .map_err(|_| invalid("delivery.notification_text", "must be a string"))?
        .map(str::to_owned);
    let session_target = string(d, "session_target")
        .map_err(|_| invalid("delivery.session_target", "must be a string"))?
        .map(str::to_owned);
    let arguments = match object(d, "arguments")
        .map_err(|_| invalid("delivery.arguments", "must be an object"))?
    {
        Some(a) => Some(a.clone()),
        None => object(p, "arguments")?.cloned(),
    };
    let sms_body = string(p, "sms_body")?;
    match mode.as_deref() {
        None
        | Some(
            "notification" | "silent" | "none" | "background_job" | "agent_job" | "agent" | "tool",
        ) => {}
        Some(other) => {
            return Err(invalid(
                "delivery.mode",
                format!(
                    "unknown mode {other:?}: use notification, silent, background_job or give \
                     delivery.tool"
                ),
            ));
        }
    }
    if prompt.is_some() && (tool.is_some() || sms_body.is_some()) {
        return Err(invalid(
            &field("prompt"),
            "give a prompt (an agent reaction) or a tool call, not both",
        ));
    }
    if let Some(text) = &notification_text {
        template::check("delivery.notification_text", text)?;
    }
    if let Some(prompt) = prompt {
        if !ctx.jobs {
            return Err(invalid(
                &field("prompt"),
                "background jobs are not available in this daemon, so no agent reaction can run",
            ));
        }
        template::check(&field("prompt"), &prompt)?;
        if let Some(target) = &session_target
            && !(target == "isolated" || target == "main" || target.starts_with("session:"))
        {
            return Err(invalid(
                "delivery.session_target",
                "must be isolated, main or session:<id>",
            ));
        }
        return Ok(Reaction::Prompt {
            prompt,
            silent,
            notification_text,
            session_target,
        });
    }
    if matches!(
        mode.as_deref(),
        Some("background_job" | "agent_job" | "agent")
    ) {
        return Err(invalid(
            "delivery.prompt",
            "a background_job reaction needs the prompt the agent works from",
        ));
    }
    let (tool, arguments) = match (tool, sms_body) {
        (Some(tool), _) => (tool, arguments.unwrap_or_default()),
        (None, Some(body)) => {
            // The legacy shortcut: reply with an SMS.
            let to = match (source, address, number) {
                (Source::Message, Some(a), _) => a.to_owned(),
                (Source::Call, _, Some(n)) => n.to_owned(),
                (Source::Call, _, None) => "{{event.number}}".to_owned(),
                (Source::Message, None, _)
                | (Source::Notification | Source::Screen | Source::Time | Source::Web, _, _) => {
                    "{{event.address}}".to_owned()
                }
            };
            let mut args = Map::new();
            args.insert("to".into(), Value::String(to));
            args.insert("body".into(), Value::String(body.to_owned()));
            ("openphone.messages.send".to_owned(), args)
        }
        (None, None) => {
            if arguments.is_some() {
                return Err(invalid(
                    &field("arguments"),
                    "arguments need the tool they are for",
                ));
            }
            return Ok(Reaction::Attention);
        }
    };
    if !ctx.jobs {
        return Err(invalid(
            &field("tool"),
            "background jobs are not available in this daemon, so no stored tool call can run",
        ));
    }
    let command = ctx.registry.resolve(&tool).ok_or_else(|| {
        invalid(
            &field("tool"),
            format!("{tool:?} is not a command of the manifest"),
        )
    })?;
    let arguments_value = Value::Object(arguments.clone());
    template::check_value(&field("arguments"), &arguments_value)?;
    // The call as it will run: with a reason (the runner adds one when there is none).
    let mut with_reason = arguments.clone();
    with_reason
        .entry("reason")
        .or_insert_with(|| Value::String("a watcher fired".to_owned()));
    if let Err(errors) = ctx
        .registry
        .validate_params(command, &Value::Object(with_reason))
    {
        let first = errors
            .iter()
            .map(|e| {
                if e.field.is_empty() {
                    e.message.clone()
                } else {
                    format!("{}: {}", e.field, e.message)
                }
            })
            .collect::<Vec<_>>()
            .join("; ");
        return Err(invalid(
            &field("arguments"),
            format!("do not fit {}: {first}", command.name),
        ));
    }
    Ok(Reaction::Tool {
        tool: command.name.clone(),
        arguments,
        silent,
    })
}
