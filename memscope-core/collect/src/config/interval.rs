//! The `--sample` interval: `100ms`, `1s`, `250us`.

/// Shortest interval accepted (100 µs): a finer timer would cost the job CPU for nothing.
pub const MIN_INTERVAL_NS: u64 = 100_000;
/// Longest interval accepted (one hour).
pub const MAX_INTERVAL_NS: u64 = 3_600_000_000_000;

/// Parses a `--sample` value: a whole number and a unit, `us`, `ms` or `s` (`250us`, `100ms`,
/// `1s`), between [`MIN_INTERVAL_NS`] and [`MAX_INTERVAL_NS`]. Returns nanoseconds.
///
/// # Errors
/// Anything else, as a message naming the value.
pub fn parse_interval(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    let (num, unit) = t.split_at(digits);
    let scale = match unit {
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        _ => 0,
    };
    let ns = num
        .parse::<u64>()
        .ok()
        .filter(|_| scale > 0)
        .and_then(|n| n.checked_mul(scale));
    match ns {
        Some(ns) if (MIN_INTERVAL_NS..=MAX_INTERVAL_NS).contains(&ns) => Ok(ns),
        Some(_) => Err(format!(
            "{s:?}: the interval must be between 100us and 3600s"
        )),
        None => Err(format!(
            "{s:?}: expected a duration such as 100ms, 1s or 250us"
        )),
    }
}

/// The `--sample` spelling of `ns` (the largest unit that divides it).
pub fn interval_text(ns: u64) -> String {
    if ns.is_multiple_of(1_000_000_000) {
        format!("{}s", ns / 1_000_000_000)
    } else if ns.is_multiple_of(1_000_000) {
        format!("{}ms", ns / 1_000_000)
    } else {
        format!("{}us", ns / 1_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_interval_takes_whole_numbers_with_a_unit_in_range() {
        assert_eq!(parse_interval("100ms"), Ok(100_000_000));
        assert_eq!(parse_interval("1s"), Ok(1_000_000_000));
        assert_eq!(parse_interval("250us"), Ok(250_000));
        for bad in ["", "100", "ms", "1.5s", "-1s", "10us", "2h", "3601s", "1 s"] {
            let e = parse_interval(bad).unwrap_err();
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
        for ns in [250_000, 100_000_000, 2_000_000_000, 1_500_000] {
            assert_eq!(parse_interval(&interval_text(ns)), Ok(ns));
        }
    }
}
