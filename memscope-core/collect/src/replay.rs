//! Replay of kept captures (TEAM contract 3): the records of a capture go through the same
//! typing (and, for `memscope export`, the same bus) as in `memscope run`, so the events and
//! rows are the ones the run made.
//!
//! * [`find_captures`] — the captures under an input: a capture file, a process directory
//!   (`msmemscope_<pid>_<ts>_ascend/`), or a run's output directory.
//! * [`replay_events`] — typed [`Event`]s per process, in ID order, with the IDs the run gave
//!   them: every typed event (before `memscope run`'s collect/write filters, HOST rows
//!   included).
//! * [`replay_capture`] — the same for one capture, with a visitor that may stop the replay
//!   (`memscope report` and the viewer exports, through `memscope-cli/src/capture_input.rs`).
//! * [`feed`] — drives a [`Pipeline`] from a capture (used by `memscope export`).

use crate::adapter::TypeCtx;
use crate::config::{ConfigFile, LogLevel, RawOptions, RunConfig};
use crate::logfile::LogFile;
use crate::pipeline::{Pipeline, PipelineSetup};
use crate::plugin_typer::PluginTyper;
use crate::registry::Registry;
use memscope_core::bus::Bus;
use memscope_core::event::Event;
use memscope_dump::reader::ConsumerError;
use memscope_stream::capture::{CaptureError, CaptureInfo, CaptureReader, ImageInfo};
#[cfg(test)]
use memscope_wire::Record;
use std::path::{Path, PathBuf};

/// The captures under `input`, sorted: `input` itself if it is a file, else every
/// `*.mscap` file in it and in its `msmemscope_*` subdirectories.
///
/// # Errors
/// `input` does not exist, cannot be read, or holds no capture — one line naming it.
pub fn find_captures(input: &Path) -> Result<Vec<PathBuf>, String> {
    let meta = std::fs::metadata(input).map_err(|e| format!("{}: {e}", input.display()))?;
    if meta.is_file() {
        return Ok(vec![input.to_path_buf()]);
    }
    let is_capture = |p: &Path| {
        p.is_file()
            && p.extension().and_then(|e| e.to_str()) == Some(memscope_stream::capture::EXTENSION)
    };
    let mut found = Vec::new();
    let rd = std::fs::read_dir(input).map_err(|e| format!("{}: {e}", input.display()))?;
    for e in rd.flatten() {
        let p = e.path();
        if is_capture(&p) {
            found.push(p);
        } else if p.is_dir()
            && p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("msmemscope_"))
        {
            if let Ok(sub) = std::fs::read_dir(&p) {
                found.extend(sub.flatten().map(|e| e.path()).filter(|p| is_capture(p)));
            }
        }
    }
    if found.is_empty() {
        return Err(format!(
            "{}: no memscope capture (*.{}) in it or in its msmemscope_* directories",
            input.display(),
            memscope_stream::capture::EXTENSION
        ));
    }
    found.sort();
    Ok(found)
}

/// The run configuration a capture was made with (adapter libraries dropped: they are only
/// needed to launch a job), with `output_path` set to `out`.
///
/// # Errors
/// The stored configuration does not validate.
pub fn capture_config(info: &CaptureInfo, out: &Path) -> Result<RunConfig, String> {
    let mut file: ConfigFile = serde_json::from_value(info.config.clone())
        .map_err(|e| format!("stored configuration: {e}"))?;
    file.adapter_paths = None;
    file.output_path = Some(out.display().to_string());
    let cwd = std::env::current_dir().map_err(|e| format!("current directory: {e}"))?;
    RawOptions::from_config_file(file)
        .validate(&cwd)
        .map_err(|e| format!("stored configuration: {}", e.0))
}

/// Feeds every record of `r` to `p` in order; returns the images the trailer lists (none for
/// an incomplete capture).
///
/// # Errors
/// I/O failure or damage inside a complete capture.
pub fn feed(r: &mut CaptureReader, p: &mut Pipeline) -> Result<Vec<ImageInfo>, CaptureError> {
    let mut last_image = usize::MAX;
    while let Some(c) = r.next_record()? {
        if c.image != last_image {
            if let Some(h) = r.image_header(c.image) {
                if c.image > 0 {
                    p.set_exe(h.exe.clone());
                }
            }
            last_image = c.image;
        }
        p.record(c.image, c.tid, &c.rec);
    }
    Ok(r.end().map(|e| e.images.clone()).unwrap_or_default())
}

/// A process of a replayed capture.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayProcess {
    /// The capture it came from.
    pub capture: PathBuf,
    /// Its header (pid, exe, start, the run's configuration).
    pub info: CaptureInfo,
    /// Whether the capture was complete (its writer finished); an incomplete one is replayed
    /// up to its last whole block.
    pub complete: bool,
}

/// Calls `visit` with every typed event of every process under `input` (see
/// [`find_captures`]), process by process, in ID order, with the IDs `memscope run` gave
/// them. Nothing is written.
///
/// # Errors
/// No capture under `input`, or one that cannot be read — one line naming it.
#[allow(dead_code)] // replay API (TEAM contract 3); the commands use replay_capture
pub fn replay_events(
    input: &Path,
    registry: &Registry,
    visit: &mut dyn FnMut(&ReplayProcess, &Event),
) -> Result<Vec<ReplayProcess>, String> {
    let mut done = Vec::new();
    for path in find_captures(input)? {
        let p = replay_capture(&path, registry, &mut |p, ev| {
            visit(p, &ev);
            Ok(())
        })
        .map_err(|e| e.to_string())?;
        done.push(p);
    }
    Ok(done)
}

