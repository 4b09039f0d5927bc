//! Where `memscope run` finds what it launches: the probe library, the shipped plugins beside
//! it, and the job's program on `PATH`.

use memscope_collect::config::RunConfig;
use std::path::{Path, PathBuf};

/// Finds `libmemscope_probe.so`: `$MEMSCOPE_PROBE_PATH`, then next to the `memscope`
/// executable, then `../lib/` (an installed layout), `../lib/memscope/` (the pip wheel), then
/// the parent directory (cargo puts test binaries in `target/<profile>/deps`).
///
/// # Errors
/// A one-line message naming where it looked.
pub fn find_probe() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("MEMSCOPE_PROBE_PATH") {
        let p = PathBuf::from(p);
        if !p.is_file() {
            return Err(format!("MEMSCOPE_PROBE_PATH={}: no such file", p.display()));
        }
        return crate::plugin_check::check_probe(&p).map(|()| p);
    }
    let exe = std::env::current_exe()
        .map_err(|e| format!("cannot locate the memscope executable: {e}"))?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    let name = "libmemscope_probe.so";
    let candidates = [
        dir.join(name),
        dir.join("../lib").join(name),
        dir.join("../lib/memscope").join(name), // pip wheel: <prefix>/bin, <prefix>/lib/memscope
        dir.join("..").join(name),
    ];
    candidates.iter().find(|p| p.is_file()).cloned().ok_or_else(|| {
        format!(
            "preload library {name} not found next to {} (build the workspace with `cargo build --workspace`, or set MEMSCOPE_PROBE_PATH)",
            exe.display()
        )
    })
}

/// Puts the library of every selected shipped plugin (an adapter descriptor with a
/// [`library`](memscope_collect::adapter::AdapterDescriptor::library), found next to `probe`)
/// on the plugin list, once.
///
/// # Errors
/// A selected shipped plugin's library is missing (one line naming it).
pub fn add_shipped_plugins(cfg: &mut RunConfig, probe: &Path) -> Result<(), String> {
    let dir = probe.parent().unwrap_or(Path::new("."));
    for sp in cfg.shipped_plugins() {
        let Some(library) = sp.library else { continue };
        let lib = dir.join(library);
        if !lib.is_file() {
            // a source build: the crate of that library, in the profile the probe was built in
            let krate = library
                .trim_start_matches("lib")
                .trim_end_matches(".so")
                .replace('_', "-");
            let profile = match dir.file_name().and_then(|d| d.to_str()) {
                Some("debug") | None => String::new(),
                Some("release") => " --release".to_owned(),
                Some(other) => format!(" --profile {other}"),
            };
            return Err(format!(
                "--adapters {}: its library {} is missing (build it: `cargo build{profile} -p {krate}`)",
                sp.name,
                lib.display(),
            ));
        }
        if !cfg.adapter_paths.contains(&lib) {
            cfg.adapter_paths.push(lib);
        }
    }
    Ok(())
}

/// `p` as `execvp` finds it: a path when it has a `/`, else the first match on `PATH`.
pub fn resolve_program(p: &str) -> Option<PathBuf> {
    if p.contains('/') {
        let path = PathBuf::from(p);
        // a directory is found too, so that it is named as such
        return path.exists().then_some(path);
    }
    std::env::var_os("PATH")
        .map(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(p))
                .find(|c| c.is_file())
        })
        .unwrap_or(None)
}
