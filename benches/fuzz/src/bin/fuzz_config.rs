//! Fuzz target: config.json and the option parsers behind `memscope run`'s flags.
//!
//! * Most inputs are config.json files read through `RawOptions::from_file` (bounded read,
//!   BOM, object check, serde) and validated like `memscope run --config` does.
//! * An input starting with `#flags\n` is split into lines, given to the flags in order
//!   (`--events`, `--level`, `--call-stack`, `--analysis`, `--steps`, `--device`, `-o`,
//!   `--format`, `--log-level`, `--collect-mode`, `--adapters`), overlaid on nothing and
//!   validated.
//!
//! Oracle: a configuration that validates is written back as config.json (what memscope puts
//! next to every dump), read again and validated again, and must come out the same.

use memscope_core::config::RawOptions;
use memscope_fuzz::{outcome_of_error, run, Target};

fn seeds() -> Vec<Vec<u8>> {
    [
        "{}",
        r#"{"events":"alloc,free,launch","level":["op","kernel"],"call_stack":"c:16,python:3","analysis":"leaks,decompose,oom:5","steps":[1,2],"device":"npu,npu:0x1f,cpu","output_path":"out/x","format":"db","log_level":"warn","collect_mode":"deferred","adapters":["mstx","pta"],"idle_threshold":7}"#,
        r#"{"events":["none"],"analysis":"none","steps":"3","device":["npu:07"],"adapter_paths":[]}"#,
        "\u{feff}{\"format\":\"csv\"}",
        r#"["alloc","op",null,null,null,null,"/tmp/arr",null,null,null,null,null,null]"#,
        "#flags\nalloc,free\nop\nc:50\nleaks\n1,2,3\nnpu:1\nrel/out\ncsv\ninfo\nimmediate\nmstx,host",
        "#flags\nnone\n1\npython\noom\n\ncpu\n/abs\ndb\ndebug\ndeferred\nhal",
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
        ..RawOptions::default()
    }
}

fn main() {
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
            let text = serde_json::to_string_pretty(&cfg.to_config_file())
                .expect("a validated configuration serialises");
            let again = RawOptions::from_json(&text)
                .unwrap_or_else(|e| panic!("written config.json does not read back: {e}\n{text}"))
                .validate(&cwd)
                .unwrap_or_else(|e| panic!("written config.json does not validate: {e}\n{text}"));
            assert_eq!(
                again, cfg,
                "config.json round trip changed the configuration"
            );
            format!(
                "ok events={:?} analysis={:?}",
                cfg.events.alloc, cfg.analysis.leaks
            )
        },
    )
}
