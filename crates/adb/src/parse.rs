//! Parsers of Android's shell output: `getprop`, `wm size`, `dumpsys battery`, `dumpsys
//! notification --noredact`, `content query` rows, `pm list packages`, `ime list -s`.
//! Every parser takes text and never fails: what it cannot read it leaves out.

use std::collections::BTreeMap;

/// `getprop`: `[key]: [value]` lines.
pub(crate) fn getprop(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim();
            let (key, value) = line.split_once("]: [")?;
            let key = key.strip_prefix('[')?;
            let value = value.strip_suffix(']')?;
            Some((key.to_owned(), value.to_owned()))
        })
        .collect()
}

/// `wm size`: `Physical size: WxH`, and `Override size: WxH` when one is set (which wins).
pub(crate) fn wm_size(text: &str) -> Option<(u32, u32)> {
    let read = |prefix: &str| {
        text.lines().find_map(|l| {
            let rest = l.trim().strip_prefix(prefix)?;
            let (w, h) = rest.trim().split_once('x')?;
            Some((w.trim().parse().ok()?, h.trim().parse().ok()?))
        })
    };
    read("Override size:").or_else(|| read("Physical size:"))
}

/// `dumpsys battery`: `  key: value` lines.
pub(crate) fn battery(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            Some((k.trim().to_owned(), v.trim().to_owned()))
        })
        .collect()
}

/// `pm list packages`: `package:<name>` lines.
pub(crate) fn packages(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("package:"))
        .map(|p| p.trim().to_owned())
        .filter(|p| !p.is_empty())
        .collect()
}

/// One row of `content query`: `Row: N key=value, key=value, …`. Values may hold `, `; a
/// key is only recognised from the projection the query asked for, so `, ` followed by
/// something that is not `<projected key>=` stays inside the value.
pub(crate) fn content_rows(text: &str, keys: &[&str]) -> Vec<BTreeMap<String, String>> {
    let mut rows = Vec::new();
    let mut current: Option<String> = None;
    let flush = |buf: Option<String>, rows: &mut Vec<BTreeMap<String, String>>| {
        if let Some(body) = buf {
            rows.push(row_fields(&body, keys));
        }
    };
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Row: ") {
            flush(current.take(), &mut rows);
            let body = rest.split_once(' ').map_or("", |(_, b)| b).to_owned();
            current = Some(body);
        } else if let Some(buf) = current.as_mut() {
            // A value with a newline continues on the next line.
            buf.push('\n');
            buf.push_str(line);
        }
    }
    flush(current, &mut rows);
    rows
}

fn row_fields(body: &str, keys: &[&str]) -> BTreeMap<String, String> {
    // Positions where a projected key starts: the beginning, or after ", ".
    let mut starts: Vec<(usize, &str)> = Vec::new();
    for key in keys {
        let pat = format!("{key}=");
        if body.starts_with(&pat) {
            starts.push((0, key));
        }
        let sep = format!(", {key}=");
        let mut from = 0;
        while let Some(at) = body[from..].find(&sep) {
            starts.push((from + at + 2, key));
            from += at + 2;
        }
    }
    starts.sort_unstable();
    starts.dedup_by_key(|(at, _)| *at);
    let mut out = BTreeMap::new();
    for (i, (at, key)) in starts.iter().enumerate() {
        let value_start = at + key.len() + 1;
        let value_end = starts
            .get(i + 1)
            .map_or(body.len(), |(next, _)| next.saturating_sub(2));
        let value = body.get(value_start..value_end).unwrap_or("");
        if !out.contains_key(*key) {
            out.insert((*key).to_owned(), value.to_owned());
        }
    }
    out
}

/// Whether `content query` was refused (the shell user lacks the provider's permission): the
/// denial line, for the `unsupported_on_device` reason.
pub(crate) fn provider_denial(text: &str) -> Option<String> {
    if !(text.contains("SecurityException") || text.contains("Permission Denial")) {
        return None;
    }
    let line = text
        .lines()
        .find(|l| l.contains("Permission Denial") || l.contains("SecurityException"))
        .unwrap_or("permission denied");
    Some(line.trim().to_owned())
}