/// The header of the capture at `path` (pid, exe, configuration) and whether it is complete.
///
/// # Errors
/// The file cannot be opened or is not a capture — one line naming it.
pub fn capture_process(path: &Path) -> Result<ReplayProcess, String> {
    let r = CaptureReader::open(path).map_err(|e| e.to_string())?;
    Ok(ReplayProcess {
        capture: path.to_path_buf(),
        info: r.info().clone(),
        complete: r.end().is_some(),
    })
}

/// Calls `visit` with every typed event of the capture at `path` (one process), in ID
/// order, as [`replay_events`] does; an error from `visit` stops the replay and comes back
/// as it was.
///
/// # Errors
/// The capture cannot be read (one line naming it), or `visit`'s error.
pub fn replay_capture(
    path: &Path,
    registry: &Registry,
    visit: &mut dyn FnMut(&ReplayProcess, Event) -> Result<(), ConsumerError>,
) -> Result<ReplayProcess, ConsumerError> {
    let mut r = CaptureReader::open(path)?;
    let proc_ = ReplayProcess {
        capture: path.to_path_buf(),
        info: r.info().clone(),
        complete: r.end().is_some(),
    };
    let mut typers = registry.typers();
    typers.push((None, Box::new(PluginTyper::default())));
    let typers = crate::typers::Typers::new(typers);
    let info = r.info();
    let events = std::rc::Rc::new(std::cell::RefCell::new(Vec::<Event>::new()));
    let sink = events.clone();
    let mut p = Pipeline::new(PipelineSetup {
        pid: info.pid,
        project_dir: PathBuf::new(),
        exe: info.exe.clone(),
        typers,
        ctx: TypeCtx::new(info.pid, info.visible_devices.clone()),
        bus: Bus::new(Some(info.pid), Vec::new()),
        sink_stats: Default::default(),
        log: LogFile::new(Path::new("/dev/null"), LogLevel::Error),
        config_json: String::new(),
        capture: None,
        host_rows_off: false,
        aggregate: false,
        host_fast: None,
        account_rows: true,
        py_depth: capture_config(info, Path::new("."))
            .ok()
            .and_then(|c| c.call_stack.python),
        live: Default::default(),
    });
    p.set_dry();
    p.observe(Box::new(move |ev| sink.borrow_mut().push(ev.clone())));
    while let Some(c) = r.next_record()? {
        p.record(c.image, c.tid, &c.rec);
        for ev in events.borrow_mut().drain(..) {
            visit(&proc_, ev)?;
        }
    }
    p.finish_typers();
    for ev in events.borrow_mut().drain(..) {
        visit(&proc_, ev)?;
    }
    Ok(proc_)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::{AdapterDescriptor, Typer};
    use memscope_core::event::{Device, EventKind, EventType};
    use memscope_stream::capture::{CaptureEnd, CaptureWriter, ImageHeader};

    /// Types `Malloc`/`Free` as bare HOST rows: the replay, not HOST's typer, is under
    /// test (the collector names no adapter crate).
    struct HeapTyper;

    impl Typer for HeapTyper {
        fn type_record(
            &mut self,
            ctx: &mut TypeCtx,
            tid: u32,
            rec: &Record<Box<[u8]>>,
            out: &mut Vec<Event>,
        ) -> bool {
            let (kind, ts, addr) = match *rec {
                Record::Malloc { ts, addr, .. } => (EventKind::Malloc, ts, addr),
                Record::Free { ts, addr } => (EventKind::Free, ts, addr),
                _ => return false,
            };
            let mut e = Event::new(EventType::Host, ts, ctx.pid, tid);
            e.kind = kind;
            e.device = Device::Cpu;
            e.ptr = Some(addr);
            out.push(e);
            true
        }
    }

    static HEAP: AdapterDescriptor = AdapterDescriptor {
        name: "heap",
        source: crate::adapter::SourceId(6),
        summary: "test heap",
        new_typer: Some(|| Box::new(HeapTyper)),
        ..AdapterDescriptor::BASE
    };

    static REGISTRY: Registry = Registry {
        descriptors: &[&HEAP],
    };

    #[test]
    fn replay_events_types_a_capture_with_the_ids_of_the_run() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("c.mscap");
        let info = CaptureInfo {
            pid: 5,
            config: serde_json::to_value(RunConfig::default().to_config_file()).unwrap(),
            ..CaptureInfo::default()
        };
        let mut w =
            CaptureWriter::new(std::fs::File::create(&path).unwrap(), path.clone(), &info).unwrap();
        w.set_image(0, ImageHeader::default());
        for i in 0..100u64 {
            let rec: Record<Box<[u8]>> = if i % 2 == 0 {
                Record::Malloc {
                    ts: 10 + i,
                    addr: 0x1000 + i * 16,
                    size: 32,
                    stack: 0,
                }
            } else {
                Record::Free {
                    ts: 10 + i,
                    addr: 0x1000 + (i - 1) * 16,
                }
            };
            w.record(0, 9, &rec).unwrap();
        }
        w.finish(CaptureEnd::default()).unwrap();
        let mut seen = Vec::new();
        let procs = replay_events(d.path(), &REGISTRY, &mut |p, ev| {
            assert_eq!(p.info.pid, 5);
            seen.push((ev.id, ev.kind, ev.event_type));
        })
        .unwrap();
        assert_eq!(procs.len(), 1);
        assert!(procs[0].complete);
        assert_eq!(seen.len(), 100);
        assert!(seen.iter().enumerate().all(|(i, e)| e.0 == i as u64
            && e.2 == EventType::Host
            && e.1
                == if i % 2 == 0 {
                    EventKind::Malloc
                } else {
                    EventKind::Free
                }));
    }
}
