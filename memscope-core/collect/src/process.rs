//! One traced process followed live (all images of one pid): its streams' time-ordered merge
//! feeding its [`Pipeline`]. Reads only as far ahead as it emits: the stream files are the
//! buffer, so memory does not grow with a backlog.

use crate::handoff::Batch;
use crate::pipeline::Pipeline;
pub use crate::pipeline::ProcessSummary;
use memscope_stream::capture::{ImageHeader, ImageInfo};
use memscope_stream::spool::{ProcessMerge, StreamFile};

/// Records emitted per process per collector round, so one busy process cannot hold up the
/// others or the collector's own duties (child status, flushes).
pub const ROUND_BUDGET: usize = 200_000;

/// A release that emits this many records (or its whole budget, if smaller) marks the process
/// behind: its next release reads on a thread of its own.
const SPLIT_AFTER: usize = 50_000;
/// Records per batch handed from the merge thread to the pipeline.
const SPLIT_BATCH: usize = 2048;
/// Full batches waiting for the pipeline at most.
const SPLIT_QUEUE: usize = 4;

/// State of one traced process.
pub struct ProcessState {
    merge: ProcessMerge,
    pipeline: Pipeline,
    failed_read: bool,
    /// The last release emitted a lot: read on a thread of its own next time.
    behind: bool,
    /// The log says so once.
    split_logged: bool,
}

impl ProcessState {
    /// A process with its first stream and its pipeline.
    pub fn new(first: StreamFile, pipeline: Pipeline) -> ProcessState {
        let mut p = ProcessState {
            merge: ProcessMerge::new(),
            pipeline,
            failed_read: false,
            behind: false,
            split_logged: false,
        };
        p.add_stream(first);
        p
    }

    /// Number of process images (exec'd programs) seen for this pid.
    pub fn images(&self) -> usize {
        self.merge.images().len()
    }

    /// Adds another image (after exec) of the same pid.
    pub fn add_stream(&mut self, mut s: StreamFile) {
        let image = self.merge.images().len();
        if let Ok(Some(h)) = s.header() {
            let h = h.clone();
            if image > 0 {
                self.pipeline.set_exe(h.exe.clone());
                self.pipeline.set_rank_env(&h.rank_env);
                self.pipeline
                    .log()
                    .info(&format!("new process image: {}", s.path().display()));
            }
            self.pipeline.set_image(
                image,
                ImageHeader {
                    pid: h.pid,
                    ppid: h.ppid,
                    start_ns: h.start_ns,
                    clock_offset: h.clock_offset,
                    exe: h.exe,
                },
            );
        }
        self.merge.add_image(s);
    }

    /// Reads what is new in every image. Returns whether anything was read.
    pub fn poll(&mut self) -> bool {
        match self.merge.poll() {
            Ok(p) => p,
            Err(e) => {
                self.read_failed(&e);
                false
            }
        }
    }

    /// Whether the process's latest image passed `exit()` (its probe set `FLAG_EXITED`): it
    /// may still be alive, waiting at exit for its collector (plain-python mode, issue 23).
    pub fn exited(&self) -> bool {
        self.merge
            .images()
            .last()
            .and_then(|s| s.flags().ok())
            .is_some_and(|f| f & memscope_wire::FLAG_EXITED != 0)
    }

    /// Whether every image's writer is gone (process exited, was killed, or exec'd away with no
    /// new image yet).
    pub fn writers_gone(&self) -> bool {
        self.merge.images().iter().all(StreamFile::writer_gone)
    }

    /// Types and emits pending records stamped at or before `watermark_ns`, at most `budget`
    /// of them. Returns how many were emitted. A process that is behind (its last release
    /// emitted `SPLIT_AFTER` records or its whole budget, or it is being finished) is read
    /// and merged on a thread of its own while this one types and emits
    /// (`release_split`): the same records in the same order, with the
    /// merge's work off the pipeline's thread.
    pub fn release(&mut self, watermark_ns: u64, budget: usize) -> usize {
        let n = if self.behind {
            let n = self.release_split(watermark_ns, budget);
            if !self.split_logged && n >= SPLIT_AFTER {
                self.split_logged = true;
                self.pipeline
                    .log()
                    .info("reading behind the job: streams merged on a second thread");
            }
            n
        } else {
            self.release_inline(watermark_ns, budget)
        };
        self.behind = n >= budget.min(SPLIT_AFTER);
        if n > 0 {
            self.pipeline.drain_warnings();
        }
        n
    }

