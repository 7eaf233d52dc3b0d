//! Times for people: every instant a person reads is shown in the local time zone with the zone
//! named (and, where it helps, how far away it is), and every instant a person writes may be
//! RFC 3339, relative (`in 2h`) or a local wall-clock time (`09:00`, `tomorrow 09:00`).
//!
//! The wire protocol and `--json` output keep Unix milliseconds; this module is only the
//! edge where a person reads or types a time. "Now" is always a parameter (from the injected
//! [`Clock`](crate::Clock)), never read here, so the same input gives the same answer in tests.
//!
//! The local zone is the system's (`TZ`, else `/etc/localtime`), read through chrono's `Local`.
//! Each function has an `_in` form taking any chrono [`TimeZone`], which the tests use.
//!
//! The zone is written as its offset from UTC (`UTC`, `UTC+1`, `UTC-5`, `UTC+5:30`): chrono does
//! not expose zone abbreviations, and the offset is what a reader needs to compare two times.

use std::fmt;

use chrono::{
    DateTime, Datelike, Days, NaiveDate, NaiveDateTime, NaiveTime, Offset, TimeZone, Timelike,
    Weekday,
};

/// The forms [`parse_when`] accepts, for help texts and error messages.
pub const WHEN_FORMS: &str = "RFC 3339 (2026-11-28T14:05:00+01:00 or …Z), a local date and time \
(2026-11-28 14:05), relative (in 2h, 90m, 1h 30m), a local clock time (09:00, tomorrow 09:00, \
fri 18:30) or Unix milliseconds";

/// The forms [`parse_duration`] accepts.
pub const DURATION_FORMS: &str = "a duration like 30s, 15m, 2h, 1h 30m, 3d or 1w";

const SECOND: i64 = 1_000;
const MINUTE: i64 = 60 * SECOND;
const HOUR: i64 = 60 * MINUTE;
const DAY: i64 = 24 * HOUR;
const WEEK: i64 = 7 * DAY;

/// A time or duration a person wrote that could not be read, with what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WhenError {
    /// The text as given.
    pub input: String,
    /// What was wrong with it, for a person.
    pub reason: String,
}

impl fmt::Display for WhenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.input, self.reason)
    }
}

impl std::error::Error for WhenError {}

fn err(input: &str, reason: impl Into<String>) -> WhenError {
    WhenError {
        input: input.to_owned(),
        reason: reason.into(),
    }
}

/// `ms` in the local zone with the zone and how far it is from `now_ms`:
/// `Sat 28 Nov 14:05 UTC+1 (in 2 h)`, `Mon 4 Jan 2027 09:00 UTC (in 5 weeks)`, `… (3 min ago)`.
/// The year is shown when it is not `now_ms`'s year.
pub fn format_local(ms: i64, now_ms: i64) -> String {
    format_local_in(ms, now_ms, &chrono::Local)
}

/// [`format_local`] in the zone `tz`.
pub fn format_local_in<Tz: TimeZone>(ms: i64, now_ms: i64, tz: &Tz) -> String {
    format!(
        "{} ({})",
        format_clock_in(ms, Some(now_ms), tz),
        format_relative(ms, now_ms)
    )
}

/// `ms` in the local zone with the zone, year always shown, no relative part:
/// `Sat 28 Nov 2026 14:05 UTC+1`. For listings of past events (audit) and anywhere "now" is not
/// at hand.
pub fn format_local_abs(ms: i64) -> String {
    format_local_abs_in(ms, &chrono::Local)
}

/// [`format_local_abs`] in the zone `tz`.
pub fn format_local_abs_in<Tz: TimeZone>(ms: i64, tz: &Tz) -> String {
    format_clock_in(ms, None, tz)
}

/// `ms` in the local zone with the zone, year always shown, seconds shown when not zero:
/// `Fri 13 Mar 2026 14:00 UTC+1`, `Fri 13 Mar 2026 14:00:30 UTC+1`. For what a person
/// approves (a confirmation summary), which must read as exactly what runs and not go stale.
pub fn format_local_exact(ms: i64) -> String {
    format_local_exact_in(ms, &chrono::Local)
}

/// [`format_local_exact`] in the zone `tz`.
pub fn format_local_exact_in<Tz: TimeZone>(ms: i64, tz: &Tz) -> String {
    let Some(at) = tz.timestamp_millis_opt(ms).single() else {
        return format!("{ms} ms since 1970 (out of range)");
    };
    let pattern = if at.second() == 0 {
        "%a %-d %b %Y %H:%M"
    } else {
        "%a %-d %b %Y %H:%M:%S"
    };
    format!(
        "{} {}",
        at.naive_local().format(pattern),
        zone_name(at.offset().fix().local_minus_utc())
    )
}

