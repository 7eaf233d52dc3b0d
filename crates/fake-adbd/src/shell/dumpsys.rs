//! `dumpsys notification [--noredact]`, `dumpsys battery` and `cmd statusbar …`, in Android's
//! own text layout, from the simulated phone's `notifications.list`, `device.status` and its
//! notification shade (opened and closed by the same swipes a finger would make).

use serde_json::{Value, json};

use super::Shell;

/// A stable fake uid per package (apps start at 10000 on Android).
fn uid_of(package: &str) -> u32 {
    10_000
        + package
            .bytes()
            .fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)))
            % 900
}

/// `dumpsys <service> [args]`.
pub async fn dumpsys(shell: &Shell, args: &[&str]) -> String {
    match args {
        ["notification", rest @ ..] => notification(shell, rest.contains(&"--noredact")).await,
        ["battery", ..] => battery(shell).await,
        [service, ..] => format!("Can't find service: {service}\n"),
        [] => "Error: openphone-fake-adbd answers `dumpsys notification` and `dumpsys battery`\n"
            .to_owned(),
    }
}

fn string_extra(name: &str, value: &str, noredact: bool) -> String {
    if noredact {
        format!("          {name}=String ({value})\n")
    } else {
        format!(
            "          {name}=String [length={}]\n",
            value.chars().count()
        )
    }
}

async fn notification(shell: &Shell, noredact: bool) -> String {
    let listed = match shell
        .phone()
        .call("openphone.notifications.list", json!({ "limit": 100 }))
        .await
    {
        Ok(listed) => listed,
        Err(e) => return format!("Error: {e}\n"),
    };
    let mut out = String::from("\nCurrent Notification Manager state:\n  Notification List:\n");
    let empty = Vec::new();
    let list = listed["notifications"].as_array().unwrap_or(&empty);
    for (i, n) in list.iter().enumerate() {
        out.push_str(&record(i + 1, n, noredact));
    }
    out.push_str("\n  Snoozed notifications:\n\n");
    out
}

fn record(id: usize, n: &Value, noredact: bool) -> String {
    let package = n["package"].as_str().unwrap_or("android");
    let tag = n["notification_key"].as_str().unwrap_or("null");
    let uid = uid_of(package);
    let key = format!("0|{package}|{id}|{tag}|{uid}");
    let title = n["title"].as_str().unwrap_or("");
    let text = n["text"].as_str().unwrap_or("");
    let posted = n["posted_at"].as_i64().unwrap_or(0);
    let seen = n["read"].as_bool().unwrap_or(false);
    let address = 0x0a00_0000_u32 + u32::try_from(id).unwrap_or(0) * 0x10;
    let mut out = format!(
        "    NotificationRecord(0x{address:08x}: pkg={package} user=UserHandle{{0}} id={id} tag={tag} importance=3 key={key}: Notification(channel=default shortcut=null contentView=null vibrate=null sound=null defaults=0x0 flags=0x10 color=0x00000000 vis=PRIVATE))\n"
    );
    out.push_str(&format!(
        "      uid={uid} userId=0\n      opPkg={package}\n"
    ));
    out.push_str(&format!(
        "      icon=Icon(typ=RESOURCE pkg={package} id=0x7f080001)\n"
    ));
    out.push_str(&format!(
        "      flags=0x10\n      pri=0\n      key={key}\n      seen={seen}\n      groupKey=0|{package}|g:default\n"
    ));
    out.push_str("      notification=\n        pri=0\n        contentIntent=PendingIntent{0: PendingIntentRecord}\n        deleteIntent=null\n        number=0\n        flags=0x10\n");
    out.push_str(&format!("        when={posted}\n        extras={{\n"));
    out.push_str(&string_extra("android.title", title, noredact));
    out.push_str(&string_extra("android.text", text, noredact));
    out.push_str(&format!(
        "          android.appInfo=ApplicationInfo (ApplicationInfo{{{uid:x} {package}}})\n          android.showWhen=Boolean (true)\n        }}\n"
    ));
    out.push_str(&format!(
        "      postTime={posted}\n      interruption=true\n"
    ));
    out
}

async fn battery(shell: &Shell) -> String {
    let status = match shell
        .phone()
        .call("openphone.device.status", json!({}))
        .await
    {
        Ok(status) => status,
        Err(e) => return format!("Error: {e}\n"),
    };
    let device = &status["device"];
    let level = device["battery_percent"].as_i64().unwrap_or(0);
    let charging = device["charging"].as_bool().unwrap_or(false);
    let state = match (charging, level) {
        (_, 100..) => 5,
        (true, _) => 2,
        (false, _) => 3,
    };
    format!(
        "Current Battery Service state:\n  AC powered: {charging}\n  USB powered: false\n  Wireless powered: false\n  Max charging current: 0\n  Max charging voltage: 0\n  Charge counter: 0\n  status: {state}\n  health: 2\n  present: true\n  level: {level}\n  scale: 100\n  voltage: 4000\n  temperature: 250\n  technology: Li-ion\n"
    )
}

/// `cmd <service> …`: only `cmd statusbar expand-notifications|expand-settings|collapse`.
pub async fn cmd(shell: &Shell, args: &[&str]) -> String {
    match args {
        ["statusbar", "expand-notifications" | "expand-settings"] => expand(shell, true).await,
        ["statusbar", "collapse"] => expand(shell, false).await,
        ["statusbar", verb, ..] => format!("Unknown command: {verb}\n"),
        [service, ..] => format!("cmd: Can't find service: {service}\n"),
        [] => "cmd: No service specified; use -l to list all running services.\n".to_owned(),
    }
}

/// Opens (a downward swipe from the status bar) or closes (an upward swipe) the shade.
async fn expand(shell: &Shell, open: bool) -> String {
    let phone = shell.phone();
    let screen = match phone.screen().await {
        Ok(screen) => screen,
        Err(e) => return format!("Error: {e}\n"),
    };
    let shade_open = screen["activity"]
        .as_str()
        .is_some_and(|a| a.ends_with(".NotificationShade"));
    if shade_open == open {
        return String::new();
    }
    let w = screen["width"].as_f64().unwrap_or(1080.0);
    let h = screen["height"].as_f64().unwrap_or(2400.0);
    let (from, to) = if open {
        (10.0, h * 0.6)
    } else {
        (h * 0.8, h * 0.2)
    };
    let swipe = json!({ "start_x": w / 2.0, "start_y": from, "end_x": w / 2.0, "end_y": to });
    match phone.call("openphone.ui.swipe", swipe).await {
        Ok(_) => String::new(),
        Err(e) => format!("Error: {e}\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_carries_the_key_title_and_text() {
        let n = json!({"package": "com.android.messaging", "notification_key": "msg-1", "title": "Alice", "text": "Lunch?", "posted_at": 5});
        let open = record(3, &n, true);
        assert!(open.starts_with("    NotificationRecord(0x0a000030: pkg=com.android.messaging user=UserHandle{0} id=3 tag=msg-1 importance=3 key=0|com.android.messaging|3|msg-1|"));
        assert!(open.contains("          android.title=String (Alice)\n"));
        assert!(open.contains("          android.text=String (Lunch?)\n"));
        let redacted = record(3, &n, false);
        assert!(redacted.contains("android.text=String [length=6]"));
        assert!(!redacted.contains("Lunch?"));
    }
}
