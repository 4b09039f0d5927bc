//! Where the ACL hooks forward: the real `libascendcl.so` functions, found by the runtime's
//! resolver (the next definition, a loaded `libascendcl.so`, or one under
//! `$ASCEND_HOME_PATH/lib64`).

use core::ffi::{c_int, c_void, CStr};
use memscope_runtime::real::{Real, Step};

const ACL: &CStr = c"libascendcl.so";

macro_rules! acl {
    ($sym:literal) => {
        Real::new(&[
            Step::Next($sym),
            Step::Loaded {
                lib: ACL,
                sym: $sym,
            },
            Step::Load {
                env: c"ASCEND_HOME_PATH",
                sub: "lib64",
                lib: ACL,
                sym: $sym,
            },
        ])
    };
}

pub(crate) static INIT: Real = acl!(c"aclInit");
pub(crate) static FINALIZE: Real = acl!(c"aclFinalize");
pub(crate) static SET_DEVICE: Real = acl!(c"aclrtSetDevice");
pub(crate) static HOST_REGISTER: Real = acl!(c"aclrtHostRegisterV2");
pub(crate) static HOST_UNREGISTER: Real = acl!(c"aclrtHostUnregister");

/// The real `aclrtSetDevice` (for the sampler thread's device query, [`crate::mem_info`]).
pub(crate) fn real_set_device() -> Option<unsafe extern "C" fn(i32) -> c_int> {
    let p = SET_DEVICE.get()?;
    // SAFETY: the symbol is `aclrtSetDevice`.
    Some(unsafe { core::mem::transmute::<*mut c_void, unsafe extern "C" fn(i32) -> c_int>(p) })
}
