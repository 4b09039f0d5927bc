//! The option sets of a run (`--events`, `--level`, `--call-stack`, `--analysis`,
//! `--device`): each parsed from msMemScope's list syntax, every error one line naming the
//! option and the bad value.

use super::{bad, split_list, ConfigError};
use serde::{Deserialize, Serialize};

/// Which events are collected and written (`--events`, msMemScope bits alloc 0, free 1,
/// launch 2, access 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventSet {
    /// MALLOC rows.
    pub alloc: bool,
    /// FREE rows.
    pub free: bool,
    /// OP_LAUNCH / KERNEL_LAUNCH rows.
    pub launch: bool,
    /// ACCESS rows.
    pub access: bool,
    /// Python trace (API mode only).
    pub traceback: bool,
}

impl Default for EventSet {
    fn default() -> Self {
        EventSet {
            alloc: true,
            free: true,
            launch: true,
            access: false,
            traceback: false,
        }
    }
}

impl EventSet {
    /// Parses `alloc,free,launch,access,traceback,none`.
    ///
    /// # Errors
    /// An unknown token, an empty list, or `none` with other types.
    pub fn parse(s: &str) -> Result<EventSet, ConfigError> {
        let mut e = EventSet {
            alloc: false,
            free: false,
            launch: false,
            access: false,
            traceback: false,
        };
        let mut none = false;
        let mut any = false;
        for t in split_list(s) {
            if none || (t == "none" && any) {
                return Err(bad(
                    "--events",
                    format!("{s:?}: none cannot be combined with other event types"),
                ));
            }
            any = true;
            match t {
                "alloc" => e.alloc = true,
                "free" => e.free = true,
                "launch" => e.launch = true,
                "access" => e.access = true,
                "traceback" => e.traceback = true,
                "none" => none = true,
                other => return Err(bad("--events", format!("unknown event type {other:?} (expected alloc, free, launch, access, traceback or none)"))),
            }
        }
        if !any {
            return Err(bad(
                "--events",
                "no event type named (use none to collect nothing)",
            ));
        }
        Ok(e)
    }
}

/// Launch levels (`--level`): op (bit 0), kernel (bit 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LevelSet {
    /// Operator launches.
    pub op: bool,
    /// Kernel launches.
    pub kernel: bool,
}

impl Default for LevelSet {
    fn default() -> Self {
        LevelSet {
            op: true,
            kernel: false,
        }
    }
}

impl LevelSet {
    /// Parses `op,kernel` (`0`/`1` are msMemScope's deprecated aliases).
    ///
    /// # Errors
    /// An unknown token or an empty list.
    pub fn parse(s: &str) -> Result<LevelSet, ConfigError> {
        let mut l = LevelSet {
            op: false,
            kernel: false,
        };
        if split_list(s).next().is_none() {
            return Err(bad("--level", "no level named (expected op and/or kernel)"));
        }
        for t in split_list(s) {
            match t {
                "op" | "0" => l.op = true,
                "kernel" | "1" => l.kernel = true,
                other => {
                    return Err(bad(
                        "--level",
                        format!("unknown level {other:?} (expected op or kernel)"),
                    ))
                }
            }
        }
        Ok(l)
    }
}

/// Call-stack depths (`--call-stack c[:N],python[:N]`); `None` = off.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallStack {
    /// C frames per event.
    pub c: Option<u32>,
    /// Python frames per event.
    pub python: Option<u32>,
}

/// Default depth when `c`/`python` has no `:N`.
pub const DEFAULT_STACK_DEPTH: u32 = 50;

fn parse_depth(opt: &str, s: &str, max: u32) -> Result<u32, ConfigError> {
    let ok = !s.is_empty()
        && s.bytes().all(|b| b.is_ascii_digit())
        && !(s.len() > 1 && s.starts_with('0'));
    match s.parse::<u32>() {
        Ok(n) if ok && n <= max => Ok(n),
        _ => Err(bad(
            opt,
            format!("bad number {s:?} (an integer from 0 to {max}, no leading zeros)"),
        )),
    }
}

impl CallStack {
    /// Parses `c[:N],python[:N]`; N from 0 to 1000, default 50; an empty list is no stacks.
    ///
    /// # Errors
    /// An unknown kind, a bad N, or a kind given twice (`c:0,c:5`).
    pub fn parse(s: &str) -> Result<CallStack, ConfigError> {
        let mut c = CallStack::default();
        for t in split_list(s) {
            let (kind, n) = match t.split_once(':') {
                Some((k, n)) => (k, parse_depth("--call-stack", n, 1000)?),
                None => (t, DEFAULT_STACK_DEPTH),
            };
            let slot = match kind {
                "c" => &mut c.c,
                "python" => &mut c.python,
                _ => &mut None,
            };
            if slot.is_some() {
                return Err(bad(
                    "--call-stack",
                    format!("{s:?}: {kind} given more than once"),
                ));
            }
            match kind {
                "c" => c.c = Some(n),
                "python" => c.python = Some(n),
                other => {
                    return Err(bad(
                        "--call-stack",
                        format!("unknown stack kind {other:?} (expected c[:N] or python[:N])"),
                    ))
                }
            }
        }
        Ok(c)
    }
}