    fn release_inline(&mut self, watermark_ns: u64, budget: usize) -> usize {
        let mut n = 0;
        while n < budget {
            let pipeline = &mut self.pipeline;
            let got = self.merge.next_with(watermark_ns, |image, slot| {
                if let Some(src) = slot {
                    pipeline.record(image, src.tid, &src.rec)
                }
            });
            match got {
                Ok(true) => n += 1,
                Ok(false) => break,
                Err(e) => {
                    self.read_failed(&e);
                    break;
                }
            }
        }
        n
    }

    /// [`ProcessState::release`] with the merge on a scoped thread handing batches of
    /// [`SPLIT_BATCH`] records over a bounded channel (at most [`SPLIT_QUEUE`] waiting, so
    /// memory stays flat); the emptied batches go back to be filled again.
    fn release_split(&mut self, watermark_ns: u64, budget: usize) -> usize {
        let merge = &mut self.merge;
        let pipeline = &mut self.pipeline;
        let (full_tx, full_rx) = std::sync::mpsc::sync_channel::<Batch>(SPLIT_QUEUE);
        let (empty_tx, empty_rx) = std::sync::mpsc::channel::<Batch>();
        let done = std::thread::scope(|s| {
            let reader = std::thread::Builder::new()
                .name("memscope-merge".into())
                .spawn_scoped(s, move || -> std::io::Result<()> {
                    let mut left = budget;
                    while left > 0 {
                        let mut batch = empty_rx
                            .try_recv()
                            .unwrap_or_else(|_| Batch::with_capacity(SPLIT_BATCH));
                        let mut more = true;
                        while batch.len() < SPLIT_BATCH.min(left) {
                            if !merge
                                .next_with(watermark_ns, |image, slot| batch.push(image, slot))?
                            {
                                more = false;
                                break;
                            }
                        }
                        left -= batch.len();
                        if !batch.is_empty() && full_tx.send(batch).is_err() {
                            break;
                        }
                        if !more {
                            break;
                        }
                    }
                    Ok(())
                });
            // no thread to be had (a limit): read inline instead
            let reader = reader.ok()?;
            let mut n = 0;
            for mut batch in full_rx {
                n += batch.len();
                batch.drain(|image, tid, rec| pipeline.record(image, tid, rec));
                let _ = empty_tx.send(batch);
            }
            Some((n, reader.join()))
        });
        let Some((n, read)) = done else {
            return self.release_inline(watermark_ns, budget);
        };
        match read {
            Ok(Ok(())) => {}
            Ok(Err(e)) => self.read_failed(&e),
            Err(p) => std::panic::resume_unwind(p),
        }
        n
    }

    fn read_failed(&mut self, e: &std::io::Error) {
        if !self.failed_read {
            self.pipeline.log().error(&format!("reading streams: {e}"));
            eprintln!("memscope: {e}");
            self.failed_read = true;
        }
    }

    /// The header of the process's first image.
    pub fn first_header(&self) -> Option<memscope_stream::spool::StreamHeader> {
        self.merge.images().first()?.known_header().cloned()
    }

    /// The process's pipeline.
    pub fn pipeline_mut(&mut self) -> &mut Pipeline {
        &mut self.pipeline
    }

    /// Periodic flush of the sinks.
    pub fn flush(&mut self) {
        self.pipeline.flush();
    }

    /// Ends the process: reads and emits everything left (the writers are gone or no longer
    /// waited for), lets typers and layers finish and returns the summary.
    pub fn finish(mut self) -> ProcessSummary {
        self.merge.set_final();
        // what is left is read at once: split unless it turns out small
        self.behind = true;
        loop {
            self.poll();
            if self.release(u64::MAX, usize::MAX) == 0 && (self.merge.drained() || self.failed_read)
            {
                break;
            }
        }
        let images = self
            .merge
            .images()
            .iter()
            .map(|s| ImageInfo {
                stream: s.path().display().to_string(),
                exe: s.known_header().map(|h| h.exe.clone()).unwrap_or_default(),
                start_ns: s.known_header().map_or(0, |h| h.start_ns),
                dropped: s.dropped().unwrap_or(0),
                flags: s.flags().unwrap_or(0),
                corrupt_chunks: s.corrupt_chunks(),
                exit_status: s.exit_status().ok().flatten(),
            })
            .collect();
        self.pipeline.finish(images)
    }
}
