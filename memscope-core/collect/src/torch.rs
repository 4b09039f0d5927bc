//! Rows of the Python package's torch hooks (issue 13), one process:
//!
//! * `AtenOp` → OP_LAUNCH `ATEN_START`/`ATEN_END`, Name the operator (`torch._ops.aten.add.Tensor`,
//!   as msMemScope spells it), empty Attr, Device the operator's tensors' device.
//! * `AtenTensor` → ACCESS `READ`/`WRITE`/`UNKNOWN`, Name the thread's innermost open Aten
//!   operator, Ptr the data address, Attr `size`, `type` (`PTA` for NPU tensors, `HOST` for CPU
//!   ones), `dtype`, `shape` (`torch.Size([2, 3])`); `allocation_id` is added by the
//!   `AccessBlocks` layer from the live block the tensor lies in.
//! * `CpuTensor` → HOST MALLOC/FREE on device `cpu` with `allocation_id`, `addr`, `size` and
//!   `total` (running bytes of live CPU tensors), as msMemScope's CPU-tensor hooks write them;
//!   with owner labels on the thread (the framework hooks' `activation@<module>`), `owner:HOST@…`.
//! * `OwnerTag` of a live CPU tensor storage → SYSTEM `MEMORY_OWNER` (memscope_core::roles),
//!   and the tag's chain on the storage's FREE.
//! * `WatchDump` → files, not rows (behaviour spec §5.4, §9.9): in `device_<n>/watch_dump/` of
//!   the process, hash mode appends `<dev>_<tid>/<name>.bin,<16 hex digits>` to
//!   `watch_dump_data_check_sum_<ts>.csv` (header `Tensor info,Check data sum`); full content
//!   writes `<dev>_<tid>.<name>.bin` (every `/` of the name as `.`).

use crate::adapter::TypeCtx;
use memscope_core::event::{AccessAttrs, Attrs, Device, Event, EventKind, EventType, MemoryAttrs};
use memscope_core::owner::OwnerChain;
use memscope_dump::layout;
use memscope_wire::{AccessKind, Record};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Header of the watch checksum file.
pub const WATCH_SUM_HEADER: &str = "Tensor info,Check data sum";

/// Torch-hook state of one process.
#[derive(Default)]
pub struct TorchState {
    /// Open Aten operators per thread.
    ops: HashMap<u32, Vec<String>>,
    /// Live CPU tensor storages: addr → (allocation_id, size).
    cpu: std::collections::BTreeMap<u64, (u64, u64)>,
    cpu_total: u64,
    /// Labels given to live CPU tensor storages after their MALLOC (role tags, `describer`).
    cpu_tags: HashMap<u64, String>,
    /// Checksum files per device directory.
    /// Checksum files per directory: a CSV writer, so a watch name with `,`, `"` or a line
    /// break is quoted (RFC 4180, as the dumps are) instead of breaking its row.
    sums: HashMap<String, (csv::Writer<std::fs::File>, PathBuf)>,
    /// Full-content dump being written per thread.
    bins: HashMap<u32, std::fs::File>,
    errors: Vec<String>,
    /// Nothing is written (the replay API).
    dry: bool,
}

fn device(ctx: &TypeCtx, tid: u32, d: u32) -> Device {
    match d {
        u32::MAX => ctx
            .current_device(tid)
            .map_or(Device::NotApplicable, Device::Npu),
        x if x == u32::MAX - 1 => Device::Cpu,
        x => Device::Npu(ctx.map_device(x)),
    }
}

