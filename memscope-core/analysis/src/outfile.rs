//! Output files of the analyses: folders 0750, files 0600, never over an existing file
//! (behaviour spec §5.1, §13).

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use memscope_dump::safe_fs::{Dir, DIR_MODE, FILE_MODE};

/// Creates `dir` and its missing parents with mode 0750, refusing symbolic links in any
/// component ([`memscope_dump::safe_fs`]).
///
/// # Errors
/// A component cannot be created, exists and is not a folder, or is a symbolic link.
pub fn create_dir_private(dir: &Path) -> io::Result<()> {
    Dir::create_all(dir, DIR_MODE).map(drop)
}

/// Creates a new file `dir/stem.ext`, or `dir/stem_1.ext`, `dir/stem_2.ext`, … when taken,
/// with mode 0600 (creating `dir` with mode 0750 if needed); no symbolic link is followed.
///
/// # Errors
/// The folder or file cannot be created.
pub fn create_unique(dir: &Path, stem: &str, ext: &str) -> io::Result<(PathBuf, File)> {
    let d = Dir::create_all(dir, DIR_MODE)?;
    let (f, p) = d.create_unique(stem, ext, FILE_MODE)?;
    Ok((p, f))
}

/// A new file next to `input`, named `<input stem><suffix>.<input extension>` (or with `_1`,
/// `_2`, … appended when taken), mode 0600. "Next to" is the input's real directory
/// (resolved once, as the input itself was opened); the file is created there without
/// following any symbolic link.
///
/// # Errors
/// As [`create_unique`].
pub fn create_sibling(input: &Path, suffix: &str) -> io::Result<(PathBuf, File)> {
    let dir = match input.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let dir = std::fs::canonicalize(&dir)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
    let stem = input
        .file_stem()
        .map_or("dump".into(), |s| s.to_string_lossy().into_owned());
    let ext = input
        .extension()
        .map_or("csv".into(), |s| s.to_string_lossy().into_owned());
    let d = Dir::open(&dir)?;
    let (f, p) = d.create_unique(&format!("{stem}{suffix}"), &ext, FILE_MODE)?;
    Ok((p, f))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn files_are_private_and_never_reused() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("a/b");
        let (p1, _) = create_unique(&dir, "x", "csv").unwrap();
        let (p2, _) = create_unique(&dir, "x", "csv").unwrap();
        assert_eq!(p1.file_name().unwrap(), "x.csv");
        assert_eq!(p2.file_name().unwrap(), "x_1.csv");
        assert_eq!(
            std::fs::metadata(&p1).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(
            std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
            0o750
        );
        let (s, _) = create_sibling(&p1, "_inefficient").unwrap();
        assert_eq!(s.file_name().unwrap(), "x_inefficient.csv");
    }
}