/// A provider error other than a permission denial (`Error while accessing provider:…`,
/// an unknown URI).
pub(crate) fn provider_error(text: &str) -> Option<String> {
    text.lines()
        .find(|l| {
            l.starts_with("Error while accessing provider")
                || l.contains("Unknown URL")
                || l.contains("Exception")
        })
        .map(|l| l.trim().to_owned())
}

/// One notification of `dumpsys notification --noredact`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct PostedNotification {
    pub key: String,
    pub package: String,
    pub title: String,
    pub text: String,
    pub posted_at: Option<i64>,
    seen_title: bool,
    seen_text: bool,
    forged: bool,
}

/// The posted notifications, in the order dumpsys lists them (a `NotificationRecord(…)` line
/// opens each; its `extras={…}` block holds `android.title=String (…)` and
/// `android.text=String (…)`; `mCreationTimeMs=`/`when=` give the time).
pub(crate) fn notifications(text: &str) -> Vec<PostedNotification> {
    let mut out: Vec<PostedNotification> = Vec::new();
    let mut in_list = true;
    for line in text.lines() {
        let t = line.trim();
        // Only the live list: the archive and the ranking sections repeat records.
        if t.starts_with("Notification List:") {
            in_list = true;
            continue;
        }
        if t.starts_with("mArchive") || t.starts_with("Ranking Config") || t.starts_with("Snoozed")
        {
            in_list = false;
        }
        if !in_list {
            continue;
        }
        if t.starts_with("NotificationRecord(") {
            let word = |name: &str| {
                t.split_whitespace()
                    .find_map(|w| w.strip_prefix(name))
                    .map(|v| v.trim_end_matches([':', ')']).to_owned())
                    .unwrap_or_default()
            };
            // The key runs to the `: Notification(` that follows it.
            let key = t
                .split_once(" key=")
                .map(|(_, rest)| rest.split(": Notification(").next().unwrap_or(rest))
                .unwrap_or("")
                .trim()
                .to_owned();
            out.push(PostedNotification {
                key,
                package: word("pkg="),
                ..PostedNotification::default()
            });
            continue;
        }
        let Some(current) = out.last_mut() else {
            continue;
        };
        // A second title or text line in one record came from inside a value (a message
        // whose text holds `\nandroid.title=String (…)`): neither can be trusted, so the
        // record keeps no title and no text (nothing matches it by words).
        if let Some(v) = extra_string(t, "android.title=") {
            if current.seen_title {
                current.forged = true;
            }
            current.seen_title = true;
            current.title = v;
        } else if let Some(v) = extra_string(t, "android.text=") {
            if current.seen_text {
                current.forged = true;
            }
            current.seen_text = true;
            current.text = v;
        } else if current.posted_at.is_none()
            && let Some(ms) = t
                .strip_prefix("mCreationTimeMs=")
                .or_else(|| t.strip_prefix("when="))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
        {
            current.posted_at = Some(ms);
        }
    }
    for n in &mut out {
        if n.forged {
            n.title.clear();
            n.text.clear();
        }
    }
    out
}

/// `android.title=String (Bob)` → `Bob`; `=null` → empty; other types keep their text.
fn extra_string(line: &str, key: &str) -> Option<String> {
    let rest = line.strip_prefix(key)?;
    if rest == "null" {
        return Some(String::new());
    }
    let inner = rest
        .split_once(" (")
        .map(|(_, v)| v.strip_suffix(')').unwrap_or(v))
        .unwrap_or(rest);
    Some(inner.to_owned())
}