impl TorchState {
    /// Types one record of thread `tid`; `false` when it is not a torch-hook record.
    pub fn on_record(
        &mut self,
        ctx: &mut TypeCtx,
        project: &Path,
        tid: u32,
        rec: &Record<Box<[u8]>>,
        out: &mut Vec<Event>,
    ) -> bool {
        match rec {
            Record::AtenOp {
                ts,
                end,
                device: d,
                name,
            } => {
                let name = String::from_utf8_lossy(name).into_owned();
                let stack = self.ops.entry(tid).or_default();
                if *end {
                    if let Some(p) = stack.iter().rposition(|n| *n == name) {
                        stack.truncate(p);
                    }
                } else {
                    stack.push(name.clone());
                }
                let t = if *end {
                    EventType::AtenEnd
                } else {
                    EventType::AtenStart
                };
                let mut ev = Event::new(t, *ts, ctx.pid, tid);
                ev.name = Some(name);
                ev.device = device(ctx, tid, *d);
                out.push(ev);
            }
            Record::AtenTensor {
                ts,
                access,
                device: d,
                addr,
                size,
                meta,
            } => {
                let t = match access {
                    AccessKind::Read => EventType::Read,
                    AccessKind::Write => EventType::Write,
                    AccessKind::Unknown => EventType::Unknown,
                };
                let dev = device(ctx, tid, *d);
                let meta = String::from_utf8_lossy(meta);
                let (dtype, shape) = meta.split_once('\n').unwrap_or((&meta, ""));
                let mut ev = Event::new(t, *ts, ctx.pid, tid);
                ev.name = self.ops.get(&tid).and_then(|s| s.last().cloned());
                ev.device = dev;
                ev.ptr = Some(*addr);
                // CPU tensors: the storage block holding the address (`AccessBlocks` follows
                // device memory only).
                let block = (dev == Device::Cpu)
                    .then(|| self.cpu.range(..=*addr).next_back())
                    .flatten()
                    .filter(|(start, (_, sz))| *addr < **start + (*sz).max(1))
                    .map(|(_, (aid, _))| *aid);
                ev.attrs = Attrs::Access(AccessAttrs {
                    allocation_id: block,
                    size: Some(*size),
                    pool: Some(if dev == Device::Cpu { "HOST" } else { "PTA" }.to_owned()),
                    dtype: (!dtype.is_empty()).then(|| dtype.to_owned()),
                    shape: (!shape.is_empty()).then(|| shape.to_owned()),
                    ..AccessAttrs::default()
                });
                out.push(ev);
            }
            Record::CpuTensor {
                ts,
                free,
                addr,
                size,
            } => {
                let tag = self.cpu_tags.remove(addr);
                let (aid, size) = if *free {
                    match self.cpu.remove(addr) {
                        Some(b) => {
                            self.cpu_total = self.cpu_total.saturating_sub(b.1);
                            b
                        }
                        None => return true, // created before the window: no row (msMemScope)
                    }
                } else {
                    let aid = ctx.next_allocation_id();
                    if let Some(old) = self.cpu.insert(*addr, (aid, *size)) {
                        self.cpu_total = self.cpu_total.saturating_sub(old.1);
                    }
                    self.cpu_total += size;
                    (aid, *size)
                };
                let mut ev = Event::new(EventType::Host, *ts, ctx.pid, tid);
                if *free {
                    ev.kind = EventKind::Free;
                }
                ev.device = Device::Cpu;
                ev.ptr = Some(*addr);
                // the thread's owner labels (the framework hooks' `activation@<module>`,
                // `describer`) on a MALLOC; a tag given since on the FREE
                let owner = if *free {
                    tag.map(|t| memscope_core::roles::tagged_chain(EventType::Host, &t))
                } else {
                    let labels = ctx.owner_labels(tid);
                    (!labels.is_empty()).then(|| {
                        let mut o = OwnerChain::framework(EventType::Host.as_str());
                        for l in labels {
                            o.push(l);
                        }
                        o
                    })
                };
                ev.attrs = Attrs::Memory(MemoryAttrs {
                    allocation_id: aid,
                    addr: *addr,
                    size,
                    total: Some(self.cpu_total as i64),
                    cpu_tensor: true,
                    owner,
                    ..MemoryAttrs::default()
                });
                out.push(ev);
            }
            // a role tag or `describer(addr, owner=…)` of a live CPU tensor storage (NPU blocks
            // are the pool typers')
            Record::OwnerTag { ts, addr, label } if self.cpu.contains_key(addr) => {
                let label = String::from_utf8_lossy(label).into_owned();
                if self.cpu_tags.get(addr) != Some(&label) {
                    let (aid, size) = self.cpu[addr];
                    let tag = memscope_core::roles::OwnerTag {
                        pool: EventType::Host,
                        device: Device::Cpu,
                        addr: *addr,
                        allocation_id: aid,
                        size,
                        owner: memscope_core::roles::tagged_chain(EventType::Host, &label)
                            .to_string(),
                    };
                    out.push(tag.to_event(*ts, ctx.pid, tid));
                    self.cpu_tags.insert(*addr, label);
                }
            }
            Record::WatchDump {
                device: d,
                value,
                full,
                name,
                data,
                ..
            } => {
                let dev = device(ctx, tid, *d);
                let dir = project
                    .join(dev.dir_name().unwrap_or_else(|| "device_0".into()))
                    .join("watch_dump");
                let label = format!(
                    "{}_{tid}/{}",
                    match dev {
                        Device::Npu(n) => n.to_string(),
                        _ => "cpu".into(),
                    },
                    String::from_utf8_lossy(name)
                );
                if let Err(e) = self.watch(&dir, tid, &label, *value, *full, !name.is_empty(), data)
                {
                    if self.errors.len() < 10 {
                        self.errors.push(format!("{}: {e}", dir.display()));
                    }
                }
            }
            _ => return false,
        }
        true
    }

    #[allow(clippy::too_many_arguments)]
    fn watch(
        &mut self,
        dir: &Path,
        tid: u32,
        label: &str,
        value: u64,
        full: bool,
        first: bool,
        data: &[u8],
    ) -> std::io::Result<()> {
        if self.dry {
            return Ok(());
        }
        layout::create_dir_0750(dir)?;
        if full {
            if first {
                let path = dir.join(format!("{}.bin", label.replace('/', ".")));
                let (f, _) = layout::create_new_0600(&path)?;
                self.bins.insert(tid, f);
            }
            if let Some(f) = self.bins.get_mut(&tid) {
                f.write_all(data)?;
            }
            return Ok(());
        }
        let key = dir.display().to_string();
        if !self.sums.contains_key(&key) {
            let name = format!(
                "watch_dump_data_check_sum_{}.csv",
                layout::timestamp_name(layout::now_ns())
            );
            let (f, p) = layout::create_new_0600(&dir.join(name))?;
            let mut w = csv::Writer::from_writer(f);
            w.write_record(WATCH_SUM_HEADER.split(','))?;
            self.sums.insert(key.clone(), (w, p));
        }
        let (w, _) = self.sums.get_mut(&key).expect("inserted");
        w.write_record([
            format!("{label}.bin"),
            memscope_wire::watch::crc64_hex(value),
        ])?;
        Ok(())
    }

