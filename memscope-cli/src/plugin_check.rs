//! Checks a third-party adapter library before anything is launched: it must be an ELF shared
//! object exporting the `memscope_plugin` header (schemas/memscope_plugin.h) with the right
//! magic and a supported major ABI version. Reading the header from the file means no plugin
//! code runs for a refused plugin (the probe checks again in the job, before calling it).

use object::{Object, ObjectSection, ObjectSymbol};
use std::path::Path;

/// `MEMSCOPE_PLUGIN_MAGIC` ("MSPL").
pub const PLUGIN_MAGIC: u32 = 0x4D53_504C;
/// The plugin ABI major version this memscope speaks.
pub const PLUGIN_ABI_MAJOR: u32 = 1;
/// Name of the exported header symbol.
pub const HEADER_SYMBOL: &str = "memscope_plugin";

/// Largest library read to check it (bounded by its size too: a `/proc` file reads as empty).
const MAX_LIBRARY_BYTES: u64 = 8 << 30;

/// Offsets in the header struct (see schemas/memscope_plugin.h).
const OFF_MAGIC: usize = 0;
const OFF_MAJOR: usize = 4;
const OFF_MINOR: usize = 6;

/// Verifies `path`.
///
/// # Errors
/// One line naming the file and what is wrong.
pub fn check(path: &Path) -> Result<(), String> {
    let name = path.display();
    let data = memscope_core::reader::limits::read_file_by_size(path, MAX_LIBRARY_BYTES)
        .map_err(|e| format!("--adapter-path {name}: {e}"))?;
    let file = object::File::parse(&*data)
        .map_err(|e| format!("--adapter-path {name}: not a shared library ({e})"))?;
    let sym = file
        .dynamic_symbols()
        .find(|s| s.name() == Ok(HEADER_SYMBOL) && s.is_definition())
        .ok_or_else(|| format!("--adapter-path {name}: refusing adapter plugin: it does not export `{HEADER_SYMBOL}` (see schemas/memscope_plugin.h)"))?;
    let section = sym
        .section_index()
        .and_then(|i| file.section_by_index(i).ok())
        .ok_or_else(|| format!("--adapter-path {name}: `{HEADER_SYMBOL}` has no data"))?;
    let bytes = section
        .data_range(sym.address(), 8)
        .ok()
        .flatten()
        .ok_or_else(|| format!("--adapter-path {name}: `{HEADER_SYMBOL}` is not readable"))?;
    let magic = u32::from_le_bytes(bytes[OFF_MAGIC..OFF_MAGIC + 4].try_into().expect("4"));
    let major = u16::from_le_bytes(bytes[OFF_MAJOR..OFF_MAJOR + 2].try_into().expect("2")) as u32;
    let minor = u16::from_le_bytes(bytes[OFF_MINOR..OFF_MINOR + 2].try_into().expect("2")) as u32;
    if magic != PLUGIN_MAGIC {
        return Err(format!("--adapter-path {name}: refusing adapter plugin: bad magic 0x{magic:08x} (expected 0x{PLUGIN_MAGIC:08x})"));
    }
    if major != PLUGIN_ABI_MAJOR {
        return Err(format!(
            "--adapter-path {name}: refusing adapter plugin: ABI version {major}.{minor}, this memscope supports {PLUGIN_ABI_MAJOR}.x"
        ));
    }
    Ok(())
}

/// Verifies that `path` is memscope's preload library (an ELF shared object exporting
/// `memscope_version` and `InitInjectionMstx`), so a wrong `MEMSCOPE_PROBE_PATH` is an error
/// rather than a silently untraced job.
///
/// # Errors
/// One line naming the file.
pub fn check_probe(path: &Path) -> Result<(), String> {
    let name = path.display();
    let data = memscope_core::reader::limits::read_file_by_size(path, MAX_LIBRARY_BYTES)
        .map_err(|e| format!("MEMSCOPE_PROBE_PATH={name}: {e}"))?;
    let file = object::File::parse(&*data)
        .map_err(|e| format!("MEMSCOPE_PROBE_PATH={name}: not a shared library ({e})"))?;
    let has = |want: &str| {
        file.dynamic_symbols()
            .any(|s| s.name() == Ok(want) && s.is_definition())
    };
    if has("memscope_version") && has("InitInjectionMstx") {
        Ok(())
    } else {
        Err(format!(
            "MEMSCOPE_PROBE_PATH={name}: not the memscope probe (libmemscope_probe.so)"
        ))
    }
}
