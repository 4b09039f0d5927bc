//! The time-ordered merge of one process's streams (every image of one pid): a k-way merge over
//! per-chunk cursors that each hold a run of decoded records (at most 32). Records are released
//! in (timestamp, image, stream order) order up to a watermark; definitions (`StackDef`,
//! `TextDef`), which have no time stamp, are handed out when they reach the front of their
//! chunk's run, before any record decoded after them. Memory: one small window and one run per
//! unfinished chunk.

use super::stream::{Sourced, StreamFile};
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

/// A chunk's next record in the heap, ordered by (ts, image, seq); the record itself waits in
/// its cursor, so heap moves are small. Every field is 8 bytes: the sift that follows a head's
/// replacement reads it back at once, and a wider read of narrower stores stalls.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Head {
    ts: u64,
    image: u64,
    /// (chunk << 32) | offset, as [`Sourced::seq`].
    seq: u64,
}

impl PartialOrd for Head {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Head {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.ts, self.image, self.seq).cmp(&(o.ts, o.image, o.seq))
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

/// Brings chunk `chunk` of `images[image]`'s next record to the front of its `ready` queue;
/// definitions met on the way go to `defs`. Returns the new head's heap entry (`None`: the
/// chunk has nothing decoded now; it is noted in `starved` unless it is finished).
#[inline(always)]
fn advance(
    images: &mut [StreamFile],
    defs: &mut VecDeque<Merged>,
    starved: &mut Vec<(usize, usize)>,
    final_pass: bool,
    image: usize,
    chunk: usize,
) -> std::io::Result<Option<Head>> {
    loop {
        let c = &mut images[image].chunks[chunk];
        let Some(src) = c.ready.front() else {
            if images[image].next_record(chunk, final_pass)? {
                continue;
            }
            break;
        };
        match src.rec.ts() {
            Some(ts) => {
                return Ok(Some(Head {
                    ts,
                    image: image as u64,
                    seq: src.seq,
                }))
            }
            None => {
                if let Some(src) = c.ready.pop_front() {
                    defs.push_back(Merged { image, src });
                }
            }
        }
    }
    if !images[image].chunks[chunk].done {
        starved.push((image, chunk));
    }
    Ok(None)
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
            let head = advance(
                &mut self.images,
                &mut self.defs,
                &mut self.starved,
                self.final_pass,
                image,
                chunk,
            )?;
            if let Some(h) = head {
                self.heap.push(Reverse(h));
            }
        }
        Ok(self.pending() > before)
    }

    /// Lends the next record to emit to `f`: a pending definition, else the earliest head
    /// stamped at or before `watermark`. Returns whether there was one. `f` reads the record
    /// where it lies or takes it out of its slot (moving a record through a temporary costs
    /// more than the merge itself); what it leaves is dropped.
    ///
    /// # Errors
    /// Read failure of a stream file.
    #[inline(always)]
    pub fn next_with(
        &mut self,
        watermark: u64,
        f: impl FnOnce(usize, &mut Option<Sourced>),
    ) -> std::io::Result<bool> {
        if let Some(d) = self.defs.pop_front() {
            f(d.image, &mut Some(d.src));
            return Ok(true);
        }
        let Some(mut top) = self.heap.peek_mut() else {
            return Ok(false);
        };
        if top.0.ts > watermark {
            return Ok(false);
        }
        let (image, chunk) = (top.0.image as usize, (top.0.seq >> 32) as usize);
        let ready = &mut self.images[image].chunks[chunk].ready;
        match ready.front_slot() {
            Some(slot) => f(image, slot),
            None => {
                // Not reached: every heap entry has its record in its cursor.
                std::collections::binary_heap::PeekMut::pop(top);
                return Ok(false);
            }
        }
        ready.discard_front();
        // The chunk's next record replaces this one in place (one sift instead of a pop and
        // a push); definitions decoded meanwhile come out on the next calls, after this record.
        match advance(
            &mut self.images,
            &mut self.defs,
            &mut self.starved,
            self.final_pass,
            image,
            chunk,
        )? {
            Some(h) => top.0 = h,
            None => {
                std::collections::binary_heap::PeekMut::pop(top);
            }
        }
        Ok(true)
    }

    /// The next record to emit (as [`ProcessMerge::next_with`], by value).
    ///
    /// # Errors
    /// Read failure of a stream file.
    pub fn next(&mut self, watermark: u64) -> std::io::Result<Option<Merged>> {
        let mut out = None;
        self.next_with(watermark, |image, slot| {
            out = slot.take().map(|src| Merged { image, src })
        })?;
        Ok(out)
    }

    /// Whether every chunk of every image is finished and nothing is pending.
    pub fn drained(&self) -> bool {
        self.pending() == 0 && self.images.iter().all(|s| s.chunks.iter().all(|c| c.done))
    }
}
