//! memscope-runtime (being written)
