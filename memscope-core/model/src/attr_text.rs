//! The Attr cell: typed [`Attrs`] ⇄ msMemScope's `{key:value,...}` text and SQLite JSON.
//!
//! Grammar (behaviour spec §5.2, §14): pairs separated by commas, key and value by the first
//! colon, values unescaped and allowed to contain commas; a new pair starts only where the next
//! comma-separated piece looks like `key:` (a letter or `_`, then letters, digits, `_` or spaces).
//! Key order follows msMemScope; the seed's names are written (`inefficient`, `workspace ptr`),
//! msMemScope's spellings are read too (`inefficient_type`, `workspace_ptr`), and pool names in
//! values (`type:MINDSPORE`, `owner:MINDSPORE@…`) are read as the seed spells them.

use crate::event::{AccessAttrs, Attrs, Event, EventType, Inefficiency, LaunchAttrs, MemoryAttrs};
use crate::owner::OwnerChain;

pub mod values;

/// One Attr value, borrowed from the event (formatted only by the writer that needs it).
#[derive(Clone, Copy, Debug)]
pub enum AttrValue<'a> {
    /// Decimal unsigned.
    U(u64),
    /// Decimal signed.
    I(i64),
    /// `0x%016x` address.
    Addr(u64),
    /// `0x%x` address.
    Hex(u64),
    /// Text as is.
    S(&'a str),
    /// `A@B@C`.
    Owner(&'a OwnerChain),
    /// Inefficiency classes joined with `,`.
    Ineff(&'a [Inefficiency]),
}

impl AttrValue<'_> {
    /// Appends the value's text to `out`.
    pub fn write_to(&self, out: &mut String) {
        use std::fmt::Write;
        match *self {
            AttrValue::U(v) => out.push_str(itoa::Buffer::new().format(v)),
            AttrValue::I(v) => out.push_str(itoa::Buffer::new().format(v)),
            AttrValue::Addr(v) => {
                let mut b = [0u8; 18];
                let hex = fmt_ptr(v, &mut b);
                out.push_str(std::str::from_utf8(hex).unwrap_or("0x?"));
            }
            AttrValue::Hex(v) => {
                let _ = write!(out, "0x{v:x}");
            }
            AttrValue::S(s) => out.push_str(s),
            AttrValue::Owner(o) => {
                for (i, l) in o.levels().iter().enumerate() {
                    if i > 0 {
                        out.push('@');
                    }
                    out.push_str(l);
                }
            }
            AttrValue::Ineff(t) => {
                for (i, x) in t.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(x.as_str());
                }
            }
        }
    }
}

