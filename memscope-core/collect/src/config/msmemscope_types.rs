//! The types and ranges of msMemScope's config.json keys, checked before any is read: a value
//! of the wrong type or out of range is one line naming the key, never a silent default, a
//! clamp or a dropped item (msMemScope's own parser takes what its writer wrote; people edit
//! these files by hand).

use super::ConfigError;
use serde_json::{Map, Value};

/// What a key holds.
#[derive(Clone, Copy)]
enum Kind {
    Bool,
    /// A non-negative integer up to the bound.
    Uint(u64),
    Str,
    Object,
    List,
}

/// Every top-level key but `memscopeOptions` (checked where it is read).
const TOP: [(&str, Kind); 20] = [
    ("SelectedStepList", Kind::Object),
    ("analysisType", Kind::Uint(15)),
    ("cStackDepth", Kind::Uint(1000)),
    ("collectAllNpu", Kind::Bool),
    ("collectCpu", Kind::Bool),
    ("collectMode", Kind::Uint(1)),
    ("dataFormat", Kind::Uint(1)),
    ("dumpEventType", Kind::Uint(15)),
    ("enableCStack", Kind::Bool),
    ("enableCompare", Kind::Bool),
    ("enablePyStack", Kind::Bool),
    ("eventType", Kind::Uint(15)),
    ("isEffective", Kind::Bool),
    ("levelType", Kind::Uint(3)),
    ("logLevel", Kind::Uint(3)),
    ("npuSlots", Kind::Uint(u32::MAX as u64)),
    ("oomTopK", Kind::Uint(1000)),
    ("outputDir", Kind::Str),
    ("pyStackDepth", Kind::Uint(1000)),
    ("watchConfig", Kind::Object),
];

const STEPS: [(&str, Kind); 2] = [("stepCount", Kind::Uint(5)), ("stepIdList", Kind::List)];

const WATCH: [(&str, Kind); 5] = [
    ("end", Kind::Str),
    ("fullContent", Kind::Bool),
    ("isWatched", Kind::Bool),
    ("outputId", Kind::Uint(u32::MAX as u64)),
    ("start", Kind::Str),
];

fn check_one(key: &str, v: &Value, kind: Kind) -> Result<(), ConfigError> {
    let bad = |what: &str| Err(ConfigError(format!("{key}: expected {what}, got {v}")));
    match kind {
        Kind::Bool if !v.is_boolean() => bad("true or false"),
        Kind::Str if !v.is_string() => bad("a string"),
        Kind::Object if !v.is_object() => bad("an object"),
        Kind::List if !v.is_array() => bad("a list"),
        Kind::Uint(max) => match v.as_u64() {
            Some(n) if n <= max => Ok(()),
            Some(_) => bad(&format!("an integer from 0 to {max}")),
            None => bad("a non-negative integer"),
        },
        _ => Ok(()),
    }
}

/// Checks the types and ranges of every key present (the unknown ones are refused by the
/// caller), nested objects included.
///
/// # Errors
/// The first key of the wrong type or out of range, in one line naming it.
pub(super) fn check(o: &Map<String, Value>) -> Result<(), ConfigError> {
    for (key, kind) in TOP {
        if let Some(v) = o.get(key) {
            check_one(key, v, kind)?;
        }
    }
    if o.get("oomTopK").and_then(Value::as_u64) == Some(0) {
        return Err(ConfigError(
            "oomTopK: expected an integer from 1 to 1000, got 0".into(),
        ));
    }
    nested(o, "SelectedStepList", &STEPS)?;
    let ids = o
        .get("SelectedStepList")
        .and_then(|s| s.get("stepIdList"))
        .and_then(Value::as_array);
    if let Some(items) = ids {
        for (i, x) in items.iter().enumerate() {
            check_one(
                &format!("SelectedStepList.stepIdList[{i}]"),
                x,
                Kind::Uint(u64::from(u32::MAX)),
            )?;
        }
    }
    nested(o, "watchConfig", &WATCH)
}

fn nested(o: &Map<String, Value>, key: &str, fields: &[(&str, Kind)]) -> Result<(), ConfigError> {
    // its type was checked with the top-level keys
    let Some(obj) = o.get(key).and_then(Value::as_object) else {
        return Ok(());
    };
    for (k, v) in obj {
        let Some((_, kind)) = fields.iter().find(|(f, _)| f == k) else {
            let known: Vec<&str> = fields.iter().map(|(f, _)| *f).collect();
            return Err(ConfigError(format!(
                "{key}.{k}: unknown key (known: {})",
                known.join(", ")
            )));
        };
        check_one(&format!("{key}.{k}"), v, *kind)?;
    }
    Ok(())
}

