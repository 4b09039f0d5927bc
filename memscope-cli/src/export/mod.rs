//! The formats of `memscope export`, one module each ([`dumps`] makes both csv and db), and
//! what the viewer formats share: the processes of the inputs ([`processes`]) and the
//! progress bar ([`bar`]).

pub mod bar;
pub mod dumps;
pub mod memory_viz;
pub mod parquet;
pub mod perfetto;
pub mod processes;
