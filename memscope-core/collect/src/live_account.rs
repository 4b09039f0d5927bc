//! The live account of an account-only source (issue 34): the one map of its live blocks
//! (key → size, stack group, allocation id), the live bytes and blocks per stack group, and the
//! peak with the groups that held it. HOST's leak summary and fast path and every registered
//! account-only type (PYMEM's objects, a plugin's `MEMSCOPE_TYPE_ACCOUNT` types) keep their
//! blocks here; what differs between them — which stacks a group stands for, how the report
//! reads — stays with them.
//!
//! The peak's groups are those of the last local maximum that raised the peak by 1 % or more
//! (a copy of the per-group totals is taken then), so they are within 1 % of the exact peak;
//! the peak's byte and block counts are exact.
#![forbid(unsafe_code)]

use memscope_core::addr_hash::AddrMap;

/// One live block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    /// Bytes.
    pub size: u64,
    /// Stack group (an index the owner of the account gave; below 2^24).
    pub group: u32,
    /// Its `allocation_id` (below 2^40).
    pub id: u64,
}

/// A block as the map stores it: 16 bytes (the size; the allocation id above 24 bits of stack
/// group) and the owner's tag (nothing for most accounts), so millions of live blocks take as
/// little cache as the fast path needs.
#[derive(Clone, Copy)]
struct Packed<T> {
    size: u64,
    meta: u64,
    tag: T,
}

/// Groups a packed block can name (more are counted in the last one).
const GROUP_BITS: u32 = 24;
const GROUP_MASK: u64 = (1 << GROUP_BITS) - 1;

impl<T: Copy> Packed<T> {
    #[inline(always)]
    fn new(b: Block, tag: T) -> Packed<T> {
        Packed {
            size: b.size,
            meta: (b.id << GROUP_BITS) | (b.group as u64).min(GROUP_MASK),
            tag,
        }
    }

    #[inline(always)]
    fn block(self) -> Block {
        Block {
            size: self.size,
            group: (self.meta & GROUP_MASK) as u32,
            id: self.meta >> GROUP_BITS,
        }
    }
}

/// The highest number of live bytes the account reached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Peak {
    /// Live bytes at the peak.
    pub bytes: u64,
    /// Live blocks at the peak.
    pub blocks: u64,
    /// ID of the event that reached it.
    pub id: u64,
    /// Its time stamp, ns since the epoch.
    pub ts_ns: u64,
}

/// Live blocks by key, with per-group totals and the peak; each block keeps a tag `T` of its
/// owner's (HOST's fast path: the capture's reference to the block's allocation, so the
/// capture needs no map of its own).
#[derive(Default)]
pub struct LiveAccount<T: Copy + Default = ()> {
    live: AddrMap<Packed<T>>,
    /// Per group: (blocks, bytes) live now.
    groups: Vec<(u64, u64)>,
    /// `groups` at the last local maximum that raised the peak by 1 % or more.
    at_peak: Vec<(u64, u64)>,
    at_peak_bytes: u64,
    /// The peak rose since `at_peak` was taken.
    rising: bool,
    live_bytes: u64,
    peak: Peak,
    frees: u64,
}

impl<T: Copy + Default> LiveAccount<T> {
    /// An empty account.
    pub fn new() -> LiveAccount<T> {
        LiveAccount::default()
    }

    /// Makes room for group `g` (groups are numbered by the account's owner, from 0).
    #[inline]
    pub fn ensure_group(&mut self, g: u32) {
        if self.groups.len() <= g as usize {
            self.groups.resize(g as usize + 1, (0, 0));
        }
    }

    /// Block `b` became live under `key` as event `event_id` stamped `ts_ns`. Returns the block
    /// that was live under the same key (an address reused before its free was seen), which is
    /// closed first.
    #[inline(always)]
    pub fn alloc(&mut self, key: u64, b: Block, event_id: u64, ts_ns: u64) -> Option<Block> {
        self.insert_block(key, b, T::default(), event_id, ts_ns, false)
    }