/// The items of `memscopeOptions.<key>`, every one a string.
///
/// # Errors
/// Not a list, or an item that is not a string — one line naming it.
pub(super) fn strings<'a>(key: &str, v: &'a Value) -> Result<Vec<&'a str>, ConfigError> {
    let list = v
        .as_array()
        .ok_or_else(|| ConfigError(format!("memscopeOptions.{key}: expected a list, got {v}")))?;
    list.iter()
        .enumerate()
        .map(|(i, x)| {
            x.as_str().ok_or_else(|| {
                ConfigError(format!(
                    "memscopeOptions.{key}[{i}]: expected a string, got {x}"
                ))
            })
        })
        .collect()
}

/// `memscopeOptions.<key>` as true or false.
///
/// # Errors
/// Anything else — one line naming it.
pub(super) fn boolean(key: &str, v: &Value) -> Result<bool, ConfigError> {
    v.as_bool().ok_or_else(|| {
        ConfigError(format!(
            "memscopeOptions.{key}: expected true or false, got {v}"
        ))
    })
}

#[cfg(test)]
mod tests {
    use crate::config::RawOptions;

    /// One edit of the spec's example file (all keys present and right).
    fn with(key: &str, value: &str) -> String {
        let mut v: serde_json::Value = serde_json::from_str(
            r#"{"SelectedStepList": {"stepCount": 0, "stepIdList": [0, 0, 0, 0, 0]},
            "analysisType": 1, "cStackDepth": 0, "collectAllNpu": true, "collectCpu": false,
            "collectMode": 0, "dataFormat": 0, "dumpEventType": 7, "enableCStack": false,
            "enableCompare": false, "enablePyStack": false, "eventType": 7, "isEffective": true,
            "levelType": 1, "logLevel": 1, "npuSlots": 0, "oomTopK": 10, "outputDir": "/w/out",
            "pyStackDepth": 0, "watchConfig": {"end": "", "fullContent": false,
            "isWatched": false, "outputId": 4294967295, "start": ""}}"#,
        )
        .unwrap();
        let new: serde_json::Value = serde_json::from_str(value).unwrap();
        match key.split_once('.') {
            Some((a, b)) => {
                if !v[a].is_object() {
                    v[a] = serde_json::json!({});
                }
                v[a][b] = new;
            }
            None => v[key] = new,
        }
        v.to_string()
    }

    #[test]
    fn a_wrong_type_or_range_in_an_msmemscope_config_json_names_the_key() {
        for (key, value, said) in [
            (
                "memscopeOptions.gap",
                r#""x""#,
                "memscopeOptions.gap: expected true or false",
            ),
            (
                "watchConfig.isWatched",
                r#""yes""#,
                "watchConfig.isWatched: expected true or false",
            ),
            (
                "cStackDepth",
                "99999",
                "cStackDepth: expected an integer from 0 to 1000",
            ),
            ("oomTopK", "-3", "oomTopK: expected a non-negative integer"),
            (
                "oomTopK",
                "0",
                "oomTopK: expected an integer from 1 to 1000",
            ),
            (
                "analysisType",
                "999",
                "analysisType: expected an integer from 0 to 15",
            ),
            (
                "levelType",
                "99",
                "levelType: expected an integer from 0 to 3",
            ),
            (
                "dumpEventType",
                "9999999999999",
                "dumpEventType: expected an integer from 0 to 15",
            ),
            ("isEffective", "1", "isEffective: expected true or false"),
            (
                "eventType",
                r#""7""#,
                "eventType: expected a non-negative integer",
            ),
            (
                "memscopeOptions.adapters",
                r#"["pta", null]"#,
                "memscopeOptions.adapters[1]: expected a string",
            ),
            (
                "memscopeOptions.adapters",
                "[1]",
                "memscopeOptions.adapters[0]: expected a string",
            ),
            (
                "memscopeOptions.adapterPaths",
                "[1]",
                "memscopeOptions.adapterPaths[0]: expected a string",
            ),
            (
                "SelectedStepList.stepIdList",
                r#"["1"]"#,
                "SelectedStepList.stepIdList[0]: expected a non-negative integer",
            ),
            (
                "SelectedStepList.stepIdList",
                "3",
                "SelectedStepList.stepIdList: expected a list",
            ),
            ("watchConfig.colour", "1", "watchConfig.colour: unknown key"),
            ("watchConfig", "[]", "watchConfig: expected an object"),
        ] {
            let e = RawOptions::from_json(&with(key, value)).unwrap_err();
            assert!(e.0.contains(said), "{key}={value}: {e}");
            assert_eq!(e.0.lines().count(), 1, "{e}");
        }
        // the example itself, and memscope's own keys in memscopeOptions, still read
        assert!(RawOptions::from_json(&with("oomTopK", "10")).is_ok());
        assert!(RawOptions::from_json(&with("memscopeOptions.gap", "true")).is_ok());
    }
}
