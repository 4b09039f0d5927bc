use super::*;

/// A named scope as an adapter's descriptor declares one (the CLI installs the real ones).
fn install_stand_in_scope() {
    install_scopes(vec![NamedScope {
        name: "pyobj",
        event_type: "PYOBJ",
        apart: "PYOBJ",
    }]);
}

fn alloc(device: &str, allocator: &str, peak: u64, leaked: Option<u64>) -> AllocatorFigures {
    AllocatorFigures {
        device: device.into(),
        allocator: allocator.into(),
        peak_bytes: peak,
        leaked_bytes: leaked,
        peak_site: Some(Site {
            site: "t.py(3): f".into(),
            bytes: peak,
            blocks: 1,
        }),
        ..AllocatorFigures::default()
    }
}

#[test]
fn races_limit_counts_the_process_races_and_is_not_crossed_by_what_was_not_recorded() {
    let l = Limit::parse("races>0").unwrap();
    assert!(l.metric.is_count() && l.max == 0);
    let mut f = ProcessFigures::default();
    assert!(check(&l, "pid 1", &f, None).is_empty(), "not recorded");
    f.races = Some(0);
    assert!(check(&l, "pid 1", &f, None).is_empty());
    f.races = Some(3);
    let c = check(&l, "pid 1", &f, None);
    assert_eq!(c.len(), 1);
    assert_eq!(
        c[0].line(true),
        "limit races>0 crossed by pid 1: 3, 3 over 0"
    );
    // marks that could not be checked are never passed as clean
    f.races = Some(0);
    f.races_unchecked = 2;
    let c = check(&l, "pid 1", &f, None);
    assert_eq!(
        c[0].line(true),
        "limit races>0 crossed by pid 1: 2 (sanitizer-op marks not checked), 2 over 0"
    );
}

#[test]
fn limits_parse_sizes_scopes_and_refuse_nonsense() {
    let v =
        Limit::parse_list("leaks>1MiB, peak.npu:0>40GiB,peak.host>2GB,live.npu:1.PTA>0").unwrap();
    assert_eq!(v[0].max, 1 << 20);
    assert_eq!(v[1].scope.device.as_deref(), Some("npu:0"));
    assert_eq!(v[1].max, 40 << 30);
    assert_eq!(v[2].max, 2_000_000_000);
    assert_eq!(v[3].scope.allocator.as_deref(), Some("PTA"));
    assert_eq!(parse_size("1.5 GiB").unwrap(), 3 << 29);
    for bad in [
        "leaks",
        "leak>1",
        "peak.gpu:0>1",
        "peak>1XB",
        "peak.npu:x>1",
        "peak.npu:0.P-T>1",
        "dropped>1MiB",
        "dropped>1.5",
        "dropped.npu>0",
        "races>1MiB",
        "races.npu>0",
        "hal_at_exit.PTA>1",
        "hal_at_exit.cpu>1",
        "hal_at_exit.host>1",
    ] {
        assert!(Limit::parse(bad).is_err(), "{bad}");
    }
    assert_eq!(Limit::parse("dropped>10").unwrap().max, 10);
    for ok in [
        "hal_at_exit>1GiB",
        "hal_at_exit.npu:0>0",
        "hal_at_exit.npu.HAL>1",
    ] {
        assert_eq!(Limit::parse(ok).unwrap().metric, Metric::HalAtExit, "{ok}");
    }
    assert!(Limit::parse_list(" , ").is_err());
    assert!(Limit::parse_list("").is_err());
    let e = Limit::parse_list("leaks>1MiB,,peak>2").unwrap_err();
    assert!(e.contains("item 2"), "{e}");
    assert!(Limit::parse_list("leaks>1MiB,").is_err());
    let e = Limit::parse_list("live>0, live > 0").unwrap_err();
    assert!(e.contains("given twice"), "{e}");
    assert!(Limit::parse("peak>1.5").is_err());
    assert!(Limit::parse("peak>1.5B").is_err());
    assert_eq!(Limit::parse("peak>1.5KiB").unwrap().max, 1536);
}

#[test]
fn a_limit_names_the_allocator_that_crossed_it_by_how_much_and_where() {
    install_stand_in_scope();
    let f = ProcessFigures {
        allocators: vec![
            alloc("0", "HAL", 3 << 30, Some(0)),
            alloc("0", "PTA", 2 << 30, Some(28 << 20)),
            alloc("cpu", "HOST", 1 << 20, None),
            alloc("cpu", "PYOBJ", 5 << 30, None),
        ],
        ..ProcessFigures::default()
    };
    let l = Limit::parse("peak.npu:0>2GiB").unwrap();
    let c = check(&l, "pid 1", &f, None);
    assert_eq!(c.len(), 1);
    assert_eq!(
        (c[0].allocator.as_deref(), c[0].value),
        (Some("HAL"), 3 << 30)
    );
    assert!(
        c[0].line(false).contains("1.0 GiB over 2.0 GiB"),
        "{}",
        c[0].line(false)
    );
    assert!(c[0].line(false).contains("at t.py(3): f"));
    // pools before the driver memory that backs them
    let c = check(&Limit::parse("peak.npu:0>1GiB").unwrap(), "p", &f, None);
    let names: Vec<_> = c.iter().map(|c| c.allocator.clone().unwrap()).collect();
    assert_eq!(names, ["PTA", "HAL"]);
    let l = Limit::parse("leaks>1MiB").unwrap();
    let c = check(&l, "pid 1", &f, None);
    assert_eq!(c[0].allocator.as_deref(), Some("PTA"));
    assert!(check(&Limit::parse("peak.cpu>2MiB").unwrap(), "p", &f, None).is_empty());
    assert_eq!(
        check(&Limit::parse("peak.pyobj>2MiB").unwrap(), "p", &f, None).len(),
        1
    );
    assert!(check(&Limit::parse("peak.npu:1>0").unwrap(), "p", &f, None).is_empty());
    let d = Limit::parse("dropped>0").unwrap();
    assert_eq!(check(&d, "p", &f, Some(3)).len(), 1);
    assert!(check(&d, "p", &f, None).is_empty());
}
