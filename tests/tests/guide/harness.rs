//! The guide's harness: every fenced block of a chapter is either run (```` ```console ````:
//! lines starting `$ ` are commands, the lines after them the output they must print, matched
//! as trycmd matches its snapshots — `...` on a line of its own for any lines, `[..]` for any
//! text within a line, `[SANDBOX]` for the chapter's directory), written into the chapter's
//! directory before the commands after it run (```` ```python,file=leaky.py ````), or marked
//! as not run (```` ```sh,norun ````). Anything else is an error, so a command cannot slip into
//! the guide unchecked. A block marked `needs=torch` runs with a Python that has torch
//! (`MEMSCOPE_TORCH_PYTHON`), and is skipped, saying so, where there is none.
//!
//! Each command runs with `bash -c` in the chapter's sandbox directory (one per chapter, blocks
//! in order), stdout and stderr together, and must exit 0 (a chapter that shows an exit code
//! writes `; echo "exit code $?"`). The sandbox reaches the repository's `examples/` and
//! `schemas/` as the checkout's root does; `PATH` has the built `memscope` first and a
//! `python3` that imports the source tree's `memscope` package (`PYTHONPATH`), as the guide's
//! "Getting started" sets them up.

use memscope_tests::{memscope_bin, profile_dir, python3, repo_root, sim_npu_dir};
use std::path::{Path, PathBuf};
use std::process::Command;

/// One command of a console block and the output it must print.
#[derive(Debug)]
pub struct Cmd {
    /// 1-based line of the `$ ` in the chapter.
    pub line: usize,
    pub command: String,
    pub expected: String,
}

/// A fenced block of a chapter.
#[derive(Debug)]
pub enum Block {
    Console {
        line: usize,
        needs_torch: bool,
        cmds: Vec<Cmd>,
    },
    File {
        name: String,
        body: String,
    },
    NoRun,
}

/// Splits a chapter into its fenced blocks; an unmarked block is an error naming its line.
pub fn parse(chapter: &str, text: &str) -> Result<Vec<Block>, String> {
    let mut blocks = Vec::new();
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
    while let Some((start, line)) = lines.next() {
        let Some(info) = line.trim_start().strip_prefix("```") else {
            continue;
        };
        let fence = "```".to_owned() + &"`".repeat(info.chars().take_while(|c| *c == '`').count());
        let info = info.trim_start_matches('`');
        let mut body = Vec::new();
        let mut closed = false;
        for (n, l) in lines.by_ref() {
            if l.trim() == fence {
                closed = true;
                break;
            }
            body.push((n, l));
        }
        if !closed {
            return Err(format!("{chapter}:{start}: the block is never closed"));
        }
        let tokens: Vec<&str> = info.split([',', ' ']).filter(|t| !t.is_empty()).collect();
        let lang = tokens.first().copied().unwrap_or("");
        let file = tokens.iter().find_map(|t| t.strip_prefix("file="));
        if tokens.contains(&"norun") {
            blocks.push(Block::NoRun);
        } else if let Some(name) = file {
            let mut text: String = body.iter().map(|(_, l)| format!("{l}\n")).collect();
            if text.is_empty() {
                text.push('\n');
            }
            blocks.push(Block::File {
                name: name.to_owned(),
                body: text,
            });
        } else if lang == "console" {
            blocks.push(Block::Console {
                line: start,
                needs_torch: tokens.contains(&"needs=torch"),
                cmds: console(chapter, &body)?,
            });
        } else {
            return Err(format!(
                "{chapter}:{start}: a ```{info} block is neither run (```console), written \
                 (```LANG,file=NAME) nor marked ```LANG,norun"
            ));
        }
    }
    Ok(blocks)
}

fn console(chapter: &str, body: &[(usize, &str)]) -> Result<Vec<Cmd>, String> {
    let mut cmds: Vec<Cmd> = Vec::new();
    let mut i = 0;
    while i < body.len() {
        let (n, l) = body[i];
        if let Some(c) = l.strip_prefix("$ ") {
            let mut command = c.to_owned();
            while command.ends_with('\\') && i + 1 < body.len() {
                i += 1;
                command.push('\n');
                command.push_str(body[i].1);
            }
            cmds.push(Cmd {
                line: n,
                command,
                expected: String::new(),
            });
        } else if let Some(cmd) = cmds.last_mut() {
            cmd.expected.push_str(l);
            cmd.expected.push('\n');
        } else {
            return Err(format!(
                "{chapter}:{n}: a console block starts with output, not with a `$ ` command"
            ));
        }
        i += 1;
    }
    if cmds.is_empty() {
        return Err(format!("{chapter}: an empty console block"));
    }
    Ok(cmds)
}

/// What a chapter's run did.
#[derive(Debug, Default)]
pub struct Tally {
    pub blocks_run: usize,
    pub commands: usize,
    pub files: usize,
    pub norun: usize,
    pub skipped: usize,
    pub failures: Vec<String>,
}

/// A directory with `python3` (and `python`) running `python`, for the front of `PATH`.
fn python_bin(python: &Path) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().expect("tempdir");
    for name in ["python3", "python"] {
        let p = d.path().join(name);
        std::fs::write(
            &p,
            format!("#!/bin/sh\nexec '{}' \"$@\"\n", python.display()),
        )
        .expect("write python wrapper");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    d
}

