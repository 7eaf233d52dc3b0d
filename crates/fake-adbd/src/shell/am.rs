//! `am start`, `am broadcast` (the ADB Keyboard's `ADB_INPUT_B64` / `ADB_INPUT_TEXT`),
//! `monkey -p`, `pm list packages` and `ime`: intents and packages, replayed on the simulated
//! phone (`url.open`, `messages.draft`, `calls.place`, `share.text`, `app.open`,
//! `ui.type_text`, `apps.search`).

use base64::Engine as _;
use serde_json::{Value, json};

use super::Shell;

/// The ADB Keyboard IME (github.com/senzhk/ADBKeyBoard), as `ime list -s` names it.
pub const ADB_KEYBOARD_IME: &str = "com.android.adbkeyboard/.AdbIME";
/// The stock keyboard.
pub const LATIN_IME: &str = "com.android.inputmethod.latin/.LatinIME";

/// What `pm list features` lists: a touchscreen phone.
const FEATURES: [&str; 6] = [
    "android.hardware.touchscreen",
    "android.hardware.touchscreen.multitouch",
    "android.hardware.telephony",
    "android.hardware.wifi",
    "android.hardware.camera",
    "android.software.input_methods",
];

/// An intent as `am` parsed it.
#[derive(Debug, Default)]
struct Intent {
    action: Option<String>,
    data: Option<String>,
    mime: Option<String>,
    categories: Vec<String>,
    component: Option<String>,
    package: Option<String>,
    extras: Vec<(String, String)>,
}

