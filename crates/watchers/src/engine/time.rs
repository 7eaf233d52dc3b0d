//! Time: `time` watchers fire when due (a recurring one moves to its next occurrence,
//! missed ones collapsed) and deadlines pass (`no_reply` / `no_call` fire, the others end);
//! [`Watchers::tick`] also hands `screen` and `web` watchers to their checks (`poll.rs`).

#![deny(clippy::wildcard_enum_match_arm)]

use serde_json::{Map, json};

use super::{Fired, Watchers, cursor_i64};
use crate::error::WatchersError;
use crate::spec::{NotifyOn, Source, WatcherSpec};
use openphone_store::WatcherRecord;

impl Watchers {
    /// Everything due at `now_ms`: time watchers, deadlines, and the checks of `screen` and
    /// `web` watchers. Returns the firings.
    pub async fn tick(&self, now_ms: i64) -> Vec<Fired> {
        let _serial = self.serial.lock().await;
        let mut fired = Vec::new();
        for (w, spec) in self.active() {
            let outcome = match spec.source {
                Source::Time => self.tick_time(&w, &spec, now_ms).await,
                Source::Message | Source::Call => self.tick_deadline(&w, &spec, now_ms).await,
                Source::Screen | Source::Web => self.tick_poll(&w, &spec, now_ms).await,
                Source::Notification => Ok(None),
            };
            match outcome {
                Ok(Some(f)) => fired.push(f),
                Ok(None) => {}
                Err(e) => {
                    tracing::error!(watcher = w.watcher_id, error = %e, "a watcher could not fire");
                }
            }
        }
        fired
    }

    /// When the next tick has something to do (Unix ms): the first time watcher's occurrence,
    /// message or call deadline, or screen/web check; `None` when no active watcher is due
    /// by time (notifications, messages without a deadline). A poll never checked is due now.
    pub fn next_due(&self, now_ms: i64) -> Option<i64> {
        self.active()
            .iter()
            .filter_map(|(w, spec)| match spec.source {
                Source::Time => cursor_i64(&w.cursor, "next_at").or(spec.next_run_at),
                Source::Message | Source::Call => spec.deadline_at,
                Source::Screen | Source::Web => {
                    Some(cursor_i64(&w.cursor, "next_check_at").unwrap_or(now_ms))
                }
                Source::Notification => None,
            })
            .min()
    }

    async fn tick_time(
        &self,
        w: &WatcherRecord,
        spec: &WatcherSpec,
        now: i64,
    ) -> Result<Option<Fired>, WatchersError> {
        let Some(due) = cursor_i64(&w.cursor, "next_at").or(spec.next_run_at) else {
            return Ok(None);
        };
        if now < due {
            return Ok(None);
        }
        let (end, cursor) = match spec.interval_ms.filter(|_| spec.recurring) {
            // The next occurrence after now; missed ones collapse into this firing.
            Some(interval) if interval > 0 => {
                let next = due + interval * ((now - due) / interval + 1);
                (false, Some(json!({ "next_at": next })))
            }
            _ => (true, None),
        };
        let mut event = Map::new();
        event.insert("kind".into(), json!("time"));
        event.insert("at_ms".into(), json!(due));
        event.insert("title".into(), json!(spec.title));
        self.fire(
            w,
            spec,
            "time",
            event,
            format!("time:{due}"),
            end,
            cursor,
            now,
        )
        .await
    }

    async fn tick_deadline(
        &self,
        w: &WatcherRecord,
        spec: &WatcherSpec,
        now: i64,
    ) -> Result<Option<Fired>, WatchersError> {
        let Some(deadline) = spec.deadline_at else {
            return Ok(None);
        };
        if now < deadline {
            return Ok(None);
        }
        // A creator that may no longer read what the watcher watches is not told whether
        // something came: the watcher ends quietly.
        if let Some(why) = self.creators_refusal(w, spec) {
            tracing::warn!(watcher = w.watcher_id, runtime = %w.runtime, reason = %why,
                "watchers: the creator may not read what the watcher watches; it ends");
            self.store.end_watcher(w.watcher_id, "not_granted", now)?;
            return Ok(None);
        }
        if spec.notify_on == NotifyOn::Match {
            // The cut-off passed without a match: nothing to say.
            self.store
                .end_watcher(w.watcher_id, "deadline_passed", now)?;
            return Ok(None);
        }
        let mut event = Map::new();
        event.insert("kind".into(), json!("deadline_passed"));
        event.insert("deadline_at".into(), json!(deadline));
        event.insert("at_ms".into(), json!(now));
        for (key, value) in [
            ("address", spec.address.as_ref().map(|a| json!(a))),
            ("number", spec.number.as_ref().map(|n| json!(n))),
            ("thread_id", spec.thread_id.map(|t| json!(t))),
        ] {
            if let Some(v) = value {
                event.insert(key.into(), v);
            }
        }
        self.fire(
            w,
            spec,
            "deadline",
            event,
            "deadline".to_owned(),
            true,
            None,
            now,
        )
        .await
    }
}
