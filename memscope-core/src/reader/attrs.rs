//! Allocation-light parsing of the Attr cell of MALLOC/FREE rows, the bulk of every dump.
//!
//! Same grammar and the same result as `attr_text::memory_attrs(attr_text::parse_attr(cell))`
//! (a unit test checks it), but the pairs are borrowed from the cell, so only the owner chain
//! and unknown keys allocate. JSON cells (from a `.db`) take the general path.

use crate::attr_text::{access_attrs, memory_attrs, parse_attr, seed_owner, seed_pool};
use crate::event::{AccessAttrs, AllocType, Inefficiency, MemoryAttrs, PageType};

/// Position of the colon when `piece` looks like `key:...` (a letter or `_`, then letters,
/// digits, `_` or spaces, then `:`); one scan of the key only.
fn key_colon(piece: &str) -> Option<usize> {
    let b = piece.as_bytes();
    match b.first() {
        Some(c) if c.is_ascii_alphabetic() || *c == b'_' => {}
        _ => return None,
    }
    for (i, &c) in b.iter().enumerate().skip(1) {
        if c == b':' {
            return Some(i);
        }
        if !(c.is_ascii_alphanumeric() || c == b'_' || c == b' ') {
            return None;
        }
    }
    None
}

/// Calls `f(key, value)` for each pair of a `{k:v,...}` cell, in order; values keep embedded
/// commas (a new pair starts only at a piece that looks like `key:`).
pub fn for_each_pair<'a>(cell: &'a str, mut f: impl FnMut(&'a str, &'a str)) {
    let t = cell.trim();
    let inner = t
        .strip_prefix('{')
        .map(|s| s.strip_suffix('}').unwrap_or(s))
        .unwrap_or(t);
    if inner.is_empty() {
        return;
    }
    // (start of the pair, position of its first colon if any, end of its value)
    let mut cur: Option<(usize, Option<usize>, usize)> = None;
    let mut emit = |c: (usize, Option<usize>, usize)| match c.1 {
        Some(colon) => f(&inner[c.0..colon], &inner[colon + 1..c.2]),
        None => f(&inner[c.0..c.2], ""),
    };
    let mut start = 0;
    loop {
        let end = inner[start..].find(',').map_or(inner.len(), |i| start + i);
        let piece = &inner[start..end];
        let colon = key_colon(piece);
        match cur.as_mut() {
            Some(c) if colon.is_none() => c.2 = end,
            _ => {
                if let Some(c) = cur.take() {
                    emit(c);
                }
                let colon = colon.or_else(|| piece.find(':'));
                cur = Some((start, colon.map(|i| start + i), end));
            }
        }
        if end == inner.len() {
            break;
        }
        start = end + 1;
    }
    if let Some(c) = cur {
        emit(c);
    }
}

