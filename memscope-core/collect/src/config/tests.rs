//! Tests of option parsing, config.json and flag precedence.

use super::*;

#[test]
fn lists_split_on_ascii_and_fullwidth_commas_without_trimming() {
    assert!(AnalysisSet::parse("leaks，decompose").unwrap().decompose);
    assert!(AnalysisSet::parse("leaks, decompose").is_err());
    assert!(EventSet::parse("alloc，free").unwrap().free);
}

#[test]
fn contradictory_and_empty_lists_are_refused() {
    let e = EventSet::parse("alloc,none,free").unwrap_err();
    assert!(e.0.contains("none cannot be combined"), "{e}");
    assert!(EventSet::parse("none,alloc").is_err());
    assert_eq!(
        EventSet::parse("none").unwrap(),
        EventSet {
            alloc: false,
            free: false,
            launch: false,
            access: false,
            traceback: false
        }
    );
    for empty in ["", ",", "，,"] {
        let e = EventSet::parse(empty).unwrap_err();
        assert!(e.0.contains("no event type named"), "{empty:?}: {e}");
        assert!(AnalysisSet::parse(empty).is_err(), "{empty:?}");
        assert!(LevelSet::parse(empty).is_err(), "{empty:?}");
    }
    assert!(AnalysisSet::parse("none,leaks").is_err());
    assert!(AnalysisSet::parse("leaks,none").is_err());
    assert!(!AnalysisSet::parse("none").unwrap().leaks);
    let e = CallStack::parse("c:0,c:5").unwrap_err();
    assert!(e.0.contains("c given more than once"), "{e}");
    assert!(CallStack::parse("python,python:3").is_err());
    // an empty --call-stack is "no stacks" (what config.json records for it)
    assert_eq!(CallStack::parse("").unwrap(), CallStack::default());
}

#[test]
fn config_json_must_be_an_object_and_may_start_with_a_bom() {
    for (text, what) in [
        (r#"["alloc","op",null]"#, "an array"),
        ("\"alloc\"", "a string"),
        ("null", "null"),
        ("", "empty file"),
        ("  \n", "empty file"),
        // deeper than the parser goes: still named as an array
        (
            &format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)),
            "an array",
        ),
        ("@", "not JSON"),
    ] {
        let e = RawOptions::from_json(text).unwrap_err();
        assert!(e.0.contains("must be a JSON object"), "{text:?}: {e}");
        assert!(e.0.contains(what), "{text:?}: {e}");
    }
    let o = RawOptions::from_json("\u{feff}{\"events\": \"alloc\"}").unwrap();
    assert_eq!(o.events.as_deref(), Some("alloc"));
}

