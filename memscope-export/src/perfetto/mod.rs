//! Perfetto traces (protobuf TrackEvent, `.pftrace`) for ui.perfetto.dev and Perfetto's trace
//! processor: every process of the input in one trace.
//!
//! Per process (one process track; its pid is the synthetic pid of [`crate::input`], so ranks
//! and nodes never collide; name `rank R pid P`, labels with the real pid, rank source, node and
//! origin), in this order of tracks:
//! * counters in bytes per device × pool: `NPU0 PTA allocated` (the rows' `used`, or the live
//!   bytes when a pool's rows carry none) and `NPU0 PTA reserved` (`total`), one sample per
//!   change;
//! * with `--sample` (issue 25): `host RSS (sampled)` and `host untracked` (RSS − the hooks'
//!   live HOST/HOST_MMAP/PYMEM blocks), `NPU0 used (sampled)` and `NPU0 untracked` (used −
//!   live HAL blocks), one value per sample;
//! * account-only blocks by the Python line that allocated them (`lines.rs`): `host PYMEM @
//!   train.py(12): step` in live bytes, one track per line of the user's code (the first 32 of
//!   a process; later ones and library-only blocks share `… @ other lines`), when the rows
//!   have Python stacks;
//! * `msTX marks`: instants for marks, SYSTEM rows, snapshots and OOM (`OOM on NPU0`, with the
//!   row's figures as arguments); `msTX ranges`: msTX ranges as slices (a second lane opens for
//!   a range that starts while one is open);
//! * `ops (tid T)`: ATen and ATB operators (`*_START` … `*_END`) as nested slices per thread;
//! * `NPU0 stream S`: kernel launches as slices (a launch row has no end: each lasts until the
//!   next launch on its stream, msMemScope's kernel window; the last one until the process's
//!   last row); `NPU0 kernels`: ATB kernels (`KERNEL_START` … `KERNEL_END`);
//! * flows: a kernel launched inside an operator gets an arrow from a `launch <kernel>`
//!   instant inside the operator's slice to the kernel's slice.
//!
//! Each process is its own packet sequence (timestamps never decrease within it; slice names
//! interned per sequence). Packets are written as they are made: memory holds open slices,
//! counters and interned names, never the trace.

mod lines;
mod process;
pub mod proto;

use std::io::Write;
use std::path::Path;

use crate::error::ExportError;
use crate::input::ProcessInput;
use crate::out_file::{OutFile, Sink};
use crate::progress::Progress;
use crate::replay::{replay, Flow, Item};
use crate::Summary;
use proto::{field, frame_packet, Msg};

/// Packets and track descriptors of one trace file.
pub struct Writer<W: Write> {
    w: W,
    buf: Vec<u8>,
    next_uuid: u64,
    /// Packets written.
    pub packets: u64,
}

/// What kind of child track to declare.
pub enum TrackKind<'a> {
    /// A slice/instant track.
    Plain,
    /// A counter track in bytes.
    Bytes,
    /// The process track itself: (synthetic pid, process name, labels).
    Process(u32, &'a str, &'a [String]),
}

/// A point of a trace to come back to.
#[derive(Clone, Copy, Debug)]
pub struct Checkpoint {
    pos: u64,
    next_uuid: u64,
    packets: u64,
}

impl<W: Sink> Writer<W> {
    /// The current point of the trace.
    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            pos: self.w.pos() + self.buf.len() as u64,
            next_uuid: self.next_uuid,
            packets: self.packets,
        }
    }

    /// Cuts the trace back to `cp`.
    ///
    /// # Errors
    /// The sink's error.
    pub fn rewind(&mut self, cp: Checkpoint) -> std::io::Result<()> {
        self.w.write_all(&self.buf)?;
        self.buf.clear();
        self.w.truncate_to(cp.pos)?;
        self.next_uuid = cp.next_uuid;
        self.packets = cp.packets;
        Ok(())
    }
}

impl<W: Write> Writer<W> {
    /// A writer into `w`.
    pub fn new(w: W) -> Writer<W> {
        Writer {
            w,
            buf: Vec::with_capacity(1 << 16),
            next_uuid: 1,
            packets: 0,
        }
    }

