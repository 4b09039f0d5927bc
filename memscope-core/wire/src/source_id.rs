//! Source ids: the stream's number for an event source (a built-in adapter or a plugin's
//! source). The id is the bit of the source in the selection mask the CLI hands the probe
//! ([`crate::probe_env::ENV_ADAPTERS`]) and the first field of every per-source record
//! (`Record::Source`); each adapter crate declares its own (`pub const SOURCE`), and the
//! registration list (`memscope-cli/src/builtin.rs`) is the one place that lists them.

/// The number of an event source. Built-in ids are part of the probe's environment protocol and
/// of captures, so an id once given never changes; ids below [`SourceId::SELECTABLE`] have a
/// selection bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SourceId(pub u16);

impl SourceId {
    /// Ids below this one have a bit in the 32-bit selection mask.
    pub const SELECTABLE: u16 = 32;

    /// Bit of this source in the selection mask (0 for an id without one).
    #[inline]
    pub const fn bit(self) -> u32 {
        if self.0 < Self::SELECTABLE {
            1 << self.0
        } else {
            0
        }
    }
}

impl core::fmt::Display for SourceId {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "source {}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_bits_are_distinct_below_the_selectable_limit_and_zero_above() {
        let mut mask = 0;
        for i in 0..SourceId::SELECTABLE {
            let b = SourceId(i).bit();
            assert_eq!(mask & b, 0);
            mask |= b;
        }
        assert_eq!(mask, u32::MAX);
        assert_eq!(SourceId(32).bit(), 0);
    }
}
