use super::*;
use chrono::{FixedOffset, Utc};

/// Sat 28 Nov 2026 10:33:00 UTC.
fn now() -> i64 {
    Utc.with_ymd_and_hms(2026, 11, 28, 10, 33, 0)
        .unwrap()
        .timestamp_millis()
}

fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> i64 {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, 0)
        .unwrap()
        .timestamp_millis()
}

fn plus1() -> FixedOffset {
    FixedOffset::east_opt(3600).unwrap()
}

#[test]
fn format_local_names_the_zone_and_the_distance() {
    let at = now() + 2 * HOUR;
    assert_eq!(
        format_local_in(at, now(), &Utc),
        "Sat 28 Nov 12:33 UTC (in 2 h)"
    );
    assert_eq!(
        format_local_in(at, now(), &plus1()),
        "Sat 28 Nov 13:33 UTC+1 (in 2 h)"
    );
    let minus = FixedOffset::west_opt(5 * 3600 + 1800).unwrap();
    assert_eq!(
        format_local_in(now() - 3 * MINUTE, now(), &minus),
        "Sat 28 Nov 05:00 UTC-5:30 (3 min ago)"
    );
}

#[test]
fn format_local_shows_the_year_only_when_it_differs() {
    let next_year = utc(2027, 1, 4, 9, 0);
    assert_eq!(
        format_local_in(next_year, now(), &Utc),
        "Mon 4 Jan 2027 09:00 UTC (in 5 weeks)"
    );
    assert_eq!(
        format_local_abs_in(now(), &Utc),
        "Sat 28 Nov 2026 10:33 UTC"
    );
}

#[test]
fn format_local_exact_always_has_the_year_and_seconds_when_not_zero() {
    let at = utc(2026, 3, 13, 13, 0);
    assert_eq!(
        format_local_exact_in(at, &plus1()),
        "Fri 13 Mar 2026 14:00 UTC+1"
    );
    assert_eq!(
        format_local_exact_in(at + 30 * SECOND, &Utc),
        "Fri 13 Mar 2026 13:00:30 UTC"
    );
    assert!(format_local_exact_in(i64::MIN, &Utc).contains("out of range"));
}

#[test]
fn format_local_out_of_range_is_said_not_panicked() {
    assert!(format_local_in(i64::MAX, now(), &Utc).contains("out of range"));
}

#[test]
fn format_relative_and_duration_cover_each_unit() {
    assert_eq!(format_relative(now() + 400, now()), "now");
    assert_eq!(format_relative(now() + 25 * SECOND, now()), "in 25 s");
    assert_eq!(format_relative(now() - 3 * MINUTE, now()), "3 min ago");
    assert_eq!(
        format_relative(now() + 2 * HOUR + 5 * MINUTE, now()),
        "in 2 h 5 min"
    );
    assert_eq!(
        format_relative(now() + 14 * HOUR + 5 * MINUTE, now()),
        "in 14 h"
    );
    assert_eq!(
        format_relative(now() + DAY + 3 * HOUR, now()),
        "in 1 day 3 h"
    );
    assert_eq!(format_relative(now() - 9 * DAY, now()), "9 days ago");
    assert_eq!(format_relative(now() + 7 * WEEK, now()), "in 7 weeks");
    assert_eq!(format_duration(DAY), "1 day");
    assert_eq!(format_duration(WEEK * 5), "5 weeks");
    assert_eq!(format_duration(i64::MIN), format_duration(i64::MAX));
}

#[test]
fn parse_duration_accepts_the_usual_forms() {
    assert_eq!(parse_duration("30s"), Ok(30 * SECOND));
    assert_eq!(parse_duration("2h"), Ok(2 * HOUR));
    assert_eq!(parse_duration("2 h"), Ok(2 * HOUR));
    assert_eq!(parse_duration("1h 30m"), Ok(90 * MINUTE));
    assert_eq!(parse_duration("1h30m"), Ok(90 * MINUTE));
    assert_eq!(parse_duration("90 minutes"), Ok(90 * MINUTE));
    assert_eq!(parse_duration("3d, 1w"), Ok(10 * DAY));
    assert_eq!(parse_duration("0s"), Ok(0));
}

#[test]
fn parse_duration_bad_input_says_what_is_wrong() {
    assert!(parse_duration("").unwrap_err().reason.contains("empty"));
    assert!(
        parse_duration("90")
            .unwrap_err()
            .reason
            .contains("needs a unit")
    );
    assert!(
        parse_duration("2 fortnights")
            .unwrap_err()
            .reason
            .contains("unknown unit \"fortnights\"")
    );
    assert!(parse_duration("h").unwrap_err().reason.contains("30s"));
    assert!(
        parse_duration("99999999999999999999s")
            .unwrap_err()
            .reason
            .contains("too large")
    );
    assert!(
        parse_duration("9999999999999w")
            .unwrap_err()
            .reason
            .contains("too long")
    );
}

#[test]
fn parse_when_reads_rfc3339_relative_and_epoch_ms() {
    let n = now();
    assert_eq!(
        parse_when_in("2026-12-01T09:00:00Z", n, &Utc),
        Ok(utc(2026, 12, 1, 9, 0))
    );
    assert_eq!(
        parse_when_in("2026-12-01T10:00:00+01:00", n, &Utc),
        Ok(utc(2026, 12, 1, 9, 0))
    );
    assert_eq!(parse_when_in("in 2h", n, &Utc), Ok(n + 2 * HOUR));
    assert_eq!(parse_when_in("In 1h 30m", n, &Utc), Ok(n + 90 * MINUTE));
    assert_eq!(parse_when_in("+15m", n, &Utc), Ok(n + 15 * MINUTE));
    assert_eq!(parse_when_in("2h", n, &Utc), Ok(n + 2 * HOUR));
    assert_eq!(parse_when_in("10m ago", n, &Utc), Ok(n - 10 * MINUTE));
    assert_eq!(parse_when_in("now", n, &Utc), Ok(n));
    assert_eq!(
        parse_when_in("1795826442464", n, &Utc),
        Ok(1_795_826_442_464)
    );
}

