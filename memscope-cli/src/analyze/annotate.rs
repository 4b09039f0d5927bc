//! The annotated copy written by `memscope analyze inefficient`: the input, record for record,
//! with the inefficient types added to the Attr of the MALLOC rows found. The copy gets a name
//! that does not exist yet (`<stem>_inefficient.<ext>`, `_1`, …), mode 0600; with
//! `--in-place` (msMemScope's behaviour, the Python API's) it then replaces the input in one
//! rename ([`replace_input`]).
//!
//! * CSV: records are copied with RFC 4180 quoting; a MALLOC row's Attr gets
//!   `inefficient:<t1,t2>` (merged into an existing `inefficient`/`inefficient_type` pair).
//! * `.db`: SQLite copies the database (`VACUUM INTO`, from the input opened read-only as the
//!   reader opens it), then the copy's Attr is updated with parameterised statements matched
//!   by ID and Process Id: a JSON Attr stays JSON, a text-form one stays text with all its pairs.
//!
//! The copy is a dump, read by msMemScope's tools: its values are the input's, unchanged (no
//! CSV-formula neutralising, see the README).

use std::collections::HashMap;
use std::path::PathBuf;

use anyhow::{anyhow, Result};

use memscope_analysis::outfile::create_sibling;
use memscope_core::event::Inefficiency;
use memscope_dump::reader::{for_each_pair, CsvSource, DumpFile, DumpFormat};

type Found = HashMap<(Option<u32>, u64), Vec<Inefficiency>>;

fn merge(existing: &str, add: &[Inefficiency]) -> String {
    let mut names: Vec<String> = existing
        .split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    for t in add {
        if !names.iter().any(|n| n == t.as_str()) {
            names.push(t.as_str().to_owned());
        }
    }
    names.join(",")
}

/// The Attr text of a MALLOC row with `add` merged in.
pub fn annotate_attr(cell: &str, add: &[Inefficiency]) -> String {
    let mut pairs: Vec<(String, String)> = Vec::new();
    for_each_pair(cell, |k, v| pairs.push((k.to_owned(), v.to_owned())));
    match pairs
        .iter_mut()
        .find(|(k, _)| k == "inefficient" || k == "inefficient_type")
    {
        Some(p) => p.1 = merge(&p.1, add),
        None => {
            let at = pairs
                .iter()
                .position(|(k, _)| matches!(k.as_str(), "page_type" | "alloc_type" | "MID"))
                .unwrap_or(pairs.len());
            pairs.insert(at, ("inefficient".to_owned(), merge("", add)));
        }
    }
    let body: Vec<String> = pairs.into_iter().map(|(k, v)| format!("{k}:{v}")).collect();
    format!("{{{}}}", body.join(","))
}

/// The `.db` Attr of a MALLOC row with `add` merged in: a JSON object stays JSON (the key
/// `inefficient`, or msMemScope's `inefficient_type` when present); a text-form Attr (which the
/// reader accepts too) stays text, with every pair kept.
///
/// # Errors
/// A cell that starts like JSON but is not a JSON object (the reader refuses it too).
pub fn annotate_db_attr(attr: &str, add: &[Inefficiency]) -> Result<String> {
    let t = attr.trim();
    if !t.starts_with('{') || !t[1..].trim_start().starts_with('"') {
        if t.is_empty() || t == "{}" {
            let mut obj = serde_json::Map::new();
            obj.insert(
                "inefficient".to_owned(),
                serde_json::Value::String(merge("", add)),
            );
            return Ok(serde_json::Value::Object(obj).to_string());
        }
        return Ok(annotate_attr(attr, add));
    }
    let mut obj: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(t).map_err(|e| anyhow!("Attr is not a JSON object ({e})"))?;
    let key = if obj.contains_key("inefficient_type") {
        "inefficient_type"
    } else {
        "inefficient"
    };
    let old = obj
        .get(key)
        .and_then(|v| v.as_str())
        .unwrap_or("")
        .to_owned();
    obj.insert(key.to_owned(), serde_json::Value::String(merge(&old, add)));
    Ok(serde_json::Value::Object(obj).to_string())
}

