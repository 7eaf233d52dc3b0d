//! The phone's records through Android's content providers (`content query|insert|update|
//! delete`): contacts and calendar (the shell user holds READ/WRITE_CONTACTS and
//! READ/WRITE_CALENDAR), SMS and the call log (refused on phones where the shell lacks the
//! permission: `unsupported_on_device`), and notifications (`dumpsys notification`).

use std::collections::BTreeMap;

use openphone_device::{DeviceError, EntityKind};
use serde_json::{Value, json};

use super::apps::{numbers_match, unsupported};
use super::params::Params;
use crate::parse;
use crate::phone::AdbPhone;
use crate::shell;

const CONTACTS_URI: &str = "content://com.android.contacts/data/phones";
const CONTACT_KEYS: &[&str] = &["contact_id", "display_name", "data1"];
const EVENTS_URI: &str = "content://com.android.calendar/events";
const EVENT_KEYS: &[&str] = &[
    "_id",
    "title",
    "dtstart",
    "dtend",
    "eventLocation",
    "description",
];
const SMS_KEYS: &[&str] = &[
    "_id",
    "thread_id",
    "address",
    "body",
    "date",
    "type",
    "read",
];
const CALL_KEYS: &[&str] = &["_id", "number", "type", "date", "duration"];

fn contains_ci(hay: &str, needle: &str) -> bool {
    hay.to_lowercase().contains(&needle.to_lowercase())
}

fn null_is_empty(v: Option<&String>) -> String {
    match v.map(String::as_str) {
        None | Some("NULL") => String::new(),
        Some(s) => s.to_owned(),
    }
}

fn int(v: Option<&String>) -> Option<i64> {
    v.and_then(|s| s.trim().parse().ok())
}

fn event_json(row: &BTreeMap<String, String>) -> Value {
    json!({
        "event_id": int(row.get("_id")),
        "title": null_is_empty(row.get("title")),
        "description": null_is_empty(row.get("description")),
        "location": null_is_empty(row.get("eventLocation")),
        "start_at": int(row.get("dtstart")),
        "end_at": int(row.get("dtend")),
    })
}

impl AdbPhone {
    /// `content query` with a projection; a permission denial is `Err(denial line)`.
    async fn query(
        &self,
        uri: &str,
        keys: &[&str],
    ) -> Result<Result<Vec<BTreeMap<String, String>>, String>, DeviceError> {
        let cmd = shell::line(
            "content",
            &["query", "--uri", uri, "--projection", &keys.join(":")],
        );
        let out = self.shell(&cmd).await?;
        if let Some(denial) = parse::provider_denial(&out) {
            return Ok(Err(denial));
        }
        if !out.contains("Row: ")
            && let Some(error) = parse::provider_error(&out)
        {
            return Err(DeviceError::Internal {
                message: format!("`content query --uri {uri}` failed: {error}"),
            });
        }
        let rows = parse::content_rows(&out, keys);
        self.check_row_ids(uri, keys, &rows).await?;
        Ok(Ok(rows))
    }

    /// Text a user controls (an event's description, a message body) can hold a line that
    /// reads like another row (`\nRow: 9 _id=42, …`). The rows' ids, queried alone (numbers
    /// only, nothing to forge), must be exactly the ids parsed from the full query, in order;
    /// otherwise the answer is refused rather than acting on a forged row.
    async fn check_row_ids(
        &self,
        uri: &str,
        keys: &[&str],
        rows: &[BTreeMap<String, String>],
    ) -> Result<(), DeviceError> {
        let Some(id_key) = keys.first() else {
            return Ok(());
        };
        let cmd = shell::line("content", &["query", "--uri", uri, "--projection", id_key]);
        let out = self.shell(&cmd).await?;
        let ids: Vec<Option<&String>> = rows.iter().map(|r| r.get(*id_key)).collect();
        let only = parse::content_rows(&out, &[id_key]);
        let truth: Vec<Option<&String>> = only.iter().map(|r| r.get(*id_key)).collect();
        if ids != truth {
            return Err(DeviceError::Internal {
                message: format!(
                    "the rows of {uri} could not be read unambiguously: {} rows parsed, the \
                     provider has {} (a text value holds something that reads like a row); \
                     nothing was acted on — look at it on the phone's screen instead",
                    ids.len(),
                    truth.len()
                ),
            });
        }
        Ok(())
    }

