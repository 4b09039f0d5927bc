//! `memscope export --to csv|db`: the dump files `memscope run` writes, made again from kept
//! captures through the same pipeline (same typers, layers and sink, the run's configuration
//! from the capture header), with HOST rows written.

use super::ExportArgs;
use anyhow::Context;
use memscope_collect::config::Format;
use memscope_collect::replay::{capture_config, feed, find_captures};
use memscope_collect::PipelineFactory;
use memscope_stream::capture::CaptureReader;
use memscope_stream::spool::StreamHeader;

/// Writes the dumps of every capture under `a.inputs` into `a.output`.
///
/// # Errors
/// An input holds no capture or cannot be read, or the output cannot be created.
pub fn export(a: &ExportArgs, format: Format) -> anyhow::Result<()> {
    let existed = a.output.exists();
    let done = export_into(a, format);
    if done.is_err() && !existed {
        // a failed export leaves no empty output directory behind (only an empty one goes)
        let _ = std::fs::remove_dir(&a.output);
    }
    done
}

fn export_into(a: &ExportArgs, format: Format) -> anyhow::Result<()> {
    let mut captures = Vec::new();
    let choices = crate::run_select::choices(a.run.as_deref(), a.inputs.len())?;
    for i in &crate::run_select::narrow(&a.inputs, &choices)? {
        captures.extend(find_captures(i).map_err(anyhow::Error::msg)?);
    }
    if a.output.exists() && !a.output.is_dir() {
        anyhow::bail!("-o {}: not a directory", a.output.display());
    }
    memscope_dump::layout::create_dir_0750(&a.output)
        .with_context(|| format!("-o {}", a.output.display()))?;
    let out =
        std::fs::canonicalize(&a.output).with_context(|| format!("-o {}", a.output.display()))?;
    // two inputs holding the same capture (a run directory and its process directory): once
    let mut seen = std::collections::HashSet::new();
    captures.retain(|c| seen.insert(std::fs::canonicalize(c).unwrap_or_else(|_| c.clone())));
    // a process directory already in the output is never added to: a second dump beside the
    // first would be read with it, every figure counted twice
    for path in &captures {
        let info = CaptureReader::open(path)
            .map_err(anyhow::Error::msg)?
            .info()
            .clone();
        let ts = memscope_dump::layout::timestamp_name(info.start_ns);
        let dir = memscope_dump::layout::project_dir(&out, info.pid, &ts);
        if dir.exists() {
            anyhow::bail!(
                "-o {}: already holds the dumps of pid {} ({}); export into another folder",
                a.output.display(),
                info.pid,
                dir.display()
            );
        }
    }
    let analyses = crate::session::analysis_factory();
    let mut summaries = Vec::new();
    for path in captures {
        let mut r = CaptureReader::open(&path).map_err(anyhow::Error::msg)?;
        let info = r.info().clone();
        let mut cfg =
            capture_config(&info, &out).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        cfg.format = format;
        cfg.host_rows = true;
        let factory = PipelineFactory {
            cfg: &cfg,
            visible_devices: &info.visible_devices,
            analyses: &analyses,
            registry: &crate::builtin::REGISTRY,
            // a capture: every record in it is typed
            selected_typers_only: false,
            account_events: true,
        };
        let h = StreamHeader {
            pid: info.pid,
            ppid: info.ppid,
            start_ns: info.start_ns,
            clock_offset: 0,
            exe: info.exe.clone(),
            rank_env: info.rank_env.clone(),
        };
        let mut p = factory.build(&h, None);
        let images = feed(&mut r, &mut p).map_err(anyhow::Error::msg)?;
        if let Some(t) = &r.truncated {
            eprintln!(
                "memscope: {}: incomplete capture ({t}); exported what it holds",
                path.display()
            );
        }
        summaries.push(p.finish(images));
    }
    if !a.quiet {
        for s in &summaries {
            let total: u64 = s.counts.values().sum();
            eprintln!(
                "memscope: pid {}: {total} rows written under {}",
                s.pid,
                s.project_dir.display()
            );
            for (f, n) in &s.files {
                eprintln!("    {} ({n} rows)", f.display());
            }
        }
    }
    Ok(())
}
