//! memscope for long jobs (issue 38): the flight recorder of `memscope run --keep` and its
//! bound, the live view's layer and frames behind `memscope top` (and where to find a running
//! run's spool), and what the views say about a window. The collector installs the layers;
//! the CLI draws.

pub mod flight_recorder;
pub mod keep;
pub mod live;
pub mod live_view;
pub mod locate;
pub mod window_note;
