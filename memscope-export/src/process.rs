//! A traced process of an export's input and where its events are: dump files (with the rows
//! that are its own) or a kept capture.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use memscope_core::event::Device;
use memscope_dump::reader::{DumpFile, ProcessEvents};

use crate::rank::RankInfo;

/// One dump file of a process.
#[derive(Clone, Debug)]
pub struct InputFile {
    /// The checked file.
    pub dump: DumpFile,
    /// The device of its `device_<n>` directory, when it lies in msMemScope's layout.
    pub device: Option<Device>,
}

/// Which rows of the files belong to the process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PidFilter {
    /// Every row (the files hold this process only).
    All,
    /// Rows of this `Process Id` (`None`: rows written `N/A`).
    Only(Option<u32>),
}

/// A traced process of the input and where its events are.
#[derive(Clone, Debug)]
pub struct ProcessInput {
    /// Process id, when known.
    pub pid: Option<u32>,
    /// Directory holding the process's directory or file, as given (`""` for the working
    /// directory).
    pub node: String,
    /// Rank and its source ([`crate::rank`]).
    pub rank: RankInfo,
    /// The process's `msmemscope_*_ascend` directory (or other directory of device folders).
    pub dir: Option<PathBuf>,
    /// Its dump files (none for a capture).
    pub files: Vec<InputFile>,
    /// Its kept capture, replayed in place of dump files.
    pub capture: Option<Arc<dyn ProcessEvents>>,
    /// Which rows of `files` are this process's.
    pub pid_filter: PidFilter,
    /// Devices with rows or directories (NPU ids, `cpu`), sorted; `N/A` is not a device.
    pub devices: Vec<Device>,
    /// 1-based number in the sorted list of processes: the synthetic pid of merged views.
    pub synthetic_pid: u32,
}

impl ProcessInput {
    /// `rank R pid P` (rank and pid omitted when unknown), for names and messages.
    pub fn label(&self) -> String {
        let mut s = String::new();
        if let Some(r) = self.rank.rank {
            s.push_str(&format!("rank {r} "));
        }
        match self.pid {
            Some(p) => s.push_str(&format!("pid {p}")),
            None => s.push_str("pid N/A"),
        }
        s
    }

    /// Where the process came from, for messages: its directory or its first file.
    pub fn origin(&self) -> String {
        if let Some(c) = &self.capture {
            return c.origin().display().to_string();
        }
        match (&self.dir, self.files.first()) {
            (Some(d), _) => d.display().to_string(),
            (None, Some(f)) => f.dump.name().to_owned(),
            (None, None) => String::new(),
        }
    }

    /// The files a replay restricted to `device` reads (every file when `None`).
    pub fn files_for(&self, device: Option<Device>) -> Vec<&InputFile> {
        self.files
            .iter()
            .filter(|f| match (device, f.device) {
                (Some(want), Some(have)) => want == have,
                _ => true,
            })
            .collect()
    }

    /// Bytes a replay restricted to `device` reads.
    pub fn bytes_for(&self, device: Option<Device>) -> u64 {
        if let Some(c) = &self.capture {
            return c.size();
        }
        self.files_for(device).iter().map(|f| f.dump.size()).sum()
    }

    /// NPU devices of the process, sorted.
    pub fn npus(&self) -> Vec<u32> {
        self.devices
            .iter()
            .filter_map(|d| match d {
                Device::Npu(n) => Some(*n),
                _ => None,
            })
            .collect()
    }
}

/// The `node` of a process under directory `dir` (its path as given; `""` for none).
pub(crate) fn node_of(dir: Option<&Path>) -> String {
    match dir {
        Some(d) if !d.as_os_str().is_empty() => d.display().to_string(),
        _ => String::new(),
    }
}
