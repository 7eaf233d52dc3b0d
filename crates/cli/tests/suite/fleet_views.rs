//! Issue 35: the operator's views show the whole fleet, each row naming its host and phone.
//! Two `openphone serve` daemons share one PostgreSQL database; a job made on each is listed by
//! `jobs list` on either with its host, and the review B's job waits for is in A's inbox,
//! naming host B and B's phone. A lone daemon (SQLite) lists as it always did: no `host`
//! member, no HOST column.
//!
//! The PostgreSQL test needs `OPENPHONE_TEST_PG_URL` (`bash tests/postgres/cluster.sh start`);
//! without it it prints that it was skipped.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::fleet_support::{fleet_database, host};
use super::harness::{cli, serve, write_config};

/// `openphone args… --json --data-dir <data>`, which must succeed: its parsed output.
fn json_on(data: &Path, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let (code, out, err) = cli(&all, data);
    assert_eq!(code, 0, "openphone {args:?}: {out}{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"))
}

/// `openphone args… --data-dir <data>` in words, which must succeed.
fn text_on(data: &Path, args: &[&str]) -> String {
    let (code, out, err) = cli(args, data);
    assert_eq!(code, 0, "openphone {args:?}: {out}{err}");
    out
}

/// The entry of job `id` in a `jobs list --json` answer.
fn entry(list: &Value, id: i64) -> &Value {
    list["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["job"]["id"] == id)
        .unwrap_or_else(|| panic!("job {id} is not listed: {list}"))
}

#[test]
fn jobs_list_and_the_inbox_on_one_daemon_name_each_fleet_rows_host_and_phone() {
    let Some(url) = fleet_database() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let a = host(tmp.path(), "fleet-a", &url, "phone-a");
    let b = host(tmp.path(), "fleet-b", &url, "phone-b");
    let _serve_a = serve(&a.data, &a.config);
    let _serve_b = serve(&b.data, &b.config);

    // On A, a job an hour away on A's phone; on B, a message to send now from B's phone,
    // which B's run parks for the user's review.
    let made = json_on(
        &a.data,
        &[
            "jobs", "create", "--title", "on-a", "--prompt", "later", "--in", "1h", "--device",
            "phone-a",
        ],
    );
    let id_a = made["job"]["id"].as_i64().unwrap();
    assert_eq!(made["host"], json!({"host_id": "fleet-a"}), "{made}");
    let payload = json!({"tool_call": {"tool": "messages_send", "arguments": {
        "to": "+49 151 2345 6789", "body": "from b", "reason": "fleet views test"}}});
    let made = json_on(
        &b.data,
        &[
            "jobs",
            "create",
            "--title",
            "on-b",
            "--type",
            "system_event",
            "--payload",
            &payload.to_string(),
            "--in",
            "1s",
            "--device",
            "phone-b",
        ],
    );
    let id_b = made["job"]["id"].as_i64().unwrap();
    assert_ne!(id_a, id_b);

    // B claims and runs its job (woken here; its own tick would too) until it awaits review.
    let mut listed = Value::Null;
    for _ in 0..120 {
        let _ = cli(&["jobs", "wake"], &b.data);
        listed = json_on(&a.data, &["jobs", "list"]);
        if entry(&listed, id_b)["job"]["status"] == "awaiting_review" {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }

    // A lists both, each naming its host; B's names B as the daemon that ran it.
    let on_b = entry(&listed, id_b);
    assert_eq!(on_b["job"]["status"], "awaiting_review", "{listed}");
    assert_eq!(
        on_b["host"],
        json!({"host_id": "fleet-b", "lease_owner": "fleet-b"}),
        "{listed}"
    );
    assert_eq!(on_b["job"]["device_id"], "phone-b", "{listed}");
    let on_a = entry(&listed, id_a);
    assert_eq!(on_a["host"], json!({"host_id": "fleet-a"}), "{listed}");
    assert_eq!(on_a["job"]["device_id"], "phone-a", "{listed}");
    // B lists the same rows.
    let from_b = json_on(&b.data, &["jobs", "list"]);
    assert_eq!(entry(&from_b, id_a)["host"], on_a["host"], "{from_b}");
    assert_eq!(entry(&from_b, id_b)["host"], on_b["host"], "{from_b}");
    // `jobs show` on A carries it too.
    let shown = json_on(&a.data, &["jobs", "show", &id_b.to_string()]);
    assert_eq!(shown["host"], on_b["host"], "{shown}");

    // In words: a HOST and a PHONE column, the phone no longer repeated in the line.
    let text = text_on(&a.data, &["jobs", "list"]);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("HOST") && lines[0].contains("PHONE"),
        "{text}"
    );
    let line_a = lines.iter().find(|l| l.contains("\"on-a\"")).unwrap();
    assert!(line_a.starts_with("fleet-a  phone-a  #"), "{text}");
    assert!(!line_a.contains("on phone"), "{text}");
    let line_b = lines.iter().find(|l| l.contains("\"on-b\"")).unwrap();
    assert!(line_b.starts_with("fleet-b  phone-b  #"), "{text}");

    // A's inbox holds B's review, naming host B and B's phone.
    let inbox = json_on(&a.data, &["inbox"]);
    let review = inbox["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["job_id"] == id_b)
        .unwrap_or_else(|| panic!("B's review is not in A's inbox: {inbox}"));
    assert_eq!(review["kind"], "job_review", "{inbox}");
    assert_eq!(review["host"]["host_id"], "fleet-b", "{inbox}");
    assert_eq!(review["device_id"], "phone-b", "{inbox}");
    let text = text_on(&a.data, &["inbox"]);
    assert!(
        text.lines()
            .any(|l| l.starts_with("HOST") && l.contains("PHONE")),
        "{text}"
    );
    let short = review["short_id"].as_str().unwrap();
    assert!(
        text.lines()
            .any(|l| l.starts_with("fleet-b  phone-b  ") && l.contains(short)),
        "{text}"
    );
}

#[test]
fn a_lone_daemons_lists_have_no_host_and_no_host_column() {
    let tmp = tempfile::tempdir().unwrap();
    let config = write_config(tmp.path());
    let data = tmp.path().join("data");
    let _serve = serve(&data, &config);
    let made = json_on(
        &data,
        &[
            "jobs", "create", "--title", "alone", "--prompt", "later", "--in", "1h",
        ],
    );
    assert!(made.get("host").is_none(), "{made}");
    let listed = json_on(&data, &["jobs", "list"]);
    let id = made["job"]["id"].as_i64().unwrap();
    assert!(entry(&listed, id).get("host").is_none(), "{listed}");
    let text = text_on(&data, &["jobs", "list"]);
    assert!(text.starts_with('#'), "{text}");
    assert!(!text.contains("HOST"), "{text}");
    let goals = json_on(&data, &["goals", "list"]);
    assert_eq!(goals["count"], 0, "{goals}");
}

#[test]
fn goals_list_and_a_goal_approval_on_one_daemon_name_the_other_daemons_host_and_phone() {
    let Some(url) = fleet_database() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let a = host(tmp.path(), "fleet-a", &url, "phone-a");
    let b = host(tmp.path(), "fleet-b", &url, "phone-b");
    let _serve_a = serve(&a.data, &a.config);
    let _serve_b = serve(&b.data, &b.config);

    // A goal made on B whose one step (a calendar edit on B's phone) waits for approval.
    let file = tmp.path().join("goal.json");
    std::fs::write(
        &file,
        json!({"objective": "move the dentist on phone b", "delivery": "none",
               "device_id": "phone-b",
               "plan": [{"id": "move", "title": "Move the dentist appointment", "kind": "tool",
                         "command": "openphone.calendar.update",
                         "params": {"event_id": 103, "start_at": 1_773_410_400_000_i64,
                                    "duration_minutes": 45}}]})
        .to_string(),
    )
    .unwrap();
    let made = json_on(&b.data, &["goals", "create", file.to_str().unwrap()]);
    let goal_id = made["goal"]["id"].as_str().unwrap().to_owned();

    // A's inbox shows the approval B's goal asks for, naming host B.
    let mut inbox = Value::Null;
    for _ in 0..120 {
        inbox = json_on(&a.data, &["inbox"]);
        if inbox["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["goal_id"] == goal_id.as_str())
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let approval = inbox["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["goal_id"] == goal_id.as_str())
        .unwrap_or_else(|| panic!("B's goal approval is not in A's inbox: {inbox}"));
    assert_eq!(approval["kind"], "goal_approval", "{inbox}");
    assert_eq!(approval["host"], json!({"host_id": "fleet-b"}), "{inbox}");

    // `goals list` on A names B and B's phone.
    let listed = json_on(&a.data, &["goals", "list"]);
    let goal = listed["goals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["goal_id"] == goal_id.as_str())
        .unwrap_or_else(|| panic!("B's goal is not listed on A: {listed}"));
    assert_eq!(goal["host"], json!({"host_id": "fleet-b"}), "{listed}");
    assert_eq!(goal["device_id"], "phone-b", "{listed}");
    let text = text_on(&a.data, &["goals", "list"]);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("HOST") && lines[0].contains("PHONE"),
        "{text}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("fleet-b  phone-b  ") && l.contains(&goal_id)),
        "{text}"
    );
}
