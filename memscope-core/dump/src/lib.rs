//! memscope-dump: msMemScope-format dumps on disk and the files around them.
//!
//! * [`reader`] — CSV and SQLite dumps (memscope's and msMemScope's) read back into
//!   [`memscope_core::event::Event`]s, in file or ID order, with limits on bad input.
//! * [`sink`] — the bus's last layer: one CSV or SQLite dump per device.
//! * [`layout`] — the output tree (`msmemscope_<pid>_<ts>_ascend/device_<n>/dump/...`).
//! * [`run_index`] — `memscope_run.json`, the index of a run's processes and ranks.
//! * [`safe_fs`] — creating files and directories without following links or overwriting.
#![forbid(unsafe_code)]

pub mod layout;
pub mod reader;
pub mod run_index;
pub mod safe_fs;
pub mod sink;