/// A Python with torch: `MEMSCOPE_TORCH_PYTHON`, else `python3` when it imports torch.
fn torch_python() -> Option<PathBuf> {
    let cand = std::env::var_os("MEMSCOPE_TORCH_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(python3);
    Command::new(&cand)
        .args(["-c", "import torch"])
        .output()
        .is_ok_and(|o| o.status.success())
        .then_some(cand)
}

/// The chapter's directory and the environment of its commands.
pub struct Sandbox {
    pub dir: tempfile::TempDir,
    tmp: tempfile::TempDir,
    bin: tempfile::TempDir,
    torch_bin: Option<tempfile::TempDir>,
}

impl Sandbox {
    /// A fresh directory with `examples/` and `schemas/` of the repository in it.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        for d in ["examples", "schemas"] {
            std::os::unix::fs::symlink(repo_root().join(d), dir.path().join(d)).expect("symlink");
        }
        // The real interpreter, not a version manager's shim (whose helper processes would be
        // traced too); a symlink keeps it one process.
        let bin = tempfile::tempdir().expect("tempdir");
        for name in ["python3", "python"] {
            std::os::unix::fs::symlink(python3(), bin.path().join(name)).expect("symlink");
        }
        Sandbox {
            dir,
            tmp: tempfile::tempdir().expect("tempdir"),
            bin,
            torch_bin: torch_python().map(|p| python_bin(&p)),
        }
    }

    fn command(&self, line: &str, torch: bool) -> Command {
        let bin = match (torch, &self.torch_bin) {
            (true, Some(t)) => t.path(),
            _ => self.bin.path(),
        };
        let path = format!(
            "{}:{}:{}",
            bin.display(),
            profile_dir().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut cmd = Command::new("timeout");
        cmd.args(["-k", "5", "240", "bash", "-c"])
            .arg(format!("exec 2>&1\n{line}"))
            .current_dir(self.dir.path());
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy();
            if k.starts_with("MEMSCOPE_") || k == "LD_PRELOAD" || k == "MSTX_INJECTION_PATH" {
                cmd.env_remove(&*k);
            }
        }
        cmd.env("PATH", path)
            .env("PYTHONPATH", repo_root().join("python"))
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("MEMSCOPE_CLI", memscope_bin())
            .env("SIM_NPU_DIR", sim_npu_dir())
            .env("TMPDIR", self.tmp.path());
        cmd
    }

    /// Runs the chapter's blocks in order.
    pub fn run(&self, chapter: &str, blocks: &[Block]) -> Tally {
        let mut t = Tally::default();
        let mut redactions = snapbox::Redactions::new();
        redactions
            .insert("[SANDBOX]", self.dir.path().to_path_buf())
            .expect("redaction");
        let assert = snapbox::Assert::new()
            .normalize_paths(false)
            .redact_with(redactions);
        for b in blocks {
            match b {
                Block::NoRun => t.norun += 1,
                Block::File { name, body, .. } => {
                    let p = self.dir.path().join(name);
                    if let Some(parent) = p.parent() {
                        std::fs::create_dir_all(parent).expect("mkdir");
                    }
                    std::fs::write(&p, body).expect("write the block's file");
                    t.files += 1;
                }
                Block::Console {
                    line,
                    needs_torch,
                    cmds,
                } => {
                    if *needs_torch && self.torch_bin.is_none() {
                        eprintln!(
                            "SKIP {chapter}:{line}: needs torch (set MEMSCOPE_TORCH_PYTHON to a \
                             python that imports it; .ci/run does)"
                        );
                        t.skipped += 1;
                        continue;
                    }
                    t.blocks_run += 1;
                    for c in cmds {
                        t.commands += 1;
                        if let Some(f) = self.check(&assert, chapter, c, *needs_torch) {
                            t.failures.push(f);
                        }
                    }
                }
            }
        }
        t
    }

    fn check(
        &self,
        assert: &snapbox::Assert,
        chapter: &str,
        c: &Cmd,
        torch: bool,
    ) -> Option<String> {
        let out = self.command(&c.command, torch).output().expect("run bash");
        let actual = String::from_utf8_lossy(&out.stdout).into_owned();
        let here = format!("{chapter}:{}: `{}`", c.line, c.command);
        if !out.status.success() {
            return Some(format!(
                "{here} exited with {:?} (a command must exit 0; show a code with \
                 `; echo \"exit code $?\"`):\n{actual}",
                out.status
            ));
        }
        assert
            .try_eq(
                Some(&here),
                snapbox::Data::text(actual),
                snapbox::Data::text(c.expected.clone()),
            )
            .err()
            .map(|e| format!("{here}: the output differs from the guide's:\n{e}"))
    }
}

/// Parses and runs one chapter (a path under `docs/guide/src`, or `README.md` of the
/// repository); prints what it ran.
pub fn run_chapter(rel: &str) -> Tally {
    let path = if rel == "README.md" {
        repo_root().join(rel)
    } else {
        guide_src().join(rel)
    };
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let blocks = parse(rel, &text).unwrap_or_else(|e| panic!("{e}"));
    let t = Sandbox::new().run(rel, &blocks);
    eprintln!(
        "guide: {rel}: ran {} block(s) ({} command(s)), wrote {} file(s), {} block(s) marked \
         norun, {} skipped",
        t.blocks_run, t.commands, t.files, t.norun, t.skipped
    );
    t
}

/// `docs/guide/src`.
pub fn guide_src() -> PathBuf {
    repo_root().join("docs/guide/src")
}

/// The chapters `SUMMARY.md` links, in its order.
pub fn summary_chapters() -> Vec<String> {
    let s = std::fs::read_to_string(guide_src().join("SUMMARY.md")).expect("read SUMMARY.md");
    s.lines()
        .filter_map(|l| {
            let start = l.find("](")? + 2;
            let end = start + l[start..].find(')')?;
            Some(l[start..end].to_owned())
        })
        .filter(|p| p.ends_with(".md"))
        .collect()
}