/// Calls `f` with each Attr key and value of `ev`, in msMemScope's order (behaviour spec §5.2).
pub fn visit_attrs(ev: &Event, f: &mut dyn FnMut(&str, AttrValue<'_>)) {
    use AttrValue::*;
    match &ev.attrs {
        Attrs::None => {}
        Attrs::Memory(m) => {
            f("allocation_id", U(m.allocation_id));
            f("addr", Addr(m.addr));
            f("size", U(m.size));
            if m.pinned {
                f("pinned", S("true"));
            }
            if let Some(u) = m.used {
                f("used", I(u));
            }
            if let Some(t) = m.total {
                f("total", I(t));
            }
            if let Some(p) = m.process_used {
                f("process_used", I(p));
            }
            if let Some(d) = m.device_used {
                f("device_used", I(d));
            }
            if m.shadow {
                f("shadow", S("true"));
            }
            if let Some(o) = &m.owner {
                f("owner", Owner(o));
            }
            if !m.inefficient.is_empty() {
                f("inefficient", Ineff(&m.inefficient));
            }
            if let Some(p) = m.page_type {
                f("page_type", S(p.as_str()));
            }
            if let Some(a) = m.alloc_type {
                f("alloc_type", S(a.as_str()));
            }
            if let Some(mid) = m.module_id {
                f("MID", U(mid as u64));
            }
            for (k, v) in &m.extra {
                f(k, S(v));
            }
        }
        Attrs::Access(a) => {
            if let Some(id) = a.allocation_id {
                f("allocation_id", U(id));
            }
            if let Some(p) = ev.ptr {
                f("addr", Addr(p));
            }
            if let Some(s) = a.size {
                f("size", U(s));
            }
            if let Some(t) = &a.pool {
                f("type", S(t));
            }
            if let Some(d) = &a.dtype {
                f("dtype", S(d));
            }
            if let Some(x) = &a.format {
                f("format", S(x));
            }
            if let Some(x) = &a.shape {
                f("shape", S(x));
            }
            for (k, v) in &a.extra {
                f(k, S(v));
            }
        }
        Attrs::Launch(l) => {
            if let Some(p) = &l.path {
                f("path", S(p));
            }
            if let Some(p) = l.workspace_ptr {
                f("workspace ptr", Hex(p));
            }
            if let Some(s) = l.workspace_size {
                f("workspace size", U(s));
            }
            if let Some(s) = l.stream_id {
                f("streamId", I(s));
            }
            if let Some(t) = l.task_id {
                f("taskId", I(t));
            }
            if let Some(s) = l.stream {
                f("stream", Hex(s));
            }
            for (k, v) in &l.extra {
                f(k, S(v));
            }
        }
        Attrs::Pairs(p) => {
            for (k, v) in p {
                f(k, S(v));
            }
        }
    }
}

/// Ordered key/value pairs of an event's Attr cell (empty when it has none).
pub fn attr_pairs(ev: &Event) -> Vec<(String, String)> {
    let mut v = Vec::new();
    visit_attrs(ev, &mut |k, val| {
        let mut s = String::new();
        val.write_to(&mut s);
        v.push((k.to_owned(), s));
    });
    v
}

/// Appends the CSV Attr cell to `out`: nothing, or `{k:v,...}` (the CSV writer adds RFC 4180
/// quoting).
pub fn write_attr(ev: &Event, out: &mut String) {
    let mut first = true;
    visit_attrs(ev, &mut |k, v| {
        out.push(if first { '{' } else { ',' });
        first = false;
        out.push_str(k);
        out.push(':');
        v.write_to(out);
    });
    if !first {
        out.push('}');
    }
}

/// The CSV Attr cell: `""` or `{k:v,...}`.
pub fn format_attr(ev: &Event) -> String {
    let mut s = String::new();
    write_attr(ev, &mut s);
    s
}

/// Appends `s` to `out` as a JSON string literal (quotes and escapes), without building a
/// `serde_json::Value`.
pub fn push_json_str(out: &mut String, s: &str) {
    use std::fmt::Write;
    out.push('"');
    // runs that need no escape (nearly every value) are copied at once
    let mut clean = 0;
    for (i, b) in s.bytes().enumerate() {
        if b >= 0x20 && b != b'"' && b != b'\\' {
            continue;
        }
        out.push_str(&s[clean..i]);
        clean = i + 1;
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            _ => {
                let _ = write!(out, "\\u{:04x}", b);
            }
        }
    }
    out.push_str(&s[clean..]);
    out.push('"');
}

/// Appends the SQLite Attr cell to `out`: a JSON object with every value a string; `{}` when
/// empty (msMemScope's `.db` convention).
pub fn write_attr_json(ev: &Event, out: &mut String) {
    write_attr_json_with(ev, out, &mut String::new());
}

/// [`write_attr_json`] with a caller's buffer for the values (a writer of many rows keeps one).
pub fn write_attr_json_with(ev: &Event, out: &mut String, val: &mut String) {
    out.push('{');
    let mut first = true;
    visit_attrs(ev, &mut |k, v| {
        if !first {
            out.push(',');
        }
        first = false;
        push_json_str(out, k);
        out.push(':');
        match v {
            // digits and hex digits need no escape: written in place (most of a row's cell)
            AttrValue::U(_) | AttrValue::I(_) | AttrValue::Addr(_) | AttrValue::Hex(_) => {
                out.push('"');
                v.write_to(out);
                out.push('"');
            }
            AttrValue::S(s) => push_json_str(out, s),
            _ => {
                val.clear();
                v.write_to(val);
                push_json_str(out, val);
            }
        }
    });
    out.push('}');
}

/// The SQLite Attr cell as a new string.
pub fn attr_json(ev: &Event) -> String {
    let mut s = String::new();
    write_attr_json(ev, &mut s);
    s
}

fn looks_like_key(piece: &str) -> bool {
    let Some(colon) = piece.find(':') else {
        return false;
    };
    let key = &piece[..colon];
    let mut chars = key.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ' ')
}