    /// A MALLOC (event `event_id`, stamped `ts_ns`) at an address whose free may not have been
    /// seen: a block still live under `key` is first freed, as [`LiveAccount::free`] would, by
    /// a synthetic FREE that takes `event_id` (the MALLOC is then `event_id + 1`). Returns
    /// that block. One map lookup where `free` and then `alloc` took two.
    #[inline(always)]
    pub fn alloc_closing(
        &mut self,
        key: u64,
        b: Block,
        event_id: u64,
        ts_ns: u64,
    ) -> Option<Block> {
        self.insert_block(key, b, T::default(), event_id, ts_ns, true)
    }

    /// [`LiveAccount::alloc_closing`] of a block with tag `tag` (handed back by
    /// [`LiveAccount::free_tagged`]).
    #[inline(always)]
    pub fn alloc_closing_tagged(
        &mut self,
        key: u64,
        b: Block,
        tag: T,
        event_id: u64,
        ts_ns: u64,
    ) -> Option<Block> {
        self.insert_block(key, b, tag, event_id, ts_ns, true)
    }

    #[inline(always)]
    fn insert_block(
        &mut self,
        key: u64,
        b: Block,
        tag: T,
        mut event_id: u64,
        ts_ns: u64,
        closing: bool,
    ) -> Option<Block> {
        let p = Packed::new(b, tag);
        let b = p.block();
        self.ensure_group(b.group);
        let old = self.live.insert(key, p).map(Packed::block);
        if let Some(o) = old {
            if closing {
                self.frees += 1;
                event_id += 1;
            }
            self.shrink(o);
        }
        self.live_bytes += b.size;
        let g = &mut self.groups[b.group as usize];
        g.0 += 1;
        g.1 += b.size;
        if self.live_bytes > self.peak.bytes {
            self.peak = Peak {
                bytes: self.live_bytes,
                blocks: self.live.len() as u64,
                id: event_id,
                ts_ns,
            };
            self.rising = true;
        }
        old
    }

    /// The block live under `key` was freed: returns it, or `None` when none was.
    #[inline(always)]
    pub fn free(&mut self, key: u64) -> Option<Block> {
        self.free_tagged(key).map(|(b, _)| b)
    }

    /// [`LiveAccount::free`], with the block's tag.
    #[inline(always)]
    pub fn free_tagged(&mut self, key: u64) -> Option<(Block, T)> {
        let p = self.live.remove(&key)?;
        let b = p.block();
        self.frees += 1;
        self.shrink(b);
        Some((b, p.tag))
    }

    /// The block live under `key`, if any.
    pub fn get(&self, key: u64) -> Option<Block> {
        self.live.get(&key).map(|p| p.block())
    }

    /// Every live block is freed (an `exec` replaced the image); returns how many were.
    pub fn drain(&mut self) -> u64 {
        let blocks: Vec<Block> = self.live.drain().map(|(_, b)| b.block()).collect();
        for b in &blocks {
            self.shrink(*b);
        }
        blocks.len() as u64
    }

    /// Frees every live block whose key `f` accepts (an `exec` replaced the image of one
    /// source's blocks); returns how many were.
    pub fn drain_matching(&mut self, f: impl Fn(u64) -> bool) -> u64 {
        let keys: Vec<u64> = self.live.keys().copied().filter(|&k| f(k)).collect();
        for k in &keys {
            if let Some(b) = self.live.remove(k) {
                self.shrink(b.block());
            }
        }
        keys.len() as u64
    }

    #[inline(always)]
    fn shrink(&mut self, b: Block) {
        self.note_local_max();
        self.live_bytes -= b.size;
        let g = &mut self.groups[b.group as usize];
        g.0 -= 1;
        g.1 -= b.size;
    }

    /// Takes the per-group totals as the peak's when the peak rose by 1 % since the last copy.
    #[inline(always)]
    fn note_local_max(&mut self) {
        if self.rising && self.live_bytes >= self.at_peak_bytes + self.at_peak_bytes / 100 {
            self.at_peak.clone_from(&self.groups);
            self.at_peak_bytes = self.live_bytes;
        }
        self.rising = false;
    }

    /// Bytes live now.
    pub fn live_bytes(&self) -> u64 {
        self.live_bytes
    }

    /// Blocks live now.
    pub fn live_blocks(&self) -> u64 {
        self.live.len() as u64
    }

    /// Blocks freed (their frees were seen).
    pub fn frees(&self) -> u64 {
        self.frees
    }

    /// The peak so far.
    pub fn peak(&self) -> Peak {
        self.peak
    }

