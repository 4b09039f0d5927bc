//! Allocation-light parsing of the Attr cell of MALLOC/FREE rows, the bulk of every dump.
//!
//! Same grammar and the same result as `attr_text::memory_attrs(attr_text::parse_attr(cell))`
//! (a unit test checks it), but the pairs are borrowed from the cell, so only the owner chain
//! and unknown keys allocate. JSON cells (from a `.db`) take the general path. Numbers that do
//! not parse are errors, never a silent 0 (`apply_memory`).

#[cfg(test)]
use crate::attr_text::{access_attrs, memory_attrs, parse_attr};
use crate::attr_text::{seed_owner, seed_pool, try_parse_attr};
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

fn bad(k: &str, v: &str, why: &str) -> String {
    format!("bad Attr {k} {}: {why}", crate::sanitize::quoted(v))
}

/// An unsigned Attr number: decimal, or hex with `0x` (spaces around allowed); the error names
/// the key and the value.
pub fn unsigned(k: &str, v: &str) -> Result<u64, String> {
    if let Ok(x) = v.parse::<u64>() {
        return Ok(x);
    }
    let t = v.trim();
    let r = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => t.parse().ok(),
    };
    r.ok_or_else(|| bad(k, v, "not an unsigned integer"))
}

/// A signed decimal Attr number (spaces around allowed).
pub(crate) fn signed(k: &str, v: &str) -> Result<i64, String> {
    v.parse()
        .or_else(|_| v.trim().parse())
        .map_err(|_| bad(k, v, "not a 64-bit integer"))
}

/// A `size`: decimal (2025 FREE rows are negative: the magnitude is kept) or hex, below 2^63
/// (larger sizes are no real block and would wrap the signed sums of the analyses).
pub(crate) fn size(k: &str, v: &str) -> Result<u64, String> {
    let x = match signed(k, v) {
        Ok(i) => i.unsigned_abs(),
        Err(_) => unsigned(k, v).map_err(|_| bad(k, v, "not an integer"))?,
    };
    if x >= 1 << 63 {
        return Err(bad(k, v, "2^63 or more"));
    }
    Ok(x)
}

/// The module id `MID`: a number below 2^32, or -1 (unknown).
fn module_id(k: &str, v: &str) -> Result<Option<u32>, String> {
    match signed(k, v) {
        Ok(-1) => Ok(None),
        Ok(i) => u32::try_from(i)
            .map(Some)
            .map_err(|_| bad(k, v, "not a module id")),
        Err(_) => unsigned(k, v).and_then(|x| {
            u32::try_from(x)
                .map(Some)
                .map_err(|_| bad(k, v, "not a module id"))
        }),
    }
}

/// Applies one Attr pair of a MALLOC/FREE row to `m`.
///
/// # Errors
/// A number that does not parse (named with the key and value).
pub(crate) fn apply_memory(m: &mut MemoryAttrs, k: &str, v: &str) -> Result<(), String> {
    match k {
        "allocation_id" => m.allocation_id = unsigned(k, v)?,
        "addr" => m.addr = unsigned(k, v)?,
        "size" => m.size = size(k, v)?,
        "pinned" => m.pinned = v == "true",
        "used" => m.used = Some(signed(k, v)?),
        "total" => m.total = Some(signed(k, v)?),
        "process_used" => m.process_used = Some(signed(k, v)?),
        "device_used" => m.device_used = Some(signed(k, v)?),
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
        "MID" => m.module_id = module_id(k, v)?,
        _ => m.extra.push((k.to_owned(), v.to_owned())),
    }
    Ok(())
}

/// Applies one Attr pair of an ACCESS row to `a`.
///
/// # Errors
/// A number that does not parse.
pub(crate) fn apply_access(a: &mut AccessAttrs, k: &str, v: &str) -> Result<(), String> {
    match k {
        "allocation_id" => a.allocation_id = Some(unsigned(k, v)?),
        "addr" => {}
        "size" => a.size = Some(size(k, v)?),
        "type" => a.pool = Some(seed_pool(v)),
        "dtype" => a.dtype = Some(v.to_owned()),
        "format" => a.format = Some(v.to_owned()),
        "shape" => a.shape = Some(v.to_owned()),
        _ => a.extra.push((k.to_owned(), v.to_owned())),
    }
    Ok(())
}

/// Runs `apply` over the pairs of a text-form cell, stopping at the first error.
fn each_text_pair<'a>(
    cell: &'a str,
    mut apply: impl FnMut(&'a str, &'a str) -> Result<(), String>,
) -> Result<(), String> {
    let mut err = None;
    for_each_pair(cell, |k, v| {
        if err.is_none() {
            err = apply(k, v).err();
        }
    });
    err.map_or(Ok(()), Err)
}

/// Typed memory attributes of a MALLOC/FREE Attr cell (text or JSON).
///
/// # Errors
/// A number that does not parse, a size of 2^63 or more, or a JSON cell that is not valid
/// JSON (msMemScope's readers would take such a row as size 0; we never guess).
pub fn memory_attrs_fast(cell: &str) -> Result<MemoryAttrs, String> {
    let mut m = MemoryAttrs::default();
    if cell.trim_start().starts_with("{\"") {
        for (k, v) in try_parse_attr(cell)? {
            apply_memory(&mut m, &k, &v)?;
        }
        return Ok(m);
    }
    each_text_pair(cell, |k, v| apply_memory(&mut m, k, v))?;
    Ok(m)
}

/// Typed access attributes of an ACCESS Attr cell (text or JSON); same result as
/// `attr_text::access_attrs(attr_text::parse_attr(cell))`.
///
/// # Errors
/// As [`memory_attrs_fast`].
pub fn access_attrs_fast(cell: &str) -> Result<AccessAttrs, String> {
    let mut a = AccessAttrs::default();
    if cell.trim_start().starts_with("{\"") {
        for (k, v) in try_parse_attr(cell)? {
            apply_access(&mut a, &k, &v)?;
        }
        return Ok(a);
    }
    each_text_pair(cell, |k, v| apply_access(&mut a, k, v))?;
    Ok(a)
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
            "{allocation_id:3,addr:0x10,size:10,owner:MINDSPORE@model@layer}",
            r#"{"allocation_id":"1","addr":"0x10","size":"10"}"#,
        ];
        for c in cells {
            assert_eq!(
                memory_attrs_fast(c).unwrap(),
                memory_attrs(parse_attr(c)).unwrap(),
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
            "{allocation_id:4,size:8,type:MINDSPORE}",
            r#"{"type":"PTA","size":"8"}"#,
        ];
        for c in cells {
            assert_eq!(
                access_attrs_fast(c).unwrap(),
                access_attrs(parse_attr(c)).unwrap(),
                "cell {c}"
            );
        }
    }

    #[test]
    fn msmemscope_spellings_are_read_as_the_seeds_and_numbers_stay_strict() {
        let m = memory_attrs_fast("{allocation_id:3,size:10,owner:MINDSPORE@model}").unwrap();
        assert_eq!(m.owner.unwrap().to_string(), "MindSpore@model");
        let a = access_attrs_fast("{allocation_id:4,size:8,type:MINDSPORE}").unwrap();
        assert_eq!(a.pool.as_deref(), Some("MindSpore"));
        for bad in [
            "{allocation_id:x,owner:MINDSPORE@model}",
            "{size:1.5e4,owner:MINDSPORE@model}",
        ] {
            assert!(memory_attrs_fast(bad).is_err(), "{bad}");
        }
        assert!(access_attrs_fast("{size:9223372036854775808,type:MINDSPORE}").is_err());
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
