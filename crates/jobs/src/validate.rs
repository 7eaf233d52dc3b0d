//! Creating a job (`agent-jobs.md` §5): the arguments as given, and their normalisation into
//! the record the store keeps. Every refusal is an [`InvalidJob`] naming the field, answered
//! as `invalid_params`.

use std::fmt;

use serde_json::{Map, Value};

use crate::limits::create::{
    MAX_INTERVAL_MS, MAX_TIME_MS, NOTIFICATION_TEXT_MAX_CHARS, OBJECT_MAX_CHARS, PAYLOAD_MAX_CHARS,
    PROMPT_MAX_CHARS, SESSION_ID_MAX_CHARS, TITLE_MAX_CHARS,
};
use crate::model::{DeliveryMode, JobType, NewAgentJob};

/// A creation argument that breaks the rules of §5.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct InvalidJob {
    /// The argument, as a path (`title`, `schedule.interval_ms`, `delivery.mode`).
    pub field: String,
    /// What is wrong with it.
    pub problem: String,
}

impl InvalidJob {
    /// A refusal of `field`.
    pub fn new(field: impl Into<String>, problem: impl Into<String>) -> InvalidJob {
        InvalidJob {
            field: field.into(),
            problem: problem.into(),
        }
    }

    /// The wire error code: always `invalid_params`.
    pub fn code(&self) -> &'static str {
        "invalid_params"
    }
}

impl fmt::Display for InvalidJob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid_params: {} {}", self.field, self.problem)
    }
}

/// The creation arguments of a job, as the `background_job_create` tool (§10) or an operator
/// gives them. Every member is optional here; [`normalise`] decides what is required.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobRequest {
    /// Short name (required).
    pub title: Option<String>,
    /// Instructions (required for `agent_turn`).
    pub prompt: Option<String>,
    /// `agent_turn` (default), `system_event` or `heartbeat`; trimmed and lower-cased.
    pub job_type: Option<String>,
    /// `{next_run_at?, interval_ms?, …}`.
    pub schedule: Option<Map<String, Value>>,
    /// First due time (Unix ms).
    pub run_at: Option<i64>,
    /// First due time (Unix ms); wins over `run_at`.
    pub next_run_at: Option<i64>,
    /// Repeat interval (ms); wins over `schedule.interval_ms`.
    pub interval_ms: Option<i64>,
    /// `main` (default), `isolated`, `current` or `session:<id>`.
    pub session_target: Option<String>,
    /// `{mode, notification_text?, …}`.
    pub delivery: Option<Map<String, Value>>,
    /// Exact completion notification text; wins over `delivery.notification_text`.
    pub notification_text: Option<String>,
    /// Structured input for the runs.
    pub payload: Option<Map<String, Value>>,
    /// The phone its runs act on (`[[devices]] id`); the daemon's only phone when absent.
    pub device_id: Option<String>,
}

/// The members [`JobRequest::from_json`] accepts (`reason` is the tool's audit reason and is
/// not stored with the job).
const FIELDS: [&str; 13] = [
    "title",
    "prompt",
    "type",
    "schedule",
    "run_at",
    "next_run_at",
    "interval_ms",
    "session_target",
    "delivery",
    "notification_text",
    "payload",
    "reason",
    "device_id",
];

impl JobRequest {
    /// Reads the arguments from a JSON object. A `null` member counts as absent; an unknown
    /// member, or a member of the wrong type, is refused with its name.
    pub fn from_json(args: &Value) -> Result<JobRequest, InvalidJob> {
        let Value::Object(map) = args else {
            return Err(InvalidJob::new("arguments", "must be a JSON object"));
        };
        if let Some(unknown) = map.keys().find(|k| !FIELDS.contains(&k.as_str())) {
            return Err(InvalidJob::new(unknown.as_str(), "is not a job argument"));
        }
        let get = |key: &str| map.get(key).filter(|v| !v.is_null());
        Ok(JobRequest {
            title: get("title").map(|v| string(v, "title")).transpose()?,
            prompt: get("prompt").map(|v| string(v, "prompt")).transpose()?,
            job_type: get("type").map(|v| string(v, "type")).transpose()?,
            schedule: get("schedule").map(|v| object(v, "schedule")).transpose()?,
            run_at: get("run_at").map(|v| integer(v, "run_at")).transpose()?,
            next_run_at: get("next_run_at")
                .map(|v| integer(v, "next_run_at"))
                .transpose()?,
            interval_ms: get("interval_ms")
                .map(|v| integer(v, "interval_ms"))
                .transpose()?,
            session_target: get("session_target")
                .map(|v| string(v, "session_target"))
                .transpose()?,
            delivery: get("delivery").map(|v| object(v, "delivery")).transpose()?,
            notification_text: get("notification_text")
                .map(|v| string(v, "notification_text"))
                .transpose()?,
            payload: get("payload").map(|v| object(v, "payload")).transpose()?,
            device_id: get("device_id")
                .map(|v| string(v, "device_id"))
                .transpose()?
                .map(|d| d.trim().to_owned())
                .filter(|d| !d.is_empty()),
        })
    }
}

