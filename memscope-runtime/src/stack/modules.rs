//! The module map for C stacks: `Module` records, announced per return address.
//!
//! Before a stack is first written (its `StackDef`, see [`super::intern`]), each of its return
//! addresses is looked up with glibc's `_dl_find_object` (lock-free, allocation-free,
//! async-signal-safe; glibc ≥ 2.35 — the lookup the unwinder in [`super::cfi`] already uses).
//! Every containing object that this process image has not announced yet gets a `Module`
//! record first: path (the link map's `l_name`; the executable's real path for the main
//! program), load bias (`l_addr`), loaded range and GNU build id, the last two read from the
//! object's ELF and program headers in memory. So an object loaded at any time — a library
//! opened with `dlopen`, a Python extension module — is announced before the first stack that
//! runs through it, without interposing `dlopen` (which would change how glibc resolves bare
//! names: it uses the `RUNPATH` of the *calling* object) and without the loader lock
//! (`dl_iterate_phdr` is never called from a hook). The collector symbolises with these
//! records after the process is gone, and can tell when a file on disk is not the one that was
//! loaded.
//!
//! The announced objects are kept in a fixed lock-free set keyed by bias, mapping start and
//! path (an object loaded where an unloaded one was is announced again). A fork child empties
//! it, with the stack tables, since it writes a new stream. Objects without a file (the vDSO)
//! or with a relative `l_name` are not announced (their frames print as addresses), and
//! without `_dl_find_object` (glibc < 2.35) none is.

use super::cfi::{self, FoundObject};
use crate as rt;
use core::ffi::{c_char, c_void};
use core::sync::atomic::{AtomicU64, Ordering};
use memscope_wire::Record;

const EMITTED_SLOTS: usize = 8192;
/// Keys of the objects announced in this process image: `key | DONE` once its `Module`
/// record is written, `key` (bit 0 clear) while a thread is writing it.
static EMITTED: [AtomicU64; EMITTED_SLOTS] = [const { AtomicU64::new(0) }; EMITTED_SLOTS];
const DONE: u64 = 1;

/// The public fields of glibc's `struct link_map` (`<link.h>`), which start the real one.
#[repr(C)]
struct LinkMap {
    l_addr: u64,
    l_name: *const c_char,
    l_ld: *const c_void,
    l_next: *const LinkMap,
    l_prev: *const LinkMap,
}

/// Writes a `Module` record for each object containing one of `frames` (return addresses)
/// that this process image has not announced yet. Called with the reentrancy guard held,
/// before the `StackDef` of `frames` is written.
pub fn announce(frames: &[u64]) {
    super::ensure_atfork();
    // Mappings already handled for this stack (frames cluster in few objects).
    let mut seen = [(0u64, 0u64); 8];
    let mut next = 0usize;
    'frames: for &ra in frames {
        let pc = ra.wrapping_sub(1);
        for &(s, e) in &seen {
            if pc >= s && pc < e {
                continue 'frames;
            }
        }
        let Some(obj) = cfi::find(pc) else {
            continue;
        };
        seen[next % seen.len()] = (obj.map_start, obj.map_end);
        next += 1;
        announce_object(&obj);
    }
}

/// Fork child: every object is unannounced again (the child writes a new stream). Runs on the
/// only thread of the child, from the stack service's fork handler ([`super::ensure_atfork`]).
pub(super) fn reset_after_fork() {
    for e in &EMITTED {
        e.store(0, Ordering::Relaxed);
    }
}

fn mix(mut h: u64, v: u64) -> u64 {
    h = (h ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    h ^ (h >> 31)
}

/// The slot to publish `key` in once its record is written, or `None` when it is already
/// announced (or the set is full). Another thread's announcement still in progress counts as
/// not announced: its `Module` record may not be written yet, so the caller writes one too
/// (a duplicate record is harmless).
fn claim(key: u64) -> Option<&'static AtomicU64> {
    let start = (key as usize >> 1) & (EMITTED_SLOTS - 1);
    for i in 0..EMITTED_SLOTS {
        let s = &EMITTED[(start + i) & (EMITTED_SLOTS - 1)];
        let v = match s.compare_exchange(0, key, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Some(s),
            Err(v) => v,
        };
        if v & !DONE == key {
            return (v & DONE == 0).then_some(s);
        }
    }
    None
}

