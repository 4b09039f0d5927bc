//! Call-stack lines of the dumps as (file, line, function) frames, the shape viewers want.
//!
//! Lines are parsed in the spellings the dumps use:
//! * Python (msMemScope): `file(line): function`;
//! * C, memscope: `function at file:line[ (inlined)]`, `function in module`,
//!   `symbol+0x1f in module`, `0x7f.. in module+0x..`, `0x7f..`;
//! * C, msMemScope (`backtrace_symbols`): `module(symbol+0x1f) [0x7f..]`.
//!
//! Anything else becomes a frame named by the whole line, with an empty file and line 0, so no
//! text is lost.

/// One stack frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    /// Source file or module path (may be empty).
    pub filename: &'a str,
    /// Line number, 0 when unknown.
    pub line: i64,
    /// Function or symbol.
    pub name: &'a str,
}

fn python(l: &str) -> Option<Frame<'_>> {
    let (head, name) = l.split_once("): ")?;
    let open = head.rfind('(')?;
    let line: i64 = head[open + 1..].parse().ok()?;
    Some(Frame {
        filename: &head[..open],
        line,
        name,
    })
}

fn c_at(l: &str) -> Option<Frame<'_>> {
    let (name, loc) = l.rsplit_once(" at ")?;
    let loc = loc.strip_suffix(" (inlined)").unwrap_or(loc);
    let (file, line) = loc.rsplit_once(':')?;
    Some(Frame {
        filename: file,
        line: line.parse().ok()?,
        name,
    })
}

fn c_in(l: &str) -> Option<Frame<'_>> {
    let (name, module) = l.rsplit_once(" in ")?;
    let module = module.strip_suffix(" (inlined)").unwrap_or(module);
    Some(Frame {
        filename: module,
        line: 0,
        name,
    })
}

fn backtrace(l: &str) -> Option<Frame<'_>> {
    let (head, _addr) = l.rsplit_once(" [")?;
    let open = head.find('(')?;
    let name = head[open + 1..].strip_suffix(')')?;
    Some(Frame {
        filename: &head[..open],
        line: 0,
        name: if name.is_empty() { head } else { name },
    })
}

/// The frame of one stack line (Python when `python`, else C).
pub fn parse_line(l: &str, is_python: bool) -> Frame<'_> {
    let parsed = if is_python {
        python(l)
    } else {
        c_at(l).or_else(|| backtrace(l)).or_else(|| c_in(l))
    };
    parsed.unwrap_or(Frame {
        filename: "",
        line: 0,
        name: l,
    })
}

/// The lines of a stack cell that hold frames (empty lines and msMemScope's `NA` skipped).
pub fn lines(stack: Option<&str>) -> impl Iterator<Item = &str> {
    stack
        .unwrap_or("")
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty() && *l != "NA")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f<'a>(filename: &'a str, line: i64, name: &'a str) -> Frame<'a> {
        Frame {
            filename,
            line,
            name,
        }
    }

    #[test]
    fn stack_lines_of_both_tools_become_frames() {
        assert_eq!(
            parse_line("/a/train.py(23): forward", true),
            f("/a/train.py", 23, "forward")
        );
        assert_eq!(
            parse_line("alloc_block at /src/pool.c:17 (inlined)", false),
            f("/src/pool.c", 17, "alloc_block")
        );
        assert_eq!(
            parse_line("main+0x1f in /usr/bin/x", false),
            f("/usr/bin/x", 0, "main+0x1f")
        );
        assert_eq!(
            parse_line("/lib/libc.so.6(malloc+0x10) [0x7f0000001234]", false),
            f("/lib/libc.so.6", 0, "malloc+0x10")
        );
        assert_eq!(parse_line("0x7f00", false), f("", 0, "0x7f00"));
        assert_eq!(parse_line("garbage(", true), f("", 0, "garbage("));
        let v: Vec<&str> = lines(Some("a\n\nNA\nb\n")).collect();
        assert_eq!(v, ["a", "b"]);
    }
}
