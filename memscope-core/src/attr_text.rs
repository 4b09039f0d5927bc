//! The Attr cell: typed [`Attrs`] ⇄ msMemScope's `{key:value,...}` text and SQLite JSON.
//!
//! Grammar (behaviour spec §5.2, §14): pairs separated by commas, key and value by the first
//! colon, values unescaped and allowed to contain commas; a new pair starts only where the next
//! comma-separated piece looks like `key:` (a letter or `_`, then letters, digits, `_` or spaces).
//! Key order follows msMemScope; the seed's names are written (`inefficient`, `workspace ptr`),
//! msMemScope's spellings are read too (`inefficient_type`, `workspace_ptr`).

use crate::event::{
    AccessAttrs, AllocType, Attrs, Event, Inefficiency, LaunchAttrs, MemoryAttrs, PageType,
};
use crate::owner::OwnerChain;

/// Ordered key/value pairs of an event's Attr cell (empty when it has none).
pub fn attr_pairs(ev: &Event) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = Vec::new();
    let mut put = |k: &str, val: String| v.push((k.to_owned(), val));
    match &ev.attrs {
        Attrs::None => {}
        Attrs::Memory(m) => {
            put("allocation_id", m.allocation_id.to_string());
            put("addr", format!("0x{:016x}", m.addr));
            put("size", m.size.to_string());
            if m.pinned {
                put("pinned", "true".into());
            }
            if let Some(u) = m.used {
                put("used", u.to_string());
            }
            if let Some(t) = m.total {
                put("total", t.to_string());
            }
            if let Some(p) = m.process_used {
                put("process_used", p.to_string());
            }
            if let Some(d) = m.device_used {
                put("device_used", d.to_string());
            }
            if m.shadow {
                put("shadow", "true".into());
            }
            if let Some(o) = &m.owner {
                put("owner", o.to_string());
            }
            if !m.inefficient.is_empty() {
                let t: Vec<_> = m.inefficient.iter().map(|i| i.as_str()).collect();
                put("inefficient", t.join(","));
            }
            if let Some(p) = m.page_type {
                put("page_type", p.as_str().into());
            }
            if let Some(a) = m.alloc_type {
                put("alloc_type", a.as_str().into());
            }
            if let Some(mid) = m.module_id {
                put("MID", mid.to_string());
            }
            for (k, val) in &m.extra {
                put(k, val.clone());
            }
        }
        Attrs::Access(a) => {
            if let Some(id) = a.allocation_id {
                put("allocation_id", id.to_string());
            }
            if let Some(p) = ev.ptr {
                put("addr", format!("0x{p:016x}"));
            }
            if let Some(s) = a.size {
                put("size", s.to_string());
            }
            if let Some(t) = &a.pool {
                put("type", t.clone());
            }
            if let Some(d) = &a.dtype {
                put("dtype", d.clone());
            }
            if let Some(f) = &a.format {
                put("format", f.clone());
            }
            if let Some(s) = &a.shape {
                put("shape", s.clone());
            }
            for (k, val) in &a.extra {
                put(k, val.clone());
            }
        }
        Attrs::Launch(l) => {
            if let Some(p) = &l.path {
                put("path", p.clone());
            }
            if let Some(p) = l.workspace_ptr {
                put("workspace ptr", format!("0x{p:x}"));
            }
            if let Some(s) = l.workspace_size {
                put("workspace size", s.to_string());
            }
            if let Some(s) = l.stream_id {
                put("streamId", s.to_string());
            }
            if let Some(t) = l.task_id {
                put("taskId", t.to_string());
            }
            for (k, val) in &l.extra {
                put(k, val.clone());
            }
        }
        Attrs::Pairs(p) => v.extend(p.iter().cloned()),
    }
    v
}

/// The CSV Attr cell: `""` or `{k:v,...}` (the CSV writer adds RFC 4180 quoting).
pub fn format_attr(ev: &Event) -> String {
    let pairs = attr_pairs(ev);
    if pairs.is_empty() {
        return String::new();
    }
    let mut s = String::with_capacity(64);
    s.push('{');
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(k);
        s.push(':');
        s.push_str(v);
    }
    s.push('}');
    s
}

/// The SQLite Attr cell: a JSON object with every value a string; `{}` when empty.
pub fn attr_json(ev: &Event) -> String {
    let map: serde_json::Map<String, serde_json::Value> = attr_pairs(ev)
        .into_iter()
        .map(|(k, v)| (k, serde_json::Value::String(v)))
        .collect();
    serde_json::Value::Object(map).to_string()
}

fn looks_like_key(piece: &str) -> bool {
    let Some(colon) = piece.find(':') else { return false };
    let key = &piece[..colon];
    let mut chars = key.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ' ')
}

