//! Reads one process image's stream file live, up to each chunk's committed length
//! (format: `memscope_core::wire`). Safe code only: `pread` through `FileExt::read_at`.

use memscope_core::wire::{self, ChunkState, Record};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// A decoded record with where it came from.
#[derive(Debug)]
pub struct RawEvent {
    /// Writer thread.
    pub tid: u32,
    /// Order within the stream: (chunk index << 32) | byte offset; breaks timestamp ties.
    pub seq: u64,
    /// The record with owned texts.
    pub rec: Record<Box<[u8]>>,
}

/// Header fields of a stream.
#[derive(Clone, Debug, Default)]
pub struct StreamHeader {
    /// Process id.
    pub pid: u32,
    /// Parent process id.
    pub ppid: u32,
    /// Start time, ns since the epoch.
    pub start_ns: u64,
    /// Offset of the probe's monotonic clock to the epoch, ns.
    pub clock_offset: i64,
    /// Executable path.
    pub exe: String,
}

#[derive(Default)]
struct Cursor {
    read: u32,
    state: ChunkState,
    tid: u32,
    done: bool,
}

/// Follows one stream file.
pub struct StreamReader {
    path: PathBuf,
    file: File,
    header: Option<StreamHeader>,
    chunks: Vec<Cursor>,
    /// Records that failed to decode (a corrupt chunk is abandoned).
    pub corrupt_chunks: u64,
    buf: Vec<u8>,
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().expect("8 bytes"))
}

impl StreamReader {
    /// Opens a stream file for reading.
    ///
    /// # Errors
    /// The file cannot be opened.
    pub fn open(path: &Path) -> std::io::Result<StreamReader> {
        Ok(StreamReader {
            path: path.to_path_buf(),
            file: File::open(path)?,
            header: None,
            chunks: Vec::new(),
            corrupt_chunks: 0,
            buf: Vec::new(),
        })
    }

    /// Path of the stream file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The header, once the probe has written it.
    ///
    /// # Errors
    /// Read failure, or a stream of another format version.
    pub fn header(&mut self) -> std::io::Result<Option<&StreamHeader>> {
        if self.header.is_none() {
            let mut h = vec![0u8; wire::FILE_HEADER_SIZE];
            let n = self.file.read_at(&mut h, 0)?;
            if n < wire::FILE_HEADER_SIZE || h[..8] != wire::STREAM_MAGIC {
                return Ok(None);
            }
            let version = u32_at(&h, wire::FH_VERSION);
            let chunk = u32_at(&h, wire::FH_CHUNK_SIZE) as usize;
            if version != wire::STREAM_VERSION || chunk != wire::CHUNK_SIZE {
                return Err(std::io::Error::other(format!(
                    "{}: stream format {version} / chunk {chunk} not supported (this memscope reads {} / {})",
                    self.path.display(),
                    wire::STREAM_VERSION,
                    wire::CHUNK_SIZE
                )));
            }
            let exe = &h[wire::FH_EXE..wire::FH_EXE + wire::FH_EXE_LEN];
            let end = exe.iter().position(|&b| b == 0).unwrap_or(exe.len());
            self.header = Some(StreamHeader {
                pid: u32_at(&h, wire::FH_PID),
                ppid: u32_at(&h, wire::FH_PPID),
                start_ns: u64_at(&h, wire::FH_START_NS),
                clock_offset: u64_at(&h, wire::FH_CLOCK_OFFSET) as i64,
                exe: String::from_utf8_lossy(&exe[..end]).into_owned(),
            });
        }
        Ok(self.header.as_ref())
    }

    /// Events the probe could not record (read live from the header).
    ///
    /// # Errors
    /// Read failure.
    pub fn dropped(&self) -> std::io::Result<u64> {
        let mut b = [0u8; 8];
        self.file.read_exact_at(&mut b, wire::FH_DROPPED as u64)?;
        Ok(u64::from_le_bytes(b))
    }

    /// Header flags (`wire::FLAG_*`).
    ///
    /// # Errors
    /// Read failure.
    pub fn flags(&self) -> std::io::Result<u32> {
        let mut b = [0u8; 4];
        self.file.read_exact_at(&mut b, wire::FH_FLAGS as u64)?;
        Ok(u32::from_le_bytes(b))
    }

    /// Whether the writing process is gone (its `flock` is released at death or exec).
    pub fn writer_gone(&self) -> bool {
        match self.file.try_lock() {
            Ok(()) => {
                let _ = self.file.unlock();
                true
            }
            Err(std::fs::TryLockError::WouldBlock) => false,
            Err(std::fs::TryLockError::Error(_)) => true,
        }
    }

    /// Reads every record committed since the last call, appending to `out`. Returns whether
    /// anything was read.
    ///
    /// # Errors
    /// Read failure of the file.
    pub fn poll(&mut self, out: &mut Vec<RawEvent>) -> std::io::Result<bool> {
        if self.header()?.is_none() {
            return Ok(false);
        }
        let len = self.file.metadata()?.len() as usize;
        let n_chunks = len.saturating_sub(wire::FILE_HEADER_SIZE) / wire::CHUNK_SIZE;
        while self.chunks.len() < n_chunks {
            self.chunks.push(Cursor::default());
        }
        let mut progressed = false;
        for idx in 0..self.chunks.len() {
            if self.chunks[idx].done {
                continue;
            }
            let base = (wire::FILE_HEADER_SIZE + idx * wire::CHUNK_SIZE) as u64;
            let mut h = [0u8; 16];
            self.file.read_exact_at(&mut h, base)?;
            if u32_at(&h, wire::CH_MAGIC) != wire::CHUNK_MAGIC {
                continue;
            }
            let sealed = u32_at(&h, wire::CH_SEALED) != 0;
            let committed = u32_at(&h, wire::CH_COMMITTED).min(wire::CHUNK_PAYLOAD as u32);
            let cur = &mut self.chunks[idx];
            if committed > cur.read {
                let n = (committed - cur.read) as usize;
                self.buf.resize(n, 0);
                let at = base + (wire::CHUNK_HEADER_SIZE as u64) + cur.read as u64;
                self.file.read_exact_at(&mut self.buf, at)?;
                let mut pos = 0;
                while pos < n {
                    match wire::decode(&self.buf[pos..], &mut cur.state) {
                        Ok((rec, used)) => {
                            if let Record::Thread { tid } = rec {
                                cur.tid = tid;
                            } else {
                                out.push(RawEvent {
                                    tid: cur.tid,
                                    seq: ((idx as u64) << 32) | (cur.read as u64 + pos as u64),
                                    rec: rec.to_owned(),
                                });
                            }
                            pos += used;
                        }
                        Err(_) => {
                            self.corrupt_chunks += 1;
                            cur.done = true;
                            break;
                        }
                    }
                }
                cur.read = committed;
                progressed = true;
            }
            if sealed && cur.read >= committed {
                cur.done = true;
            }
        }
        Ok(progressed)
    }
}
