//! `memscope.config()` under `memscope run` (issue 27): a process's pipeline takes the
//! configuration the script asked for, as long as it has written nothing.

use crate::logfile::LogFile;
use crate::pipeline::{Pipeline, PipelineSetup};

impl Pipeline {
    /// Takes the configuration-dependent parts of `s` (issue 27: `memscope.config()` under
    /// `memscope run`): the output directory, the bus (filters, analyses, sink), the log's
    /// place and level, config.json, the capture's destination, the HOST fast path and the
    /// Python stack depth; the typing state (definitions, owners, modules) stays. Only while
    /// the process has written nothing (but python_trace files into the same directory).
    ///
    /// # Errors
    /// Rows or files of the process are written already: one line naming its directory.
    pub fn reconfigure(&mut self, s: PipelineSetup) -> Result<(), String> {
        // python_trace files (the tracer of `--events traceback` runs from the interpreter's
        // start) stay where they are when the directory does not change: the format, the
        // analyses or the levels may still change
        let moved = s.project_dir != self.summary.project_dir;
        if self.next_id > 0 || self.log.is_open() || (self.python.wrote_files() && moved) {
            return Err(format!(
                "rows of this process are written already, into {}",
                self.summary.project_dir.display()
            ));
        }
        let mut log = s.log;
        log.adopt(std::mem::replace(
            &mut self.log,
            LogFile::new(&s.project_dir, Default::default()),
        ));
        self.log = log;
        self.bus = s.bus;
        self.sink_stats = s.sink_stats;
        self.config_json = s.config_json;
        if let Some(c) = &mut self.capture {
            if let Some(name) = c.final_path.file_name() {
                c.final_path = s.project_dir.join(name);
            }
        }
        self.summary.project_dir = s.project_dir;
        self.summary.host_rows_off = s.host_rows_off;
        if self.observer.is_none() {
            self.host_fast = s.host_fast;
            self.account_rows = s.account_rows;
        }
        self.pystacks.set_depth(s.py_depth);
        Ok(())
    }
}
