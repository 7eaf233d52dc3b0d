//! Device status, apps (`pm list packages`, `monkey`), links (`am start -a VIEW`), drafting a
//! message and placing a call (`am start` with `SENDTO` / `CALL`), sharing (`am start -a SEND`,
//! which opens the OS chooser), the clipboard, and what Android does not let the shell do.

use openphone_device::{DeviceError, EntityKind};
use serde_json::{Value, json};

use super::params::Params;
use crate::parse;
use crate::phone::AdbPhone;
use crate::shell;

/// `unsupported_on_device` for `tool`.
pub(crate) fn unsupported(tool: &str, reason: &str, workaround: &str) -> DeviceError {
    DeviceError::UnsupportedOnDevice {
        tool: tool.to_owned(),
        reason: reason.to_owned(),
        workaround: workaround.to_owned(),
    }
}

/// Why `messages.send` cannot work over ADB.
pub(crate) const SEND_SMS_REASON: &str = "Android has no shell command that sends an SMS: the \
     shell user holds SEND_SMS, but the only way in is a private binder call (`service call \
     isms …`) whose numbers change with every Android version, so the backend does not guess";
pub(crate) const SEND_SMS_WORKAROUND: &str = "draft it with openphone.messages.draft (it opens \
     the messaging app with the text) and press Send on the phone, or tap the Send button with \
     openphone.ui.tap_element";

/// Why `clipboard.set` cannot work over ADB.
pub(crate) const CLIPBOARD_REASON: &str = "Android gives the shell user no way to write the \
     clipboard (since Android 10 only the focused app or the default IME may; the shell holds \
     READ_CLIPBOARD_IN_BACKGROUND, not write access)";
pub(crate) const CLIPBOARD_WORKAROUND: &str = "type the text into the field with \
     openphone.ui.type_text instead of pasting it";

fn looks_like_number(s: &str) -> bool {
    let digits = s.chars().filter(char::is_ascii_digit).count();
    digits >= 3
        && s.chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '+' | ' ' | '-' | '(' | ')' | '.'))
}

fn digits(s: &str) -> String {
    s.chars().filter(char::is_ascii_digit).collect()
}

/// Whether two phone numbers are the same line (the last 7+ digits agree).
pub(crate) fn numbers_match(a: &str, b: &str) -> bool {
    let (a, b) = (digits(a), digits(b));
    if a.is_empty() || b.is_empty() {
        return false;
    }
    let n = a.len().min(b.len()).min(10);
    n >= 3 && a[a.len() - n..] == b[b.len() - n..]
}

impl AdbPhone {
    /// `openphone.device.status`.
    pub(crate) async fn device_status(&self, p: Params<'_>) -> Result<Value, DeviceError> {
        let query = p.ident_opt("query")?;
        let number = p.ident_opt("number")?;
        if number.is_some_and(|n| !looks_like_number(n)) {
            return Err(DeviceError::invalid("number", "not a phone number"));
        }
        let info = self.info().await?;
        let battery = parse::battery(&self.shell("dumpsys battery").await?);
        let powered = ["AC powered", "USB powered", "Wireless powered"]
            .iter()
            .any(|k| battery.get(*k).is_some_and(|v| v == "true"));
        let screen = self.dump().await?;
        let device = json!({
            "platform": crate::commands::PLATFORM,
            "model": info.model,
            "manufacturer": info.manufacturer,
            "os_version": format!("Android {} (API {})", info.release, info.sdk),
            "battery_percent": battery.get("level").and_then(|l| l.parse::<i64>().ok()),
            "charging": powered,
            "time": self.clock.now_ms(),
            "foreground": super::screen::brief(&screen),
        });
        if query.is_none() && number.is_none() {
            return Ok(json!({ "device": device, "next_event": Value::Null }));
        }
        let q = query.or(number).unwrap_or_default();
        let contacts = self.contacts_matching(Some(q)).await?;
        Ok(json!({
            "query": query,
            "number": number,
            "summary": match contacts.as_slice() {
                [] => format!("No contact matches {q}"),
                [one] => format!("{} ({})", one["name"].as_str().unwrap_or(""), one["phones"][0]["number"].as_str().unwrap_or("no number")),
                many => format!("{} contacts match", many.len()),
            },
            "contacts": contacts,
            "device": device,
        }))
    }

