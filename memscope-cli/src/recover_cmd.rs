//! `memscope recover <output-path>`: turns the spool a killed `memscope run` left behind into
//! the outputs the run would have written (dumps, captures, logs, analyses), from the stream
//! files and the run's configuration that `run` stored in the spool (`run.json`) at start.

use crate::session::RunInfo;
use memscope_collect::config::{RawOptions, RunConfig};
use memscope_collect::pipeline::INCOMPLETE_MARKER;
use memscope_collect::process::ProcessSummary;
use memscope_collect::Collector;
use memscope_stream::spool::{self, StreamFile};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Options of `memscope recover`.
#[derive(clap::Args, Debug)]
pub struct RecoverArgs {
    /// The run's output path (holding `.memscope_spool_<pid>/`), or a spool directory.
    #[arg(value_name = "OUTPUT_PATH")]
    pub path: PathBuf,
    /// No summary.
    #[arg(short, long)]
    pub quiet: bool,
}

fn spools(path: &Path) -> Result<Vec<PathBuf>, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.is_dir() {
        return Err(format!("{}: not a directory", path.display()));
    }
    if path.join(spool::RUN_INFO).is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut v: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.is_dir()
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(spool::SPOOL_PREFIX))
        })
        .collect();
    if v.is_empty() {
        // an output directory whose runs all ended (or were recovered already) keeps its index
        let done = path.join(memscope_dump::run_index::FILE_NAME).is_file();
        return Err(format!(
            "{}: {}no left-over spool ({}<pid>/) in it",
            path.display(),
            if done {
                "nothing to recover: its runs are complete or recovered already, "
            } else {
                "not a memscope spool, and "
            },
            spool::SPOOL_PREFIX
        ));
    }
    v.sort();
    Ok(v)
}

fn load_config(spool_dir: &Path) -> Result<(RunConfig, RunInfo), String> {
    let p = spool_dir.join(spool::RUN_INFO);
    let meta = std::fs::metadata(&p).map_err(|_| {
        format!(
            "{}: not a memscope spool (no {})",
            spool_dir.display(),
            spool::RUN_INFO
        )
    })?;
    if meta.len() > 16 << 20 {
        return Err(format!("{}: larger than 16 MiB", p.display()));
    }
    let text = std::fs::read(&p).map_err(|e| format!("{}: {e}", p.display()))?;
    let mut info: RunInfo =
        serde_json::from_slice(&text).map_err(|e| format!("{}: {e}", p.display()))?;
    info.config.adapter_paths = None;
    // The outputs of `memscope run` go next to its spool (`<output>/.memscope_spool_<pid>`),
    // wherever the directory is now; `memscope collect` follows a private spool elsewhere (the
    // Python package's), whose outputs go to the output path of its configuration.
    let in_output = spool_dir
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with(spool::SPOOL_PREFIX));
    if in_output || info.config.output_path.is_none() {
        let out = spool_dir
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        info.config.output_path = Some(out.display().to_string());
    }
    let cwd = std::env::current_dir().map_err(|e| format!("current directory: {e}"))?;
    let cfg = RawOptions::from_config_file(std::mem::take(&mut info.config))
        .validate(&cwd)
        .map_err(|e| format!("{}: {}", p.display(), e.0))?;
    Ok((cfg, info))
}

/// Processes whose outputs were complete before the recover: header, output directory and the
/// executables of all their images (a helper is known by all of them).
type Complete = Vec<(memscope_stream::spool::StreamHeader, PathBuf, Vec<String>)>;

/// What `prepare` found: pids complete already (skipped), with their headers and directories,
/// and one line per stream nothing could be read from.
struct Prepared {
    skip: HashSet<u32>,
    complete: Complete,
    unreadable: Vec<String>,
}

