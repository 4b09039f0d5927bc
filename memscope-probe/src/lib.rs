//! memscope-probe (being written)
