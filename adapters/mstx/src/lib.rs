//! mstx adapter (being written)
