//! The pieces of a snapshot document: trace entries, frame lists, segment and block dicts,
//! written through the [`Pickler`] with keys, actions, frames and frame lists memoized.

use std::collections::HashMap;
use std::io;
use std::sync::Arc;

use super::pickle::{Pickler, Sink, BATCH};
use crate::frames::{lines, parse_line};

/// A frame list already written: fetched from the memo, or (memo full) kept to be written
/// again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FramesRef {
    /// No frames (`[]`).
    Empty,
    /// Memo entry of the list.
    Memo(u32),
    /// Stacks `(Python, C)` of a list that could not be memoized.
    Inline(Arc<(Option<String>, Option<String>)>),
}

/// Index of a category (owner chain) in [`Doc::categories`]; 0 is `"unknown"`.
pub type Category = u32;

/// The category of events without an owner (the viewer needs it whenever categories are used).
pub const UNKNOWN: Category = 0;

/// The frames of an entry: written before, or stacks to write now.
#[derive(Clone, Copy, Debug)]
pub enum FramesArg<'a> {
    /// A list written before.
    Ref(&'a FramesRef),
    /// `(Python, C)` stack cells of the row.
    Stacks(Option<&'a str>, Option<&'a str>),
}

/// One entry of a device trace.
pub struct Entry<'a> {
    /// `alloc`, `free_requested`, `free_completed`, `segment_alloc`, `segment_free`, `oom`,
    /// `snapshot`.
    pub action: &'static str,
    /// Block or segment address (`oom`: the device's free bytes, as PyTorch writes it).
    pub addr: u64,
    /// Bytes.
    pub size: u64,
    /// Event time, µs since the epoch (not drawn by the viewer).
    pub time_us: i64,
    /// Frames of the event.
    pub frames: FramesArg<'a>,
    /// Owner chain of the block.
    pub category: Category,
    /// `oom` only: free device bytes.
    pub device_free: Option<u64>,
}

/// The document being written.
pub struct Doc<W: Sink> {
    /// The pickle writer.
    pub p: Pickler<W>,
    categories: Vec<String>,
    category_ids: HashMap<String, Category>,
}

impl<W: Sink> Doc<W> {
    /// A document written into `w`.
    pub fn new(w: W) -> Doc<W> {
        Doc::with_pickler(Pickler::new(w))
    }

    /// A document written by `p`.
    pub fn with_pickler(p: Pickler<W>) -> Doc<W> {
        let mut d = Doc {
            p,
            categories: Vec::new(),
            category_ids: HashMap::new(),
        };
        d.category("unknown");
        d
    }

    /// The id of category `name`.
    pub fn category(&mut self, name: &str) -> Category {
        if let Some(c) = self.category_ids.get(name) {
            return *c;
        }
        let c = self.categories.len() as Category;
        self.categories.push(name.to_owned());
        self.category_ids.insert(name.to_owned(), c);
        c
    }

    /// Writes a dictionary key (memoized).
    ///
    /// # Errors
    /// The sink's error (here and in the other writing methods).
    pub fn key(&mut self, k: &str) -> io::Result<()> {
        self.p.str_memo(k)
    }

    fn frame(&mut self, line: &str, python: bool) -> io::Result<()> {
        let mut key = Vec::with_capacity(line.len() + 2);
        key.push(b'F');
        key.push(u8::from(python));
        key.extend_from_slice(line.as_bytes());
        if let Some(i) = self.p.lookup(&key) {
            return self.p.get(i);
        }
        let f = parse_line(line, python);
        self.p.empty_dict()?;
        self.p.mark()?;
        self.key("filename")?;
        self.p.str_memo(f.filename)?;
        self.key("line")?;
        self.p.int(f.line)?;
        self.key("name")?;
        self.p.str(f.name)?;
        self.p.setitems()?;
        self.p.memoize(&key).map(|_| ())
    }

