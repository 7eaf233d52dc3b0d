//! The simulated phone.
//!
//! [`SimPhone`] keeps one [`SimState`] behind a mutex. Each command runs as one step:
//! lock → build the current screen from the state if the command needs it → apply the
//! command's effect → (mutating commands) append to the action log → unlock. A command that
//! fails leaves the state exactly as it was (mutating commands run on a copy that is only
//! kept on success; the copy shares the state's parts until it writes to one, see
//! [`Shared`]).

mod actions;
mod commands;
mod dialogs;
mod dispatch;
mod journal;
mod model;
mod render;
mod scenario;
mod screens;
mod state;
mod time;
mod view;
mod world;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use openphone_clock::{Clock, ManualClock};
use openphone_protocol::Registry;
use serde_json::Value;

use crate::world::{DeviceEvent, Injection, PageContent, SystemNotification};
use crate::{CallOrigin, DeviceAnswer, DeviceCall, DeviceError, PhoneDevice, PhoneProfile};

pub use journal::StateSink;
pub use scenario::{DEFAULT_SCENARIO, ScenarioError, validate};
pub use state::*;

use commands::Handler;

/// Platform name reported in the profile.
pub(crate) const PLATFORM: &str = "simulated";

/// Most action-log entries kept (the oldest are dropped first).
pub(crate) const ACTION_LOG_LIMIT: usize = 10_000;

/// Device events a slow subscriber may lag behind before it loses the oldest.
const EVENT_BUFFER: usize = 256;

/// The longest the timeline driver sleeps before it reads the clock again.
const TIMELINE_RECHECK_MS: i64 = 1_000;

/// What one timeline entry did when it fired ([`SimPhone::fire_due`]).
#[derive(Debug, Clone, PartialEq)]
pub struct TimelineFired {
    /// The entry's index in `timeline`.
    pub index: usize,
    /// When it was due (Unix ms).
    pub due_ms: i64,
    /// The events it raised (none for a web page, or when it failed).
    pub events: Vec<DeviceEvent>,
    /// Why it could not be applied (it still counts as fired: it is never retried).
    pub error: Option<DeviceError>,
}

/// (canonical name, handler) for every command the simulated phone implements. Whether a
/// command changes state is read from the manifest (`mutating`), never decided here.
const COMMANDS: &[(&str, Handler)] = &[
    ("openphone.device.status", commands::device_status),
    ("openphone.apps.search", commands::apps_search),
    ("openphone.screen.get", commands::screen_get),
    (
        "openphone.screen.understand_local",
        commands::screen_understand,
    ),
    ("openphone.notifications.list", commands::notifications_list),
    (
        "openphone.notifications.search",
        commands::notifications_search,
    ),
    ("openphone.notifications.open", commands::notifications_open),
    ("openphone.contacts.search", commands::contacts_search),
    ("openphone.calendar.search", commands::calendar_search),
    ("openphone.calendar.add", commands::calendar_add),
    ("openphone.calendar.update", commands::calendar_update),
    ("openphone.calendar.delete", commands::calendar_delete),
    ("openphone.messages.search", commands::messages_search),
    ("openphone.messages.draft", commands::messages_draft),
    ("openphone.messages.send", commands::messages_send),
    ("openphone.calls.search", commands::calls_search),
    ("openphone.calls.place", commands::calls_place),
    ("openphone.app.open", commands::app_open),
    ("openphone.url.open", commands::url_open),
    ("openphone.ui.tap", commands::ui_tap),
    ("openphone.ui.tap_element", commands::ui_tap_element),
    ("openphone.ui.long_press", commands::ui_long_press),
    (
        "openphone.ui.long_press_element",
        commands::ui_long_press_element,
    ),
    ("openphone.ui.swipe", commands::ui_swipe),
    ("openphone.ui.type_text", commands::ui_type_text),
    ("openphone.input.press_key", commands::press_key),
    ("openphone.clipboard.set", commands::clipboard_set),
    ("openphone.clipboard.paste", commands::clipboard_paste),
    ("openphone.share.text", commands::share_text),
];

fn command(tool: &str) -> Option<&'static (&'static str, Handler)> {
    COMMANDS.iter().find(|(name, _)| *name == tool)
}

/// Whether a command changes state, as the command manifest says (the phone keeps no list of
/// its own).
fn manifest_mutating(tool: &str) -> Result<bool, DeviceError> {
    let registry = Registry::embedded().map_err(|e| DeviceError::Internal {
        message: format!("the command manifest did not load: {e}"),
    })?;
    registry
        .resolve(tool)
        .map(|c| c.mutating)
        .ok_or_else(|| DeviceError::UnsupportedTool {
            tool: tool.to_owned(),
        })
}

