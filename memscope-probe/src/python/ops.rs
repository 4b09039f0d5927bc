//! What the Python package's torch hooks record (issue 13): Aten operators and their tensors
//! (`TorchDispatchMode`), CPU tensor storages, and memory-watch dumps. Called through
//! `ctypes.PyDLL` from `memscope/_aten.py`; recorded only inside a collection window.

use core::ffi::{c_char, c_int, c_void};
use memscope_runtime as rt;
use memscope_wire::watch;
use memscope_wire::{AccessKind, Record};

/// Device value of a CPU tensor in these records.
const CPU: u32 = u32::MAX - 1;

fn guard(f: impl FnOnce() -> bool) -> c_int {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(true) => 0,
        _ => -1,
    }
}

/// `int memscope_py_aten_op(const char *name, int end, uint32_t device)`: an Aten operator
/// starts (`end` 0) or ends on `device` (logical NPU id, `UINT32_MAX - 1` cpu, `UINT32_MAX`
/// unknown). 0 recorded, -1 not.
///
/// # Safety
/// `name` is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn memscope_py_aten_op(
    name: *const c_char,
    end: c_int,
    device: u32,
) -> c_int {
    guard(|| {
        // SAFETY: caller contract.
        let Some(n) = (unsafe { rt::c_text(name) }) else {
            return false;
        };
        rt::recording()
            && rt::record(&Record::AtenOp {
                ts: rt::now_ns(),
                end: end != 0,
                device,
                name: n,
            })
    })
}

/// `int memscope_py_aten_tensor(int access, uint32_t device, uint64_t addr, uint64_t size,
/// const char *meta)`: the current operator of this thread reads (`access` 1), writes (2) or
/// touches (3) the tensor at `addr`; `meta` is `dtype\nshape`. 0 recorded, -1 not.
///
/// # Safety
/// `meta` is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn memscope_py_aten_tensor(
    access: c_int,
    device: u32,
    addr: u64,
    size: u64,
    meta: *const c_char,
) -> c_int {
    guard(|| {
        // SAFETY: caller contract.
        let m = unsafe { rt::c_text(meta) }.unwrap_or(b"");
        let Some(access) = AccessKind::from_u8(access as u8) else {
            return false;
        };
        addr != 0
            && rt::recording()
            && rt::record(&Record::AtenTensor {
                ts: rt::now_ns(),
                access,
                device,
                addr,
                size,
                meta: m,
            })
    })
}

/// `int memscope_py_cpu_tensor(int free, uint64_t addr, uint64_t size)`: a CPU tensor storage
/// of `size` bytes at `addr` was created (`free` 0) or released (outside a collection window
/// too: a shadow record, see `memscope_runtime::tracking`). 0 recorded, -1 not.
///
/// # Safety
/// None.
#[no_mangle]
pub unsafe extern "C" fn memscope_py_cpu_tensor(free: c_int, addr: u64, size: u64) -> c_int {
    guard(|| {
        addr != 0
            && (rt::recording() || rt::shadowing())
            && rt::record(&Record::CpuTensor {
                ts: rt::now_ns(),
                free: free != 0,
                addr,
                size,
            })
    })
}

type SyncFn = unsafe extern "C" fn() -> c_int;
type MemcpyFn = unsafe extern "C" fn(*mut c_void, usize, *const c_void, usize, c_int) -> c_int;
/// `ACL_MEMCPY_DEVICE_TO_HOST` (abi.md §3).
const DEVICE_TO_HOST: c_int = 2;
/// Bytes of watched memory per `WatchDump` record of full content.
const PIECE: usize = 512;

/// Copies `len` bytes at `addr` of `device` to host memory: through the runtime
/// (`aclrtSynchronizeDevice`, then `aclrtMemcpy` device to host, resolved in the global scope)
/// for an NPU, a plain copy for a CPU tensor. `None` when the runtime refuses. The
/// synchronisation is the probe's own (internal): the ACL adapter's hook forwards it without a
/// `DEVICE_SYNC` row, which would order the job's streams for a race check.
fn copy_out(device: u32, addr: u64, len: usize) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; len];
    if device == CPU {
        // SAFETY: the caller (the package) names memory of a live CPU tensor of `len` bytes.
        unsafe { core::ptr::copy_nonoverlapping(addr as *const u8, buf.as_mut_ptr(), len) };
        return Some(buf);
    }
    // SAFETY: NUL-terminated names; RTLD_DEFAULT searches the global scope.
    let (sync, copy) = unsafe {
        (
            libc::dlsym(libc::RTLD_DEFAULT, c"aclrtSynchronizeDevice".as_ptr()),
            libc::dlsym(libc::RTLD_DEFAULT, c"aclrtMemcpy".as_ptr()),
        )
    };
    if copy.is_null() {
        return None;
    }
    // SAFETY: the symbols are ACL's (abi.md §3): `aclError aclrtSynchronizeDevice(void)` and
    // `aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count,
    // aclrtMemcpyKind kind)`; `buf` has `len` writable bytes.
    unsafe {
        if !sync.is_null() {
            let sync = core::mem::transmute::<*mut c_void, SyncFn>(sync);
            rt::internal_unmasked(|| sync());
        }
        let f = core::mem::transmute::<*mut c_void, MemcpyFn>(copy);
        let rc = f(
            buf.as_mut_ptr().cast(),
            len,
            addr as *const c_void,
            len,
            DEVICE_TO_HOST,
        );
        (rc == 0).then_some(buf)
    }
}

/// `int memscope_py_watch_dump(const char *name, uint32_t device, uint64_t addr, uint64_t len,
/// int full)`: dumps the watched memory `[addr, addr+len)` of `device` now, as `name`
/// (`<op>_<n>-<watched>_<idx>_<before|after>`): its checksum, or with `full` its bytes. 0
/// recorded, -1 not (outside a window, dropped), -2 the memory could not be copied out (the
/// runtime refused, or is not there).
///
/// # Safety
/// `name` is NULL or NUL-terminated; `[addr, addr+len)` is memory of a live tensor or block.
#[no_mangle]
pub unsafe extern "C" fn memscope_py_watch_dump(
    name: *const c_char,
    device: u32,
    addr: u64,
    len: u64,
    full: c_int,
) -> c_int {
    let mut refused = false;
    let rc = guard(|| {
        // SAFETY: caller contract.
        let Some(n) = (unsafe { rt::c_text(name) }) else {
            return false;
        };
        if !rt::recording() || addr == 0 {
            return false;
        }
        let Some(bytes) = copy_out(device, addr, len as usize) else {
            refused = true;
            return false;
        };
        let ts = rt::now_ns();
        if full == 0 {
            return rt::record(&Record::WatchDump {
                ts,
                device,
                value: watch::crc64(&bytes),
                full: false,
                name: n,
                data: b"",
            });
        }
        let mut ok = true;
        let mut off = 0;
        loop {
            let end = (off + PIECE).min(bytes.len());
            ok &= rt::record(&Record::WatchDump {
                ts,
                device,
                value: off as u64,
                full: true,
                name: if off == 0 { n } else { b"" },
                data: &bytes[off..end],
            });
            off = end;
            if off >= bytes.len() {
                break;
            }
        }
        ok
    });
    if refused {
        -2
    } else {
        rc
    }
}
