//! The periodic flush and the end of a process's pipeline: typers and layers finish, the
//! capture is closed and moved into the output directory, the report goes to the log, and the
//! summary is returned.

use super::*;

impl Pipeline {
    /// The number of the newest flush request handled since the last call, if any: everything
    /// emitted before it has gone to the sinks, which the caller flushes before answering.
    pub fn take_barrier(&mut self) -> Option<u32> {
        let (seen, answered) = &mut self.barrier;
        (*seen > *answered).then(|| {
            *answered = *seen;
            *seen
        })
    }

    /// A flush for a reader of the files (a barrier, `stop()`): as [`Pipeline::flush`], and
    /// rows parked in a staging file go where a reader looks ([`memscope_core::bus::Layer::flush_for_readers`]).
    pub fn flush_for_readers(&mut self) {
        if self.failed.is_none() {
            if let Err(e) = self.bus.flush_for_readers() {
                self.log.error(&e.to_string());
                self.failed = Some(e.to_string());
            }
        }
        self.flush();
    }

    /// Periodic flush of the sinks and the capture's open block.
    pub fn flush(&mut self) {
        self.python.flush();
        self.torch.flush();
        if self.failed.is_none() {
            if let Err(e) = self.bus.flush() {
                self.log.error(&e.to_string());
                self.failed = Some(e.to_string());
            }
        }
        if let Some(c) = &mut self.capture {
            if let Some(w) = &mut c.writer {
                if let Err(e) = w.close_block() {
                    self.capture_failed(e);
                }
            }
        }
        self.drain_warnings();
    }

    /// Ends the process: lets typers and layers finish, closes the capture (its trailer lists
    /// `images`) and moves it into the output directory, writes the report to the log and
    /// returns the summary.
    pub fn finish(mut self, images: Vec<ImageInfo>) -> ProcessSummary {
        self.finish_typers();
        self.torch.flush();
        for line in self.python.finish(&self.ctx, &self.summary.project_dir) {
            self.log.info(&line);
        }
        self.summary.visible_devices = self.ctx.visible_devices.clone();
        self.summary.exit_status = images.last().and_then(|i| i.exit_status);
        self.summary.image_exes = images.iter().map(|i| i.exe.clone()).collect();
        for img in &images {
            self.summary.dropped += img.dropped;
            if img.flags & memscope_wire::FLAG_HOST_UNAVAILABLE != 0 {
                self.log.warn("host allocator tracing was unavailable in this process (static binary or a replaced malloc)");
            }
            if img.flags & memscope_wire::FLAG_EXITED == 0 {
                self.log.info(&format!(
                    "{}: the process did not end through exit() (killed, _exit, exec or still running); everything it committed was read",
                    img.stream
                ));
            }
            self.summary.corrupt_chunks += img.corrupt_chunks;
            if img.corrupt_chunks > 0 {
                self.log.warn(&format!(
                    "{}: {} corrupt chunk(s) skipped",
                    img.stream, img.corrupt_chunks
                ));
            }
        }
        if self.untyped > 0 {
            self.log.debug(&format!(
                "{} records of unselected or unknown sources ignored",
                self.untyped
            ));
        }
        let mut side_report = match &self.host_fast {
            Some(f) => f.report(Some(self.summary.pid)),
            None => Vec::new(),
        };
        let py_stacks = self.pystacks.on();
        side_report.extend(self.accounts.report(Some(self.summary.pid), py_stacks));
        side_report.extend(self.sampled.report(self.summary.pid));
        for (ty, n) in self.accounts.unknown_frees() {
            self.log.debug(&format!(
                "{}: {n} free(s) of blocks allocated before the adapter started",
                ty.as_str()
            ));
        }
        for (i, n) in self.typed.iter().enumerate() {
            if *n > 0 {
                self.summary.typed.insert(EventKind::ALL[i], *n);
            }
        }
        match self.bus.finish() {
            Ok(mut report) => {
                side_report.append(&mut report);
                self.summary.report = side_report;
            }
            Err(e) => {
                self.summary.write_failures += 1;
                self.log.error(&e.to_string());
                eprintln!("memscope: pid {}: {e}", self.summary.pid);
            }
        }
        if self.failed.is_some() {
            // the process's outputs stopped (its directory could not be made, a layer failed):
            // said when it happened; counted, so the run keeps its spool for `memscope recover`
            self.summary.write_failures += 1;
        }
        self.drain_warnings();
        if let Ok(s) = self.sink_stats.lock() {
            self.summary.counts = s.rows.clone();
            self.summary.device_less = s.device_less;
            self.summary.files = s.files.clone();
        }
        self.finish_capture(images);
        if self.summary.dropped > 0 {
            self.log.warn(&format!(
                "the probe dropped {} event(s)",
                self.summary.dropped
            ));
        }
        for sec in &self.summary.report {
            let lines: Vec<String> = std::iter::once(sec.title.clone())
                .chain(sec.all_lines().iter().map(|l| format!("  {l}")))
                .collect();
            self.log.info_lines(lines.iter().map(String::as_str));
        }
        // an output cut short keeps the marker: `memscope recover` redoes the process
        if !self.dry && self.summary.write_failures == 0 {
            let _ = std::fs::remove_file(self.summary.project_dir.join(INCOMPLETE_MARKER));
        }
        self.summary
    }