/// A simulated Android phone with real state: apps and screens, contacts, calendar,
/// messages, calls, notifications, clipboard, share sheet and browser.
#[derive(Debug)]
pub struct SimPhone {
    state: Mutex<SimState>,
    clock: Arc<dyn Clock>,
    online: AtomicBool,
    events: tokio::sync::broadcast::Sender<DeviceEvent>,
    /// Changes since the last save, and where the state is saved (`journal.rs`).
    journal: journal::Journal,
    /// The last `screen.get` answers, valid while the journal's generation and the time
    /// bucket are those they were built at (`commands/screen.rs`).
    screen_cache: Mutex<commands::ScreenCache>,
    /// The last plain `device.status` answer, valid under the same conditions plus the same
    /// local minute and next event (`commands/status.rs`).
    status_cache: Mutex<commands::StatusCache>,
}

impl SimPhone {
    /// A phone in `state` (a scenario or an earlier [`SimPhone::snapshot`]), with time from
    /// `clock`. The state is validated first.
    pub fn new(mut state: SimState, clock: Arc<dyn Clock>) -> Result<Self, ScenarioError> {
        validate(&state)?;
        // Never hand out an id that is already taken.
        let floor = {
            let mut probe = state.clone();
            probe.next_id = 0;
            probe.fresh_id()
        };
        state.next_id = state.next_id.max(floor);
        let (events, _) = tokio::sync::broadcast::channel(EVENT_BUFFER);
        Ok(Self {
            state: Mutex::new(state),
            clock,
            online: AtomicBool::new(true),
            events,
            journal: journal::Journal::default(),
            screen_cache: Mutex::new(commands::ScreenCache::default()),
            status_cache: Mutex::new(commands::StatusCache::default()),
        })
    }

    /// Restores a phone from a persisted snapshot (same as [`SimPhone::new`]).
    pub fn from_state(state: SimState, clock: Arc<dyn Clock>) -> Result<Self, ScenarioError> {
        Self::new(state, clock)
    }

    /// The built-in demo scenario on a [`ManualClock`] standing at the scenario's start.
    /// Returns the clock too, so callers can move time.
    pub fn demo() -> Result<(Self, ManualClock), ScenarioError> {
        let state = SimState::default_scenario()?;
        let clock = ManualClock::new(state.clock.start_ms);
        let phone = Self::new(state, Arc::new(clock.clone()))?;
        Ok((phone, clock))
    }

    /// The built-in demo scenario moved to the day of `clock`'s "now" (times of day kept),
    /// on that clock: what a daemon running on the system clock starts with.
    pub fn with_default_scenario(clock: Arc<dyn Clock>) -> Result<Self, ScenarioError> {
        let mut state = SimState::default_scenario()?;
        state.shift_to_day_of(clock.now_ms());
        Self::new(state, clock)
    }

    /// A copy of the whole state (serialisable; restore with [`SimPhone::from_state`]).
    pub fn snapshot(&self) -> SimState {
        self.lock().clone()
    }

    /// Every executed mutating command so far, oldest first.
    pub fn action_log(&self) -> Vec<ActionRecord> {
        self.lock().action_log.iter().cloned().collect()
    }

    /// The clock the phone reads.
    pub fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.clock)
    }

    /// Simulates losing (or regaining) the connection: while offline every command fails
    /// with `device_offline`.
    pub fn set_online(&self, online: bool) {
        self.online.store(online, Ordering::SeqCst);
    }

    /// The canonical names of the commands this phone implements.
    pub fn tools() -> impl Iterator<Item = &'static str> {
        COMMANDS.iter().map(|(name, _)| *name)
    }

    /// Whether the simulated phone treats `tool` as state-changing (logged, transactional):
    /// exactly the manifest's `mutating` flag.
    pub fn is_mutating(tool: &str) -> Option<bool> {
        command(tool).and_then(|(name, _)| manifest_mutating(name).ok())
    }

    fn lock(&self) -> MutexGuard<'_, SimState> {
        // A panic while holding the lock cannot leave a half-applied command (mutating
        // commands work on a copy), so a poisoned lock is still consistent.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs a command synchronously by its canonical name, resolving it from the embedded
    /// manifest: a convenience for direct use (benches, examples, tests). The bridge goes
    /// through [`PhoneDevice::execute`] with the command it already resolved.
    pub fn execute_sync(&self, tool: &str, params: &Value) -> Result<Value, DeviceError> {
        let registry = Registry::embedded().map_err(|e| DeviceError::Internal {
            message: format!("the command manifest did not load: {e}"),
        })?;
        let Some(command) = registry.resolve(tool).filter(|c| c.name == tool) else {
            return Err(DeviceError::UnsupportedTool {
                tool: tool.to_string(),
            });
        };
        self.dispatch(DeviceCall {
            command,
            params,
            origin: &CallOrigin::default(),
        })
    }
}