    /// Writes the frame list of stacks `py` / `c`, each innermost first as the dump lists
    /// them: the C frames, then the Python frames — or the Python frames first when the first
    /// frame of the user's code is a Python frame (`memscope_analysis::attribution`, issue 23), so
    /// a viewer that names a block by its first frames names the user's line, not CPython's
    /// allocator. Returns how to write it again.
    pub fn frames(&mut self, py: Option<&str>, c: Option<&str>) -> io::Result<FramesRef> {
        if lines(c).next().is_none() && lines(py).next().is_none() {
            self.p.empty_list()?;
            return Ok(FramesRef::Empty);
        }
        let mut key = Vec::with_capacity(2 + py.map_or(0, str::len) + c.map_or(0, str::len));
        key.push(b'L');
        key.extend_from_slice(c.unwrap_or("").as_bytes());
        key.push(0xff); // never inside UTF-8 text
        key.extend_from_slice(py.unwrap_or("").as_bytes());
        if let Some(i) = self.p.lookup(&key) {
            self.p.get(i)?;
            return Ok(FramesRef::Memo(i));
        }
        self.p.empty_list()?;
        self.p.mark()?;
        let python_first = memscope_analysis::attribution::site_of(py, c)
            .is_some_and(|s| s.rule.lang == memscope_analysis::attribution::Lang::Python);
        let order = if python_first {
            [(true, py), (false, c)]
        } else {
            [(false, c), (true, py)]
        };
        let mut n = 0usize;
        for (python, stack) in order {
            for l in lines(stack) {
                self.frame(l, python)?;
                n += 1;
                if n.is_multiple_of(BATCH) {
                    self.p.appends()?;
                    self.p.mark()?;
                }
            }
        }
        self.p.appends()?;
        Ok(match self.p.memoize(&key)? {
            Some(i) => FramesRef::Memo(i),
            None => FramesRef::Inline(Arc::new((py.map(str::to_owned), c.map(str::to_owned)))),
        })
    }

    /// Writes a frame list again.
    pub fn frames_again(&mut self, f: &FramesRef) -> io::Result<()> {
        match f {
            FramesRef::Empty => self.p.empty_list(),
            FramesRef::Memo(i) => self.p.get(*i),
            FramesRef::Inline(s) => self.frames(s.0.as_deref(), s.1.as_deref()).map(|_| ()),
        }
    }

    /// The name of category `c`.
    pub fn category_name(&self, c: Category) -> &str {
        &self.categories[c as usize]
    }

    /// Writes one trace entry dict; returns how to write its frames again.
    pub fn entry(&mut self, e: &Entry<'_>) -> io::Result<FramesRef> {
        self.p.empty_dict()?;
        self.p.mark()?;
        self.key("action")?;
        self.p.str_memo(e.action)?;
        self.key("addr")?;
        self.p.uint(e.addr)?;
        self.key("size")?;
        self.p.uint(e.size)?;
        self.key("stream")?;
        self.p.int(0)?;
        self.key("time_us")?;
        self.p.int(e.time_us)?;
        self.key("frames")?;
        let frames = match e.frames {
            FramesArg::Ref(f) => {
                self.frames_again(f)?;
                f.clone()
            }
            FramesArg::Stacks(py, c) => self.frames(py, c)?,
        };
        self.key("category")?;
        let name = std::mem::take(&mut self.categories[e.category as usize]);
        let r = self.p.str_memo(&name);
        self.categories[e.category as usize] = name;
        r?;
        if let Some(free) = e.device_free {
            self.key("device_free")?;
            self.p.uint(free)?;
        }
        self.p.setitems()?;
        Ok(frames)
    }

    /// Writes one block dict of a segment.
    pub fn block(
        &mut self,
        address: u64,
        size: u64,
        active: bool,
        frames: &FramesRef,
    ) -> io::Result<()> {
        self.p.empty_dict()?;
        self.p.mark()?;
        self.key("address")?;
        self.p.uint(address)?;
        self.key("size")?;
        self.p.uint(size)?;
        self.key("requested_size")?;
        self.p.uint(size)?;
        self.key("state")?;
        self.p.str_memo(if active {
            "active_allocated"
        } else {
            "inactive"
        })?;
        self.key("frames")?;
        self.frames_again(frames)?;
        self.p.setitems()
    }

    /// Opens a segment dict: writes its fields up to the `blocks` key; the caller then writes
    /// the block list and calls [`Doc::end_segment`].
    pub fn begin_segment(
        &mut self,
        device: u32,
        address: u64,
        total: u64,
        allocated: u64,
        frames: &FramesRef,
    ) -> io::Result<()> {
        self.p.empty_dict()?;
        self.p.mark()?;
        self.key("device")?;
        self.p.int(i64::from(device))?;
        self.key("address")?;
        self.p.uint(address)?;
        self.key("total_size")?;
        self.p.uint(total)?;
        for k in ["allocated_size", "active_size", "requested_size"] {
            self.key(k)?;
            self.p.uint(allocated)?;
        }
        self.key("stream")?;
        self.p.int(0)?;
        self.key("segment_type")?;
        self.p.str_memo("large")?;
        self.key("segment_pool_id")?;
        self.p.int(0)?;
        self.p.int(0)?;
        self.p.tuple2()?;
        self.key("is_expandable")?;
        self.p.bool(false)?;
        self.key("frames")?;
        self.frames_again(frames)?;
        self.key("blocks")
    }

    /// Closes a segment dict opened by [`Doc::begin_segment`] (after its block list).
    pub fn end_segment(&mut self) -> io::Result<()> {
        self.p.setitems()
    }
}
