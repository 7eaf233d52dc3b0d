//! `content query|insert|update|delete --uri …`: Android's content providers for contacts,
//! calendar, SMS and the call log, answered from the simulated phone (`contacts.search`,
//! `calendar.search|add|update|delete`, `messages.search`, `calls.search`) in the `content`
//! tool's own output (`Row: N col=value, …`, `No result found.`, `Error while accessing
//! provider:…`). SMS and the call log are refused with Android's `SecurityException` from
//! [`RESTRICTED_FROM_SDK`] on.

use serde_json::{Value, json};

use super::Shell;

/// From this API level (Android 10) SMS and call-log permissions are hard-restricted, and the
/// shell user's `content` queries of those providers end in a `SecurityException`.
pub const RESTRICTED_FROM_SDK: u32 = 29;

/// A parsed `content` command.
#[derive(Debug, Default)]
struct Request {
    uri: String,
    projection: Option<Vec<String>>,
    wheres: Vec<(String, String)>,
    sort: Option<(String, bool)>,
    binds: Vec<(String, Value)>,
}

fn parse(args: &[&str]) -> Result<Request, String> {
    let mut req = Request::default();
    let mut i = 0;
    while i < args.len() {
        let value = args.get(i + 1).copied();
        let need =
            |flag: &str| value.ok_or_else(|| format!("Error: Argument expected after \"{flag}\""));
        match args[i] {
            "--uri" => req.uri = need("--uri")?.to_owned(),
            "--projection" => {
                req.projection = Some(
                    need("--projection")?
                        .split(':')
                        .map(str::to_owned)
                        .collect(),
                );
            }
            "--where" => req.wheres = parse_where(need("--where")?)?,
            "--sort" => {
                let s = need("--sort")?;
                let mut words = s.split_whitespace();
                let column = words.next().unwrap_or("").to_owned();
                let desc = words.next().is_some_and(|w| w.eq_ignore_ascii_case("desc"));
                req.sort = Some((column, desc));
            }
            "--bind" => req.binds.push(parse_bind(need("--bind")?)?),
            "--user" => {}
            other => return Err(format!("Error: Unsupported argument: {other}")),
        }
        i += 2;
    }
    if req.uri.is_empty() {
        return Err(
            "Error: Content provider URI not specified. Did you specify --uri argument?".into(),
        );
    }
    Ok(req)
}

/// `name:type:value` with Android's type letters (s, i, l, f, d, b, n).
fn parse_bind(text: &str) -> Result<(String, Value), String> {
    let mut parts = text.splitn(3, ':');
    let (name, kind, raw) = (parts.next(), parts.next(), parts.next());
    let bad = || format!("Error: Invalid binding: {text}");
    let (Some(name), Some(kind)) = (name, kind) else {
        return Err(bad());
    };
    let raw = raw.unwrap_or("");
    let value = match kind {
        "s" => json!(raw),
        "i" | "l" => json!(raw.parse::<i64>().map_err(|_| bad())?),
        "f" | "d" => json!(raw.parse::<f64>().map_err(|_| bad())?),
        "b" => json!(raw == "true" || raw == "1"),
        "n" => Value::Null,
        _ => return Err(bad()),
    };
    Ok((name.to_owned(), value))
}

/// `col=value [AND col=value …]` (values bare or single-quoted); anything richer is refused.
fn parse_where(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for clause in text.split(" AND ").flat_map(|c| c.split(" and ")) {
        let Some((col, value)) = clause.split_once('=') else {
            return Err(format!(
                "Error: openphone-fake-adbd understands only `col=value [AND col=value]` in --where, not {text:?}"
            ));
        };
        let value = value.trim();
        let value = value
            .strip_prefix('\'')
            .and_then(|v| v.strip_suffix('\''))
            .unwrap_or(value);
        out.push((col.trim().to_owned(), value.to_owned()));
    }
    Ok(out)
}

/// The provider's authority as `content` names it in errors (`com.android.contacts`, `sms`).
fn authority(uri: &str) -> &str {
    let rest = uri.strip_prefix("content://").unwrap_or(uri);
    rest.split('/').next().unwrap_or(rest)
}

fn provider_error(uri: &str, exception: &str) -> String {
    format!(
        "Error while accessing provider:{}\n{exception}\n\tat android.os.Parcel.createExceptionOrNull(Parcel.java:3011)\n\tat android.os.Parcel.createException(Parcel.java:2995)\n\tat android.os.Parcel.readException(Parcel.java:2978)\n\tat android.database.DatabaseUtils.readExceptionFromParcel(DatabaseUtils.java:190)\n\tat android.content.ContentProviderProxy.query(ContentProviderNative.java:472)\n\tat com.android.commands.content.Content$QueryCommand.onExecute(Content.java:660)\n\tat com.android.commands.content.Content$Command.execute(Content.java:522)\n\tat com.android.commands.content.Content.main(Content.java:743)\n",
        authority(uri)
    )
}

