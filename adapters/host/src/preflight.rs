//! Checks made by the CLI before it launches a program: a statically linked executable cannot
//! be traced at all (nothing loads the preload library), and one that exports its own `malloc`
//! (a statically linked allocator) keeps its allocations away from the HOST hooks.
#![forbid(unsafe_code)]

use object::{Object, ObjectSymbol};
use std::path::Path;

/// Warnings (one line each, `memscope: …`) for `program`; empty when it is fine or not an ELF
/// file (scripts are run by a dynamically linked interpreter).
pub fn warnings(program: &Path, host: bool) -> Vec<String> {
    // by its size (a /proc file reads as empty) and non-blocking (a FIFO is not waited on)
    let Ok(data) = memscope_dump::reader::limits::read_file_by_size(program, 8 << 30) else {
        return Vec::new();
    };
    let Ok(file) = object::File::parse(&*data) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let dynamic = match &file {
        object::File::Elf64(e) => {
            use object::read::elf::ProgramHeader;
            let endian = e.endian();
            e.elf_program_headers()
                .iter()
                .any(|ph| ph.p_type(endian) == object::elf::PT_INTERP)
        }
        object::File::Elf32(e) => {
            use object::read::elf::ProgramHeader;
            let endian = e.endian();
            e.elf_program_headers()
                .iter()
                .any(|ph| ph.p_type(endian) == object::elf::PT_INTERP)
        }
        _ => return out,
    };
    if !dynamic && !is_qemu_user(program, &data) {
        out.push(format!(
            "memscope: {} is statically linked: the probe cannot be preloaded into it, so it runs untraced (no events from it)",
            program.display()
        ));
        return out;
    }
    if host {
        let own_malloc = file
            .dynamic_symbols()
            .any(|s| s.is_definition() && s.name().is_ok_and(|n| n == "malloc"));
        if own_malloc {
            out.push(format!(
                "memscope: {} defines its own malloc (a statically linked allocator): host tracing is unavailable for its allocations",
                program.display()
            ));
        }
    }
    out
}

/// Whether `program` (a statically linked executable) is a qemu user-mode emulator
/// (`qemu-aarch64-static …`): it passes the environment on to the program it emulates, whose
/// own dynamic loader preloads the probe (built for that architecture), so the job is traced.
fn is_qemu_user(program: &Path, data: &[u8]) -> bool {
    let named = program
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("qemu-"));
    // qemu-user reads this variable (the guest's library prefix); nothing else ships it.
    const MARK: &[u8] = b"QEMU_LD_PREFIX";
    named && data.windows(MARK.len()).any(|w| w == MARK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dynamic_programs_and_scripts_pass() {
        assert!(warnings(Path::new("/bin/sh"), true).is_empty());
        let dir = tempfile::tempdir().unwrap();
        let s = dir.path().join("x.sh");
        std::fs::write(&s, "#!/bin/sh\n").unwrap();
        assert!(warnings(&s, true).is_empty());
    }

    /// A minimal statically linked ELF64 executable (no program headers, so no `PT_INTERP`),
    /// followed by `tail`.
    fn static_elf(tail: &[u8]) -> Vec<u8> {
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 2; // 64-bit
        h[5] = 1; // little-endian
        h[6] = 1; // version
        h[16] = 2; // ET_EXEC
        h[18] = 62; // EM_X86_64
        h[20] = 1; // e_version
        h[52] = 64; // e_ehsize
        h[54] = 56; // e_phentsize
        h[58] = 64; // e_shentsize
        h.extend_from_slice(tail);
        h
    }

    #[test]
    fn a_static_program_is_said_to_run_untraced_but_a_qemu_user_emulator_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let prog = dir.path().join("prog");
        std::fs::write(&prog, static_elf(b"")).unwrap();
        let w = warnings(&prog, true);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("statically linked"), "{w:?}");
        // qemu-user-static runs the job's own (dynamic) program, which loads the probe.
        let qemu = dir.path().join("qemu-aarch64-static");
        std::fs::write(&qemu, static_elf(b"\0QEMU_LD_PREFIX\0")).unwrap();
        assert!(warnings(&qemu, true).is_empty());
        // The name alone is not enough.
        let fake = dir.path().join("qemu-lookalike");
        std::fs::write(&fake, static_elf(b"")).unwrap();
        assert_eq!(warnings(&fake, true).len(), 1);
    }
}
