//! ACL's records and their codec (the per-source envelope of `memscope_wire`, source
//! [`crate::SOURCE`]). Field order and encodings are those of the records' former tags 36–40 of
//! capture format 2, so old captures map onto these (`memscope-stream`'s capture `legacy`).

use memscope_wire::{OptU32, Record};

memscope_wire::records! {
    /// An ACL record.
    pub enum AclRecord<'a> {
        /// `aclrtHostRegisterV2` with `ACL_HOST_REG_PINNED` succeeded (abi.md §3.2).
        PinnedRegister = (MALLOC, 0) {
            /// Host address registered.
            addr: u64,
            /// Bytes registered.
            size: u64,
            /// Resident set size of the process after the call, bytes (0: unknown).
            rss: u64,
            /// Interned C stack id (0: none).
            stack: u32,
        },
        /// `aclrtHostUnregister(addr)` returned `ret`.
        PinnedUnregister = (FREE, 0) {
            /// Host address passed.
            addr: u64,
            /// The runtime's return code (0: success).
            ret: i32,
        },
        /// `aclrtSetDevice(device)` succeeded on the writing thread (logical id).
        SetDevice = (STATE, 0) {
            /// Logical device id passed.
            device: u32,
        },
        /// The runtime hashed a kernel name through the profiling GET_HASH_ID callback
        /// (abi.md §3.6). Written once per hash per process image; a definition (no time).
        KernelName = (DEFINITION, 0) {
            /// Hash id returned to the runtime.
            hash: u64,
            /// The kernel name.
            name: &'a [u8],
        },
        /// A kernel launch through one of the runtime entry points of abi.md §3.5, counted
        /// once however many entry points it crossed.
        KernelLaunch = (KERNEL_LAUNCH, 0) {
            /// Kernel-name hash from the runtime's task-track record (0: none arrived).
            hash: u64,
            /// Device id of the task-track record.
            device: OptU32,
            /// Stream id.
            stream: OptU32,
            /// Task id.
            task: OptU32,
        },
        /// A hooked kernel launch with the `aclrtStream` / `rtStream_t` handle it was given
        /// (0: the default stream); the hooks write this one, `KernelLaunch` stays for launches
        /// seen only through a task-track record (and for older captures).
        KernelLaunchOn = (KERNEL_LAUNCH, 1) {
            /// Kernel-name hash from the runtime's task-track record (0: none arrived).
            hash: u64,
            /// Device id of the task-track record.
            device: OptU32,
            /// Stream id.
            stream: OptU32,
            /// Task id.
            task: OptU32,
            /// The stream handle the caller passed.
            handle: u64,
        },
        /// `aclrtCreateStream(&stream)` succeeded.
        StreamCreate = (SYSTEM, 0) {
            /// The stream handle handed out.
            stream: u64,
        },
        /// `aclrtDestroyStream(stream)` succeeded (stamped before the call).
        StreamDestroy = (SYSTEM, 1) {
            /// The stream handle.
            stream: u64,
        },
        /// `aclrtCreateEvent(&event)` succeeded.
        EventCreate = (SYSTEM, 2) {
            /// The event handle handed out.
            event: u64,
        },
        /// `aclrtDestroyEvent(event)` succeeded (stamped before the call).
        EventDestroy = (SYSTEM, 3) {
            /// The event handle.
            event: u64,
        },
        /// `aclrtRecordEvent(event, stream)` succeeded.
        EventRecord = (SYSTEM, 4) {
            /// The event handle.
            event: u64,
            /// The stream handle (0: the default stream).
            stream: u64,
        },
        /// `aclrtStreamWaitEvent(stream, event)` succeeded.
        StreamWaitEvent = (SYSTEM, 5) {
            /// The waiting stream's handle (0: the default stream).
            stream: u64,
            /// The event handle.
            event: u64,
        },
        /// `aclrtSynchronizeStream(stream)` returned 0 (stamped after the call).
        StreamSync = (SYSTEM, 6) {
            /// The stream handle (0: the default stream).
            stream: u64,
        },
        /// `aclrtSynchronizeEvent(event)` returned 0 (stamped after the call).
        EventSync = (SYSTEM, 7) {
            /// The event handle.
            event: u64,
        },
        /// `aclrtSynchronizeDevice()` returned 0 (stamped after the call).
        DeviceSync = (SYSTEM, 8) {},
    }
}

/// `rec` at time `ts` as an owned stream record of this source (collector side and tests).
pub fn rec(ts: u64, rec: AclRecord) -> Record<Box<[u8]>> {
    memscope_wire::owned_envelope(&rec, crate::SOURCE, ts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acl_records_keep_the_field_bytes_of_capture_format_2() {
        let Record::Source { body, ts, .. } = rec(
            9,
            AclRecord::KernelName {
                hash: 7,
                name: b"k",
            },
        ) else {
            unreachable!()
        };
        assert_eq!((&*body, ts), (&[7, 1, b'k'][..], 0));
        let Record::Source { body, .. } = rec(
            9,
            AclRecord::KernelLaunch {
                hash: 1,
                device: OptU32(u32::MAX),
                stream: OptU32(2),
                task: OptU32(0),
            },
        ) else {
            unreachable!()
        };
        assert_eq!(&*body, &[1, 0, 3, 1]);
        assert_eq!(rec(5, AclRecord::SetDevice { device: 0 }).ts(), Some(5));
        assert_eq!(
            rec(
                5,
                AclRecord::KernelName {
                    hash: 1,
                    name: b"k"
                }
            )
            .ts(),
            None
        );
        assert_eq!(
            AclRecord::decode(memscope_wire::source::tag_of(5, 2), &[]),
            Err(memscope_wire::WireError::BadTag(0x52))
        );
    }

    #[test]
    fn stream_and_event_records_round_trip_with_their_handles() {
        let all = [
            AclRecord::KernelLaunchOn {
                hash: 3,
                device: OptU32(0),
                stream: OptU32(1),
                task: OptU32(2),
                handle: 0x5500_0010,
            },
            AclRecord::StreamCreate {
                stream: 0x5500_0010,
            },
            AclRecord::StreamDestroy {
                stream: 0x5500_0010,
            },
            AclRecord::EventCreate { event: 0x7700_0020 },
            AclRecord::EventDestroy { event: 0x7700_0020 },
            AclRecord::EventRecord {
                event: 0x7700_0020,
                stream: u64::MAX,
            },
            AclRecord::StreamWaitEvent {
                stream: 0,
                event: 0x7700_0020,
            },
            AclRecord::StreamSync { stream: 0 },
            AclRecord::EventSync { event: 1 },
            AclRecord::DeviceSync {},
        ];
        for r in all {
            let owned = rec(42, r);
            assert_eq!(owned.ts(), Some(42), "{r:?} is an event, not a definition");
            let Record::Source { tag, body, .. } = &owned else {
                unreachable!()
            };
            assert_eq!(AclRecord::decode(*tag, body), Ok(r));
        }
    }
}
