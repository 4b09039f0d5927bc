//! Where a block was allocated, in the user's terms (issue 23): the **first frame of the user's
//! own code** in the block's stacks, used by every "where" answer — the console summaries, the
//! leak reports, the HTML report's sites and the exports' names.
//!
//! **Rule.** Frames are read innermost first. Each is the user's code (*own*), a known library
//! (*library*: the standard library, site-packages, libc, the C++ runtime, CANN and torch
//! libraries, …) or the machinery around the program (*tool*: the interpreter's own C code,
//! the allocator entry points, memscope's own frames). The answer is the first own frame of the
//! Python stack, else of the C stack, else the first library frame (Python, then C), else the
//! innermost frame; Python frames win over C frames when both were recorded. Its *caller* is
//! the next own frame below it (so a helper such as `alloc()` is told apart by who called it).
//! [`Site::rule`] says which rule gave the answer.
//!
//! **The lists** ([`DEFAULT_LIBRARY`], [`DEFAULT_TOOL`]) are substrings of a frame's text
//! (`file(line): function` for Python, `function at file:line` or `function in module` for
//! C); one that starts with `^` must start the frame. Overrides, read once from the environment by
//! [`Attribution::global`]: `MEMSCOPE_LIBRARY_FRAMES=a,b` adds substrings whose frames count as
//! library frames; `MEMSCOPE_OWN_FRAMES=a,b` names substrings whose frames are always the user's
//! code (they win over both lists; `*` makes every frame the user's, i.e. the innermost frame
//! answers).
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::sync::OnceLock;

/// Which stack a frame comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Lang {
    /// `Call Stack(Python)`.
    Python,
    /// `Call Stack(C)`.
    C,
}

/// What a frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FrameClass {
    /// The user's own code.
    Own,
    /// A known library (standard library, site-packages, system and framework libraries).
    Library,
    /// The interpreter's internals, allocator entry points, memscope itself.
    Tool,
}

/// The rule that chose a site.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rule {
    /// What the chosen frame is.
    pub class: FrameClass,
    /// The stack it came from.
    pub lang: Lang,
}

impl Rule {
    /// Short words for messages: `first frame in your code (Python stack)`.
    pub fn describe(self) -> &'static str {
        match (self.class, self.lang) {
            (FrameClass::Own, Lang::Python) => "first frame in your code, Python stack",
            (FrameClass::Own, Lang::C) => "first frame in your code, C stack",
            (FrameClass::Library, Lang::Python) => {
                "no frame of your code: first library frame, Python stack"
            }
            (FrameClass::Library, Lang::C) => "no frame of your code: first library frame, C stack",
            (FrameClass::Tool, Lang::Python) => {
                "only interpreter or memscope frames: innermost frame, Python stack"
            }
            (FrameClass::Tool, Lang::C) => {
                "only interpreter, allocator or memscope frames: innermost frame, C stack"
            }
        }
    }
}

/// Where a block was allocated.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Site {
    /// The chosen frame, as the stack spells it.
    pub frame: String,
    /// The next frame of the user's code below it, if any.
    pub caller: Option<String>,
    /// How it was chosen.
    pub rule: Rule,
}

impl Site {
    /// `frame ← caller` (the caller's file left out when it is the frame's).
    pub fn label(&self) -> String {
        match &self.caller {
            Some(c) => format!("{} ← {}", self.frame, short_caller(&self.frame, c)),
            None => self.frame.clone(),
        }
    }
}

/// `train.py(474): main` for a Python caller in the frame's own file; the caller unchanged
/// otherwise.
fn short_caller<'a>(frame: &str, caller: &'a str) -> &'a str {
    let file = |f: &str| f.rsplit_once('(').map(|(a, _)| a.to_owned());
    match (file(frame), file(caller)) {
        (Some(a), Some(b)) if a == b && !a.is_empty() => {
            let base_len = a.rsplit_once('/').map_or(0, |(d, _)| d.len() + 1);
            &caller[base_len..]
        }
        _ => caller,
    }
}

