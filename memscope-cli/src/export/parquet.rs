//! `memscope export --to parquet`: a hive-partitioned Parquet dataset
//! (`memscope_export::parquet`; a build without its `parquet` feature refuses in one line).

use super::ExportArgs;

/// Writes the dataset of the processes of `a.inputs` into `a.output`.
///
/// # Errors
/// Bad inputs, an output that exists or cannot be written, a build without Parquet.
pub fn export(a: &ExportArgs) -> anyhow::Result<()> {
    use super::processes::{finish, resolve};
    let mut bar = super::bar::Bar::new();
    let procs = resolve(a, &mut bar)?;
    let s = memscope_export::parquet::export(&procs, &a.output, &mut bar)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    finish(a, &mut bar, s);
    Ok(())
}
