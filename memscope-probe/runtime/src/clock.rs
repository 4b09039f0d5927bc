//! The probe's clock: `CLOCK_MONOTONIC` (vDSO, no syscall) shifted by the epoch offset measured
//! at init, so stamps are ns since the Unix epoch yet never go backwards on a thread.

use core::sync::atomic::{AtomicI64, Ordering};

static OFFSET: AtomicI64 = AtomicI64::new(0);

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

/// Measures `CLOCK_REALTIME − CLOCK_MONOTONIC` (ns) and stores it; returns it for the file
/// header (`FH_CLOCK_OFFSET`). The realtime read is bracketed by two monotonic reads and the
/// tightest of three tries is kept.
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
    best.1
}

/// Now, ns since the Unix epoch (monotonic: `CLOCK_MONOTONIC` + the offset taken at init).
/// Before init it returns the raw monotonic clock.
#[inline]
pub fn now_ns() -> u64 {
    read(libc::CLOCK_MONOTONIC).wrapping_add(OFFSET.load(Ordering::Relaxed)) as u64
}

/// The offset stored by [`init`] (`FH_CLOCK_OFFSET`).
pub(crate) fn offset() -> i64 {
    OFFSET.load(Ordering::Relaxed)
}
