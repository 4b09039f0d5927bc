//! The extents of the pools' segments: HAL blocks that hold pool blocks, the gaps between
//! those blocks, and the figures of each pool (see the parent module).

use std::collections::{BTreeMap, HashMap};

use memscope_core::event::{Device, EventType};

/// The figures of one pool at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Figures {
    /// Bytes of its segments.
    pub reserved: u64,
    /// Bytes of its live blocks.
    pub allocated: u64,
    /// reserved − allocated.
    pub free: u64,
    /// Free extents (`None`: segments unknown).
    pub extents: Option<u64>,
    /// The largest free extent (`None`: segments unknown).
    pub largest: Option<u64>,
}

impl Figures {
    /// 1 − largest / free; 0 when nothing is free, `None` when the extents are unknown.
    pub fn fragmentation(&self) -> Option<f64> {
        let l = self.largest?;
        Some(if self.free == 0 {
            0.0
        } else {
            1.0 - l as f64 / self.free as f64
        })
    }
}

/// A HAL block, and the pool blocks in it once it is a pool's segment.
#[derive(Default)]
struct Segment {
    size: u64,
    pool: Option<EventType>,
    blocks: BTreeMap<u64, u64>,
}

impl Segment {
    /// The free run around `addr` in this segment starting at `start`: the end of the live
    /// block before it (or the segment's start) and the start of the one after (or its end).
    fn gap_around(&self, start: u64, addr: u64) -> (u64, u64) {
        let prev_end = self
            .blocks
            .range(..addr)
            .next_back()
            .map_or(start, |(a, z)| a + z);
        let next = self
            .blocks
            .range(addr..)
            .next()
            .map_or(start + self.size, |(a, _)| *a);
        (prev_end, next)
    }
}

/// One pool on one device.
#[derive(Default)]
pub(super) struct Pool {
    reserved: u64,
    allocated: u64,
    gaps: BTreeMap<u64, u64>,
    outside: u64,
    used_attr: Option<i64>,
    total_attr: Option<i64>,
}

impl Pool {
    fn gap(&mut self, size: u64, add: bool) {
        if size == 0 {
            return;
        }
        if add {
            *self.gaps.entry(size).or_default() += 1;
        } else if let Some(n) = self.gaps.get_mut(&size) {
            *n -= 1;
            if *n == 0 {
                self.gaps.remove(&size);
            }
        }
    }

    /// Its figures now.
    pub(super) fn figures(&self) -> Figures {
        if self.reserved == 0 && self.outside > 0 {
            let t = self.total_attr.unwrap_or(0).max(0) as u64;
            let u = self.used_attr.unwrap_or(self.outside as i64).max(0) as u64;
            return Figures {
                reserved: t,
                allocated: u,
                free: t.saturating_sub(u),
                extents: None,
                largest: None,
            };
        }
        Figures {
            reserved: self.reserved,
            allocated: self.allocated,
            free: self.reserved.saturating_sub(self.allocated),
            extents: Some(self.gaps.values().sum()),
            largest: Some(self.gaps.keys().next_back().copied().unwrap_or(0)),
        }
    }
}

/// One device: its HAL blocks (segments or not) and its pools.
#[derive(Default)]
pub(super) struct DeviceState {
    segs: BTreeMap<u64, Segment>,
    /// This process's live HAL bytes on the device.
    pub(super) hal_live: u64,
    pub(super) pools: BTreeMap<EventType, Pool>,
    /// Device memory (total, free) as the runtime last reported it.
    pub(super) mem: Option<(u64, u64)>,
}

/// A live pool block.
pub(super) struct Block {
    seg: Option<u64>,
    pub(super) size: u64,
    /// Interned owner chain.
    pub(super) owner: u32,
    /// Interned allocating frame.
    pub(super) frame: u32,
}

/// Segments and blocks of every device.
#[derive(Default)]
pub(super) struct Extents {
    pub(super) devices: BTreeMap<Device, DeviceState>,
    pub(super) blocks: HashMap<(EventType, Device, u64), Block>,
}

