//! Attr keys of `SNAPSHOT` rows. memscope writes the seed's names (seed table 2, "当Event为
//! SNAPSHOT时"); msMemScope's code writes others (behaviour spec §5.2), which readers accept
//! and turn into the seed's, so analyses and exports see one spelling.

/// The seed's keys, in the seed's order: device total and free bytes, the framework's reserved
/// and allocated bytes and their peaks, device and framework utilisation (percent, 6 decimals).
pub const SEED_KEYS: [&str; 8] = [
    "total_mem",
    "free_mem",
    "reserved",
    "peak_reserved",
    "allocated",
    "peak_allocated",
    "device_utilization",
    "pt_utilization",
];

/// The seed's name of a SNAPSHOT key: msMemScope's `total`, `free`, `max_reserved`,
/// `max_allocated`, `device_rate` and `reserved_rate` map to `total_mem`, `free_mem`,
/// `peak_reserved`, `peak_allocated`, `device_utilization` and `pt_utilization`; any other key
/// is returned as is.
pub fn seed_key(key: &str) -> &str {
    match key {
        "total" => "total_mem",
        "free" => "free_mem",
        "max_reserved" => "peak_reserved",
        "max_allocated" => "peak_allocated",
        "device_rate" => "device_utilization",
        "reserved_rate" => "pt_utilization",
        k => k,
    }
}

/// `pairs` with every key spelled as the seed spells it (order kept).
pub fn seed_pairs(pairs: Vec<(String, String)>) -> Vec<(String, String)> {
    pairs
        .into_iter()
        .map(|(k, v)| {
            let s = seed_key(&k);
            if s == k {
                (k, v)
            } else {
                (s.to_owned(), v)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msmemscope_snapshot_keys_read_as_the_seeds() {
        let code = [
            "reserved",
            "max_reserved",
            "allocated",
            "max_allocated",
            "total",
            "free",
            "device_rate",
            "reserved_rate",
        ];
        let mut got: Vec<&str> = code.iter().map(|k| seed_key(k)).collect();
        got.sort_unstable();
        let mut want = SEED_KEYS.to_vec();
        want.sort_unstable();
        assert_eq!(got, want);
        for k in SEED_KEYS {
            assert_eq!(seed_key(k), k);
        }
        assert_eq!(seed_key("other"), "other");
    }
}