    /// Every installed package (`pm list packages`). Android's shell tells neither labels nor
    /// launcher entries (`-3` would hide the phone's own Messages and Phone apps, which are
    /// system packages), so apps are listed by package.
    async fn packages(&self) -> Result<Vec<String>, DeviceError> {
        Ok(parse::packages(&self.shell("pm list packages").await?))
    }

    /// `openphone.apps.search` (`pm list packages`; Android's shell has no app labels, so the
    /// label is the package name).
    pub(crate) async fn apps_search(&self, p: Params<'_>) -> Result<Value, DeviceError> {
        let query = p.ident_opt("query")?.map(str::to_lowercase);
        let limit = p.limit("limit", 50, 200)?;
        // Accepted, but Android's shell cannot tell system apps apart cheaply.
        let _include_system = p.bool_opt("include_system")?;
        let all = self.packages().await?;
        let matches: Vec<Value> = all
            .iter()
            .filter(|pkg| query.as_deref().is_none_or(|q| pkg.to_lowercase().contains(q)))
            .map(|pkg| json!({ "package": pkg, "label": pkg, "activity": Value::Null, "launchable": Value::Null }))
            .collect();
        let total = matches.len();
        let apps: Vec<Value> = matches.into_iter().take(limit).collect();
        Ok(json!({ "count": apps.len(), "total": total, "apps": apps }))
    }

    /// `openphone.app.open`: the package asked for (or the one package whose name contains
    /// the query), launched with `monkey`.
    pub(crate) async fn app_open(&self, p: Params<'_>) -> Result<Value, DeviceError> {
        let query = p
            .ident_opt("package_or_label")?
            .or(p.ident_opt("label")?)
            .ok_or_else(|| {
                DeviceError::invalid("package_or_label", "give package_or_label or label")
            })?;
        let all = self.packages().await?;
        let package = if all.iter().any(|p| p == query) {
            query.to_owned()
        } else {
            let q = query.to_lowercase();
            let partial: Vec<&String> = all
                .iter()
                .filter(|p| p.to_lowercase().contains(&q))
                .collect();
            match partial.as_slice() {
                [] => {
                    return Err(DeviceError::AppNotFound {
                        query: query.to_owned(),
                    });
                }
                [one] => (*one).clone(),
                many => {
                    // Prefer a user app's exact last segment (`messaging` → …messaging).
                    let exact: Vec<&&String> = many
                        .iter()
                        .filter(|p| {
                            p.rsplit('.')
                                .next()
                                .is_some_and(|s| s.eq_ignore_ascii_case(query))
                        })
                        .collect();
                    match exact.as_slice() {
                        [one] => (**one).clone(),
                        _ => {
                            return Err(DeviceError::Ambiguous {
                                kind: EntityKind::App,
                                query: query.to_owned(),
                                candidates: many.iter().map(|p| (*p).clone()).collect(),
                            });
                        }
                    }
                }
            }
        };
        let out = self
            .shell(&shell::line(
                "monkey",
                &[
                    "-p",
                    &package,
                    "-c",
                    "android.intent.category.LAUNCHER",
                    "1",
                ],
            ))
            .await?;
        if out.contains("No activities found") || out.contains("monkey aborted") {
            return Err(DeviceError::invalid(
                "package_or_label",
                format!("{package} has no launcher entry and cannot be opened"),
            ));
        }
        let screen = self.settle().await?;
        Ok(json!({ "opened": true, "package": package, "label": package, "screen": screen }))
    }

    /// Starts an activity with `am start`; Android's "unable to resolve" is `Ok(false)`.
    async fn am_start(&self, args: &[&str]) -> Result<Result<(), String>, DeviceError> {
        let out = self.shell(&shell::line("am", args)).await?;
        if out.contains("unable to resolve Intent")
            || out.starts_with("Error")
            || out.contains("\nError")
        {
            let line = out
                .lines()
                .find(|l| l.contains("Error"))
                .unwrap_or("")
                .trim()
                .to_owned();
            return Ok(Err(line));
        }
        Ok(Ok(()))
    }

