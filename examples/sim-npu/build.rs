//! Builds the C/C++ stand-ins into shared libraries laid out like a CANN
//! install under `<target dir>/<profile>/sim-npu` (see `src/lib.rs`).
//!
//! The libraries are linked one after another because later ones take
//! `DT_NEEDED` entries on earlier ones (the ACL stand-in must pull the HAL
//! in, so that promoting it with `RTLD_GLOBAL` promotes the HAL too).
//! Every library carries `RUNPATH` entries relative to `$ORIGIN`, so the
//! tree works wherever it is copied.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Flags every stand-in is built with (after cc's defaults, so these win).
/// No `-fvisibility=hidden`, `-Bsymbolic` or `-fno-semantic-interposition`:
/// calls between exported functions must stay interposable (abi.md §7).
const COMMON_FLAGS: &[&str] = &[
    "-shared",
    "-fPIC",
    "-O2",
    "-g",
    "-fno-omit-frame-pointer",
    // Keep every hop (aclrtMalloc -> aclrtMallocImpl -> rtMalloc ->
    // halMemAlloc) as a frame, so a tracer's call stacks show the chain.
    "-fno-optimize-sibling-calls",
    "-Wall",
    "-Wextra",
];

/// One shared library to build.
struct Lib {
    /// Source file in `csrc/`.
    src: &'static str,
    /// Output path relative to the install root.
    out: &'static str,
    /// Extra compiler flags.
    cflags: &'static [&'static str],
    /// Libraries in `lib64` to link (`-l` names), recorded as `DT_NEEDED`.
    needs: &'static [&'static str],
    /// `RUNPATH` relative to `$ORIGIN` where `needs` live.
    rpath: &'static str,
    /// Compile as C++.
    cxx: bool,
}

impl Lib {
    /// A C library in `lib64/` linked against `needs` (also in `lib64/`).
    const fn c(src: &'static str, out: &'static str, needs: &'static [&'static str]) -> Lib {
        Lib {
            src,
            out,
            cflags: &[],
            needs,
            rpath: "$ORIGIN",
            cxx: false,
        }
    }

    /// A copy of the msTX front end: only the public API is exported, so
    /// each copy keeps its context private.
    const fn mstx(out: &'static str) -> Lib {
        Lib {
            src: "mstx_frontend.c",
            out,
            cflags: &["-fvisibility=hidden"],
            needs: &[],
            rpath: "$ORIGIN",
            cxx: false,
        }
    }

    /// The fake ATB built for one libstdc++ string ABI.
    const fn atb(out: &'static str, abi_flag: &'static [&'static str]) -> Lib {
        Lib {
            src: "atb.cpp",
            out,
            cflags: abi_flag,
            needs: &["runtime"],
            rpath: "$ORIGIN/../../../lib64",
            cxx: true,
        }
    }
}

/// In link order: every library comes after the ones it needs.
const LIBS: &[Lib] = &[
    Lib::c("ascend_hal.c", "lib64/libascend_hal.so", &[]),
    Lib::c("profapi.c", "lib64/libprofapi.so", &[]),
    Lib::c(
        "runtime.c",
        "lib64/libruntime.so",
        &["ascend_hal", "profapi"],
    ),
    Lib::c("ascendcl_impl.c", "lib64/libascendcl_impl.so", &["runtime"]),
    Lib::c(
        "ascendcl.c",
        "lib64/libascendcl.so",
        &["ascend_hal", "ascendcl_impl"],
    ),
    Lib::c("dcmi.c", "lib64/libdcmi.so", &["ascend_hal"]),
    // Same source, two DSOs: each runs its own injection handshake.
    Lib::mstx("lib64/libms_tools_ext.so"),
    Lib::mstx("lib64/libmstx_pyfront.so"),
    Lib::atb(
        "atb/cxx_abi_0/lib/libatb.so",
        &["-D_GLIBCXX_USE_CXX11_ABI=0"],
    ),
    Lib::atb(
        "atb/cxx_abi_1/lib/libatb.so",
        &["-D_GLIBCXX_USE_CXX11_ABI=1"],
    ),
];

/// Files whose change must rebuild everything.
const WATCHED: &[&str] = &[
    "build.rs",
    "csrc/sim_npu.h",
    "csrc/mstx_api.h",
    "csrc/ascend_hal.c",
    "csrc/profapi.c",
    "csrc/runtime.c",
    "csrc/ascendcl_impl.c",
    "csrc/ascendcl.c",
    "csrc/dcmi.c",
    "csrc/mstx_frontend.c",
    "csrc/atb.cpp",
    "python/mstx.py",
];

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    let root = install_root(&out_dir);
    let csrc = manifest_dir.join("csrc");
    let lib64 = root.join("lib64");

    for f in WATCHED {
        println!("cargo:rerun-if-changed={}", manifest_dir.join(f).display());
    }

    for lib in LIBS {
        build_lib(lib, &csrc, &root, &lib64);
    }

    // The Python mstx shim, next to the libraries, so that
    // PYTHONPATH=<root>/python finds a shim that finds ../lib64 by itself.
    let py_dir = root.join("python");
    fs::create_dir_all(&py_dir).expect("create python dir");
    fs::copy(manifest_dir.join("python/mstx.py"), py_dir.join("mstx.py")).expect("copy mstx.py");

    println!("cargo:lib_dir={}", root.display());
    println!("cargo:rustc-env=SIM_NPU_DIR={}", root.display());
}

/// `OUT_DIR` is `<target>/<profile>/build/sim-npu-<hash>/out`; the install
/// root is `<target>/<profile>/sim-npu`, a path that does not change
/// between builds.
fn install_root(out_dir: &Path) -> PathBuf {
    let profile_dir = out_dir
        .ancestors()
        .nth(3)
        .expect("OUT_DIR has fewer than 3 parents");
    profile_dir.join("sim-npu")
}

fn build_lib(lib: &Lib, csrc: &Path, root: &Path, lib64: &Path) {
    let out = root.join(lib.out);
    fs::create_dir_all(out.parent().expect("output has a parent")).expect("create output dir");
    let soname = out
        .file_name()
        .expect("file name")
        .to_string_lossy()
        .into_owned();

    let mut cmd = cc::Build::new()
        .cpp(lib.cxx)
        .cargo_metadata(false)
        .get_compiler()
        .to_command();
    cmd.args(COMMON_FLAGS)
        .args(lib.cflags)
        .arg(format!("-I{}", csrc.display()))
        .arg("-o")
        .arg(&out)
        .arg(csrc.join(lib.src))
        .arg(format!("-Wl,-soname,{soname}"))
        .arg(format!("-Wl,-rpath,{}", lib.rpath))
        // Keep every listed library as DT_NEEDED even on toolchains that
        // default to --as-needed.
        .arg("-Wl,--no-as-needed")
        .arg(format!("-L{}", lib64.display()));
    for need in lib.needs {
        cmd.arg(format!("-l{need}"));
    }
    cmd.args(["-ldl", "-lpthread"]);
    run(cmd, lib.out);
}

fn run(mut cmd: Command, what: &str) {
    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler for {what}: {e}"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        panic!("building {what} failed ({:?}):\n{stderr}", cmd);
    }
    for line in stderr.lines().filter(|l| !l.trim().is_empty()) {
        println!("cargo:warning={what}: {line}");
    }
}
