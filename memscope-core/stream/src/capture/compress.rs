//! Compression and writing of a capture's closed blocks on a thread of their own, so the
//! collector's thread goes on reading and typing records meanwhile (zstd is about a tenth of
//! the collector's work at millions of records a second, and once the job has exited the
//! collector's catching up is what the user waits for). Blocks are written in the order they
//! were closed; at most one waits while another is compressed, and the raw buffers go back to
//! the writer for its next blocks.

use super::{BlockIndex, BLOCK_MAGIC, ZSTD_LEVEL};
use std::fs::File;
use std::io::Write;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

/// One closed block.
pub(super) struct Job {
    /// The block's columns, uncompressed.
    pub raw: Vec<u8>,
    /// Its records.
    pub records: u32,
    /// Its first and last time stamps.
    pub ts: (u64, u64),
}

/// What the thread wrote.
pub(super) struct Written {
    /// The blocks, in file order.
    pub index: Vec<BlockIndex>,
    /// The file offset after the last block.
    pub offset: u64,
}

/// The thread and its channels.
pub(super) struct Background {
    jobs: Option<SyncSender<Job>>,
    free: Receiver<Vec<u8>>,
    /// Raw buffers handed out so far (at most [`BUFFERS`]).
    buffers: usize,
    thread: Option<JoinHandle<std::io::Result<Written>>>,
}

/// Raw block buffers in use at once: one being filled, one queued, one being compressed.
const BUFFERS: usize = 3;

impl Background {
    /// Starts the thread, writing blocks into `file` from `offset` on.
    pub(super) fn start(file: File, offset: u64) -> std::io::Result<Background> {
        let (jobs, rx) = sync_channel::<Job>(1);
        let (give, free) = sync_channel::<Vec<u8>>(BUFFERS);
        let mut zstd = zstd::bulk::Compressor::new(ZSTD_LEVEL)?;
        // a damaged block then fails to decompress instead of giving other records
        zstd.include_checksum(true)?;
        let thread = std::thread::Builder::new()
            .name("memscope-capture".into())
            .spawn(move || {
                let (mut file, mut offset) = (file, offset);
                let mut index = Vec::new();
                let mut comp = Vec::new();
                for job in rx {
                    comp.clear();
                    comp.reserve(zstd::zstd_safe::compress_bound(job.raw.len()));
                    zstd.compress_to_buffer(&job.raw, &mut comp)?;
                    let mut head = [0u8; super::BLOCK_HEADER];
                    head[..4].copy_from_slice(&BLOCK_MAGIC);
                    head[4..8].copy_from_slice(&(comp.len() as u32).to_le_bytes());
                    head[8..12].copy_from_slice(&(job.raw.len() as u32).to_le_bytes());
                    head[12..16].copy_from_slice(&job.records.to_le_bytes());
                    head[16..24].copy_from_slice(&job.ts.0.to_le_bytes());
                    head[24..32].copy_from_slice(&job.ts.1.to_le_bytes());
                    file.write_all(&head)?;
                    file.write_all(&comp)?;
                    index.push(BlockIndex {
                        offset,
                        records: job.records,
                        first_ts: job.ts.0,
                        last_ts: job.ts.1,
                    });
                    offset += (head.len() + comp.len()) as u64;
                    let _ = give.try_send(job.raw);
                }
                Ok(Written { index, offset })
            })?;
        Ok(Background {
            jobs: Some(jobs),
            free,
            buffers: 0,
            thread: Some(thread),
        })
    }

    /// An empty raw buffer for the next block (a returned one, or a new one while fewer than
    /// [`BUFFERS`] exist).
    pub(super) fn buffer(&mut self) -> Vec<u8> {
        if let Ok(mut b) = self.free.try_recv() {
            b.clear();
            return b;
        }
        if self.buffers < BUFFERS {
            self.buffers += 1;
            return Vec::new();
        }
        match self.free.recv() {
            Ok(mut b) => {
                b.clear();
                b
            }
            Err(_) => Vec::new(),
        }
    }

    /// Queues a closed block (waits while one is already queued).
    ///
    /// # Errors
    /// The thread stopped (a write failed: [`Background::finish`] says why).
    pub(super) fn send(&mut self, job: Job) -> std::io::Result<()> {
        match &self.jobs {
            Some(tx) => tx
                .send(job)
                .map_err(|_| std::io::Error::other("the capture's writer thread stopped")),
            None => Err(std::io::Error::other("the capture is finished")),
        }
    }

    /// Waits for every queued block to be written; returns what was.
    ///
    /// # Errors
    /// Compressing or writing a block failed.
    pub(super) fn finish(&mut self) -> std::io::Result<Written> {
        self.jobs = None;
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(std::io::Error::other(
                "the capture's writer thread panicked",
            )),
            None => Err(std::io::Error::other("the capture is finished")),
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        // a writer dropped without `finish` (its process failed): the queued blocks are still
        // written, so the capture reads up to them
        let _ = self.finish();
    }
}
