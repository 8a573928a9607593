//! A recorded time as seconds since the epoch (`pricing.seconds`, the reference:
//! `datetime.fromisoformat(text).timestamp()`), read here for the form recordings write —
//! `YYYY-MM-DDTHH:MM:SS`, three or six digits of fraction, and `Z` or `±HH:MM` — and left to Python
//! for every other (a time without an offset is the machine's local time there, which this does
//! not know).

/// Seconds since the epoch of `text`, as Python's `fromisoformat(text).timestamp()` gives them
/// (the same `f64`: whole microseconds divided by a million, once); None where Python reads it.
pub fn seconds(text: &str) -> Option<f64> {
    let b = text.as_bytes();
    let num = |at: usize, len: usize| -> Option<i64> {
        let digits = b.get(at..at + len)?;
        digits.iter().try_fold(0i64, |n, &c| {
            c.is_ascii_digit().then(|| n * 10 + i64::from(c - b'0'))
        })
    };
    let at = |i: usize, c: u8| b.get(i) == Some(&c);
    if !(at(4, b'-') && at(7, b'-') && at(10, b'T') && at(13, b':') && at(16, b':')) {
        return None;
    }
    let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (hour, minute, second) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    // (years whose microseconds since the epoch an f64 holds exactly: the division is then Python's)
    if !(1970..=2200).contains(&year)
        || !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }
    let mut i = 19;
    let mut micros = 0;
    if at(i, b'.') {
        let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        micros = match digits {
            3 => num(i + 1, 3)? * 1000,
            6 => num(i + 1, 6)?,
            _ => return None,
        };
        i += 1 + digits;
    }
    let offset = match b.get(i..)? {
        b"Z" => 0,
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let (h, m) = (num(i + 1, 2)?, num(i + 4, 2)?);
            if h > 23 || m > 59 {
                return None;
            }
            let minutes = h * 60 + m;
            if *sign == b'-' {
                -minutes
            } else {
                minutes
            }
        }
        _ => return None,
    };
    let whole = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second
        - offset * 60;
    Some((whole * 1_000_000 + micros) as f64 / 1_000_000.0)
}

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to the date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forms_recordings_write_are_read_as_python_reads_them() {
        // (each `datetime.fromisoformat(text).timestamp()` in Python 3.11)
        for (text, want) in [
            ("1970-01-01T00:00:00Z", 0.0),
            ("2026-01-01T00:00:01.000Z", 1_767_225_601.0),
            ("2025-09-09T06:40:43.164Z", 1_757_400_043.164),
            ("2024-02-29T23:59:59.999999+05:30", 1_709_231_399.999_999),
            ("2024-03-01T00:00:00-00:30", 1_709_253_000.0),
        ] {
            assert_eq!(seconds(text), Some(want), "{text}");
        }
    }

    #[test]
    fn every_other_form_is_pythons() {
        for text in [
            "2025-09-09T06:40:43",       // (no offset: local time)
            "2025-09-09T06:40:43.16Z",   // (two digits)
            "2025-09-09 06:40:43Z",      // (a space)
            "2025-02-29T00:00:00Z",      // (not a leap year)
            "2025-13-01T00:00:00Z",      // (no such month)
            "2025-01-01T24:00:00Z",      // (no such hour)
            "2025-01-01T00:00:60Z",      // (a leap second)
            "2025-01-01T00:00:00+24:00", // (no such offset)
            "2025-01-01T00:00:00+0100",  // (no colon)
            "2025-01-01T00:00:00Zx",     // (more after it)
            "1969-12-31T23:59:59Z",      // (before the years read here)
            "2201-01-01T00:00:00Z",      // (after them)
            "２０２５-01-01T00:00:00Z",  // (other digits)
            "",
        ] {
            assert_eq!(seconds(text), None, "{text}");
        }
    }

    #[test]
    fn days_are_counted_across_leap_years() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(2200, 12, 31), 84_370);
        let mut days = 0;
        for year in 1970..2201 {
            for month in 1..=12 {
                assert_eq!(days_from_civil(year, month, 1), days);
                days += days_in_month(year, month);
            }
        }
    }
}
