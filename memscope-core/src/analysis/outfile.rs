//! Output files of the analyses: folders 0750, files 0600, never over an existing file
//! (behaviour spec §5.1, §13).

use std::fs::File;
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Creates `dir` and its missing parents with mode 0750.
///
/// # Errors
/// A component cannot be created or exists and is not a folder.
pub fn create_dir_private(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o750)
        .create(dir)
}

/// Creates a new file `dir/stem.ext`, or `dir/stem_1.ext`, `dir/stem_2.ext`, … when taken,
/// with mode 0600 (creating `dir` with mode 0750 if needed).
///
/// # Errors
/// The folder or file cannot be created.
pub fn create_unique(dir: &Path, stem: &str, ext: &str) -> io::Result<(PathBuf, File)> {
    create_dir_private(dir)?;
    for n in 0..10_000u32 {
        let name = if n == 0 {
            format!("{stem}.{ext}")
        } else {
            format!("{stem}_{n}.{ext}")
        };
        let path = dir.join(name);
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(f) => return Ok((path, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!("no free name for {stem}.{ext} in {}", dir.display()),
    ))
}

/// A new file next to `input`, named `<input stem><suffix>.<input extension>` (or with `_1`,
/// `_2`, … appended when taken), mode 0600.
///
/// # Errors
/// As [`create_unique`].
pub fn create_sibling(input: &Path, suffix: &str) -> io::Result<(PathBuf, File)> {
    let dir = match input.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let stem = input
        .file_stem()
        .map_or("dump".into(), |s| s.to_string_lossy().into_owned());
    let ext = input
        .extension()
        .map_or("csv".into(), |s| s.to_string_lossy().into_owned());
    create_unique(&dir, &format!("{stem}{suffix}"), &ext)
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
