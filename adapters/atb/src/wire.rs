//! ATB's records and their codec (the per-source envelope of `memscope_wire`, source
//! [`crate::SOURCE`]). Field order and encodings are those of the records' former tags 41–46 of
//! capture format 2, so old captures map onto these (`memscope-stream`'s capture `legacy`).
//! ATB's pool (msTX domain `atb`) uses the shared msTX heap and region records.

use memscope_wire::{AccessKind, OptU32, Record};

memscope_wire::records! {
    /// An ATB record.
    pub enum AtbRecord<'a> {
        /// `atb::Runner::Execute` started (abi.md §4.2).
        OpStart = (OP_LAUNCH, 0) {
            /// Logical device of the calling thread.
            device: OptU32,
            /// `workspaceBuffer` of the variant pack.
            ws_ptr: u64,
            /// `workspaceBufferSize + intermediateBufferSize`, bytes.
            ws_size: u64,
            /// Operation name (`Runner::GetOperationName`; empty: unknown).
            name: &'a [u8],
            /// Runner directory (`Runner::GetSaveTensorDir`; empty: unknown).
            path: &'a [u8],
        },
        /// `atb::Runner::Execute` returned.
        OpEnd = (OP_LAUNCH, 1) {
            /// Logical device of the calling thread.
            device: OptU32,
            /// `workspaceBuffer` of the variant pack.
            ws_ptr: u64,
            /// `workspaceBufferSize + intermediateBufferSize`, bytes.
            ws_size: u64,
            /// Operation name.
            name: &'a [u8],
            /// Runner directory.
            path: &'a [u8],
        },
        /// `atb::StoreUtil::SaveLaunchParam` with a `…/before` path: an ATB kernel starts.
        KernelStart = (KERNEL_LAUNCH, 0) {
            /// Logical device of the calling thread.
            device: OptU32,
            /// The directory path passed (`…/<kernel>/before`).
            path: &'a [u8],
        },
        /// `atb::StoreUtil::SaveLaunchParam` with a `…/after` path: an ATB kernel ends.
        KernelEnd = (KERNEL_LAUNCH, 1) {
            /// Logical device of the calling thread.
            device: OptU32,
            /// The directory path passed (`…/<kernel>/after`).
            path: &'a [u8],
        },
        /// One tensor of the ATB operator the writing thread is in.
        TensorOp = (ACCESS, 0) {
            /// How the tensor is accessed.
            access: AccessKind,
            /// Device address.
            addr: u64,
            /// Bytes.
            size: u64,
            /// `aclDataType` code.
            dtype: i32,
            /// `aclFormat` code.
            format: i32,
            /// Dimensions ([`memscope_wire::encode_dims`]).
            dims: &'a [u8],
        },
        /// One tensor of the ATB kernel the writing thread is in.
        TensorKernel = (ACCESS, 1) {
            /// How the tensor is accessed.
            access: AccessKind,
            /// Device address.
            addr: u64,
            /// Bytes.
            size: u64,
            /// `aclDataType` code.
            dtype: i32,
            /// `aclFormat` code.
            format: i32,
            /// Dimensions ([`memscope_wire::encode_dims`]).
            dims: &'a [u8],
        },
    }
}

/// `rec` at time `ts` as an owned stream record of this source (collector side and tests).
pub fn rec(ts: u64, rec: AtbRecord) -> Record<Box<[u8]>> {
    memscope_wire::owned_envelope(&rec, crate::SOURCE, ts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atb_records_keep_the_field_bytes_of_capture_format_2() {
        let Record::Source { body, .. } = rec(
            1,
            AtbRecord::TensorKernel {
                access: AccessKind::Write,
                addr: 5,
                size: 6,
                dtype: -1,
                format: 2,
                dims: &[4],
            },
        ) else {
            unreachable!()
        };
        assert_eq!(&*body, &[2, 5, 6, 1, 4, 1, 4]);
    }
}