fn denied(uri: &str, provider: &str, permission: &str, write: &str) -> String {
    provider_error(
        uri,
        &format!(
            "java.lang.SecurityException: Permission Denial: opening provider {provider} from ProcessRecord{{5e1c2a4 4242:com.android.shell/2000}} (pid=4242, uid=2000) requires {permission} or {write}"
        ),
    )
}

/// `content <verb> …`.
pub async fn content(shell: &Shell, args: &[&str]) -> String {
    let Some((verb, rest)) = args.split_first() else {
        return "usage: adb shell content [subcommand] [options]\n".to_owned();
    };
    let req = match parse(rest) {
        Ok(req) => req,
        Err(e) => return format!("{e}\n"),
    };
    let restricted = shell.options().sdk >= RESTRICTED_FROM_SDK;
    let auth = authority(&req.uri);
    match auth {
        "sms" | "mms-sms" if restricted => {
            return denied(
                &req.uri,
                "com.android.providers.telephony.SmsProvider",
                "android.permission.READ_SMS",
                "android.permission.WRITE_SMS",
            );
        }
        "call_log" if restricted => {
            return denied(
                &req.uri,
                "com.android.providers.contacts.CallLogProvider",
                "android.permission.READ_CALL_LOG",
                "android.permission.WRITE_CALL_LOG",
            );
        }
        _ => {}
    }
    match *verb {
        "query" => match rows(shell, &req).await {
            Ok(rows) => render(&req, rows),
            Err(e) => e,
        },
        "insert" | "update" | "delete" => {
            super::calendar_write::write(shell, verb, &req.uri, &req.wheres, &req.binds).await
        }
        other => format!("Error: Unsupported operation: {other}\n"),
    }
}

type Row = Vec<(&'static str, Value)>;

async fn rows(shell: &Shell, req: &Request) -> Result<Vec<Row>, String> {
    let path = req.uri.strip_prefix("content://").unwrap_or(&req.uri);
    let call =
        |tool: &'static str, params: Value| async move {
            shell.phone().call(tool, params).await.map_err(|e| {
                provider_error(&req.uri, &format!("java.lang.IllegalStateException: {e}"))
            })
        };
    let list = |v: &Value, key: &str| v[key].as_array().cloned().unwrap_or_default();
    let rows = match path.trim_end_matches('/') {
        "com.android.contacts/data/phones"
        | "com.android.contacts/data/emails"
        | "com.android.contacts/contacts" => {
            let found = call(
                "openphone.contacts.search",
                json!({ "include_details": true, "limit": 200 }),
            )
            .await?;
            let mut rows = Vec::new();
            for c in list(&found, "contacts") {
                let id = c["contact_id"].clone();
                let name = c["name"].clone();
                match path {
                    "com.android.contacts/contacts" => rows.push(vec![
                        ("_id", id),
                        ("display_name", name),
                        (
                            "starred",
                            json!(i64::from(c["starred"].as_bool().unwrap_or(false))),
                        ),
                        (
                            "has_phone_number",
                            json!(i64::from(!list(&c, "phones").is_empty())),
                        ),
                    ]),
                    "com.android.contacts/data/emails" => {
                        for e in list(&c, "emails") {
                            rows.push(vec![
                                ("contact_id", id.clone()),
                                ("display_name", name.clone()),
                                ("data1", e["address"].clone()),
                                ("data3", e["label"].clone()),
                            ]);
                        }
                    }
                    _ => {
                        for p in list(&c, "phones") {
                            rows.push(vec![
                                ("contact_id", id.clone()),
                                ("display_name", name.clone()),
                                ("data1", p["number"].clone()),
                                ("data3", p["label"].clone()),
                            ]);
                        }
                    }
                }
            }
            rows
        }
        "com.android.calendar/events" => {
            let found = call("openphone.calendar.search", json!({ "limit": 500 })).await?;
            list(&found, "events")
                .iter()
                .map(|e| {
                    vec![
                        ("_id", e["event_id"].clone()),
                        ("calendar_id", e["calendar_id"].clone()),
                        ("title", e["title"].clone()),
                        ("dtstart", e["start_at"].clone()),
                        ("dtend", e["end_at"].clone()),
                        ("eventLocation", e["location"].clone()),
                        ("description", e["description"].clone()),
                        (
                            "allDay",
                            json!(i64::from(e["all_day"].as_bool().unwrap_or(false))),
                        ),
                        ("deleted", json!(0)),
                    ]
                })
                .collect()
        }
        "com.android.calendar/calendars" => {
            // No manifest command lists calendars (an empty one has no event to show it), so
            // this read takes them from the phone's state.
            shell
                .phone()
                .sim()
                .snapshot()
                .calendars
                .iter()
                .map(|c| {
                    vec![
                        ("_id", json!(c.id)),
                        ("calendar_displayName", json!(c.name)),
                        ("calendar_access_level", json!(700)),
                        ("visible", json!(1)),
                    ]
                })
                .collect()
        }
        "sms" | "sms/inbox" | "sms/sent" => {
            let found = call("openphone.messages.search", json!({ "limit": 200 })).await?;
            list(&found, "messages")
                .iter()
                .map(|m| {
                    let kind = if m["direction"] == "incoming" { 1 } else { 2 };
                    vec![
                        ("_id", m["message_id"].clone()),
                        ("thread_id", m["thread_id"].clone()),
                        ("address", m["address"].clone()),
                        ("date", m["at"].clone()),
                        (
                            "read",
                            json!(i64::from(m["read"].as_bool().unwrap_or(true))),
                        ),
                        ("type", json!(kind)),
                        ("body", m["body"].clone()),
                    ]
                })
                .filter(|r| match path {
                    "sms/inbox" => r[5].1 == json!(1),
                    "sms/sent" => r[5].1 == json!(2),
                    _ => true,
                })
                .collect()
        }
        "call_log/calls" => {
            let found = call("openphone.calls.search", json!({ "limit": 200 })).await?;
            list(&found, "calls")
                .iter()
                .map(|c| {
                    let kind = match c["type"].as_str() {
                        Some("incoming") => 1,
                        Some("outgoing") => 2,
                        Some("missed") => 3,
                        Some("rejected") => 5,
                        _ => 6,
                    };
                    vec![
                        ("_id", c["call_id"].clone()),
                        ("number", c["number"].clone()),
                        ("date", c["at"].clone()),
                        ("duration", c["duration_s"].clone()),
                        ("type", json!(kind)),
                        ("name", c["contact_name"].clone()),
                    ]
                })
                .collect()
        }
        _ => {
            return Err(provider_error(
                &req.uri,
                &format!(
                    "java.lang.IllegalArgumentException: Unknown URI {}",
                    req.uri
                ),
            ));
        }
    };
    Ok(rows)
}

