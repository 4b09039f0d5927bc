//! The memory sampler (`--sample <interval>`, issue 25): one thread of the probe wakes every
//! interval, reads the process's resident memory from `/proc/self/statm` and records a
//! `ProcessSample` — memory no hook sees (a raw `mmap`, a driver's pages, the interpreter) shows
//! as the difference to what the hooks hold live, which the collector computes.
//!
//! Why a thread of the probe and not the collector reading `/proc/<pid>`: the samples land in
//! the process's own stream, so they are in time order with its events, survive a killed
//! collector and go into the kept capture (offline reports and exports have them), and the
//! thread is where device figures would be asked, which needs the job's process. It costs the
//! job's threads nothing: it takes no lock they take, never allocates (a stack buffer and raw
//! `open`/`read`), runs as runtime-internal code with every signal blocked (no handler of the
//! program runs on it, and a hook it reached would forward), and writes through its own chunk.
//!
//! Device memory ([`note_device_set`]): once the job itself set a device (the ACL adapter's
//! `aclrtSetDevice` hook publishes the device and its query function with two atomic stores —
//! nothing is called from the hook), each tick also asks the adapter's query, on this thread,
//! for every device the job set, and records a `DeviceSample`. A job that never sets a device
//! is sampled on the host only.
//!
//! Started once, from the probe's constructor (`plugin::start_at_load`, or the end of an init
//! the constructor ran inside), or from the Python package's entry points (`wake`,
//! `config(sample=...)`): never from inside a hook. A fork child has no sampler (threads
//! do not survive `fork`); an exec'd image starts its own.

use crate::guard::Internal;
use crate::{clock, settings, state};
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use memscope_wire::Record;

/// The sampler thread was started (or tried) in this process image.
static STARTED: AtomicBool = AtomicBool::new(false);

/// Devices the job set (bit `n`: logical device `n` < 64).
static DEVICES: AtomicU64 = AtomicU64::new(0);
/// The adapter's [`DeviceQuery`] (a function pointer; 0: none yet).
static QUERY: AtomicUsize = AtomicUsize::new(0);
/// The sampler thread is inside a device query (see [`devices_released`]).
static QUERYING: AtomicBool = AtomicBool::new(false);

/// Asks the device runtime for logical device `device`'s free and total bytes
/// (`Some((free, total))`). Runs on the sampler thread only, as runtime-internal code: it may
/// set the device on that thread.
pub type DeviceQuery = fn(u32) -> Option<(u64, u64)>;

/// The job set logical device `device` (its own call succeeded): from the next tick on, the
/// sampler (when `--sample` is on) records that device's memory through `query`. Two atomic
/// stores, safe in any hook; devices from 64 on are not sampled.
pub fn note_device_set(device: u32, query: DeviceQuery) {
    if device < 64 {
        QUERY.store(query as usize, Ordering::Release);
        DEVICES.fetch_or(1 << device, Ordering::Release);
    }
}

/// Stack of the sampler thread: it only reads a small file and encodes a record.
const STACK_BYTES: usize = 256 * 1024;

/// Starts the sampler thread when `MEMSCOPE_SAMPLE_NS` asks for one and the runtime records.
/// At most once per process image; a failure to start prints one line and leaves the job alone.
pub(crate) fn start() {
    let interval = settings::sample_ns();
    if interval == 0 || state::init_state() != state::InitState::Ready {
        return;
    }
    if STARTED.swap(true, Ordering::AcqRel) {
        return;
    }
    // Internal and with signals blocked: the thread inherits the mask, and whatever
    // `pthread_create` allocates or maps forwards unrecorded.
    let _internal = Internal::begin(true);
    // SAFETY: an all-zero `pthread_attr_t` is overwritten by `pthread_attr_init`.
    let mut attr: libc::pthread_attr_t = unsafe { core::mem::zeroed() };
    // SAFETY: `attr` is valid storage; the attribute calls only fill it; `run` has the thread
    // entry signature and lives as long as the (pinned) library; the argument is unused.
    let rc = unsafe {
        libc::pthread_attr_init(&mut attr);
        libc::pthread_attr_setdetachstate(&mut attr, libc::PTHREAD_CREATE_DETACHED);
        libc::pthread_attr_setstacksize(&mut attr, STACK_BYTES);
        let mut t: libc::pthread_t = 0;
        let rc = libc::pthread_create(&mut t, &attr, run, core::ptr::null_mut());
        libc::pthread_attr_destroy(&mut attr);
        rc
    };
    if rc != 0 {
        crate::sys::stderr_write(
            b"memscope: the memory sampler thread could not start; no samples in this process\n",
        );
    }
}

/// Records one host sample now (at exit, on the exiting thread, so the last stretch has a
/// point too), when sampling is on. Never a device query: that is the sampler thread's alone.
pub(crate) fn sample_at_exit() {
    if STARTED.load(Ordering::Acquire)
        && settings::sample_ns() != 0
        && state::init_state() == state::InitState::Ready
    {
        sample_host();
    }
}