/// What creation needs to know besides the arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateContext {
    /// Now (Unix ms, the injected clock): the due time of a job given none.
    pub now_ms: i64,
    /// The phone session of the creating request, when known: `current` resolves to it.
    pub phone_session_id: Option<String>,
}

/// Normalises creation arguments into the record to store (§5):
///
/// - `title` trimmed and non-empty; `prompt` trimmed, non-empty for `agent_turn`;
/// - `type` trimmed and lower-cased, default `agent_turn`, one of the three types;
/// - the first due time is the first non-zero of `next_run_at`, `run_at`,
///   `schedule.next_run_at`, else now; negative times are refused;
/// - the interval is the first positive of `interval_ms`, `schedule.interval_ms`; negative
///   values and positive ones below the 15 s floor are refused;
/// - `schedule_json` is the given `schedule` with both written into it;
/// - `session_target` default `main`; `current` becomes `session:<id>` of the creating request
///   or `main`;
/// - `delivery` gets the type's default mode when it has none; a top-level
///   `notification_text` is written into it;
/// - `payload` default `{}`.
pub fn normalise(request: &JobRequest, ctx: &CreateContext) -> Result<NewAgentJob, InvalidJob> {
    let job_type = match request.job_type.as_deref().map(str::trim) {
        None | Some("") => JobType::AgentTurn,
        Some(text) => JobType::parse(&text.to_lowercase()).ok_or_else(|| {
            InvalidJob::new(
                "type",
                format!("must be agent_turn, system_event or heartbeat (got {text:?})"),
            )
        })?,
    };

    let title = request.title.as_deref().map(str::trim).unwrap_or_default();
    if title.is_empty() {
        return Err(InvalidJob::new(
            "title",
            "is required and must not be blank",
        ));
    }
    check_chars("title", title, TITLE_MAX_CHARS)?;

    let prompt = request.prompt.as_deref().map(str::trim).unwrap_or_default();
    if job_type == JobType::AgentTurn && prompt.is_empty() {
        return Err(InvalidJob::new(
            "prompt",
            "is required for an agent_turn job and must not be blank",
        ));
    }
    check_chars("prompt", prompt, PROMPT_MAX_CHARS)?;

    let mut schedule = request.schedule.clone().unwrap_or_default();
    let scheduled_at = schedule
        .get("next_run_at")
        .filter(|v| !v.is_null())
        .map(|v| integer(v, "schedule.next_run_at"))
        .transpose()?;
    let scheduled_interval = schedule
        .get("interval_ms")
        .filter(|v| !v.is_null())
        .map(|v| integer(v, "schedule.interval_ms"))
        .transpose()?;
    let due = [
        ("next_run_at", request.next_run_at),
        ("run_at", request.run_at),
        ("schedule.next_run_at", scheduled_at),
    ];
    for (field, value) in due {
        check_time(field, value)?;
    }
    let next_run_at = due
        .iter()
        .filter_map(|(_, v)| *v)
        .find(|v| *v != 0)
        .unwrap_or(ctx.now_ms.max(0));
    let intervals = [
        ("interval_ms", request.interval_ms),
        ("schedule.interval_ms", scheduled_interval),
    ];
    for (field, value) in intervals {
        check_interval(field, value)?;
    }
    let interval_ms = intervals
        .iter()
        .filter_map(|(_, v)| *v)
        .find(|v| *v > 0)
        .unwrap_or(0);
    schedule.insert("next_run_at".to_owned(), Value::from(next_run_at));
    schedule.insert("interval_ms".to_owned(), Value::from(interval_ms));
    check_size("schedule", &schedule, OBJECT_MAX_CHARS)?;

    let session_target = session_target(request.session_target.as_deref(), ctx)?;

    let mut delivery = request.delivery.clone().unwrap_or_default();
    match delivery.get("mode") {
        None | Some(Value::Null) => {
            let mode = DeliveryMode::default_for(job_type);
            delivery.insert("mode".to_owned(), Value::from(mode.as_str()));
        }
        Some(Value::String(mode)) if DeliveryMode::parse(mode).is_some() => {}
        Some(other) => {
            return Err(InvalidJob::new(
                "delivery.mode",
                format!("must be notification, silent or none (got {other})"),
            ));
        }
    }
    if delivery.contains_key(crate::model::ORIGIN_KEY) {
        return Err(InvalidJob::new(
            "delivery.origin",
            "is recorded by the daemon (the runtime and phone session the job is created in) \
             and cannot be given",
        ));
    }
    if let Some(text) = &request.notification_text {
        delivery.insert("notification_text".to_owned(), Value::from(text.as_str()));
    }
    match delivery.get("notification_text") {
        None => {}
        Some(Value::String(text)) => check_chars(
            "delivery.notification_text",
            text,
            NOTIFICATION_TEXT_MAX_CHARS,
        )?,
        Some(_) => {
            return Err(InvalidJob::new(
                "delivery.notification_text",
                "must be a string",
            ));
        }
    }
    check_size("delivery", &delivery, OBJECT_MAX_CHARS)?;

    let payload = request.payload.clone().unwrap_or_default();
    check_size("payload", &payload, PAYLOAD_MAX_CHARS)?;

    Ok(NewAgentJob {
        job_type,
        title: title.to_owned(),
        prompt: prompt.to_owned(),
        payload_json: payload,
        schedule_json: schedule,
        session_target,
        delivery_json: delivery,
        next_run_at,
        // The user's until the creator says otherwise (`for_creator`).
        created_by: openphone_store::OPERATOR_CREATOR.to_owned(),
    })
}