/// Library frames by default: substrings of a frame's text.
pub const DEFAULT_LIBRARY: &[&str] = &[
    // Python: the standard library and installed packages
    "/site-packages/",
    "/dist-packages/",
    "/lib/python3",
    "/lib64/python3",
    "/lib/pypy3",
    // C: system libraries, by module name (frames without debug information) …
    " in libc.so",
    " in libc-",
    " in ld-linux",
    " in ld-2.",
    " in libm.so",
    " in libpthread",
    " in libdl.",
    " in librt.",
    " in libstdc++",
    " in libgcc_s",
    " in libffi",
    " in libz.so",
    " in libgomp",
    " in libcrypto",
    " in libssl",
    ".cpython-",
    // … and by glibc's source directories (frames with debug information)
    " at ./elf/",
    " at ./malloc/",
    " at ./nptl/",
    " at ./stdlib/",
    " at ./libio/",
    " at ./stdio-common/",
    " at ./string/",
    " at ./csu/",
    " at ./dlfcn/",
    " at ./posix/",
    " at ./misc/",
    " at ./intl/",
    " at ./locale/",
    " at ./iconv/",
    " at ./wcsmbs/",
    " at ./time/",
    " at ./io/",
    " at ./signal/",
    " at ./resolv/",
    " at ./inet/",
    " at ./nss/",
    " at ./pwd/",
    " at ./grp/",
    " at ./dirent/",
    " at ./ctype/",
    " at ./setjmp/",
    " at ./debug/",
    " at ./rt/",
    " at ./socket/",
    " at ./sunrpc/",
    " at ./login/",
    " at ../sysdeps/",
    " at ./csu/../",
    "^_start",
    "^__GI_",
    "^_dl_",
    "^__libc_",
    // frameworks: torch and CANN (and memscope's CANN stand-ins)
    " in libtorch",
    " in libc10",
    " in libascend",
    " in libacl",
    " in libhccl",
    " in libruntime",
    " in libprofapi",
    " in libms_tools_ext",
    " in libmstx",
    " in libatb",
    " in libopapi",
    " in libnnopbase",
    " in libge_",
    "/sim-npu/csrc/",
];

/// Interpreter, allocator and memscope frames by default: substrings of a frame's text.
pub const DEFAULT_TOOL: &[&str] = &[
    // Python: memscope's package, its bootstrap and torch hooks; the import machinery
    "/memscope/__init__.py(",
    "/memscope/_",
    "/memscope/describe.py(",
    "/memscope/record_function.py(",
    "/memscope/take_snapshot.py(",
    "/memscope/analyzer/",
    "/memscope/watcher.py(",
    "/memscope/framework",
    "/memscope/sanitizer.py(",
    "/pytest_memscope/",
    "/pyboot/sitecustomize.py(",
    "memscope_torch_hooks.py(",
    "<frozen ",
    // C: the CPython interpreter (its sources and its binary)
    " at Objects/",
    " at Python/",
    " at Modules/",
    " at Include/",
    " at Parser/",
    " at Programs/",
    " at ./Objects/",
    " at ./Python/",
    " at ./Modules/",
    " at ./Include/",
    "/Python-3.",
    " in python3",
    " in libpython",
    "^_Py",
    "^Py",
    // C: allocator entry points (and `malloc`, `calloc`, … whatever their spelling) and
    // memscope's probe
    "operator new",
    " in libmemscope",
    "memscope_",
];

/// Allocator functions that are tool frames whatever their spelling (`malloc`, `malloc+0x5 in
/// libc.so.6`), separated by spaces.
const ALLOCATORS: &str =
    "malloc calloc realloc reallocarray free posix_memalign aligned_alloc memalign valloc pvalloc";

/// The classification lists.
#[derive(Clone, Debug)]
pub struct Attribution {
    library: Vec<String>,
    tool: Vec<String>,
    own: Vec<String>,
}

impl Default for Attribution {
    fn default() -> Self {
        Attribution::with(&[], &[])
    }
}

fn list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

