//! `memscope diff` (issue 24): live memory of two snapshots ([`super::live_points`]) side by
//! side, per device, allocator and group, sorted by growth.
//!
//! Allocators nest (framework pool blocks live inside driver memory, Python objects inside
//! pymalloc arenas), so they are never added together: every row names its device and
//! allocator. Rows are ordered by allocator level — the blocks the program holds (framework
//! pools, HOST, Python objects, plugins' types) before the memory reserved to hold them (HAL,
//! mapped memory, arenas) — then device, then growth in bytes, largest first.

use std::collections::BTreeMap;

use memscope_core::event::{Device, EventType};

use super::live_points::{GroupKey, Snapshot};
use super::peak::Group;

/// One group on both sides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiffRow {
    /// Device.
    pub device: Device,
    /// Allocator (Event Type).
    pub pool: EventType,
    /// The group (site, owner, op, role).
    pub key: String,
    /// Side A.
    pub a: Group,
    /// Side B.
    pub b: Group,
}

impl DiffRow {
    /// Bytes B − A.
    pub fn delta_bytes(&self) -> i64 {
        self.b.bytes as i64 - self.a.bytes as i64
    }

    /// Blocks B − A.
    pub fn delta_blocks(&self) -> i64 {
        self.b.blocks as i64 - self.a.blocks as i64
    }
}

/// Rank of an allocator in the output: what the program holds first, what backs it last.
pub fn level(pool: EventType) -> u8 {
    match pool {
        EventType::Pta | EventType::PtaWorkspace | EventType::MindSpore | EventType::Atb => 0,
        EventType::Host => 1,
        EventType::Hal => 3,
        EventType::HostMmap => 4,
        EventType::Custom(_) if pool.as_str().ends_with("_ARENA") => 4,
        _ => 2,
    }
}

/// The rows of groups that differ (or, with `all`, every group), in output order.
pub fn diff(a: &Snapshot, b: &Snapshot, all: bool) -> Vec<DiffRow> {
    let mut m: BTreeMap<&GroupKey, (Group, Group)> = BTreeMap::new();
    for (k, g) in &a.groups {
        m.entry(k).or_default().0 = *g;
    }
    for (k, g) in &b.groups {
        m.entry(k).or_default().1 = *g;
    }
    let mut rows: Vec<DiffRow> = m
        .into_iter()
        .filter(|(_, (a, b))| all || a != b)
        .map(|(k, (a, b))| DiffRow {
            device: k.0,
            pool: k.1,
            key: k.2.clone(),
            a,
            b,
        })
        .collect();
    rows.sort_by(|x, y| {
        (level(x.pool), x.pool.as_str(), x.device)
            .cmp(&(level(y.pool), y.pool.as_str(), y.device))
            .then(y.delta_bytes().cmp(&x.delta_bytes()))
            .then(y.delta_blocks().cmp(&x.delta_blocks()))
            .then(x.key.cmp(&y.key))
    });
    rows
}

/// Totals per device and allocator of both snapshots, in output order.
pub fn totals(a: &Snapshot, b: &Snapshot) -> Vec<DiffRow> {
    let mut m: BTreeMap<(Device, EventType), (Group, Group)> = BTreeMap::new();
    for (side, s) in [(0, a), (1, b)] {
        for (k, g) in &s.groups {
            let e = m.entry((k.0, k.1)).or_default();
            let t = if side == 0 { &mut e.0 } else { &mut e.1 };
            t.bytes += g.bytes;
            t.blocks += g.blocks;
        }
    }
    let mut v: Vec<DiffRow> = m
        .into_iter()
        .map(|((device, pool), (a, b))| DiffRow {
            device,
            pool,
            key: String::new(),
            a,
            b,
        })
        .collect();
    v.sort_by_key(|r| (level(r.pool), r.pool.as_str().to_owned(), r.device));
    v
}

/// `+4.0 MiB`, `-512 B`: a signed byte count for people.
pub fn signed_size(delta: i64) -> String {
    let sign = if delta < 0 { "-" } else { "+" };
    format!("{sign}{}", size(delta.unsigned_abs()))
}

/// `4.0 MiB`, `512 B`: a byte count for people (binary units, one decimal).
pub fn size(b: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if b < 1024 {
        return format!("{b} B");
    }
    let mut v = b as f64 / 1024.0;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.1} {}", UNITS[u])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(groups: &[(EventType, &str, u64, u64)]) -> Snapshot {
        Snapshot {
            reached: true,
            groups: groups
                .iter()
                .map(|(t, k, b, n)| {
                    (
                        (Device::Npu(0), *t, (*k).to_owned()),
                        Group {
                            bytes: *b,
                            blocks: *n,
                        },
                    )
                })
                .collect(),
            ..Snapshot::default()
        }
    }

    #[test]
    fn rows_are_sorted_by_growth_within_allocators_pools_before_driver_memory() {
        let a = snap(&[
            (EventType::Pta, "x.py(1): f", 100, 1),
            (EventType::Pta, "same", 5, 1),
        ]);
        let b = snap(&[
            (EventType::Pta, "x.py(1): f", 50, 1),
            (EventType::Pta, "x.py(2): g", 4 << 20, 7),
            (EventType::Pta, "same", 5, 1),
            (EventType::Hal, "x.py(3): reserve", 1 << 30, 1),
        ]);
        let rows = diff(&a, &b, false);
        let keys: Vec<&str> = rows.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, ["x.py(2): g", "x.py(1): f", "x.py(3): reserve"]);
        assert_eq!(
            (rows[0].delta_bytes(), rows[0].delta_blocks()),
            (4 << 20, 7)
        );
        assert_eq!(rows[1].delta_bytes(), -50);
        assert_eq!(diff(&a, &b, true).len(), 4);
        let t = totals(&a, &b);
        assert_eq!(t[0].pool, EventType::Pta);
        assert_eq!((t[0].a.bytes, t[0].b.bytes), (105, 55 + (4 << 20)));
        assert_eq!(signed_size(4 << 20), "+4.0 MiB");
        assert_eq!(signed_size(-512), "-512 B");
        assert_eq!(size(3 << 30), "3.0 GiB");
    }
}
