//! memscope-core: the event model every stage after the stream shares — the collector, the dump
//! readers and writers, the analyses, the exports and the report.
//!
//! * [`event`] — one [`event::Event`] per row of msMemScope's dump files (seed:
//!   `seed-output-files.md`), with its kind, type, device, typed attributes and stacks.
//! * [`owner`], [`roles`] — owner chains (`PTA@model@layer`) and the role level read from them.
//! * [`attr_text`] — the Attr cell: typed attributes ⇄ msMemScope's `{key:value,...}` text and
//!   SQLite JSON, read and written by the same code.
//! * [`bus`] — the per-process bus: the [`bus::Layer`] trait every filter, analysis and sink
//!   implements, the step state and report sections.
//! * [`snapshot`], [`cann_modules`], [`sample`] — the OOM snapshot's fields, CANN module ids,
//!   the figures of a memory sample.
//! * [`listing`], [`sanitize`], [`addr_hash`] — console lists, text made safe to print, the
//!   address-keyed map of live blocks.
//!
//! The stream format below this crate is `memscope-wire` ([`EventKind`](event::EventKind) is
//! defined there and re-exported from [`event`]).
#![forbid(unsafe_code)]

pub mod addr_hash;
pub mod attr_text;
pub mod attrs;
pub mod bus;
pub mod cann_modules;
pub mod event;
pub mod listing;
pub mod owner;
pub mod roles;
pub mod sample;
pub mod sanitize;
pub mod snapshot;
