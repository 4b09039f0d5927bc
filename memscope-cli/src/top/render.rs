//! One frame of `memscope top` as text: the processes, their allocators, the owners and sites
//! holding most (summed over processes) with their growth, and per-rank peaks.

use memscope_analysis::diff::size;
use memscope_collect::live_view::TopFile;
use memscope_longjobs::live::{HolderFrame, ProcessFrame};
use std::collections::BTreeMap;
use std::fmt::Write;

fn signed(n: i64) -> String {
    match n {
        0 => "0".to_owned(),
        n if n > 0 => format!("+{}", size(n as u64)),
        n => format!("-{}", size(n.unsigned_abs())),
    }
}

fn who(p: &ProcessFrame) -> String {
    match p.rank {
        Some(r) => format!("rank {r}"),
        None => format!("pid {}", p.pid),
    }
}

fn exe_name(exe: &str) -> &str {
    exe.rsplit('/').next().unwrap_or(exe)
}

/// `train.py(293): alloc` for `/home/me/proj/train.py(293): alloc` (a frame's file without
/// its directories); anything else as it is.
fn short_frame(frame: &str) -> String {
    match frame.split_once('(') {
        Some((file, rest)) if file.contains('/') => {
            format!("{}({rest}", file.rsplit('/').next().unwrap_or(file))
        }
        _ => frame.to_owned(),
    }
}

/// Cuts `s` to `w` characters (an ellipsis marks the cut).
fn fit(s: &str, w: usize) -> String {
    if s.chars().count() <= w {
        return s.to_owned();
    }
    let mut t: String = s.chars().take(w.saturating_sub(1)).collect();
    t.push('…');
    t
}

/// Holders with the same name summed over processes, largest first.
fn merged(frames: &[ProcessFrame], pick: fn(&ProcessFrame) -> &[HolderFrame]) -> Vec<HolderFrame> {
    let mut m: BTreeMap<&str, HolderFrame> = BTreeMap::new();
    for f in frames {
        for h in pick(f) {
            let e = m.entry(&h.name).or_insert_with(|| HolderFrame {
                name: h.name.clone(),
                ..HolderFrame::default()
            });
            e.bytes += h.bytes;
            e.blocks += h.blocks;
            e.growth += h.growth;
        }
    }
    let mut v: Vec<HolderFrame> = m.into_values().collect();
    v.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.name.cmp(&b.name)));
    v.truncate(memscope_longjobs::live::TOP_N);
    v
}

