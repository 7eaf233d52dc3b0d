//! Civil-time arithmetic for the simulated phone's displays (no time-zone database: the
//! scenario gives a fixed UTC offset).

/// Milliseconds in a day.
pub(crate) const DAY_MS: i64 = 86_400_000;

/// The local day number (days since 1970-01-01) of `ms` at `offset_min`.
pub(crate) fn local_day(ms: i64, offset_min: i32) -> i64 {
    ms.saturating_add(i64::from(offset_min) * 60_000)
        .div_euclid(DAY_MS)
}

/// Unix ms of local midnight starting `day`.
pub(crate) fn day_start(day: i64, offset_min: i32) -> i64 {
    day.saturating_mul(DAY_MS)
        .saturating_sub(i64::from(offset_min) * 60_000)
}

/// Local minutes since midnight of `ms`.
pub(crate) fn minute_of_day(ms: i64, offset_min: i32) -> i64 {
    ms.saturating_add(i64::from(offset_min) * 60_000)
        .rem_euclid(DAY_MS)
        / 60_000
}

/// (year, month 1-12, day 1-31) of a day number (proleptic Gregorian).
pub(crate) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    (
        y,
        u32::try_from(m).unwrap_or(1),
        u32::try_from(d).unwrap_or(1),
    )
}

/// Day number of a civil date.
pub(crate) fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// `Thu 12 Mar 2026`.
pub(crate) fn day_title(day: i64) -> String {
    let (y, m, d) = civil_from_days(day);
    let weekday = WEEKDAYS[usize::try_from(day.rem_euclid(7)).unwrap_or(0)];
    let month = MONTHS[usize::try_from(m.saturating_sub(1)).unwrap_or(0).min(11)];
    format!("{weekday} {d} {month} {y}")
}

/// `2026-03-12`.
pub(crate) fn iso_date(day: i64) -> String {
    let (y, m, d) = civil_from_days(day);
    format!("{y:04}-{m:02}-{d:02}")
}

/// `09:05` local time of `ms`.
pub(crate) fn hm(ms: i64, offset_min: i32) -> String {
    let minutes = minute_of_day(ms, offset_min);
    format!("{:02}:{:02}", minutes / 60, minutes % 60)
}

/// `Thu 12 Mar 2026 09:05`, or `09:05` when `ms` falls on `today`.
pub(crate) fn when(ms: i64, offset_min: i32, today: i64) -> String {
    let day = local_day(ms, offset_min);
    if day == today {
        hm(ms, offset_min)
    } else if day == today - 1 {
        format!("Yesterday {}", hm(ms, offset_min))
    } else {
        format!("{} {}", day_title(day), hm(ms, offset_min))
    }
}

/// Parses `HH:MM` (24 h) into minutes since midnight.
pub(crate) fn parse_hm(text: &str) -> Option<i64> {
    let (h, m) = text.trim().split_once(':')?;
    let h: i64 = h.trim().parse().ok()?;
    let m: i64 = m.trim().parse().ok()?;
    ((0..24).contains(&h) && (0..60).contains(&m)).then_some(h * 60 + m)
}

/// Parses `YYYY-MM-DD` into a day number.
pub(crate) fn parse_date(text: &str) -> Option<i64> {
    let mut parts = text.trim().splitn(3, '-');
    let y: i64 = parts.next()?.parse().ok()?;
    let m: u32 = parts.next()?.parse().ok()?;
    let d: u32 = parts.next()?.parse().ok()?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || !(1970..=9999).contains(&y) {
        return None;
    }
    let day = days_from_civil(y, m, d);
    // Reject 31 Feb and the like: the round trip must give the same date.
    (civil_from_days(day) == (y, m, d)).then_some(day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_round_trip_and_formats() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        let day = days_from_civil(2026, 3, 12);
        assert_eq!(civil_from_days(day), (2026, 3, 12));
        assert_eq!(day_title(day), "Thu 12 Mar 2026");
        assert_eq!(iso_date(day), "2026-03-12");
        assert_eq!(parse_date("2026-03-12"), Some(day));
        assert_eq!(parse_date("2026-02-31"), None);
        assert_eq!(parse_hm("09:05"), Some(545));
        assert_eq!(parse_hm("24:00"), None);
        let ms = day_start(day, 60) + 9 * 3_600_000;
        assert_eq!(hm(ms, 60), "09:00");
        assert_eq!(local_day(ms, 60), day);
    }
}
