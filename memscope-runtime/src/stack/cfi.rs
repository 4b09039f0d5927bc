//! Unwind rules per return address, from the module's `.eh_frame` (DWARF CFI), cached
//! lock-free.
//!
//! A rule says how to find the caller's frame from a frame at a given return address: the
//! canonical frame address (CFA) is `sp + off` or `fp + off`, the caller's return address was
//! saved at `CFA + ra_off`, and the frame pointer at `CFA + fp_off` (or not changed). The
//! registers are the architecture's ([`regs`]): `rsp`/`rbp`/the return-address column on
//! x86_64 (the return address always at `CFA - 8`), `sp`/`x29`/`x30` (LR) on aarch64, where
//! the frame record `{x29, x30}` sits wherever the prologue put it. Code built with frame
//! pointers has the rule `CFA = fp + 16, fp at CFA - 16, return address at CFA - 8` in its
//! body on both (the frame record), so following these rules *is* a frame-pointer walk there,
//! and code without frame pointers (glibc, libstdc++, CPython) is unwound by its CFI instead
//! of being silently skipped.
//!
//! The object containing an address is found with glibc's `_dl_find_object` (lock-free,
//! async-signal-safe, glibc ≥ 2.35, looked up at run time); its `PT_GNU_EH_FRAME` segment
//! (`.eh_frame_hdr`) has the binary-search table that `gimli` uses to find the FDE, whose CFI
//! program `gimli` evaluates with stack-allocated storage (no heap). The result is packed into
//! one word and stored in a fixed open-addressed table, so each return address is evaluated
//! once per process. Without `_dl_find_object`, or for code with no CFI (JIT code), the walk
//! falls back to the frame pointer.

use core::ffi::c_void;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use gimli::{
    BaseAddresses, CfaRule, EhFrame, EhFrameHdr, EndianSlice, LittleEndian, Pointer, Register,
    RegisterRule, UnwindContext, UnwindContextStorage, UnwindSection, UnwindTableRow,
};

/// The DWARF register numbers of this architecture's stack pointer, frame pointer and return
/// address (the CFI's return-address column).
#[cfg(target_arch = "x86_64")]
mod regs {
    use gimli::{Register, X86_64};
    pub const SP: Register = X86_64::RSP;
    pub const FP: Register = X86_64::RBP;
    pub const RA: Register = X86_64::RA;
    /// Rules a frame may have (callee-saved registers and the return address).
    pub const RULES: usize = 24;
}

/// The DWARF register numbers of this architecture's stack pointer, frame pointer and return
/// address (the CFI's return-address column).
#[cfg(target_arch = "aarch64")]
mod regs {
    use gimli::{AArch64, Register};
    pub const SP: Register = AArch64::SP;
    pub const FP: Register = AArch64::X29;
    pub const RA: Register = AArch64::X30;
    /// Rules a frame may have (x19–x30, d8–d15 and the return-address signing state).
    pub const RULES: usize = 32;
}

/// No unwinding on other architectures: no register is the stack pointer, so every rule is
/// [`Rule::Stop`].
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
mod regs {
    use gimli::Register;
    pub const SP: Register = Register(u16::MAX);
    pub const FP: Register = Register(u16::MAX - 1);
    pub const RA: Register = Register(u16::MAX - 2);
    pub const RULES: usize = 24;
}

/// How to step from a frame to its caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// `CFA = sp + cfa_off`; the return address at `CFA + ra_off`; the frame pointer saved at
    /// `CFA + fp_off` when `Some`.
    Sp {
        /// CFA offset from the stack pointer.
        cfa_off: i32,
        /// Where the return address was saved, relative to the CFA (a multiple of 8).
        ra_off: i32,
        /// Where the frame pointer was saved, relative to the CFA (a multiple of 8).
        fp_off: Option<i32>,
    },
    /// `CFA = fp + cfa_off`; the return address at `CFA + ra_off`; the frame pointer saved at
    /// `CFA + fp_off` when `Some`.
    Fp {
        /// CFA offset from the frame pointer.
        cfa_off: i32,
        /// Where the return address was saved, relative to the CFA (a multiple of 8).
        ra_off: i32,
        /// Where the frame pointer was saved, relative to the CFA (a multiple of 8).
        fp_off: Option<i32>,
    },
    /// No CFI for this address: follow the frame pointer (the frame record: `CFA = fp + 16`,
    /// return address at `CFA - 8`, saved frame pointer at `CFA - 16`).
    NoInfo,
    /// The outermost frame (return address undefined), a return address still in its register
    /// (a leaf, or a prologue before it is saved), or a rule this walker does not handle (CFA
    /// expressions, e.g. signal trampolines): stop here.
    Stop,
}

