//! memscope-stream: the collector's side of the per-process event streams (format:
//! `memscope-wire`).
//!
//! * [`spool`] — following the stream files in the spool directory while the job runs (or after
//!   it was killed), and merging each process's threads in time order with bounded memory.
//! * [`capture`] — the kept stream: a process's records as the collector emitted them,
//!   compressed, from which every view can be made again; its writer and reader.
#![forbid(unsafe_code)]

pub mod capture;
pub mod spool;