fn format_clock_in<Tz: TimeZone>(ms: i64, now_ms: Option<i64>, tz: &Tz) -> String {
    let Some(at) = tz.timestamp_millis_opt(ms).single() else {
        return format!("{ms} ms since 1970 (out of range)");
    };
    let same_year = now_ms
        .and_then(|now| tz.timestamp_millis_opt(now).single())
        .is_some_and(|now| now.year() == at.year());
    let date = if same_year {
        at.naive_local().format("%a %-d %b %H:%M").to_string()
    } else {
        at.naive_local().format("%a %-d %b %Y %H:%M").to_string()
    };
    format!("{date} {}", zone_name(at.offset().fix().local_minus_utc()))
}

/// An offset east of UTC in seconds as `UTC`, `UTC+1`, `UTC-5`, `UTC+5:30`.
fn zone_name(east_secs: i32) -> String {
    if east_secs == 0 {
        return "UTC".to_owned();
    }
    let sign = if east_secs < 0 { '-' } else { '+' };
    let abs = east_secs.unsigned_abs();
    let (h, m) = (abs / 3600, (abs % 3600) / 60);
    if m == 0 {
        format!("UTC{sign}{h}")
    } else {
        format!("UTC{sign}{h}:{m:02}")
    }
}

/// How far `ms` is from `now_ms`: `in 2 h`, `3 min ago`, `now` (under a second).
pub fn format_relative(ms: i64, now_ms: i64) -> String {
    let delta = ms.saturating_sub(now_ms);
    if delta.unsigned_abs() < SECOND.unsigned_abs() {
        return "now".to_owned();
    }
    let span = format_duration(delta.saturating_abs());
    if delta > 0 {
        format!("in {span}")
    } else {
        format!("{span} ago")
    }
}

/// A length of time for a person, two units at most: `45 s`, `12 min`, `2 h 5 min`, `14 h`,
/// `1 day 3 h`, `9 days`, `7 weeks`. Negative lengths are shown as their size.
pub fn format_duration(ms: i64) -> String {
    let ms = ms.saturating_abs();
    let plural = |n: i64, one: &str, many: &str| {
        if n == 1 {
            format!("1 {one}")
        } else {
            format!("{n} {many}")
        }
    };
    match ms {
        _ if ms < MINUTE => format!("{} s", ms / SECOND),
        _ if ms < HOUR => format!("{} min", ms / MINUTE),
        _ if ms < 10 * HOUR && (ms % HOUR) / MINUTE != 0 => {
            format!("{} h {} min", ms / HOUR, (ms % HOUR) / MINUTE)
        }
        _ if ms < DAY => format!("{} h", ms / HOUR),
        _ if ms < 2 * DAY && (ms % DAY) / HOUR != 0 => {
            format!("1 day {} h", (ms % DAY) / HOUR)
        }
        _ if ms < 4 * WEEK => plural(ms / DAY, "day", "days"),
        _ => plural(ms / WEEK, "week", "weeks"),
    }
}

/// A duration a person wrote (`30s`, `15m`, `2h`, `1h 30m`, `90 min`, `3d`, `1w`) in
/// milliseconds. Zero is allowed; callers that need a positive length say so.
pub fn parse_duration(input: &str) -> Result<i64, WhenError> {
    let text = input.trim().to_ascii_lowercase();
    if text.is_empty() {
        return Err(err(input, format!("empty; expected {DURATION_FORMS}")));
    }
    let mut total: i64 = 0;
    let mut rest = text.as_str();
    while !rest.is_empty() {
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 {
            return Err(err(input, format!("expected {DURATION_FORMS}")));
        }
        let number: i64 = rest[..digits]
            .parse()
            .map_err(|_| err(input, "the number is too large"))?;
        rest = rest[digits..].trim_start();
        let unit_len = rest.len()
            - rest
                .trim_start_matches(|c: char| c.is_ascii_alphabetic())
                .len();
        let unit = &rest[..unit_len];
        let scale = match unit {
            "s" | "sec" | "secs" | "second" | "seconds" => SECOND,
            "m" | "min" | "mins" | "minute" | "minutes" => MINUTE,
            "h" | "hr" | "hrs" | "hour" | "hours" => HOUR,
            "d" | "day" | "days" => DAY,
            "w" | "wk" | "wks" | "week" | "weeks" => WEEK,
            "" => {
                return Err(err(
                    input,
                    format!("{number} needs a unit (s, m, h, d or w); expected {DURATION_FORMS}"),
                ));
            }
            other => {
                return Err(err(
                    input,
                    format!("unknown unit {other:?}; expected {DURATION_FORMS}"),
                ));
            }
        };
        total = number
            .checked_mul(scale)
            .and_then(|part| total.checked_add(part))
            .ok_or_else(|| err(input, "the duration is too long"))?;
        rest = rest[unit_len..].trim_start();
        rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
    }
    Ok(total)
}