    /// Every contact (grouped from its phone rows) matching `query`, the simulated phone's
    /// shape with details.
    pub(crate) async fn contacts_matching(
        &self,
        query: Option<&str>,
    ) -> Result<Vec<Value>, DeviceError> {
        let rows = self.query(CONTACTS_URI, CONTACT_KEYS).await?.map_err(|denial| {
            unsupported(
                "openphone.contacts.search",
                &format!("the contacts provider refused the shell user: {denial}"),
                "grant the shell READ_CONTACTS (it holds it on stock Android) or search in the Contacts app on screen",
            )
        })?;
        let mut contacts: Vec<(i64, String, Vec<String>)> = Vec::new();
        for row in &rows {
            let id = int(row.get("contact_id")).unwrap_or(0);
            let name = null_is_empty(row.get("display_name"));
            let number = null_is_empty(row.get("data1"));
            match contacts.iter_mut().find(|(cid, _, _)| *cid == id) {
                Some((_, _, numbers)) => numbers.push(number),
                None => contacts.push((id, name, vec![number])),
            }
        }
        let matches = |(_, name, numbers): &(i64, String, Vec<String>)| {
            query.is_none_or(|q| {
                contains_ci(name, q) || numbers.iter().any(|n| numbers_match(n, q) || n.contains(q))
            })
        };
        let mut found: Vec<&(i64, String, Vec<String>)> =
            contacts.iter().filter(|c| matches(c)).collect();
        found.sort_by_key(|(_, name, _)| name.to_lowercase());
        Ok(found
            .into_iter()
            .map(|(id, name, numbers)| {
                json!({
                    "contact_id": id,
                    "name": name,
                    "phones": numbers.iter().filter(|n| !n.is_empty()).map(|n| json!({ "number": n })).collect::<Vec<_>>(),
                })
            })
            .collect())
    }

    /// `openphone.contacts.search`.
    pub(crate) async fn contacts_search(&self, p: Params<'_>) -> Result<Value, DeviceError> {
        let query = p.ident_opt("query")?;
        let limit = p.limit("limit", 20, 200)?;
        let details = p.bool_opt("include_details")?.unwrap_or(false);
        let all = self.contacts_matching(query).await?;
        let total = all.len();
        let list: Vec<Value> = all
            .into_iter()
            .take(limit)
            .map(|mut c| {
                if !details && let Some(map) = c.as_object_mut() {
                    map.remove("phones");
                }
                c
            })
            .collect();
        Ok(json!({ "count": list.len(), "total": total, "contacts": list }))
    }

    async fn events(&self) -> Result<Vec<BTreeMap<String, String>>, DeviceError> {
        self.query(EVENTS_URI, EVENT_KEYS).await?.map_err(|denial| {
            unsupported(
                "openphone.calendar.search",
                &format!("the calendar provider refused the shell user: {denial}"),
                "use the Calendar app on screen",
            )
        })
    }

