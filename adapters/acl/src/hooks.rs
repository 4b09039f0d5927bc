//! In-process half: ACL lifecycle, current device and pinned host memory (abi.md §3.1–§3.2),
//! exported by the probe through [`crate::export_hooks!`]. The launch hooks are in
//! [`crate::launch`].
//!
//! Every hook calls the real function first (found through `RTLD_NEXT`, else an already
//! loaded `libascendcl.so`, else `$ASCEND_HOME_PATH/lib64/libascendcl.so`) and returns its
//! result unchanged; only when no real function exists does it answer
//! `ACL_ERROR_INTERNAL_ERROR`. Then:
//! * `aclInit` records `System{AclInit}` whatever it returned, `aclFinalize` records
//!   `System{AclFini}` (msMemScope's rules; both device-less), inside collection windows.
//! * `aclrtSetDevice` records `SetDevice` on success, also outside windows (it is state the
//!   collector needs to give later events of the thread their device).
//! * `aclrtHostRegisterV2` with `ACL_HOST_REG_PINNED` (bit 28) records `PinnedRegister` with
//!   the process's resident set size on success; `aclrtHostUnregister` records
//!   `PinnedUnregister` with its return code (stamped before the call, so a re-registration of
//!   the same address by another thread sorts after it).

use crate::launch::ensure_callbacks;
use crate::wire::AclRecord;
use crate::SOURCE;
use core::ffi::{c_char, c_int, c_void};
use memscope_runtime as rt;
use memscope_wire::{Record, SystemCode};

/// `ACL_ERROR_INTERNAL_ERROR`: answered only when the real function does not exist.
pub const ACL_ERROR_INTERNAL_ERROR: c_int = 500_000;
/// `ACL_HOST_REG_PINNED` (abi.md §3.2).
pub const ACL_HOST_REG_PINNED: u32 = 0x1000_0000;

use crate::real::{FINALIZE, HOST_REGISTER, HOST_UNREGISTER, INIT, SET_DEVICE};

/// Records `make()` when `on` and the thread is not inside the probe.
fn record_if(on: bool, make: impl FnOnce() -> Record<&'static [u8]>) {
    if on {
        if let Some(g) = rt::enter() {
            g.record(&make());
        }
    }
}

/// Records this adapter's `make()` at time `ts()` when `on` and the thread is not inside the
/// probe; registrations carry the caller's C stack (`--call-stack c:N`).
fn record_acl_if(on: bool, ts: impl FnOnce() -> u64, make: impl FnOnce() -> AclRecord<'static>) {
    if on {
        if let Some(mut g) = rt::enter() {
            let rec = make();
            let stack = matches!(rec, AclRecord::PinnedRegister { .. });
            rt::record_source(&mut g, crate::SOURCE, ts(), &rec, stack);
        }
    }
}

fn system(code: SystemCode) {
    record_if(rt::enabled(SOURCE), || Record::System {
        ts: rt::now_ns(),
        code,
        device: u32::MAX,
    });
}

/// `aclError aclInit(const char *configPath)` hook.
///
/// # Safety
/// ACL's contract: `config_path` is NULL or a NUL-terminated path.
pub unsafe extern "C" fn acl_init(config_path: *const c_char) -> c_int {
    rt::safe_point();
    let Some(p) = INIT.get() else {
        return ACL_ERROR_INTERNAL_ERROR;
    };
    // SAFETY: the symbol is `aclInit`.
    let f = unsafe {
        core::mem::transmute::<*mut c_void, unsafe extern "C" fn(*const c_char) -> c_int>(p)
    };
    // SAFETY: forwarding the caller's argument.
    let rc = unsafe { f(config_path) };
    system(SystemCode::AclInit);
    ensure_callbacks();
    rc
}

/// `aclError aclFinalize(void)` hook.
///
/// # Safety
/// None beyond ACL's.
pub unsafe extern "C" fn acl_finalize() -> c_int {
    rt::safe_point();
    let Some(p) = FINALIZE.get() else {
        return ACL_ERROR_INTERNAL_ERROR;
    };
    // SAFETY: the symbol is `aclFinalize`.
    let f = unsafe { core::mem::transmute::<*mut c_void, unsafe extern "C" fn() -> c_int>(p) };
    // the memory sampler asks no device from now on (issue 25)
    rt::devices_released();
    // SAFETY: no arguments.
    let rc = unsafe { f() };
    system(SystemCode::AclFini);
    rc
}