/// An instant a person wrote, as Unix milliseconds, read against `now_ms` in the local zone.
/// See [`WHEN_FORMS`] for what is accepted. Local times that fall in a clock change's gap are
/// refused; in an overlap the earlier instant is taken.
pub fn parse_when(input: &str, now_ms: i64) -> Result<i64, WhenError> {
    parse_when_in(input, now_ms, &chrono::Local)
}

/// [`parse_when`] in the zone `tz`.
pub fn parse_when_in<Tz: TimeZone>(input: &str, now_ms: i64, tz: &Tz) -> Result<i64, WhenError> {
    let text = input.trim();
    let lower = text.to_ascii_lowercase();
    if lower.is_empty() {
        return Err(err(input, format!("empty; expected {WHEN_FORMS}")));
    }
    if lower == "now" {
        return Ok(now_ms);
    }
    if lower.bytes().all(|b| b.is_ascii_digit()) {
        if lower.len() >= 12 {
            return lower
                .parse()
                .map_err(|_| err(input, "the number is too large"));
        }
        return Err(err(
            input,
            "a bare number is ambiguous: add a unit (90s, 90m) or write a time (RFC 3339, 09:00)",
        ));
    }
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Ok(at.timestamp_millis());
    }
    if let Some(naive) = parse_naive_datetime(text) {
        return local_to_ms(input, tz, naive);
    }
    // Relative: "in 2h", "+2h", "2h", "2h ago".
    let relative = lower
        .strip_prefix("in ")
        .or_else(|| lower.strip_prefix('+'))
        .map(|rest| (rest, 1))
        .or_else(|| lower.strip_suffix(" ago").map(|rest| (rest, -1)));
    let starts_with_digit = lower.starts_with(|c: char| c.is_ascii_digit());
    if let Some((rest, sign)) = relative {
        let d = parse_duration(rest).map_err(|e| err(input, e.reason))?;
        return now_ms
            .checked_add(sign * d)
            .ok_or_else(|| err(input, "the time is too far away"));
    }
    let clock_like = lower.contains(':') || lower.ends_with("am") || lower.ends_with("pm");
    if starts_with_digit
        && !clock_like
        && let Ok(d) = parse_duration(&lower)
    {
        return now_ms
            .checked_add(d)
            .ok_or_else(|| err(input, "the time is too far away"));
    }
    parse_day_and_clock(input, &lower, now_ms, tz)
}

/// An RFC 3339 time with its offset (`2026-12-01T18:00:00+01:00`, `…Z`) as Unix milliseconds:
/// the one form a document (a goal file) may hold besides milliseconds, since it means the same
/// instant wherever and whenever it is read.
pub fn parse_rfc3339(input: &str) -> Result<i64, WhenError> {
    DateTime::parse_from_rfc3339(input.trim())
        .map(|at| at.timestamp_millis())
        .map_err(|e| {
            err(
                input,
                format!("not an RFC 3339 time ({e}); it looks like 2026-12-01T18:00:00+01:00 or 2026-12-01T17:00:00Z"),
            )
        })
}

fn parse_naive_datetime(text: &str) -> Option<NaiveDateTime> {
    [
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
    ]
    .iter()
    .find_map(|f| NaiveDateTime::parse_from_str(text, f).ok())
}

