//! The progress bar of `memscope export`: input bytes read against bytes planned, hidden at
//! first and drawn on stderr (a terminal only) once the export has taken more than a second —
//! `MEMSCOPE_PROGRESS_DELAY_MS` changes that delay — so small inputs print nothing; cleared at
//! the end.

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The bar, as a [`memscope_export::Progress`].
pub struct Bar {
    pb: ProgressBar,
    start: Instant,
    delay: Duration,
    shown: bool,
    total: u64,
}

impl Bar {
    /// A hidden bar.
    pub fn new() -> Bar {
        Bar {
            pb: ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::hidden()),
            start: Instant::now(),
            delay: std::env::var("MEMSCOPE_PROGRESS_DELAY_MS")
                .ok()
                .and_then(|v| v.parse().ok())
                .map_or(Duration::from_secs(1), Duration::from_millis),
            shown: false,
            total: 0,
        }
    }

    fn maybe_show(&mut self) {
        if !self.shown && self.start.elapsed() >= self.delay {
            self.shown = true;
            self.pb.set_style(
                ProgressStyle::with_template(
                    "{msg} [{bar:40}] {percent:>3}% {bytes}/{total_bytes} {elapsed_precise} (eta {eta})",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            self.pb.set_draw_target(ProgressDrawTarget::stderr());
        }
    }

    /// Clears the bar.
    pub fn done(&mut self) {
        if self.shown {
            self.pb.finish_and_clear();
        }
    }
}

impl memscope_export::Progress for Bar {
    fn plan(&mut self, bytes: u64) {
        self.total += bytes;
        self.pb.set_length(self.total);
    }

    fn advance(&mut self, bytes: u64) {
        self.pb.inc(bytes);
        self.maybe_show();
    }

    fn stage(&mut self, what: &str) {
        self.pb.set_message(what.to_owned());
        self.maybe_show();
    }
}
