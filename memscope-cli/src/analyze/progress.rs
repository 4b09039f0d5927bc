//! Progress bar for reading dumps: hidden at first, drawn on stderr once a read has taken more
//! than a second (so small files print nothing), cleared when the read ends.

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A reader progress callback `(done, total)` for the file called `name`.
pub fn bar(name: &str) -> Box<dyn FnMut(u64, u64)> {
    let start = Instant::now();
    let pb = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
    let name = name.to_owned();
    let mut shown = false;
    Box::new(move |done, total| {
        if !shown && start.elapsed() > Duration::from_secs(1) && done < total {
            shown = true;
            pb.set_style(
                ProgressStyle::with_template(
                    "{msg} [{bar:40}] {percent:>3}% {elapsed_precise} (eta {eta})",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            pb.set_message(format!("reading {name}"));
            pb.set_draw_target(ProgressDrawTarget::stderr());
        }
        pb.set_length(total);
        pb.set_position(done.min(total));
        if done >= total && shown {
            pb.finish_and_clear();
        }
    })
}
