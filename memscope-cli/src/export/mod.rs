//! The formats of `memscope export`, one module each.

pub mod dumps;
