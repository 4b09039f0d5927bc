//! `--keep last:5m|last:2GiB|last:1000000`: the flight recorder's bound (issue 38) — the last
//! stretch of time, the last bytes of rows on disk, or the last events.

/// What the flight recorder keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeepBound {
    /// The rows of the last this many nanoseconds.
    Time(u64),
    /// At most this many bytes of rows on disk.
    Bytes(u64),
    /// The last this many rows.
    Events(u64),
}

/// Smallest bounds accepted: a window below them would hold too little to explain anything.
const MIN_TIME_NS: u64 = 1_000_000_000;
const MIN_BYTES: u64 = 1 << 20;
const MIN_EVENTS: u64 = 1000;

impl KeepBound {
    /// Parses `last:<N>` with `N` a duration (`30s`, `5m`, `2h`), a size (`64MiB`, `2GiB`,
    /// `500MB`) or a number of rows (`1000000`).
    ///
    /// # Errors
    /// Anything else, or a bound below 1 s, 1 MiB or 1000 rows, as a message naming the value.
    pub fn parse(s: &str) -> Result<KeepBound, String> {
        let usage = || {
            format!("{s:?}: expected last:<duration> (30s, 5m, 2h), last:<size> (64MiB, 2GiB) or last:<rows> (1000000)")
        };
        let v = s.strip_prefix("last:").ok_or_else(usage)?;
        let digits = v.bytes().take_while(u8::is_ascii_digit).count();
        let (num, unit) = v.split_at(digits);
        let too_large = || format!("{s:?}: too large");
        if num.is_empty() {
            return Err(usage());
        }
        let n: u64 = num.parse().map_err(|_| too_large())?;
        let scaled = |k: u64| n.checked_mul(k).ok_or_else(too_large);
        let b = match unit {
            "" => KeepBound::Events(n),
            "s" => KeepBound::Time(scaled(1_000_000_000)?),
            "m" | "min" => KeepBound::Time(scaled(60_000_000_000)?),
            "h" => KeepBound::Time(scaled(3_600_000_000_000)?),
            "B" => KeepBound::Bytes(n),
            "KiB" => KeepBound::Bytes(scaled(1 << 10)?),
            "MiB" => KeepBound::Bytes(scaled(1 << 20)?),
            "GiB" => KeepBound::Bytes(scaled(1 << 30)?),
            "TiB" => KeepBound::Bytes(scaled(1 << 40)?),
            "KB" => KeepBound::Bytes(scaled(1_000)?),
            "MB" => KeepBound::Bytes(scaled(1_000_000)?),
            "GB" => KeepBound::Bytes(scaled(1_000_000_000)?),
            "TB" => KeepBound::Bytes(scaled(1_000_000_000_000)?),
            _ => return Err(usage()),
        };
        match b {
            KeepBound::Time(t) if t < MIN_TIME_NS => Err(format!("{s:?}: keep at least 1s")),
            KeepBound::Bytes(x) if x < MIN_BYTES => Err(format!("{s:?}: keep at least 1MiB")),
            KeepBound::Events(e) if e < MIN_EVENTS => {
                Err(format!("{s:?}: keep at least 1000 rows"))
            }
            b => Ok(b),
        }
    }

    /// The `--keep` spelling (the largest unit that divides it).
    pub fn to_text(self) -> String {
        match self {
            KeepBound::Events(n) => format!("last:{n}"),
            KeepBound::Time(ns) => {
                let s = ns / 1_000_000_000;
                if s.is_multiple_of(3600) {
                    format!("last:{}h", s / 3600)
                } else if s.is_multiple_of(60) {
                    format!("last:{}m", s / 60)
                } else {
                    format!("last:{s}s")
                }
            }
            KeepBound::Bytes(b) => {
                let units = [
                    (1u64 << 40, "TiB"),
                    (1 << 30, "GiB"),
                    (1 << 20, "MiB"),
                    (1 << 10, "KiB"),
                ];
                units
                    .iter()
                    .find(|(k, _)| b.is_multiple_of(*k))
                    .map_or(format!("last:{b}B"), |(k, u)| format!("last:{}{u}", b / k))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keep_takes_a_duration_a_size_or_a_row_count_and_prints_back() {
        assert_eq!(
            KeepBound::parse("last:5m"),
            Ok(KeepBound::Time(300_000_000_000))
        );
        assert_eq!(KeepBound::parse("last:2GiB"), Ok(KeepBound::Bytes(2 << 30)));
        assert_eq!(
            KeepBound::parse("last:1000000"),
            Ok(KeepBound::Events(1_000_000))
        );
        assert_eq!(
            KeepBound::parse("last:500MB"),
            Ok(KeepBound::Bytes(500_000_000))
        );
        for s in [
            "last:5m",
            "last:2GiB",
            "last:1000000",
            "last:90s",
            "last:2h",
            "last:1536MiB",
        ] {
            assert_eq!(KeepBound::parse(s).unwrap().to_text(), s);
        }
        assert!(KeepBound::parse("last:99999999999999999999h")
            .unwrap_err()
            .contains("too large"));
        assert!(KeepBound::parse("last:99999999TiB")
            .unwrap_err()
            .contains("too large"));
        for bad in [
            "5m",
            "last:",
            "last:5x",
            "last:-1",
            "last:1.5GiB",
            "last:10",
            "last:100KiB",
            "last:0s",
            "last:5m ",
            " last:5m",
        ] {
            let e = KeepBound::parse(bad).unwrap_err();
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
    }
}
