//! The probe's clock: ns since the Unix epoch, never going backwards on a thread, and ordered
//! across the threads of a process (an event that happens after another — a `malloc` that
//! returns the block another thread just freed — gets a later stamp).
//!
//! Two sources:
//! * `CLOCK_MONOTONIC` (vDSO) plus the epoch offset measured at init. Always available; each
//!   read costs an ordered TSC read and some arithmetic (~30 ns on our 2-core VMs, where it was
//!   about two thirds of the probe's cost per `malloc`).
//! * The TSC itself, on x86_64 when the kernel uses it as its clocksource (it then knows the
//!   TSC is invariant and synchronised across CPUs). Stamps are `base_ns + (tsc - base_tsc) *
//!   mult >> 32`, with the parameters calibrated against `CLOCK_MONOTONIC` by the probe itself:
//!   the first time a stamp or a chunk is taken at least [`CALIBRATE_NS`] after init (until
//!   then stamps come from `CLOCK_MONOTONIC`, and the switch is biased forward by the calibration's
//!   uncertainty, so no later stamp undercuts an earlier one), then re-slewed every
//!   [`SLEW_NS`] so the TSC clock follows `CLOCK_MONOTONIC` (NTP adjusts its rate) without a
//!   jump: each update starts where the previous parameters were, only the rate changes. The
//!   parameters sit behind a seqlock; a reader that finds it busy (a signal handler interrupting
//!   an update on its own thread) falls back to `CLOCK_MONOTONIC`.
//!
//! [`now_ns`] is an *after* stamp: it reads the TSC with `RDTSCP`, which waits until every
//! earlier instruction has executed and earlier loads are visible, so the stamp follows
//! everything the hooked call observed. [`now_ns_before`] is a *before* stamp for a call that
//! must come after it (a `free` is stamped before the block is released): a plain `RDTSC`
//! (cheaper: it does not wait), whose value is taken before any later store becomes visible.

use core::sync::atomic::{fence, AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicU8, Ordering};

static OFFSET: AtomicI64 = AtomicI64::new(0);

/// Time after init before the TSC is calibrated (the longer, the more precise the rate).
pub(crate) const CALIBRATE_NS: u64 = 20_000_000;
/// Interval of the rate corrections.
pub(crate) const SLEW_NS: u64 = 1_000_000_000;

const MODE_SYSCALL: u8 = 0;
const MODE_TSC: u8 = 1;
/// Which source stamps come from.
static MODE: AtomicU8 = AtomicU8::new(MODE_SYSCALL);
/// The TSC may be used (x86_64, kernel clocksource `tsc`); decided at init.
static TSC_OK: AtomicBool = AtomicBool::new(false);
/// First calibration point (TSC, ns), taken at init.
static CAL_TSC: AtomicU64 = AtomicU64::new(0);
static CAL_NS: AtomicU64 = AtomicU64::new(0);
/// The next calibration or slew is due at this time (ns, epoch).
static NEXT_AT: AtomicU64 = AtomicU64::new(u64::MAX);
/// One thread updates the parameters at a time.
static UPDATING: AtomicBool = AtomicBool::new(false);
/// Seqlock over the parameters (odd: being written).
static SEQ: AtomicU32 = AtomicU32::new(0);
static BASE_TSC: AtomicU64 = AtomicU64::new(0);
static BASE_NS: AtomicU64 = AtomicU64::new(0);
static MULT: AtomicU64 = AtomicU64::new(0);

#[allow(clippy::unnecessary_cast)] // `time_t`/`c_long` are not i64 on every target
#[inline]
fn read(clock: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    // Seconds of a monotonic or epoch clock stay far below i64::MAX / 1e9 (year 2262).
    (ts.tv_sec as i64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as i64)
}