impl SimPhone {
    /// Runs `change` on a copy of the state (without the action log) that replaces the state
    /// only when it succeeds: the world moves like a command does, all or nothing.
    fn transact<T>(
        &self,
        change: impl FnOnce(&mut SimState) -> Result<T, DeviceError>,
    ) -> Result<T, DeviceError> {
        let mut guard = self.lock();
        let log = std::mem::take(&mut guard.action_log);
        let mut work = guard.clone();
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| change(&mut work)));
        match ran {
            Ok(Ok(value)) => {
                work.action_log = log;
                *guard = work;
                self.journal.bump();
                Ok(value)
            }
            Ok(Err(e)) => {
                guard.action_log = log;
                Err(e)
            }
            Err(panic) => {
                guard.action_log = log;
                std::panic::resume_unwind(panic);
            }
        }
    }

    /// Hands events to the subscribers (none listening is not an error).
    fn raise(&self, events: &[DeviceEvent]) {
        for event in events {
            let _ = self.events.send(event.clone());
        }
    }

    fn check_online(&self) -> Result<(), DeviceError> {
        if self.online.load(Ordering::SeqCst) {
            Ok(())
        } else {
            Err(DeviceError::DeviceOffline {
                reason: "the simulated phone was switched offline".into(),
            })
        }
    }

    /// Makes something happen (what [`PhoneDevice::inject`] does), returning every event it
    /// raised: a message raises `MessageReceived` and then the Messages app's
    /// `NotificationPosted`; a missed call `CallReceived` and the missed-call notification.
    pub fn inject_all(&self, injection: &Injection) -> Result<Vec<DeviceEvent>, DeviceError> {
        self.check_online()?;
        let now = self.clock.now_ms();
        let events = self.transact(|st| world::inject(st, injection, now))?;
        self.raise(&events);
        Ok(events)
    }

    /// Adds a web page to the simulated web, or replaces the page with the same URL (what a
    /// timeline's `web_page` entry does). Nothing on the screen changes until the page is
    /// loaded again.
    pub fn put_web_page(&self, page: WebPage) -> Result<(), DeviceError> {
        scenario::check_page(&page).map_err(|e| DeviceError::invalid("web_page", e.to_string()))?;
        self.transact(|st| {
            world::put_page(st, page);
            Ok(())
        })
    }

    /// When the next timeline entry that has not fired is due (Unix ms), if any.
    pub fn next_due(&self) -> Option<i64> {
        let st = self.lock();
        let start = st.clock.start_ms;
        st.timeline
            .iter()
            .filter(|e| !e.fired)
            .map(|e| e.due_ms(start))
            .min()
    }

    /// Fires every timeline entry due at `now_ms` that has not fired yet, earliest first
    /// (entries due at the same time in file order), each once: its `fired` mark is part of
    /// the same state change. An entry that cannot be applied (a notification action on a
    /// key that is gone, say) is marked fired too and reported with its error.
    pub fn fire_due(&self, now_ms: i64) -> Vec<TimelineFired> {
        let mut out = Vec::new();
        loop {
            let next = {
                let st = self.lock();
                let start = st.clock.start_ms;
                st.timeline
                    .iter()
                    .enumerate()
                    .filter(|(_, e)| !e.fired && e.due_ms(start) <= now_ms)
                    .min_by_key(|(i, e)| (e.due_ms(start), *i))
                    .map(|(i, e)| (i, e.due_ms(start), e.clone()))
            };
            let Some((index, due_ms, entry)) = next else {
                break;
            };
            let applied = self.transact(|st| {
                if let Some(e) = st.timeline.get_mut(index) {
                    e.fired = true;
                }
                let mut events = Vec::new();
                if let Some(injection) = &entry.inject {
                    events = world::inject(st, injection, now_ms)?;
                }
                if let Some(page) = &entry.web_page {
                    world::put_page(st, page.clone());
                }
                Ok(events)
            });
            let fired = match applied {
                Ok(events) => {
                    self.raise(&events);
                    TimelineFired {
                        index,
                        due_ms,
                        events,
                        error: None,
                    }
                }
                Err(error) => {
                    let mut st = self.lock();
                    if let Some(e) = st.timeline.get_mut(index) {
                        e.fired = true;
                        self.journal.bump();
                    }
                    drop(st);
                    tracing::warn!(index, %error, "a timeline entry could not be applied");
                    TimelineFired {
                        index,
                        due_ms,
                        events: Vec::new(),
                        error: Some(error),
                    }
                }
            };
            out.push(fired);
        }
        out
    }

    /// The timeline's driver (the daemon spawns it): fires the entries as the phone's clock
    /// reaches them until `shutdown` resolves. It sleeps at most a second at a time, so a
    /// clock that jumps is noticed.
    pub async fn run_timeline(&self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        loop {
            let now = self.clock.now_ms();
            self.fire_due(now);
            let Some(due) = self.next_due() else {
                // Nothing left to fire: the timeline never grows while the phone runs.
                shutdown.await;
                return;
            };
            let wait = due.saturating_sub(now).clamp(1, TIMELINE_RECHECK_MS);
            let wait = std::time::Duration::from_millis(u64::try_from(wait).unwrap_or(1));
            tokio::select! {
                () = &mut shutdown => return,
                () = tokio::time::sleep(wait) => {}
            }
        }
    }
}

