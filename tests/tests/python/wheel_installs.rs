//! The wheel installed with `pip --user` finds its CLI and probe; its `msmemscope` script
//! preloads the probe for `import msmemscope`.

use super::*;

#[test]
fn wheel_installs_with_pip_user_and_finds_its_cli_and_probe() {
    let _ = venv(); // builds the wheel
    let base = tempfile::tempdir().unwrap();
    let install = |extra: &[&str]| {
        Command::new(memscope_tests::python3())
            .args([
                "-m",
                "pip",
                "install",
                "-q",
                "--user",
                "--no-deps",
                "--no-index",
            ])
            .args(extra)
            .arg(&venv().wheel)
            .env("PYTHONUSERBASE", base.path())
            .env_remove("PIP_REQUIRE_VIRTUALENV")
            .output()
            .expect("pip install --user")
    };
    let mut out = install(&[]);
    if String::from_utf8_lossy(&out.stderr).contains("externally-managed") {
        out = install(&["--break-system-packages"]);
    }
    check(&out, "pip install --user the wheel");
    let d = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(memscope_tests::python3());
    cmd.args([
        "-c",
        "import memscope, memscope._locate as l; print(l.cli()); print(l.probe()); \
         memscope.start(); memscope.take_snapshot(name='user'); memscope.stop()",
    ]);
    clean(&mut cmd, d.path());
    cmd.env("PYTHONUSERBASE", base.path());
    let out = cmd.output().unwrap();
    check(&out, "python3 with the --user install");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let base_s = base.path().to_string_lossy().into_owned();
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[0].starts_with(&base_s) && lines[0].ends_with("bin/memscope"),
        "{stdout}"
    );
    assert!(
        lines[1].ends_with("lib/memscope/libmemscope_probe.so"),
        "{stdout}"
    );
    let t = Instant::now();
    while files(&d.path().join("memscopeDumpResults"), "memscope_dump_").is_empty() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "no dump from the --user install"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn wheel_msmemscope_script_preloads_the_wheels_probe_for_import_msmemscope() {
    // issue 26: `source <venv>/bin/msmemscope --load-api-env`, then msMemScope's API
    let v = venv();
    let d = tempfile::tempdir().unwrap();
    let bin = v.dir.join("bin");
    let line = format!(
        "export PATH='{}':$PATH; source msmemscope --load-api-env && printf '%s\\n' \"$LD_PRELOAD\" && \
         python -c 'import msmemscope; msmemscope.start(); msmemscope.take_snapshot(name=\"s\"); msmemscope.stop()' && \
         source msmemscope --unload-api-env && printf '[%s]\\n' \"${{LD_PRELOAD-unset}}\"",
        bin.display()
    );
    let mut cmd = Command::new("bash");
    cmd.args(["-c", &line]);
    clean(&mut cmd, d.path());
    let out = cmd.output().unwrap();
    check(&out, "source msmemscope --load-api-env from the wheel");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.first().copied(),
        Some(
            v.dir
                .join("lib/memscope/libmemscope_probe.so")
                .to_str()
                .unwrap()
        ),
        "{stdout}"
    );
    assert_eq!(lines.last().copied(), Some("[unset]"), "{stdout}");
    let t = Instant::now();
    while files(&d.path().join("memscopeDumpResults"), "memscope_dump_").is_empty() {
        assert!(t.elapsed() < Duration::from_secs(20), "no dump: {stdout}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
