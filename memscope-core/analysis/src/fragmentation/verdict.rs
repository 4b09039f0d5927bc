//! The out-of-memory verdict (see the parent module): what it says and how it is worded.

use memscope_core::event::Device;

use super::super::mib;
use super::Figures;

/// What a verdict says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerdictKind {
    /// Enough free bytes in the pools, no extent large enough.
    Fragmentation,
    /// Other processes hold the memory the request needed.
    OtherProcesses,
    /// Not enough memory anywhere.
    TrueShortage,
    /// A free extent holds the request.
    Fits,
    /// The pools' free bytes would hold a request of the user's own, but where they lie is not
    /// known (no HAL rows: no extents), so whether one extent holds it is not either.
    FreeEnough,
    /// No request size known.
    Unknown,
}

impl VerdictKind {
    /// The words of the verdict.
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictKind::Fragmentation => "fragmentation",
            VerdictKind::OtherProcesses => "held by other processes",
            VerdictKind::TrueShortage => "true shortage",
            VerdictKind::Fits => "fits in a free extent",
            VerdictKind::FreeEnough => "enough free bytes (whether one extent holds it is unknown)",
            VerdictKind::Unknown => "unknown (no request size)",
        }
    }
}

/// Bytes held by one group of live blocks.
pub type Holder = (String, u64);

/// A verdict: at an OOM, or for a request asked at the end of a step.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    /// ID of the OOM row (or of the last row of the step).
    pub id: u64,
    /// Its time, ns since the epoch.
    pub ts_ns: u64,
    /// Device.
    pub device: Device,
    /// The step (`None`: outside steps).
    pub step: Option<u32>,
    /// Whether it answers a request asked by the user (not an OOM).
    pub asked: bool,
    /// The request, bytes.
    pub request: Option<u64>,
    /// The device's pools together.
    pub pools: Figures,
    /// Device memory as the runtime reported it: (total, free).
    pub device_mem: Option<(u64, u64)>,
    /// This process's HAL bytes on the device.
    pub process_held: u64,
    /// Device bytes used by other processes.
    pub others: Option<u64>,
    /// The verdict.
    pub kind: VerdictKind,
    /// Top holders by role, by owner chain, by allocating frame (Python, else C).
    pub holders: [Vec<Holder>; 3],
}

impl Verdict {
    /// The one-line verdict: `asked R, free F in N extents, largest L: fragmentation`.
    pub fn headline(&self) -> String {
        let b = |v: u64| format!("{v} B ({:.2} MiB)", mib(v));
        let asked = self
            .request
            .map_or("asked ? bytes".to_owned(), |r| format!("asked {}", b(r)));
        let ext = match (self.pools.extents, self.pools.largest) {
            (Some(n), Some(l)) => format!(" in {n} extents, largest {}", b(l)),
            _ => " (extents unknown: no HAL rows)".to_owned(),
        };
        format!(
            "{asked}, free {}{ext}: {}",
            b(self.pools.free),
            self.kind.as_str()
        )
    }

    /// The verdict and its context, as the console prints it.
    pub fn lines(&self) -> Vec<String> {
        let what = if self.asked { "request" } else { "OOM" };
        let step = self.step.map_or(String::new(), |s| format!(" in step {s}"));
        let mut l = vec![format!(
            "{what} at ID {} on device {}{step}: {}",
            self.id,
            self.device.to_text(),
            self.headline()
        )];
        let dev = match (self.device_mem, self.others) {
            (Some((t, f)), Some(o)) => format!(
                "  device: total {:.2} MiB, free {:.2} MiB; this process holds {:.2} MiB (HAL), other processes {:.2} MiB",
                mib(t),
                mib(f),
                mib(self.process_held),
                mib(o)
            ),
            _ => format!(
                "  device: figures unknown; this process holds {:.2} MiB (HAL)",
                mib(self.process_held)
            ),
        };
        l.push(dev);
        if self.request.is_none() {
            l.push("  the request size is on the OOM_TRIGGER row of --analysis oom, and in the capture (analyse the process directory)".to_owned());
        }
        l.push(format!(
            "  pools: reserved {:.2} MiB, allocated {:.2} MiB",
            mib(self.pools.reserved),
            mib(self.pools.allocated)
        ));
        for (title, hs) in ["by role", "by owner", "by frame"]
            .iter()
            .zip(&self.holders)
        {
            if hs.is_empty() {
                continue;
            }
            let parts: Vec<String> = hs
                .iter()
                .map(|(n, v)| format!("{n} {:.2} MiB", mib(*v)))
                .collect();
            l.push(format!("  top holders {title}: {}", parts.join("; ")));
        }
        l
    }
}

/// Judges a request of `r` bytes in `v`'s situation (its pools and device figures).
pub fn judge(mut v: Verdict, r: u64) -> Verdict {
    v.request = Some(r);
    let p = &v.pools;
    v.kind = if p.largest.is_some_and(|l| l >= r) {
        VerdictKind::Fits
    } else if p.free >= r && p.largest.is_none() && v.asked {
        // an OOM with enough free bytes is fragmentation by itself; a request of the user's
        // own without extents is not judged as one
        VerdictKind::FreeEnough
    } else if p.free >= r {
        VerdictKind::Fragmentation
    } else if let (Some((_, f)), Some(o)) = (v.device_mem, v.others) {
        if o > 0 && f.saturating_add(o) >= r {
            VerdictKind::OtherProcesses
        } else {
            VerdictKind::TrueShortage
        }
    } else {
        VerdictKind::TrueShortage
    };
    v
}