/// Parses an Attr cell (`{k:v,...}`, with or without braces, or a JSON object from a `.db`).
/// Values keep embedded commas. Returns the pairs in order. Lenient: a cell that starts like
/// JSON but is not valid JSON is read as text (plugins' free-form attributes); the dump
/// readers use [`try_parse_attr`].
pub fn parse_attr(cell: &str) -> Vec<(String, String)> {
    try_parse_attr(cell).unwrap_or_else(|_| parse_text_attr(cell.trim()))
}

/// As [`parse_attr`], but a cell that starts like a JSON object (`{"`) must be valid JSON
/// (nesting deeper than 128 included): the dump readers never guess.
///
/// # Errors
/// The JSON error, in one line.
pub fn try_parse_attr(cell: &str) -> Result<Vec<(String, String)>, String> {
    let t = cell.trim();
    if t.starts_with("{\"") {
        return match serde_json::from_str::<serde_json::Value>(t) {
            Ok(serde_json::Value::Object(m)) => Ok(m
                .into_iter()
                .map(|(k, v)| match v {
                    serde_json::Value::String(s) => (k, s),
                    other => (k, other.to_string()),
                })
                .collect()),
            Ok(_) => Err("Attr is not a JSON object".to_owned()),
            Err(e) => Err(format!("Attr is not valid JSON ({e})")),
        };
    }
    Ok(parse_text_attr(t))
}

fn parse_text_attr(t: &str) -> Vec<(String, String)> {
    let inner = t
        .strip_prefix('{')
        .map(|s| s.strip_suffix('}').unwrap_or(s))
        .unwrap_or(t);
    let mut out: Vec<(String, String)> = Vec::new();
    if inner.is_empty() {
        return out;
    }
    for piece in inner.split(',') {
        match out.last_mut() {
            Some(last) if !looks_like_key(piece) => {
                last.1.push(',');
                last.1.push_str(piece);
            }
            _ => match piece.split_once(':') {
                Some((k, v)) => out.push((k.to_owned(), v.to_owned())),
                None => out.push((piece.to_owned(), String::new())),
            },
        }
    }
    out
}

/// A pool name as the seed spells it: msMemScope's `MINDSPORE` (and the other spellings
/// [`EventType::parse`] accepts) become `MindSpore` …; anything else is kept.
pub fn seed_pool(v: &str) -> String {
    match EventType::parse(v) {
        Some(t) if t.is_memory() => t.as_str().to_owned(),
        _ => v.to_owned(),
    }
}

/// An `owner` value read into a chain whose framework level is spelled as the seed spells it
/// (`MINDSPORE@x` → `MindSpore@x`); `None` for an empty value.
pub fn seed_owner(v: &str) -> Option<OwnerChain> {
    if v.is_empty() {
        return None;
    }
    let c = OwnerChain::parse(v);
    match c.levels().first() {
        Some(first) if seed_pool(first) != *first => {
            let mut n = OwnerChain::framework(&seed_pool(first));
            for l in &c.levels()[1..] {
                n.push(l);
            }
            Some(n)
        }
        _ => Some(c),
    }
}

/// Builds typed memory attributes from parsed pairs (MALLOC/FREE rows). 2025 dumps have no
/// `allocation_id` (0 here) and negative FREE sizes (made positive; the caller knows the kind).
///
/// # Errors
/// A number that does not parse, or a size of 2^63 or more.
pub fn memory_attrs(pairs: Vec<(String, String)>) -> Result<MemoryAttrs, String> {
    let mut m = MemoryAttrs::default();
    for (k, v) in &pairs {
        crate::attr_text::values::apply_memory(&mut m, k, v)?;
    }
    Ok(m)
}

/// Builds typed access attributes from parsed pairs (ACCESS rows).
///
/// # Errors
/// As [`memory_attrs`].
pub fn access_attrs(pairs: Vec<(String, String)>) -> Result<AccessAttrs, String> {
    let mut a = AccessAttrs::default();
    for (k, v) in &pairs {
        crate::attr_text::values::apply_access(&mut a, k, v)?;
    }
    Ok(a)
}

