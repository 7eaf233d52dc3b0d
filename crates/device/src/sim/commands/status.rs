//! `device.status` without a `query` or `number` (what a dashboard or an agent polls): the
//! device at a glance and the next event, and the cache that answers it again.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::DeviceError;
use crate::params::Params;
use crate::sim::model::looks_like_number;
use crate::sim::screens;
use crate::sim::state::{CallType, Event, SimState};
use crate::sim::time;

use super::records::event_json;
use super::screen_brief;
use super::stamp::Kept;

/// The params of `device.status`, checked.
pub(super) struct StatusArgs<'a> {
    pub limit: usize,
    pub query: Option<&'a str>,
    pub number: Option<&'a str>,
}

impl<'a> StatusArgs<'a> {
    pub(super) fn parse(p: Params<'a>) -> Result<Self, DeviceError> {
        let limit = p.limit("limit", 5, 50)?;
        let query = p.ident_opt("query")?;
        let number = p.ident_opt("number")?;
        if let Some(n) = number
            && !looks_like_number(n)
        {
            return Err(DeviceError::invalid("number", "not a phone number"));
        }
        Ok(Self {
            limit,
            query,
            number,
        })
    }

    fn plain(&self) -> bool {
        self.query.is_none() && self.number.is_none()
    }
}

/// The `device` member of every `device.status` answer.
pub(super) fn device_json(st: &SimState, now: i64) -> Value {
    let off = st.offset();
    let today = time::local_day(now, off);
    let network = if st.settings.airplane_mode {
        "airplane_mode"
    } else if st.settings.wifi {
        "wifi"
    } else {
        "mobile"
    };
    json!({
        "platform": "simulated",
        "model": st.device.model,
        "os_version": st.device.os_version,
        "battery_percent": st.device.battery_percent,
        "charging": st.device.charging,
        "network": network,
        "do_not_disturb": st.settings.do_not_disturb,
        "time": now,
        "local_time": format!("{} {}", time::iso_date(today), time::hm(now, off)),
        "utc_offset_minutes": off,
        "foreground": screen_brief(st, now),
        "unread_notifications": st.notifications.iter().filter(|n| !n.read).count(),
        "unread_messages": st.threads.iter().flat_map(|t| &t.messages).filter(|m| !m.read).count(),
        "missed_calls_today": st.calls.iter().filter(|c| c.call_type == CallType::Missed && time::local_day(c.at_ms, off) == today).count(),
        "call_in_progress": st.active_call,
    })
}

/// The index in `events` of the next event: the earliest-starting one that has not ended
/// (the first of those starting together).
fn next_event(st: &SimState, now: i64) -> Option<usize> {
    st.events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.end_ms > now)
        .min_by_key(|(_, e)| e.start_ms)
        .map(|(i, _)| i)
}

/// The answer of a plain `device.status` on `st` at `now`, built fresh.
pub(super) fn plain_status(st: &SimState, now: i64) -> Value {
    let next_event = next_event(st, now)
        .and_then(|i| st.events.get(i))
        .map(|e: &Event| event_json(st, e));
    json!({ "device": device_json(st, now), "next_event": next_event })
}

/// What a plain `device.status` answer is made of besides the state and its `time`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct StatusKey {
    /// The journal's count of changes: names the state.
    generation: u64,
    /// The screen's time bucket ([`screens::time_bucket`]): the foreground's name.
    bucket: (i64, i64),
    /// The local day (`missed_calls_today`, `local_time`) and minute (`local_time`).
    day: i64,
    minute: i64,
    /// Which event is next.
    next_event: Option<usize>,
}

/// The last plain `device.status` answer and what it was built from: a call with the same
/// [`StatusKey`] gets it again (shared: the caller copies it with its own `time` after
/// letting go of the locks, see [`Kept`]; everything else in the answer is a
/// function of the key's parts and the state). A query or a number is answered fresh.
#[derive(Debug, Default)]
pub(crate) struct StatusCache {
    last: Option<(StatusKey, Arc<Kept>)>,
}

impl StatusCache {
    /// A plain `device.status` on `st` (generation `generation`) at `now`, equal to the
    /// handler's answer once [`Kept::stamped`] with `now`; `None` when `p` asks about a
    /// contact or number (the handler answers that).
    pub(crate) fn device_status(
        &mut self,
        st: &SimState,
        now: i64,
        generation: u64,
        p: Params<'_>,
    ) -> Result<Option<Arc<Kept>>, DeviceError> {
        if !StatusArgs::parse(p)?.plain() {
            return Ok(None);
        }
        let off = st.offset();
        let key = StatusKey {
            generation,
            bucket: screens::time_bucket(st, now),
            day: time::local_day(now, off),
            minute: time::minute_of_day(now, off),
            next_event: next_event(st, now),
        };
        if let Some((built, answer)) = &self.last
            && *built == key
        {
            return Ok(Some(Arc::clone(answer)));
        }
        let answer = Arc::new(Kept::new(plain_status(st, now), DEVICE_TIME));
        self.last = Some((key, Arc::clone(&answer)));
        Ok(Some(answer))
    }
}

/// Where a plain `device.status` answer holds its time.
const DEVICE_TIME: &[&str] = &["device", "time"];
