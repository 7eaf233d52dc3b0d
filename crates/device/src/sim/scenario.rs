//! Loading and checking scenario files (the JSON form of [`SimState`]).
//!
//! Loading happens in two steps: serde (through `serde_path_to_error`) turns the text into a
//! typed state and reports type errors with the path of the offending field
//! (`contacts[2].phones[0].number: invalid type: integer `5`, expected a string`); then
//! [`validate`] checks what types cannot say — unique ids, references between records,
//! ranges — again naming the field.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::model::looks_like_number;
use super::state::{NotificationTarget, SCENARIO_VERSION, SimState, WebPage};
use crate::world::{Injection, OPENPHONE_PACKAGE};

/// The built-in demo scenario.
pub const DEFAULT_SCENARIO: &str = include_str!("../../scenarios/default.json");

/// Why a scenario (or a persisted state) was rejected.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The JSON is well-formed but a field is wrong; `path` names it (`contacts[2].name`,
    /// `.` for the document itself).
    #[error("{path}: {message}")]
    Invalid {
        /// Path of the offending field.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The text is not JSON.
    #[error("not valid JSON (line {line}, column {column}): {message}")]
    Syntax {
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The parser's message.
        message: String,
    },
    /// The file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

impl ScenarioError {
    fn invalid(path: impl Into<String>, message: impl Into<String>) -> Self {
        ScenarioError::Invalid {
            path: path.into(),
            message: message.into(),
        }
    }

    /// The same error with its path put under `prefix` (`links[0].url` under `web_pages[2]`).
    fn under(self, prefix: &str) -> Self {
        match self {
            ScenarioError::Invalid { path, message } => ScenarioError::Invalid {
                path: format!("{prefix}.{path}"),
                message,
            },
            other => other,
        }
    }

    /// The path of the offending field, when the error is about one.
    pub fn path(&self) -> Option<&str> {
        match self {
            ScenarioError::Invalid { path, .. } => Some(path),
            ScenarioError::Syntax { .. } | ScenarioError::Io { .. } => None,
        }
    }
}

impl SimState {
    /// Parses and validates a scenario.
    pub fn from_json(text: &str) -> Result<SimState, ScenarioError> {
        let mut de = serde_json::Deserializer::from_str(text);
        let state: SimState = serde_path_to_error::deserialize(&mut de).map_err(|err| {
            let path = err.path().to_string();
            let inner = err.into_inner();
            if inner.is_syntax() || inner.is_eof() {
                ScenarioError::Syntax {
                    line: inner.line(),
                    column: inner.column(),
                    message: strip_position(&inner.to_string()),
                }
            } else {
                ScenarioError::invalid(path, strip_position(&inner.to_string()))
            }
        })?;
        de.end().map_err(|inner| ScenarioError::Syntax {
            line: inner.line(),
            column: inner.column(),
            message: strip_position(&inner.to_string()),
        })?;
        validate(&state)?;
        Ok(state)
    }

    /// Reads, parses and validates a scenario file.
    pub fn from_file(path: &Path) -> Result<SimState, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_json(&text)
    }

    /// The built-in demo scenario.
    pub fn default_scenario() -> Result<SimState, ScenarioError> {
        Self::from_json(DEFAULT_SCENARIO)
    }

    /// The state as pretty JSON (a valid scenario).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|_| "{}".into())
    }

    /// Shifts every timestamp by whole days so that the scenario's start day becomes the
    /// day of `now_ms` (time of day is kept). Lets a daemon on the system clock show "today"
    /// with the demo's calendar.
    pub fn shift_to_day_of(&mut self, now_ms: i64) {
        let off = self.clock.utc_offset_minutes;
        let days =
            super::time::local_day(now_ms, off) - super::time::local_day(self.clock.start_ms, off);
        let delta = days * super::time::DAY_MS;
        if delta == 0 {
            return;
        }
        self.clock.start_ms += delta;
        for e in &mut self.events {
            e.start_ms += delta;
            e.end_ms += delta;
        }
        for t in &mut self.threads {
            for m in &mut t.messages {
                m.at_ms += delta;
            }
        }
        for n in &mut self.notifications {
            n.posted_ms += delta;
        }
        for c in &mut self.calls {
            c.at_ms += delta;
        }
        for n in &mut self.notes {
            n.updated_ms += delta;
        }
        for s in &mut self.shares {
            s.at_ms += delta;
        }
        for d in &mut self.drafts {
            d.at_ms += delta;
        }
        for p in &mut self.photos {
            p.taken_ms += delta;
        }
        for e in &mut self.timeline {
            if let Some(at) = &mut e.at_ms {
                *at += delta;
            }
        }
    }
}

fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

fn unique<T: std::hash::Hash + Eq>(
    seen: &mut HashSet<T>,
    value: T,
    path: String,
    what: &str,
) -> Result<(), ScenarioError> {
    if seen.insert(value) {
        Ok(())
    } else {
        Err(ScenarioError::invalid(path, format!("duplicate {what}")))
    }
}

fn non_empty(text: &str, path: String) -> Result<(), ScenarioError> {
    if text.trim().is_empty() {
        Err(ScenarioError::invalid(path, "must not be empty"))
    } else {
        Ok(())
    }
}

/// Element ids the system frame uses on every screen.
const RESERVED_IDS: &[&str] = &[
    "root",
    "status_bar",
    "status_time",
    "status_icons",
    "content",
    "app_bar",
    "nav_up",
    "title",
    "notice",
    "empty",
    "nav_bar",
    "nav_back",
    "nav_home",
    "nav_recents",
    "menu",
    "menu_scrim",
    "menu_title",
    "share_scrim",
    "share_sheet",
];

/// Timestamps must lie between 1970 and 9999 so that time arithmetic cannot overflow.
fn time_ok(ms: i64, path: impl FnOnce() -> String) -> Result<(), ScenarioError> {
    if (0..=MAX_TIME_MS).contains(&ms) {
        Ok(())
    } else {
        Err(ScenarioError::invalid(
            path(),
            "must be Unix milliseconds between 1970 and 9999",
        ))
    }
}

const MAX_TIME_MS: i64 = 253_402_300_799_999;

pub(crate) fn http_url(url: &str) -> bool {
    (url.starts_with("https://") || url.starts_with("http://"))
        && url.len() > 8
        && !url.contains(char::is_whitespace)
}

