use super::*;

fn acc(addr: u64, kind: AccessKind) -> TensorAccess {
    TensorAccess {
        addr,
        size: 64,
        kind,
        aliases: vec!["self".into()],
        owner: Some(format!("buf{addr}")),
    }
}

fn launch(id: u64, stream: StreamId, accesses: Vec<TensorAccess>) -> StreamOp {
    StreamOp::KernelLaunch(KernelLaunch {
        id,
        time_ns: id * 10,
        stream,
        operator: format!("op{id}"),
        accesses,
        python_stack: Some(Arc::from(format!("train.py:{id}"))),
        c_stack: None,
    })
}

fn w(id: u64, stream: StreamId, addr: u64) -> StreamOp {
    launch(id, stream, vec![acc(addr, AccessKind::ReadWrite)])
}

fn r(id: u64, stream: StreamId, addr: u64) -> StreamOp {
    launch(id, stream, vec![acc(addr, AccessKind::ReadOnly)])
}

fn free(id: u64, addr: u64, stream: Option<StreamId>) -> StreamOp {
    StreamOp::Free(Free {
        id,
        time_ns: 0,
        addr,
        size: 64,
        stream,
        python_stack: None,
        c_stack: None,
    })
}

/// (kind, current id, previous id) of each finding.
fn verdicts(ops: Vec<StreamOp>) -> Vec<(RaceKind, u64, u64)> {
    check(ops)
        .map(|f| (f.kind, f.current.id, f.previous.id))
        .collect()
}

#[test]
fn two_streams_writing_one_buffer_without_wait_race() {
    let ops = vec![
        StreamOp::StreamCreate { stream: 1 },
        w(1, 0, 0x100),
        w(2, 1, 0x100),
    ];
    let f: Vec<_> = check(ops).collect();
    assert_eq!(f.len(), 1);
    let f = &f[0];
    assert_eq!(f.kind, RaceKind::WriteAfterWrite);
    assert_eq!((f.addr, f.size), (0x100, 64));
    assert_eq!((f.current.stream, f.previous.stream), (Some(1), Some(0)));
    assert_eq!((&*f.current.name, &*f.previous.name), ("op2", "op1"));
    assert_eq!(f.previous.owner.as_deref(), Some("buf256"));
    assert_eq!(f.previous.python_stack.as_deref(), Some("train.py:1"));
    assert_eq!(f.current.aliases, ["self"]);
    assert!(f
        .to_string()
        .starts_with("write-after-write at 0x100 (64 B): op2 #2 on stream 0x1"));
}

#[test]
fn record_and_wait_orders_the_second_write() {
    let ops = vec![
        w(1, 0, 0x100),
        StreamOp::EventRecord {
            event: 7,
            stream: 0,
        },
        StreamOp::EventWait {
            stream: 1,
            event: 7,
        },
        w(2, 1, 0x100),
    ];
    assert!(verdicts(ops).is_empty());
}

#[test]
fn wait_on_an_event_recorded_before_the_write_does_not_order_it() {
    let ops = vec![
        StreamOp::EventRecord {
            event: 7,
            stream: 0,
        },
        w(1, 0, 0x100),
        StreamOp::EventWait {
            stream: 1,
            event: 7,
        },
        r(2, 1, 0x100),
    ];
    assert_eq!(verdicts(ops), [(RaceKind::ReadAfterWrite, 2, 1)]);
}

#[test]
fn write_after_reads_on_two_streams_names_each_unordered_read() {
    let ops = vec![
        r(1, 1, 0x100),
        r(2, 2, 0x100),
        r(3, 0, 0x100),
        w(4, 0, 0x100),
    ];
    assert_eq!(
        verdicts(ops),
        [
            (RaceKind::WriteAfterRead, 4, 1),
            (RaceKind::WriteAfterRead, 4, 2)
        ]
    );
}

#[test]
fn in_place_op_reading_and_writing_one_address_is_no_race_with_itself() {
    let ops = vec![launch(
        1,
        1,
        vec![
            acc(0x100, AccessKind::ReadOnly),
            acc(0x100, AccessKind::ReadWrite),
        ],
    )];
    assert!(verdicts(ops).is_empty());
}

#[test]
fn device_synchronize_orders_every_stream() {
    let ops = vec![
        w(1, 1, 0x100),
        w(2, 2, 0x200),
        StreamOp::DeviceSynchronize,
        w(3, 2, 0x100),
        r(4, 3, 0x200),
    ];
    assert!(verdicts(ops).is_empty());
}

#[test]
fn stream_synchronize_orders_only_that_stream() {
    let ops = vec![
        w(1, 1, 0x100),
        w(2, 2, 0x200),
        StreamOp::StreamSynchronize { stream: 1 },
        r(3, 3, 0x100),
        r(4, 3, 0x200),
    ];
    assert_eq!(verdicts(ops), [(RaceKind::ReadAfterWrite, 4, 2)]);
}

#[test]
fn free_on_another_stream_while_a_kernel_may_use_the_block_is_found() {
    let ops = vec![w(1, 1, 0x100), free(9, 0x100, Some(0)), w(2, 0, 0x100)];
    let f: Vec<_> = check(ops).collect();
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].kind, RaceKind::FreeWhileInUse);
    assert_eq!((f[0].current.id, f[0].current.stream), (9, Some(0)));
    assert_eq!(f[0].current.owner.as_deref(), Some("buf256"));
    assert_eq!(f[0].previous.stream, Some(1));
}

