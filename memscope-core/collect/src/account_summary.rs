//! The accounts of account-only registered types (plugin ABI 1.2 `MEMSCOPE_TYPE_ACCOUNT`:
//! PYMEM's objects, a third party's object allocator): one [`LiveAccount`] per Event Type —
//! the one map of the blocks, on both paths: without rows (the default: the pipeline accounts
//! the compact records and builds no event) and with `--host-rows` (the rows take their
//! `allocation_id` and FREE size from it). Blocks are grouped by their Python stack, and the
//! report sums them up by where they were allocated (the first frame of the user's code,
//! `memscope_analysis::sites`): what was live at the peak of live bytes and when the process
//! ended ("where did my memory go").
//!
//! "At exit" is when the source stops (an interpreter's adapter stops when it starts
//! finalising, before the modules are torn down), as memray reports what its tracker saw live
//! when it stopped.

use crate::adapter::AccountSummary;
use crate::live_account::{Block, LiveAccount};
use memscope_analysis::sites::{site_lines, StackGroup};
use memscope_core::addr_hash::AddrMap;
use memscope_core::bus::ReportSection;
use memscope_core::event::EventType;
use std::sync::Arc;

/// What the report calls the blocks of a type no descriptor describes.
const BLOCKS: AccountSummary = AccountSummary {
    event_type: "",
    object: "block",
    objects: "blocks",
    counted: "block(s)",
};

/// No Python stack (a key no stack has).
const NO_PY: u64 = u64::MAX;

/// The account of one Event Type.
struct Account {
    ty: EventType,
    what: AccountSummary,
    live: LiveAccount,
    /// Python stack key → group.
    group_of: AddrMap<u32>,
    /// Group → its Python stack text (`None`: no stack).
    texts: Vec<Option<Arc<str>>>,
    unknown_frees: u64,
}

/// The accounts of one process.
#[derive(Default)]
pub struct Accounts {
    accounts: Vec<Account>,
}

impl Accounts {
    #[inline]
    fn index(&mut self, ty: EventType) -> usize {
        match self.accounts.first() {
            Some(a) if a.ty == ty => 0,
            _ => self.index_slow(ty),
        }
    }

    fn index_slow(&mut self, ty: EventType) -> usize {
        if let Some(i) = self.accounts.iter().position(|a| a.ty == ty) {
            return i;
        }
        let what = crate::registry::installed()
            .descriptors
            .iter()
            .filter_map(|d| d.account_summary)
            .find(|a| a.event_type == ty.as_str())
            .unwrap_or(AccountSummary {
                event_type: ty.as_str(),
                ..BLOCKS
            });
        self.accounts.push(Account {
            ty,
            what,
            live: LiveAccount::new(),
            group_of: AddrMap::default(),
            texts: Vec::new(),
            unknown_frees: 0,
        });
        self.accounts.len() - 1
    }

    /// A block of type `ty` at `addr` became live as event `event_id` (allocation `id`, made
    /// by a thread whose Python stack has key `py`; `text` gives that stack's text the first
    /// time the key is seen). Returns the block that was live at the same address (its free
    /// was not seen): replaced.
    #[inline]
    pub fn malloc(
        &mut self,
        ty: EventType,
        (addr, size, id): (u64, u64, u64),
        (event_id, ts): (u64, u64),
        py: Option<u64>,
        text: impl FnOnce() -> Option<Arc<str>>,
    ) -> Option<Block> {
        let i = self.index(ty);
        let a = &mut self.accounts[i];
        let key = py.unwrap_or(NO_PY);
        let group = match a.group_of.get(&key) {
            Some(&g) => g,
            None => {
                let g = a.texts.len() as u32;
                a.texts.push(py.and(text()));
                a.group_of.insert(key, g);
                g
            }
        };
        a.live.alloc(addr, Block { size, group, id }, event_id, ts)
    }

    /// The block of type `ty` at `addr` was freed: returns it, or `None` (counted) when it was
    /// not live (allocated before the adapter started).
    #[inline]
    pub fn free(&mut self, ty: EventType, addr: u64) -> Option<Block> {
        let i = self.index(ty);
        let a = &mut self.accounts[i];
        let b = a.live.free(addr);
        if b.is_none() {
            a.unknown_frees += 1;
        }
        b
    }