/// Checks what the types cannot: versions, ranges, unique ids and references.
#[allow(clippy::too_many_lines)]
pub fn validate(st: &SimState) -> Result<(), ScenarioError> {
    if st.version != SCENARIO_VERSION {
        return Err(ScenarioError::invalid(
            "version",
            format!(
                "unsupported version {} (expected {SCENARIO_VERSION})",
                st.version
            ),
        ));
    }
    let screen = st.device.screen;
    if !(320..=4096).contains(&screen.width) {
        return Err(ScenarioError::invalid(
            "device.screen.width",
            "must be between 320 and 4096",
        ));
    }
    if !(480..=4096).contains(&screen.height) {
        return Err(ScenarioError::invalid(
            "device.screen.height",
            "must be between 480 and 4096",
        ));
    }
    if st.device.battery_percent > 100 {
        return Err(ScenarioError::invalid(
            "device.battery_percent",
            "must be between 0 and 100",
        ));
    }
    time_ok(st.clock.start_ms, || "clock.start_ms".into())?;
    if !(-720..=840).contains(&st.clock.utc_offset_minutes) {
        return Err(ScenarioError::invalid(
            "clock.utc_offset_minutes",
            "must be between -720 and 840",
        ));
    }
    let mut packages = HashSet::new();
    let mut roles = HashSet::new();
    for (i, app) in st.apps.iter().enumerate() {
        non_empty(&app.package, format!("apps[{i}].package"))?;
        non_empty(&app.label, format!("apps[{i}].label"))?;
        unique(
            &mut packages,
            app.package.as_str(),
            format!("apps[{i}].package"),
            "package",
        )?;
        if let Some(role) = app.role {
            unique(
                &mut roles,
                role,
                format!("apps[{i}].role"),
                "role (one app per role)",
            )?;
            if !app.screens.is_empty() {
                return Err(ScenarioError::invalid(
                    format!("apps[{i}].screens"),
                    "an app with a role cannot have declarative screens",
                ));
            }
        }
        let ids: HashSet<&str> = app.screens.iter().map(|s| s.id.as_str()).collect();
        let mut seen = HashSet::new();
        for (j, screen) in app.screens.iter().enumerate() {
            non_empty(&screen.id, format!("apps[{i}].screens[{j}].id"))?;
            unique(
                &mut seen,
                screen.id.as_str(),
                format!("apps[{i}].screens[{j}].id"),
                "screen id",
            )?;
            let mut element_ids: HashSet<&str> = RESERVED_IDS.iter().copied().collect();
            for (k, el) in screen.elements.iter().enumerate() {
                let path = format!("apps[{i}].screens[{j}].elements[{k}]");
                non_empty(&el.id, format!("{path}.id"))?;
                unique(
                    &mut element_ids,
                    el.id.as_str(),
                    format!("{path}.id"),
                    "element id (it is taken or reserved by the system frame)",
                )?;
                if let Some(target) = &el.navigate
                    && !ids.contains(target.as_str())
                {
                    return Err(ScenarioError::invalid(
                        format!("{path}.navigate"),
                        format!("no screen `{target}` in this app"),
                    ));
                }
            }
        }
    }
    let mut ids = HashSet::new();
    for (i, c) in st.contacts.iter().enumerate() {
        unique(&mut ids, c.id, format!("contacts[{i}].id"), "contact id")?;
        non_empty(&c.name, format!("contacts[{i}].name"))?;
        for (j, phone) in c.phones.iter().enumerate() {
            if !looks_like_number(&phone.number) {
                return Err(ScenarioError::invalid(
                    format!("contacts[{i}].phones[{j}].number"),
                    "not a phone number",
                ));
            }
        }
        for (j, email) in c.emails.iter().enumerate() {
            if !email.address.contains('@') {
                return Err(ScenarioError::invalid(
                    format!("contacts[{i}].emails[{j}].address"),
                    "not an email address",
                ));
            }
        }
    }
    let mut ids = HashSet::new();
    for (i, c) in st.calendars.iter().enumerate() {
        unique(&mut ids, c.id, format!("calendars[{i}].id"), "calendar id")?;
        non_empty(&c.name, format!("calendars[{i}].name"))?;
    }
    let calendar_ids = ids;
    let mut ids = HashSet::new();
    for (i, e) in st.events.iter().enumerate() {
        unique(&mut ids, e.id, format!("events[{i}].id"), "event id")?;
        non_empty(&e.title, format!("events[{i}].title"))?;
        if !calendar_ids.contains(&e.calendar_id) {
            return Err(ScenarioError::invalid(
                format!("events[{i}].calendar_id"),
                format!("no calendar with id {}", e.calendar_id),
            ));
        }
        time_ok(e.start_ms, || format!("events[{i}].start_ms"))?;
        time_ok(e.end_ms, || format!("events[{i}].end_ms"))?;
        if e.end_ms <= e.start_ms {
            return Err(ScenarioError::invalid(
                format!("events[{i}].end_ms"),
                "must be after start_ms",
            ));
        }
    }
    let event_ids = ids;
    let mut ids = HashSet::new();
    let mut message_ids = HashSet::new();
    for (i, t) in st.threads.iter().enumerate() {
        unique(&mut ids, t.id, format!("threads[{i}].id"), "thread id")?;
        non_empty(&t.address, format!("threads[{i}].address"))?;
        for (j, m) in t.messages.iter().enumerate() {
            unique(
                &mut message_ids,
                m.id,
                format!("threads[{i}].messages[{j}].id"),
                "message id",
            )?;
            time_ok(m.at_ms, || format!("threads[{i}].messages[{j}].at_ms"))?;
        }
    }
    let thread_ids = ids;
    let mut keys = HashSet::new();
    for (i, n) in st.notifications.iter().enumerate() {
        non_empty(&n.key, format!("notifications[{i}].key"))?;
        unique(
            &mut keys,
            n.key.as_str(),
            format!("notifications[{i}].key"),
            "notification key",
        )?;
        time_ok(n.posted_ms, || format!("notifications[{i}].posted_ms"))?;
        let mut action_ids = HashSet::new();
        for (j, a) in n.actions.iter().enumerate() {
            non_empty(&a.id, format!("notifications[{i}].actions[{j}].id"))?;
            non_empty(&a.label, format!("notifications[{i}].actions[{j}].label"))?;
            unique(
                &mut action_ids,
                a.id.as_str(),
                format!("notifications[{i}].actions[{j}].id"),
                "action id",
            )?;
        }
        let path = format!("notifications[{i}].target");
        if n.package == OPENPHONE_PACKAGE {
            // The runtime's own notification: no app behind it, it leads nowhere.
            if n.target != NotificationTarget::App {
                return Err(ScenarioError::invalid(
                    path,
                    "the runtime's own notifications have target `app`",
                ));
            }
            continue;
        }
        let Some(app) = st.app(&n.package) else {
            return Err(ScenarioError::invalid(
                format!("notifications[{i}].package"),
                format!("no installed app `{}`", n.package),
            ));
        };
        match &n.target {
            NotificationTarget::App | NotificationTarget::CallLog => {}
            NotificationTarget::Thread { thread_id } => {
                if !thread_ids.contains(thread_id) {
                    return Err(ScenarioError::invalid(
                        format!("{path}.thread_id"),
                        format!("no thread with id {thread_id}"),
                    ));
                }
            }
            NotificationTarget::Event { event_id } => {
                if !event_ids.contains(event_id) {
                    return Err(ScenarioError::invalid(
                        format!("{path}.event_id"),
                        format!("no event with id {event_id}"),
                    ));
                }
            }
            NotificationTarget::Url { url } => {
                if !http_url(url) {
                    return Err(ScenarioError::invalid(
                        format!("{path}.url"),
                        "must be an http(s) URL",
                    ));
                }
            }
            NotificationTarget::Screen { screen_id } => {
                if !app.screens.iter().any(|s| &s.id == screen_id) {
                    return Err(ScenarioError::invalid(
                        format!("{path}.screen_id"),
                        format!("app `{}` has no screen `{screen_id}`", n.package),
                    ));
                }
            }
        }
    }
    let mut ids = HashSet::new();
    for (i, c) in st.calls.iter().enumerate() {
        unique(&mut ids, c.id, format!("calls[{i}].id"), "call id")?;
        if !looks_like_number(&c.number) {
            return Err(ScenarioError::invalid(
                format!("calls[{i}].number"),
                "not a phone number",
            ));
        }
        time_ok(c.at_ms, || format!("calls[{i}].at_ms"))?;
        if !(0..=31_536_000).contains(&c.duration_s) {
            return Err(ScenarioError::invalid(
                format!("calls[{i}].duration_s"),
                "must be between 0 and one year",
            ));
        }
    }
    if let Some(active) = st.active_call
        && !ids.contains(&active)
    {
        return Err(ScenarioError::invalid(
            "active_call",
            format!("no call with id {active}"),
        ));
    }
    let mut ids = HashSet::new();
    for (i, a) in st.alarms.iter().enumerate() {
        unique(&mut ids, a.id, format!("alarms[{i}].id"), "alarm id")?;
        if a.hour > 23 {
            return Err(ScenarioError::invalid(
                format!("alarms[{i}].hour"),
                "must be 0-23",
            ));
        }
        if a.minute > 59 {
            return Err(ScenarioError::invalid(
                format!("alarms[{i}].minute"),
                "must be 0-59",
            ));
        }
    }
    let mut ids = HashSet::new();
    for (i, n) in st.notes.iter().enumerate() {
        unique(&mut ids, n.id, format!("notes[{i}].id"), "note id")?;
    }
    let mut urls = HashSet::new();
    for (i, page) in st.web_pages.iter().enumerate() {
        check_page(page).map_err(|e| e.under(&format!("web_pages[{i}]")))?;
        unique(
            &mut urls,
            page.url.trim_end_matches('/'),
            format!("web_pages[{i}].url"),
            "page URL",
        )?;
    }
    check_timeline(st)?;
    if st.browser.position > 0 && st.browser.position >= st.browser.history.len() {
        return Err(ScenarioError::invalid(
            "browser.position",
            "outside the history",
        ));
    }
    let mut tasks = HashSet::new();
    for (i, task) in st.nav.tasks.iter().enumerate() {
        if st.app(&task.package).is_none() {
            return Err(ScenarioError::invalid(
                format!("nav.tasks[{i}].package"),
                format!("no installed app `{}`", task.package),
            ));
        }
        unique(
            &mut tasks,
            task.package.as_str(),
            format!("nav.tasks[{i}].package"),
            "task",
        )?;
        if task.stack.is_empty() {
            return Err(ScenarioError::invalid(
                format!("nav.tasks[{i}].stack"),
                "must not be empty",
            ));
        }
    }
    if let Some(fg) = &st.nav.foreground
        && !tasks.contains(fg.as_str())
    {
        return Err(ScenarioError::invalid(
            "nav.foreground",
            format!("no task for `{fg}`"),
        ));
    }
    super::dialogs::check(st)
}