    /// Writes one packet.
    ///
    /// # Errors
    /// The sink's error.
    pub fn packet(&mut self, p: &Msg) -> std::io::Result<()> {
        frame_packet(&mut self.buf, p);
        self.packets += 1;
        if self.buf.len() >= 1 << 16 {
            self.w.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// Declares a track (its descriptor packet on sequence `seq`) and returns its uuid.
    ///
    /// # Errors
    /// The sink's error.
    pub fn track(
        &mut self,
        seq: u32,
        flags: u64,
        parent: Option<u64>,
        name: &str,
        kind: TrackKind<'_>,
        rank: i64,
    ) -> std::io::Result<u64> {
        let uuid = self.next_uuid;
        self.next_uuid += 1;
        let mut p = Msg::default();
        p.uint(field::SEQUENCE_ID, u64::from(seq));
        if flags != 0 {
            p.uint(field::SEQUENCE_FLAGS, flags);
        }
        p.nested(field::TRACK_DESCRIPTOR, |t| {
            t.uint(field::UUID, uuid);
            if let Some(parent) = parent {
                t.uint(field::PARENT_UUID, parent);
            }
            match kind {
                TrackKind::Process(pid, pname, labels) => {
                    t.nested(field::PROCESS, |pd| {
                        pd.int(field::PID, i64::from(pid));
                        pd.string(field::PROCESS_NAME, pname);
                        for l in labels {
                            pd.string(field::PROCESS_LABELS, l);
                        }
                    });
                    t.uint(field::CHILD_ORDERING, proto::CHILD_ORDERING_EXPLICIT);
                }
                TrackKind::Bytes => {
                    t.string(field::TD_NAME, name);
                    t.nested(field::COUNTER, |c| {
                        c.uint(field::UNIT, proto::UNIT_SIZE_BYTES);
                    });
                }
                TrackKind::Plain => {
                    t.string(field::TD_NAME, name);
                }
            }
            t.int(field::SIBLING_ORDER_RANK, rank);
        });
        self.packet(&p)?;
        Ok(uuid)
    }

    /// Flushes and returns the sink.
    ///
    /// # Errors
    /// The sink's error.
    pub fn finish(mut self) -> std::io::Result<W> {
        self.w.write_all(&self.buf)?;
        self.buf.clear();
        self.w.flush()?;
        Ok(self.w)
    }
}

/// Writes the events of `p` into `w` as its own sequence. Returns the events read.
///
/// # Errors
/// Reading an input or writing failed (`out` names the output).
pub fn write_process<W: Sink>(
    w: &mut Writer<W>,
    p: &ProcessInput,
    out: &Path,
    progress: &mut dyn Progress,
) -> Result<u64, ExportError> {
    let io = |e: std::io::Error| ExportError::write(out, e);
    progress.stage(&format!("perfetto: {}", p.label()));
    let start = w.checkpoint();
    let mut state = process::ProcessTrace::begin(w, p).map_err(io)?;
    let stats = replay(p, None, progress, &mut |item| {
        match item {
            Item::Restart => {
                w.rewind(start).map_err(io)?;
                state = process::ProcessTrace::begin(w, p).map_err(io)?;
            }
            Item::Event(ev) => state.on_event(w, &ev).map_err(io)?,
        }
        Ok(Flow::Continue)
    })?;
    state.end(w).map_err(io)?;
    Ok(stats.events)
}

/// `memscope export --to perfetto`: one trace of every process of the input.
///
/// # Errors
/// An unreadable input, an existing or unwritable output.
pub fn export(
    procs: &[ProcessInput],
    out: &Path,
    progress: &mut dyn Progress,
) -> Result<Summary, ExportError> {
    let file = OutFile::create(out)?;
    progress.plan(procs.iter().map(|p| p.bytes_for(None)).sum());
    let mut w = Writer::new(file);
    let mut summary = Summary::default();
    for p in procs {
        summary.events += write_process(&mut w, p, out, progress)?;
        summary.processes += 1;
    }
    let file = w.finish().map_err(|e| ExportError::write(out, e))?;
    summary.bytes = file.commit()?;
    summary.files.push(out.to_owned());
    Ok(summary)
}
