//! Progress of an export, in input bytes: the exporter announces the work it plans (every pass
//! over a file counts its size) and reports what it has read; the command draws a bar.

/// Receives the progress of an export.
pub trait Progress {
    /// More work is planned: `bytes` more input bytes will be read.
    fn plan(&mut self, bytes: u64);
    /// `bytes` more input bytes were read.
    fn advance(&mut self, bytes: u64);
    /// What is being done now (e.g. `perfetto: rank 3 pid 1234`).
    fn stage(&mut self, what: &str);
}

/// A [`Progress`] that draws nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct Silent;

impl Progress for Silent {
    fn plan(&mut self, _: u64) {}
    fn advance(&mut self, _: u64) {}
    fn stage(&mut self, _: &str) {}
}
