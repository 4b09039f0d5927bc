//! `memscope export --to perfetto`: one Perfetto trace of every process
//! (`memscope_export::perfetto`).

use anyhow::anyhow;

use super::processes::{finish, resolve};
use super::ExportArgs;

/// Writes the trace of the processes of `a.inputs` to `a.output`.
///
/// # Errors
/// Bad inputs, an output that exists or cannot be written.
pub fn export(a: &ExportArgs) -> anyhow::Result<()> {
    let mut bar = super::bar::Bar::new();
    let procs = resolve(a, &mut bar)?;
    let s = memscope_export::perfetto::export(&procs, &a.output, &mut bar)
        .map_err(|e| anyhow!("{e}"))?;
    finish(a, &mut bar, s);
    Ok(())
}
