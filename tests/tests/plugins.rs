//! Issue 2: third-party adapters through the versioned plugin ABI (`schemas/memscope_plugin.h`):
//! a plugin built against the header loads and its events reach the dump; a plugin with the
//! wrong ABI version or magic is refused with a clear one-line error before anything runs.

use memscope_tests::*;

fn plugin(name: &str) -> std::path::PathBuf {
    let src = repo_root().join("tests/plugins").join(format!("{name}.c"));
    compile(&[&src], &format!("lib{name}.so"), &[], true)
}

#[test]
fn a_plugin_built_against_the_header_loads_and_its_events_are_written() {
    let good = plugin("good_plugin");
    let prog = program("mstx_basic");
    let run = memscope_run(
        &[
            "--adapters",
            "mstx",
            "--adapter-path",
            good.to_str().unwrap(),
        ],
        &[prog.to_str().unwrap(), "1"],
        &[],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let rows = run.rows();
    let m = select(&rows, "MALLOC", "MYPOOL");
    let f = select(&rows, "FREE", "MYPOOL");
    assert_eq!((m.len(), f.len()), (1, 1), "{}", run.stderr());
    assert_eq!(m[0]["Ptr"], "0x0000000000001000");
    assert_eq!(m[0]["Device Id"], "0");
    let (a, b) = (attrs(m[0]), attrs(f[0]));
    assert_eq!(a["size"], "4096");
    assert_eq!(a["owner"], "MYPOOL@fixture");
    assert_eq!(
        (b["size"].as_str(), &b["allocation_id"]),
        ("4096", &a["allocation_id"])
    );
    // memscope reads its own dumps back, third-party Event Types included.
    for cmd in ["leaks", "decompose", "gap"] {
        let dump = &run.dumps(".csv")[0];
        let o = std::process::Command::new(memscope_bin())
            .current_dir(run.out.path())
            .args(["analyze", cmd])
            .arg(dump)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "analyze {cmd}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

#[test]
fn plugins_with_a_wrong_abi_version_or_magic_are_refused_before_launch() {
    let marker = tempfile::tempdir().unwrap();
    let touched = marker.path().join("launched");
    for (name, needle) in [
        ("bad_version_plugin", "ABI version 2"),
        ("bad_magic_plugin", "bad magic"),
    ] {
        let lib = plugin(name);
        let o = std::process::Command::new(memscope_bin())
            .args(["run", "--adapters", "mstx", "--adapter-path"])
            .arg(&lib)
            .args(["--", "touch"])
            .arg(&touched)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(
            err.contains("refusing adapter plugin") && err.contains(needle),
            "{err}"
        );
        assert!(err.contains(lib.to_str().unwrap()), "names the file: {err}");
    }
    assert!(!touched.exists());
}

#[test]
fn the_probe_itself_refuses_a_wrong_version_plugin_preloaded_by_hand() {
    // Bypass the CLI's check: the probe must verify the header before calling any plugin code.
    let bad = plugin("bad_version_plugin");
    let prog = program("mstx_basic");
    let spool = tempfile::tempdir().unwrap();
    let o = std::process::Command::new(&prog)
        .arg("1")
        .env("LD_PRELOAD", probe_lib())
        .env("MEMSCOPE_SPOOL", spool.path())
        .env("MEMSCOPE_ADAPTERS", "1")
        .env("MEMSCOPE_PLUGINS", &bad)
        .output()
        .unwrap();
    assert!(o.status.success(), "the job still runs");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("refusing adapter plugin") && err.contains("2."),
        "{err}"
    );
}
