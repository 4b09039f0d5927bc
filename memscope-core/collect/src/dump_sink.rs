//! The run's dump sink: CSV or SQLite per device under a process directory.

use crate::config::{Format, RunConfig};
use memscope_core::bus::{BusError, Layer};
use memscope_dump::layout;
use memscope_dump::sink::csv::CsvSink;
use memscope_dump::sink::sqlite::DbSink;
use memscope_dump::sink::{Place, SharedStats};
use std::path::{Path, PathBuf};

/// The dump sink of process directory `project` (files `memscope_dump_<ts>.<csv|db>` per
/// device) and its figures.
pub(crate) fn sink(cfg: &RunConfig, project: &Path, ts: &str) -> (Box<dyn Layer>, SharedStats) {
    let (project, ts) = (project.to_path_buf(), ts.to_owned());
    let ext = match cfg.format {
        Format::Csv => "csv",
        Format::Db => "db",
    };
    let open = Box::new(
        move |place: Place| -> Result<(std::fs::File, PathBuf), BusError> {
            let path = match place {
                Place::Device(d) => {
                    let dir = d.dir_name().unwrap_or_else(|| "device_cpu".into());
                    layout::dump_path(&project, &dir, &ts, ext)
                }
                Place::Backlog => project.join(format!(".memscope_backlog_{ts}.{ext}")),
            };
            let io = |e| BusError::Io {
                path: path.display().to_string(),
                source: e,
            };
            layout::create_dir_0750(path.parent().expect("dump dir")).map_err(io)?;
            layout::create_new_0600(&path).map_err(|e| BusError::Io {
                path: path.display().to_string(),
                source: e,
            })
        },
    );
    // `--device npu:<n>` without `cpu` (issue 18, B8): no device_cpu file of device-less rows
    let fallback = cfg.device.cpu || cfg.device.all_npu;
    match cfg.format {
        Format::Csv => {
            let mut s = CsvSink::new(open);
            s.set_device_less_fallback(fallback);
            let st = s.stats();
            (Box::new(s), st)
        }
        Format::Db => {
            let mut s = DbSink::new(open);
            s.set_device_less_fallback(fallback);
            let st = s.stats();
            (Box::new(s), st)
        }
    }
}
