//! The time-ordered merge of one process's streams (every image of one pid): a k-way merge over
//! per-chunk cursors that each hold their next record only. Records are released in
//! (timestamp, image, stream order) order up to a watermark; definitions (`StackDef`,
//! `TextDef`), which have no time stamp, are handed out as soon as they are decoded, before any
//! record decoded after them. Memory: one small window and one record per unfinished chunk.

use super::stream::{Sourced, StreamFile};
use crate::wire::Record;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// A record of the merge with its process image (stream index within the pid, from 0).
#[derive(Clone, Debug, PartialEq)]
pub struct Merged {
    /// Process image.
    pub image: usize,
    /// The record and its origin.
    pub src: Sourced,
}

/// A head in the heap, ordered by (ts, image, seq).
struct Head {
    key: (u64, usize, u64),
    src: Sourced,
}

impl PartialEq for Head {
    fn eq(&self, o: &Self) -> bool {
        self.key == o.key
    }
}
impl Eq for Head {}
impl PartialOrd for Head {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Head {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.key.cmp(&o.key)
    }
}

/// Merge state of one process.
#[derive(Default)]
pub struct ProcessMerge {
    images: Vec<StreamFile>,
    /// The next record of every chunk that has one, earliest first.
    heap: BinaryHeap<Reverse<Head>>,
    /// Cursors (image, chunk) with nothing decoded yet, to be retried by `poll`.
    starved: Vec<(usize, usize)>,
    defs: VecDeque<Merged>,
    /// Everything is final (the writers are gone): unfinished chunks are finished as read.
    final_pass: bool,
}

impl ProcessMerge {
    /// An empty merge.
    pub fn new() -> ProcessMerge {
        ProcessMerge::default()
    }

    /// Adds another image (the first, or a later exec) of the process.
    pub fn add_image(&mut self, s: StreamFile) {
        self.images.push(s);
    }

    /// The images so far.
    pub fn images(&self) -> &[StreamFile] {
        &self.images
    }

    /// Mutable access to the images.
    pub fn images_mut(&mut self) -> &mut [StreamFile] {
        &mut self.images
    }

    /// Marks every writer gone: from now on a chunk with nothing more committed is finished.
    pub fn set_final(&mut self) {
        self.final_pass = true;
    }

    /// Records waiting in the merge (heads plus definitions).
    pub fn pending(&self) -> usize {
        self.heap.len() + self.defs.len()
    }

    fn advance(&mut self, image: usize, chunk: usize) -> std::io::Result<()> {
        loop {
            let gone = self.final_pass;
            match self.images[image].next_record(chunk, gone)? {
                Some(src) => {
                    if src.rec.ts().is_none() {
                        self.defs.push_back(Merged { image, src });
                        continue;
                    }
                    let ts = src.rec.ts().unwrap_or(0);
                    self.heap.push(Reverse(Head {
                        key: (ts, image, src.seq),
                        src,
                    }));
                }
                None => {
                    if !self.images[image].chunks[chunk].done {
                        self.starved.push((image, chunk));
                    }
                }
            }
            return Ok(());
        }
    }

    /// Looks for new chunks and for new records in chunks that had none. Returns whether
    /// anything new was decoded.
    ///
    /// # Errors
    /// Read failure of a stream file.
    pub fn poll(&mut self) -> std::io::Result<bool> {
        let before = self.pending();
        let mut starved = std::mem::take(&mut self.starved);
        for image in 0..self.images.len() {
            if self.images[image].header()?.is_none() {
                continue;
            }
            let first = self.images[image].discover_chunks()?;
            for chunk in first..self.images[image].chunks.len() {
                starved.push((image, chunk));
            }
        }
        starved.sort_unstable();
        starved.dedup();
        for (image, chunk) in starved {
            self.advance(image, chunk)?;
        }
        Ok(self.pending() > before)
    }

    /// The next record to emit: a pending definition, else the earliest head stamped at or
    /// before `watermark`.
    ///
    /// # Errors
    /// Read failure of a stream file.
    pub fn next(&mut self, watermark: u64) -> std::io::Result<Option<Merged>> {
        if let Some(d) = self.defs.pop_front() {
            return Ok(Some(d));
        }
        match self.heap.peek() {
            Some(Reverse(h)) if h.key.0 <= watermark => {}
            _ => return Ok(None),
        }
        let Some(Reverse(Head {
            key: (_, image, _),
            src,
        })) = self.heap.pop()
        else {
            return Ok(None);
        };
        // Definitions decoded while advancing come out on the next calls, after this record.
        self.advance(image, src.chunk as usize)?;
        Ok(Some(Merged { image, src }))
    }

    /// Whether every chunk of every image is finished and nothing is pending.
    pub fn drained(&self) -> bool {
        self.pending() == 0 && self.images.iter().all(|s| s.chunks.iter().all(|c| c.done))
    }
}

impl Record<Box<[u8]>> {
    /// Whether this record is a definition (no time stamp; applied as soon as read).
    pub fn is_definition(&self) -> bool {
        self.ts().is_none()
    }
}