#[test]
fn free_after_the_user_stream_is_synchronized_is_clean() {
    let ops = vec![
        w(1, 1, 0x100),
        StreamOp::StreamSynchronize { stream: 1 },
        free(9, 0x100, None),
        w(2, 0, 0x100),
    ];
    assert!(verdicts(ops).is_empty());
}

#[test]
fn free_to_the_host_without_sync_is_found_even_on_the_same_stream() {
    let ops = vec![w(1, 0, 0x100), free(9, 0x100, None)];
    assert_eq!(verdicts(ops), [(RaceKind::FreeWhileInUse, 9, 1)]);
}

#[test]
fn allocation_forgets_earlier_accesses_at_the_address() {
    let ops = vec![
        w(1, 1, 0x100),
        StreamOp::Alloc {
            addr: 0x100,
            size: 64,
        },
        w(2, 2, 0x100),
    ];
    assert!(verdicts(ops).is_empty());
}

#[test]
fn stream_created_after_a_device_sync_starts_from_the_hosts_clock() {
    let ops = vec![
        w(1, 0, 0x100),
        StreamOp::DeviceSynchronize,
        StreamOp::StreamCreate { stream: 5 },
        r(2, 5, 0x100),
        w(3, 0, 0x200),
        StreamOp::StreamCreate { stream: 6 },
        r(4, 6, 0x200),
    ];
    assert_eq!(verdicts(ops), [(RaceKind::ReadAfterWrite, 4, 3)]);
}

#[test]
fn thinning_many_ordered_reads_keeps_the_verdicts_of_unordered_ones() {
    let mut ops = Vec::new();
    let mut id = 0;
    for _ in 0..500 {
        id += 1;
        ops.push(r(id, 1, 0x100));
    }
    ops.push(StreamOp::DeviceSynchronize);
    for _ in 0..300 {
        id += 1;
        ops.push(r(id, 1, 0x100));
    }
    ops.push(w(id + 1, 2, 0x100));
    let mut it = check(ops);
    let got: Vec<_> = it.by_ref().map(|f| f.previous.id).collect();
    assert_eq!(got, (501..=800).collect::<Vec<_>>());
    assert_eq!(it.state().held_records(), 1);
}

#[test]
fn event_synchronize_orders_what_the_event_captured_for_every_stream() {
    let ops = vec![
        w(1, 1, 0x100),
        StreamOp::EventCreate { event: 3 },
        StreamOp::EventRecord {
            event: 3,
            stream: 1,
        },
        w(2, 1, 0x200),
        StreamOp::EventSynchronize { event: 3 },
        r(3, 2, 0x100),
        r(4, 2, 0x200),
    ];
    assert_eq!(verdicts(ops), [(RaceKind::ReadAfterWrite, 4, 2)]);
}

#[test]
fn deleted_event_waited_for_orders_nothing() {
    let ops = vec![
        w(1, 0, 0x100),
        StreamOp::EventRecord {
            event: 3,
            stream: 0,
        },
        StreamOp::EventDelete { event: 3 },
        StreamOp::EventWait {
            stream: 1,
            event: 3,
        },
        r(2, 1, 0x100),
    ];
    assert_eq!(verdicts(ops), [(RaceKind::ReadAfterWrite, 2, 1)]);
}

#[test]
fn free_to_a_stream_not_seen_yet_is_checked_against_the_hosts_clock() {
    let ops = vec![
        w(1, 1, 0x100),
        w(2, 2, 0x200),
        StreamOp::StreamSynchronize { stream: 1 },
        free(8, 0x100, Some(7)),
        free(9, 0x200, Some(7)),
    ];
    assert_eq!(verdicts(ops), [(RaceKind::FreeWhileInUse, 9, 2)]);
}

#[test]
fn pool_free_keeps_unordered_accesses_for_the_blocks_next_user() {
    let pool_free = |id, addr| {
        let StreamOp::Free(f) = free(id, addr, None) else {
            unreachable!()
        };
        StreamOp::PoolFree(f)
    };
    let alloc = StreamOp::Alloc {
        addr: 0x100,
        size: 64,
    };
    // Written on stream 1, freed to the pool, reused on stream 2 with no wait: found at the
    // reuse, once, naming the free.
    let ops = vec![
        w(1, 1, 0x100),
        pool_free(9, 0x100),
        alloc.clone(),
        w(2, 2, 0x100),
        w(3, 3, 0x100),
    ];
    let f: Vec<_> = check(ops).collect();
    let v: Vec<_> = f
        .iter()
        .map(|f| (f.kind, f.current.id, f.previous.id))
        .collect();
    assert_eq!(
        v,
        [
            (RaceKind::FreeWhileInUse, 2, 1),
            (RaceKind::WriteAfterWrite, 3, 2)
        ]
    );
    assert_eq!(f[0].free.as_ref().map(|s| s.id), Some(9));
    assert!(
        f[0].to_string().ends_with(", reused after free #9"),
        "{}",
        f[0]
    );
    // Reused on the stream that used it, or after a sync: clean.
    assert!(check(vec![
        w(1, 1, 0x100),
        pool_free(9, 0x100),
        alloc.clone(),
        w(2, 1, 0x100)
    ])
    .next()
    .is_none());
    let synced = vec![
        w(1, 1, 0x100),
        pool_free(9, 0x100),
        StreamOp::DeviceSynchronize,
        alloc,
        w(2, 2, 0x100),
    ];
    assert!(check(synced).next().is_none());
    // Read on stream 1 and read again by the next user on stream 2: no conflict.
    assert!(
        check(vec![r(1, 1, 0x100), pool_free(9, 0x100), r(2, 2, 0x100)])
            .next()
            .is_none()
    );
}