    /// `openphone.calendar.search`.
    pub(crate) async fn calendar_search(&self, p: Params<'_>) -> Result<Value, DeviceError> {
        let query = p.ident_opt("query")?;
        let start = p.i64_opt("start_at")?.filter(|s| *s > 0);
        let end = p.i64_opt("end_at")?.filter(|e| *e > 0);
        let limit = p.limit("limit", 50, 500)?;
        if let (Some(s), Some(e)) = (start, end)
            && e < s
        {
            return Err(DeviceError::invalid(
                "end_at",
                "must not be before start_at",
            ));
        }
        let mut events: Vec<Value> = self
            .events()
            .await?
            .iter()
            .map(event_json)
            .filter(|e| {
                let (es, ee) = (
                    e["start_at"].as_i64().unwrap_or(0),
                    e["end_at"].as_i64().unwrap_or(0),
                );
                start.is_none_or(|s| ee > s)
                    && end.is_none_or(|en| es < en || (es == en && ee == en))
            })
            .filter(|e| {
                query.is_none_or(|q| {
                    ["title", "description", "location"]
                        .iter()
                        .any(|k| e[*k].as_str().is_some_and(|v| contains_ci(v, q)))
                })
            })
            .collect();
        events.sort_by_key(|e| (e["start_at"].as_i64(), e["event_id"].as_i64()));
        let total = events.len();
        events.truncate(limit);
        Ok(json!({ "count": events.len(), "total": total, "events": events }))
    }

    async fn find_event(&self, id: i64) -> Result<Value, DeviceError> {
        self.events()
            .await?
            .iter()
            .map(event_json)
            .find(|e| e["event_id"].as_i64() == Some(id))
            .ok_or_else(|| DeviceError::not_found(EntityKind::Event, id))
    }

    /// The `--bind` arguments of an event's fields present in `p`.
    fn event_binds(
        p: &Params<'_>,
        start: Option<i64>,
        end: Option<i64>,
    ) -> Result<Vec<String>, DeviceError> {
        let mut binds = Vec::new();
        for (field, column) in [
            ("title", "title"),
            ("description", "description"),
            ("location", "eventLocation"),
        ] {
            if let Some(v) = p.str_opt(field)? {
                binds.push(format!("{column}:s:{v}"));
            }
        }
        if let Some(s) = start {
            binds.push(format!("dtstart:l:{s}"));
        }
        if let Some(e) = end {
            binds.push(format!("dtend:l:{e}"));
        }
        Ok(binds)
    }