/// The job is finalising the device runtime (`aclFinalize`): no device is asked from now on,
/// and a query running on the sampler thread is waited for (one `aclrtGetMemInfo` call; at
/// most [`RELEASE_WAIT_NS`], so the job never hangs on the sampler). A later
/// [`note_device_set`] turns device sampling on again.
pub fn devices_released() {
    DEVICES.store(0, Ordering::Release);
    let start = clock::now_ns();
    while QUERYING.load(Ordering::Acquire) && clock::now_ns().wrapping_sub(start) < RELEASE_WAIT_NS
    {
        // SAFETY: sched_yield has no preconditions.
        unsafe { libc::sched_yield() };
    }
}

/// Longest wait of [`devices_released`] for a running device query.
const RELEASE_WAIT_NS: u64 = 100_000_000;

extern "C" fn run(_: *mut libc::c_void) -> *mut libc::c_void {
    // SAFETY: `all` is valid storage filled by `sigfillset`; blocking every signal on this
    // thread only affects this thread.
    unsafe {
        let mut all: libc::sigset_t = core::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, core::ptr::null_mut());
        libc::prctl(libc::PR_SET_NAME, c"memscope-sample".as_ptr());
    }
    let _internal = Internal::begin(false);
    let mut next = monotonic_ns();
    loop {
        // read every tick: the Python API may change it (0: paused, checked every PAUSED_NS)
        let interval = settings::sample_ns();
        if interval == 0 {
            next = monotonic_ns().saturating_add(PAUSED_NS);
        } else {
            sample();
            next = next.saturating_add(interval).max(monotonic_ns());
        }
        sleep_until(next);
    }
}

/// How often a paused sampler looks whether sampling was turned on again.
const PAUSED_NS: u64 = 100_000_000;

/// Sets the sampler's interval from now on (`memscope.config(sample=...)`; 0 pauses it) and
/// starts the sampler thread if it is not running yet. For the Python package's entry point,
/// never a hook.
pub fn set_sample_interval(ns: u64) {
    settings::set_sample_ns(ns);
    start();
}

/// Reads `/proc/self/statm` and records a `ProcessSample` (nothing when it cannot be read).
fn sample_host() {
    if let Some((rss, anon)) = read_statm() {
        crate::writer::record_raw(&Record::ProcessSample {
            ts: clock::now_ns(),
            rss,
            anon,
        });
    }
}

/// A host sample, then a `DeviceSample` per device the job set (sampler thread only).
fn sample() {
    sample_host();
    let q = QUERY.load(Ordering::Acquire);
    if DEVICES.load(Ordering::Acquire) == 0 || q == 0 {
        return;
    }
    // SAFETY: a non-zero QUERY was stored from a `DeviceQuery` by `note_device_set`.
    let query = unsafe { core::mem::transmute::<usize, DeviceQuery>(q) };
    for device in 0..64u32 {
        // flag first, then look: `devices_released` clears the mask, then waits for the flag
        QUERYING.store(true, Ordering::SeqCst);
        let asked = DEVICES.load(Ordering::SeqCst) & (1 << device) != 0;
        // a panic of the adapter's query must not end the thread (or unwind into C)
        let got = asked.then(|| std::panic::catch_unwind(|| query(device)));
        // stamped while still flagged: a sample is older than the `aclFinalize` that waited
        let ts = clock::now_ns();
        QUERYING.store(false, Ordering::Release);
        let Some(Ok(Some((free, total)))) = got else {
            continue;
        };
        crate::writer::record_raw(&Record::DeviceSample {
            ts,
            device,
            used: total.saturating_sub(free),
            free,
        });
    }
}

/// Resident and anonymous resident bytes: `statm`'s `resident` and `resident − shared` pages
/// (`shared` is the file-backed and shmem part: what is left is `RssAnon`).
fn read_statm() -> Option<(u64, u64)> {
    let mut buf = [0u8; 128];
    // SAFETY: the path is a NUL-terminated literal; `buf` is writable for its length; the
    // descriptor is closed before returning.
    let n = unsafe {
        let fd = libc::open(
            c"/proc/self/statm".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return None;
        }
        let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
        libc::close(fd);
        n
    };
    let text = buf.get(..usize::try_from(n).ok()?)?;
    let mut fields = text
        .split(|b| *b == b' ' || *b == b'\n')
        .filter(|f| !f.is_empty())
        .map(memscope_wire::probe_env::parse_u64);
    let _size = fields.next()??;
    let resident = fields.next()??;
    let shared = fields.next()??;
    // SAFETY: sysconf has no preconditions.
    let page = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).ok()?;
    Some((resident * page, resident.saturating_sub(shared) * page))
}

fn monotonic_ns() -> u64 {
    // SAFETY: an all-zero timespec is valid; clock_gettime fills it.
    let mut t: libc::timespec = unsafe { core::mem::zeroed() };
    // SAFETY: `t` is valid for writing.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Sleeps until monotonic time `ns` (absolute, so the period does not drift).
fn sleep_until(ns: u64) {
    let t = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `t` is a valid timespec; a null remainder is allowed with TIMER_ABSTIME. An
    // interrupted sleep (EINTR cannot come with every signal blocked) only takes a sample early.
    unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &t,
            core::ptr::null_mut(),
        )
    };
}

#[cfg(test)]
mod tests {
    #[test]
    fn statm_of_this_process_has_resident_at_least_anonymous_bytes() {
        let (rss, anon) = super::read_statm().expect("/proc/self/statm");
        assert!(rss > 0 && anon <= rss, "{rss} {anon}");
    }
}