fn write_csv(file: &DumpFile, found: &Found) -> Result<PathBuf> {
    let (out, f) = create_sibling(file.path(), "_inefficient")
        .map_err(|e| anyhow!("cannot create a copy next to {}: {e}", file.name()))?;
    let (input, _) = memscope_dump::reader::open_regular(file.path(), file.name())
        .map_err(|e| anyhow!("{e}"))?;
    let mut src = CsvSource::new(file.name(), input, None).map_err(|e| anyhow!("{e}"))?;
    let mut w = csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(std::io::BufWriter::new(f));
    let werr = |e: csv::Error| anyhow!("cannot write {}: {e}", out.display());
    w.write_byte_record(src.header()).map_err(werr)?;
    let header_cells = src.cols.clone();
    while src.next_record().map_err(|e| anyhow!("{e}"))? {
        let ev = src.event().map_err(|e| anyhow!("{e}"))?;
        let add = (ev.kind == memscope_core::event::EventKind::Malloc)
            .then(|| found.get(&(ev.pid, ev.id)))
            .flatten();
        match add {
            Some(types) if !types.is_empty() => {
                let attr_at = header_cells.attr_index();
                let rec: Vec<String> = src.with_cells(|c| {
                    c.iter()
                        .enumerate()
                        .map(|(i, s)| {
                            if i == attr_at {
                                annotate_attr(s, types)
                            } else {
                                (*s).to_owned()
                            }
                        })
                        .collect()
                });
                w.write_record(&rec).map_err(werr)?;
            }
            _ => w.write_byte_record(src.record()).map_err(werr)?,
        }
    }
    w.flush()
        .map_err(|e| anyhow!("cannot write {}: {e}", out.display()))?;
    Ok(out)
}

