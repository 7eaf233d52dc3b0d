//! `content query|insert|update|delete`: contacts, calendar, SMS and the call log.

use super::support::Device;

const PHONES: &str = "content query --uri content://com.android.contacts/data/phones --projection contact_id:display_name:data1";
const EVENTS: &str = "content query --uri content://com.android.calendar/events --projection _id:title:dtstart:dtend:eventLocation:description";

#[test]
fn contacts_come_back_as_rows_one_per_phone_number() {
    let device = Device::start(&[]);
    let out = device.shell(PHONES);
    assert!(
        out.starts_with(
            "Row: 0 contact_id=1, display_name=Alice Martin, data1=+49 151 2345 6789\n"
        ),
        "{out}"
    );
    for (i, line) in out.lines().enumerate() {
        assert!(line.starts_with(&format!("Row: {i} contact_id=")), "{line}");
    }
    let none = device.shell(&format!("{PHONES} --where \"contact_id=99999\""));
    assert_eq!(none, "No result found.\n");
    assert!(device.logged().is_empty(), "queries are reads");
}

fn event_rows(device: &Device, title: &str) -> Vec<String> {
    device
        .shell(EVENTS)
        .lines()
        .filter(|l| l.contains(&format!(", title={title},")))
        .map(str::to_owned)
        .collect()
}

fn id_of(row: &str) -> String {
    row.split(", ")
        .find_map(|c| c.split_once("_id=").map(|(_, v)| v.to_owned()))
        .expect("an _id column")
}

#[test]
fn a_calendar_event_is_inserted_updated_and_deleted_through_the_provider() {
    let device = Device::start(&[]);
    let insert = "content insert --uri content://com.android.calendar/events --bind calendar_id:i:2 --bind title:s:Orthodontist --bind dtstart:l:1900000000000 --bind dtend:l:1900003600000 --bind eventTimezone:s:UTC --bind eventLocation:s:'Main St 1'";
    assert_eq!(device.shell(insert), "");
    let rows = event_rows(&device, "Orthodontist");
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert!(
        rows[0].contains(", dtstart=1900000000000, dtend=1900003600000, eventLocation=Main St 1,"),
        "{}",
        rows[0]
    );
    let id = id_of(&rows[0]);
    let update = format!(
        "content update --uri content://com.android.calendar/events --bind title:s:'Orthodontist (moved)' --where \"_id={id}\""
    );
    assert_eq!(device.shell(&update), "");
    assert_eq!(event_rows(&device, "Orthodontist (moved)").len(), 1);
    let delete =
        format!("content delete --uri content://com.android.calendar/events --where \"_id={id}\"");
    assert_eq!(device.shell(&delete), "");
    assert!(event_rows(&device, "Orthodontist (moved)").is_empty());
    assert_eq!(device.logged(), [insert.to_owned(), update, delete]);
}

#[test]
fn an_insert_without_a_time_zone_is_refused_like_the_calendar_provider() {
    let device = Device::start(&[]);
    let out = device.shell("content insert --uri content://com.android.calendar/events --bind calendar_id:i:2 --bind title:s:X --bind dtstart:l:1900000000000 --bind dtend:l:1900003600000");
    assert_eq!(
        out,
        "Error while accessing provider:com.android.calendar\njava.lang.IllegalArgumentException: EVENT_TIMEZONE cannot be empty.\n"
    );
    assert!(event_rows(&device, "X").is_empty());
}

#[test]
fn sms_and_call_log_are_denied_to_the_shell_on_recent_android() {
    let device = Device::start(&[]);
    let sms = device.shell("content query --uri content://sms --projection _id:address:body");
    assert!(sms.starts_with("Error while accessing provider:sms\njava.lang.SecurityException: Permission Denial: opening provider com.android.providers.telephony.SmsProvider from ProcessRecord{"), "{sms}");
    assert!(sms.contains("(pid=4242, uid=2000) requires android.permission.READ_SMS or android.permission.WRITE_SMS"), "{sms}");
    let calls = device.shell("content query --uri content://call_log/calls");
    assert!(
        calls.contains(
            "requires android.permission.READ_CALL_LOG or android.permission.WRITE_CALL_LOG"
        ),
        "{calls}"
    );
}

#[test]
fn sms_and_call_log_answer_rows_on_android_9() {
    let device = Device::start(&["--sdk", "28"]);
    let sms = device.shell("content query --uri content://sms/inbox --projection address:body");
    assert!(
        sms.contains("address=+49 151 2345 6789, body=I booked Room 4.2 🙂\n"),
        "{sms}"
    );
    assert!(sms.lines().all(|l| l.starts_with("Row: ")), "{sms}");
    let calls = device.shell("content query --uri content://call_log/calls --projection number:type:duration --where \"type=3\"");
    assert!(
        calls.starts_with("Row: 0 number=+49 171 111 2233, type=3, duration=0\n"),
        "{calls}"
    );
}

#[test]
fn an_unknown_uri_is_an_illegal_argument() {
    let device = Device::start(&[]);
    let out = device.shell("content query --uri content://media/external/images");
    assert!(out.starts_with("Error while accessing provider:media\njava.lang.IllegalArgumentException: Unknown URI content://media/external/images\n"), "{out}");
}

#[test]
fn every_calendar_is_listed_even_one_without_events() {
    let device = Device::start(&[]);
    let out = device.shell(
        "content query --uri content://com.android.calendar/calendars --projection _id:calendar_displayName",
    );
    assert_eq!(
        out,
        "Row: 0 _id=1, calendar_displayName=Personal\nRow: 1 _id=2, calendar_displayName=Work\n"
    );
}

#[test]
fn malformed_content_commands_say_what_is_wrong() {
    let device = Device::start(&[]);
    assert_eq!(
        device.shell("content query --projection _id"),
        "Error: Content provider URI not specified. Did you specify --uri argument?\n"
    );
    assert_eq!(
        device.shell("content query --uri"),
        "Error: Argument expected after \"--uri\"\n"
    );
    assert_eq!(
        device.shell("content insert --uri content://com.android.calendar/events --bind title:q:x"),
        "Error: Invalid binding: title:q:x\n"
    );
    assert_eq!(
        device.shell("am start --frobnicate"),
        "Error: Unknown option: --frobnicate\n"
    );
}