/// `new` as the job of `creator` (its `created_by`). The user's jobs (`operator`, `builtin`)
/// are left as they are. A runtime's job never reads the user's conversation, so its
/// `session_target` is checked against what `request` gave:
///
/// - none (the default `main`): `isolated`;
/// - `main`: refused — `main` is the user's latest chat with the built-in runtime;
/// - `current` without a phone session: `isolated`;
/// - `current` or `session:<id>`: only a phone session of the creating runtime itself
///   (`session_owner` gives a session's runtime, `None` when it does not exist); any other is
///   refused naming the field.
pub fn for_creator(
    mut new: NewAgentJob,
    request: &JobRequest,
    creator: &str,
    session_owner: impl Fn(&str) -> Option<String>,
) -> Result<NewAgentJob, InvalidJob> {
    const FIELD: &str = "session_target";
    new.created_by = creator.to_owned();
    if openphone_store::is_user_creator(creator) {
        return Ok(new);
    }
    let given = request
        .session_target
        .as_deref()
        .map(str::trim)
        .unwrap_or_default();
    if given == "main" {
        return Err(InvalidJob::new(
            FIELD,
            format!(
                "main is the user's own conversation, which a job of runtime `{creator}` may not \
                 read; use isolated, current or session:<id> of one of its own sessions"
            ),
        ));
    }
    if new.session_target == "main" {
        // The default, or `current` outside a phone session.
        new.session_target = "isolated".to_owned();
    }
    if let Some(id) = new.session_target.strip_prefix("session:")
        && session_owner(id).as_deref() != Some(creator)
    {
        return Err(InvalidJob::new(
            FIELD,
            format!(
                "phone session {id:?} is not a session of runtime `{creator}`; a runtime's job \
                 may read only its own sessions"
            ),
        ));
    }
    Ok(new)
}