/// The frame as lines of at most `width` characters. `title`: what is watched.
pub fn frame(file: &TopFile, title: &str, width: usize) -> String {
    let width = width.max(60);
    let mut o = String::new();
    let procs = &file.processes;
    let running = procs.iter().filter(|p| p.alive).count();
    let _ = writeln!(
        o,
        "{}",
        fit(
            &format!(
                "memscope top · {title} · {} process(es), {running} running",
                procs.len()
            ),
            width
        )
    );
    let window = procs
        .iter()
        .filter(|p| p.alive)
        .map(|p| p.growth_window_s)
        .fold(0.0f64, f64::max);
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "{:<10} {:>8} {:>7} {:>8} {:>10}  PROGRAM",
        "PROCESS", "PID", "STEPS", "STEPS/S", "EVENTS"
    );
    for p in procs {
        if p.at_ns == 0 && p.alive {
            let line = format!(
                "{:<10} {:>8} {:>7} {:>8} {:>10}  {} (frame coming)",
                who(p),
                p.pid,
                "…",
                "…",
                "…",
                exe_name(&p.exe)
            );
            let _ = writeln!(o, "{}", fit(&line, width));
            continue;
        }
        let line = format!(
            "{:<10} {:>8} {:>7} {:>8.2} {:>10}  {}{}",
            who(p),
            p.pid,
            p.steps,
            p.steps_per_s,
            p.events,
            exe_name(&p.exe),
            if p.alive { "" } else { " (ended)" }
        );
        let _ = writeln!(o, "{}", fit(&line, width));
    }
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "{:<10} {:>6} {:<13} {:>11} {:>11} {:>11} {:>8}",
        "PROCESS", "DEVICE", "POOL", "ALLOCATED", "RESERVED", "PEAK", "BLOCKS"
    );
    let mut any = false;
    for p in procs {
        for pool in &p.pools {
            any = true;
            let _ = writeln!(
                o,
                "{:<10} {:>6} {:<13} {:>11} {:>11} {:>11} {:>8}",
                who(p),
                pool.device,
                fit(&pool.pool, 13),
                size(pool.allocated),
                pool.reserved.map_or("-".to_owned(), size),
                size(pool.peak),
                pool.blocks
            );
        }
    }
    if !any {
        let _ = writeln!(o, "  (no device memory allocated yet)");
    }
    for (heading, pick) in [
        (
            "OWNERS",
            (|f: &ProcessFrame| f.owners.as_slice()) as fn(&ProcessFrame) -> &[HolderFrame],
        ),
        ("SITES", |f: &ProcessFrame| f.sites.as_slice()),
    ] {
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "{heading} BY LIVE BYTES (growth over the last {:.0} s)",
            window
        );
        let _ = writeln!(o, "{:>11} {:>12} {:>8}  NAME", "LIVE", "GROWTH", "BLOCKS");
        let v = merged(procs, pick);
        if v.is_empty() {
            let _ = writeln!(o, "  (none)");
        }
        for h in v {
            let head = format!(
                "{:>11} {:>12} {:>8}  ",
                size(h.bytes),
                signed(h.growth),
                h.blocks
            );
            // a site is two frames on two lines: one line here, each frame's file without
            // its directories, so the line and function fit a narrow terminal
            let name = h
                .name
                .split('\n')
                .map(short_frame)
                .collect::<Vec<_>>()
                .join(" ← ");
            let _ = writeln!(o, "{}", fit(&format!("{head}{name}"), width));
        }
    }
    let ranked: Vec<&ProcessFrame> = procs.iter().filter(|p| !p.pools.is_empty()).collect();
    if ranked.len() > 1 {
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "{:<10} {:>8} {:>11} {:>11}",
            "PER RANK", "PID", "PEAK", "NOW"
        );
        for p in ranked {
            let peak: u64 = p.pools.iter().map(|x| x.peak).max().unwrap_or(0);
            let now: u64 = p.pools.iter().map(|x| x.allocated).sum();
            let _ = writeln!(
                o,
                "{:<10} {:>8} {:>11} {:>11}",
                who(p),
                p.pid,
                size(peak),
                size(now)
            );
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use memscope_longjobs::live::PoolFrame;

    fn proc(pid: u32, rank: u32, alloc: u64, owner: &str) -> ProcessFrame {
        ProcessFrame {
            pid,
            exe: "/usr/bin/python3".into(),
            rank: Some(rank),
            alive: true,
            at_ns: 1,
            steps: 10,
            steps_per_s: 2.5,
            growth_window_s: 60.0,
            events: 100,
            pools: vec![PoolFrame {
                device: rank.to_string(),
                pool: "PTA".into(),
                allocated: alloc,
                blocks: 3,
                reserved: Some(alloc * 2),
                peak: alloc + 1024,
            }],
            owners: vec![HolderFrame {
                name: owner.into(),
                bytes: alloc,
                blocks: 3,
                growth: 1 << 20,
            }],
            ..ProcessFrame::default()
        }
    }

    #[test]
    fn site_frames_lose_their_directories_and_a_process_without_a_frame_yet_is_said() {
        assert_eq!(
            short_frame("/home/me/proj/train.py(293): alloc"),
            "train.py(293): alloc"
        );
        assert_eq!(short_frame("(no stack)"), "(no stack)");
        let mut p = proc(10, 0, 1 << 20, "PTA");
        p.sites = vec![HolderFrame {
            name: "/a/b/train.py(293): alloc\n/a/b/train.py(524): main".into(),
            bytes: 1 << 20,
            blocks: 1,
            growth: 0,
        }];
        let waiting = ProcessFrame {
            pid: 11,
            alive: true,
            ..ProcessFrame::default()
        };
        let text = frame(
            &TopFile {
                processes: vec![p, waiting],
                ..TopFile::default()
            },
            "t",
            80,
        );
        assert!(
            text.contains("train.py(293): alloc ← train.py(524): main"),
            "{text}"
        );
        assert!(text.contains("(frame coming)"), "{text}");
    }

    #[test]
    fn sizes_read_in_binary_units_with_one_decimal() {
        assert_eq!(size(12), "12 B");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(size(3 << 30), "3.0 GiB");
        assert_eq!(signed(-(1 << 20)), "-1.0 MiB");
    }

    #[test]
    fn a_frame_lists_each_rank_its_pools_the_owners_summed_and_the_per_rank_peaks() {
        let file = TopFile {
            processes: vec![
                proc(10, 0, 1 << 30, "PTA@model"),
                proc(11, 1, 2 << 30, "PTA@model"),
            ],
            ..TopFile::default()
        };
        let text = frame(&file, "test", 100);
        assert!(text.contains("2 process(es), 2 running"), "{text}");
        assert!(
            text.contains("rank 1") && text.contains("2.0 GiB"),
            "{text}"
        );
        // one owner line, summed over the ranks: 3 GiB, grown by 2 MiB
        let owner: Vec<&str> = text.lines().filter(|l| l.contains("PTA@model")).collect();
        assert_eq!(owner.len(), 1, "{text}");
        assert!(
            owner[0].contains("3.0 GiB") && owner[0].contains("+2.0 MiB"),
            "{text}"
        );
        assert!(text.contains("PER RANK"), "{text}");
        assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
    }
}