impl Attribution {
    /// The default lists, plus `library` substrings, with `own` substrings that always count
    /// as the user's code (`*`: every frame).
    pub fn with(own: &[&str], library: &[&str]) -> Attribution {
        let mut lib: Vec<String> = DEFAULT_LIBRARY.iter().map(|s| (*s).to_owned()).collect();
        lib.extend(library.iter().map(|s| (*s).to_owned()));
        Attribution {
            library: lib,
            tool: DEFAULT_TOOL.iter().map(|s| (*s).to_owned()).collect(),
            own: own.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    /// The lists with the environment's overrides (`MEMSCOPE_OWN_FRAMES`,
    /// `MEMSCOPE_LIBRARY_FRAMES`).
    pub fn from_env() -> Attribution {
        let own = list(&std::env::var("MEMSCOPE_OWN_FRAMES").unwrap_or_default());
        let lib = list(&std::env::var("MEMSCOPE_LIBRARY_FRAMES").unwrap_or_default());
        let own: Vec<&str> = own.iter().map(String::as_str).collect();
        let lib: Vec<&str> = lib.iter().map(String::as_str).collect();
        Attribution::with(&own, &lib)
    }

    /// The process-wide lists ([`Attribution::from_env`], read once).
    pub fn global() -> &'static Attribution {
        static A: OnceLock<Attribution> = OnceLock::new();
        A.get_or_init(Attribution::from_env)
    }

    /// What frame `f` (one line of a stack) is.
    pub fn classify(&self, f: &str) -> FrameClass {
        if self.own.iter().any(|p| p == "*" || matches(f, p)) {
            return FrameClass::Own;
        }
        if self.tool.iter().any(|p| matches(f, p)) || is_allocator(f) {
            return FrameClass::Tool;
        }
        if self.library.iter().any(|p| matches(f, p)) {
            return FrameClass::Library;
        }
        FrameClass::Own
    }

    /// The site of a block whose rows carry these stacks (`NA`, empty or `None`: not
    /// recorded); `None` when neither has a frame.
    pub fn site(&self, py: Option<&str>, c: Option<&str>) -> Option<Site> {
        let py = frames(py);
        let c = frames(c);
        for class in [FrameClass::Own, FrameClass::Library, FrameClass::Tool] {
            for (lang, stack) in [(Lang::Python, &py), (Lang::C, &c)] {
                let classes: Vec<FrameClass> = stack.iter().map(|f| self.classify(f)).collect();
                let at = if class == FrameClass::Tool {
                    (!stack.is_empty()).then_some(0)
                } else {
                    classes.iter().position(|k| *k == class)
                };
                let Some(i) = at else { continue };
                let caller = (i + 1..stack.len())
                    .find(|&j| classes[j] == FrameClass::Own)
                    .map(|j| stable(stack[j]));
                return Some(Site {
                    frame: stable(stack[i]),
                    caller,
                    rule: Rule { class, lang },
                });
            }
        }
        None
    }
}

/// Whether a Python file is memscope's own (its packages, its bootstrap, its torch hooks): the
/// python_trace leaves its frames out.
pub fn memscope_python_file(file: &str) -> bool {
    const PACKAGE: &[&str] = &["/memscope/", "/msmemscope/"];
    const OWN: &[&str] = &["/pyboot/sitecustomize.py", "memscope_torch_hooks.py"];
    // the packages' modules by name: a checkout named memscope holds the user's scripts too
    const MODULES: &[&str] = &[
        "__init__.py",
        "__main__.py",
        "describe.py",
        "record_function.py",
        "take_snapshot.py",
        "watcher.py",
        "framework.py",
        "framework_hooks.py",
        "sanitizer.py",
    ];
    OWN.iter().any(|o| file.ends_with(o))
        || PACKAGE.iter().any(|p| {
            file.rsplit_once(p).is_some_and(|(_, rest)| {
                rest.starts_with('_') || rest.starts_with("analyzer/") || MODULES.contains(&rest)
            })
        })
}

/// A frame's text with memscope's per-run bootstrap folder left out
/// (`…/.memscope_spool_<pid>/pyboot/sitecustomize.py(43): …` →
/// `<memscope>/pyboot/sitecustomize.py(43): …`), so two runs name it alike (`memscope diff`).
fn stable(frame: &str) -> String {
    match frame.find("/.memscope_spool_").zip(frame.find("/pyboot/")) {
        Some((_, b)) => format!("<memscope>{}", &frame[b..]),
        None => frame.to_owned(),
    }
}

/// Distinct stack pairs whose site a thread keeps ([`site_of`]); the cache is emptied when full.
const CACHE_MAX: usize = 65_536;

thread_local! {
    static CACHE: std::cell::RefCell<HashMap<String, HashMap<String, Option<Site>>>> =
        std::cell::RefCell::new(HashMap::new());
    static CACHED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// [`Attribution::site`] with the process-wide lists, remembered per distinct pair of stacks
/// (analyses see the same stacks on many rows).
pub fn site_of(py: Option<&str>, c: Option<&str>) -> Option<Site> {
    let (pk, ck) = (py.unwrap_or(""), c.unwrap_or(""));
    if let Some(hit) = CACHE.with(|m| m.borrow().get(pk).and_then(|x| x.get(ck)).cloned()) {
        return hit;
    }
    let site = Attribution::global().site(py, c);
    CACHE.with(|m| {
        let mut m = m.borrow_mut();
        if CACHED.get() >= CACHE_MAX {
            m.clear();
            CACHED.set(0);
        }
        m.entry(pk.to_owned())
            .or_default()
            .insert(ck.to_owned(), site.clone());
        CACHED.set(CACHED.get() + 1);
    });
    site
}

/// The frames of a stack text, innermost first (`NA` and blank lines are none).
pub fn frames(stack: Option<&str>) -> Vec<&str> {
    stack
        .unwrap_or("")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && *l != "NA")
        .collect()
}

/// Whether frame `f` matches list entry `p` (a substring; with a leading `^`, a prefix).
fn matches(f: &str, p: &str) -> bool {
    match p.strip_prefix('^') {
        Some(prefix) => f.starts_with(prefix),
        None => f.contains(p),
    }
}

/// A C frame of an allocator function: `malloc`, `malloc in libc.so.6`, `malloc+0x1f in …`.
fn is_allocator(f: &str) -> bool {
    let name = f
        .split([' ', '+'])
        .next()
        .unwrap_or("")
        .trim_start_matches("__libc_");
    ALLOCATORS.split(' ').any(|a| a == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEMO_PY: &str = "/home/u/memscope/examples/sim-npu/train.py(285): alloc\n/home/u/memscope/examples/sim-npu/train.py(474): main\n/home/u/memscope/examples/sim-npu/train.py(509): <module>\n";

    #[test]
    fn a_python_helper_in_the_users_code_is_the_site_and_its_caller_tells_calls_apart() {
        let a = Attribution::default();
        let s = a.site(Some(DEMO_PY), None).unwrap();
        assert_eq!(
            s.frame,
            "/home/u/memscope/examples/sim-npu/train.py(285): alloc"
        );
        assert_eq!(
            s.caller.as_deref(),
            Some("/home/u/memscope/examples/sim-npu/train.py(474): main")
        );
        assert_eq!(
            s.label(),
            "/home/u/memscope/examples/sim-npu/train.py(285): alloc ← train.py(474): main"
        );
        assert_eq!(s.rule.describe(), "first frame in your code, Python stack");
    }

    #[test]
    fn memscope_s_bootstrap_frame_is_named_alike_in_every_run_and_the_pytest_plugin_is_a_tool() {
        let a = Attribution::default();
        for pid in [11, 12] {
            let py = format!(
                "/w/out/.memscope_spool_{pid}/pyboot/sitecustomize.py(43): _memscope_hooks\n"
            );
            let s = a.site(Some(&py), None).unwrap();
            assert_eq!(
                s.frame,
                "<memscope>/pyboot/sitecustomize.py(43): _memscope_hooks"
            );
        }
        assert!(memscope_python_file(
            "/v/site-packages/memscope/sanitizer.py"
        ));
        assert!(memscope_python_file(
            "/v/site-packages/msmemscope/__init__.py"
        ));
        assert!(
            !memscope_python_file("/home/u/memscope/leaky.py"),
            "a script in a checkout"
        );
        // every module the package ships is known (a new one must be added to the list)
        let pkg = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../python/memscope");
        for e in std::fs::read_dir(&pkg).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.ends_with(".py") {
                let f = format!("/v/site-packages/memscope/{name}");
                assert!(memscope_python_file(&f), "{name} is not in MODULES");
            }
        }
        let py = "/src/python/pytest_memscope/__init__.py(200): pytest_runtest_call\n";
        assert_eq!(a.classify(py.trim_end()), FrameClass::Tool);
    }

    #[test]
    fn python_frames_win_over_cpython_c_frames() {
        let c = "_PyObject_Malloc at /tmp/python-build.1/Python-3.11.7/Objects/obmalloc.c:1998\nbytearray___init__ at Objects/bytearrayobject.c:821\ntype_call at Objects/typeobject.c:1134\nmain in python3.11\n";
        let py = "/srv/job/tiny.py(3): keep\n/srv/job/tiny.py(9): <module>\n";
        let a = Attribution::default();
        let s = a.site(Some(py), Some(c)).unwrap();
        assert_eq!(s.frame, "/srv/job/tiny.py(3): keep");
        assert_eq!(s.rule.lang, Lang::Python);
        // C only: no frame of the user's code; the interpreter's innermost frame, said so
        let s = a.site(Some("NA"), Some(c)).unwrap();
        assert_eq!(s.rule.class, FrameClass::Tool);
    }

    #[test]
    fn library_interpreter_and_memscope_frames_are_skipped() {
        let a = Attribution::default();
        let py = "/usr/lib/python3.11/json/encoder.py(200): encode\n/venv/lib/python3.11/site-packages/memscope/_session.py(39): start\n/root/.memscope_spool_9/pyboot/sitecustomize.py(39): <module>\n/srv/app/run.py(12): go\n";
        let s = a.site(Some(py), None).unwrap();
        assert_eq!(s.frame, "/srv/app/run.py(12): go");
        let c = "malloc+0x1f in libc.so.6\nregions_register_impl at /r/examples/sim-npu/csrc/mstx_frontend.c:346 (inlined)\n0x7fea1bbfdf7a in libffi.so.8+0x6f7a\nwork at /srv/app/native.c:40\nmain at /srv/app/native.c:60\n";
        let s = a.site(None, Some(c)).unwrap();
        assert_eq!(s.frame, "work at /srv/app/native.c:40");
        assert_eq!(s.caller.as_deref(), Some("main at /srv/app/native.c:60"));
        assert_eq!(s.rule.describe(), "first frame in your code, C stack");
        // only library frames: the first library frame, said so
        let s = a
            .site(
                None,
                Some("malloc in libc.so.6\n0x1234 in libffi.so.8+0x34\n"),
            )
            .unwrap();
        assert_eq!(s.frame, "0x1234 in libffi.so.8+0x34");
        assert_eq!(s.rule.class, FrameClass::Library);
        assert!(a.site(Some("NA"), Some("")).is_none());
    }

    #[test]
    fn the_lists_are_overridable() {
        let py =
            "/venv/lib/python3.11/site-packages/mylib/pool.py(7): grab\n/srv/app/run.py(12): go\n";
        let s = Attribution::with(&["site-packages/mylib/"], &[])
            .site(Some(py), None)
            .unwrap();
        assert_eq!(
            s.frame,
            "/venv/lib/python3.11/site-packages/mylib/pool.py(7): grab"
        );
        let s = Attribution::with(&[], &["/srv/app/"])
            .site(Some(py), None)
            .unwrap();
        assert_eq!(s.rule.class, FrameClass::Library);
        let s = Attribution::with(&["*"], &[])
            .site(Some(py), Some("malloc in libc.so.6\n"))
            .unwrap();
        assert_eq!(
            s.frame,
            "/venv/lib/python3.11/site-packages/mylib/pool.py(7): grab"
        );
    }
}