/// Announces `obj` unless it already was.
fn announce_object(obj: &FoundObject) {
    if obj.link_map == 0 || obj.map_start >= obj.map_end {
        return;
    }
    // SAFETY: `dlfo_link_map` points at the object's link map, which starts with the public
    // `struct link_map` fields; the object stays loaded while one of its frames is on this
    // thread's stack.
    let lm = unsafe { &*(obj.link_map as *const LinkMap) };
    let bias = lm.l_addr;
    // SAFETY: `l_name` is NULL or a NUL-terminated string owned by the loader.
    let name = unsafe { rt::c_text(lm.l_name) }.unwrap_or(b"");
    // The main program is named "" and heads the default namespace's list.
    let main_program = name.is_empty() && lm.l_prev.is_null();
    if !main_program && name.first() != Some(&b'/') {
        return; // vDSO, or a path relative to a directory we do not know
    }
    let mut key = mix(mix(0x51_7CC1_B727_220A, bias), obj.map_start);
    for chunk in name.chunks(8) {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        key = mix(key, u64::from_le_bytes(w));
    }
    let key = (key | 2) & !DONE;
    let Some(slot) = claim(key) else {
        return;
    };
    let mut exe = [0u8; 4096];
    let path: &[u8] = if main_program {
        // SAFETY: `exe` is writable for its length; the path literal is NUL-terminated.
        let n = unsafe {
            libc::readlink(
                c"/proc/self/exe".as_ptr(),
                exe.as_mut_ptr().cast(),
                exe.len(),
            )
        };
        if n <= 0 {
            return;
        }
        &exe[..n as usize]
    } else {
        name
    };
    // SAFETY: `_dl_find_object` reported this mapping of a loaded object; `layout` reads its
    // program headers where the loader or the kernel put them and note segments inside its
    // loaded range.
    let (start, end, build_id) =
        unsafe { layout(obj, bias, main_program) }.unwrap_or((obj.map_start, obj.map_end, &[]));
    let ok = rt::record(&Record::Module {
        ts: rt::now_ns(),
        base: bias,
        start,
        size: end - start,
        build_id,
        path,
    });
    if ok {
        let _ = slot.compare_exchange(key, key | DONE, Ordering::AcqRel, Ordering::Relaxed);
    }
}

/// Bytes of the ELF header (`Elf64_Ehdr`) and of one program header (`Elf64_Phdr`).
const EHDR_SIZE: u64 = 64;
const PHDR_SIZE: u64 = 56;
/// The smallest page size: the first page of a mapping is mapped as a whole.
const PAGE: u64 = 4096;
/// The largest page size a segment is aligned to (x86_64 linkers use up to 2 MiB with
/// `-z max-page-size`, but the mapping start is the *system* page of the lowest segment).
const MAX_PAGE: u64 = 1 << 16;

