//! Fuzz target: config.json and the option parsers behind `memscope run`'s flags.
//!
//! * Most inputs are config.json files read through `RawOptions::from_file` (bounded read,
//!   BOM, object check, then memscope's keys or msMemScope's own file) and validated like
//!   `memscope run --config` does.
//! * An input starting with `#flags\n` is split into lines, given to the flags in order
//!   (`--events`, `--level`, `--call-stack`, `--analysis`, `--steps`, `--device`, `-o`,
//!   `--format`, `--log-level`, `--collect-mode`, `--adapters`, `--inefficient-rule`),
//!   overlaid on nothing and validated.
//!
//! Oracle: a configuration that validates is written back both ways memscope writes it —
//! msMemScope's key set (the config.json next to every dump) and memscope's keys (what `run`
//! hands the Python package) — read again and validated again, and must come out the same.

use memscope_collect::adapter::{AdapterDescriptor, SourceId};
use memscope_collect::config::RawOptions;
use memscope_collect::registry::Registry;
use memscope_fuzz::{outcome_of_error, run, Target};

/// A stand-in of the CLI's registration list (`memscope-cli/src/builtin.rs`, whose descriptors
/// live in the adapter crates): only the names, ids and defaults matter to configuration
/// parsing, which checks names against the installed list.
const fn named(name: &'static str, source: u16, default_on: bool) -> AdapterDescriptor {
    AdapterDescriptor {
        name,
        source: SourceId(source),
        default_on,
        ..AdapterDescriptor::BASE
    }
}

static STAND_INS: [AdapterDescriptor; 8] = [
    named("mstx", 0, true),
    named("pta", 1, true),
    named("mindspore", 2, true),
    named("atb", 3, true),
    named("hal", 4, true),
    named("acl", 5, true),
    named("host", 6, false),
    AdapterDescriptor {
        library: Some("libmemscope_adapter_pymem.so"),
        ..named("pymem", u16::MAX, false)
    },
];

static REGISTRY: Registry = Registry {
    descriptors: &[
        &STAND_INS[0],
        &STAND_INS[1],
        &STAND_INS[2],
        &STAND_INS[3],
        &STAND_INS[4],
        &STAND_INS[5],
        &STAND_INS[6],
        &STAND_INS[7],
    ],
};

