//! `sanitizer-op:` msTX marks (msMemScope's NPU Sanitizer custom-op marks, issue 36): a custom
//! operator the dispatcher cannot see reports its reads and writes in one mark,
//!
//! ```text
//! sanitizer-op: name=my_ext.my_fused_op;read=input_a:0x7f00:1024,input_b:0x7f04:512;write=output:0x7f08:2048
//! ```
//!
//! `;` separates fields, `,` list items, `:` alias, address and bytes; addresses are decimal
//! or `0x` hex; an address both read and written is an in-place access; an alias is shorter
//! than 32 bytes, the message at most 1024 bytes. The race check reads them as kernel launches
//! on the mark's stream; `python/memscope/sanitizer.py` parses them the same way for
//! torch_npu's sanitizer (one rule, tested on both sides with the same cases).

/// The prefix that makes a mark a `sanitizer-op:` mark.
pub const PREFIX: &str = "sanitizer-op:";
/// Longest message, bytes.
pub const MAX_MESSAGE: usize = 1024;
/// Longest alias, bytes.
pub const MAX_ALIAS: usize = 31;

/// One tensor an operator reads or writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpAccess {
    /// Its name in the operator.
    pub alias: String,
    /// Start address.
    pub addr: u64,
    /// Bytes.
    pub size: u64,
}

/// A custom operator's accesses, from its mark.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SanitizerOp {
    /// Operator name.
    pub name: String,
    /// Tensors read.
    pub read: Vec<OpAccess>,
    /// Tensors written (in place when also read).
    pub write: Vec<OpAccess>,
}

/// `text` as a decimal or `0x` number; `field` names it in the error (made only then).
fn number(field: impl FnOnce() -> String, text: &str) -> Result<u64, String> {
    let t = text.trim();
    let v = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => t.parse::<u64>(),
    };
    v.map_err(|_| format!("{}: {text:?} is not a number (decimal or 0x hex)", field()))
}

fn accesses(field: &str, text: &str) -> Result<Vec<OpAccess>, String> {
    text.split(',')
        .enumerate()
        .map(|(i, item)| {
            let n = i + 1;
            let mut parts = item.split(':');
            let (Some(alias), Some(addr), Some(size), None) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                return Err(format!(
                    "{field} item {n}: {item:?} is not alias:address:bytes"
                ));
            };
            let alias = alias.trim();
            if alias.is_empty() || alias.len() > MAX_ALIAS {
                return Err(format!(
                    "{field} item {n}: alias {alias:?} must be 1 to {MAX_ALIAS} bytes"
                ));
            }
            Ok(OpAccess {
                alias: alias.to_owned(),
                addr: number(|| format!("{field} item {n} address"), addr)?,
                size: number(|| format!("{field} item {n} bytes"), size)?,
            })
        })
        .collect()
}

/// The operator of a mark: `Ok(None)` for a message without the prefix, `Err` naming the
/// field that is malformed.
///
/// # Errors
/// A malformed `sanitizer-op:` message, in one line naming the field.
pub fn parse(message: &str) -> Result<Option<SanitizerOp>, String> {
    let Some(body) = message.strip_prefix(PREFIX) else {
        return Ok(None);
    };
    if message.len() > MAX_MESSAGE {
        return Err(format!(
            "message: {} bytes, more than {MAX_MESSAGE}",
            message.len()
        ));
    }
    let (mut name, mut read, mut write) = (None, None, None);
    for field in body.split(';').filter(|f| !f.trim().is_empty()) {
        let Some((key, value)) = field.split_once('=') else {
            return Err(format!("{:?}: expected key=value", field.trim()));
        };
        let slot = match key.trim() {
            "name" if value.trim().is_empty() => return Err("name: empty".into()),
            "name" if name.is_some() => return Err("name: given twice".into()),
            "name" => {
                name = Some(value.trim().to_owned());
                continue;
            }
            "read" => &mut read,
            "write" => &mut write,
            k => return Err(format!("{k:?}: unknown field (name, read, write)")),
        };
        if slot.is_some() {
            return Err(format!("{}: given twice", key.trim()));
        }
        *slot = Some(accesses(key.trim(), value)?);
    }
    let name = name.ok_or("name: missing")?;
    let (read, write) = (read.unwrap_or_default(), write.unwrap_or_default());
    if read.is_empty() && write.is_empty() {
        return Err("read/write: the operator accesses nothing".into());
    }
    Ok(Some(SanitizerOp { name, read, write }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_gives_the_operator_its_reads_and_writes_in_decimal_or_hex() {
        let op = parse(
            "sanitizer-op: name=my_ext.op;read=a:0x7f00:1024,b:32516:512;write=out:0x7f08:2048",
        )
        .unwrap()
        .unwrap();
        assert_eq!(op.name, "my_ext.op");
        assert_eq!(op.read[1].addr, 32516);
        assert_eq!(op.read[0].addr, 0x7f00);
        assert_eq!(op.write[0].size, 2048);
        assert_eq!(parse("an ordinary mark").unwrap(), None);
    }

    #[test]
    fn malformed_marks_are_refused_naming_the_field() {
        let long = format!("sanitizer-op: name=x;read=a:1:2;{}", "x".repeat(1100));
        let alias = format!("sanitizer-op: name=x;read={}:1:2", "a".repeat(40));
        for (msg, field) in [
            ("sanitizer-op: read=a:1:2", "name: missing"),
            ("sanitizer-op: name=x;read=a:0xZZ:2", "read item 1 address"),
            ("sanitizer-op: name=x;write=a:1", "write item 1"),
            (alias.as_str(), "alias"),
            ("sanitizer-op: name=x;size=3", "unknown field"),
            ("sanitizer-op: name=x", "accesses nothing"),
            ("sanitizer-op: name=x;read=a:1:2;read=b:3:4", "given twice"),
            (
                "sanitizer-op: name=x;name=y;read=a:1:2",
                "name: given twice",
            ),
            (long.as_str(), "message"),
        ] {
            let e = parse(msg).unwrap_err();
            assert!(e.contains(field), "{msg}: {e}");
        }
    }
}