impl Intent {
    fn extra(&self, key: &str) -> Option<&str> {
        self.extras
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// `Intent { act=… dat=… }`, as `am` prints it.
    fn describe(&self, flags: Option<&str>) -> String {
        let mut parts = Vec::new();
        if let Some(a) = &self.action {
            parts.push(format!("act={a}"));
        }
        if !self.categories.is_empty() {
            parts.push(format!("cat=[{}]", self.categories.join(",")));
        }
        if let Some(d) = &self.data {
            parts.push(format!("dat={d}"));
        }
        if let Some(t) = &self.mime {
            parts.push(format!("typ={t}"));
        }
        if let Some(f) = flags {
            parts.push(format!("flg={f}"));
        }
        if let Some(p) = &self.package {
            parts.push(format!("pkg={p}"));
        }
        if let Some(c) = &self.component {
            parts.push(format!("cmp={c}"));
        }
        if !self.extras.is_empty() {
            parts.push("(has extras)".into());
        }
        format!("Intent {{ {} }}", parts.join(" "))
    }
}

/// Parses `am start|broadcast` options into an intent.
fn parse_intent(args: &[&str]) -> Result<Intent, String> {
    let mut intent = Intent::default();
    let mut i = 0;
    let next = |i: &mut usize, flag: &str| -> Result<String, String> {
        *i += 1;
        args.get(*i)
            .map(|s| (*s).to_owned())
            .ok_or_else(|| format!("Error: No argument supplied for option {flag}"))
    };
    while i < args.len() {
        let flag = args[i];
        match flag {
            "-a" => intent.action = Some(next(&mut i, flag)?),
            "-d" => intent.data = Some(next(&mut i, flag)?),
            "-t" => intent.mime = Some(next(&mut i, flag)?),
            "-c" => intent.categories.push(next(&mut i, flag)?),
            "-n" => intent.component = Some(next(&mut i, flag)?),
            "-p" => intent.package = Some(next(&mut i, flag)?),
            "-f" | "--user" => {
                next(&mut i, flag)?;
            }
            "-W"
            | "-S"
            | "--activity-clear-task"
            | "--activity-new-task"
            | "--receiver-foreground" => {}
            "--es" | "--ez" | "--ei" | "--el" | "--eu" => {
                let key = next(&mut i, flag)?;
                let value = next(&mut i, flag)?;
                intent.extras.push((key, value));
            }
            "--esn" => {
                let key = next(&mut i, flag)?;
                intent.extras.push((key, String::new()));
            }
            other if other.starts_with('-') => {
                return Err(format!("Error: Unknown option: {other}"));
            }
            // A bare argument is the intent's data URI (or a component), as `am` allows.
            other => {
                if other.contains('/') && !other.contains(':') {
                    intent.component = Some(other.to_owned());
                } else {
                    intent.data = Some(other.to_owned());
                }
            }
        }
        i += 1;
    }
    Ok(intent)
}

fn unresolved(intent: &Intent) -> String {
    format!(
        "Error: Activity not started, unable to resolve {}\n",
        intent.describe(Some("0x10000000"))
    )
}

/// `am <args>`.
pub async fn am(shell: &Shell, args: &[&str]) -> String {
    match args {
        ["start" | "start-activity", rest @ ..] => match parse_intent(rest) {
            Ok(intent) => start(shell, &intent).await,
            Err(e) => format!("{e}\n"),
        },
        ["broadcast", rest @ ..] => match parse_intent(rest) {
            Ok(intent) => broadcast(shell, &intent).await,
            Err(e) => format!("{e}\n"),
        },
        [verb, ..] => format!(
            "Error: openphone-fake-adbd answers `am start` and `am broadcast`, not `am {verb}`\n"
        ),
        [] => "usage: am [subcommand] [options]\n".to_owned(),
    }
}

async fn start(shell: &Shell, intent: &Intent) -> String {
    let phone = shell.phone();
    let number = |prefixes: &[&str]| {
        intent.data.as_deref().and_then(|d| {
            prefixes
                .iter()
                .find_map(|p| d.strip_prefix(p))
                .map(|n| n.split('?').next().unwrap_or(n).to_owned())
        })
    };
    let action = intent.action.as_deref().unwrap_or("");
    let outcome = match action {
        "android.intent.action.CALL" => match number(&["tel:"]) {
            Some(n) => {
                phone
                    .call("openphone.calls.place", json!({ "number": n }))
                    .await
            }
            None => return unresolved(intent),
        },
        "android.intent.action.SENDTO" => {
            let body = intent.extra("sms_body").unwrap_or("");
            match number(&["sms:", "smsto:"]) {
                Some(n) if !body.is_empty() => {
                    phone
                        .call("openphone.messages.draft", json!({ "to": n, "body": body }))
                        .await
                }
                Some(n) => {
                    phone
                        .call("openphone.url.open", json!({ "url": format!("sms:{n}") }))
                        .await
                }
                None => return unresolved(intent),
            }
        }
        "android.intent.action.SEND" => match intent.extra("android.intent.extra.TEXT") {
            Some(text) if intent.mime.as_deref() == Some("text/plain") => {
                let mut params = json!({ "text": text });
                if let Some(title) = intent.extra("android.intent.extra.TITLE") {
                    params["chooser_title"] = json!(title);
                }
                phone.call("openphone.share.text", params).await
            }
            _ => return unresolved(intent),
        },
        "android.intent.action.VIEW" | "android.intent.action.DIAL" => match &intent.data {
            Some(url) => {
                phone
                    .call("openphone.url.open", json!({ "url": url }))
                    .await
            }
            None => return unresolved(intent),
        },
        "" | "android.intent.action.MAIN" => {
            let package = intent
                .component
                .as_deref()
                .and_then(|c| c.split('/').next())
                .or(intent.package.as_deref());
            match package {
                Some(p) if installed(shell, p).await => {
                    phone
                        .call("openphone.app.open", json!({ "package_or_label": p }))
                        .await
                }
                _ => return unresolved(intent),
            }
        }
        _ => return unresolved(intent),
    };
    match outcome {
        Ok(_) => format!("Starting: {}\n", intent.describe(None)),
        Err(e)
            if matches!(
                e.code.as_str(),
                "invalid_input" | "not_found" | "app_not_found"
            ) =>
        {
            unresolved(intent)
        }
        Err(e) => format!("Starting: {}\nError: {e}\n", intent.describe(None)),
    }
}

async fn broadcast(shell: &Shell, intent: &Intent) -> String {
    let head = format!("Broadcasting: {}\n", intent.describe(Some("0x400000")));
    let done = "Broadcast completed: result=0\n";
    // Only the ADB Keyboard, while it is the selected input method, receives these.
    let receiver = shell.options().adb_keyboard && shell.ime() == ADB_KEYBOARD_IME;
    let text = match intent.action.as_deref() {
        Some("ADB_INPUT_B64") if receiver => {
            let encoded = intent.extra("msg").unwrap_or("");
            match base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .map_err(|e| e.to_string())
                .and_then(|b| String::from_utf8(b).map_err(|e| e.to_string()))
            {
                Ok(text) => text,
                Err(e) => {
                    return format!(
                        "{head}{done}Error: ADB Keyboard: msg is not base64 of UTF-8 text ({e})\n"
                    );
                }
            }
        }
        Some("ADB_INPUT_TEXT") if receiver => intent.extra("msg").unwrap_or("").to_owned(),
        _ => return format!("{head}{done}"),
    };
    if text.is_empty() {
        return format!("{head}{done}");
    }
    match shell
        .phone()
        .call("openphone.ui.type_text", json!({ "text": text }))
        .await
    {
        Ok(_) => format!("{head}{done}"),
        Err(e) => format!("{head}{done}Error: ADB Keyboard: {e}\n"),
    }
}

/// A package of the phone.
#[derive(Debug)]
pub struct Package {
    /// Its name.
    pub name: String,
    /// Whether it is a system package.
    pub system: bool,
    /// Its launcher activity (`pkg/.Activity`), if it has one.
    pub activity: Option<String>,
}

/// Every package the phone has (`apps.search`, plus the system's own and the keyboards).
pub async fn packages(shell: &Shell) -> Result<Vec<Package>, String> {
    let found = shell
        .phone()
        .call(
            "openphone.apps.search",
            json!({ "include_system": true, "limit": 200 }),
        )
        .await
        .map_err(|e| e.to_string())?;
    let mut out: Vec<Package> = found["apps"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|a: &Value| Package {
            name: a["package"].as_str().unwrap_or("").to_owned(),
            system: a["system"].as_bool().unwrap_or(false),
            activity: a["activity"]
                .as_str()
                .filter(|_| a["launchable"].as_bool().unwrap_or(true))
                .map(str::to_owned),
        })
        .collect();
    let mut add = |name: &str, system: bool| {
        out.push(Package {
            name: name.to_owned(),
            system,
            activity: None,
        });
    };
    for os in [
        "android",
        "com.android.systemui",
        "com.android.shell",
        "com.android.inputmethod.latin",
    ] {
        add(os, true);
    }
    if shell.options().adb_keyboard {
        add("com.android.adbkeyboard", false);
    }
    Ok(out)
}

async fn installed(shell: &Shell, package: &str) -> bool {
    packages(shell).await.is_ok_and(|all| {
        all.iter()
            .any(|p| p.name == package && p.activity.is_some())
    })
}

/// `cmd package query-activities -a android.intent.action.MAIN -c
/// android.intent.category.LAUNCHER`: the launcher activities, as the package manager lists
/// them.
pub async fn query_activities(shell: &Shell, args: &[&str]) -> String {
    let mut sorted = args.to_vec();
    sorted.sort_unstable();
    if sorted
        != [
            "-a",
            "-c",
            "android.intent.action.MAIN",
            "android.intent.category.LAUNCHER",
        ]
    {
        return "Error: openphone-fake-adbd answers only `cmd package query-activities -a android.intent.action.MAIN -c android.intent.category.LAUNCHER`\n".to_owned();
    }
    let all = match packages(shell).await {
        Ok(all) => all,
        Err(e) => return format!("Error: {e}\n"),
    };
    let launchable: Vec<(&str, String)> = all
        .iter()
        .filter_map(|p| {
            let activity = p.activity.as_deref()?;
            let (package, class) = activity.split_once('/')?;
            let class = match class.strip_prefix('.') {
                Some(short) => format!("{package}.{short}"),
                None => class.to_owned(),
            };
            Some((package, class))
        })
        .collect();
    let mut out = format!("{} activities found:\n", launchable.len());
    for (i, (package, class)) in launchable.iter().enumerate() {
        out.push_str(&format!(
            "  Activity #{i}:\n    priority=0 preferredOrder=0 match=0x108000 specificIndex=-1 isDefault=false\n    ActivityInfo:\n      name={class}\n      packageName={package}\n      enabled=true exported=true directBootAware=false\n      ApplicationInfo:\n        packageName={package}\n"
        ));
    }
    out
}

/// `monkey -p PKG [-c CATEGORY] COUNT`: launches the app (one event).
pub async fn monkey(shell: &Shell, args: &[&str]) -> String {
    let mut out: String = args.iter().map(|a| format!("  bash arg: {a}\n")).collect();
    let package = args
        .iter()
        .position(|a| *a == "-p")
        .and_then(|i| args.get(i + 1));
    let Some(package) = package else {
        out.push_str("** Error: openphone-fake-adbd answers only `monkey -p <package> -c android.intent.category.LAUNCHER 1`\n");
        return out;
    };
    if !installed(shell, package).await {
        out.push_str("** No activities found to run, monkey aborted.\n");
        return out;
    }
    match shell
        .phone()
        .call("openphone.app.open", json!({ "package_or_label": package }))
        .await
    {
        Ok(_) => {
            out.push_str("Events injected: 1\n");
            out.push_str(
                "## Network stats: elapsed time=12ms (0ms mobile, 0ms wifi, 12ms not connected)\n",
            );
        }
        Err(e) => out.push_str(&format!("** Error: {e}\n")),
    }
    out
}

/// `pm list packages [-3|-s] [FILTER]`.
pub async fn pm(shell: &Shell, args: &[&str]) -> String {
    if args == ["list", "features"] {
        return FEATURES.iter().map(|f| format!("feature:{f}\n")).collect();
    }
    let ["list", "packages", rest @ ..] = args else {
        return "Error: openphone-fake-adbd answers only `pm list packages [-3|-s] [FILTER]` and `pm list features`\n"
            .to_owned();
    };
    let mut user_only = false;
    let mut system_only = false;
    let mut filter = None;
    for arg in rest {
        match *arg {
            "-3" => user_only = true,
            "-s" => system_only = true,
            "-e" | "-d" | "-f" | "-i" | "-u" | "--user" => {}
            flag if flag.starts_with('-') => return format!("Error: Unknown option: {flag}\n"),
            text => filter = Some(text),
        }
    }
    match packages(shell).await {
        Ok(all) => all
            .iter()
            .filter(|p| if p.system { !user_only } else { !system_only })
            .filter(|p| filter.is_none_or(|f| p.name.contains(f)))
            .map(|p| format!("package:{}\n", p.name))
            .collect(),
        Err(e) => format!("Error: {e}\n"),
    }
}

/// `ime list -s`, `ime set ID`, `ime enable ID`.
pub fn ime(shell: &Shell, args: &[&str]) -> String {
    let mut ids = vec![LATIN_IME];
    if shell.options().adb_keyboard {
        ids.push(ADB_KEYBOARD_IME);
    }
    match args {
        ["list", "-s", ..] => ids.iter().map(|id| format!("{id}\n")).collect(),
        ["enable", id] if ids.contains(id) => {
            format!("Input method {id}: already enabled for user #0\n")
        }
        ["set", id] if ids.contains(id) => {
            shell.set_ime(id);
            format!("Input method {id} selected for user #0\n")
        }
        ["enable" | "set", id] => {
            format!("Unknown input method {id} cannot be selected for user #0\n")
        }
        _ => "Error: openphone-fake-adbd answers `ime list -s`, `ime enable ID` and `ime set ID`\n"
            .to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_intent;

    #[test]
    fn am_options_become_an_intent_and_print_like_am() {
        let intent = parse_intent(&[
            "-a",
            "android.intent.action.SENDTO",
            "-d",
            "sms:+15550100",
            "--es",
            "sms_body",
            "hi there",
        ])
        .expect("parses");
        assert_eq!(
            intent.describe(None),
            "Intent { act=android.intent.action.SENDTO dat=sms:+15550100 (has extras) }"
        );
        assert_eq!(intent.extra("sms_body"), Some("hi there"));
        assert!(parse_intent(&["-x"]).is_err());
        assert!(parse_intent(&["-a"]).is_err());
    }
}
