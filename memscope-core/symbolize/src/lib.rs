//! Symbolisation of raw return addresses with the module map the probe recorded (`Module`
//! records): function, file:line and inlined frames from DWARF (`addr2line`), the ELF symbol
//! table as fallback, module+offset as the last resort.
//!
//! Debug information is looked for in the object itself, then by build id under
//! `/usr/lib/debug/.build-id/`, then through `.gnu_debuglink` (a debug file is taken only when
//! its build id and the link's CRC-32 match the object). An object whose build id on disk
//! differs from the recorded one (rebuilt or upgraded since the run) is not symbolised, so no
//! wrong names are printed. Every address is looked up once (return address − 1, inside the
//! call); results are cached per address.
#![forbid(unsafe_code)]

use addr2line::Context;
use gimli::{EndianArcSlice, RunTimeEndian};
use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

type Reader = EndianArcSlice<RunTimeEndian>;

/// Root of the distribution's separate debug files.
const DEBUG_ROOT: &str = "/usr/lib/debug";

struct Module {
    base: u64,
    end: u64,
    path: String,
    build_id: Vec<u8>,
    /// Index into `Symbolizer::loaded`, set on first lookup.
    object: Option<usize>,
}

/// A loaded object (`None`: could not be read or did not match its build id). `addr2line`'s
/// context is `Send` but not `Sync`, hence the mutex.
type Shared = Arc<Mutex<Option<Loaded>>>;

/// Objects loaded by any symbolizer of this collector, by path + build id: the collector runs
/// one symbolizer per process image, and a job's processes share most of their libraries.
fn global(path: &str, build_id: &[u8]) -> Shared {
    type Objects = Mutex<HashMap<(String, Vec<u8>), Shared>>;
    static OBJECTS: OnceLock<Objects> = OnceLock::new();
    let key = (path.to_owned(), build_id.to_vec());
    let cell = {
        let mut map = OBJECTS
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        map.entry(key)
            .or_insert_with(|| Arc::new(Mutex::new(None)))
            .clone()
    };
    {
        let mut g = cell.lock().unwrap_or_else(|e| e.into_inner());
        if g.is_none() {
            *g = Some(load(path, build_id).unwrap_or(Loaded {
                dwarf: None,
                symbols: Vec::new(),
                missing: true,
            }));
        }
    }
    cell
}

struct Loaded {
    /// The file could not be read, or is not the one that was loaded.
    missing: bool,
    dwarf: Option<Context<Reader>>,
    /// (address, size, demangled name), sorted by address.
    symbols: Vec<(u64, u64, String)>,
}

/// Symbolises addresses of one process.
#[derive(Default)]
pub struct Symbolizer {
    /// Modules by start address.
    modules: BTreeMap<u64, Module>,
    /// Objects by path + build id → index into `loaded` (a library mapped twice is read once).
    objects: HashMap<(String, Vec<u8>), usize>,
    /// Loaded objects, shared with every other symbolizer of the collector.
    loaded: Vec<Shared>,
    /// Lines per address.
    cache: HashMap<u64, Arc<[String]>>,
}