    /// Per group: (blocks, bytes) live now.
    pub fn groups_now(&self) -> &[(u64, u64)] {
        &self.groups
    }

    /// Per group: (blocks, bytes) live at the peak (within 1 %; the current totals when they
    /// are the latest local maximum).
    pub fn groups_at_peak(&self) -> &[(u64, u64)] {
        if self.rising && self.live_bytes >= self.at_peak_bytes + self.at_peak_bytes / 100 {
            &self.groups
        } else {
            &self.at_peak
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(size: u64, group: u32, id: u64) -> Block {
        Block { size, group, id }
    }

    #[test]
    fn live_account_keeps_blocks_groups_and_the_peak_with_its_groups() {
        let mut a: LiveAccount = LiveAccount::new();
        assert_eq!(a.alloc(0x10, b(100, 0, 1), 1, 10), None);
        assert_eq!(a.alloc(0x20, b(300, 1, 2), 2, 20), None);
        assert_eq!(a.free(0x20), Some(b(300, 1, 2)));
        assert_eq!(a.free(0x99), None, "unknown key");
        // a reused key closes the old block first
        assert_eq!(a.alloc(0x10, b(50, 1, 3), 4, 40), Some(b(100, 0, 1)));
        assert_eq!(
            a.peak(),
            Peak {
                bytes: 400,
                blocks: 2,
                id: 2,
                ts_ns: 20
            }
        );
        assert_eq!(a.groups_at_peak(), &[(1, 100), (1, 300)]);
        assert_eq!(a.groups_now(), &[(0, 0), (1, 50)]);
        assert_eq!((a.live_bytes(), a.live_blocks(), a.frees()), (50, 1, 1));
        assert_eq!(a.drain(), 1);
        assert_eq!((a.live_bytes(), a.live_blocks()), (0, 0));
    }

    #[test]
    fn alloc_closing_counts_the_replaced_block_as_freed_and_shifts_the_malloc_id() {
        // the same history as `free` then `alloc`, in one lookup
        let (mut one, mut two): (LiveAccount, LiveAccount) =
            (LiveAccount::new(), LiveAccount::new());
        for a in [&mut one, &mut two] {
            a.alloc(0x10, b(100, 0, 1), 1, 10);
        }
        assert_eq!(one.alloc_closing(0x20, b(30, 0, 2), 2, 20), None);
        two.alloc(0x20, b(30, 0, 2), 2, 20);
        // 0x10 reused: synthetic FREE is event 3, the MALLOC event 4 and the new peak's
        assert_eq!(
            one.alloc_closing(0x10, b(500, 1, 3), 3, 30),
            Some(b(100, 0, 1))
        );
        assert_eq!(two.free(0x10), Some(b(100, 0, 1)));
        two.alloc(0x10, b(500, 1, 3), 4, 30);
        assert_eq!(one.peak(), two.peak());
        assert_eq!(one.peak().id, 4);
        assert_eq!(one.frees(), 1);
        assert_eq!(one.groups_now(), two.groups_now());
        assert_eq!(one.groups_at_peak(), two.groups_at_peak());
        assert_eq!(
            (one.live_bytes(), one.live_blocks()),
            (two.live_bytes(), two.live_blocks())
        );
    }

    #[test]
    fn a_block_hands_back_its_tag_when_freed_and_a_reused_key_takes_the_new_tag() {
        let mut a: LiveAccount<u64> = LiveAccount::new();
        assert_eq!(a.alloc_closing_tagged(0x10, b(100, 0, 1), 7, 1, 10), None);
        // the address allocated again before its free: the old block closes, the tag is new
        assert_eq!(
            a.alloc_closing_tagged(0x10, b(50, 0, 2), 9, 2, 20),
            Some(b(100, 0, 1))
        );
        assert_eq!(a.free_tagged(0x10), Some((b(50, 0, 2), 9)));
        assert_eq!(a.free_tagged(0x10), None);
        // untagged allocations carry the default tag
        a.alloc(0x20, b(8, 0, 3), 4, 30);
        assert_eq!(a.free_tagged(0x20), Some((b(8, 0, 3), 0)));
        assert_eq!((a.live_bytes(), a.live_blocks(), a.frees()), (0, 0, 3));
    }
}