#[test]
fn a_config_json_value_of_the_wrong_type_names_its_key() {
    for (text, key, what) in [
        (
            r#"{"call_stack": 5}"#,
            "\"call_stack\"",
            "a list of strings",
        ),
        (
            r#"{"adapters": ["pta", 3]}"#,
            "\"adapters\"",
            "a list of strings",
        ),
        (
            r#"{"output_path": 5}"#,
            "\"output_path\"",
            "expected a string",
        ),
        (
            r#"{"host_rows": "yes"}"#,
            "\"host_rows\"",
            "expected a boolean",
        ),
        (
            r#"{"outptu_path": "x"}"#,
            "\"outptu_path\"",
            "unknown field",
        ),
        (r#"{"steps": true}"#, "\"steps\"", "a list of numbers"),
    ] {
        let e = RawOptions::from_json(text).unwrap_err();
        assert!(e.0.contains(&format!("key {key}")), "{text}: {e}");
        assert!(e.0.contains(what), "{text}: {e}");
        assert_eq!(e.0.lines().count(), 1, "{e}");
    }
}

#[test]
fn config_reads_are_capped_by_the_bytes_read_not_st_size() {
    // /proc/self/pagemap: a regular file of size 0 with unbounded content
    let e = RawOptions::from_file(std::path::Path::new("/proc/self/pagemap")).unwrap_err();
    assert!(e.0.contains("larger than 1 MiB"), "{e}");
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("big.json");
    std::fs::write(&p, format!("{{{}}}", " ".repeat(1 << 20))).unwrap();
    let e = RawOptions::from_file(&p).unwrap_err();
    assert!(e.0.contains("larger than 1 MiB"), "{e}");
    let e = RawOptions::from_file(d.path()).unwrap_err();
    assert!(e.0.contains("not a regular file"), "{e}");
}

#[test]
fn call_stack_depths_follow_msmemscope_rules() {
    assert_eq!(CallStack::parse("c").unwrap().c, Some(50));
    assert_eq!(
        CallStack::parse("c:16,python:3").unwrap(),
        CallStack {
            c: Some(16),
            python: Some(3)
        }
    );
    assert!(CallStack::parse("c:00").is_err());
    assert!(CallStack::parse("c:1001").is_err());
    assert!(CallStack::parse("rust").is_err());
}

#[test]
fn steps_devices_and_analysis_reject_bad_values() {
    assert_eq!(parse_steps("2,3").unwrap(), vec![2, 3]);
    assert!(parse_steps("1,2,3,4,5,6").is_err());
    assert!(parse_steps("0").is_err());
    assert!(parse_steps("-1").is_err());
    assert_eq!(parse_steps("4294967295").unwrap(), vec![u32::MAX]);
    assert_eq!(DeviceSet::parse("npu:0x1,cpu").unwrap().npus, vec![1]);
    assert!(DeviceSet::parse("npu:32").is_err());
    assert!(DeviceSet::parse("").is_err());
    assert_eq!(AnalysisSet::parse("oom:5").unwrap().oom, Some(5));
    // one range in every message, whatever K is wrong with
    for bad in ["oom:0", "oom:-1", "oom:1001", "oom:x"] {
        let e = AnalysisSet::parse(bad).unwrap_err().to_string();
        assert!(e.contains("oom:K needs K from 1 to 1000"), "{bad}: {e}");
    }
}

#[test]
fn flags_override_config_file_and_unknown_keys_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("config.json");
    std::fs::write(
        &p,
        r#"{"adapters":["mstx","pta"],"steps":[2],"format":"db"}"#,
    )
    .unwrap();
    let file = RawOptions::from_file(&p).unwrap();
    let flags = RawOptions {
        format: Some("csv".into()),
        ..RawOptions::default()
    };
    let c = file.overlay(flags).validate(d.path()).unwrap();
    assert_eq!(c.adapters, vec!["mstx", "pta"]);
    assert_eq!(c.steps, vec![2]);
    assert_eq!(c.format, Format::Csv);
    assert!(c.output_path.is_absolute());
    std::fs::write(&p, r#"{"adapterz":"mstx"}"#).unwrap();
    let e = RawOptions::from_file(&p).unwrap_err().0;
    assert!(e.contains("config.json") && e.contains("adapterz"), "{e}");
}

#[test]
fn output_paths_are_checked_like_msmemscope() {
    assert!(check_output_path("/tmp/out dir/x").is_ok());
    assert!(check_output_path("-o").is_err());
    assert!(check_output_path("a;b").is_err());
    assert!(check_output_path(" ").is_err());
}

#[test]
fn the_written_config_json_reads_back_to_the_same_configuration() {
    let d = tempfile::tempdir().unwrap();
    let flags = RawOptions {
        events: Some("alloc,free,access".into()),
        level: Some("op,kernel".into()),
        call_stack: Some("c:16".into()),
        analysis: Some("leaks,oom:5".into()),
        steps: Some("2,3".into()),
        device: Some("npu:1,cpu".into()),
        format: Some("db".into()),
        adapters: Some("mstx,host".into()),
        ..RawOptions::default()
    };
    let cfg = flags.validate(d.path()).unwrap();
    let p = d.path().join("config.json");
    std::fs::write(
        &p,
        serde_json::to_string_pretty(&cfg.to_config_file()).unwrap(),
    )
    .unwrap();
    let back = RawOptions::from_file(&p)
        .unwrap()
        .validate(d.path())
        .unwrap();
    assert_eq!(back, cfg);
}

#[test]
fn watch_parses_msmemscope_syntax_and_refuses_the_rest() {
    let w = WatchConfig::parse("aten.add:0,aten.sum,full-content").unwrap();
    assert_eq!(
        (w.start.as_str(), w.out_id, w.end.as_str(), w.full_content),
        ("aten.add", Some(0), "aten.sum", true)
    );
    let w = WatchConfig::parse(",end,").unwrap();
    assert_eq!(
        (w.start.as_str(), w.end.as_str(), w.full_content),
        ("", "end", false)
    );
    assert_eq!(WatchConfig::parse("a:12,b").unwrap().to_text(), "a:12,b");
    for bad in [
        "end",
        "a:,b",
        "a:01,b",
        ":1,b",
        "a,b,more",
        "a,",
        "a,b,full-content,x",
    ] {
        assert!(WatchConfig::parse(bad).is_err(), "{bad}");
    }
    assert_eq!(
        WatchConfig::parse(&format!("{},b", "x".repeat(300)))
            .unwrap()
            .start
            .len(),
        WatchConfig::MAX_NAME
    );
}
