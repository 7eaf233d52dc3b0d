//! Polls: a `screen` or `web` watcher is read when its check is due (the screen with its
//! creator's authority, the page through the bridge) and fires on a change (`hash_change`)
//! or when the text starts to match (`text_contains`, `semantic_match`); the check's state
//! lives in the watcher's cursor.

#![deny(clippy::wildcard_enum_match_arm)]

use openphone_core::Invocation;
use openphone_protocol::{ToolRequest, ToolStatus};
use openphone_store::WatcherRecord;
use serde_json::{Map, Value, json};

use super::events::contains_ci;
use super::{Fired, RUNTIME_PRINCIPAL, Watchers, cursor_i64};
use crate::error::WatchersError;
use crate::spec::{Evaluator, Source, WatcherSpec};

/// The command a `screen` watcher reads with.
const SCREEN_READ: &str = "openphone.screen.get";

/// A read of what a polled watcher watches.
struct Reading {
    content: String,
    event: Map<String, Value>,
}

impl Watchers {
    async fn read(
        &self,
        w: &WatcherRecord,
        spec: &WatcherSpec,
        now: i64,
    ) -> Result<Reading, String> {
        let mut event = Map::new();
        event.insert("at_ms".into(), json!(now));
        match spec.source {
            Source::Web => {
                let url = spec.url.as_deref().unwrap_or_default();
                let page = self
                    .bridge
                    .fetch_page(url)
                    .await
                    .map_err(|e| e.to_string())?;
                let content = format!("{}\n{}", page.title, page.text);
                event.insert("kind".into(), json!("page_changed"));
                event.insert("url".into(), json!(page.url));
                event.insert("title".into(), json!(page.title));
                event.insert("text".into(), json!(page.text));
                Ok(Reading { content, event })
            }
            Source::Screen => {
                // Read with the creator's authority (`builtin` narrowed to it).
                let authority = crate::authority::of(&self.bridge, &w.runtime, RUNTIME_PRINCIPAL);
                if let Some(why) =
                    crate::authority::refusal_of(self.registry, &authority, SCREEN_READ)
                {
                    return Err(format!("tool_not_granted: {why}"));
                }
                let request = ToolRequest {
                    request_id: format!("watcher-{}-check-{now}", w.watcher_id),
                    runtime: Some(openphone_protocol::BUILTIN_RUNTIME_ID.to_owned()),
                    runtime_session_id: openphone_protocol::watcher_session(w.watcher_id),
                    phone_session_id: None,
                    tool: SCREEN_READ.to_owned(),
                    params: json!({"include_screenshot": false, "include_ui_tree": false}),
                    reason: Some(format!("Watcher {} checks the screen", w.watcher_id)),
                    autonomy: None,
                    idempotency_key: None,
                    timeout_ms: None,
                };
                let result = self
                    .bridge
                    .call(Invocation::watcher(
                        authority.caller(),
                        w.watcher_id,
                        request,
                    ))
                    .await;
                if result.status != ToolStatus::Ok {
                    return Err(result
                        .error
                        .map_or_else(|| result.status.as_str().to_owned(), |e| e.message));
                }
                let lines: Vec<&str> = result
                    .result
                    .get("visible_text")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let content = lines.join("\n");
                event.insert("kind".into(), json!("screen_changed"));
                if let Some(title) = result.result.get("title") {
                    event.insert("title".into(), title.clone());
                }
                if let Some(package) = result.result.get("package") {
                    event.insert("package".into(), package.clone());
                }
                event.insert("text".into(), json!(content));
                Ok(Reading { content, event })
            }
            // Only `screen` and `web` watchers are polled ([`Watchers::tick`]).
            Source::Message | Source::Call | Source::Notification | Source::Time => {
                Err(format!("a {} watcher is not polled", spec.source.as_str()))
            }
        }
    }

    pub(super) async fn tick_poll(
        &self,
        w: &WatcherRecord,
        spec: &WatcherSpec,
        now: i64,
    ) -> Result<Option<Fired>, WatchersError> {
        if cursor_i64(&w.cursor, "next_check_at").is_some_and(|at| now < at) {
            return Ok(None);
        }
        let interval = spec
            .interval_ms
            .unwrap_or(crate::spec::DEFAULT_WEB_INTERVAL_MS);
        let mut cursor = w.cursor.as_object().cloned().unwrap_or_default();
        cursor.insert("next_check_at".into(), json!(now + interval));
        let reading = match self.read(w, spec, now).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(watcher = w.watcher_id, error = %e, "watchers: a check could not read");
                cursor.insert("last_error".into(), json!(e));
                self.store
                    .set_watcher_cursor(w.watcher_id, &Value::Object(cursor))?;
                return Ok(None);
            }
        };
        cursor.remove("last_error");
        let hash = openphone_protocol::digest::sha256_hex(&reading.content);
        let previous = cursor
            .get("hash")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let was_matching = cursor
            .get("matching")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        cursor.insert("hash".into(), json!(hash));
        let fire = match spec.evaluator {
            None | Some(Evaluator::HashChange) => previous.is_some_and(|p| p != hash),
            Some(Evaluator::TextContains) => {
                let now_matching = spec
                    .query
                    .as_deref()
                    .is_some_and(|q| contains_ci(&reading.content, q));
                cursor.insert("matching".into(), json!(now_matching));
                now_matching && !was_matching
            }
            Some(Evaluator::SemanticMatch) => {
                let now_matching = self.judged(spec, &reading.content).await;
                cursor.insert("matching".into(), json!(now_matching));
                now_matching && !was_matching
            }
        };
        let cursor = Value::Object(cursor);
        if !fire {
            self.store.set_watcher_cursor(w.watcher_id, &cursor)?;
            return Ok(None);
        }
        let mut event = reading.event;
        event.insert("hash".into(), json!(hash));
        self.fire(
            w,
            spec,
            "poll",
            event,
            format!("poll:{hash}:{now}"),
            !spec.recurring,
            Some(cursor),
            now,
        )
        .await
    }
}
