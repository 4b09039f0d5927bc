//! `memscope export --to memory-viz`: PyTorch memory snapshot pickles
//! (`memscope_export::memory_viz`).

use anyhow::anyhow;

use super::processes::{finish, resolve};
use super::ExportArgs;

/// Writes the snapshot(s) of the processes of `a.inputs` to `a.output`.
///
/// # Errors
/// Bad inputs, an output that exists or cannot be written.
pub fn export(a: &ExportArgs) -> anyhow::Result<()> {
    let mut bar = super::bar::Bar::new();
    let procs = resolve(a, &mut bar)?;
    let s = memscope_export::memory_viz::export(&procs, &a.output, &mut bar)
        .map_err(|e| anyhow!("{e}"))?;
    finish(a, &mut bar, s);
    Ok(())
}