/// `CLOCK_MONOTONIC` shifted to the epoch.
#[inline]
fn syscall_ns() -> u64 {
    read(libc::CLOCK_MONOTONIC).wrapping_add(OFFSET.load(Ordering::Relaxed)) as u64
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn tsc_ordered() -> u64 {
    let mut aux = 0u32;
    // SAFETY: RDTSCP only reads the time-stamp counter (and IA32_TSC_AUX into `aux`); TSC_OK
    // is set only on x86_64 CPUs where the kernel itself uses the TSC.
    unsafe { core::arch::x86_64::__rdtscp(&mut aux) }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn tsc_plain() -> u64 {
    // SAFETY: RDTSC only reads the time-stamp counter.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
fn tsc_ordered() -> u64 {
    0
}

#[cfg(not(target_arch = "x86_64"))]
fn tsc_plain() -> u64 {
    0
}

/// Measures `CLOCK_REALTIME − CLOCK_MONOTONIC` (ns) and stores it; returns it for the file
/// header (`FH_CLOCK_OFFSET`). The realtime read is bracketed by two monotonic reads and the
/// tightest of three tries is kept. Also decides whether the TSC may be used and takes the
/// first calibration point.
pub(crate) fn init() -> i64 {
    let mut best = (i64::MAX, 0i64);
    for _ in 0..3 {
        let m1 = read(libc::CLOCK_MONOTONIC);
        let r = read(libc::CLOCK_REALTIME);
        let m2 = read(libc::CLOCK_MONOTONIC);
        let width = m2 - m1;
        if width < best.0 {
            best = (width, r - (m1 + width / 2));
        }
    }
    OFFSET.store(best.1, Ordering::Relaxed);
    MODE.store(MODE_SYSCALL, Ordering::Relaxed);
    let ok = cfg!(target_arch = "x86_64") && kernel_uses_tsc();
    TSC_OK.store(ok, Ordering::Relaxed);
    if ok {
        let (t, ns, _) = pair();
        CAL_TSC.store(t, Ordering::Relaxed);
        CAL_NS.store(ns, Ordering::Relaxed);
        NEXT_AT.store(ns.saturating_add(CALIBRATE_NS), Ordering::Release);
    } else {
        NEXT_AT.store(u64::MAX, Ordering::Release);
    }
    best.1
}

/// Whether the kernel's clocksource is the TSC (`/sys/devices/system/clocksource/
/// clocksource0/current_clocksource` reads `tsc`).
fn kernel_uses_tsc() -> bool {
    let path = c"/sys/devices/system/clocksource/clocksource0/current_clocksource";
    // SAFETY: NUL-terminated path; the descriptor is closed below.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return false;
    }
    let mut b = [0u8; 16];
    // SAFETY: `b` is writable for its length; `fd` is ours.
    let n = unsafe { libc::read(fd, b.as_mut_ptr().cast(), b.len()) };
    // SAFETY: `fd` is ours.
    unsafe { libc::close(fd) };
    n >= 3 && &b[..(n as usize).min(4)] == b"tsc\n"
}

/// A (TSC, epoch ns) pair read back to back: the tightest of three brackets, TSC at its
/// middle. Also returns the bracket's width in ns-equivalent TSC ticks (upper bound).
fn pair() -> (u64, u64, u64) {
    let mut best = (u64::MAX, 0u64, 0u64);
    for _ in 0..3 {
        let a = tsc_ordered();
        let ns = syscall_ns();
        let b = tsc_ordered();
        let w = b.wrapping_sub(a);
        if w < best.0 {
            best = (w, a + w / 2, ns);
        }
    }
    (best.1, best.2, best.0)
}

/// Reads the TSC parameters under the seqlock; `None` when an update is in progress.
#[inline(always)]
fn params() -> Option<(u64, u64, u64)> {
    let s1 = SEQ.load(Ordering::Acquire);
    if s1 & 1 != 0 {
        return None;
    }
    let p = (
        BASE_TSC.load(Ordering::Relaxed),
        BASE_NS.load(Ordering::Relaxed),
        MULT.load(Ordering::Relaxed),
    );
    fence(Ordering::Acquire);
    (SEQ.load(Ordering::Relaxed) == s1).then_some(p)
}

#[inline(always)]
fn convert(t: u64, (base_tsc, base_ns, mult): (u64, u64, u64)) -> u64 {
    let d = t.saturating_sub(base_tsc);
    base_ns.wrapping_add(((d as u128 * mult as u128) >> 32) as u64)
}

/// Now, ns since the Unix epoch; an *after* stamp (see the module documentation). Before
/// init it returns the raw monotonic clock.
#[inline]
pub fn now_ns() -> u64 {
    if MODE.load(Ordering::Acquire) == MODE_TSC {
        if let Some(p) = params() {
            return convert(tsc_ordered(), p);
        }
    }
    syscall_stamp()
}

/// A stamp from `CLOCK_MONOTONIC`; the first one taken once the calibration is due also
/// calibrates (threads that took their chunks before it was due — 64 threads started at
/// once — would otherwise stamp from the slower clock until one of them takes another chunk).
#[inline(always)]
fn syscall_stamp() -> u64 {
    let ns = syscall_ns();
    if ns >= NEXT_AT.load(Ordering::Relaxed) && MODE.load(Ordering::Relaxed) != MODE_TSC {
        calibrate_now();
    }
    ns
}

#[cold]
#[inline(never)]
fn calibrate_now() {
    if UPDATING.swap(true, Ordering::Acquire) {
        return;
    }
    // checked again under the flag: another thread may have calibrated meanwhile
    if MODE.load(Ordering::Acquire) != MODE_TSC {
        update();
    }
    UPDATING.store(false, Ordering::Release);
}

/// Now, as a *before* stamp: for a stamp taken before the call it must precede (a `free`
/// before the block is released). Cheaper than [`now_ns`] when the TSC is in use.
#[inline]
pub fn now_ns_before() -> u64 {
    if MODE.load(Ordering::Acquire) == MODE_TSC {
        if let Some(p) = params() {
            return convert(tsc_plain(), p);
        }
    }
    syscall_stamp()
}

/// Calibrates or re-slews the TSC clock when due; called where the probe has time to spare
/// (when a thread takes a new chunk; the first calibration is also made by the first stamp
/// taken once it is due, [`syscall_stamp`]). Cheap when not due (one load and a clock read).
pub(crate) fn tick() {
    let due = NEXT_AT.load(Ordering::Acquire);
    if due == u64::MAX || now_ns() < due {
        return;
    }
    if UPDATING.swap(true, Ordering::Acquire) {
        return;
    }
    update();
    UPDATING.store(false, Ordering::Release);
}

#[cold]
fn update() {
    let (t, ns, width_ticks) = pair();
    let (t0, ns0) = (
        CAL_TSC.load(Ordering::Relaxed),
        CAL_NS.load(Ordering::Relaxed),
    );
    if t <= t0 || ns <= ns0 {
        // The TSC did not advance with the clock: give it up.
        NEXT_AT.store(u64::MAX, Ordering::Release);
        MODE.store(MODE_SYSCALL, Ordering::Release);
        return;
    }
    // ns per tick × 2^32, over the whole time since init (the longest baseline).
    let rate = (((ns - ns0) as u128) << 32) / (t - t0) as u128;
    let Ok(rate) = u64::try_from(rate) else {
        NEXT_AT.store(u64::MAX, Ordering::Release);
        return;
    };
    let (base_ns, mult) = if MODE.load(Ordering::Acquire) == MODE_TSC {
        // Continue from where the current parameters are at `t` (no jump), and choose the
        // rate that meets CLOCK_MONOTONIC again one slew interval from now (at most 1 ms per
        // interval of correction).
        let cur = match params() {
            Some(p) => convert(t, p),
            None => return,
        };
        let err = (ns as i64)
            .wrapping_sub(cur as i64)
            .clamp(-1_000_000, 1_000_000);
        let ticks = ((SLEW_NS as u128) << 32) / rate.max(1) as u128;
        let target = (SLEW_NS as i64 + err).max(1) as u128;
        let mult = u64::try_from((target << 32) / ticks.max(1)).unwrap_or(rate);
        (cur, mult)
    } else {
        // First switch: start ahead of CLOCK_MONOTONIC by the pair's uncertainty, so no stamp
        // from the TSC undercuts one taken before the switch.
        let width_ns = ((width_ticks as u128 * rate as u128) >> 32) as u64;
        (ns + width_ns + 1, rate)
    };
    let s = SEQ.fetch_add(1, Ordering::Relaxed);
    fence(Ordering::Release);
    BASE_TSC.store(t, Ordering::Relaxed);
    BASE_NS.store(base_ns, Ordering::Relaxed);
    MULT.store(mult, Ordering::Relaxed);
    SEQ.store(s.wrapping_add(2), Ordering::Release);
    MODE.store(MODE_TSC, Ordering::Release);
    NEXT_AT.store(ns.saturating_add(SLEW_NS), Ordering::Release);
}

/// The offset stored by [`init`] (`FH_CLOCK_OFFSET`).
pub(crate) fn offset() -> i64 {
    OFFSET.load(Ordering::Relaxed)
}

/// Fork child, on its only thread: an update that was running on a vanished thread is
/// abandoned; if it had begun writing, the parameters are not trusted and the clock
/// recalibrates from `CLOCK_MONOTONIC`.
pub(crate) fn after_fork_child() {
    UPDATING.store(false, Ordering::Relaxed);
    let s = SEQ.load(Ordering::Relaxed);
    if s & 1 != 0 {
        MODE.store(MODE_SYSCALL, Ordering::Relaxed);
        SEQ.store(s.wrapping_add(1), Ordering::Relaxed);
        if TSC_OK.load(Ordering::Relaxed) {
            NEXT_AT.store(0, Ordering::Relaxed);
        }
    }
}

/// Whether stamps come from the TSC now, after making the calibration due and taking a
/// stamp (which calibrates) (tests).
#[cfg(test)]
pub(crate) fn force_calibration() -> bool {
    if TSC_OK.load(Ordering::Relaxed) {
        NEXT_AT.store(0, Ordering::Release);
        let _ = now_ns();
    }
    MODE.load(Ordering::Relaxed) == MODE_TSC
}

/// `CLOCK_MONOTONIC` on the epoch (tests).
#[cfg(test)]
pub(crate) fn reference_ns() -> u64 {
    syscall_ns()
}
