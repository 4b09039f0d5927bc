//! Puts the `msmemscope` script (msMemScope's command names, issue 26) next to the `memscope`
//! executable: `OUT_DIR` is `<target>/<profile>/build/memscope-cli-<hash>/out`, the executable
//! lands in `<target>/<profile>/` (a cross build: `<target>/<triple>/<profile>/`).

use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let script = manifest.join("msmemscope");
    println!("cargo:rerun-if-changed={}", script.display());
    let Some(profile_dir) = out.ancestors().nth(3) else {
        return;
    };
    install(&script, &profile_dir.join("msmemscope"));
}

/// Copies `from` to `to` with its mode, through a private name (a test may be running the old
/// copy), warning instead of failing the build.
fn install(from: &Path, to: &Path) {
    let tmp = to.with_extension(format!("tmp{}", std::process::id()));
    let done = std::fs::copy(from, &tmp).and_then(|_| std::fs::rename(&tmp, to));
    if let Err(e) = done {
        let _ = std::fs::remove_file(&tmp);
        println!("cargo:warning=cannot install {}: {e}", to.display());
    }
}