    /// Bytes of `ty`'s blocks live now.
    pub fn live_bytes(&self, ty: EventType) -> u64 {
        self.accounts
            .iter()
            .find(|a| a.ty == ty)
            .map_or(0, |a| a.live.live_bytes())
    }

    /// Frees of blocks that were not live, per Event Type (for the process log).
    pub fn unknown_frees(&self) -> impl Iterator<Item = (EventType, u64)> + '_ {
        self.accounts
            .iter()
            .filter(|a| a.unknown_frees > 0)
            .map(|a| (a.ty, a.unknown_frees))
    }

    /// Each account's two sections: peak, then live at exit (`py_stacks`: the run recorded
    /// Python stacks, so a block without one was made before their service started).
    pub fn report(&self, pid: Option<u32>, py_stacks: bool) -> Vec<ReportSection> {
        let no_stack = if py_stacks {
            "made before the Python stack service started: the interpreter's start"
        } else {
            "run with --call-stack python:N"
        };
        let pid = pid.map(|p| format!(" (pid {p})")).unwrap_or_default();
        let mut out = Vec::new();
        for a in &self.accounts {
            let p = a.live.peak();
            out.push(a.section(
                no_stack,
                a.live.groups_at_peak(),
                format!(
                    "{} peak{pid}: {} bytes in {} {}, by where they were allocated at the peak",
                    a.what.event_type, p.bytes, p.blocks, a.what.counted
                ),
            ));
            out.push(a.section(
                no_stack,
                a.live.groups_now(),
                format!(
                    "{} {} live at exit{pid}: {} object(s), {} bytes ({} freed before)",
                    a.what.event_type,
                    a.what.objects,
                    a.live.live_blocks(),
                    a.live.live_bytes(),
                    a.live.frees()
                ),
            ));
        }
        out
    }
}

impl Account {
    fn section(&self, no_stack: &str, groups: &[(u64, u64)], title: String) -> ReportSection {
        let list: Vec<StackGroup> = groups
            .iter()
            .enumerate()
            .filter(|(_, g)| g.0 > 0)
            .map(|(s, &(count, bytes))| StackGroup {
                py: self.texts[s]
                    .as_deref()
                    .filter(|t| !t.is_empty() && *t != "NA"),
                c: None,
                count,
                bytes,
            })
            .collect();
        let (shown, all) = site_lines(&list, "object(s)", no_stack);
        ReportSection::bounded(title, shown, all)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_grouped_by_python_stack_live_at_exit_and_at_the_peak() {
        let mut a = Accounts::default();
        let ty = EventType::custom("OBJ");
        let (keep, temp): (Arc<str>, Arc<str>) =
            ("a.py(3): keep\n".into(), "a.py(9): temp\n".into());
        let k = || Some(keep.clone());
        a.malloc(ty, (0x10, 100, 1), (0, 1), Some(1), k);
        a.malloc(ty, (0x20, 100, 2), (1, 2), Some(1), k);
        a.malloc(ty, (0x30, 1000, 3), (2, 3), Some(2), || Some(temp.clone()));
        assert_eq!(a.free(ty, 0x30).map(|b| (b.id, b.size)), Some((3, 1000)));
        assert_eq!(a.free(ty, 0x99), None);
        a.malloc(ty, (0x40, 10, 4), (4, 5), Some(1), k);
        assert_eq!(a.unknown_frees().collect::<Vec<_>>(), [(ty, 1)]);
        let r = a.report(Some(7), true);
        assert_eq!(
            r[0].title,
            "OBJ peak (pid 7): 1200 bytes in 3 block(s), by where they were allocated at the peak"
        );
        assert_eq!(
            r[0].lines[0],
            "1 object(s), 1000 bytes at a.py(9): temp [first frame in your code, Python stack]"
        );
        assert_eq!(
            r[1].title,
            "OBJ blocks live at exit (pid 7): 3 object(s), 210 bytes (1 freed before)"
        );
        assert_eq!(
            r[1].lines[0],
            "3 object(s), 210 bytes at a.py(3): keep [first frame in your code, Python stack]"
        );
        assert_eq!(a.live_bytes(ty), 210);
    }
}