/// Online analyses (`--analysis leaks,decompose,inefficient,gap,races,oom[:K],none`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnalysisSet {
    /// Leak detection (default on).
    pub leaks: bool,
    /// Owner decomposition.
    pub decompose: bool,
    /// Inefficient memory.
    pub inefficient: bool,
    /// OOM top-K blocks, `Some(K)`.
    pub oom: Option<u32>,
    /// Pool fluctuation per step (msMemScope's health analyzer; memscope runs it with leaks by
    /// default and accepts `gap` as an `--analysis` token).
    #[serde(default)]
    pub gap: bool,
    /// Cross-stream races (issue 36): collects launches, accesses and memory like
    /// `inefficient` and checks them with happens-before per stream.
    #[serde(default)]
    pub races: bool,
}

impl Default for AnalysisSet {
    fn default() -> Self {
        AnalysisSet {
            leaks: true,
            decompose: false,
            inefficient: false,
            oom: None,
            gap: true,
            races: false,
        }
    }
}

impl AnalysisSet {
    /// Parses the list; `oom` without K means 10; K from 1 to 1000.
    ///
    /// # Errors
    /// An unknown token, a bad K, an empty list, or `none` with analyses.
    pub fn parse(s: &str) -> Result<AnalysisSet, ConfigError> {
        let mut a = AnalysisSet {
            leaks: false,
            decompose: false,
            inefficient: false,
            oom: None,
            gap: false,
            races: false,
        };
        let mut none = false;
        let mut any = false;
        for t in split_list(s) {
            if none || (t == "none" && any) {
                return Err(bad(
                    "--analysis",
                    format!("{s:?}: none cannot be combined with analyses"),
                ));
            }
            any = true;
            match t {
                "leaks" => a.leaks = true,
                "decompose" => a.decompose = true,
                "inefficient" => a.inefficient = true,
                "gap" => a.gap = true,
                "races" => a.races = true,
                "oom" => a.oom = Some(10),
                "none" => none = true,
                _ if t.starts_with("oom:") => {
                    // one range in every message: K from 1 (a depth's 0 is no K)
                    let k = parse_depth("--analysis", &t[4..], 1000)
                        .ok()
                        .filter(|&k| k > 0)
                        .ok_or_else(|| {
                            bad(
                                "--analysis",
                                format!("{t:?}: oom:K needs K from 1 to 1000"),
                            )
                        })?;
                    a.oom = Some(k);
                }
                other => return Err(bad("--analysis", format!("unknown analysis {other:?} (expected leaks, decompose, inefficient, gap, races, oom[:K] or none)"))),
            }
        }
        if !any {
            return Err(bad(
                "--analysis",
                "no analysis named (use none for no analysis)",
            ));
        }
        Ok(a)
    }
}

/// Device selection (`--device npu,npu:<n>,cpu`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceSet {
    /// Every NPU.
    pub all_npu: bool,
    /// Selected NPU ids (ignored when `all_npu`).
    pub npus: Vec<u32>,
    /// Host events.
    pub cpu: bool,
}

impl Default for DeviceSet {
    fn default() -> Self {
        DeviceSet {
            all_npu: true,
            npus: Vec::new(),
            cpu: false,
        }
    }
}

impl DeviceSet {
    /// Parses the list; ids accept `0x` (msMemScope's `stoul` base 0) and must be < 32.
    ///
    /// # Errors
    /// A bad token, or nothing selected.
    pub fn parse(s: &str) -> Result<DeviceSet, ConfigError> {
        let mut d = DeviceSet {
            all_npu: false,
            npus: Vec::new(),
            cpu: false,
        };
        for t in split_list(s) {
            match t {
                "npu" => d.all_npu = true,
                "cpu" => d.cpu = true,
                _ if t.starts_with("npu:") => {
                    let n = &t[4..];
                    let v = match n.strip_prefix("0x").or_else(|| n.strip_prefix("0X")) {
                        Some(h) => u32::from_str_radix(h, 16).ok(),
                        None if n.len() > 1 && n.starts_with('0') => {
                            u32::from_str_radix(&n[1..], 8).ok()
                        }
                        None => n.parse().ok(),
                    };
                    match v {
                        Some(v) if v < 32 => d.npus.push(v),
                        _ => {
                            return Err(bad(
                                "--device",
                                format!("bad device {t:?} (npu:<n> with n < 32)"),
                            ))
                        }
                    }
                }
                other => {
                    return Err(bad(
                        "--device",
                        format!("unknown device {other:?} (expected npu, npu:<n> or cpu)"),
                    ))
                }
            }
        }
        if !d.all_npu && d.npus.is_empty() && !d.cpu {
            return Err(bad("--device", "no device selected"));
        }
        Ok(d)
    }
}