    /// `openphone.url.open`: `am start -a android.intent.action.VIEW -d <url>`.
    pub(crate) async fn url_open(&self, p: Params<'_>) -> Result<Value, DeviceError> {
        let url = p.ident_req("url")?;
        let Some((scheme, _)) = url.split_once(':') else {
            return Err(DeviceError::invalid(
                "url",
                "must be an absolute URL such as https://example.com",
            ));
        };
        let scheme = scheme.to_ascii_lowercase();
        if scheme.is_empty()
            || !scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
            || url.chars().any(char::is_whitespace)
        {
            return Err(DeviceError::invalid(
                "url",
                "must be an absolute URL such as https://example.com",
            ));
        }
        if matches!(
            scheme.as_str(),
            "javascript" | "file" | "content" | "data" | "intent" | "about" | "chrome"
        ) {
            return Err(DeviceError::invalid(
                "url",
                format!("{scheme}: URLs are not allowed"),
            ));
        }
        if let Err(why) = self
            .am_start(&["start", "-a", "android.intent.action.VIEW", "-d", url])
            .await?
        {
            return Err(DeviceError::invalid(
                "url",
                format!("no installed app handles {scheme}: links ({why})"),
            ));
        }
        let screen = self.settle().await?;
        Ok(
            json!({ "url": url, "handled_by": screen["package"], "action": "view", "screen": screen }),
        )
    }

