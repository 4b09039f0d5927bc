//! `memscope top [RUN_DIR|--pid PID]`: the memory of a running `memscope run`, refreshed every
//! second in the terminal (issue 38). It asks the run's collector for frames through the spool
//! ([`memscope_collect::live_view`]): the job is not read, slowed or touched, and the collector
//! works for it only while it watches.

mod render;

use memscope_longjobs::locate;

use memscope_collect::live_view::{TopFile, FORMAT, FRAMES, REQUEST};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// Options of `memscope top`.
#[derive(clap::Args, Debug)]
pub struct TopArgs {
    /// Output path of the running `memscope run` (where its `.memscope_spool_<pid>/` is), or
    /// that spool [default: memscopeDumpResults, else the current directory].
    #[arg(value_name = "RUN_DIR", conflicts_with = "pid")]
    pub dir: Option<PathBuf>,
    /// The running `memscope run` (or a plain Python job's collector), or any process of its
    /// job.
    #[arg(long, value_name = "PID")]
    pub pid: Option<u32>,
    /// Print one frame and exit (for scripts; no terminal needed).
    #[arg(long)]
    pub once: bool,
    /// With --once: the frame as JSON (the format of the spool's top.json).
    #[arg(long, requires = "once")]
    pub json: bool,
}

/// Runs `memscope top`.
///
/// # Errors
/// No running run found, no terminal without `--once`, or no frame in time (one line).
pub fn run(a: &TopArgs) -> anyhow::Result<()> {
    let spool = match (&a.dir, a.pid) {
        (_, Some(pid)) => locate::of_pid(pid),
        (Some(d), None) => locate::in_dir(d),
        (None, None) => {
            let default = Path::new(memscope_dump::layout::DEFAULT_OUTPUT);
            if default.is_dir() {
                locate::in_dir(default).or_else(|e| locate::in_dir(Path::new(".")).map_err(|_| e))
            } else {
                locate::in_dir(Path::new("."))
            }
        }
    }
    .map_err(anyhow::Error::msg)?;
    let title = spool
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix(memscope_stream::spool::SPOOL_PREFIX))
        .map_or_else(
            || spool.display().to_string(),
            |p| format!("memscope pid {p}"),
        );
    if a.once {
        let file = one_frame(&spool)?;
        let _ = std::fs::remove_file(spool.join(REQUEST));
        if a.json {
            println!("{}", serde_json::to_string_pretty(&file)?);
        } else {
            print!("{}", render::frame(&file, &title, 120));
        }
        return Ok(());
    }
    let term = console::Term::stdout();
    if !term.is_term() {
        anyhow::bail!("the live view needs a terminal; for scripts use --once (--json)");
    }
    interactive(&spool, &title, &term)
}

/// Touches `<spool>/top.request`: the collector writes frames while it is fresh.
fn ask(spool: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(spool.join(REQUEST))?;
    f.write_all(std::process::id().to_string().as_bytes())
}

/// `<spool>/top.json`, if there and readable.
fn read_frames(spool: &Path) -> Option<TopFile> {
    let text = std::fs::read(spool.join(FRAMES)).ok()?;
    let f: TopFile = serde_json::from_slice(&text).ok()?;
    (f.format == FORMAT).then_some(f)
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Asks for frames and waits (up to 5 s) for a file whose every running process's frame was
/// built after the request.
fn one_frame(spool: &Path) -> anyhow::Result<TopFile> {
    let asked = now_ns();
    ask(spool).map_err(|e| anyhow::anyhow!("{}: {e}", spool.join(REQUEST).display()))?;
    let start = Instant::now();
    let mut last = None;
    while start.elapsed() < Duration::from_secs(5) {
        if let Some(f) = read_frames(spool) {
            let fresh =
                f.at_ns >= asked && f.processes.iter().all(|p| !p.alive || p.at_ns >= asked);
            if fresh {
                return Ok(f);
            }
            last = Some(f);
        }
        if !spool.is_dir() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let f = last.ok_or_else(|| {
        anyhow::anyhow!(
            "{}: the collector wrote no frame in 5 s (a memscope older than `top`, or the run ended)",
            spool.display()
        )
    })?;
    // an older frame rather than none, said as such
    let age = now_ns().saturating_sub(f.at_ns) as f64 / 1e9;
    eprintln!(
        "memscope top: {}; the last frame, from {age:.1} s ago, follows",
        if spool.is_dir() {
            "no fresh frame in 5 s"
        } else {
            "the run has ended"
        }
    );
    Ok(f)
}

/// Writes terminal control sequences as they are (the crate's `print!` escapes them);
/// errors are ignored, as for every line memscope prints.
fn raw(s: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(s.as_bytes());
    let _ = out.flush();
}

fn interactive(spool: &Path, title: &str, term: &console::Term) -> anyhow::Result<()> {
    // the key thread may still sit in a raw-mode read when the view ends (the run ended, a
    // signal): the terminal's settings from before are put back at the end
    let saved = nix::sys::termios::tcgetattr(std::io::stdin()).ok();
    let quit = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, quit.clone())?;
    }
    // keys on their own thread: `read_key` blocks (and puts the terminal in raw mode meanwhile)
    {
        let quit = quit.clone();
        let keys = term.clone();
        std::thread::spawn(move || {
            while let Ok(k) = keys.read_key() {
                if matches!(
                    k,
                    console::Key::Char('q') | console::Key::Char('Q') | console::Key::Escape
                ) || k == console::Key::CtrlC
                {
                    quit.store(true, Ordering::Relaxed);
                    break;
                }
            }
        });
    }
    // the alternate screen, as top(1): the shell's screen comes back at the end
    raw("\x1b[?1049h\x1b[?25l");
    let mut last: Option<TopFile> = None;
    let mut next = Instant::now();
    let ended = loop {
        if quit.load(Ordering::Relaxed) {
            break false;
        }
        if Instant::now() >= next {
            next += Duration::from_secs(1);
            if !spool.is_dir() {
                break true;
            }
            let _ = ask(spool);
            if let Some(f) = read_frames(spool) {
                last = Some(f);
            }
            let (_, cols) = term.size();
            let text = match &last {
                Some(f) => render::frame(f, title, usize::from(cols)),
                None => {
                    format!("memscope top · {title} · waiting for the collector's first frame…\n")
                }
            };
            // the job's texts (owners, sites, programs) cannot drive the terminal; the
            // terminal is in raw mode while the key thread waits: lines end in CR LF
            let text = memscope_core::sanitize::escape_controls_keep_lines(&text);
            raw(&format!(
                "\x1b[H\x1b[2J{}\r\nq quits",
                text.replace('\n', "\r\n")
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    raw("\x1b[?25h\x1b[?1049l");
    if let Some(t) = &saved {
        let _ =
            nix::sys::termios::tcsetattr(std::io::stdin(), nix::sys::termios::SetArg::TCSANOW, t);
    }
    let _ = std::fs::remove_file(spool.join(REQUEST));
    if ended {
        if let Some(f) = &last {
            print!("{}", render::frame(f, title, usize::from(term.size().1)));
        }
        eprintln!("memscope top: the run has ended (its spool is gone); its last frame is above");
    }
    Ok(())
}