/// A web page's URLs are http(s).
pub(crate) fn check_page(page: &WebPage) -> Result<(), ScenarioError> {
    if !http_url(&page.url) {
        return Err(ScenarioError::invalid("url", "must be an http(s) URL"));
    }
    for (j, link) in page.links.iter().enumerate() {
        if !http_url(&link.url) {
            return Err(ScenarioError::invalid(
                format!("links[{j}].url"),
                "must be an http(s) URL",
            ));
        }
    }
    Ok(())
}

/// Each timeline entry says when (one of `at_ms`, `after_ms`) and what (one of `inject`,
/// `web_page`), with sensible values; what an injection names (a contact, an app, a
/// notification key) is looked up when it fires, since the state changes until then.
fn check_timeline(st: &SimState) -> Result<(), ScenarioError> {
    for (i, entry) in st.timeline.iter().enumerate() {
        let path = |field: &str| format!("timeline[{i}].{field}");
        match (entry.at_ms, entry.after_ms) {
            (Some(at), None) => time_ok(at, || path("at_ms"))?,
            (None, Some(after)) => {
                if !(0..=MAX_TIME_MS).contains(&after) {
                    return Err(ScenarioError::invalid(
                        path("after_ms"),
                        "must be between 0 and the year 9999",
                    ));
                }
                time_ok(entry.due_ms(st.clock.start_ms), || path("after_ms"))?;
            }
            _ => {
                return Err(ScenarioError::invalid(
                    format!("timeline[{i}]"),
                    "give exactly one of at_ms and after_ms",
                ));
            }
        }
        match (&entry.inject, &entry.web_page) {
            (Some(injection), None) => {
                check_injection(injection).map_err(|e| e.under(&format!("timeline[{i}].inject")))?
            }
            (None, Some(page)) => {
                check_page(page).map_err(|e| e.under(&format!("timeline[{i}].web_page")))?;
            }
            _ => {
                return Err(ScenarioError::invalid(
                    format!("timeline[{i}]"),
                    "give exactly one of inject and web_page",
                ));
            }
        }
    }
    Ok(())
}

fn check_injection(injection: &Injection) -> Result<(), ScenarioError> {
    match injection {
        Injection::Message { address, text } => {
            non_empty(address, "address".into())?;
            non_empty(text, "text".into())
        }
        Injection::Call { number, outcome } => {
            non_empty(number, "number".into())?;
            match outcome.as_deref().map(str::trim) {
                None | Some("missed" | "answered" | "rejected") => Ok(()),
                Some(_) => Err(ScenarioError::invalid(
                    "outcome",
                    "must be missed, answered or rejected",
                )),
            }
        }
        Injection::Notification { app, title, .. } => {
            non_empty(app, "app".into())?;
            non_empty(title, "title".into())
        }
        Injection::NotificationAction { key, action } => {
            non_empty(key, "key".into())?;
            non_empty(action, "action".into())
        }
    }
}
