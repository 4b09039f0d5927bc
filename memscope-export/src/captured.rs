//! Kept captures as export inputs (TEAM contract 3): a process whose events come from a
//! [`ProcessEvents`] source (memscope-cli's capture replay) instead of dump files.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use memscope_core::event::Device;
use memscope_dump::reader::{ProcessEvents, ReadError};

use crate::error::ExportError;
use crate::feed::{outcome, pass, wanted, Consumer, Item, ReplayStats};
use crate::process::{node_of, PidFilter, ProcessInput};
use crate::progress::Progress;
use crate::rank::{self, RankQuery, RunIndex};

/// A capture found by the caller.
#[derive(Clone, Debug)]
pub struct Captured {
    /// The process directory holding it (`msmemscope_<pid>_<ts>_ascend/`), whose dumps are
    /// then not read; `None` for a capture outside that layout.
    pub dir: Option<PathBuf>,
    /// Its events.
    pub events: Arc<dyn ProcessEvents>,
}

/// The process of capture `c`: one replay finds its devices (for ranks and memory_viz's
/// device traces).
///
/// # Errors
/// The capture cannot be read.
pub fn process(
    c: &Captured,
    index: Option<&dyn RunIndex>,
    progress: &mut dyn Progress,
) -> Result<ProcessInput, ExportError> {
    let src = c.events.as_ref();
    progress.stage(&format!("scanning {}", src.origin().display()));
    progress.plan(src.size());
    let mut seen = BTreeSet::new();
    src.replay(&mut |ev| {
        if ev.device != Device::NotApplicable {
            seen.insert(ev.device);
        }
        Ok(())
    })
    .map_err(|e| ExportError::Other(e.to_string()))?;
    progress.advance(src.size());
    let devices: Vec<Device> = seen.into_iter().collect();
    let node = match &c.dir {
        Some(d) => node_of(d.parent()),
        None => node_of(src.origin().parent()),
    };
    let pid = src.pid();
    let rank = rank::resolve(
        &RankQuery {
            node: &node,
            dir: c.dir.as_deref(),
            pid,
            device_dirs: &[],
            device_rows: &devices,
        },
        index,
    );
    Ok(ProcessInput {
        pid,
        node,
        rank,
        dir: c.dir.clone(),
        files: Vec::new(),
        capture: Some(c.events.clone()),
        pid_filter: PidFilter::All,
        devices,
        synthetic_pid: 0,
    })
}

/// [`crate::replay::replay`] of a captured process: its events as the capture replay yields
/// them (in ID order), with `device`'s filter.
///
/// # Errors
/// The capture cannot be read, or `f`'s error.
pub(crate) fn replay(
    p: &ProcessInput,
    src: &dyn ProcessEvents,
    device: Option<Device>,
    progress: &mut dyn Progress,
    f: &mut Consumer<'_>,
) -> Result<ReplayStats, ExportError> {
    let mut stats = ReplayStats::default();
    let r = src.replay(&mut |ev| {
        if !wanted(p, device, &ev) {
            return Ok(());
        }
        stats.events += 1;
        pass(f(Item::Event(ev)))
    });
    let r = match r {
        Ok(()) => Ok(()),
        Err(e) if e.is::<ExportError>() || e.is::<crate::feed::Stopped>() => {
            Err(ReadError::Consumer(e))
        }
        // the source's own error names the capture
        Err(e) => Err(ReadError::Consumer(Box::new(ExportError::Other(
            e.to_string(),
        )))),
    };
    outcome(r, &mut stats)?;
    progress.advance(src.size());
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use memscope_core::event::{Event, EventType};
    use memscope_dump::reader::ConsumerError;
    use std::path::Path;

    #[derive(Debug)]
    struct Fake {
        path: PathBuf,
        events: Vec<Event>,
    }

    impl ProcessEvents for Fake {
        fn pid(&self) -> Option<u32> {
            Some(7)
        }
        fn origin(&self) -> &Path {
            &self.path
        }
        fn size(&self) -> u64 {
            1
        }
        fn replay(
            &self,
            visit: &mut dyn FnMut(Event) -> Result<(), ConsumerError>,
        ) -> Result<(), ConsumerError> {
            self.events.iter().cloned().try_for_each(visit)
        }
    }

    #[test]
    fn a_process_dir_with_a_capture_is_read_from_the_capture_not_its_dumps() {
        let d = tempfile::tempdir().unwrap();
        let proc_dir = d.path().join("msmemscope_7_20261201000000_ascend");
        let dump = proc_dir.join("device_0/dump");
        std::fs::create_dir_all(&dump).unwrap();
        std::fs::write(
            dump.join("memscope_dump_20261201000000.csv"),
            "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)\n",
        )
        .unwrap();
        let events: Vec<Event> = [
            (0u64, Device::Npu(2)),
            (1, Device::Cpu),
            (2, Device::NotApplicable),
        ]
        .into_iter()
        .map(|(id, device)| Event {
            id,
            device,
            ..Event::new(EventType::Host, 10 + id, 7, 7)
        })
        .collect();
        let fake = Arc::new(Fake {
            path: proc_dir.join("memscope_capture_20261201000000.mscap"),
            events,
        });
        let captures = [Captured {
            dir: Some(proc_dir.clone()),
            events: fake,
        }];
        let (procs, _) = crate::input::resolve_with(
            &[d.path().to_path_buf()],
            &captures,
            None,
            &mut crate::progress::Silent,
        )
        .unwrap();
        assert_eq!(procs.len(), 1, "the dumps of the captured dir are not read");
        let p = &procs[0];
        assert!(p.files.is_empty() && p.capture.is_some());
        assert_eq!(p.devices, vec![Device::Npu(2), Device::Cpu]);
        assert_eq!(p.rank.rank, Some(2));
        let mut seen = Vec::new();
        let stats = crate::replay::replay(
            p,
            Some(Device::Npu(2)),
            &mut crate::progress::Silent,
            &mut |i| {
                if let Item::Event(ev) = i {
                    seen.push(ev.id);
                }
                Ok(crate::replay::Flow::Continue)
            },
        )
        .unwrap();
        assert_eq!(seen, vec![0, 2], "NPU 2's events and the device-less one");
        assert_eq!(stats.events, 2);
    }
}
