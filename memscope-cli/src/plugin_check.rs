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
    describe(path).map(|_| ())
}

/// What `memscope adapters list` shows of a plugin, read from its file (no plugin code runs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginInfo {
    /// The header's `name` (empty when it cannot be read from the file).
    pub name: String,
    /// ABI version `(major, minor)` it was built against.
    pub abi: (u32, u32),
    /// Functions it defines besides the header (the symbols it interposes or exports), sorted.
    pub symbols: Vec<String>,
}

/// Offset of `name` in the header (LP64).
const OFF_NAME: u64 = 16;

/// Reads `path`'s plugin header: checked as [`check`], plus its name and exported functions.
///
/// # Errors
/// One line naming the file and what is wrong.
pub fn describe(path: &Path) -> Result<PluginInfo, String> {
    let name = path.display();
    let data = memscope_dump::reader::limits::read_file_by_size(path, MAX_LIBRARY_BYTES)
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
    let mut symbols: Vec<String> = file
        .dynamic_symbols()
        .filter(|s| s.is_definition() && s.kind() == object::SymbolKind::Text)
        .filter_map(|s| s.name().ok().map(str::to_owned))
        .filter(|n| !n.starts_with('_'))
        .collect();
    symbols.sort();
    symbols.dedup();
    Ok(PluginInfo {
        name: header_name(&file, sym.address() + OFF_NAME).unwrap_or_default(),
        abi: (major, minor),
        symbols,
    })
}

/// The string the header's `name` pointer (at virtual address `at`) points to: the pointer is
/// the addend of a relative dynamic relocation (position-independent code), or the stored
/// value in a non-PIC object.
fn header_name(file: &object::File<'_>, at: u64) -> Option<String> {
    let target = file
        .dynamic_relocations()
        .and_then(|mut r| r.find(|(off, _)| *off == at))
        .map(|(_, r)| r.addend() as u64)
        .filter(|&a| a != 0)?;
    let sec = file
        .sections()
        .find(|s| s.address() <= target && target < s.address() + s.size())?;
    let data = sec.data().ok()?;
    let rest = data.get((target - sec.address()) as usize..)?;
    let end = rest.iter().take(256).position(|&b| b == 0)?;
    Some(String::from_utf8_lossy(&rest[..end]).into_owned())
}

/// Verifies that `path` is memscope's preload library (an ELF shared object exporting
/// `memscope_version` and `InitInjectionMstx`), so a wrong `MEMSCOPE_PROBE_PATH` is an error
/// rather than a silently untraced job.
///
/// # Errors
/// One line naming the file.
pub fn check_probe(path: &Path) -> Result<(), String> {
    let name = path.display();
    let data = memscope_dump::reader::limits::read_file_by_size(path, MAX_LIBRARY_BYTES)
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
