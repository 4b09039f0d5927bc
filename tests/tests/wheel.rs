//! Issue 26: the wheel any index takes. The shipped wheel is tagged manylinux_2_17
//! (manylinux2014), carries the CLI, the probe and every shipped adapter library, stripped,
//! and none of its ELF files needs a glibc symbol newer than 2.17 (`objdump -T`); `pip
//! install` of the source tree (`python/`) and of an sdist works in fresh venvs. The first
//! test also checks the aarch64 wheel (`.ci/aarch64-tests.sh`).

mod python_common;

use memscope_tests::repo_root;
use python_common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// The wheel data folder (`python/wheeldata`) is shared by every build of this binary.
static STAGING: Mutex<()> = Mutex::new(());

/// The oldest glibc the shipped ELF files may need.
const FLOOR: (u32, u32) = (2, 17);

/// `objdump FLAG elf`'s output (`MEMSCOPE_TEST_OBJDUMP`: the binutils of another
/// architecture's wheel).
fn objdump(flag: &str, elf: &Path) -> String {
    let tool = std::env::var("MEMSCOPE_TEST_OBJDUMP").unwrap_or_else(|_| "objdump".into());
    let o = Command::new(&tool)
        .arg(flag)
        .arg(elf)
        .output()
        .expect("objdump (binutils)");
    check(&o, &format!("{tool} {flag} {}", elf.display()));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `GLIBC_x.y` versions `objdump -T` lists for `elf`.
fn glibc_versions(elf: &Path) -> Vec<(u32, u32)> {
    let text = objdump("-T", elf);
    let mut v: Vec<(u32, u32)> = text
        .split(|c: char| c.is_whitespace() || c == '(' || c == ')')
        .filter_map(|w| w.strip_prefix("GLIBC_"))
        .filter_map(|ver| {
            let mut it = ver.split('.');
            Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
        })
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Section names of `elf` (`objdump -h`).
fn sections(elf: &Path) -> Vec<String> {
    objdump("-h", elf)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .filter(|n| n.starts_with('.'))
        .map(str::to_owned)
        .collect()
}

/// Unpacks `wheel` into `dir`.
fn unzip(wheel: &Path, dir: &Path) {
    let o = Command::new("python3")
        .args([
            "-c",
            "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])",
        ])
        .arg(wheel)
        .arg(dir)
        .output()
        .expect("python3");
    check(&o, "unzip the wheel");
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    memscope_tests::walk(dir, &mut |p| v.push(p.to_path_buf()));
    v.sort();
    v
}

fn is_elf(p: &Path) -> bool {
    std::fs::read(p).is_ok_and(|b| b.starts_with(b"\x7fELF"))
}

/// The wheel checked: `MEMSCOPE_TEST_WHEEL` (one built for `MEMSCOPE_TEST_WHEEL_ARCH`:
/// `.ci/aarch64-tests.sh` checks the aarch64 wheel so), else this build's.
fn wheel_under_test() -> (PathBuf, String) {
    match std::env::var_os("MEMSCOPE_TEST_WHEEL") {
        Some(w) if !w.is_empty() => (
            PathBuf::from(w),
            std::env::var("MEMSCOPE_TEST_WHEEL_ARCH").expect("MEMSCOPE_TEST_WHEEL_ARCH"),
        ),
        _ => (floor_wheel(), std::env::consts::ARCH.to_owned()),
    }
}

/// This build's wheel as it ships: every ELF linked against glibc 2.17 by zig (`pip install
/// ziglang cargo-zigbuild`; `.ci/run` installs them), tagged manylinux_2_17.
fn floor_wheel() -> PathBuf {
    build_wheel(&["--glibc", "2.17"])
}

#[test]
fn the_wheel_is_manylinux2014_stripped_ships_every_library_and_needs_glibc_2_17_at_most() {
    let _g = STAGING.lock().unwrap_or_else(|e| e.into_inner());
    let (wheel, arch) = wheel_under_test();
    let wheel = &wheel;
    let name = wheel.file_name().unwrap().to_string_lossy().into_owned();
    // `…-py3-none-<platform tags, dot-separated>.whl`: every one manylinux at the floor.
    let platforms = name
        .strip_suffix(".whl")
        .and_then(|n| n.split("-py3-none-").nth(1))
        .unwrap_or_else(|| panic!("a py3-none wheel: {name}"));
    for p in platforms.split('.') {
        assert!(
            p == format!("manylinux_2_17_{arch}") || p == format!("manylinux2014_{arch}"),
            "{name}"
        );
    }
    let d = tempfile::tempdir().unwrap();
    unzip(wheel, d.path());
    let all = files_under(d.path());
    let wheel_meta = all
        .iter()
        .find(|p| {
            p.ends_with("WHEEL")
                && p.parent()
                    .unwrap()
                    .to_string_lossy()
                    .ends_with(".dist-info")
        })
        .expect("dist-info/WHEEL");
    let meta = std::fs::read_to_string(wheel_meta).unwrap();
    let tags: Vec<&str> = meta
        .lines()
        .filter_map(|l| l.strip_prefix("Tag: "))
        .collect();
    assert!(!tags.is_empty(), "{meta}");
    for t in &tags {
        assert!(
            t.starts_with("py3-none-manylinux_2_17_") || t.starts_with("py3-none-manylinux2014_"),
            "a manylinux tag any index accepts: {t}\n{meta}"
        );
    }
    let elfs: Vec<&PathBuf> = all.iter().filter(|p| is_elf(p)).collect();
    for want in [
        "memscope",
        "libmemscope_probe.so",
        "libmemscope_adapter_pymem.so",
    ] {
        assert!(
            elfs.iter()
                .any(|p| p.file_name().is_some_and(|n| n == want)),
            "{want} in the wheel: {all:?}"
        );
    }
    for elf in &elfs {
        let v = glibc_versions(elf);
        assert!(!v.is_empty(), "{} needs glibc", elf.display());
        let newest = *v.last().unwrap();
        assert!(
            newest <= FLOOR,
            "{} needs GLIBC_{}.{} (floor {}.{}): {v:?}",
            elf.display(),
            newest.0,
            newest.1,
            FLOOR.0,
            FLOOR.1
        );
        let s = sections(elf);
        assert!(
            // (`.debug_gdb_scripts` is loaded data, rustc's pointer to gdb's pretty-printers)
            !s.iter()
                .any(|n| n == ".symtab" || (n.starts_with(".debug_") && n != ".debug_gdb_scripts")),
            "{} is stripped: {s:?}",
            elf.display()
        );
        assert!(s.iter().any(|n| n == ".dynsym"), "{}: {s:?}", elf.display());
    }
}

/// A fresh venv at `dir`.
fn fresh_venv(dir: &Path) -> PathBuf {
    check(
        &Command::new(memscope_tests::python3())
            .args(["-m", "venv"])
            .arg(dir)
            .output()
            .expect("python3 -m venv"),
        "python3 -m venv",
    );
    dir.join("bin")
}

/// `pip install SRC` into `bin`'s venv: a PEP 517 build (maturin from the package index, in
/// pip's isolated build environment) in the dev profile, reusing this build's target folder.
fn pip_install_source(bin: &Path, src: &Path) {
    // a cross build (`CARGO_BUILD_TARGET`: an aarch64 pip under qemu, .ci/aarch64-tests.sh)
    // keeps the target folder its environment names
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .filter(|_| std::env::var_os("CARGO_BUILD_TARGET").is_some())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            memscope_tests::profile_dir()
                .parent()
                .unwrap()
                .to_path_buf()
        });
    let o = Command::new(bin.join("python"))
        .args(["-m", "pip", "install", "-q", "--no-cache-dir"])
        .arg(src)
        .env("MATURIN_PEP517_ARGS", "--profile dev")
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("PIP_REQUIRE_VIRTUALENV")
        .output()
        .expect("pip install");
    check(&o, &format!("pip install {}", src.display()));
}

