//! Memory samples in the pipeline (issue 25, `--sample`): a `ProcessSample` record of the probe's
//! sampler thread becomes a `SAMPLE`/`HOST_MEMORY` event whose `tracked` bytes are the HOST,
//! HOST_MMAP and host account sources' (Python objects) blocks live at that moment (events
//! seen so far plus the HOST fast path's blocks), a `DeviceSample` a `SAMPLE`/`DEVICE_MEMORY`
//! event on the physical device whose `tracked` bytes are the live HAL blocks —
//! `crate::sampled` does the accounting. The same code runs for `memscope run` and for a
//! replayed capture, so offline views get the same figures.

use super::*;

impl Pipeline {
    /// Types a host memory sample of thread `tid` (the sampler's).
    pub(super) fn host_sample(&mut self, tid: u32, ts: u64, rss: u64, anon: u64) {
        let fast = self.host_fast.as_ref().map_or(0, |f| f.live_bytes());
        let ev = self
            .sampled
            .host_event((ts, self.ctx.pid, tid), rss, anon, fast);
        self.emit(ev);
    }

    /// Types a device memory sample of logical device `device` (its `used` and `free` bytes).
    pub(super) fn device_sample(&mut self, tid: u32, ts: u64, device: u32, used: u64, free: u64) {
        let physical = self.ctx.map_device(device);
        let ev = self
            .sampled
            .device_event((ts, self.ctx.pid, tid), physical, used, free);
        self.emit(ev);
    }
}
