//! Parquet export in a build without the `parquet` feature: the same entry point, refusing in one
//! line that says how to get a build that has it.

use std::path::Path;

use crate::{input::ProcessInput, ExportError, Progress, Summary};

/// Always refuses: this build has no Parquet writer.
///
/// # Errors
/// Always, with a message naming the cargo feature and the builds that carry it.
pub fn export(
    _procs: &[ProcessInput],
    _out: &Path,
    _progress: &mut dyn Progress,
) -> Result<Summary, ExportError> {
    Err(ExportError::Other(
        "--to parquet: this memscope was built without Parquet support; build it with \
         `cargo build --release -p memscope-cli --features parquet` (the workspace build, \
         `--profile dist` and the wheel include it)"
            .into(),
    ))
}