/// `[today|tomorrow|<weekday>] <clock>` or `<clock>` alone (the next time the clock shows it).
fn parse_day_and_clock<Tz: TimeZone>(
    input: &str,
    lower: &str,
    now_ms: i64,
    tz: &Tz,
) -> Result<i64, WhenError> {
    let now = tz
        .timestamp_millis_opt(now_ms)
        .single()
        .ok_or_else(|| err(input, "now is out of range"))?;
    let today = now.date_naive();
    let mut words = lower.split_whitespace();
    let first = words.next().unwrap_or_default();
    let (day, clock_text): (Option<DaySpec>, Option<&str>) = match day_spec(first) {
        Some(day) => {
            let rest = words.next();
            if words.next().is_some() {
                return Err(err(input, format!("expected {WHEN_FORMS}")));
            }
            (Some(day), rest)
        }
        None => {
            if words.next().is_some() {
                return Err(err(input, format!("expected {WHEN_FORMS}")));
            }
            (None, Some(first))
        }
    };
    let Some(clock_text) = clock_text else {
        return Err(err(
            input,
            format!("at what time? e.g. \"{first} 09:00\"; expected {WHEN_FORMS}"),
        ));
    };
    let Some(clock) = parse_clock(clock_text) else {
        if lower.contains('-') || lower.contains('t') && lower.contains(':') {
            return Err(err(
                input,
                "not a valid date and time; RFC 3339 looks like 2026-11-28T14:05:00+01:00",
            ));
        }
        return Err(err(input, format!("expected {WHEN_FORMS}")));
    };
    let date = match day {
        Some(DaySpec::Today) => today,
        Some(DaySpec::Tomorrow) => today
            .checked_add_days(Days::new(1))
            .ok_or_else(|| err(input, "out of range"))?,
        Some(DaySpec::Weekday(wd)) => {
            let ahead = (7 + i64::from(wd.num_days_from_monday())
                - i64::from(today.weekday().num_days_from_monday()))
                % 7;
            let mut date = add_days(input, today, ahead)?;
            if ahead == 0 && local_to_ms(input, tz, date.and_time(clock))? <= now_ms {
                date = add_days(input, today, 7)?;
            }
            date
        }
        None => {
            if local_to_ms(input, tz, today.and_time(clock))? > now_ms {
                today
            } else {
                add_days(input, today, 1)?
            }
        }
    };
    local_to_ms(input, tz, date.and_time(clock))
}

fn add_days(input: &str, date: NaiveDate, n: i64) -> Result<NaiveDate, WhenError> {
    u64::try_from(n)
        .ok()
        .and_then(|n| date.checked_add_days(Days::new(n)))
        .ok_or_else(|| err(input, "out of range"))
}

enum DaySpec {
    Today,
    Tomorrow,
    Weekday(Weekday),
}

fn day_spec(word: &str) -> Option<DaySpec> {
    match word {
        "today" => Some(DaySpec::Today),
        "tomorrow" => Some(DaySpec::Tomorrow),
        _ => word.parse::<Weekday>().ok().map(DaySpec::Weekday),
    }
}

/// `09:00`, `9:30`, `18:30:15`, `9am`, `5:30pm`.
fn parse_clock(text: &str) -> Option<NaiveTime> {
    let (body, pm) = match (text.strip_suffix("am"), text.strip_suffix("pm")) {
        (Some(b), _) => (b.trim_end(), Some(false)),
        (_, Some(b)) => (b.trim_end(), Some(true)),
        _ => (text, None),
    };
    let mut parts = body.split(':');
    let h: u32 = parts.next()?.parse().ok()?;
    let m: u32 = match parts.next() {
        Some(m) if m.len() == 2 => m.parse().ok()?,
        Some(_) => return None,
        None if pm.is_some() => 0,
        None => return None,
    };
    let s: u32 = match parts.next() {
        Some(s) if s.len() == 2 => s.parse().ok()?,
        Some(_) => return None,
        None => 0,
    };
    if parts.next().is_some() {
        return None;
    }
    let h = match pm {
        Some(_) if !(1..=12).contains(&h) => return None,
        Some(true) => h % 12 + 12,
        Some(false) => h % 12,
        None => h,
    };
    NaiveTime::from_hms_opt(h, m, s)
}

/// The instant a local wall-clock reading names in `tz`: the earlier one when the clocks go
/// back and the reading happens twice, an error when the clocks go forward over it.
///
/// Worked out from the zone's offsets a day either side rather than `from_local_datetime`,
/// whose answer in an overlap differs between chrono's zones.
fn local_to_ms<Tz: TimeZone>(input: &str, tz: &Tz, naive: NaiveDateTime) -> Result<i64, WhenError> {
    let as_utc = naive.and_utc();
    let offsets: Vec<i32> = [-DAY, 0, DAY]
        .iter()
        .filter_map(|&shift| as_utc.checked_add_signed(chrono::Duration::milliseconds(shift)))
        .map(|probe| {
            tz.offset_from_utc_datetime(&probe.naive_utc())
                .fix()
                .local_minus_utc()
        })
        .collect();
    offsets
        .iter()
        .filter_map(|&east| {
            let instant = as_utc.checked_sub_signed(chrono::Duration::seconds(i64::from(east)))?;
            let back = tz.offset_from_utc_datetime(&instant.naive_utc()).fix();
            (back.local_minus_utc() == east).then(|| instant.timestamp_millis())
        })
        .min()
        .ok_or_else(|| {
            err(
                input,
                format!(
                    "{} does not exist in the local time zone (the clocks go forward then); \
                     pick another time or give an offset (RFC 3339)",
                    naive.format("%Y-%m-%d %H:%M")
                ),
            )
        })
}

#[cfg(test)]
#[path = "human_tests.rs"]
mod tests;
