//! `RacyCell`: a static cell whose accesses are ordered by the caller's own atomics.

use core::cell::UnsafeCell;

/// Interior-mutable static storage. Every access site documents why it does not race (here:
/// written only by the thread that owns the init state machine's INITIALIZING state, read only
/// after an acquire load observes READY).
pub(crate) struct RacyCell<T>(UnsafeCell<T>);

// SAFETY: callers order all accesses through atomics (see the type's documentation).
unsafe impl<T: Send> Sync for RacyCell<T> {}

impl<T> RacyCell<T> {
    /// A cell holding `v`.
    pub(crate) const fn new(v: T) -> Self {
        RacyCell(UnsafeCell::new(v))
    }

    /// Raw pointer to the contents.
    pub(crate) fn get(&self) -> *mut T {
        self.0.get()
    }
}
