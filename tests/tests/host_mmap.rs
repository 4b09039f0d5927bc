//! Issue 10 item 8: with `MEMSCOPE_HOST_MMAP=1`, mapped memory is tracked as page ranges in its
//! own Event Type `HOST_MMAP`: partial `munmap`s (head, tail, middle), `MAP_FIXED` overlays and
//! `mremap` keep live and peak mapped bytes equal to what is mapped, lengths are whole pages,
//! and the leak summary and decompose keep mapped bytes apart from heap bytes.

use memscope_tests::*;

fn page() -> i64 {
    // SAFETY: sysconf has no preconditions.
    i64::from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as i32)
}

fn size(r: &Row) -> i64 {
    attrs(r)["size"].parse().unwrap()
}

#[test]
fn mappings_are_page_ranges_in_their_own_event_type_with_live_and_peak_as_mapped() {
    let prog = program("host_mmap");
    let run = memscope_run(
        // HOST (malloc) rows are written on request (issue 9); HOST_MMAP rows always are
        &[
            "--adapters",
            "host,mstx",
            "--analysis",
            "decompose",
            "--host-rows",
        ],
        &[prog.to_str().unwrap()],
        &[("MEMSCOPE_HOST_MMAP", "1")],
    );
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout(), run.stderr());
    let p = page();
    let mut rows = run.rows();
    rows.sort_by_key(|r| r["ID"].parse::<u64>().unwrap());
    assert!(rows
        .iter()
        .all(|r| !(r["Event Type"] == "HOST" && attrs(r).contains_key("mmap"))));
    let maps: Vec<&Row> = rows
        .iter()
        .filter(|r| r["Event Type"] == "HOST_MMAP")
        .collect();
    assert!(maps
        .iter()
        .all(|r| r["Device Id"] == "cpu" && size(r) % p == 0));

    // Replay in ID order: at every "live=N" mark, this program's mapped bytes are N, and the
    // rows' `total` is the process's mapped bytes.
    let (mut sum, mut peak, mut baseline, mut inside, mut marks) = (0i64, 0i64, 0i64, false, 0);
    for r in &rows {
        match (r["Event"].as_str(), r["Name"].as_str()) {
            ("MSTX", "begin") => {
                inside = true;
                baseline = sum;
            }
            ("MSTX", "end") => inside = false,
            ("MSTX", n) if n.starts_with("live=") => {
                let want: i64 = n["live=".len()..].parse().unwrap();
                assert_eq!(sum - baseline, want, "at mark {n} (ID {})", r["ID"]);
                marks += 1;
            }
            ("MALLOC" | "FREE", _) if r["Event Type"] == "HOST_MMAP" => {
                sum += if r["Event"] == "MALLOC" {
                    size(r)
                } else {
                    -size(r)
                };
                assert_eq!(
                    attrs(r)["total"].parse::<i64>().unwrap(),
                    sum,
                    "ID {}",
                    r["ID"]
                );
                if inside {
                    peak = peak.max(sum - baseline);
                }
            }
            _ => {}
        }
    }
    assert_eq!(marks, 13);
    assert_eq!(peak, 10 * p, "a MAP_FIXED overlay is not counted twice");
    // mmap(NULL, 3000) is one page; mremap moved it to a 3-page mapping.
    let sizes: Vec<i64> = maps
        .iter()
        .filter(|r| r["Event"] == "MALLOC")
        .map(|r| size(r))
        .collect();
    assert!(!sizes.contains(&3000), "{sizes:?}");
    assert!(sizes.windows(2).any(|w| w == [p, 3 * p]), "{sizes:?}");

    // Reports: the heap summary counts heap bytes only; mapped bytes have their own section.
    let heap_live: i64 = rows
        .iter()
        .filter(|r| r["Event Type"] == "HOST")
        .map(|r| {
            if r["Event"] == "MALLOC" {
                size(r)
            } else {
                -size(r)
            }
        })
        .sum();
    let said = format!("{}{}", run.stdout(), run.stderr());
    let line = |prefix: &str| {
        said.lines()
            .find(|l| l.trim_start().starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} in {said}"))
            .to_owned()
    };
    assert!(
        line("HOST memory live at exit").contains(&format!(
            "): {} block(s), {heap_live} bytes",
            rows.iter()
                .filter(|r| r["Event Type"] == "HOST" && r["Event"] == "MALLOC")
                .count()
                - rows
                    .iter()
                    .filter(|r| r["Event Type"] == "HOST" && r["Event"] == "FREE")
                    .count()
        )),
        "{said}"
    );
    assert!(
        line("HOST_MMAP memory mapped at exit").contains(&format!("): 1 mapping(s), {sum} bytes")),
        "{said}"
    );
    let mut decompose = String::new();
    walk(run.out.path(), &mut |f| {
        if f.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("decompose_")
        {
            decompose = std::fs::read_to_string(f).unwrap();
        }
    });
    let mapped: Vec<&str> = decompose
        .lines()
        .filter(|l| l.contains(",HOST_MMAP,"))
        .collect();
    assert_eq!(mapped.len(), 1, "{decompose}");
    let cells: Vec<&str> = mapped[0].split(',').collect();
    assert_eq!(
        cells[4].parse::<i64>().unwrap(),
        baseline + peak,
        "{decompose}"
    );
    assert_eq!(cells[5].parse::<i64>().unwrap(), sum, "{decompose}");
}