/// Parses an Attr cell (`{k:v,...}`, with or without braces, or a JSON object from a `.db`).
/// Values keep embedded commas. Returns the pairs in order.
pub fn parse_attr(cell: &str) -> Vec<(String, String)> {
    let t = cell.trim();
    if t.starts_with("{\"") {
        if let Ok(serde_json::Value::Object(m)) = serde_json::from_str::<serde_json::Value>(t) {
            return m
                .into_iter()
                .map(|(k, v)| match v {
                    serde_json::Value::String(s) => (k, s),
                    other => (k, other.to_string()),
                })
                .collect();
        }
    }
    let inner = t.strip_prefix('{').map(|s| s.strip_suffix('}').unwrap_or(s)).unwrap_or(t);
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

fn num(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

fn signed(s: &str) -> Option<i64> {
    s.trim().parse().ok()
}

/// Builds typed memory attributes from parsed pairs (MALLOC/FREE rows). 2025 dumps have no
/// `allocation_id` (0 here) and negative FREE sizes (made positive; the caller knows the kind).
pub fn memory_attrs(pairs: Vec<(String, String)>) -> MemoryAttrs {
    let mut m = MemoryAttrs::default();
    for (k, v) in pairs {
        match k.as_str() {
            "allocation_id" => m.allocation_id = num(&v).unwrap_or(0),
            "addr" => m.addr = num(&v).unwrap_or(0),
            "size" => m.size = signed(&v).map(i64::unsigned_abs).or_else(|| num(&v)).unwrap_or(0),
            "pinned" => m.pinned = v == "true",
            "used" => m.used = signed(&v),
            "total" => m.total = signed(&v),
            "process_used" => m.process_used = signed(&v),
            "device_used" => m.device_used = signed(&v),
            "shadow" => m.shadow = v == "true",
            "owner" => m.owner = (!v.is_empty()).then(|| OwnerChain::parse(&v)),
            "inefficient" | "inefficient_type" => {
                m.inefficient = v.split(',').filter_map(Inefficiency::parse).collect()
            }
            "page_type" => {
                m.page_type = match v.as_str() {
                    "huge" => Some(PageType::Huge),
                    "giant" => Some(PageType::Giant),
                    _ => Some(PageType::Normal),
                }
            }
            "alloc_type" => {
                m.alloc_type = Some(if v == "create" { AllocType::Create } else { AllocType::Alloc })
            }
            "MID" => m.module_id = num(&v).map(|x| x as u32),
            _ => m.extra.push((k, v)),
        }
    }
    m
}

/// Builds typed access attributes from parsed pairs (ACCESS rows).
pub fn access_attrs(pairs: Vec<(String, String)>) -> AccessAttrs {
    let mut a = AccessAttrs::default();
    for (k, v) in pairs {
        match k.as_str() {
            "allocation_id" => a.allocation_id = num(&v),
            "addr" => {}
            "size" => a.size = num(&v),
            "type" => a.pool = Some(v),
            "dtype" => a.dtype = Some(v),
            "format" => a.format = Some(v),
            "shape" => a.shape = Some(v),
            _ => a.extra.push((k, v)),
        }
    }
    a
}

/// Builds typed launch attributes from parsed pairs (OP_LAUNCH / KERNEL_LAUNCH rows).
pub fn launch_attrs(pairs: Vec<(String, String)>) -> LaunchAttrs {
    let mut l = LaunchAttrs::default();
    for (k, v) in pairs {
        match k.as_str() {
            "path" => l.path = Some(v),
            "workspace ptr" | "workspace_ptr" => l.workspace_ptr = num(&v),
            "workspace size" | "workspace_size" => l.workspace_size = num(&v),
            "streamId" => l.stream_id = signed(&v),
            "taskId" => l.task_id = signed(&v),
            _ => l.extra.push((k, v)),
        }
    }
    l
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{EventKind, EventType};

    #[test]
    fn attr_values_with_commas_and_colons_survive_parsing() {
        let p = parse_attr("{allocation_id:3,addr:0x10,shape:torch.Size([2, 3]),inefficient_type:a,b,path:x:y}");
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
            inefficient: vec![Inefficiency::EarlyAllocation, Inefficiency::TemporaryIdleness],
            ..MemoryAttrs::default()
        };
        ev.attrs = Attrs::Memory(m.clone());
        let text = format_attr(&ev);
        assert_eq!(
            text,
            "{allocation_id:1,addr:0x0000000000003039,size:10,used:10,total:10,owner:PTA@gradient@ops@memscope,inefficient:early_allocation,temporary_idleness}"
        );
        assert_eq!(memory_attrs(parse_attr(&text)), m);
        assert_eq!(ev.kind, EventKind::Malloc);
        let json: serde_json::Value = serde_json::from_str(&attr_json(&ev)).unwrap();
        assert_eq!(json["size"], "10");
    }

    #[test]
    fn negative_2025_free_sizes_become_positive() {
        let m = memory_attrs(parse_attr("{addr:20615843020800,size:-16384,owner:,MID:7}"));
        assert_eq!(m.size, 16384);
        assert_eq!(m.addr, 20615843020800);
        assert_eq!(m.module_id, Some(7));
        assert_eq!(m.owner, None);
    }
}
