//! Built-in adapters by selection bit: the `MEMSCOPE_ADAPTERS` mask the CLI hands the probe
//! ([`crate::probe_env::ENV_ADAPTERS`]) and each hook tests.

/// Built-in adapters. The discriminant is the bit position in the selection mask; it is part of
/// the probe's environment protocol, so values never change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum AdapterId {
    /// msTX marks, ranges and memory-domain injection (`InitInjectionMstx`).
    Mstx = 0,
    /// torch_npu caching and workspace pools (msTX domains `ptaCaching`/`msleaks`, `ptaWorkspace`).
    Pta = 1,
    /// MindSpore memory pool (msTX domain `mindsporeMemPool`).
    MindSpore = 2,
    /// ATB pool, operators and kernels.
    Atb = 3,
    /// Driver memory (`halMemAlloc` …).
    Hal = 4,
    /// ACL runtime lifecycle, pinned host memory and kernel launches.
    Acl = 5,
    /// The libc allocator (`malloc` …).
    Host = 6,
}

impl AdapterId {
    /// Every built-in adapter.
    pub const ALL: [AdapterId; 7] = [
        AdapterId::Mstx,
        AdapterId::Pta,
        AdapterId::MindSpore,
        AdapterId::Atb,
        AdapterId::Hal,
        AdapterId::Acl,
        AdapterId::Host,
    ];

    /// The name used in `--adapters` and config.json.
    pub fn name(self) -> &'static str {
        match self {
            AdapterId::Mstx => "mstx",
            AdapterId::Pta => "pta",
            AdapterId::MindSpore => "mindspore",
            AdapterId::Atb => "atb",
            AdapterId::Hal => "hal",
            AdapterId::Acl => "acl",
            AdapterId::Host => "host",
        }
    }

    /// Looks a name up (exact, lower case).
    pub fn from_name(name: &str) -> Option<AdapterId> {
        AdapterId::ALL.into_iter().find(|a| a.name() == name)
    }

    /// Bit of this adapter in the selection mask.
    pub fn bit(self) -> u32 {
        1 << self as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adapter_names_round_trip_and_bits_are_distinct() {
        let mut mask = 0;
        for a in AdapterId::ALL {
            assert_eq!(AdapterId::from_name(a.name()), Some(a));
            assert_eq!(mask & a.bit(), 0);
            mask |= a.bit();
        }
    }
}
