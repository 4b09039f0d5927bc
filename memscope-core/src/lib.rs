//! memscope-core: what every part of memscope agrees on.
//!
//! * [`event`] — the typed event model of msMemScope's dump files (seed: `seed-output-files.md`).
//! * [`wire`] — the compact, allocation-free record codec of the per-process event stream that
//!   the preloaded probe writes and the collector reads.
//! * [`adapter`] — descriptors of allocator sources and the collector-side typing trait.
//! * With the `collector` feature (on by default, off in the probe): [`config`], [`bus`],
//!   [`sink`] (CSV, SQLite), [`layout`] (output directories).
#![forbid(unsafe_code)]

pub mod adapter;
pub mod attribution;
pub mod cann_modules;
pub mod event;
pub mod listing;
pub mod owner;
pub mod pool;
pub mod probe_env;
pub mod roles;
pub mod sites;
pub mod snapshot;
pub mod watch;
pub mod wire;

#[cfg(feature = "collector")]
pub mod access_blocks;
#[cfg(feature = "collector")]
pub mod addr_hash;
#[cfg(feature = "collector")]
pub mod analysis;
#[cfg(feature = "collector")]
pub mod attr_text;
#[cfg(feature = "collector")]
pub mod bus;
#[cfg(feature = "collector")]
pub mod capture;
#[cfg(feature = "collector")]
pub mod config;
#[cfg(feature = "collector")]
pub mod layout;
#[cfg(feature = "collector")]
pub mod reader;
#[cfg(feature = "collector")]
pub mod run_index;
#[cfg(feature = "collector")]
pub mod safe_fs;
#[cfg(feature = "collector")]
pub mod sampled;
#[cfg(feature = "collector")]
pub mod sanitize;
#[cfg(feature = "collector")]
pub mod sink;
#[cfg(feature = "collector")]
pub mod spool;
#[cfg(feature = "collector")]
pub mod symbolize;