/// Takes the spool's collector lock, so neither a collector nor a second `memscope recover`
/// follows it while this one does. A probe checking the lock holds it shared for an instant:
/// retried before concluding.
fn lock_spool(spool_dir: &Path) -> Result<std::fs::File, String> {
    let mut last = String::new();
    for _ in 0..5 {
        match crate::run::hold_collector_lock(spool_dir) {
            Ok(f) => return Ok(f),
            Err(e) => last = e,
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    if last.starts_with("cannot lock") {
        return Err(format!(
            "{}: a collector (memscope run) or another memscope recover still follows this spool",
            spool_dir.display()
        ));
    }
    Err(last)
}

/// Checks that no process writes the spool any more; returns the pids whose outputs are
/// complete already, after setting incomplete outputs aside (into the spool's `replaced/`,
/// kept until the recover has succeeded) and removing stale captures.
fn prepare(spool_dir: &Path, cfg: &RunConfig) -> Result<Prepared, String> {
    let mut skip = HashSet::new();
    let mut complete = Complete::new();
    let mut unreadable = Vec::new();
    let mut image_exes: std::collections::BTreeMap<u32, Vec<String>> = Default::default();
    let rd = std::fs::read_dir(spool_dir).map_err(|e| format!("{}: {e}", spool_dir.display()))?;
    let mut streams = Vec::new();
    for e in rd.flatten() {
        let p = e.path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.ends_with(&format!(".{}", memscope_stream::capture::EXTENSION)) {
            // the killed collector's capture so far: the recover writes it anew from the
            // stream, but it may be all that can be read (a cut stream), so it is set aside
            set_aside(spool_dir, &p)?;
        } else if name.ends_with(".stream") {
            streams.push(p);
        }
    }
    streams.sort();
    if streams.is_empty() {
        // a stream removed or never written: say so, and leave the spool for a look
        unreadable.push(format!(
            "{}: holds no stream file: nothing to recover from (remove the spool by hand if that is expected)",
            spool_dir.display()
        ));
    }
    for p in streams {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let mut s = StreamFile::open(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        if !s.writer_gone() {
            return Err(format!(
                "{}: process {} is still running; run memscope recover after the job ends",
                p.display(),
                spool::pid_of_stream_name(name).unwrap_or(0)
            ));
        }
        let h = match s.header() {
            Ok(Some(h)) => h.clone(),
            Ok(None) => {
                unreadable.push(format!(
                    "{}: no readable stream header (empty, cut short or not a stream): nothing of it can be recovered",
                    p.display()
                ));
                continue;
            }
            Err(e) => {
                unreadable.push(format!("{e}: nothing of it can be recovered"));
                continue;
            }
        };
        if let Ok(n @ 1..) = s.partial_chunk_bytes() {
            unreadable.push(format!(
                "{}: cut short inside a chunk ({n} bytes past the last whole one were not read)",
                p.display()
            ));
        }
        image_exes.entry(h.pid).or_default().push(h.exe.clone());
        let ts = memscope_dump::layout::timestamp_name(h.start_ns);
        let dir = memscope_dump::layout::project_dir(&cfg.output_path, h.pid, &ts);
        if dir.join(INCOMPLETE_MARKER).exists() {
            set_aside(spool_dir, &dir)?;
        } else if dir.exists() && skip.insert(h.pid) {
            complete.push((h, dir, Vec::new()));
        }
    }
    for (h, _, exes) in &mut complete {
        *exes = image_exes.remove(&h.pid).unwrap_or_default();
    }
    Ok(Prepared {
        skip,
        complete,
        unreadable,
    })
}

/// Moves an incomplete output directory (or the killed collector's capture) into
/// `<spool>/replaced/`: the recover writes it anew, and what it held stays until the recover
/// has succeeded (nothing written is lost).
fn set_aside(spool_dir: &Path, dir: &Path) -> Result<(), String> {
    let aside = spool_dir.join("replaced");
    std::fs::create_dir_all(&aside)
        .map_err(|e| format!("cannot create {}: {e}", aside.display()))?;
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dest = (0..1000)
        .map(|k| match k {
            0 => aside.join(&name),
            k => aside.join(format!("{name}.{k}")),
        })
        .find(|p| !p.exists())
        .unwrap_or_else(|| aside.join(&name));
    std::fs::rename(dir, &dest).map_err(|e| {
        format!(
            "cannot set the incomplete {} aside into {}: {e}",
            dir.display(),
            dest.display()
        )
    })
}

/// Before the spool (and the incomplete outputs set aside in it) goes: each replaced
/// process's log is kept beside the new one as `<name>.before_recover.log` — what the run
/// said before it was cut short (a full disk, a kill) stays readable.
fn keep_old_logs(spool_dir: &Path, output: &Path) {
    let Ok(rd) = std::fs::read_dir(spool_dir.join("replaced")) else {
        return;
    };
    for old in rd.flatten().map(|e| e.path()) {
        let Some(name) = old.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        // `<dir>.<k>`: set aside by an earlier recover that did not finish (`set_aside`)
        let name = match name.rsplit_once('.') {
            Some((base, k)) if !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()) => base,
            _ => name,
        };
        // the logs go beside the directory this recover wrote, never into a new one
        if !output.join(name).is_dir() {
            continue;
        }
        let logs = output.join(name).join("msmemscope_logs");
        let Ok(files) = std::fs::read_dir(old.join("msmemscope_logs")) else {
            continue;
        };
        for f in files.flatten().map(|e| e.path()) {
            let stem = f.file_stem().and_then(|s| s.to_str()).unwrap_or("log");
            let kept = memscope_dump::layout::create_dir_0750(&logs).and_then(|_| {
                let (mut to, _) = memscope_dump::layout::create_new_0600(
                    &logs.join(format!("{stem}.before_recover.log")),
                )?;
                std::io::copy(&mut std::fs::File::open(&f)?, &mut to)
            });
            if let Err(e) = kept {
                eprintln!(
                    "memscope: recover: cannot keep the log {}: {e}",
                    f.display()
                );
                continue;
            }
            // the new log starts as a fresh run's would: it says what wrote it
            let note = format!(
                "this log was written by memscope recover from the spool of a run that was cut short; what that run logged is in {stem}.before_recover.log"
            );
            let _ = memscope_collect::logfile::LogFile::append_info(
                &logs.join(format!("{stem}.log")),
                &note,
            );
        }
    }
}

/// The lines that keep the spool: streams nothing could be read from, processes with
/// damaged chunks or outputs that could not be written.
fn problems(unreadable: Vec<String>, summaries: &[ProcessSummary]) -> Vec<String> {
    let mut v = unreadable;
    for p in summaries {
        if p.corrupt_chunks > 0 {
            v.push(format!(
                "pid {}: {} damaged stream chunk(s); their rest could not be read",
                p.pid, p.corrupt_chunks
            ));
        }
        if p.write_failures > 0 {
            v.push(format!(
                "pid {}: {} output(s) could not be written (said above)",
                p.pid, p.write_failures
            ));
        }
    }
    v
}

/// Runs `memscope recover`.
pub fn run(a: &RecoverArgs) -> ExitCode {
    let fail = |m: String| {
        // one line, whatever the path holds (a newline in a directory name)
        eprintln!(
            "memscope: recover: {}",
            memscope_core::sanitize::escape_controls(&m)
        );
        ExitCode::from(2)
    };
    let list = match spools(&a.path) {
        Ok(v) => v,
        Err(e) => return fail(e),
    };
    let mut failed = false;
    for spool_dir in list {
        let (cfg, info) = match load_config(&spool_dir) {
            Ok(c) => c,
            Err(e) => return fail(e),
        };
        let lock = match lock_spool(&spool_dir) {
            Ok(l) => l,
            Err(e) => return fail(e),
        };
        let Prepared {
            skip,
            complete,
            unreadable,
        } = match prepare(&spool_dir, &cfg) {
            Ok(s) => s,
            Err(e) => return fail(e),
        };
        let cfg_used = cfg.clone();
        let mut c = Collector::new(
            spool_dir.clone(),
            std::sync::Arc::new(cfg),
            info.visible_devices.clone(),
            crate::session::analysis_factory(),
            crate::builtin::REGISTRY,
        );
        c.skip_pids(skip.clone());
        let mut summaries = c.finish();
        let recovered = summaries.len();
        // launcher/wrapper helpers set aside, as `run` does (issue 23): the processes complete
        // before the kill too (their directories were written before they were known as
        // helpers), judged with the whole job
        summaries.extend(
            complete
                .iter()
                .map(|(h, d, exes)| crate::recover_index::complete_process(h, d, exes)),
        );
        let left_out = crate::helpers::set_aside(&mut summaries);
        let helpers_before: HashSet<u32> = summaries[recovered..]
            .iter()
            .filter(|p| p.helper)
            .map(|p| p.pid)
            .collect();
        // python_trace files into the .db dump, as `run` and `collect` do at their end
        crate::python_job::finish_python(&cfg_used, &summaries[..recovered]);
        // the run index the killed `memscope run` would have written (not for `memscope
        // collect`'s private spool: a plain python run has none)
        let mut index_written = true;
        // nothing read and nothing complete: an entry with no process would contradict
        // whatever the killed run left in the directory
        if let Some(pid) = spool_dir
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix(spool::SPOOL_PREFIX))
            .and_then(|p| p.parse::<u32>().ok())
            .filter(|_| !summaries.is_empty())
        {
            let killed = crate::recover_index::Killed {
                memscope_pid: pid,
                command: &info.command,
                start_ns: info.start_ns,
            };
            index_written = crate::recover_index::write(&cfg_used.output_path, &killed, &summaries);
        }
        let mut problems = problems(unreadable, &summaries[..recovered]);
        if !index_written {
            problems.push("the run index could not be written (said above)".into());
        }
        if !a.quiet && problems.is_empty() {
            eprintln!("memscope: recovered {}", spool_dir.display());
        }
        if !a.quiet {
            let kept: Vec<u32> = skip
                .into_iter()
                .filter(|p| !helpers_before.contains(p))
                .collect();
            if !kept.is_empty() {
                let mut v = kept;
                v.sort_unstable();
                eprintln!(
                    "memscope: outputs of pid(s) {v:?} were complete already; left as they are"
                );
            }
            if let Some(l) = crate::helpers::count_line(&left_out) {
                eprintln!("{l}");
            }
            let listed: Vec<_> = summaries[..recovered]
                .iter()
                .filter(|p| crate::summary::listed(p))
                .cloned()
                .collect();
            // the whole of every cut list, as `run` writes it
            crate::summary::full_if_cut(
                &cfg_used.output_path,
                &summaries[..recovered],
                &format!("memscope recover of {}", spool_dir.display()),
            );
            crate::summary::print_processes(&listed);
        }
        drop(lock);
        if !problems.is_empty() {
            // what could be read is written; the spool stays for a look or a later recover,
            // which redoes these directories (marked incomplete, so it sets them aside)
            for p in &summaries[..recovered] {
                let marker = p.project_dir.join(INCOMPLETE_MARKER);
                if p.project_dir.is_dir() && !marker.exists() {
                    let _ = memscope_dump::layout::create_new_0600(&marker);
                }
            }
            for l in &problems {
                eprintln!("memscope: recover: {l}");
            }
            let aside = spool_dir.join("replaced");
            eprintln!(
                "memscope: recover: {} {}; the spool is kept as it is{}",
                spool_dir.display(),
                if recovered == 0 {
                    "could not be recovered"
                } else {
                    "only partly recovered"
                },
                if aside.is_dir() {
                    format!(" (the outputs it replaced are in {})", aside.display())
                } else {
                    String::new()
                }
            );
            failed = true;
            continue;
        }
        keep_old_logs(&spool_dir, &cfg_used.output_path);
        if let Err(e) = std::fs::remove_dir_all(&spool_dir) {
            eprintln!("memscope: cannot remove spool {}: {e}", spool_dir.display());
        }
    }
    if failed {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    }
}
