//! msMemScope's config.json (behaviour spec §4): the key set memscope writes next to a dump so
//! msMemScope's tools read it, and the reading of such a file as `--config`.
//!
//! Written: every msMemScope key, sorted, 4-space indent (nlohmann's layout), enum codes and
//! bit masks as msMemScope spells them (`eventType` widened by its rules), plus one object
//! `memscopeOptions` with what msMemScope has no key for (`adapters`, `adapterPaths`,
//! `idleThreshold`, `inefficientRule`, `hostRows`, `gap`, `traceback`, `sample`) so the file also
//! reads back into memscope unchanged.
//! Read: missing keys take the defaults, depths are capped at 1000, `outputDir` is checked like
//! `--output-path`; `eventType` and `isEffective` are derived values and ignored;
//! `watchConfig` (when `isWatched`) is `--watch`; a compare (`enableCompare`) request is
//! refused, memscope has none in `run` (use `memscope compare`).

use super::msmemscope_types::{boolean, strings};
use super::*;
use serde_json::{json, Map, Value};

/// Top-level keys of msMemScope's config.json.
pub const KEYS: [&str; 21] = [
    "SelectedStepList",
    "analysisType",
    "cStackDepth",
    "collectAllNpu",
    "collectCpu",
    "collectMode",
    "dataFormat",
    "dumpEventType",
    "enableCStack",
    "enableCompare",
    "enablePyStack",
    "eventType",
    "isEffective",
    "levelType",
    "logLevel",
    "npuSlots",
    "oomTopK",
    "outputDir",
    "pyStackDepth",
    "watchConfig",
    "memscopeOptions",
];

fn bits(pairs: &[(bool, u32)]) -> u32 {
    pairs
        .iter()
        .filter(|(on, _)| *on)
        .fold(0, |m, (_, b)| m | 1 << b)
}

/// msMemScope's widened `eventType` (spec §2, "Rules that widen what is collected").
fn widened(cfg: &RunConfig) -> u32 {
    let e = cfg.events;
    let a = cfg.analysis;
    let (mut alloc, mut free, mut launch, mut access) = (e.alloc, e.free, e.launch, e.access);
    if alloc || free || a.leaks || a.oom.is_some() {
        alloc = true;
        free = true;
    }
    if access || a.decompose {
        alloc = true;
        free = true;
        access = true;
    }
    if a.inefficient || a.races {
        alloc = true;
        free = true;
        access = true;
        launch = true;
    }
    bits(&[(alloc, 0), (free, 1), (launch, 2), (access, 3)])
}

/// `cfg` as msMemScope's config.json object (keys in sorted order).
pub fn to_value(cfg: &RunConfig) -> Value {
    let e = cfg.events;
    let a = cfg.analysis;
    let mut steps: Vec<u64> = cfg.steps.iter().map(|s| *s as u64).collect();
    let count = steps.len();
    steps.resize(5, 0);
    let npu_slots = if cfg.device.all_npu {
        0
    } else {
        cfg.device.npus.iter().fold(0u64, |m, n| m | 1 << n)
    };
    let mut m = Map::new();
    let mut put = |k: &str, v: Value| {
        m.insert(k.to_owned(), v);
    };
    put(
        "SelectedStepList",
        json!({"stepCount": count, "stepIdList": steps}),
    );
    put(
        "analysisType",
        json!(bits(&[
            (a.leaks, 0),
            (a.decompose, 1),
            (a.inefficient, 2),
            (a.oom.is_some(), 3)
        ])),
    );
    put("cStackDepth", json!(cfg.call_stack.c.unwrap_or(0)));
    put("collectAllNpu", json!(cfg.device.all_npu));
    put("collectCpu", json!(cfg.device.cpu));
    put(
        "collectMode",
        json!(u8::from(cfg.collect_mode == CollectMode::Deferred)),
    );
    put("dataFormat", json!(u8::from(cfg.format == Format::Db)));
    put(
        "dumpEventType",
        json!(bits(&[
            (e.alloc, 0),
            (e.free, 1),
            (e.launch, 2),
            (e.access, 3)
        ])),
    );
    put("enableCStack", json!(cfg.call_stack.c.is_some()));
    put("enableCompare", json!(false));
    put("enablePyStack", json!(cfg.call_stack.python.is_some()));
    put("eventType", json!(widened(cfg)));
    put("isEffective", json!(true));
    put(
        "levelType",
        json!(bits(&[(cfg.level.op, 0), (cfg.level.kernel, 1)])),
    );
    put(
        "logLevel",
        json!(match cfg.log_level {
            LogLevel::Debug => 0,
            LogLevel::Info => 1,
            LogLevel::Warning => 2,
            LogLevel::Error => 3,
        }),
    );
    let mut options = json!({
        "adapterPaths": cfg.adapter_paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        "adapters": cfg.adapters,
        "gap": a.gap,
        "hostRows": cfg.host_rows,
        "idleThreshold": cfg.idle_threshold,
        "inefficientRule": cfg.inefficient_rule.as_str(),
        "traceback": e.traceback,
    });
    if let Some(ns) = cfg.sample_ns {
        options["sample"] = json!(crate::config::interval::interval_text(ns));
    }
    if cfg.aggregate {
        options["aggregate"] = json!(true);
    }
    if let Some(k) = cfg.keep {
        options["keep"] = json!(k.to_text());
    }
    put("memscopeOptions", options);
    put("npuSlots", json!(npu_slots));
    put("oomTopK", json!(a.oom.unwrap_or(10)));
    put("outputDir", json!(cfg.output_path.display().to_string()));
    put("pyStackDepth", json!(cfg.call_stack.python.unwrap_or(0)));
    put(
        "watchConfig",
        match &cfg.watch {
            Some(w) => json!({
                "end": w.end,
                "fullContent": w.full_content,
                "isWatched": true,
                "outputId": w.out_id.map_or(4294967295u64, u64::from),
                "start": w.start,
            }),
            None => json!({
                "end": "", "fullContent": false, "isWatched": false,
                "outputId": 4294967295u64, "start": ""
            }),
        },
    );
    Value::Object(m)
}