const K_SP: u64 = 1;
const K_FP: u64 = 2;
const K_NOINFO: u64 = 3;
const K_STOP: u64 = 4;
const FP_SAVED: u64 = 8;

/// Largest CFA offset a packed rule holds (24 bits, signed).
const CFA_MAX: i64 = (1 << 23) - 1;
/// Largest save-slot offset a packed rule holds (16 bits of 8-byte words, signed): aarch64
/// frames keep their frame record below their locals, over a KiB under the CFA.
const SLOT_MAX: i64 = ((1 << 15) - 1) * 8;

impl Rule {
    /// One word: kind (bits 0–2), frame pointer saved (bit 3), `cfa_off` (bits 8–31),
    /// `ra_off / 8` (bits 32–47), `fp_off / 8` (bits 48–63). Never 0.
    fn pack(self) -> u64 {
        let (kind, cfa, ra, fp) = match self {
            Rule::Sp {
                cfa_off,
                ra_off,
                fp_off,
            } => (K_SP, cfa_off, ra_off, fp_off),
            Rule::Fp {
                cfa_off,
                ra_off,
                fp_off,
            } => (K_FP, cfa_off, ra_off, fp_off),
            Rule::NoInfo => (K_NOINFO, 0, 0, None),
            Rule::Stop => (K_STOP, 0, 0, None),
        };
        let saved = if fp.is_some() { FP_SAVED } else { 0 };
        let word = |v: i32| ((v / 8) as i16 as u16) as u64;
        kind | saved
            | (((cfa as u32) & 0xff_ffff) as u64) << 8
            | word(ra) << 32
            | word(fp.unwrap_or(0)) << 48
    }

    fn unpack(v: u64) -> Rule {
        // Sign-extend the 24-bit CFA offset.
        let cfa_off = (((v >> 8) as u32) << 8) as i32 >> 8;
        let ra_off = i32::from((v >> 32) as u16 as i16) * 8;
        let fp_off = (v & FP_SAVED != 0).then_some(i32::from((v >> 48) as u16 as i16) * 8);
        match v & 7 {
            K_SP => Rule::Sp {
                cfa_off,
                ra_off,
                fp_off,
            },
            K_FP => Rule::Fp {
                cfa_off,
                ra_off,
                fp_off,
            },
            K_NOINFO => Rule::NoInfo,
            _ => Rule::Stop,
        }
    }
}

/// A save slot's offset from the CFA, when a packed rule can hold it.
fn slot(o: i64) -> Option<i32> {
    (o % 8 == 0 && (-SLOT_MAX..=SLOT_MAX).contains(&o)).then_some(o as i32)
}

// ---- cache -------------------------------------------------------------------------------------

const CACHE_BITS: u32 = 16;
const CACHE_SLOTS: usize = 1 << CACHE_BITS;
const PROBES: usize = 16;

struct Slot {
    key: AtomicU64,
    val: AtomicU64,
}

/// pc → packed rule. 1 MiB of zero pages, touched as addresses are seen.
static CACHE: [Slot; CACHE_SLOTS] = [const {
    Slot {
        key: AtomicU64::new(0),
        val: AtomicU64::new(0),
    }
}; CACHE_SLOTS];

#[inline]
fn slot_of(pc: u64) -> usize {
    (pc.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - CACHE_BITS)) as usize
}

/// The rule for the frame whose return address is `ra` (looked up at `ra - 1`, inside the
/// call instruction). Cached; computed on first sight.
#[inline]
pub fn rule_for_return_address(ra: u64) -> Rule {
    rule_for_return_address_on(ra, None)
}

/// As [`rule_for_return_address`], evaluating a rule not cached yet on `stack` when given (CFI
/// evaluation needs a few KiB of stack — tens in debug builds — which a hook on a small thread
/// stack does not have; see `crate::on_stack`).
#[inline]
pub fn rule_for_return_address_on(ra: u64, mut stack: Option<&mut [u8]>) -> Rule {
    let pc = ra.wrapping_sub(1);
    let mut compute = |pc: u64| match stack.as_deref_mut() {
        Some(s) => crate::on_stack(s, || compute(pc)),
        None => compute(pc),
    };
    let start = slot_of(pc);
    for i in 0..PROBES {
        let s = &CACHE[(start + i) & (CACHE_SLOTS - 1)];
        let k = s.key.load(Ordering::Acquire);
        if k == pc {
            let v = s.val.load(Ordering::Acquire);
            return if v == 0 { compute(pc) } else { Rule::unpack(v) };
        }
        if k == 0 {
            let rule = compute(pc);
            if s.key
                .compare_exchange(0, pc, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                s.val.store(rule.pack(), Ordering::Release);
            }
            return rule;
        }
    }
    compute(pc)
}

// ---- _dl_find_object ---------------------------------------------------------------------------

