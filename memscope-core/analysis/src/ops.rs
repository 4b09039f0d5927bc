//! Which operator or kernel an event happened under: per-thread stacks of open ATen/ATB ops and
//! the last kernel launched on each device. Names are interned, so following ops allocates only
//! for new names.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use memscope_core::event::{Device, Event, EventKind, EventType};

/// The op or kernel an event happened under.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Under {
    /// Innermost open op on the event's thread.
    Op(Arc<str>),
    /// Last kernel launched on the event's device: index (from 0) and name.
    Kernel(u64, Option<Arc<str>>),
    /// Neither.
    Nothing,
}

impl fmt::Display for Under {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Under::Op(n) => f.write_str(n),
            Under::Kernel(i, Some(n)) => write!(f, "kernel_{i} ({n})"),
            Under::Kernel(i, None) => write!(f, "kernel_{i}"),
            Under::Nothing => f.write_str("N/A"),
        }
    }
}

/// Follows op START/END rows and kernel launches.
#[derive(Default)]
pub struct OpTracker {
    names: HashMap<Box<str>, Arc<str>>,
    open: HashMap<Option<u32>, Vec<Arc<str>>>,
    kernels: HashMap<Device, (u64, Option<Arc<str>>)>,
}

impl OpTracker {
    fn intern(&mut self, name: &str) -> Arc<str> {
        if let Some(a) = self.names.get(name) {
            return a.clone();
        }
        let a: Arc<str> = Arc::from(name);
        self.names.insert(name.into(), a.clone());
        a
    }

    /// Updates the state for `ev`.
    pub fn observe(&mut self, ev: &Event) {
        match (ev.kind, ev.event_type) {
            (EventKind::OpLaunch, EventType::AtenStart | EventType::AtbStart) => {
                let name = self.intern(ev.name.as_deref().unwrap_or("N/A"));
                self.open.entry(ev.tid).or_default().push(name);
            }
            (EventKind::OpLaunch, EventType::AtenEnd | EventType::AtbEnd) => {
                if let Some(stack) = self.open.get_mut(&ev.tid) {
                    let name = ev.name.as_deref().unwrap_or("N/A");
                    if let Some(pos) = stack.iter().rposition(|n| &**n == name) {
                        stack.truncate(pos);
                    }
                }
            }
            (EventKind::KernelLaunch, EventType::KernelLaunch) => {
                let name = ev.name.as_deref().map(|n| self.intern(n));
                let e = self.kernels.entry(ev.device).or_insert((0, None));
                e.0 += 1;
                e.1 = name;
            }
            _ => {}
        }
    }

    /// The innermost op open on `ev`'s thread, else the last kernel launched on its device.
    pub fn label(&self, ev: &Event) -> Under {
        if let Some(top) = self.open.get(&ev.tid).and_then(|s| s.last()) {
            return Under::Op(top.clone());
        }
        match self.kernels.get(&ev.device) {
            Some((n, name)) => Under::Kernel(n - 1, name.clone()),
            None => Under::Nothing,
        }
    }
}
