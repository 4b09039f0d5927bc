//! Text from inputs (dump cells, file names, marks) made safe for where memscope shows it.
//!
//! * [`escape_controls`]: for terminals, logs and one-line messages. Control characters (C0
//!   with NUL, DEL, C1 — ESC and CSI start terminal escape sequences), and the invisible
//!   bidirectional overrides and BOM, become `\n`, `\0`, `\u{1b}`, … so a dump cell can
//!   neither retitle nor recolour a terminal nor split a message into lines.
//! * [`csv_report_cell`]: for the CSV reports people open in spreadsheets (compare,
//!   decompose): a text cell that starts with `=`, `+`, `-`, `@`, TAB or CR gets a leading `'`
//!   (OWASP's CSV-injection rule; msMemScope refuses such names at the source). Numbers
//!   (`-1537`) are left alone. The msMemScope-compatible dumps are data files and keep
//!   their values exactly; see the README ("CSV files and spreadsheets").

use std::borrow::Cow;
use std::fmt::Write;

fn needs_escape(c: char, keep_newlines: bool) -> bool {
    match c {
        '\n' | '\t' if keep_newlines => false,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => true,
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}' => true,
        _ => false,
    }
}

fn escape(s: &str, keep_newlines: bool) -> Cow<'_, str> {
    if !s.chars().any(|c| needs_escape(c, keep_newlines)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if !needs_escape(c, keep_newlines) {
            out.push(c);
            continue;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\0' => out.push_str("\\0"),
            c => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
    Cow::Owned(out)
}

/// `s` with every control character, bidirectional override and BOM escaped (`\n`, `\0`,
/// `\u{1b}`): safe to print as one line on a terminal.
pub fn escape_controls(s: &str) -> Cow<'_, str> {
    escape(s, false)
}

/// As [`escape_controls`], but newlines and tabs are kept (multi-line text printed as is).
pub fn escape_controls_keep_lines(s: &str) -> Cow<'_, str> {
    escape(s, true)
}

/// `s` in double quotes for a message: `"` and `\` escaped, control characters as by
/// [`escape_controls`], and at most 64 characters shown (then `…`).
pub fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len().min(64) + 2);
    out.push('"');
    for (i, c) in s.chars().enumerate() {
        if i == 64 {
            out.push('…');
            break;
        }
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if needs_escape(c, false) => {
                let mut b = [0u8; 4];
                out.push_str(&escape(c.encode_utf8(&mut b), false));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Whether `s` is a plain decimal number (`-1537`, `+3`, `0.5`), which spreadsheets read as a
/// number and never as a formula.
fn is_number(s: &str) -> bool {
    let t = s.strip_prefix(['-', '+']).unwrap_or(s);
    !t.is_empty()
        && t.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && t.bytes().filter(|&b| b == b'.').count() <= 1
        && t.bytes().any(|b| b.is_ascii_digit())
}

/// A text cell of a CSV report, neutralised against formula injection: a leading `'` when it
/// starts with `=`, `+`, `-`, `@`, TAB or CR and is not a plain number.
pub fn csv_report_cell(s: &str) -> Cow<'_, str> {
    match s.as_bytes().first() {
        Some(b'=' | b'+' | b'-' | b'@' | b'\t' | b'\r') if !is_number(s) => {
            Cow::Owned(format!("'{s}"))
        }
        _ => Cow::Borrowed(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_and_escape_sequences_are_escaped() {
        assert_eq!(escape_controls("plain ü 名"), "plain ü 名");
        assert_eq!(
            escape_controls("\u{1b}]0;PWNED\u{7}x\0y\nz\u{9b}"),
            "\\u{1b}]0;PWNED\\u{7}x\\0y\\nz\\u{9b}"
        );
        assert_eq!(escape_controls("\u{feff}5"), "\\u{feff}5");
        assert_eq!(
            escape_controls_keep_lines("a\nb\tc\u{1b}"),
            "a\nb\tc\\u{1b}"
        );
        assert_eq!(quoted("a\"b\\c\0"), r#""a\"b\\c\0""#);
        assert_eq!(quoted(&"x".repeat(100)), format!("\"{}…\"", "x".repeat(64)));
    }

    #[test]
    fn formula_cells_get_a_quote_and_numbers_do_not() {
        assert_eq!(
            csv_report_cell("=HYPERLINK(\"http://x\",\"y\")"),
            "'=HYPERLINK(\"http://x\",\"y\")"
        );
        for s in ["+cmd", "-x", "@SUM(A1)", "\tx", "\rx", "-", "+-1", "--1"] {
            assert!(csv_report_cell(s).starts_with('\''), "{s:?}");
        }
        for s in ["-1537", "+3", "0.5", "-0.25", "aten::add", "", "N/A", "'=x"] {
            assert_eq!(csv_report_cell(s), s);
        }
    }
}