/// glibc's `struct dl_find_object` (glibc 2.35+; the same layout on x86_64 and aarch64).
#[repr(C)]
struct DlFindObject {
    flags: u64,
    map_start: *mut c_void,
    map_end: *mut c_void,
    link_map: *mut c_void,
    eh_frame: *mut c_void,
    reserved: [u64; 7],
}

type DlFindObjectFn = unsafe extern "C" fn(*mut c_void, *mut DlFindObject) -> i32;

/// 0: not looked up; 1: unavailable; else the function.
static FIND: AtomicUsize = AtomicUsize::new(0);

fn find_fn() -> Option<DlFindObjectFn> {
    let mut f = FIND.load(Ordering::Acquire);
    if f == 0 {
        // SAFETY: RTLD_DEFAULT lookup of a NUL-terminated name. May allocate: internal, so the
        // nested allocator calls only forward.
        let p = crate::internal(|| unsafe {
            libc::dlsym(libc::RTLD_DEFAULT, c"_dl_find_object".as_ptr())
        });
        f = if p.is_null() { 1 } else { p as usize };
        FIND.store(f, Ordering::Release);
    }
    if f == 1 {
        return None;
    }
    // SAFETY: `f` is glibc's `_dl_find_object`, whose C signature this is.
    Some(unsafe { core::mem::transmute::<usize, DlFindObjectFn>(f) })
}

/// A loaded object as `_dl_find_object` reports it.
#[derive(Clone, Copy, Debug)]
pub struct FoundObject {
    /// Start of its mapping (`l_map_start`: the page of its lowest `PT_LOAD` segment).
    pub map_start: u64,
    /// End of its mapping (`l_map_end`).
    pub map_end: u64,
    /// Its `struct link_map` (0 if glibc gave none).
    pub link_map: usize,
    /// Its `.eh_frame_hdr` (0: none).
    pub eh_frame: u64,
}

/// The loaded object containing `pc` (lock-free, allocation-free, async-signal-safe).
pub fn find(pc: u64) -> Option<FoundObject> {
    let f = find_fn()?;
    // SAFETY: an all-zero `dl_find_object` is a valid out-parameter.
    let mut r: DlFindObject = unsafe { core::mem::zeroed() };
    // SAFETY: `_dl_find_object` only reads the address and writes `r`.
    if unsafe { f(pc as *mut c_void, &mut r) } != 0 {
        return None;
    }
    Some(FoundObject {
        map_start: r.map_start as u64,
        map_end: r.map_end as u64,
        link_map: r.link_map as usize,
        eh_frame: r.eh_frame as u64,
    })
}

/// The object containing `pc`: (map start, map end, `.eh_frame_hdr` address or 0).
pub fn find_object(pc: u64) -> Option<(u64, u64, u64)> {
    find(pc).map(|o| (o.map_start, o.map_end, o.eh_frame))
}

// ---- CFI evaluation -------------------------------------------------------------------------

/// Stack-only storage for gimli's unwind context (no heap: this runs inside `malloc`).
struct StoreOnStack;

impl<T: gimli::ReaderOffset> UnwindContextStorage<T> for StoreOnStack {
    type Rules = [(Register, RegisterRule<T>); regs::RULES];
    type Stack = [UnwindTableRow<T, Self>; 2];
}

type Slice = EndianSlice<'static, LittleEndian>;

#[cold]
fn compute(pc: u64) -> Rule {
    let Some((start, end, hdr)) = find_object(pc) else {
        return Rule::NoInfo;
    };
    if hdr == 0 || hdr < start || hdr >= end {
        return Rule::NoInfo;
    }
    evaluate(pc, hdr, end).unwrap_or(Rule::NoInfo)
}

