//! Issue 10 item 7: processes without rows (the shells and shims in front of a job) leave no
//! output behind, whatever analyses run: every project folder holds a dump with rows.

use memscope_tests::*;

#[test]
fn event_less_processes_of_a_launcher_leave_no_folders_or_analysis_files() {
    let train = repo_root().join("examples/sim-npu/train.py");
    let script = format!(
        "sh -c true; sh -c true; exec python3 {} --steps 2",
        train.display()
    );
    let run = memscope_run(
        &["--analysis", "leaks,decompose,inefficient,gap"],
        &["sh", "-c", &script],
        &[("SIM_NPU_DIR", sim_npu_dir().to_str().unwrap())],
    );
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout(), run.stderr());
    let said = format!("{}{}", run.stdout(), run.stderr());
    // the launcher's shells: no console line, no folder (the run index lists them)
    assert!(!said.contains("not listed"), "{said}");
    let projects: Vec<_> = std::fs::read_dir(run.out.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(projects.len(), 1, "one folder, the job's: {projects:?}");
    let mut decompose = 0;
    walk(run.out.path(), &mut |p| {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("decompose_") {
            decompose += 1;
            assert!(
                std::fs::read_to_string(p).unwrap().lines().count() > 1,
                "{name} has rows"
            );
        }
    });
    assert_eq!(decompose, 1);
    assert!(!run.rows().is_empty());
}
