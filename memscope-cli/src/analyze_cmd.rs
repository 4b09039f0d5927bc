//! `memscope compare` and `memscope analyze` (being written).