fn basename(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl Symbolizer {
    /// An empty symbolizer.
    pub fn new() -> Symbolizer {
        Symbolizer::default()
    }

    /// Adds (or replaces) a module: addresses `[start, start + size)` belong to the ELF file
    /// `path` loaded with bias `base`.
    pub fn add_module(&mut self, base: u64, start: u64, size: u64, path: &[u8], build_id: &[u8]) {
        let path = String::from_utf8_lossy(path).into_owned();
        // A module mapped over others (after a dlclose) replaces them.
        let end = start.saturating_add(size);
        let stale: Vec<u64> = self
            .modules
            .range(..end)
            .filter(|(_, m)| m.end > start)
            .map(|(k, _)| *k)
            .collect();
        for k in stale {
            self.modules.remove(&k);
            self.cache.retain(|a, _| *a < k || *a >= end);
        }
        self.modules.insert(
            start,
            Module {
                base,
                end,
                path,
                build_id: build_id.to_vec(),
                object: None,
            },
        );
    }

    /// Number of modules known.
    pub fn module_count(&self) -> usize {
        self.modules.len()
    }

    /// The lines of return address `addr`: one per inlined frame (innermost first), then the
    /// containing function.
    pub fn lines(&mut self, addr: u64) -> Arc<[String]> {
        if let Some(l) = self.cache.get(&addr) {
            return l.clone();
        }
        let l: Arc<[String]> = self.lookup(addr).into();
        self.cache.insert(addr, l.clone());
        l
    }

    /// A whole stack, one frame per line (each line ends with `\n`), innermost first.
    pub fn stack_text(&mut self, frames: &[u64]) -> String {
        let mut s = String::new();
        for &f in frames {
            for line in self.lines(f).iter() {
                s.push_str(line);
                s.push('\n');
            }
        }
        s
    }

    fn lookup(&mut self, addr: u64) -> Vec<String> {
        let Some((&start, _)) = self.modules.range(..=addr).next_back() else {
            return vec![format!("0x{addr:x}")];
        };
        let m = &self.modules[&start];
        if addr >= m.end {
            return vec![format!("0x{addr:x}")];
        }
        let (base, name) = (m.base, basename(&m.path).to_owned());
        let Some(idx) = self.object(start) else {
            return vec![format!("0x{addr:x}")];
        };
        let shared = self.loaded[idx].clone();
        let guard = shared.lock().unwrap_or_else(|e| e.into_inner());
        let svma = addr.wrapping_sub(base);
        let probe = svma.wrapping_sub(1);
        let Some(obj) = guard.as_ref().filter(|o| !o.missing) else {
            return vec![format!("0x{addr:x} in {name}+0x{svma:x}")];
        };
        let mut out = Vec::new();
        if let Some(ctx) = &obj.dwarf {
            if let Ok(mut it) = ctx.find_frames(probe).skip_all_loads() {
                let mut frames = Vec::new();
                while let Ok(Some(f)) = it.next() {
                    let func = f
                        .function
                        .as_ref()
                        .and_then(|n| n.demangle().ok().map(|c| c.into_owned()));
                    let loc = f.location.as_ref().and_then(|l| {
                        l.file.map(|file| match l.line {
                            Some(line) => format!("{file}:{line}"),
                            None => file.to_owned(),
                        })
                    });
                    frames.push((func, loc));
                }
                let n = frames.len();
                for (i, (func, loc)) in frames.into_iter().enumerate() {
                    let func = match func {
                        Some(f) => f,
                        None if i + 1 == n => match sym_name(&obj.symbols, probe) {
                            Some((s, _)) => s.to_owned(),
                            None => "??".to_owned(),
                        },
                        None => "??".to_owned(),
                    };
                    let inl = if i + 1 < n { " (inlined)" } else { "" };
                    out.push(match loc {
                        Some(loc) => format!("{func} at {loc}{inl}"),
                        None => format!("{func} in {name}{inl}"),
                    });
                }
            }
        }
        if out.is_empty() {
            out.push(match sym_name(&obj.symbols, probe) {
                Some((s, off)) => format!("{s}+0x{:x} in {name}", off + 1),
                None => format!("0x{addr:x} in {name}+0x{svma:x}"),
            });
        }
        out
    }

    fn object(&mut self, start: u64) -> Option<usize> {
        let m = self.modules.get_mut(&start)?;
        if let Some(i) = m.object {
            return Some(i);
        }
        let key = (m.path.clone(), m.build_id.clone());
        let i = match self.objects.get(&key) {
            Some(&i) => i,
            None => {
                self.loaded.push(global(&m.path, &m.build_id));
                self.objects.insert(key, self.loaded.len() - 1);
                self.loaded.len() - 1
            }
        };
        m.object = Some(i);
        Some(i)
    }
}

/// The symbol containing `svma` and the offset into it.
fn sym_name(symbols: &[(u64, u64, String)], svma: u64) -> Option<(&str, u64)> {
    let i = symbols.partition_point(|s| s.0 <= svma);
    let (a, size, name) = symbols.get(i.checked_sub(1)?)?;
    if *size != 0 && svma >= a + size {
        return None;
    }
    Some((name.as_str(), svma - a))
}

/// The whole file (read, not mapped: this module has no `unsafe`, and a file replaced during
/// the run must not change under the reader).
fn file_bytes(path: &Path) -> Option<Arc<[u8]>> {
    std::fs::read(path).ok().map(Arc::from)
}

fn load(path: &str, build_id: &[u8]) -> Option<Loaded> {
    let data = file_bytes(Path::new(path))?;
    let file = object::File::parse(&*data).ok()?;
    if !build_id.is_empty() {
        if let Ok(Some(on_disk)) = file.build_id() {
            if on_disk != build_id {
                return None;
            }
        }
    }
    let mut symbols: Vec<(u64, u64, String)> = file
        .symbols()
        .chain(file.dynamic_symbols())
        .filter(|s| s.kind() == SymbolKind::Text && s.address() != 0)
        .filter_map(|s| {
            let name = s.name().ok()?;
            Some((
                s.address(),
                s.size(),
                addr2line::demangle_auto(name.into(), None).into_owned(),
            ))
        })
        .collect();
    symbols.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    symbols.dedup_by_key(|s| s.0);
    let dwarf = if has_dwarf(&file) {
        context(&data, &file)
    } else {
        debug_file(path, build_id, &file).and_then(|d| {
            let f = object::File::parse(&*d).ok()?;
            context(&d, &f)
        })
    };
    Some(Loaded {
        dwarf,
        symbols,
        missing: false,
    })
}

fn has_dwarf(file: &object::File) -> bool {
    file.section_by_name(".debug_info")
        .is_some_and(|s| s.size() > 0)
}

/// The object's separate debug file: by build id, then through `.gnu_debuglink`. A candidate is
/// taken only when it belongs to this object (issue 39): its build id, when both have one,
/// equals the object's, and a debuglink candidate's CRC-32 equals the one the link records —
/// a stale debug file (the library rebuilt, its `.debug` not) would give wrong file:line.
fn debug_file(path: &str, build_id: &[u8], file: &object::File) -> Option<Arc<[u8]>> {
    // (candidate, CRC-32 it must have)
    let mut candidates: Vec<(PathBuf, Option<u32>)> = Vec::new();
    // the object's own build id (a module recorded without one is read from the file)
    let own_id = match file.build_id() {
        Ok(Some(id)) => id.to_vec(),
        _ => build_id.to_vec(),
    };
    if own_id.len() >= 2 {
        let h = hex(&own_id);
        candidates.push((
            PathBuf::from(format!(
                "{DEBUG_ROOT}/.build-id/{}/{}.debug",
                &h[..2],
                &h[2..]
            )),
            None,
        ));
    }
    if let Ok(Some((name, crc))) = file.gnu_debuglink() {
        let name = String::from_utf8_lossy(name).into_owned();
        let dir = Path::new(path).parent().unwrap_or(Path::new("/"));
        for c in [
            dir.join(&name),
            dir.join(".debug").join(&name),
            Path::new(DEBUG_ROOT)
                .join(dir.strip_prefix("/").unwrap_or(dir))
                .join(&name),
        ] {
            candidates.push((c, Some(crc)));
        }
    }
    candidates
        .iter()
        .filter(|(c, _)| c.as_path() != Path::new(path))
        .filter_map(|(c, crc)| Some((file_bytes(c)?, *crc)))
        .find(|(data, crc)| debug_file_matches(data, &own_id, *crc))
        .map(|(data, _)| data)
}

/// Whether `data` is the debug file of an object with build id `build_id` (empty: unknown)
/// whose `.gnu_debuglink` records `crc` (`None`: found by build id).
fn debug_file_matches(data: &[u8], build_id: &[u8], crc: Option<u32>) -> bool {
    let Ok(f) = object::File::parse(data) else {
        return false;
    };
    if let (false, Ok(Some(id))) = (build_id.is_empty(), f.build_id()) {
        if id != build_id {
            return false;
        }
    }
    crc.is_none_or(|c| crc32fast::hash(data) == c)
}

/// Whether addr2line reads section `id` (location lists, macros and name indexes are not: some
/// are among the largest, and a compressed one costs its inflation and its memory).
fn wanted(id: gimli::SectionId) -> bool {
    use gimli::SectionId as S;
    !matches!(
        id,
        S::DebugLoc
            | S::DebugLocLists
            | S::DebugMacinfo
            | S::DebugMacro
            | S::DebugPubNames
            | S::DebugPubTypes
            | S::DebugTypes
    )
}

/// The DWARF context of `file` (parsed from `data`): an uncompressed section is read where it
/// lies in `data`, a compressed one inflated once.
fn context(data: &Arc<[u8]>, file: &object::File) -> Option<Context<Reader>> {
    let endian = if file.is_little_endian() {
        RunTimeEndian::Little
    } else {
        RunTimeEndian::Big
    };
    let empty = || EndianArcSlice::new(Arc::from(&[][..]), endian);
    let load = |id: gimli::SectionId| -> Result<Reader, gimli::Error> {
        let Some(s) = file.section_by_name(id.name()).filter(|_| wanted(id)) else {
            return Ok(empty());
        };
        let in_place = s
            .compressed_file_range()
            .ok()
            .filter(|r| r.format == object::CompressionFormat::None)
            .and_then(|r| {
                let (at, len) = (
                    usize::try_from(r.offset).ok()?,
                    usize::try_from(r.compressed_size).ok()?,
                );
                (at.checked_add(len)? <= data.len()).then_some(at..at + len)
            });
        Ok(match in_place {
            Some(range) => EndianArcSlice::new(data.clone(), endian).range(range),
            None => s
                .uncompressed_data()
                .map(|d| EndianArcSlice::new(Arc::<[u8]>::from(&*d), endian))
                .unwrap_or_else(|_| empty()),
        })
    };
    let dwarf = gimli::Dwarf::load(load).ok()?;
    Context::from_dwarf(dwarf).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn marker_function_for_symbolizer_test() -> u64 {
        std::hint::black_box(marker_function_for_symbolizer_test as *const () as u64)
    }

    fn self_module(s: &mut Symbolizer) {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let exe_s = exe.to_str().unwrap();
        let mut lo = u64::MAX;
        let mut hi = 0;
        let mut first_off_zero = 0;
        for l in maps.lines().filter(|l| l.ends_with(exe_s)) {
            let mut it = l.split_whitespace();
            let range = it.next().unwrap();
            let off = u64::from_str_radix(it.nth(1).unwrap(), 16).unwrap();
            let (a, b) = range.split_once('-').unwrap();
            let (a, b) = (
                u64::from_str_radix(a, 16).unwrap(),
                u64::from_str_radix(b, 16).unwrap(),
            );
            if off == 0 && a < lo {
                first_off_zero = a;
            }
            lo = lo.min(a);
            hi = hi.max(b);
        }
        // PIE: the first mapping (offset 0) is the load bias.
        s.add_module(first_off_zero, lo, hi - lo, exe_s.as_bytes(), &[]);
    }

    #[test]
    fn symbolises_a_function_of_this_test_binary() {
        let mut s = Symbolizer::new();
        self_module(&mut s);
        let addr = marker_function_for_symbolizer_test() + 4 + 1;
        let lines = s.lines(addr);
        assert!(
            lines
                .iter()
                .any(|l| l.contains("marker_function_for_symbolizer_test")),
            "{lines:?}"
        );
        assert!(
            lines.iter().any(|l| l.contains("symbolize/src/lib.rs:")),
            "{lines:?}"
        );
        let text = s.stack_text(&[addr, addr]);
        assert_eq!(text.lines().count(), 2 * lines.len());
    }

    #[test]
    fn unknown_addresses_are_printed_raw() {
        let mut s = Symbolizer::new();
        assert_eq!(&*s.lines(0x1234), &["0x1234".to_owned()]);
        s.add_module(
            0x10000,
            0x10000,
            0x1000,
            b"/nonexistent/libx.so",
            b"\x01\x02",
        );
        assert_eq!(&*s.lines(0x10100), &["0x10100 in libx.so+0x100".to_owned()]);
    }

    /// Builds `lib.so` from `src` with DWARF, moves the DWARF to `lib.so.debug` and links it
    /// (`objcopy --add-gnu-debuglink`); `None` when cc or objcopy is missing.
    fn split_debug_lib(dir: &Path, src: &str) -> Option<PathBuf> {
        use std::process::Command;
        let c = dir.join("lib.c");
        std::fs::write(&c, src).unwrap();
        let so = dir.join("lib.so");
        let dbg = dir.join("lib.so.debug");
        let ok = |cmd: &mut Command| cmd.status().is_ok_and(|s| s.success());
        let built = ok(Command::new("cc")
            .args(["-g", "-O0", "-fPIC", "-shared", "-Wl,--build-id", "-o"])
            .arg(&so)
            .arg(&c))
            && ok(Command::new("objcopy")
                .arg("--only-keep-debug")
                .arg(&so)
                .arg(&dbg))
            && ok(Command::new("objcopy")
                .arg("--strip-debug")
                .arg(format!("--add-gnu-debuglink={}", dbg.display()))
                .arg(&so));
        built.then_some(so)
    }

    /// The lines of `func`'s first instructions in `so`, as a module mapped at 1 MiB.
    fn lines_of(so: &Path, func: &str) -> Vec<String> {
        let data = std::fs::read(so).unwrap();
        let f = object::File::parse(&*data).unwrap();
        let id = f.build_id().unwrap().unwrap_or_default().to_vec();
        let at = f
            .symbols()
            .find(|s| s.name() == Ok(func))
            .expect("symbol")
            .address();
        let mut s = Symbolizer::new();
        let base = 0x10_0000;
        s.add_module(base, base, 0x10_0000, so.to_str().unwrap().as_bytes(), &id);
        s.lines(base + at + 5).to_vec()
    }

    #[test]
    fn a_gnu_debuglink_file_is_used_only_when_its_crc_and_build_id_match() {
        let d = tempfile::tempdir().unwrap();
        let src = "int twice(int x)\n{\n    return 2 * x;\n}\n";
        let Some(so) = split_debug_lib(d.path(), src) else {
            eprintln!("skipped: cc or objcopy is missing");
            return;
        };
        let lines = lines_of(&so, "twice");
        assert!(
            lines
                .iter()
                .any(|l| l.contains("twice") && l.contains("lib.c:")),
            "the matching debug file gives file:line: {lines:?}"
        );
        // the source changed and the library was rebuilt elsewhere: its debug file, beside
        // a copy of this library (another path: loaded objects are cached by path), has other
        // lines, another build id and another CRC
        let other = tempfile::tempdir().unwrap();
        let moved = format!("\n\n\n\n\n\n/* moved */\n{src}");
        split_debug_lib(other.path(), &moved).unwrap();
        let stale = tempfile::tempdir().unwrap();
        std::fs::copy(&so, stale.path().join("lib.so")).unwrap();
        std::fs::copy(
            other.path().join("lib.so.debug"),
            stale.path().join("lib.so.debug"),
        )
        .unwrap();
        let lines = lines_of(&stale.path().join("lib.so"), "twice");
        assert!(
            lines.iter().all(|l| !l.contains("lib.c:")),
            "a stale debug file gives no file:line: {lines:?}"
        );
        assert!(
            lines.iter().any(|l| l.contains("twice")),
            "the symbol table still names the function: {lines:?}"
        );
    }
}