    fn finish_capture(&mut self, images: Vec<ImageInfo>) {
        let Some(c) = self.capture.take() else {
            return;
        };
        let Some(w) = c.writer else {
            return;
        };
        let tmp = w.path().to_path_buf();
        let records = w.records();
        let res = w.finish(CaptureEnd {
            images,
            ..CaptureEnd::default()
        });
        let stats = match res {
            Ok(s) => s,
            Err(e) => {
                let line = format!(
                    "cannot write {}: {e}{}; the capture is incomplete",
                    tmp.display(),
                    memscope_dump::sink::limit_name(&e)
                );
                eprintln!("memscope: pid {}: {line}", self.summary.pid);
                self.log.warn(&line);
                self.summary.write_failures += 1;
                CaptureStats {
                    records,
                    ..CaptureStats::default()
                }
            }
        };
        // A process that recorded no event (a launcher, a shell helper) gets no directory
        // (issue 23), unless it wrote something there already (a Python trace).
        if self.next_id == 0 && (records == 0 || !self.summary.project_dir.is_dir()) {
            let _ = std::fs::remove_file(&tmp);
            return;
        }
        if self.next_id == 0 {
            if let Err(e) = self.materialize() {
                eprintln!("memscope: pid {}: {e}", self.summary.pid);
                self.summary.write_failures += 1;
                return;
            }
        }
        let dest = unused_name(&c.final_path);
        match std::fs::rename(&tmp, &dest) {
            Ok(()) => {
                self.log.info(&format!(
                    "capture: {} ({} records)",
                    dest.display(),
                    records
                ));
                self.summary.capture = Some((dest, stats));
            }
            Err(e) => {
                let line = format!(
                    "cannot move the capture {} to {}: {e}",
                    tmp.display(),
                    dest.display()
                );
                eprintln!("memscope: pid {}: {line}", self.summary.pid);
                self.log.warn(&line);
                self.summary.write_failures += 1;
            }
        }
    }
}

/// `path`, or `stem_<k>.ext` if `path` exists.
fn unused_name(path: &std::path::Path) -> PathBuf {
    if !path.exists() {
        return path.to_path_buf();
    }
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("file");
    let ext = path.extension().and_then(|s| s.to_str()).unwrap_or("");
    (1..10_000)
        .map(|k| path.with_file_name(format!("{stem}_{k}.{ext}")))
        .find(|p| !p.exists())
        .unwrap_or_else(|| path.to_path_buf())
}

/// Answers flush request `n` of process `pid` (`memscope_py_barrier`): `<spool>/barrier.<pid>.done`
/// holds `n`, replaced whole (written aside, then renamed) so a reader never sees part of it.
pub(crate) fn answer_barrier(spool: &std::path::Path, pid: u32, n: u32) {
    let done = spool.join(format!("barrier.{pid}.done"));
    let part = spool.join(format!("barrier.{pid}.done.part"));
    if std::fs::write(&part, n.to_string()).is_ok() {
        let _ = std::fs::rename(&part, &done);
    }
}