/// Whether `ime list -s` lists the ADB Keyboard (which types Unicode from a broadcast).
pub(crate) fn has_adb_keyboard(text: &str) -> bool {
    text.lines()
        .any(|l| l.trim() == "com.android.adbkeyboard/.AdbIME")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn getprop_and_sizes() {
        let p = getprop(
            "[ro.product.model]: [Pixel 7]\n[ro.build.version.sdk]: [34]\n[empty]: []\nnoise\n",
        );
        assert_eq!(p["ro.product.model"], "Pixel 7");
        assert_eq!(p["ro.build.version.sdk"], "34");
        assert_eq!(p["empty"], "");
        assert_eq!(wm_size("Physical size: 1080x2400\n"), Some((1080, 2400)));
        assert_eq!(
            wm_size("Physical size: 1080x2400\nOverride size: 720x1600\n"),
            Some((720, 1600))
        );
        assert_eq!(wm_size("garbage"), None);
        let b = battery(
            "Current Battery Service state:\n  AC powered: false\n  level: 87\n  status: 2\n",
        );
        assert_eq!(b["level"], "87");
        assert_eq!(
            packages("package:com.a\npackage:com.b\n\n"),
            ["com.a", "com.b"]
        );
        assert!(has_adb_keyboard(
            "com.android.inputmethod.latin/.LatinIME\ncom.android.adbkeyboard/.AdbIME\n"
        ));
    }

    #[test]
    fn content_rows_keep_commas_inside_values() {
        let text = "Row: 0 contact_id=1, display_name=Doe, Jane, data1=+1 555 0100\n\
                    Row: 1 contact_id=2, display_name=Bob, data1=NULL\n";
        let rows = content_rows(text, &["contact_id", "display_name", "data1"]);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0]["display_name"], "Doe, Jane");
        assert_eq!(rows[0]["data1"], "+1 555 0100");
        assert_eq!(rows[1]["data1"], "NULL");
        assert!(content_rows("No result found.\n", &["a"]).is_empty());
        let multi = content_rows(
            "Row: 0 _id=3, description=line one\nline two, title=T\n",
            &["_id", "description", "title"],
        );
        assert_eq!(multi[0]["description"], "line one\nline two");
        assert_eq!(multi[0]["title"], "T");
    }

    #[test]
    fn a_permission_denial_is_recognised() {
        let text = "Error while accessing provider:sms\njava.lang.SecurityException: Permission Denial: opening provider com.android.providers.telephony.SmsProvider from ProcessRecord{…} (pid=1, uid=2000) requires android.permission.READ_SMS or android.permission.WRITE_SMS\n";
        let d = provider_denial(text).unwrap();
        assert!(d.contains("Permission Denial"), "{d}");
        assert_eq!(provider_denial("Row: 0 _id=1\n"), None);
    }

    #[test]
    fn notifications_come_with_their_text() {
        let text = "Current Notification Manager state:\n  Notification List:\n\
    NotificationRecord(0x0a1b2c3d: pkg=com.android.messaging user=UserHandle{0} id=210 tag=null importance=4 key=0|com.android.messaging|210|null|10123: Notification(channel=sms pri=1 contentView=null vibrate=null sound=null defaults=0x0 flags=0x10 color=0x00000000 vis=PRIVATE))\n\
      uid=10123 userId=0\n\
      mCreationTimeMs=1795327452248\n\
      extras={\n\
        android.title=String (Bob Nguyen)\n\
        android.text=String (Running 10 min late)\n\
        android.subText=null\n\
      }\n\
    NotificationRecord(0x0b: pkg=com.android.calendar user=UserHandle{0} id=1 tag=null importance=3 key=0|com.android.calendar|1|null|10050: Notification(channel=x))\n\
      extras={\n\
        android.title=String (Standup)\n\
        android.text=null\n\
      }\n\
  mArchive:\n\
    NotificationRecord(0x0c: pkg=old user=UserHandle{0} id=9 tag=null importance=1 key=0|old|9|null|1: Notification())\n";
        let list = notifications(text);
        assert_eq!(list.len(), 2);
        assert_eq!(list[0].package, "com.android.messaging");
        assert_eq!(list[0].key, "0|com.android.messaging|210|null|10123");
        assert_eq!(list[0].title, "Bob Nguyen");
        assert_eq!(list[0].text, "Running 10 min late");
        assert_eq!(list[0].posted_at, Some(1_795_327_452_248));
        assert_eq!(list[1].text, "");
    }

    #[test]
    fn a_notification_text_with_a_title_line_spoofed_the_title() {
        let text = "  Notification List:\n\
    NotificationRecord(0x0a: pkg=com.evil user=UserHandle{0} id=1 tag=null importance=4 key=0|com.evil|1|null|1: Notification(channel=x))\n\
      extras={\n\
        android.title=String (Promo)\n\
        android.text=String (hi\n\
        android.title=String (Bank: code 1234))\n\
      }\n";
        let list = notifications(text);
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].title, "", "{list:?}");
        assert_eq!(list[0].text, "");
    }
}
