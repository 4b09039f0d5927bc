//! Issue 9: the probe's per-thread footprint is small — static TLS ≤ 1 KiB (glibc takes it out
//! of every thread's stack) and hooks that need little of the thread's stack — so threads with
//! 32 KiB stacks work under every adapter set.

mod host_common;
mod probe_common;

use host_common::*;
use memscope_tests::*;
use memscope_wire::Record;
use probe_common::*;
use std::process::Command;

/// `PT_TLS` MemSiz of an ELF object, from `readelf -lW`.
fn tls_size(path: &std::path::Path) -> u64 {
    let o = Command::new("readelf")
        .arg("-lW")
        .arg(path)
        .output()
        .expect("readelf (binutils) must be installed for this test");
    assert!(o.status.success(), "readelf failed");
    let text = String::from_utf8_lossy(&o.stdout);
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("TLS "))
        .unwrap_or_else(|| panic!("no PT_TLS in {}:\n{text}", path.display()));
    // Type Offset VirtAddr PhysAddr FileSiz MemSiz Flg Align
    let memsz = line.split_whitespace().nth(5).unwrap();
    u64::from_str_radix(memsz.trim_start_matches("0x"), 16).unwrap()
}

#[test]
fn probe_static_tls_is_at_most_1_kib() {
    let n = tls_size(&probe_lib());
    assert!(n <= 1024, "static TLS of the probe: {n} bytes");
}

#[test]
fn a_32_kib_stack_thread_prints_its_output_under_every_adapter_set() {
    let p = prog("probe_small_stack");
    let native = Command::new(&p).output().unwrap();
    assert_eq!(native.status.code(), Some(0), "the program alone");
    let want = String::from_utf8_lossy(&native.stdout).into_owned();
    assert!(want.contains("small-stack thread returned 37"), "{want}");
    for args in [
        &[][..],
        &["--adapters", "host"][..],
        &["--adapters", "host", "--call-stack", "c:32"][..],
    ] {
        let run = memscope_run(args, &[p.to_str().unwrap()], &[]);
        assert_eq!(
            run.code(),
            0,
            "memscope run {args:?}: the job's exit code (SIGSEGV = 139): {}",
            run.stderr()
        );
        assert_eq!(run.stdout(), want, "memscope run {args:?}");
    }
}

#[test]
fn a_32_kib_stack_thread_gets_its_malloc_recorded_with_its_c_stack() {
    // The probe alone (no collector): the thread's malloc(333) is recorded with a stack that
    // reaches through the 17 recursion frames.
    let p = prog("probe_small_stack");
    let spool = tempfile::tempdir().unwrap();
    let o = probe_cmd(spool.path(), &host_mask(), &p)
        .env("MEMSCOPE_C_STACK", "32")
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let streams = read_streams(spool.path());
    let s = stream_of(&streams, "probe_small_stack");
    assert_eq!(s.dropped, 0);
    let stack = s
        .records
        .iter()
        .find_map(|(_, r)| match r {
            Record::Malloc {
                size: 333, stack, ..
            } => Some(*stack),
            _ => None,
        })
        .expect("the thread's malloc(333) is recorded");
    assert_ne!(stack, 0, "with a C stack");
    let frames = s
        .records
        .iter()
        .find_map(|(_, r)| match r {
            Record::StackDef { id, count, .. } if *id == stack => Some(*count),
            _ => None,
        })
        .expect("its stack is defined");
    assert!(frames >= 18, "bottom + 17 recursion frames, got {frames}");
}