#[test]
fn parse_when_reads_local_wall_clock_times_in_the_given_zone() {
    let n = now(); // 11:33 in UTC+1
    let z = plus1();
    // 2026-12-01 09:00 at UTC+1 is 08:00 UTC.
    assert_eq!(
        parse_when_in("2026-12-01 09:00", n, &z),
        Ok(utc(2026, 12, 1, 8, 0))
    );
    assert_eq!(
        parse_when_in("2026-12-01T09:00:30", n, &z),
        Ok(utc(2026, 12, 1, 8, 0) + 30 * SECOND)
    );
    assert_eq!(
        parse_when_in("tomorrow 09:00", n, &z),
        Ok(utc(2026, 11, 29, 8, 0))
    );
    assert_eq!(
        parse_when_in("today 18:30", n, &z),
        Ok(utc(2026, 11, 28, 17, 30))
    );
    // A bare clock time is the next time the clock shows it.
    assert_eq!(parse_when_in("18:30", n, &z), Ok(utc(2026, 11, 28, 17, 30)));
    assert_eq!(parse_when_in("09:00", n, &z), Ok(utc(2026, 11, 29, 8, 0)));
    assert_eq!(parse_when_in("9am", n, &z), Ok(utc(2026, 11, 29, 8, 0)));
    assert_eq!(
        parse_when_in("5:30pm", n, &z),
        Ok(utc(2026, 11, 28, 16, 30))
    );
    // 2026-11-28 is a Saturday: "fri" is next Friday, "sat 09:00" (passed) is next week.
    assert_eq!(
        parse_when_in("fri 18:30", n, &z),
        Ok(utc(2026, 12, 4, 17, 30))
    );
    assert_eq!(
        parse_when_in("Saturday 09:00", n, &z),
        Ok(utc(2026, 12, 5, 8, 0))
    );
    assert_eq!(
        parse_when_in("sat 20:00", n, &z),
        Ok(utc(2026, 11, 28, 19, 0))
    );
}

#[test]
fn parse_rfc3339_takes_only_a_time_with_its_offset() {
    assert_eq!(
        parse_rfc3339("2026-12-01T18:00:00+01:00"),
        Ok(utc(2026, 12, 1, 17, 0))
    );
    assert_eq!(
        parse_rfc3339(" 2026-12-01T17:00:00Z "),
        Ok(utc(2026, 12, 1, 17, 0))
    );
    for bad in ["2026-12-01 18:00", "in 2h", "1795826442464", ""] {
        let e = parse_rfc3339(bad).unwrap_err();
        assert!(
            e.reason.contains("2026-12-01T18:00:00+01:00"),
            "{bad:?}: {e}"
        );
    }
}

#[test]
fn parse_when_bad_input_says_what_is_accepted() {
    let n = now();
    for (input, needle) in [
        ("", "empty"),
        ("90", "bare number is ambiguous"),
        ("tomorrow", "at what time"),
        ("soon", "RFC 3339"),
        ("25:00", "RFC 3339"),
        ("13pm", "RFC 3339"),
        ("2026-13-01T09:00:00Z", "not a valid date and time"),
        ("in 2 fortnights", "unknown unit"),
        ("tomorrow 09:00 sharp", "RFC 3339"),
    ] {
        let e = parse_when_in(input, n, &Utc).unwrap_err();
        assert!(e.reason.contains(needle), "{input:?}: {e}");
        assert!(e.to_string().starts_with(&format!("{input:?}")), "{e}");
    }
}

/// The system zone, read from `TZ`: a child copy of this test binary runs
/// [`local_zone_child`] with a POSIX `TZ` for US Eastern time (no zoneinfo files needed).
#[test]
fn local_zone_follows_tz_across_daylight_saving_changes() {
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args(["--exact", "human::tests::local_zone_child", "--nocapture"])
        .env("TZ", "EST5EDT,M3.2.0,M11.1.0")
        .env("OPENPHONE_HUMAN_TIME_CHILD", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("1 passed"), "{stdout}");
}

#[test]
fn local_zone_child() {
    if std::env::var_os("OPENPHONE_HUMAN_TIME_CHILD").is_none() {
        return;
    }
    // Before and after the 2026 US changes (8 March, 1 November).
    let summer = utc(2026, 7, 1, 16, 0);
    let winter = utc(2026, 12, 1, 16, 0);
    assert_eq!(format_local(summer, summer), "Wed 1 Jul 12:00 UTC-4 (now)");
    assert_eq!(
        format_local(winter, summer),
        "Tue 1 Dec 11:00 UTC-5 (in 21 weeks)"
    );
    // "tomorrow 09:00" across the autumn change: 31 Oct is EDT, 1 Nov 09:00 is EST.
    let eve = utc(2026, 10, 31, 16, 0);
    assert_eq!(
        parse_when("tomorrow 09:00", eve),
        Ok(utc(2026, 11, 1, 14, 0))
    );
    // The spring gap: 8 March 02:30 does not exist.
    let gap = parse_when("2026-03-08 02:30", eve).unwrap_err();
    assert!(gap.reason.contains("does not exist"), "{gap}");
    // The autumn overlap: 1 November 01:30 happens twice; the earlier (EDT) is taken.
    assert_eq!(
        parse_when("2026-11-01 01:30", eve),
        Ok(utc(2026, 11, 1, 5, 30))
    );
}