fn cell(value: &Value) -> String {
    match value {
        Value::Null => "NULL".to_owned(),
        Value::String(s) => s.clone(),
        Value::Bool(b) => i64::from(*b).to_string(),
        other => other.to_string(),
    }
}

fn render(req: &Request, rows: Vec<Row>) -> String {
    let mut rows: Vec<Row> = rows
        .into_iter()
        .filter(|r| {
            req.wheres
                .iter()
                .all(|(col, want)| r.iter().any(|(c, v)| c == col && cell(v) == *want))
        })
        .collect();
    if let Some((column, desc)) = &req.sort {
        let key = |r: &Row| r.iter().find(|(c, _)| c == column).map(|(_, v)| v.clone());
        rows.sort_by(|a, b| {
            let (ka, kb) = (key(a), key(b));
            let order = match (
                ka.as_ref().and_then(Value::as_f64),
                kb.as_ref().and_then(Value::as_f64),
            ) {
                (Some(x), Some(y)) => x.total_cmp(&y),
                _ => ka.map(|v| cell(&v)).cmp(&kb.map(|v| cell(&v))),
            };
            if *desc { order.reverse() } else { order }
        });
    }
    if rows.is_empty() {
        return "No result found.\n".to_owned();
    }
    let mut out = String::new();
    for (i, row) in rows.iter().enumerate() {
        let cells: Vec<String> = match &req.projection {
            Some(columns) => columns
                .iter()
                .map(|col| {
                    let value = row
                        .iter()
                        .find(|(c, _)| c == col)
                        .map_or(Value::Null, |(_, v)| v.clone());
                    format!("{col}={}", cell(&value))
                })
                .collect(),
            None => row
                .iter()
                .map(|(c, v)| format!("{c}={}", cell(v)))
                .collect(),
        };
        out.push_str(&format!("Row: {i} {}\n", cells.join(", ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binds_wheres_and_rows_use_androids_formats() {
        assert_eq!(
            parse_bind("dtstart:l:1700").expect("bind"),
            ("dtstart".into(), json!(1700))
        );
        assert_eq!(
            parse_bind("title:s:a:b").expect("bind"),
            ("title".into(), json!("a:b"))
        );
        assert!(parse_bind("x:q:1").is_err());
        assert_eq!(
            parse_where("_id=5 AND title='x'").expect("where"),
            [("_id".into(), "5".into()), ("title".into(), "x".into())]
        );
        let req = Request {
            projection: Some(vec!["_id".into(), "title".into()]),
            ..Request::default()
        };
        let rows = vec![vec![
            ("_id", json!(1)),
            ("title", json!("A")),
            ("x", Value::Null),
        ]];
        assert_eq!(render(&req, rows), "Row: 0 _id=1, title=A\n");
        assert_eq!(render(&req, Vec::new()), "No result found.\n");
    }
}
