//! Blocks summed up by where they were allocated (issue 23): groups of blocks that share their
//! stacks are merged by their site ([`crate::attribution`]: the first frame of the user's own
//! code and its caller), largest first. The console gets one line per site (the top
//! [`memscope_core::listing::CONSOLE_TOP`]); the log gets each site with its full stacks.
#![forbid(unsafe_code)]

use crate::attribution::{site_of, Site};
use memscope_core::listing::{top_n, CONSOLE_TOP};
use std::collections::HashMap;

/// Stacks listed per site in the full report.
pub const STACKS_PER_SITE: usize = 3;

/// Blocks allocated with the same stacks.
#[derive(Clone, Copy, Debug)]
pub struct StackGroup<'a> {
    /// `Call Stack(Python)` text, if recorded.
    pub py: Option<&'a str>,
    /// `Call Stack(C)` text, if recorded.
    pub c: Option<&'a str>,
    /// Blocks (objects, mappings).
    pub count: u64,
    /// Their bytes.
    pub bytes: u64,
}

struct SiteSum<'a> {
    site: Option<Site>,
    count: u64,
    bytes: u64,
    stacks: Vec<StackGroup<'a>>,
}

/// Console lines and full lines of `groups` summed up by site; `unit` names the blocks
/// (`block(s)`, `object(s)`), `no_stack` says how to get stacks.
pub fn site_lines(
    groups: &[StackGroup<'_>],
    unit: &str,
    no_stack: &str,
) -> (Vec<String>, Vec<String>) {
    let mut by: HashMap<Option<Site>, SiteSum> = HashMap::new();
    for g in groups.iter().filter(|g| g.count > 0) {
        let site = site_of(g.py, g.c);
        let s = by.entry(site.clone()).or_insert_with(|| SiteSum {
            site,
            count: 0,
            bytes: 0,
            stacks: Vec::new(),
        });
        s.count += g.count;
        s.bytes += g.bytes;
        s.stacks.push(*g);
    }
    let mut sums: Vec<SiteSum> = by.into_values().collect();
    sums.sort_by(|a, b| {
        b.bytes
            .cmp(&a.bytes)
            .then(b.count.cmp(&a.count))
            .then(a.site.cmp(&b.site))
    });
    let head = |s: &SiteSum| match &s.site {
        Some(site) => format!(
            "{} {unit}, {} bytes at {} [{}]",
            s.count,
            s.bytes,
            site.label(),
            site.rule.describe()
        ),
        None => format!(
            "{} {unit}, {} bytes with no call stack ({no_stack})",
            s.count, s.bytes
        ),
    };
    let rest = |rest: &[SiteSum]| {
        let (n, b) = rest
            .iter()
            .fold((0, 0), |a, s| (a.0 + s.count, a.1 + s.bytes));
        format!("… {} more site(s): {n} {unit}, {b} bytes", rest.len())
    };
    let shown = top_n(&sums, CONSOLE_TOP, |s, out| out.push(head(s)), rest);
    let all = top_n(
        &sums,
        usize::MAX,
        |s, out| {
            out.push(head(s));
            let mut stacks = s.stacks.clone();
            stacks.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(b.count.cmp(&a.count)));
            for g in stacks.iter().take(STACKS_PER_SITE) {
                if s.stacks.len() > 1 {
                    out.push(format!("    {} {unit}, {} bytes:", g.count, g.bytes));
                }
                for (label, st) in [("Python", g.py), ("C", g.c)] {
                    let frames = crate::attribution::frames(st);
                    if !frames.is_empty() {
                        out.push(format!("    Call Stack({label}):"));
                        out.extend(frames.iter().map(|f| format!("        {f}")));
                    }
                }
            }
            if stacks.len() > STACKS_PER_SITE {
                out.push(format!(
                    "    … {} more stack(s) at this site",
                    stacks.len() - STACKS_PER_SITE
                ));
            }
        },
        |_| String::new(),
    );
    (shown, all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_summed_by_their_first_frame_in_the_users_code() {
        let c =
            "_PyObject_Malloc at Objects/obmalloc.c:1998\ntype_call at Objects/typeobject.c:1134\n";
        let groups = [
            StackGroup {
                py: Some("/job/tiny.py(3): keep\n/job/tiny.py(9): <module>\n"),
                c: Some(c),
                count: 2,
                bytes: 2_000_000,
            },
            StackGroup {
                py: Some("/usr/lib/python3.11/copy.py(7): deepcopy\n/job/tiny.py(3): keep\n/job/tiny.py(9): <module>\n"),
                c: Some(c),
                count: 1,
                bytes: 1_000_000,
            },
            StackGroup {
                py: None,
                c: None,
                count: 5,
                bytes: 50,
            },
        ];
        let (shown, all) = site_lines(&groups, "block(s)", "run with --call-stack python:N");
        assert_eq!(
            shown,
            [
                "3 block(s), 3000000 bytes at /job/tiny.py(3): keep ← tiny.py(9): <module> [first frame in your code, Python stack]",
                "5 block(s), 50 bytes with no call stack (run with --call-stack python:N)",
            ]
        );
        assert!(all.contains(&"        _PyObject_Malloc at Objects/obmalloc.c:1998".to_owned()));
        assert!(all.contains(&"        /usr/lib/python3.11/copy.py(7): deepcopy".to_owned()));
    }
}
