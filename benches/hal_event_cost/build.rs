//! Builds the benchmark's fake driver (`libascend_hal.so`) and the measured loop (`hal_loop`,
//! linked against it with an `$ORIGIN` run path) into `OUT_DIR`, and tells the binary where.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn run(mut cmd: Command, what: &str) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler for {what}: {e}"));
    assert!(
        out.status.success(),
        "building {what} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn main() {
    let dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("manifest dir"));
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    for f in ["csrc/fake_hal.c", "csrc/hal_loop.c", "build.rs"] {
        println!("cargo:rerun-if-changed={}", dir.join(f).display());
    }
    let cc = || {
        cc::Build::new()
            .cargo_metadata(false)
            .get_compiler()
            .to_command()
    };
    let mut lib = cc();
    lib.args([
        "-shared",
        "-fPIC",
        "-O2",
        "-Wl,-soname,libascend_hal.so",
        "-o",
    ])
    .arg(out.join("libascend_hal.so"))
    .arg(dir.join("csrc/fake_hal.c"));
    run(lib, "libascend_hal.so");
    let mut exe = cc();
    exe.args(["-O2", "-o"])
        .arg(out.join("hal_loop"))
        .arg(dir.join("csrc/hal_loop.c"))
        .arg(format!("-L{}", out.display()))
        .args(["-lascend_hal", "-Wl,-rpath,$ORIGIN"]);
    run(exe, "hal_loop");
    println!(
        "cargo:rustc-env=HAL_LOOP={}",
        out.join("hal_loop").display()
    );
}