    /// Writes no watch files (typing only, for the replay API).
    pub fn set_dry(&mut self) {
        self.dry = true;
    }

    /// Flushes the watch files.
    pub fn flush(&mut self) {
        for (w, p) in self.sums.values_mut() {
            if let Err(e) = w.flush() {
                if self.errors.len() < 10 {
                    self.errors.push(format!("{}: {e}", p.display()));
                }
            }
        }
    }

    /// Errors met writing watch files since the last call (for the process log).
    pub fn take_errors(&mut self) -> Vec<String> {
        std::mem::take(&mut self.errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aten_ops_tensors_and_cpu_tensors_become_msmemscope_rows() {
        let dir = tempfile::tempdir().unwrap();
        let mut ctx = TypeCtx::new(5, vec![]);
        let mut s = TorchState::default();
        let mut out = Vec::new();
        let name: Box<[u8]> = b"torch._ops.aten.add.Tensor".as_slice().into();
        let recs = [
            Record::CpuTensor {
                ts: 1,
                free: false,
                addr: 0x100,
                size: 24,
            },
            Record::AtenOp {
                ts: 2,
                end: false,
                device: u32::MAX - 1,
                name: name.clone(),
            },
            Record::AtenTensor {
                ts: 3,
                access: AccessKind::Read,
                device: u32::MAX - 1,
                addr: 0x100,
                size: 24,
                meta: b"torch.float32\ntorch.Size([2, 3])".as_slice().into(),
            },
            Record::AtenOp {
                ts: 4,
                end: true,
                device: u32::MAX - 1,
                name,
            },
            Record::CpuTensor {
                ts: 5,
                free: true,
                addr: 0x100,
                size: 24,
            },
        ];
        for r in &recs {
            assert!(s.on_record(&mut ctx, dir.path(), 7, r, &mut out));
        }
        let text: Vec<String> = out
            .iter()
            .map(|e| {
                format!(
                    "{}/{} {} {} {}",
                    e.kind.as_str(),
                    e.event_type.as_str(),
                    e.name.as_deref().unwrap_or("N/A"),
                    e.device.to_text(),
                    memscope_core::attr_text::format_attr(e)
                )
            })
            .collect();
        assert_eq!(
            text,
            [
                "MALLOC/HOST N/A cpu {allocation_id:1,addr:0x0000000000000100,size:24,total:24}",
                "OP_LAUNCH/ATEN_START torch._ops.aten.add.Tensor cpu ",
                "ACCESS/READ torch._ops.aten.add.Tensor cpu {allocation_id:1,addr:0x0000000000000100,size:24,type:HOST,dtype:torch.float32,shape:torch.Size([2, 3])}",
                "OP_LAUNCH/ATEN_END torch._ops.aten.add.Tensor cpu ",
                "FREE/HOST N/A cpu {allocation_id:1,addr:0x0000000000000100,size:24,total:0}",
            ]
        );
    }

    #[test]
    fn watch_dumps_go_to_the_checksum_file_or_to_bin_files() {
        let dir = tempfile::tempdir().unwrap();
        let mut ctx = TypeCtx::new(5, vec![]);
        let mut s = TorchState::default();
        let mut out = Vec::new();
        let rec = |value, full, name: &[u8], data: &[u8]| Record::WatchDump {
            ts: 1,
            device: 0,
            value,
            full,
            name: name.into(),
            data: data.into(),
        };
        for r in [
            rec(0xab, false, b"add_0-w_0_before", b""),
            rec(0, true, b"add_0-w_0_after", b"abc"),
            rec(3, true, b"", b"de"),
            rec(0xcd, false, b"op,\"x\"\n1", b""),
        ] {
            assert!(s.on_record(&mut ctx, dir.path(), 9, &r, &mut out));
        }
        s.flush();
        drop(s);
        let wd = dir.path().join("device_0/watch_dump");
        let mut names: Vec<String> = std::fs::read_dir(&wd)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names[0], "0_9.add_0-w_0_after.bin");
        assert!(
            names[1].starts_with("watch_dump_data_check_sum_"),
            "{names:?}"
        );
        assert_eq!(std::fs::read(wd.join(&names[0])).unwrap(), b"abcde");
        assert_eq!(
            std::fs::read_to_string(wd.join(&names[1])).unwrap(),
            "Tensor info,Check data sum\n0_9/add_0-w_0_before.bin,00000000000000ab\n\
             \"0_9/op,\"\"x\"\"\n1.bin\",00000000000000cd\n"
        );
        assert!(out.is_empty());
    }
}