/// The installed CLI runs a job with the probe and the shipped pymem adapter it brings (found
/// next to the probe in `<venv>/lib/memscope/`).
fn installed_memscope_traces(bin: &Path) {
    let d = tempfile::tempdir().unwrap();
    let o = Command::new(bin.join("memscope"))
        .args(["run", "-o"])
        .arg(d.path().join("out"))
        .args(["--adapters", "pymem", "--"])
        .arg(bin.join("python"))
        .args(["-c", "x = [bytes(64) for _ in range(1000)]"])
        .env_remove("MEMSCOPE_PROBE_PATH")
        .output()
        .expect("memscope run");
    check(
        &o,
        "memscope run --adapters pymem from the installed package",
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    // PYMEM is summarised, not dumped: its summary shows the adapter library was loaded.
    assert!(
        stderr.contains("PYMEM Python objects live at exit") && !stderr.contains("cargo build"),
        "{stderr}"
    );
}

#[test]
fn pip_installs_the_source_tree_and_an_sdist_into_fresh_venvs() {
    let _g = STAGING.lock().unwrap_or_else(|e| e.into_inner());
    let base = tempfile::tempdir().unwrap();
    // From the source tree — first: maturin dates an sdist's files 2006, so in a shared target
    // folder cargo takes the artifacts this tree build leaves as up to date for them.
    let bin = fresh_venv(&base.path().join("tree"));
    pip_install_source(&bin, &repo_root().join("python"));
    installed_memscope_traces(&bin);
    // From an sdist (the backend's own, as `python -m build --sdist` calls it).
    let sd = base.path().join("sdist");
    std::fs::create_dir_all(&sd).unwrap();
    let o = Command::new(memscope_tests::python3())
        .current_dir(repo_root().join("python"))
        .args([
            "-c",
            "import sys; sys.path.insert(0, '_build'); import memscope_build as b; print(b.build_sdist(sys.argv[1]))",
        ])
        .arg(&sd)
        .output()
        .expect("python3");
    check(&o, "build the sdist");
    let name = String::from_utf8_lossy(&o.stdout)
        .lines()
        .last()
        .unwrap()
        .trim()
        .to_owned();
    assert!(name.ends_with(".tar.gz"), "{name}");
    let bin = fresh_venv(&base.path().join("from-sdist"));
    pip_install_source(&bin, &sd.join(&name));
    installed_memscope_traces(&bin);
}