/// The loaded range `[start, end)` and GNU build id of the object `obj` with load bias
/// `bias`, read from its program headers in memory: for the main program where the kernel
/// says they are (`AT_PHDR`), for any other object from its ELF header at the start of its
/// mapping. `None` when they cannot be found (a library whose lowest `PT_LOAD` segment does
/// not start at file offset 0, which the usual linkers never produce, or whose program headers
/// lie beyond its first page) or do not describe this object.
///
/// The range `_dl_find_object` reports is the whole object when its segments are mapped
/// contiguously (always for a library: glibc reserves its whole span) but only the segment
/// containing the address for a main program whose segments have gaps between them: on
/// aarch64, whose linkers align segments to 64 KiB, on a 4 KiB-page kernel.
///
/// # Safety
/// `obj` is a loaded object as `_dl_find_object` reported it, which stays loaded during the
/// call; for a library, the first page of `[obj.map_start, obj.map_end)` is readable.
unsafe fn layout(
    obj: &FoundObject,
    bias: u64,
    main_program: bool,
) -> Option<(u64, u64, &'static [u8])> {
    let (map_start, map_end) = (obj.map_start, obj.map_end);
    // SAFETY: caller contract.
    let (phdr_at, phnum) = unsafe { program_headers(map_start, map_end, main_program) }?;
    // SAFETY: `program_headers` found `phnum` 8-aligned program headers mapped at `phdr_at`.
    let phdrs =
        unsafe { core::slice::from_raw_parts(phdr_at as *const libc::Elf64_Phdr, phnum as usize) };
    let (mut lo, mut hi) = (u64::MAX, 0u64);
    for ph in phdrs {
        match ph.p_type {
            libc::PT_LOAD => {
                lo = lo.min(ph.p_vaddr);
                hi = hi.max(ph.p_vaddr.checked_add(ph.p_memsz)?);
            }
            // The program headers say where they are loaded: they must be the ones we read.
            libc::PT_PHDR if bias.wrapping_add(ph.p_vaddr) != phdr_at => return None,
            _ => {}
        }
    }
    if lo >= hi {
        return None;
    }
    let (start, end) = (bias.wrapping_add(lo), bias.wrapping_add(hi));
    // glibc: `l_map_start` is the page of the lowest segment (of the segment, for one of a
    // non-contiguous main program), `l_map_end` the highest end (the segment's end).
    let first_page = start & !(MAX_PAGE - 1);
    if end <= start || map_start < first_page || map_end > end || map_start >= end {
        return None;
    }
    let mut build_id: &'static [u8] = &[];
    for ph in phdrs.iter().filter(|ph| ph.p_type == libc::PT_NOTE) {
        let at = bias.wrapping_add(ph.p_vaddr);
        if at < start || at.saturating_add(ph.p_memsz) > end {
            continue;
        }
        // SAFETY: the note segment lies inside the object's loaded range (checked above), in
        // a segment loaded from the file (notes are never in `.bss`).
        if let Some(b) = unsafe { gnu_build_id(at as usize, ph.p_memsz as usize) } {
            build_id = b;
            break;
        }
    }
    Some((start, end, build_id))
}

/// Where the program headers of an object are and how many there are: for the main program
/// the kernel's `AT_PHDR`/`AT_PHNUM` (its mapping may be one segment of it), for a library its
/// ELF header's, read from the first page of its mapping.
///
/// # Safety
/// For a library, the first page of `[map_start, map_end)` is readable.
unsafe fn program_headers(map_start: u64, map_end: u64, main_program: bool) -> Option<(u64, u64)> {
    if main_program {
        // SAFETY: no preconditions; reads the auxiliary vector.
        let (at, num, ent) = unsafe {
            (
                libc::getauxval(libc::AT_PHDR),
                libc::getauxval(libc::AT_PHNUM),
                libc::getauxval(libc::AT_PHENT),
            )
        };
        if at == 0 || num == 0 || ent != PHDR_SIZE || !at.is_multiple_of(8) {
            return None;
        }
        return Some((at, num));
    }
    if !map_start.is_multiple_of(PAGE) || map_end - map_start < EHDR_SIZE {
        return None;
    }
    // SAFETY: the first page of the mapping is readable (contract); 64 bytes fit in it.
    let ehdr = unsafe { (map_start as *const libc::Elf64_Ehdr).read() };
    let id = &ehdr.e_ident;
    if id[..4] != *b"\x7fELF" || id[4] != 2 || id[5] != 1 {
        return None; // not a 64-bit little-endian ELF header
    }
    let (phoff, phnum) = (ehdr.e_phoff, u64::from(ehdr.e_phnum));
    if u64::from(ehdr.e_phentsize) != PHDR_SIZE || phnum == 0 || !phoff.is_multiple_of(8) {
        return None;
    }
    let ph_end = phoff.checked_add(phnum * PHDR_SIZE)?;
    if ph_end > PAGE || ph_end > map_end - map_start {
        return None;
    }
    Some((map_start + phoff, phnum))
}