/// Builds typed launch attributes from parsed pairs (OP_LAUNCH / KERNEL_LAUNCH rows).
///
/// # Errors
/// A number that does not parse (`workspace ptr` may be `(nil)`, glibc's `%p` of NULL).
pub fn launch_attrs(pairs: Vec<(String, String)>) -> Result<LaunchAttrs, String> {
    use crate::attr_text::values::{signed, unsigned};
    let mut l = LaunchAttrs::default();
    for (k, v) in pairs {
        match k.as_str() {
            "path" => l.path = Some(v),
            "workspace ptr" | "workspace_ptr" => {
                l.workspace_ptr = Some(if v.trim() == "(nil)" {
                    0
                } else {
                    unsigned(&k, &v)?
                })
            }
            "workspace size" | "workspace_size" => l.workspace_size = Some(unsigned(&k, &v)?),
            "streamId" => l.stream_id = Some(signed(&k, &v)?),
            "taskId" => l.task_id = Some(signed(&k, &v)?),
            "stream" => l.stream = Some(unsigned(&k, &v)?),
            _ => l.extra.push((k, v)),
        }
    }
    Ok(l)
}

/// `0x%016x` into `buf` without allocating.
pub fn fmt_ptr(p: u64, buf: &mut [u8; 18]) -> &[u8] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    buf[0] = b'0';
    buf[1] = b'x';
    for i in 0..16 {
        buf[2 + i] = HEX[((p >> ((15 - i) * 4)) & 0xf) as usize];
    }
    &buf[..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_strings_escape_quotes_backslashes_and_controls_and_keep_the_rest_as_is() {
        for text in [
            "",
            "plain text, 64 KiB",
            "a \"quoted\" \\ path\n\r\t\u{1}\u{1f}end",
            "中文 ü \u{7f}",
            "\"",
        ] {
            let mut out = String::from("x");
            push_json_str(&mut out, text);
            let back: String = serde_json::from_str(&out[1..]).unwrap();
            assert_eq!(back, text, "{out}");
            assert!(!out[1..].chars().any(|c| (c as u32) < 0x20), "{out}");
        }
        let mut out = String::new();
        push_json_str(&mut out, "a\u{1}b");
        assert_eq!(out, "\"a\\u0001b\"");
    }
    use crate::event::{EventKind, EventType};

    #[test]
    fn attr_values_with_commas_and_colons_survive_parsing() {
        let p = parse_attr(
            "{allocation_id:3,addr:0x10,shape:torch.Size([2, 3]),inefficient_type:a,b,path:x:y}",
        );
        assert_eq!(p[2], ("shape".into(), "torch.Size([2, 3])".into()));
        assert_eq!(p[3], ("inefficient_type".into(), "a,b".into()));
        assert_eq!(p[4], ("path".into(), "x:y".into()));
        let j = parse_attr(r#"{"allocation_id":"1","addr":"0x10"}"#);
        assert_eq!(j[1], ("addr".into(), "0x10".into()));
    }

    #[test]
    fn memory_attrs_format_in_msmemscope_order_and_parse_back() {
        let mut ev = Event::new(EventType::Pta, 1, 1, 1);
        let m = MemoryAttrs {
            allocation_id: 1,
            addr: 0x3039,
            size: 10,
            used: Some(10),
            total: Some(10),
            owner: Some(OwnerChain::parse("PTA@gradient@ops@memscope")),
            inefficient: vec![
                Inefficiency::EarlyAllocation,
                Inefficiency::TemporaryIdleness,
            ],
            ..MemoryAttrs::default()
        };
        ev.attrs = Attrs::Memory(m.clone());
        let text = format_attr(&ev);
        assert_eq!(
            text,
            "{allocation_id:1,addr:0x0000000000003039,size:10,used:10,total:10,owner:PTA@gradient@ops@memscope,inefficient:early_allocation,temporary_idleness}"
        );
        assert_eq!(memory_attrs(parse_attr(&text)).unwrap(), m);
        assert_eq!(ev.kind, EventKind::Malloc);
        let json: serde_json::Value = serde_json::from_str(&attr_json(&ev)).unwrap();
        assert_eq!(json["size"], "10");
    }

    #[test]
    fn negative_2025_free_sizes_become_positive() {
        let m = memory_attrs(parse_attr("{addr:20615843020800,size:-16384,owner:,MID:7}")).unwrap();
        assert_eq!(m.size, 16384);
        assert_eq!(m.addr, 20615843020800);
        assert_eq!(m.module_id, Some(7));
        assert_eq!(m.owner, None);
    }
}
