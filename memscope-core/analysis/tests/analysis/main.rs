//! The analyses on dump files: compare, decompose and gap, inefficient, leaks, the real
//! msMemScope fixtures, and the benchmark driver of `benches/analysis/run.sh` (ignored; one
//! test binary, each file a module).

mod bench;
mod compare;
mod decompose_gap;
mod fixtures;
mod inefficient;
mod leaks;
