//! Unit tests of the ATB operator typer.

use super::*;
use memscope_core::attr_text::format_attr;
use memscope_core::event::EventKind;
use memscope_wire::encode_dims;

fn op(ts: u64, end: bool, device: u32, name: &str) -> Record<Box<[u8]>> {
    let path = format!("/tmp/atb/0_1/0_{name}");
    let (device, name, path) = (OptU32(device), name.as_bytes(), path.as_bytes());
    let (ws_ptr, ws_size) = (0xbeef00, 3 << 20);
    crate::wire::rec(
        ts,
        if end {
            AtbRecord::OpEnd {
                device,
                ws_ptr,
                ws_size,
                name,
                path,
            }
        } else {
            AtbRecord::OpStart {
                device,
                ws_ptr,
                ws_size,
                name,
                path,
            }
        },
    )
}

fn tensor(ts: u64, access: AccessKind, kernel: bool, addr: u64, dims: &[i64]) -> Record<Box<[u8]>> {
    let mut raw = [0u8; 80];
    let n = encode_dims(dims, &mut raw).unwrap();
    let (size, dtype, format, dims) = (2048, 1, 2, &raw[..n]);
    crate::wire::rec(
        ts,
        if kernel {
            AtbRecord::TensorKernel {
                access,
                addr,
                size,
                dtype,
                format,
                dims,
            }
        } else {
            AtbRecord::TensorOp {
                access,
                addr,
                size,
                dtype,
                format,
                dims,
            }
        },
    )
}

fn feed(recs: Vec<(u32, Record<Box<[u8]>>)>) -> Vec<Event> {
    let mut t = AtbTyper::default();
    let mut ctx = TypeCtx::new(11, vec![3, 4]);
    let mut out = Vec::new();
    for (tid, r) in recs {
        assert!(t.type_record(&mut ctx, tid, &r, &mut out), "{r:?}");
    }
    out
}

#[test]
fn kernel_names_are_the_component_before_the_marker() {
    assert_eq!(
        kernel_name("/tmp/atb/0_7/3_LinearOperation/LinearOperationKernel/before"),
        Some("LinearOperationKernel")
    );
    assert_eq!(kernel_name("a/K/after"), Some("K"));
    assert_eq!(kernel_name("K/before"), Some("K"));
    assert_eq!(kernel_name("/before"), None);
    assert_eq!(kernel_name("/tmp/no-marker"), None);
}

#[test]
fn an_operator_gives_start_accesses_and_end_with_path_and_workspace() {
    let ev = feed(vec![
        (1, op(1, false, 1, "LinearOperation")),
        (1, tensor(2, AccessKind::Unknown, false, 0x1000, &[512, 2])),
        (1, tensor(3, AccessKind::Write, false, 0x2000, &[1024])),
        (1, op(4, true, 1, "LinearOperation")),
    ]);
    let got: Vec<_> = ev
        .iter()
        .map(|e| {
            (
                e.kind,
                e.event_type,
                e.name.clone().unwrap(),
                e.device,
                e.ptr,
                format_attr(e),
            )
        })
        .collect();
    let name = "LinearOperation".to_owned();
    let d = Device::Npu(4);
    assert_eq!(got, [
        (EventKind::OpLaunch, EventType::AtbStart, name.clone(), d, None, "{path:/tmp/atb/0_1/0_LinearOperation,workspace ptr:0xbeef00,workspace size:3145728}".to_owned()),
        (EventKind::Access, EventType::Unknown, name.clone(), d, Some(0x1000), "{addr:0x0000000000001000,size:2048,type:ATB,dtype:FLOAT16,format:ND,shape:[512,2,]}".to_owned()),
        (EventKind::Access, EventType::Write, name.clone(), d, Some(0x2000), "{addr:0x0000000000002000,size:2048,type:ATB,dtype:FLOAT16,format:ND,shape:[1024,]}".to_owned()),
        (EventKind::OpLaunch, EventType::AtbEnd, name, d, None, "{path:/tmp/atb/0_1/0_LinearOperation,workspace ptr:0xbeef00,workspace size:3145728}".to_owned()),
    ]);
}

#[test]
fn nested_operators_and_kernels_name_their_own_tensors_per_thread() {
    let kernel = |ts, end, path: &str| {
        let (device, path) = (OptU32(0), path.as_bytes());
        crate::wire::rec(
            ts,
            if end {
                AtbRecord::KernelEnd { device, path }
            } else {
                AtbRecord::KernelStart { device, path }
            },
        )
    };
    let ev = feed(vec![
        (1, op(1, false, 0, "GraphOperation")),
        (1, op(2, false, 0, "AddOperation")),
        (2, op(3, false, u32::MAX, "OtherThreadOp")),
        (1, kernel(4, false, "/x/1_AddOperation/AddKernel/before")),
        (1, tensor(5, AccessKind::Read, true, 0x10, &[4])),
        (1, tensor(6, AccessKind::Unknown, false, 0x20, &[4])),
        (1, kernel(7, true, "/x/1_AddOperation/AddKernel/after")),
        (1, op(8, true, 0, "AddOperation")),
        (1, tensor(9, AccessKind::Write, false, 0x30, &[])),
        (2, tensor(10, AccessKind::Write, false, 0x40, &[])),
    ]);
    let got: Vec<_> = ev
        .iter()
        .map(|e| (e.event_type, e.name.clone().unwrap_or_default(), e.device))
        .collect();
    let (d, na) = (Device::Npu(3), Device::NotApplicable);
    assert_eq!(
        got,
        [
            (EventType::AtbStart, "GraphOperation".into(), d),
            (EventType::AtbStart, "AddOperation".into(), d),
            (EventType::AtbStart, "OtherThreadOp".into(), na),
            (EventType::KernelStart, "AddKernel".into(), d),
            (EventType::Read, "AddKernel".into(), d),
            (EventType::Unknown, "AddOperation".into(), d),
            (EventType::KernelEnd, "AddKernel".into(), d),
            (EventType::AtbEnd, "AddOperation".into(), d),
            (EventType::Write, "GraphOperation".into(), d),
            (EventType::Write, "OtherThreadOp".into(), na),
        ]
    );
    assert_eq!(
        format_attr(&ev[3]),
        "{path:/x/1_AddOperation/AddKernel/before}"
    );
    assert_eq!(ev[3].kind, EventKind::KernelLaunch);
}

#[test]
fn the_atb_typer_still_types_the_atb_pool_and_leaves_other_records() {
    let ev = feed(vec![(
        1,
        Record::RegionRegister {
            ts: 1,
            pool: 4, // ATB's pool number
            device: 0,
            ptr: 0x100,
            size: 16,
        },
    )]);
    assert_eq!(
        (ev[0].kind, ev[0].event_type),
        (EventKind::Malloc, EventType::Atb)
    );
    let mut t = AtbTyper::default();
    let mut ctx = TypeCtx::new(1, vec![]);
    let r = Record::OwnerPop { ts: 1 };
    assert!(!t.type_record(&mut ctx, 1, &r, &mut Vec::new()));
}

#[test]
fn operators_without_a_name_getter_are_written_with_name_na() {
    let ev = feed(vec![(1, op(1, false, 0, ""))]);
    assert_eq!(ev[0].name, None);
}