fn seeds() -> Vec<Vec<u8>> {
    [
        "{}",
        r#"{"events":"alloc,free,launch","level":["op","kernel"],"call_stack":"c:16,python:3","analysis":"leaks,decompose,oom:5","steps":[1,2],"device":"npu,npu:0x1f,cpu","output_path":"out/x","format":"db","log_level":"warn","collect_mode":"deferred","adapters":["mstx","pta"],"idle_threshold":7,"host_rows":true}"#,
        r#"{"events":["none"],"analysis":"none","steps":"3","device":["npu:07"],"adapter_paths":[]}"#,
        "\u{feff}{\"format\":\"csv\"}",
        r#"["alloc","op",null,null,null,null,"/tmp/arr",null,null,null,null,null,null]"#,
        "#flags\nalloc,free\nop\nc:50\nleaks\n1,2,3\nnpu:1\nrel/out\ncsv\ninfo\nimmediate\nmstx,host",
        "#flags\nnone\n1\npython\noom\n\ncpu\n/abs\ndb\ndebug\ndeferred\nhal\nop-end",
        // msMemScope's own config.json (behaviour spec §4), and one memscope wrote
        r#"{"SelectedStepList":{"stepCount":0,"stepIdList":[0,0,0,0,0]},"analysisType":1,"cStackDepth":0,"collectAllNpu":true,"collectCpu":false,"collectMode":0,"dataFormat":0,"dumpEventType":7,"enableCStack":false,"enableCompare":false,"enablePyStack":false,"eventType":7,"isEffective":true,"levelType":1,"logLevel":1,"npuSlots":0,"oomTopK":10,"outputDir":"/w/out","pyStackDepth":0,"watchConfig":{"end":"","fullContent":false,"isWatched":false,"outputId":4294967295,"start":""}}"#,
        r#"{"SelectedStepList":{"stepCount":2,"stepIdList":[2,3,0,0,0]},"analysisType":13,"cStackDepth":16,"collectAllNpu":false,"collectCpu":true,"collectMode":1,"dataFormat":1,"dumpEventType":11,"enableCStack":true,"enableCompare":false,"enablePyStack":true,"eventType":15,"isEffective":true,"levelType":3,"logLevel":0,"npuSlots":6,"oomTopK":5,"outputDir":"/w/o2","pyStackDepth":3,"watchConfig":{"end":"","fullContent":false,"isWatched":false,"outputId":4294967295,"start":""},"memscopeOptions":{"adapters":["mstx","host"],"adapterPaths":[],"idleThreshold":7,"inefficientRule":"op-end","hostRows":true,"gap":true,"traceback":false}}"#,
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect()
}

fn dict() -> Vec<Vec<u8>> {
    [
        "\"events\":",
        "\"level\":",
        "\"call_stack\":",
        "\"analysis\":",
        "\"steps\":",
        "\"device\":",
        "\"output_path\":",
        "\"format\":",
        "\"log_level\":",
        "\"collect_mode\":",
        "\"adapters\":",
        "\"adapter_paths\":",
        "\"idle_threshold\":",
        "\"inefficient_rule\":",
        "\"host_rows\":",
        "op-end",
        "msmemscope",
        "\"SelectedStepList\":",
        "\"stepCount\":",
        "\"stepIdList\":",
        "\"analysisType\":",
        "\"cStackDepth\":",
        "\"collectAllNpu\":",
        "\"collectCpu\":",
        "\"collectMode\":",
        "\"dataFormat\":",
        "\"dumpEventType\":",
        "\"enableCStack\":",
        "\"enableCompare\":",
        "\"enablePyStack\":",
        "\"levelType\":",
        "\"logLevel\":",
        "\"npuSlots\":",
        "\"oomTopK\":",
        "\"outputDir\":",
        "\"pyStackDepth\":",
        "\"watchConfig\":",
        "\"isWatched\":",
        "\"memscopeOptions\":",
        "\"adapterPaths\":",
        "\"idleThreshold\":",
        "\"inefficientRule\":",
        "\"hostRows\":",
        "4294967295",
        "none",
        "alloc",
        "free",
        "launch",
        "access",
        "traceback",
        "op",
        "kernel",
        "c:",
        "python:",
        "leaks",
        "decompose",
        "inefficient",
        "gap",
        "oom:",
        "npu",
        "npu:",
        "cpu",
        "csv",
        "db",
        "mstx",
        "pta",
        "host",
        "hal",
        "acl",
        "atb",
        "mindspore",
        "，",
        ",",
        "[",
        "]",
        "{",
        "}",
        "null",
        "true",
        "\"",
        "\\u0000",
        "\u{feff}",
        "=",
        "@",
        "../",
        "//",
        "0x",
        "1000",
        "1001",
        "[[[[[[[[[[[[",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect()
}

fn flags(text: &str) -> RawOptions {
    let mut l = text.lines().skip(1).map(str::to_owned);
    let mut next = || l.next();
    RawOptions {
        events: next(),
        level: next(),
        call_stack: next(),
        analysis: next(),
        steps: next(),
        device: next(),
        output_path: next(),
        format: next(),
        log_level: next(),
        collect_mode: next(),
        adapters: next(),
        inefficient_rule: next(),
        ..RawOptions::default()
    }
}

fn main() {
    memscope_collect::registry::install(&REGISTRY);
    let cwd = std::path::PathBuf::from("/tmp/memscope-fuzz-cwd");
    run(
        Target {
            name: "config",
            ext: "json",
            seeds: seeds(),
            dict: dict(),
            stretch_max: 4 << 20,
        },
        move |input, ctx| {
            let raw = if input.starts_with(b"#flags\n") {
                flags(&String::from_utf8_lossy(input))
            } else {
                match RawOptions::from_file(&ctx.path) {
                    Ok(r) => r,
                    Err(e) => return outcome_of_error(&e.0, &ctx.path),
                }
            };
            let cfg = match raw.validate(&cwd) {
                Ok(c) => c,
                Err(e) => return outcome_of_error(&e.0, &ctx.path),
            };
            // msMemScope's file has no npu:n next to npu (all NPUs: `npuSlots` 0), where the
            // n are irrelevant (behaviour spec §2); everything else must come back
            let mut canonical = cfg.clone();
            if canonical.device.all_npu {
                canonical.device.npus.clear();
            }
            let written = [
                (
                    "msMemScope's",
                    memscope_collect::config::msmemscope::to_text(&cfg),
                    &canonical,
                ),
                (
                    "memscope's",
                    serde_json::to_string_pretty(&cfg.to_config_file())
                        .expect("a validated configuration serialises"),
                    &cfg,
                ),
            ];
            for (keys, text, want) in written {
                let again = RawOptions::from_json(&text)
                    .unwrap_or_else(|e| {
                        panic!("written config.json ({keys} keys) does not read back: {e}\n{text}")
                    })
                    .validate(&cwd)
                    .unwrap_or_else(|e| {
                        panic!("written config.json ({keys} keys) does not validate: {e}\n{text}")
                    });
                assert_eq!(
                    &again, want,
                    "config.json round trip ({keys} keys) changed the configuration"
                );
            }
            format!(
                "ok events={:?} analysis={:?}",
                cfg.events.alloc, cfg.analysis.leaks
            )
        },
    )
}