fn num(s: &str) -> Option<u64> {
    if let Some(h) = s.strip_prefix("0x") {
        if let Ok(v) = u64::from_str_radix(h, 16) {
            return Some(v);
        }
    } else if let Ok(v) = s.parse() {
        return Some(v);
    }
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

fn signed(s: &str) -> Option<i64> {
    s.parse().ok().or_else(|| s.trim().parse().ok())
}

/// Typed memory attributes of a MALLOC/FREE Attr cell (text or JSON).
pub fn memory_attrs_fast(cell: &str) -> MemoryAttrs {
    if cell.trim_start().starts_with("{\"") {
        return memory_attrs(parse_attr(cell));
    }
    let mut m = MemoryAttrs::default();
    for_each_pair(cell, |k, v| match k {
        "allocation_id" => m.allocation_id = num(v).unwrap_or(0),
        "addr" => m.addr = num(v).unwrap_or(0),
        "size" => {
            m.size = signed(v)
                .map(i64::unsigned_abs)
                .or_else(|| num(v))
                .unwrap_or(0)
        }
        "pinned" => m.pinned = v == "true",
        "used" => m.used = signed(v),
        "total" => m.total = signed(v),
        "process_used" => m.process_used = signed(v),
        "device_used" => m.device_used = signed(v),
        "shadow" => m.shadow = v == "true",
        "owner" => m.owner = seed_owner(v),
        "inefficient" | "inefficient_type" => {
            m.inefficient = v.split(',').filter_map(Inefficiency::parse).collect()
        }
        "page_type" => {
            m.page_type = Some(match v {
                "huge" => PageType::Huge,
                "giant" => PageType::Giant,
                _ => PageType::Normal,
            })
        }
        "alloc_type" => {
            m.alloc_type = Some(if v == "create" {
                AllocType::Create
            } else {
                AllocType::Alloc
            })
        }
        "MID" => m.module_id = num(v).map(|x| x as u32),
        _ => m.extra.push((k.to_owned(), v.to_owned())),
    });
    m
}

/// Typed access attributes of an ACCESS Attr cell (text or JSON); same result as
/// `attr_text::access_attrs(attr_text::parse_attr(cell))`.
pub fn access_attrs_fast(cell: &str) -> AccessAttrs {
    if cell.trim_start().starts_with("{\"") {
        return access_attrs(parse_attr(cell));
    }
    let mut a = AccessAttrs::default();
    for_each_pair(cell, |k, v| match k {
        "allocation_id" => a.allocation_id = num(v),
        "addr" => {}
        "size" => a.size = num(v),
        "type" => a.pool = Some(seed_pool(v)),
        "dtype" => a.dtype = Some(v.to_owned()),
        "format" => a.format = Some(v.to_owned()),
        "shape" => a.shape = Some(v.to_owned()),
        _ => a.extra.push((k.to_owned(), v.to_owned())),
    });
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_path_equals_the_general_attr_parser() {
        let cells = [
            "",
            "{}",
            "{allocation_id:4,addr:0x000012c041400000,size:16778240,total:20971520,used:16780288}",
            "{addr:20616939214848,size:-18944,owner:,total:2097152,used:3596800}",
            "{addr:20615843020800,size:16384,owner:,MID:7}",
            "{addr:1,size:2,owner:,MID:-1}",
            "{allocation_id:1,addr:0x10,size:10,used:0,page_type:huge,alloc_type:create}",
            "{allocation_id:1,addr:0x10,size:10,owner:PTA@gradient@ops,inefficient_type:early_allocation,late_deallocation}",
            "{allocation_id:1,addr:0x10,size:10,pinned:true,used:5,process_used:9,shadow:true,weird key:a,b,c:d}",
            "{junk,size:3,odd:x:y,1bad:z}",
            "allocation_id:2,size:9",
            r#"{"allocation_id":"1","addr":"0x10","size":"10"}"#,
        ];
        for c in cells {
            assert_eq!(
                memory_attrs_fast(c),
                memory_attrs(parse_attr(c)),
                "cell {c}"
            );
        }
    }

    #[test]
    fn access_fast_path_equals_the_general_parser() {
        let cells = [
            "",
            "{allocation_id:3,addr:0x1000,size:24,type:PTA,dtype:torch.float32,shape:torch.Size([2, 3])}",
            "{type:ATB,dtype:X,format:Y,shape:[2,3,],odd:1:2}",
            r#"{"type":"PTA","size":"8"}"#,
        ];
        for c in cells {
            assert_eq!(
                access_attrs_fast(c),
                access_attrs(parse_attr(c)),
                "cell {c}"
            );
        }
    }

    #[test]
    fn pairs_keep_commas_inside_values() {
        let mut got = Vec::new();
        for_each_pair("{shape:torch.Size([2, 3]),type:PTA}", |k, v| {
            got.push((k, v))
        });
        assert_eq!(got, vec![("shape", "torch.Size([2, 3])"), ("type", "PTA")]);
    }
}