    async fn content_write(
        &self,
        verb: &str,
        binds: &[String],
        where_id: Option<i64>,
    ) -> Result<(), DeviceError> {
        let mut args: Vec<String> =
            vec![verb.to_owned(), "--uri".to_owned(), EVENTS_URI.to_owned()];
        for b in binds {
            args.push("--bind".to_owned());
            args.push(b.clone());
        }
        if let Some(id) = where_id {
            args.push("--where".to_owned());
            args.push(format!("_id={id}"));
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = self.shell(&shell::line("content", &refs)).await?;
        if let Some(denial) = parse::provider_denial(&out) {
            return Err(unsupported(
                &format!("openphone.calendar.{verb}"),
                &format!("the calendar provider refused the shell user: {denial}"),
                "use the Calendar app on screen",
            ));
        }
        if let Some(error) = parse::provider_error(&out) {
            return Err(DeviceError::Internal {
                message: format!("`content {verb}` failed: {error}"),
            });
        }
        Ok(())
    }

    /// `openphone.calendar.add`: `content insert` into the events provider.
    pub(crate) async fn calendar_add(&self, p: Params<'_>) -> Result<Value, DeviceError> {
        let title = p.ident_req("title")?;
        let start = p
            .i64_opt("start_at")?
            .ok_or_else(|| DeviceError::invalid("start_at", "is required"))?;
        let end = match (
            p.i64_opt("end_at")?.filter(|e| *e > 0),
            p.i64_opt("duration_minutes")?,
        ) {
            (Some(e), _) => e,
            (None, Some(d)) if d > 0 => start + d * 60_000,
            (None, Some(_)) => {
                return Err(DeviceError::invalid("duration_minutes", "must be positive"));
            }
            (None, None) => start + 3_600_000,
        };
        if end < start {
            return Err(DeviceError::invalid(
                "end_at",
                "must not be before start_at",
            ));
        }
        let before: Vec<i64> = self
            .events()
            .await?
            .iter()
            .filter_map(|r| int(r.get("_id")))
            .collect();
        let mut binds = Self::event_binds(&p, Some(start), Some(end))?;
        let calendar = p.i64_opt("calendar_id")?.unwrap_or(1);
        binds.push(format!("calendar_id:i:{calendar}"));
        binds.push("eventTimezone:s:UTC".to_owned());
        if p.bool_opt("all_day")?.unwrap_or(false) {
            binds.push("allDay:i:1".to_owned());
        }
        self.content_write("insert", &binds, None).await?;
        let created = self
            .events()
            .await?
            .iter()
            .filter(|r| int(r.get("_id")).is_some_and(|id| !before.contains(&id)))
            .map(event_json)
            .find(|e| e["title"] == title)
            .ok_or_else(|| DeviceError::Internal {
                message: "the calendar provider accepted the event but does not list it".to_owned(),
            })?;
        Ok(json!({ "created": true, "event": created }))
    }

    /// `openphone.calendar.update`: `content update --where _id=N`.
    pub(crate) async fn calendar_update(&self, p: Params<'_>) -> Result<Value, DeviceError> {
        let id = p
            .i64_opt("event_id")?
            .ok_or_else(|| DeviceError::invalid("event_id", "is required"))?;
        let old = self.find_event(id).await?;
        let start = p.i64_opt("start_at")?;
        let end = match (
            p.i64_opt("end_at")?.filter(|e| *e > 0),
            p.i64_opt("duration_minutes")?,
        ) {
            (Some(e), _) => Some(e),
            (None, Some(d)) if d > 0 => {
                Some(start.or(old["start_at"].as_i64()).unwrap_or(0) + d * 60_000)
            }
            _ => None,
        };
        let binds = Self::event_binds(&p, start, end)?;
        if binds.is_empty() {
            return Err(DeviceError::invalid(
                "title",
                "give at least one field to change",
            ));
        }
        self.content_write("update", &binds, Some(id)).await?;
        let event = self.find_event(id).await?;
        let changed: Vec<&str> = ["title", "description", "location", "start_at", "end_at"]
            .into_iter()
            .filter(|k| old[*k] != event[*k])
            .collect();
        Ok(json!({ "updated": true, "changed": changed, "event": event }))
    }

    /// `openphone.calendar.delete`: `content delete --where _id=N`.
    pub(crate) async fn calendar_delete(&self, p: Params<'_>) -> Result<Value, DeviceError> {
        let id = p
            .i64_opt("event_id")?
            .ok_or_else(|| DeviceError::invalid("event_id", "is required"))?;
        let old = self.find_event(id).await?;
        self.content_write("delete", &[], Some(id)).await?;
        Ok(json!({ "deleted": true, "event_id": id, "title": old["title"] }))
    }

    /// A provider the shell user may be refused: the denial is remembered (so tool lists can
    /// hide the command) and answered as `unsupported_on_device`.
    async fn guarded_query(
        &self,
        tool: &str,
        uri: &str,
        keys: &[&str],
        what: &str,
        permission: &str,
    ) -> Result<Vec<BTreeMap<String, String>>, DeviceError> {
        match self.query(uri, keys).await? {
            Ok(rows) => Ok(rows),
            Err(denial) => {
                let reason = format!(
                    "this Android version does not let the shell user read {what} ({permission} is not granted to the shell): {denial}"
                );
                self.memory().denied.insert(tool.to_owned(), reason.clone());
                Err(unsupported(
                    tool,
                    &reason,
                    "open the app on screen (openphone.app.open) and read it with openphone.screen.get",
                ))
            }
        }
    }

    /// `openphone.messages.search`: `content query --uri content://sms`.
    pub(crate) async fn messages_search(&self, p: Params<'_>) -> Result<Value, DeviceError> {
        let query = p.ident_opt("query")?;
        let limit = p.limit("limit", 20, 200)?;
        let thread = p.i64_opt("thread_id")?.filter(|t| *t != 0);
        let rows = self
            .guarded_query(
                "openphone.messages.search",
                "content://sms",
                SMS_KEYS,
                "SMS",
                "READ_SMS",
            )
            .await?;
        let mut messages: Vec<Value> = rows
            .iter()
            .filter(|r| thread.is_none_or(|t| int(r.get("thread_id")) == Some(t)))
            .filter(|r| {
                query.is_none_or(|q| {
                    contains_ci(&null_is_empty(r.get("body")), q)
                        || contains_ci(&null_is_empty(r.get("address")), q)
                        || numbers_match(&null_is_empty(r.get("address")), q)
                })
            })
            .map(|r| {
                json!({
                    "message_id": int(r.get("_id")),
                    "thread_id": int(r.get("thread_id")),
                    "address": null_is_empty(r.get("address")),
                    "direction": if r.get("type").map(String::as_str) == Some("1") { "incoming" } else { "outgoing" },
                    "body": null_is_empty(r.get("body")),
                    "at": int(r.get("date")),
                    "read": r.get("read").map(String::as_str) == Some("1"),
                })
            })
            .collect();
        if let Some(t) = thread
            && messages.is_empty()
            && !rows.iter().any(|r| int(r.get("thread_id")) == Some(t))
        {
            return Err(DeviceError::not_found(EntityKind::Thread, t));
        }
        messages.sort_by_key(|m| std::cmp::Reverse((m["at"].as_i64(), m["message_id"].as_i64())));
        let total = messages.len();
        messages.truncate(limit);
        Ok(json!({ "count": messages.len(), "total": total, "messages": messages }))
    }

    /// `openphone.calls.search`: `content query --uri content://call_log/calls`.
    pub(crate) async fn calls_search(&self, p: Params<'_>) -> Result<Value, DeviceError> {
        let query = p.ident_opt("query")?;
        let kind = p.ident_opt("type")?;
        let limit = p.limit("limit", 20, 200)?;
        let since = p.i64_opt("since")?.filter(|s| *s > 0);
        let until = p.i64_opt("until")?.filter(|u| *u > 0);
        let rows = self
            .guarded_query(
                "openphone.calls.search",
                "content://call_log/calls",
                CALL_KEYS,
                "the call log",
                "READ_CALL_LOG",
            )
            .await?;
        let type_name = |t: Option<i64>| match t {
            Some(1) => "incoming",
            Some(2) => "outgoing",
            Some(3) => "missed",
            Some(4) => "voicemail",
            Some(5) => "rejected",
            Some(6) => "blocked",
            _ => "unknown",
        };
        let mut calls: Vec<Value> = rows
            .iter()
            .map(|r| {
                json!({
                    "call_id": int(r.get("_id")),
                    "number": null_is_empty(r.get("number")),
                    "type": type_name(int(r.get("type"))),
                    "at": int(r.get("date")),
                    "duration_s": int(r.get("duration")),
                })
            })
            .filter(|c| kind.is_none_or(|k| c["type"] == k))
            .filter(|c| {
                let at = c["at"].as_i64().unwrap_or(0);
                since.is_none_or(|s| at >= s) && until.is_none_or(|u| at <= u)
            })
            .filter(|c| {
                query.is_none_or(|q| {
                    c["number"]
                        .as_str()
                        .is_some_and(|n| numbers_match(n, q) || n.contains(q))
                })
            })
            .collect();
        calls.sort_by_key(|c| std::cmp::Reverse(c["at"].as_i64()));
        let total = calls.len();
        calls.truncate(limit);
        Ok(json!({ "count": calls.len(), "total": total, "calls": calls }))
    }

    async fn posted(&self) -> Result<Vec<parse::PostedNotification>, DeviceError> {
        let mut list = parse::notifications(&self.shell("dumpsys notification --noredact").await?);
        list.sort_by_key(|n| std::cmp::Reverse(n.posted_at));
        Ok(list)
    }

    fn notification_json(n: &parse::PostedNotification) -> Value {
        json!({
            "notification_key": n.key,
            "package": n.package,
            "title": n.title,
            "text": n.text,
            "posted_at": n.posted_at,
        })
    }

    /// `openphone.notifications.list`.
    pub(crate) async fn notifications_list(&self, p: Params<'_>) -> Result<Value, DeviceError> {
        let limit = p.limit("limit", 20, 100)?;
        let all = self.posted().await?;
        let list: Vec<Value> = all
            .iter()
            .take(limit)
            .map(Self::notification_json)
            .collect();
        Ok(json!({ "count": list.len(), "total": all.len(), "notifications": list }))
    }

    /// `openphone.notifications.search`.
    pub(crate) async fn notifications_search(&self, p: Params<'_>) -> Result<Value, DeviceError> {
        let query = p.ident_req("query")?;
        let limit = p.limit("limit", 20, 100)?;
        let matches: Vec<parse::PostedNotification> = self
            .posted()
            .await?
            .into_iter()
            .filter(|n| {
                contains_ci(&n.title, query)
                    || contains_ci(&n.text, query)
                    || contains_ci(&n.package, query)
            })
            .collect();
        let list: Vec<Value> = matches
            .iter()
            .take(limit)
            .map(Self::notification_json)
            .collect();
        Ok(
            json!({ "query": query, "count": list.len(), "total": matches.len(), "notifications": list }),
        )
    }

    /// `openphone.notifications.open`: the shell cannot fire a notification's intent, so the
    /// shade is opened (`cmd statusbar expand-notifications`) and the notification tapped there.
    pub(crate) async fn notifications_open(&self, p: Params<'_>) -> Result<Value, DeviceError> {
        let key = p.ident_opt("notification_key")?;
        let package = p.ident_opt("package")?;
        let query = p.ident_opt("query")?;
        if key.is_none() && package.is_none() && query.is_none() {
            return Err(DeviceError::invalid(
                "notification_key",
                "give notification_key, package or query",
            ));
        }
        let all = self.posted().await?;
        let found = all.iter().find(|n| {
            key.is_none_or(|k| n.key == k)
                && package.is_none_or(|pk| n.package == pk)
                && query.is_none_or(|q| contains_ci(&n.title, q) || contains_ci(&n.text, q))
        });
        let Some(n) = found else {
            return Err(DeviceError::not_found(
                EntityKind::Notification,
                key.or(package).or(query).unwrap_or_default(),
            ));
        };
        self.before_input().await?;
        self.shell("cmd statusbar expand-notifications").await?;
        let shade = self.dump().await?;
        // The row is the one shade node showing this title (else this text); a title or text
        // another notification shows too (another app's, maybe) is not guessed at.
        let only = |want: &str| {
            let mut hits = shade
                .nodes
                .iter()
                .filter(|node| !want.is_empty() && node.text == want);
            match (hits.next(), hits.next()) {
                (Some(one), None) => Some(one),
                _ => None,
            }
        };
        let row = only(&n.title).or_else(|| only(&n.text));
        let Some(row) = row else {
            self.shell("cmd statusbar collapse").await?;
            return Err(DeviceError::Internal {
                message: format!(
                    "notification {} is posted but not shown in the shade (or more than one row \
                     shows its title and text: open it on the phone's screen)",
                    n.key
                ),
            });
        };
        let (x, y) = row.bounds.center();
        self.shell(&format!("input tap {x} {y}")).await?;
        let screen = self.settle().await?;
        Ok(
            json!({ "opened": true, "matched": 1, "notification": Self::notification_json(n), "screen": screen }),
        )
    }
}