/// `cfg` as msMemScope's config.json text: sorted keys, 4-space indent, trailing newline.
pub fn to_text(cfg: &RunConfig) -> String {
    let mut out = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut ser = serde_json::Serializer::with_formatter(&mut out, fmt);
    serde::Serialize::serialize(&to_value(cfg), &mut ser).expect("JSON values serialise");
    out.push(b'\n');
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

/// Whether a parsed config.json is in msMemScope's format (has one of its camelCase keys).
pub fn is_msmemscope(v: &Value) -> bool {
    v.as_object()
        .is_some_and(|o| o.keys().any(|k| KEYS.contains(&k.as_str())))
}

fn err(key: &str, msg: impl std::fmt::Display) -> ConfigError {
    ConfigError(format!("{key}: {msg}"))
}

fn uint(o: &Map<String, Value>, key: &str) -> Result<Option<u64>, ConfigError> {
    match o.get(key) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| err(key, format!("expected a non-negative integer, got {v}"))),
    }
}

fn flag(o: &Map<String, Value>, key: &str) -> Result<Option<bool>, ConfigError> {
    match o.get(key) {
        None => Ok(None),
        Some(v) => v
            .as_bool()
            .map(Some)
            .ok_or_else(|| err(key, format!("expected true or false, got {v}"))),
    }
}

fn names(mask: u64, table: &[(u32, &str)]) -> String {
    table
        .iter()
        .filter(|(b, _)| mask & (1 << b) != 0)
        .map(|(_, n)| *n)
        .collect::<Vec<_>>()
        .join(",")
}