/// `aclError aclrtSetDevice(int32_t deviceId)` hook.
///
/// # Safety
/// None beyond ACL's.
pub unsafe extern "C" fn aclrt_set_device(device: i32) -> c_int {
    rt::safe_point();
    let Some(p) = SET_DEVICE.get() else {
        return ACL_ERROR_INTERNAL_ERROR;
    };
    // SAFETY: the symbol is `aclrtSetDevice`.
    let f = unsafe { core::mem::transmute::<*mut c_void, unsafe extern "C" fn(i32) -> c_int>(p) };
    // SAFETY: forwarding the caller's argument.
    let rc = unsafe { f(device) };
    if rc == 0 && device >= 0 {
        // the memory sampler may ask this device from now on (issue 25; two atomic stores)
        rt::note_device_set(device as u32, crate::mem_info::query);
        record_acl_if(rt::selected(SOURCE), rt::now_ns, || AclRecord::SetDevice {
            device: device as u32,
        });
    }
    rc
}

/// `aclError aclrtHostRegisterV2(void *ptr, uint64_t size, uint32_t flag)` hook.
///
/// # Safety
/// ACL's contract.
pub unsafe extern "C" fn aclrt_host_register_v2(ptr: *mut c_void, size: u64, flag: u32) -> c_int {
    rt::safe_point();
    let Some(p) = HOST_REGISTER.get() else {
        return ACL_ERROR_INTERNAL_ERROR;
    };
    // SAFETY: the symbol is `aclrtHostRegisterV2`.
    let f = unsafe {
        core::mem::transmute::<*mut c_void, unsafe extern "C" fn(*mut c_void, u64, u32) -> c_int>(p)
    };
    // SAFETY: forwarding the caller's arguments.
    let rc = unsafe { f(ptr, size, flag) };
    if rc == 0 && flag & ACL_HOST_REG_PINNED != 0 {
        // outside a collection window too, as a shadow record (`rt::tracking`)
        record_acl_if(rt::tracking(SOURCE), rt::now_ns, || {
            AclRecord::PinnedRegister {
                addr: ptr as u64,
                size,
                rss: resident_bytes(),
                stack: 0,
            }
        });
    }
    rc
}

/// `aclError aclrtHostUnregister(void *ptr)` hook.
///
/// # Safety
/// ACL's contract.
pub unsafe extern "C" fn aclrt_host_unregister(ptr: *mut c_void) -> c_int {
    rt::safe_point();
    let Some(p) = HOST_UNREGISTER.get() else {
        return ACL_ERROR_INTERNAL_ERROR;
    };
    // SAFETY: the symbol is `aclrtHostUnregister`.
    let f = unsafe {
        core::mem::transmute::<*mut c_void, unsafe extern "C" fn(*mut c_void) -> c_int>(p)
    };
    let ts = rt::now_ns();
    // SAFETY: forwarding the caller's argument.
    let rc = unsafe { f(ptr) };
    record_acl_if(
        rt::tracking(SOURCE),
        || ts,
        || AclRecord::PinnedUnregister {
            addr: ptr as u64,
            ret: rc,
        },
    );
    rc
}

/// The process's resident set size in bytes (`/proc/self/statm`, second field, times the page
/// size), 0 when unreadable. No allocation: raw `open`/`read`/`close` into a stack buffer.
pub fn resident_bytes() -> u64 {
    let mut buf = [0u8; 128];
    // SAFETY: NUL-terminated path; flags are plain.
    let fd = unsafe {
        libc::open(
            c"/proc/self/statm".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return 0;
    }
    // SAFETY: `buf` is writable for its length; `fd` is ours.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    // SAFETY: closing the descriptor opened above.
    unsafe { libc::close(fd) };
    let Ok(n) = usize::try_from(n) else { return 0 };
    let pages = buf[..n]
        .split(|b| *b == b' ')
        .nth(1)
        .and_then(|f| core::str::from_utf8(f).ok())
        .and_then(|f| f.trim().parse::<u64>().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no memory-safety preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages.saturating_mul(u64::try_from(page).unwrap_or(4096))
}

#[cfg(test)]
mod tests {
    #[test]
    fn resident_set_size_is_read_from_proc() {
        let rss = super::resident_bytes();
        assert!(rss > 1 << 20 && rss < 1 << 40, "{rss}");
    }
}