fn write_db(file: &DumpFile, found: &Found) -> Result<PathBuf> {
    let (out, f) = create_sibling(file.path(), "_inefficient")
        .map_err(|e| anyhow!("cannot create a copy next to {}: {e}", file.name()))?;
    drop(f);
    let fail = |e: rusqlite::Error| anyhow!("cannot write {}: {e}", out.display());
    // the input is opened as the reader opens it (immutable: nothing written next to it);
    // the copy's path is absolute, so SQLite never takes it for a URI
    let src = memscope_dump::reader::db::open_dump_db(file.path(), file.name())
        .map_err(|e| anyhow!("{e}"))?;
    // query_only would also refuse writing the copy; the input stays read-only (immutable)
    src.conn
        .execute_batch("PRAGMA query_only=OFF")
        .map_err(fail)?;
    src.conn
        .execute("VACUUM INTO ?1", [out.display().to_string()])
        .map_err(fail)?;
    drop(src);
    let mut db = rusqlite::Connection::open_with_flags(
        &out,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE
            | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX
            | rusqlite::OpenFlags::SQLITE_OPEN_NOFOLLOW,
    )
    .map_err(fail)?;
    let tx = db.transaction().map_err(fail)?;
    {
        let mut get = tx
            // matched numerically, as the reader orders (TEXT IDs from `sqlite3 .import`)
            .prepare(r#"SELECT rowid, "Attr" FROM memscope_dump WHERE CAST("ID" AS INTEGER) = ?1 AND ((?2 IS NULL AND ("Process Id" IS NULL OR trim("Process Id") IN ('', 'N/A'))) OR CAST("Process Id" AS INTEGER) = ?2) AND trim("Event") = 'MALLOC'"#)
            .map_err(fail)?;
        let mut set = tx
            .prepare(r#"UPDATE memscope_dump SET "Attr" = ?1 WHERE rowid = ?2"#)
            .map_err(fail)?;
        for ((pid, id), types) in found.iter().filter(|(_, t)| !t.is_empty()) {
            let rows: Vec<(i64, String)> = get
                .query_map(rusqlite::params![*id as i64, pid.map(i64::from)], |r| {
                    Ok((
                        r.get(0)?,
                        r.get::<_, Option<String>>(1)?.unwrap_or_default(),
                    ))
                })
                .map_err(fail)?
                .collect::<Result<_, _>>()
                .map_err(fail)?;
            for (rowid, attr) in rows {
                let merged = annotate_db_attr(&attr, types)
                    .map_err(|e| anyhow!("{}: row {rowid}: {e}", file.name()))?;
                set.execute(rusqlite::params![merged, rowid])
                    .map_err(fail)?;
            }
        }
    }
    tx.commit().map_err(fail)?;
    Ok(out)
}

/// Writes the annotated copy of `file` and returns its path.
///
/// # Errors
/// The input cannot be read again or the copy cannot be written.
pub fn write_annotated(file: &DumpFile, found: &Found) -> Result<PathBuf> {
    match file.format() {
        DumpFormat::Csv => write_csv(file, found),
        DumpFormat::Db => write_db(file, found),
    }
}

/// Puts the annotated copy `copy` in the place of `input` (`--in-place`): the copy takes the
/// input's permission bits, then one rename replaces the input, so a reader sees the old file
/// or the new one, never a part of either.
///
/// # Errors
/// The input's mode cannot be read or set on the copy, or the rename fails (the copy is then
/// removed and the input left as it was).
pub fn replace_input(copy: &std::path::Path, input: &std::path::Path) -> Result<()> {
    let done = std::fs::metadata(input)
        .and_then(|m| std::fs::set_permissions(copy, m.permissions()))
        .and_then(|()| std::fs::rename(copy, input));
    done.map_err(|e| {
        let _ = std::fs::remove_file(copy);
        anyhow!("cannot rewrite {}: {e}", input.display())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_are_added_before_the_hal_keys_or_merged_into_an_existing_pair() {
        use Inefficiency::*;
        assert_eq!(
            annotate_attr("{allocation_id:1,addr:0x10,size:8,owner:PTA@a}", &[EarlyAllocation, TemporaryIdleness]),
            "{allocation_id:1,addr:0x10,size:8,owner:PTA@a,inefficient:early_allocation,temporary_idleness}"
        );
        assert_eq!(
            annotate_attr(
                "{size:8,inefficient_type:late_deallocation,page_type:normal}",
                &[EarlyAllocation, LateDeallocation]
            ),
            "{size:8,inefficient_type:late_deallocation,early_allocation,page_type:normal}"
        );
        assert_eq!(
            annotate_attr("", &[LateDeallocation]),
            "{inefficient:late_deallocation}"
        );
    }

    #[test]
    fn the_annotated_db_copy_keeps_a_text_form_attr() {
        use Inefficiency::*;
        assert_eq!(
            annotate_db_attr(
                "{allocation_id:2,addr:0x2000,size:200,owner:PTA@x}",
                &[EarlyAllocation, TemporaryIdleness]
            )
            .unwrap(),
            "{allocation_id:2,addr:0x2000,size:200,owner:PTA@x,inefficient:early_allocation,temporary_idleness}"
        );
        assert_eq!(
            annotate_db_attr(
                r#"{"size":"8","inefficient_type":"late_deallocation"}"#,
                &[EarlyAllocation]
            )
            .unwrap(),
            r#"{"size":"8","inefficient_type":"late_deallocation,early_allocation"}"#
        );
        assert_eq!(
            annotate_db_attr("{}", &[LateDeallocation]).unwrap(),
            r#"{"inefficient":"late_deallocation"}"#
        );
        assert!(annotate_db_attr(r#"{"size":"#, &[LateDeallocation]).is_err());
    }
}