fn session_target(given: Option<&str>, ctx: &CreateContext) -> Result<String, InvalidJob> {
    const FIELD: &str = "session_target";
    let target = given.map(str::trim).unwrap_or_default();
    match target {
        "" | "main" => Ok("main".to_owned()),
        "isolated" => Ok("isolated".to_owned()),
        "current" => Ok(ctx
            .phone_session_id
            .as_deref()
            .map(str::trim)
            .filter(|id| valid_session_id(id))
            .map_or_else(|| "main".to_owned(), |id| format!("session:{id}"))),
        other => match other.strip_prefix("session:") {
            Some(id) if valid_session_id(id) => Ok(format!("session:{id}")),
            Some(_) => Err(InvalidJob::new(
                FIELD,
                format!(
                    "session:<id> needs a non-empty id of at most {SESSION_ID_MAX_CHARS} \
                     characters without spaces or control characters"
                ),
            )),
            None => Err(InvalidJob::new(
                FIELD,
                format!("must be main, isolated, current or session:<id> (got {other:?})"),
            )),
        },
    }
}

fn valid_session_id(id: &str) -> bool {
    !id.is_empty()
        && id.chars().count() <= SESSION_ID_MAX_CHARS
        && !id.chars().any(|c| c.is_whitespace() || c.is_control())
}

fn string(value: &Value, field: &str) -> Result<String, InvalidJob> {
    value
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| InvalidJob::new(field, format!("must be a string (got {})", kind(value))))
}

fn object(value: &Value, field: &str) -> Result<Map<String, Value>, InvalidJob> {
    value
        .as_object()
        .cloned()
        .ok_or_else(|| InvalidJob::new(field, format!("must be an object (got {})", kind(value))))
}

/// The largest integer a JSON number carries exactly (2^53 − 1).
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

fn integer(value: &Value, field: &str) -> Result<i64, InvalidJob> {
    let not_integer = || {
        InvalidJob::new(
            field,
            format!("must be an integer number of milliseconds (got {value})"),
        )
    };
    let Value::Number(number) = value else {
        return Err(InvalidJob::new(
            field,
            format!("must be an integer (got {})", kind(value)),
        ));
    };
    if let Some(n) = number.as_i64() {
        return Ok(n);
    }
    if number.as_u64().is_some() {
        return Err(InvalidJob::new(field, "is too large"));
    }
    match number.as_f64() {
        #[allow(clippy::cast_possible_truncation)] // reason: checked integral and in range
        Some(f) if f.fract() == 0.0 && f.abs() <= MAX_SAFE_INTEGER => Ok(f as i64),
        _ => Err(not_integer()),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn check_time(field: &str, value: Option<i64>) -> Result<(), InvalidJob> {
    match value {
        Some(v) if v < 0 => Err(InvalidJob::new(field, "must not be negative")),
        Some(v) if v > MAX_TIME_MS => Err(InvalidJob::new(
            field,
            format!("is beyond the latest accepted time ({MAX_TIME_MS} ms)"),
        )),
        _ => Ok(()),
    }
}

fn check_interval(field: &str, value: Option<i64>) -> Result<(), InvalidJob> {
    match value {
        Some(v) if v < 0 => Err(InvalidJob::new(field, "must not be negative")),
        // A shorter interval would silently run every 15 s instead (issue 28): refused.
        Some(v) if v > 0 && v < crate::limits::INTERVAL_FLOOR_MS => Err(InvalidJob::new(
            field,
            format!(
                "is {v} ms, shorter than the shortest accepted interval ({} ms, 15 s); \
                 use 0 for a job that runs once",
                crate::limits::INTERVAL_FLOOR_MS
            ),
        )),
        Some(v) if v > MAX_INTERVAL_MS => Err(InvalidJob::new(
            field,
            format!("is longer than the longest accepted interval ({MAX_INTERVAL_MS} ms)"),
        )),
        _ => Ok(()),
    }
}

fn check_chars(field: &str, text: &str, max: usize) -> Result<(), InvalidJob> {
    let count = text.chars().count();
    if count > max {
        return Err(InvalidJob::new(
            field,
            format!("is {count} characters long, more than {max}"),
        ));
    }
    Ok(())
}

fn check_size(field: &str, map: &Map<String, Value>, max: usize) -> Result<(), InvalidJob> {
    let size = Value::Object(map.clone()).to_string().chars().count();
    if size > max {
        return Err(InvalidJob::new(
            field,
            format!("is {size} characters when serialised, more than {max}"),
        ));
    }
    Ok(())
}