#[async_trait]
impl PhoneDevice for SimPhone {
    fn profile(&self) -> PhoneProfile {
        let st = self.lock();
        PhoneProfile {
            platform: PLATFORM.to_string(),
            model: st.device.model.clone(),
            os_version: st.device.os_version.clone(),
            screen_width: st.device.screen.width,
            screen_height: st.device.screen.height,
            supported_tools: Self::tools().map(str::to_string).collect(),
        }
    }

    fn supports(&self, tool: &str) -> bool {
        command(tool).is_some()
    }

    async fn execute(&self, call: DeviceCall<'_>) -> Result<Value, DeviceError> {
        let result = self.dispatch(call);
        if call.command.mutating {
            // Answered only once saved (when the phone is kept on disk): an error may come
            // after a change too (an OS dialog the command raised).
            self.settle().await;
        }
        result
    }

    /// [`PhoneDevice::execute`], answering a cached `screen.get` or plain `device.status` with
    /// its kept text stamped with the call's time; the same run otherwise.
    async fn execute_for_text(&self, call: DeviceCall<'_>) -> Result<DeviceAnswer, DeviceError> {
        let ran = self.run(call);
        if call.command.mutating {
            // As `execute`: answered only once saved.
            self.settle().await;
        }
        ran.map(dispatch::Ran::into_answer)
    }

    async fn resolve_dialog(&self, dialog_id: &str, accept: bool) -> Result<Value, DeviceError> {
        let answered = self.resolve_dialog_now(dialog_id, accept);
        // Answered only once saved, like a command (an error may follow a change too).
        self.settle().await;
        answered
    }

    fn subscribe(&self) -> Option<tokio::sync::broadcast::Receiver<DeviceEvent>> {
        Some(self.events.subscribe())
    }

    async fn inject(&self, injection: &Injection) -> Result<DeviceEvent, DeviceError> {
        let events = SimPhone::inject_all(self, injection)?;
        self.settle().await;
        events
            .into_iter()
            .next()
            .ok_or_else(|| DeviceError::Internal {
                message: "the injection raised no event".into(),
            })
    }

    async fn inject_all(&self, injection: &Injection) -> Result<Vec<DeviceEvent>, DeviceError> {
        let events = SimPhone::inject_all(self, injection)?;
        self.settle().await;
        Ok(events)
    }

    async fn post_notification(
        &self,
        notification: &SystemNotification,
    ) -> Result<String, DeviceError> {
        self.check_online()?;
        let now = self.clock.now_ms();
        let events = self.transact(|st| world::post_system(st, notification, now))?;
        self.raise(&events);
        self.settle().await;
        Ok(notification.key.trim().to_owned())
    }

    async fn withdraw_notification(&self, key: &str) -> Result<bool, DeviceError> {
        self.check_online()?;
        let withdrawn = self.transact(|st| Ok(world::withdraw_system(st, key.trim())))?;
        self.settle().await;
        Ok(withdrawn)
    }

    async fn fetch_page(&self, url: &str) -> Result<PageContent, DeviceError> {
        self.check_online()?;
        let url = url.trim();
        if !scenario::http_url(url) {
            return Err(DeviceError::invalid("url", "must be an http(s) URL"));
        }
        let st = self.lock();
        Ok(match screens::find_page(&st, url) {
            Some(page) => {
                let mut lines = page.paragraphs.clone();
                lines.extend(page.links.iter().map(|l| format!("{} <{}>", l.text, l.url)));
                PageContent {
                    url: url.to_owned(),
                    title: page.title.clone(),
                    text: lines.join("\n"),
                }
            }
            // The generic page the Browser shows for an unknown site.
            None => PageContent {
                url: url.to_owned(),
                title: screens::host_of(url).to_owned(),
                text: format!(
                    "This is a simulated page for {url}.\nNothing else is known about this site."
                ),
            },
        })
    }
}

/// The JSON Schema of scenario files (and snapshots), generated from the types.
pub fn scenario_schema() -> Value {
    serde_json::to_value(schemars::schema_for!(SimState)).unwrap_or(Value::Null)
}