impl Extents {
    /// The pool's own `used`/`total` figures of its latest row (used without HAL rows).
    pub(super) fn pool_figures(
        &mut self,
        dev: Device,
        pool: EventType,
        used: Option<i64>,
        total: Option<i64>,
    ) {
        let p = self
            .devices
            .entry(dev)
            .or_default()
            .pools
            .entry(pool)
            .or_default();
        p.used_attr = used.or(p.used_attr);
        p.total_attr = total.or(p.total_attr);
    }

    /// A HAL block at `addr` (one there before is replaced); returns the pool whose segment
    /// went away with the old one, if any.
    pub(super) fn hal_malloc(&mut self, dev: Device, addr: u64, size: u64) -> Option<EventType> {
        let changed = self.hal_free(dev, addr);
        let st = self.devices.entry(dev).or_default();
        st.hal_live += size;
        st.segs.insert(
            addr,
            Segment {
                size,
                ..Segment::default()
            },
        );
        changed
    }

    /// A block of `pool` at `[addr, addr+size)`: placed in the HAL block holding it (which
    /// becomes a segment of the pool), else counted outside any segment.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn malloc(
        &mut self,
        dev: Device,
        pool: EventType,
        addr: u64,
        size: u64,
        owner: u32,
        frame: u32,
    ) {
        let st = self.devices.entry(dev).or_default();
        st.pools.entry(pool).or_default();
        let seg_start = st
            .segs
            .range(..=addr)
            .next_back()
            .filter(|(s, seg)| addr < **s + seg.size && seg.pool.is_none_or(|q| q == pool))
            .map(|(s, _)| *s);
        let mut placed = None;
        if let Some(s) = seg_start {
            let seg = st.segs.get_mut(&s).expect("found");
            let p = st.pools.get_mut(&pool).expect("inserted");
            if seg.pool.is_none() {
                seg.pool = Some(pool);
                p.reserved += seg.size;
                p.gap(seg.size, true);
            }
            let (prev_end, next) = seg.gap_around(s, addr);
            if prev_end <= addr && addr + size <= next {
                p.gap(next - prev_end, false);
                p.gap(addr - prev_end, true);
                p.gap(next - (addr + size), true);
                seg.blocks.insert(addr, size);
                p.allocated += size;
                placed = Some(s);
            }
        }
        if placed.is_none() {
            st.pools.get_mut(&pool).expect("inserted").outside += size;
        }
        self.blocks.insert(
            (pool, dev, addr),
            Block {
                seg: placed,
                size,
                owner,
                frame,
            },
        );
    }

    /// The block of `pool` at `addr` was freed (unknown blocks are ignored).
    pub(super) fn free(&mut self, dev: Device, pool: EventType, addr: u64) {
        let Some(b) = self.blocks.remove(&(pool, dev, addr)) else {
            return;
        };
        let st = self.devices.entry(dev).or_default();
        let p = st.pools.entry(pool).or_default();
        match b.seg.and_then(|s| st.segs.get_mut(&s).map(|seg| (s, seg))) {
            Some((s, seg)) => {
                seg.blocks.remove(&addr);
                let (prev_end, next) = seg.gap_around(s, addr);
                p.gap(addr.saturating_sub(prev_end), false);
                p.gap(next.saturating_sub(addr + b.size), false);
                p.gap(next.saturating_sub(prev_end), true);
                p.allocated = p.allocated.saturating_sub(b.size);
            }
            None => p.outside = p.outside.saturating_sub(b.size),
        }
    }

    /// A HAL block went away: a segment leaves its pool (its blocks, if any, are then outside).
    pub(super) fn hal_free(&mut self, dev: Device, addr: u64) -> Option<EventType> {
        let st = self.devices.get_mut(&dev)?;
        let seg = st.segs.remove(&addr)?;
        st.hal_live = st.hal_live.saturating_sub(seg.size);
        let pool = seg.pool?;
        let p = st.pools.entry(pool).or_default();
        let mut cursor = addr;
        for (a, z) in &seg.blocks {
            p.gap(a.saturating_sub(cursor), false);
            cursor = a + z;
            p.allocated = p.allocated.saturating_sub(*z);
            p.outside += z;
        }
        p.gap((addr + seg.size).saturating_sub(cursor), false);
        p.reserved = p.reserved.saturating_sub(seg.size);
        for a in seg.blocks.keys() {
            if let Some(b) = self.blocks.get_mut(&(pool, dev, *a)) {
                b.seg = None;
            }
        }
        Some(pool)
    }
}