/// Reads msMemScope's config.json object into raw options (validated later like flags).
///
/// # Errors
/// An unknown key, a value of the wrong type or range, a watch or compare request — one line
/// naming the key.
pub fn raw_options(v: &Value) -> Result<RawOptions, ConfigError> {
    let o = v
        .as_object()
        .ok_or_else(|| ConfigError("expected a JSON object".into()))?;
    if let Some(k) = o.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(err(
            k,
            "unknown key in an msMemScope config.json (memscope's own keys cannot be mixed with msMemScope's)",
        ));
    }
    super::msmemscope_types::check(o)?;
    let mut r = RawOptions::default();
    if let Some(m) = uint(o, "dumpEventType")? {
        let n = names(
            m,
            &[(0, "alloc"), (1, "free"), (2, "launch"), (3, "access")],
        );
        r.events = Some(if n.is_empty() { "none".into() } else { n });
    }
    if let Some(m) = uint(o, "levelType")? {
        let n = names(m, &[(0, "op"), (1, "kernel")]);
        // an empty level list is refused, as `--level ''` is (issue 17, L8)
        if n.is_empty() {
            return Err(err(
                "levelType",
                format!("{m} selects neither op (bit 0) nor kernel (bit 1); memscope needs at least one (1 op, 2 kernel, 3 both)"),
            ));
        }
        r.level = Some(n);
    }
    let mut stacks = Vec::new();
    if flag(o, "enableCStack")?.unwrap_or(false) {
        stacks.push(format!("c:{}", uint(o, "cStackDepth")?.unwrap_or(0)));
    }
    if flag(o, "enablePyStack")?.unwrap_or(false) {
        stacks.push(format!("python:{}", uint(o, "pyStackDepth")?.unwrap_or(0)));
    }
    if o.contains_key("enableCStack") || o.contains_key("enablePyStack") {
        r.call_stack = Some(stacks.join(","));
    }
    if let Some(m) = uint(o, "analysisType")? {
        let mut a = names(m, &[(0, "leaks"), (1, "decompose"), (2, "inefficient")]);
        if m & 8 != 0 {
            // its range is checked with every key's (msmemscope_types)
            let k = uint(o, "oomTopK")?.unwrap_or(10);
            if !a.is_empty() {
                a.push(',');
            }
            a.push_str(&format!("oom:{k}"));
        }
        r.analysis = Some(if a.is_empty() { "none".into() } else { a });
    }
    if let Some(s) = o.get("SelectedStepList") {
        let count = s.get("stepCount").and_then(Value::as_u64).ok_or_else(|| {
            err(
                "SelectedStepList",
                "expected {\"stepCount\": N, \"stepIdList\": [...]}",
            )
        })?;
        let list = s
            .get("stepIdList")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if count as usize > list.len().min(5) {
            return Err(err(
                "SelectedStepList",
                format!("stepCount {count} but {} step ids (at most 5)", list.len()),
            ));
        }
        let ids: Result<Vec<String>, _> = list[..count as usize]
            .iter()
            .map(|x| {
                x.as_u64()
                    .map(|n| n.to_string())
                    .ok_or_else(|| err("SelectedStepList", format!("bad step id {x}")))
            })
            .collect();
        r.steps = Some(ids?.join(","));
    }
    let all = flag(o, "collectAllNpu")?;
    let cpu = flag(o, "collectCpu")?;
    if all.is_some() || cpu.is_some() {
        let mut d = Vec::new();
        if all.unwrap_or(true) {
            d.push("npu".to_owned());
        } else {
            let slots = uint(o, "npuSlots")?.unwrap_or(0);
            d.extend(
                (0..32)
                    .filter(|n| slots & (1 << n) != 0)
                    .map(|n| format!("npu:{n}")),
            );
        }
        if cpu.unwrap_or(false) {
            d.push("cpu".to_owned());
        }
        r.device = Some(d.join(","));
    }
    let code = |key: &str, names: &[&str]| -> Result<Option<String>, ConfigError> {
        match uint(o, key)? {
            None => Ok(None),
            Some(c) => names
                .get(c as usize)
                .map(|n| Some((*n).to_owned()))
                .ok_or_else(|| err(key, format!("unknown code {c}"))),
        }
    };
    r.collect_mode = code("collectMode", &["immediate", "deferred"])?;
    r.format = code("dataFormat", &["csv", "db"])?;
    r.log_level = code("logLevel", &["debug", "info", "warning", "error"])?;
    match o.get("outputDir") {
        None => {}
        Some(Value::String(s)) => r.output_path = Some(s.clone()),
        Some(v) => return Err(err("outputDir", format!("expected a string, got {v}"))),
    }
    if let Some(w) = o.get("watchConfig") {
        if w.get("isWatched").and_then(Value::as_bool) == Some(true) {
            let text = |k: &str| w.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
            let mut s = text("start");
            match w.get("outputId").and_then(Value::as_u64) {
                Some(id) if id < u64::from(u32::MAX) && !s.is_empty() => {
                    s.push_str(&format!(":{id}"))
                }
                _ => {}
            }
            s.push(',');
            s.push_str(&text("end"));
            if w.get("fullContent").and_then(Value::as_bool) == Some(true) {
                s.push_str(",full-content");
            }
            r.watch = Some(s);
        }
    }
    if flag(o, "enableCompare")? == Some(true) {
        return Err(err(
            "enableCompare",
            "memscope compares dumps with `memscope compare BASE COMPARE`, not in run",
        ));
    }
    if let Some(m) = o.get("memscopeOptions") {
        let m = m
            .as_object()
            .ok_or_else(|| err("memscopeOptions", "expected an object"))?;
        for (k, v) in m {
            match k.as_str() {
                "adapters" => r.adapters = Some(strings("adapters", v)?.join(",")),
                "adapterPaths" => {
                    r.adapter_paths = strings("adapterPaths", v)?
                        .into_iter()
                        .map(str::to_owned)
                        .collect();
                }
                "idleThreshold" => {
                    r.idle_threshold = Some(v.as_u64().ok_or_else(|| {
                        err("memscopeOptions.idleThreshold", "expected an integer")
                    })?);
                }
                "inefficientRule" => {
                    r.inefficient_rule = Some(
                        v.as_str()
                            .ok_or_else(|| {
                                err("memscopeOptions.inefficientRule", "expected a string")
                            })?
                            .to_owned(),
                    );
                }
                "hostRows" => {
                    r.host_rows = Some(v.as_bool().ok_or_else(|| {
                        err("memscopeOptions.hostRows", "expected true or false")
                    })?);
                }
                "aggregate" => {
                    r.aggregate = Some(v.as_bool().ok_or_else(|| {
                        err("memscopeOptions.aggregate", "expected true or false")
                    })?);
                }
                "keep" => {
                    let k = v.as_str().ok_or_else(|| err("memscopeOptions.keep", "expected a string"))?;
                    r.keep = Some(k.to_owned());
                }
                "sample" => {
                    r.sample = Some(
                        v.as_str()
                            .ok_or_else(|| err("memscopeOptions.sample", "expected a string"))?
                            .to_owned(),
                    );
                }
                "gap" => {
                    if boolean("gap", v)? {
                        let a = r.analysis.get_or_insert_with(|| "leaks".into());
                        if a == "none" {
                            *a = "gap".into();
                        } else {
                            a.push_str(",gap");
                        }
                    }
                }
                "traceback" => {
                    if boolean("traceback", v)? {
                        let e = r.events.get_or_insert_with(|| "alloc,free,launch".into());
                        if e == "none" {
                            *e = "traceback".into();
                        } else {
                            e.push_str(",traceback");
                        }
                    }
                }
                other => {
                    return Err(err(
                        &format!("memscopeOptions.{other}"),
                        "unknown key (adapters, adapterPaths, aggregate, gap, hostRows, idleThreshold, inefficientRule, keep, sample, traceback)",
                    ))
                }
            }
        }
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of behaviour spec §4 (msMemScope's own file after
    /// `msmemscope --output-path=/w/out python t.py`).
    const SPEC_EXAMPLE: &str = r#"{
    "SelectedStepList": { "stepCount": 0, "stepIdList": [0, 0, 0, 0, 0] },
    "analysisType": 1, "cStackDepth": 0, "collectAllNpu": true, "collectCpu": false,
    "collectMode": 0, "dataFormat": 0, "dumpEventType": 7, "enableCStack": false,
    "enableCompare": false, "enablePyStack": false, "eventType": 7, "isEffective": true,
    "levelType": 1, "logLevel": 1, "npuSlots": 0, "oomTopK": 10, "outputDir": "/w/out",
    "pyStackDepth": 0,
    "watchConfig": { "end": "", "fullContent": false, "isWatched": false, "outputId": 4294967295, "start": "" }
}"#;

    #[test]
    fn msmemscope_spec_example_config_json_is_accepted() {
        let v: Value = serde_json::from_str(SPEC_EXAMPLE).unwrap();
        assert!(is_msmemscope(&v));
        let cfg = raw_options(&v)
            .unwrap()
            .validate(std::path::Path::new("/"))
            .unwrap();
        let mut want = RunConfig {
            output_path: "/w/out".into(),
            ..RunConfig::default()
        };
        // msMemScope has no gap analysis: a file without memscopeOptions turns it off.
        want.analysis.gap = false;
        assert_eq!(cfg, want);
    }

    #[test]
    fn written_config_json_has_msmemscope_keys_sorted_and_reads_back() {
        let d = tempfile::tempdir().unwrap();
        let flags = RawOptions {
            events: Some("alloc,free,access,traceback".into()),
            level: Some("op,kernel".into()),
            call_stack: Some("c:16,python:8".into()),
            analysis: Some("leaks,decompose,oom:5".into()),
            steps: Some("2,3".into()),
            device: Some("npu:1,npu:3,cpu".into()),
            format: Some("db".into()),
            collect_mode: Some("deferred".into()),
            adapters: Some("mstx,host".into()),
            idle_threshold: Some(7),
            inefficient_rule: Some("op-end".into()),
            ..RawOptions::default()
        };
        let cfg = flags.validate(d.path()).unwrap();
        let text = to_text(&cfg);
        let v: Value = serde_json::from_str(&text).unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
        for k in KEYS {
            assert!(v.get(k).is_some(), "{k} missing");
        }
        assert!(text.starts_with("{\n    \"SelectedStepList\": {\n        \"stepCount\": 2,"));
        assert_eq!(v["dumpEventType"], 11);
        assert_eq!(v["eventType"], 11);
        assert_eq!(v["analysisType"], 11);
        assert_eq!(v["levelType"], 3);
        assert_eq!(v["npuSlots"], 10);
        assert_eq!(v["collectMode"], 1);
        assert_eq!(v["dataFormat"], 1);
        assert_eq!(v["oomTopK"], 5);
        assert_eq!(v["SelectedStepList"]["stepIdList"], json!([2, 3, 0, 0, 0]));
        let back = raw_options(&v).unwrap().validate(d.path()).unwrap();
        assert_eq!(back, cfg);
    }

    #[test]
    fn msmemscope_files_are_read_through_the_capped_bom_and_object_checked_read() {
        let d = tempfile::tempdir().unwrap();
        let root = std::path::Path::new("/");
        let want = raw_options(&serde_json::from_str(SPEC_EXAMPLE).unwrap())
            .unwrap()
            .validate(root)
            .unwrap();
        let p = d.path().join("config.json");
        std::fs::write(&p, format!("\u{feff}{SPEC_EXAMPLE}")).unwrap();
        let got = RawOptions::from_file(&p).unwrap().validate(root).unwrap();
        assert_eq!(got, want, "a leading BOM is fine");
        // the 1 MiB cap holds for msMemScope's file too
        std::fs::write(&p, format!("{SPEC_EXAMPLE}{}", " ".repeat(1 << 20))).unwrap();
        let e = RawOptions::from_file(&p).unwrap_err().0;
        assert!(e.contains("larger than 1 MiB"), "{e}");
        // its errors name the file, as memscope's keys' do
        let mut v: Value = serde_json::from_str(SPEC_EXAMPLE).unwrap();
        v["enableCompare"] = json!(true);
        std::fs::write(&p, v.to_string()).unwrap();
        let e = RawOptions::from_file(&p).unwrap_err().0;
        assert!(e.starts_with(&format!("--config {}: ", p.display())), "{e}");
    }

    #[test]
    fn msmemscope_watch_config_is_the_watch_option_both_ways() {
        let mut v: Value = serde_json::from_str(SPEC_EXAMPLE).unwrap();
        v["watchConfig"] = json!({"end": "e", "fullContent": true, "isWatched": true, "outputId": 1, "start": "s"});
        let r = raw_options(&v).unwrap();
        assert_eq!(r.watch.as_deref(), Some("s:1,e,full-content"));
        let cfg = r.validate(std::path::Path::new("/")).unwrap();
        let back: Value = serde_json::from_str(&to_text(&cfg)).unwrap();
        assert_eq!(back["watchConfig"], v["watchConfig"]);
    }

    #[test]
    fn memscope_options_sample_is_the_sample_option_both_ways() {
        let mut v: Value = serde_json::from_str(SPEC_EXAMPLE).unwrap();
        v["memscopeOptions"] = json!({"sample": "250us"});
        let r = raw_options(&v).unwrap();
        assert_eq!(r.sample.as_deref(), Some("250us"));
        let cfg = r.validate(std::path::Path::new("/")).unwrap();
        assert_eq!(cfg.sample_ns, Some(250_000));
        let back: Value = serde_json::from_str(&to_text(&cfg)).unwrap();
        assert_eq!(back["memscopeOptions"]["sample"], "250us");
        let off = RunConfig::default();
        let back: Value = serde_json::from_str(&to_text(&off)).unwrap();
        assert!(back["memscopeOptions"].get("sample").is_none());
    }

    #[test]
    fn msmemscope_files_with_compare_or_unknown_keys_are_refused() {
        let mut v: Value = serde_json::from_str(SPEC_EXAMPLE).unwrap();
        v["events"] = json!("alloc");
        assert!(raw_options(&v).unwrap_err().0.starts_with("events:"));
        let mut v: Value = serde_json::from_str(SPEC_EXAMPLE).unwrap();
        v["dataFormat"] = json!(7);
        assert!(raw_options(&v).unwrap_err().0.contains("dataFormat"));
        // no level at all (msMemScope's `--level=`): refused as memscope's empty `--level` is
        let mut v: Value = serde_json::from_str(SPEC_EXAMPLE).unwrap();
        v["levelType"] = json!(0);
        let e = raw_options(&v).unwrap_err().0;
        assert!(e.starts_with("levelType: 0 selects neither op"), "{e}");
    }
}
