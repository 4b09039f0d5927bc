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
    let Ok(data) = memscope_core::reader::limits::read_file_by_size(program, 8 << 30) else {
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
    if !dynamic {
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
}
