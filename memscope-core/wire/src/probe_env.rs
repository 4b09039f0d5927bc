//! The environment protocol between the `memscope` CLI and the preloaded probe.
//!
//! The CLI sets these variables on the job; the probe reads them by walking `environ` without
//! allocating (no `std::env` inside the traced process). Children inherit them, so fork/exec'd
//! processes are traced with the same settings.

/// Directory where the probe creates `<pid>-<start_ns>.stream` files (must exist).
pub const ENV_SPOOL: &str = "MEMSCOPE_SPOOL";
/// The probe stays passive when the [`ENV_SPOOL`] value is this long or longer (bytes): its
/// static buffer, sized so a stream file's path (`<spool>/<pid>-<ns>.stream`) stays within
/// PATH_MAX. `memscope run` refuses an output path whose spool would be this long.
pub const SPOOL_MAX: usize = 4000;
/// Selected built-in adapters: decimal bit mask of their [`crate::SourceId::bit`].
pub const ENV_ADAPTERS: &str = "MEMSCOPE_ADAPTERS";
/// `immediate` (record from the start) or `deferred` (wait for `memscope_start()`).
pub const ENV_COLLECT_MODE: &str = "MEMSCOPE_COLLECT_MODE";
/// Depth of C call stacks captured per event (0 or unset: none).
pub const ENV_C_STACK: &str = "MEMSCOPE_C_STACK";
/// `1`: the HOST adapter also records `mmap`/`munmap`.
pub const ENV_HOST_MMAP: &str = "MEMSCOPE_HOST_MMAP";
/// `:`-separated paths of third-party adapter libraries (plugin ABI in `schemas/`).
pub const ENV_PLUGINS: &str = "MEMSCOPE_PLUGINS";
/// `0`: kernel launches are not collected (`--level` lacks `kernel` or `--events` lacks
/// `launch`), so the `acl` adapter neither records them nor registers its profiling callbacks;
/// anything else or unset: it does. Read by the adapter itself (`adapters/acl`), not by
/// [`ProbeSettings`].
pub const ENV_KERNEL_LAUNCH: &str = "MEMSCOPE_KERNEL_LAUNCH";

/// Interval of the probe's memory sampler thread in ns (`--sample`, issue 25; unset or 0: no
/// sampler).
pub const ENV_SAMPLE_NS: &str = "MEMSCOPE_SAMPLE_NS";

/// Settings decoded from the environment. Texts borrow from `environ`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProbeSettings<'a> {
    /// Spool directory; `None` means "not launched by memscope": the probe stays passive.
    pub spool: Option<&'a [u8]>,
    /// Adapter selection mask.
    pub adapters: u32,
    /// Wait for `memscope_start()` before recording.
    pub deferred: bool,
    /// C stack depth (frames), capped at 1000.
    pub c_stack_depth: u32,
    /// Record `mmap`/`munmap` in the HOST adapter.
    pub host_mmap: bool,
    /// Plugin paths, `:`-separated.
    pub plugins: Option<&'a [u8]>,
    /// Memory sampler interval, ns (0: off).
    pub sample_ns: u64,
}

impl<'a> ProbeSettings<'a> {
    /// Feeds one `NAME=value` entry of `environ`; unknown names are ignored.
    pub fn apply(&mut self, entry: &'a [u8]) {
        let Some(eq) = entry.iter().position(|&b| b == b'=') else {
            return;
        };
        let (name, value) = (&entry[..eq], &entry[eq + 1..]);
        if name == ENV_SPOOL.as_bytes() {
            self.spool = (!value.is_empty()).then_some(value);
        } else if name == ENV_ADAPTERS.as_bytes() {
            self.adapters = parse_u32(value).unwrap_or(0);
        } else if name == ENV_COLLECT_MODE.as_bytes() {
            self.deferred = value == b"deferred";
        } else if name == ENV_C_STACK.as_bytes() {
            self.c_stack_depth = parse_u32(value).unwrap_or(0).min(1000);
        } else if name == ENV_HOST_MMAP.as_bytes() {
            self.host_mmap = value == b"1";
        } else if name == ENV_PLUGINS.as_bytes() {
            self.plugins = (!value.is_empty()).then_some(value);
        } else if name == ENV_SAMPLE_NS.as_bytes() {
            self.sample_ns = parse_u64(value).unwrap_or(0);
        }
    }
}

/// Parses a decimal `u32` without allocating.
pub fn parse_u32(s: &[u8]) -> Option<u32> {
    if s.is_empty() || s.len() > 10 {
        return None;
    }
    let mut v: u64 = 0;
    for &b in s {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v * 10 + (b - b'0') as u64;
    }
    u32::try_from(v).ok()
}

/// Parses a decimal `u64` without allocating.
pub fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    for &b in s {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((b - b'0') as u64)?;
    }
    Some(v)
}

/// Parses an `ASCEND_RT_VISIBLE_DEVICES` value (`"3"`, `"4,5,6"`): the physical id of each
/// logical device index; entries that are not numbers are skipped.
pub fn parse_visible_devices(v: &str) -> Vec<u32> {
    v.split(',').filter_map(|x| x.trim().parse().ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_settings_read_known_variables_and_ignore_others() {
        let mut s = ProbeSettings::default();
        for e in [
            &b"MEMSCOPE_SPOOL=/tmp/x"[..],
            b"MEMSCOPE_ADAPTERS=65",
            b"MEMSCOPE_COLLECT_MODE=deferred",
            b"MEMSCOPE_C_STACK=5000",
            b"MEMSCOPE_SAMPLE_NS=100000000",
            b"PATH=/bin",
            b"NOEQUALS",
        ] {
            s.apply(e);
        }
        assert_eq!(s.spool, Some(&b"/tmp/x"[..]));
        assert_eq!(s.adapters, 65);
        assert!(s.deferred);
        assert_eq!(s.c_stack_depth, 1000);
        assert_eq!(s.sample_ns, 100_000_000);
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_u32(b"4294967296"), None);
    }
}
