//! The collector's address hasher (now in `memscope_core::addr_hash`, shared with the capture
//! writer).
#![forbid(unsafe_code)]

pub use memscope_core::addr_hash::{AddrHasher, AddrMap};
