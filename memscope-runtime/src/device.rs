//! The runtime device of each thread for its msTX rows: hooks query the device whenever a
//! thread reports a mark or range (behaviour spec §8) and hand it to [`note_thread_device`],
//! which writes a `Record::ThreadDevice` only when the value differs from what this thread
//! last wrote into the current stream. So a job that stays on one device pays one small record
//! per thread, not one byte per mark.
//!
//! State: one const-initialised `Cell<u64>` per thread (stream generation in the high half,
//! device in the low half; 0 = nothing written, as generations start at 1). A fork child has a
//! new generation, so its first row writes the device again into its own stream.

use crate::{stream, writer};
use core::cell::Cell;
use memscope_wire::Record;

thread_local! {
    static LAST: Cell<u64> = const { Cell::new(0) };
}

/// Records that the calling thread's runtime device is `device` (logical id; `u32::MAX`:
/// unknown) at `ts`, unless this thread already wrote that value into the current stream.
/// Call it (under the reentrancy guard) just before recording the row it applies to, with the
/// row's time stamp.
pub fn note_thread_device(ts: u64, device: u32) {
    let Some(gen) = stream::open_gen() else {
        return;
    };
    let key = (u64::from(gen) << 32) | u64::from(device);
    let _ = LAST.try_with(|c| {
        if c.get() != key && writer::record(&Record::ThreadDevice { ts, device }) {
            c.set(key);
        }
    });
}
