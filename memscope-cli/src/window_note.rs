//! Each flight-recorder window a view reads is named once on stderr (issue 38); the lines
//! are `memscope_longjobs::window_note`'s.

use memscope_longjobs::window_note::{line, windows};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

pub use memscope_longjobs::window_note::label_suffix;

/// Directories already named.
static SAID: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);

/// Names each window at or under `path` on stderr, once per directory.
pub fn say(path: &Path) {
    for (dir, f) in windows(path) {
        let key = std::fs::canonicalize(&dir).unwrap_or_else(|_| dir.clone());
        let fresh = SAID
            .lock()
            .map(|mut s| s.get_or_insert_with(HashSet::new).insert(key))
            .unwrap_or(true);
        if fresh {
            eprintln!("{}", line(&dir, &f));
        }
    }
}
