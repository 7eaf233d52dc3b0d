//! `dumpsys notification`, `cmd statusbar`, `dumpsys battery`.

use serde_json::json;

use super::support::Device;

#[test]
fn dumpsys_notification_noredact_lists_every_notification_with_its_text() {
    let device = Device::start(&[]);
    let (sim, _clock) = openphone_device::SimPhone::demo().expect("demo");
    let listed = sim
        .execute_sync("openphone.notifications.list", &json!({ "limit": 100 }))
        .expect("list");
    let out = device.shell("dumpsys notification --noredact");
    let records: Vec<&str> = out
        .lines()
        .filter(|l| l.trim_start().starts_with("NotificationRecord("))
        .collect();
    let expected = listed["notifications"].as_array().expect("array");
    assert_eq!(records.len(), expected.len(), "{out}");
    for n in expected {
        let (pkg, key) = (
            n["package"].as_str().unwrap(),
            n["notification_key"].as_str().unwrap(),
        );
        assert!(
            records
                .iter()
                .any(|r| r.contains(&format!("pkg={pkg} user=UserHandle{{0}}"))
                    && r.contains(&format!(" tag={key} "))),
            "{key} missing"
        );
        let title = format!("android.title=String ({})", n["title"].as_str().unwrap());
        let text = format!("android.text=String ({})", n["text"].as_str().unwrap());
        assert!(out.contains(&title), "{title}");
        assert!(out.contains(&text), "{text}");
    }
    // Without --noredact the strings are only measured.
    let redacted = device.shell("dumpsys notification");
    assert!(
        redacted.contains("android.text=String [length="),
        "{redacted:.400}"
    );
    assert!(!redacted.contains("I booked Room"), "redacted text leaked");
}

#[test]
fn cmd_statusbar_opens_and_closes_the_shade() {
    let device = Device::start(&[]);
    assert_eq!(device.shell("cmd statusbar expand-notifications"), "");
    let shade = device
        .find("notification_shade")
        .expect("the shade is open");
    assert_eq!(shade.attr("package"), "com.android.systemui");
    assert_eq!(device.shell("cmd statusbar collapse"), "");
    assert!(
        device.find("notification_shade").is_none(),
        "the shade stayed open"
    );
    assert_eq!(
        device.logged(),
        [
            "cmd statusbar expand-notifications",
            "cmd statusbar collapse"
        ]
    );
}

#[test]
fn dumpsys_battery_reports_the_simulated_level() {
    let device = Device::start(&[]);
    let (sim, _clock) = openphone_device::SimPhone::demo().expect("demo");
    let status = sim
        .execute_sync("openphone.device.status", &json!({}))
        .expect("status");
    let out = device.shell("dumpsys battery");
    assert!(out.starts_with("Current Battery Service state:\n"), "{out}");
    let level = status["device"]["battery_percent"].as_i64().unwrap();
    assert!(out.contains(&format!("\n  level: {level}\n")), "{out}");
    assert!(out.contains("\n  AC powered: false\n"), "{out}");
    assert!(out.contains("\n  scale: 100\n"), "{out}");
    assert!(device.logged().is_empty());
}