    /// The number to message or call: `to`/`number` as given, or the first number of the one
    /// contact matching the name.
    async fn recipient(
        &self,
        to: Option<&str>,
        contact_query: Option<&str>,
        to_field: &str,
    ) -> Result<Option<(String, Option<String>)>, DeviceError> {
        let (query, field) = match (to, contact_query) {
            (Some(to), _) if looks_like_number(to) => {
                let name = self.contact_name_for(to).await.unwrap_or(None);
                return Ok(Some((to.to_owned(), name)));
            }
            (Some(to), _) => (to, to_field),
            (None, Some(q)) => (q, "contact_query"),
            (None, None) => return Ok(None),
        };
        let found = self.contacts_matching(Some(query)).await?;
        match found.as_slice() {
            [] => Err(DeviceError::not_found(EntityKind::Contact, query)),
            [one] => {
                let name = one["name"].as_str().unwrap_or("").to_owned();
                let number = one["phones"][0]["number"]
                    .as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| {
                        DeviceError::invalid(field, format!("{name} has no phone number"))
                    })?;
                Ok(Some((number, Some(name))))
            }
            many => Err(DeviceError::Ambiguous {
                kind: EntityKind::Contact,
                query: query.to_owned(),
                candidates: many
                    .iter()
                    .filter_map(|c| c["name"].as_str().map(str::to_owned))
                    .collect(),
            }),
        }
    }

    async fn contact_name_for(&self, number: &str) -> Result<Option<String>, DeviceError> {
        let all = self.contacts_matching(None).await?;
        Ok(all
            .iter()
            .find(|c| {
                c["phones"].as_array().is_some_and(|ps| {
                    ps.iter().any(|p| {
                        p["number"]
                            .as_str()
                            .is_some_and(|n| numbers_match(n, number))
                    })
                })
            })
            .and_then(|c| c["name"].as_str().map(str::to_owned)))
    }

    /// `openphone.messages.draft`: `am start -a SENDTO -d sms:<number> --es sms_body <text>`.
    pub(crate) async fn messages_draft(&self, p: Params<'_>) -> Result<Value, DeviceError> {
        let body = p
            .str_opt("body")?
            .filter(|b| !b.trim().is_empty())
            .ok_or_else(|| DeviceError::invalid("body", "is required"))?;
        let to = self
            .recipient(p.ident_opt("to")?, p.ident_opt("contact_query")?, "to")
            .await?;
        let number = to.as_ref().map(|(n, _)| n.clone());
        let uri = format!("sms:{}", number.as_deref().unwrap_or(""));
        if let Err(why) = self
            .am_start(&[
                "start",
                "-a",
                "android.intent.action.SENDTO",
                "-d",
                &uri,
                "--es",
                "sms_body",
                body,
            ])
            .await?
        {
            return Err(DeviceError::Internal {
                message: format!("the messaging app did not open: {why}"),
            });
        }
        let screen = self.settle().await?;
        Ok(json!({
            "draft": { "to": number, "contact_name": to.and_then(|(_, n)| n), "body": body },
            "sent": false,
            "screen": screen,
        }))
    }

    /// `openphone.calls.place`: `am start -a android.intent.action.CALL -d tel:<number>` (the
    /// shell user holds CALL_PHONE).
    pub(crate) async fn calls_place(&self, p: Params<'_>) -> Result<Value, DeviceError> {
        let to = self
            .recipient(
                p.ident_opt("number")?,
                p.ident_opt("contact_query")?,
                "number",
            )
            .await?;
        let Some((number, name)) = to else {
            return Err(DeviceError::invalid(
                "number",
                "give number or contact_query",
            ));
        };
        if let Err(why) = self
            .am_start(&[
                "start",
                "-a",
                "android.intent.action.CALL",
                "-d",
                &format!("tel:{number}"),
            ])
            .await?
        {
            return Err(DeviceError::Internal {
                message: format!("the call did not start: {why}"),
            });
        }
        let screen = self.settle().await?;
        Ok(
            json!({ "placed": true, "state": "dialing", "number": number, "contact_name": name, "screen": screen }),
        )
    }

    /// `openphone.share.text`: `am start -a android.intent.action.SEND -t text/plain`, which
    /// opens Android's chooser — an OS dialog the user answers.
    pub(crate) async fn share_text(&self, p: Params<'_>) -> Result<Value, DeviceError> {
        let text = p
            .str_opt("text")?
            .filter(|t| !t.is_empty())
            .ok_or_else(|| DeviceError::invalid("text", "must not be empty"))?;
        let title = p.ident_opt("chooser_title")?;
        let mut args = vec![
            "start",
            "-a",
            "android.intent.action.SEND",
            "-t",
            "text/plain",
            "--es",
            "android.intent.extra.TEXT",
            text,
        ];
        if let Some(title) = title {
            args.extend(["--es", "android.intent.extra.TITLE", title]);
        }
        if let Err(why) = self.am_start(&args).await? {
            return Err(DeviceError::Internal {
                message: format!("the share sheet did not open: {why}"),
            });
        }
        let screen = self.settle().await?;
        Ok(json!({ "shared": true, "chooser_title": title, "screen": screen }))
    }

    /// `openphone.clipboard.paste`: `input keyevent KEYCODE_PASTE` into the focused field.
    pub(crate) async fn clipboard_paste(&self) -> Result<Value, DeviceError> {
        let before = self.before_input().await?;
        let Some(field) = before.focused_field() else {
            return Err(DeviceError::NoFocusedField);
        };
        let id = field.id.clone();
        self.shell("input keyevent KEYCODE_PASTE").await?;
        let screen = self.settle().await?;
        let after = self.memory_screen_value(&id).await?;
        Ok(json!({
            "action": "paste",
            "element": { "element_id": id },
            "effect": "pasted",
            "pasted": Value::Null,
            "value": after,
            "screen": screen,
        }))
    }

    async fn memory_screen_value(&self, id: &str) -> Result<Value, DeviceError> {
        let now = self.dump().await?;
        Ok(now.find(id).map_or(Value::Null, |n| json!(n.text)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_match_on_their_last_digits() {
        assert!(numbers_match("+1 555 0100", "5550100"));
        assert!(numbers_match("+49 151 12345678", "015112345678"));
        assert!(!numbers_match("+1 555 0100", "+1 555 0101"));
        assert!(!numbers_match("", "123"));
        assert!(looks_like_number("+1 (555) 010-0"));
        assert!(!looks_like_number("Alice"));
    }
}
