//! Issue 11: the probe `.so` holds no collector code. Registration is two explicit lists (the
//! probe's `export_hooks!()` lines, the CLI's `builtin.rs`), nothing registers at load time, so
//! the linker keeps none of the adapters' typers, the symbolizer, the sinks or a registry —
//! even in the workspace build, where Cargo's feature unification compiles them for the probe's
//! dependencies too. (`std`'s own backtrace symbolizer, used by panic messages, is not ours.)
//! Since redesign step 1 the probe builds on `memscope-wire` and `memscope-runtime` alone: no
//! symbol of the event model or of any crate after it is in the library.

use memscope_tests::*;
use std::process::Command;

fn nm(args: &[&str]) -> String {
    let o = Command::new("nm")
        .args(args)
        .arg(probe_lib())
        .output()
        .expect("nm (binutils) is needed: apt-get install binutils");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn the_probe_links_no_typer_symbolizer_sink_registry_or_event_model() {
    let all = nm(&["-C"]);
    let forbidden = [
        "Typer",
        "::typer::",
        "__INVENTORY",
        "inventory::",
        "EndianArcSlice",
        "memscope_core::",
        "memscope_stream::",
        "memscope_dump::",
        "memscope_analysis::",
        "memscope_collect::",
        "rusqlite",
        "DESCRIPTOR",
    ];
    for f in forbidden {
        let hits: Vec<&str> = all.lines().filter(|l| l.contains(f)).take(3).collect();
        assert!(hits.is_empty(), "{f} in the probe: {hits:#?}");
    }
    // the hooks are there
    let dynamic = nm(&["-D", "--defined-only"]);
    for s in [
        "halMemAlloc",
        "malloc",
        "InitInjectionMstx",
        "memscope_start",
    ] {
        assert!(
            dynamic.lines().any(|l| l.ends_with(&format!(" {s}"))),
            "{s} not exported"
        );
    }
    for f in ["typer", "symboli", "inventory", "Typer"] {
        assert!(!dynamic.contains(f), "{f} exported by the probe");
    }
}
