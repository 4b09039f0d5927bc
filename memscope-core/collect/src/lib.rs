//! memscope-collect: the collector. It follows every traced process's stream in the spool
//! directory while the job runs (or replays a kept capture), types each record into
//! [`memscope_core::event::Event`]s with the adapters' typers, runs them through the bus of
//! layers (filters, leak and OOM layers, the online analyses) into the dump sinks, and keeps
//! the capture.
//!
//! * [`adapter`] — the contract an adapter's collector half keeps: [`adapter::Typer`],
//!   [`adapter::TypeCtx`], [`adapter::AdapterDescriptor`], and the [`registry::Registry`] the
//!   caller hands the collector (the collector names no adapter crate).
//! * [`Collector`] ([`collector`]) — the spool, its processes and their pipelines;
//!   [`pipeline`] — one process: records → typers → bus → sinks and capture;
//!   [`replay`] — the same pipeline over a kept capture.
//! * [`config`] — the run's configuration (flags, config.json, msMemScope's config.json).
//! * Services the typers share: [`pool`] (msTX memory pools), [`symbolize`] (C stacks),
//!   [`pystacks`] and [`python`] (Python stacks and the Python service's records), [`torch`],
//!   [`history`] (blocks from before a collection window), [`sampled`] (`--sample`),
//!   [`fast_path`] (records accounted without events).
//! * Layers of the collector: [`layers`] (collect and write filters), [`access_blocks`],
//!   [`account_summary`]; the process log [`logfile`].
#![forbid(unsafe_code)]

pub mod access_blocks;
pub mod account_summary;
pub mod adapter;
pub mod api_config;
pub mod collector;
pub mod compact;
pub mod config;
mod dump_sink;
pub mod fast_path;
mod handoff;
pub use memscope_longjobs::flight_recorder;
pub mod history;
pub mod layers;
pub mod live_account;
pub use memscope_longjobs::live_view;
pub mod logfile;
pub mod pipeline;
pub mod plugin_typer;
pub mod pool;
pub mod process;
pub mod process_summary;
pub mod pystacks;
pub mod python;
pub mod registry;
pub mod replay;
pub mod sampled;
pub mod symbolize;
#[cfg(test)]
mod test_registry;
pub mod torch;
pub mod typers;

pub use collector::{
    pid_alive, AnalysisFactory, Collector, Ended, PipelineFactory, REORDER_WINDOW_NS,
};