fn evaluate(pc: u64, hdr: u64, end: u64) -> Option<Rule> {
    // SAFETY: `.eh_frame_hdr` and `.eh_frame` lie in loaded, read-only segments of the object
    // that contains `pc`, which stays loaded while one of its frames is on this thread's stack.
    // The slices end at the object's mapping end; gimli only reads inside the sections, at
    // offsets given by the well-formed header table and entries.
    let hdr_data: &'static [u8] =
        unsafe { core::slice::from_raw_parts(hdr as *const u8, (end - hdr) as usize) };
    let mut bases = BaseAddresses::default().set_eh_frame_hdr(hdr);
    let parsed = EhFrameHdr::new(hdr_data, LittleEndian)
        .parse(&bases, 8)
        .ok()?;
    let eh_frame_addr = match parsed.eh_frame_ptr() {
        Pointer::Direct(a) => a,
        Pointer::Indirect(_) => return None,
    };
    if eh_frame_addr >= end {
        return None;
    }
    // SAFETY: as above, for `.eh_frame`.
    let eh_data: &'static [u8] = unsafe {
        core::slice::from_raw_parts(eh_frame_addr as *const u8, (end - eh_frame_addr) as usize)
    };
    bases = bases.set_eh_frame(eh_frame_addr);
    let eh_frame: EhFrame<Slice> = EhFrame::new(eh_data, LittleEndian);
    let table = parsed.table()?;
    let mut ctx = UnwindContext::<usize, StoreOnStack>::new_in();
    let row = match table.unwind_info_for_address(
        &eh_frame,
        &bases,
        &mut ctx,
        pc,
        |f: &EhFrame<Slice>, b: &BaseAddresses, o| f.cie_from_offset(b, o),
    ) {
        Ok(r) => r,
        Err(gimli::Error::NoUnwindInfoForAddress) => return Some(Rule::NoInfo),
        Err(_) => return None,
    };
    // The return address saved on the stack (a register rule — LR not saved yet — cannot be
    // followed from an outer frame), 8-aligned and within the packed range.
    let ra_off = match row.register(regs::RA) {
        RegisterRule::Offset(o) => match slot(o) {
            Some(o) => o,
            None => return Some(Rule::Stop),
        },
        _ => return Some(Rule::Stop),
    };
    let fp_off = match row.register(regs::FP) {
        RegisterRule::Offset(o) => match slot(o) {
            Some(o) => Some(o),
            None => return Some(Rule::Stop),
        },
        RegisterRule::Undefined | RegisterRule::SameValue => None,
        _ => return Some(Rule::Stop),
    };
    match *row.cfa() {
        CfaRule::RegisterAndOffset { register, offset } => {
            if !(-CFA_MAX..=CFA_MAX).contains(&offset) {
                return Some(Rule::Stop);
            }
            let cfa_off = offset as i32;
            if register == regs::SP {
                Some(Rule::Sp {
                    cfa_off,
                    ra_off,
                    fp_off,
                })
            } else if register == regs::FP {
                Some(Rule::Fp {
                    cfa_off,
                    ra_off,
                    fp_off,
                })
            } else {
                Some(Rule::Stop)
            }
        }
        CfaRule::Expression(_) => Some(Rule::Stop),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_pack_and_unpack() {
        for r in [
            Rule::Sp {
                cfa_off: 8,
                ra_off: -8,
                fp_off: None,
            },
            Rule::Sp {
                cfa_off: 4096,
                ra_off: -40,
                fp_off: Some(-48),
            },
            Rule::Fp {
                cfa_off: 16,
                ra_off: -8,
                fp_off: Some(-16),
            },
            Rule::Fp {
                cfa_off: -4,
                ra_off: 1016,
                fp_off: None,
            },
            // aarch64: the frame record below 1 KiB of locals.
            Rule::Sp {
                cfa_off: 1072,
                ra_off: -1064,
                fp_off: Some(-1072),
            },
            Rule::Sp {
                cfa_off: CFA_MAX as i32,
                ra_off: -SLOT_MAX as i32,
                fp_off: Some(SLOT_MAX as i32),
            },
            Rule::Fp {
                cfa_off: -CFA_MAX as i32,
                ra_off: -8,
                fp_off: Some(-16),
            },
            Rule::NoInfo,
            Rule::Stop,
        ] {
            assert_ne!(r.pack(), 0);
            assert_eq!(Rule::unpack(r.pack()), r);
        }
    }

    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    /// An address inside this function, after its prologue: it calls another function, so it
    /// has saved its return address on the stack (on aarch64 too, where a leaf keeps it in LR).
    #[inline(never)]
    fn here() -> u64 {
        let pc: u64;
        // SAFETY: `lea` only computes the current instruction address; no memory is accessed.
        #[cfg(target_arch = "x86_64")]
        unsafe {
            core::arch::asm!("lea {}, [rip]", out(reg) pc)
        };
        // SAFETY: `adr` only computes the current instruction address; no memory is accessed.
        #[cfg(target_arch = "aarch64")]
        unsafe {
            core::arch::asm!("adr {}, .", out(reg) pc)
        };
        let other: fn() -> u64 = core::hint::black_box(elsewhere);
        core::hint::black_box(other());
        pc
    }

    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    #[inline(never)]
    fn elsewhere() -> u64 {
        core::hint::black_box(1)
    }

    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    #[test]
    fn test_binary_code_has_cfi_rules() {
        let pc = here() + 1;
        let r = rule_for_return_address(pc);
        match r {
            Rule::Sp { ra_off, .. } | Rule::Fp { ra_off, .. } => {
                assert_eq!(ra_off % 8, 0, "{r:?}");
                assert!(ra_off < 0, "saved below the CFA: {r:?}");
                #[cfg(target_arch = "x86_64")]
                assert_eq!(ra_off, -8, "pushed by the call");
            }
            _ => panic!("{r:?}"),
        }
        assert_eq!(rule_for_return_address(pc), r, "cached");
    }
}
