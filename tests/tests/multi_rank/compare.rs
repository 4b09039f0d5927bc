//! `memscope compare` of multi-rank runs: devices aligned or mapped, run directories paired
//! by rank.

use super::*;

/// 8 ranks of train.py (5 steps) through `tests/python/rank_launch.py`, rank r on device r,
/// the ranks of `leak` leaking; `--level kernel` so compare has kernel rows.
fn train_ranks(leak: &str) -> Run {
    let launch = repo_root().join("tests/python/rank_launch.py");
    let sim = sim_npu_dir();
    let run = memscope_run(
        &["--level", "kernel", "--events", "alloc,free,launch"],
        &[
            "python3",
            launch.to_str().unwrap(),
            &RANKS.to_string(),
            leak,
            "--steps",
            "5",
        ],
        &[("SIM_NPU_DIR", sim.to_str().unwrap())],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    run
}

fn compare_cmd(args: &[&std::ffi::OsStr]) -> (bool, String, String) {
    let o = Command::new(memscope_bin())
        .arg("compare")
        .args(args)
        .output()
        .unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `(name, device, base, compare, diff, step)` of a compare CSV.
fn compare_rows(path: &Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(",,,Base,Compare"));
    assert_eq!(
        lines.next(),
        Some("Event,Name,Device Id,Allocated Memory(byte),Allocated Memory(byte),Diff Memory(byte),Step"),
        "--step-column"
    );
    lines
        .map(|l| l.split(',').map(str::to_owned).collect())
        .collect()
}

#[test]
fn compare_ignore_device_aligns_rank_0_with_rank_5_and_run_dirs_pair_ranks_by_rank_id() {
    let base = train_ranks("-");
    let leaky = train_ranks("3");
    let out = tempfile::tempdir().unwrap();
    let o = out.path().as_os_str();
    // rank 0 (device 0) against rank 5 (device 5) of the same run
    let file_of = |run: &Run, dev: u32| -> PathBuf {
        run.dumps(".csv")
            .into_iter()
            .find(|p| p.to_string_lossy().contains(&format!("/device_{dev}/")))
            .unwrap_or_else(|| panic!("no device_{dev} dump"))
    };
    let (r0, r5) = (file_of(&base, 0), file_of(&base, 5));
    let (ok, stdout, err) = compare_cmd(&[
        r0.as_os_str(),
        r5.as_os_str(),
        "--level".as_ref(),
        "kernel".as_ref(),
        "-o".as_ref(),
        o,
    ]);
    assert!(ok, "{err}");
    assert!(
        stdout.contains("0 matched"),
        "without --ignore-device nothing aligns: {stdout}"
    );
    let (ok, stdout, err) = compare_cmd(&[
        r0.as_os_str(),
        r5.as_os_str(),
        "--level".as_ref(),
        "kernel".as_ref(),
        "--ignore-device".as_ref(),
        "--step-column".as_ref(),
        "-o".as_ref(),
        o,
    ]);
    assert!(ok, "{err}");
    assert!(stdout.contains(" 0 base only, 0 compare only"), "{stdout}");
    let path = PathBuf::from(stdout.trim().rsplit(" written to ").next().unwrap());
    let rows = compare_rows(&path);
    assert!(!rows.is_empty());
    for r in &rows {
        assert_eq!(r[2], "0", "rows carry the base's device: {r:?}");
        assert_eq!(r[5], "0", "identical ranks: {r:?}");
        let step: u32 = r[6]
            .parse()
            .unwrap_or_else(|_| panic!("step column: {r:?}"));
        assert!((1..=5).contains(&step), "{r:?}");
    }
    // steps 1..5 all appear, each with the same kernels
    let steps: std::collections::BTreeSet<&str> = rows.iter().map(|r| r[6].as_str()).collect();
    assert_eq!(steps.len(), 5, "{rows:?}");
    // --map-device 5=0 aligns the same way
    let (ok, stdout, err) = compare_cmd(&[
        r0.as_os_str(),
        r5.as_os_str(),
        "--level".as_ref(),
        "kernel".as_ref(),
        "--map-device".as_ref(),
        "5=0".as_ref(),
        "-o".as_ref(),
        o,
    ]);
    assert!(
        ok && stdout.contains(" 0 base only, 0 compare only"),
        "{stdout}{err}"
    );
    // two runs: ranks paired by rank id; only rank 3 differs (its leak, from step 3 on)
    let (ok, stdout, err) = compare_cmd(&[
        base.out.path().as_os_str(),
        leaky.out.path().as_os_str(),
        "--level".as_ref(),
        "kernel".as_ref(),
        "--step-column".as_ref(),
        "-o".as_ref(),
        o,
    ]);
    assert!(ok, "{err}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), RANKS, "{stdout}");
    for (r, l) in lines.iter().enumerate() {
        assert!(l.starts_with(&format!("rank {r}: ")), "{l}");
        let diff: i64 = l
            .split(", diff ")
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        if r == 3 {
            assert_eq!(diff, 3 * 4 * 1024 * 1024, "three 4 MiB leaks: {l}");
            let path = PathBuf::from(l.rsplit(" written to ").next().unwrap());
            assert!(path.to_string_lossy().ends_with("_rank3.csv"), "{l}");
            let leaks: Vec<String> = compare_rows(&path)
                .into_iter()
                .filter(|x| x[5] != "0")
                .map(|x| x[6].clone())
                .collect();
            assert_eq!(leaks, ["3", "4", "5"], "the leaking steps");
        } else {
            assert_eq!(diff, 0, "{l}");
        }
    }
    // a file against a directory is refused
    let (ok, _, err) = compare_cmd(&[r0.as_os_str(), leaky.out.path().as_os_str()]);
    assert!(
        !ok && err.contains("two dump files or two output directories"),
        "{err}"
    );
}