/// The GNU build id in a `PT_NOTE` segment `[p, p + len)`.
///
/// # Safety
/// `[p, p + len)` is mapped and readable.
unsafe fn gnu_build_id(p: usize, len: usize) -> Option<&'static [u8]> {
    let mut off = 0usize;
    let align4 = |v: usize| (v + 3) & !3;
    while off + 12 <= len {
        // SAFETY: within the note segment per the contract; notes are 4-aligned.
        let (namesz, descsz, ty) = unsafe {
            let h = (p + off) as *const u32;
            (
                h.read_unaligned() as usize,
                h.add(1).read_unaligned() as usize,
                h.add(2).read_unaligned(),
            )
        };
        let name_at = off + 12;
        let desc_at = name_at.checked_add(align4(namesz))?;
        let next = desc_at.checked_add(align4(descsz))?;
        if next > len {
            return None;
        }
        // SAFETY: `[name_at, name_at + namesz)` is inside the segment (checked above).
        let name = unsafe { core::slice::from_raw_parts((p + name_at) as *const u8, namesz) };
        if ty == 3 && name == b"GNU\0" {
            // SAFETY: as for the name.
            return Some(unsafe {
                core::slice::from_raw_parts((p + desc_at) as *const u8, descsz)
            });
        }
        off = next;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An address inside this test binary's code.
    #[inline(never)]
    fn here() -> u64 {
        here as *const () as u64
    }

    #[test]
    fn the_test_binary_has_a_layout_with_its_build_id() {
        let Some(obj) = cfi::find(here()) else {
            eprintln!("no _dl_find_object: skipped");
            return;
        };
        assert_ne!(obj.link_map, 0);
        // SAFETY: as in `announce_object`.
        let bias = unsafe { (*(obj.link_map as *const LinkMap)).l_addr };
        // SAFETY: the mapping `_dl_find_object` reported for this very binary (the main
        // program: its name is empty).
        let (start, end, id) = unsafe { layout(&obj, bias, true) }.unwrap();
        assert!(
            start <= here() && here() < end,
            "{start:x} {:x} {end:x}",
            here()
        );
        // The whole object, or (aarch64 on 4 KiB pages) the segment of `here` inside it.
        assert!(obj.map_end <= end && obj.map_start >= start & !(MAX_PAGE - 1));
        if cfg!(target_arch = "x86_64") {
            assert_eq!(end, obj.map_end);
        }
        // Rust test binaries are linked with a GNU build id by the usual toolchains; only
        // check its shape when there is one.
        assert!(id.is_empty() || (8..=64).contains(&id.len()), "{id:?}");
        // libc (found through one of its functions) has one on every distribution we run on.
        // SAFETY: RTLD_DEFAULT lookup of a NUL-terminated name.
        let getpid = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"getpid".as_ptr()) };
        let libc_obj = cfi::find(getpid as u64).unwrap();
        // SAFETY: as above.
        let lb = unsafe { (*(libc_obj.link_map as *const LinkMap)).l_addr };
        // SAFETY: as above.
        let (_, _, lid) = unsafe { layout(&libc_obj, lb, false) }.unwrap();
        assert!(!lid.is_empty());
        // So has the dynamic loader (found through `_dl_find_object`, which it defines).
        let ld = cfi::find(find_fn_address()).unwrap();
        // SAFETY: as above.
        let lb = unsafe { (*(ld.link_map as *const LinkMap)).l_addr };
        // SAFETY: as above.
        let (_, _, lid) = unsafe { layout(&ld, lb, false) }.unwrap();
        assert!(!lid.is_empty());
    }

    fn find_fn_address() -> u64 {
        // SAFETY: RTLD_DEFAULT lookup of a NUL-terminated name.
        unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"_dl_find_object".as_ptr()) as u64 }
    }

    #[test]
    fn claims_are_published_once() {
        let key = 0x1234_5678_9abc_def2;
        let s = claim(key).expect("new");
        assert!(claim(key).is_some(), "pending: not announced yet");
        s.store(key | DONE, Ordering::Release);
        assert!(claim(key).is_none());
    }
}
