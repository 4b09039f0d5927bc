//! Creating directories and files where memscope writes, without following symbolic links.
//!
//! Every path is walked one component at a time from `/` (or the working directory for a
//! relative path) with `openat(O_PATH|O_DIRECTORY|O_NOFOLLOW)`; missing directories are made
//! with `mkdirat` on the parent's descriptor, and files with
//! `openat(O_CREAT|O_EXCL|O_NOFOLLOW)` on the descriptor of their directory, opened once.
//! A component that is a symbolic link (dangling or not) is refused with an error naming it,
//! so a link planted in a shared output directory, or an `-o` that is or passes through a link,
//! can never send memscope's files elsewhere. Nothing is re-resolved by path between the check
//! and the creation.
//!
//! Errors are [`std::io::Error`]s whose message names the component at fault, e.g.
//! `/out/link is a symbolic link (memscope does not write through symbolic links; give the
//! real path /data/real)`.

use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, CWD};
use rustix::io::Errno;

/// Mode of the directories memscope creates (msMemScope's).
pub const DIR_MODE: u32 = 0o750;
/// Mode of the files memscope creates (msMemScope's).
pub const FILE_MODE: u32 = 0o600;

const DIR_FLAGS: OFlags = OFlags::PATH
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// A directory opened once, by a walk that followed no symbolic link; files and directories
/// are created relative to its descriptor.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    path: PathBuf,
}

fn err(e: Errno, msg: String) -> io::Error {
    io::Error::new(io::Error::from(e).kind(), msg)
}

/// Why `name` in `dir` (shown as `shown`) cannot be entered as a directory.
fn classify(dir: &OwnedFd, name: &Path, shown: &Path, e: Errno) -> io::Error {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
            let dangling = rustix::fs::statat(dir, name, AtFlags::empty()).is_err();
            if dangling {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "{} is a dangling symbolic link (memscope does not write through symbolic links)",
                        shown.display()
                    ),
                )
            } else {
                let real = std::fs::canonicalize(shown)
                    .map(|p| format!("; give the real path {}", p.display()))
                    .unwrap_or_default();
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "{} is a symbolic link (memscope does not write through symbolic links{real})",
                        shown.display()
                    ),
                )
            }
        }
        Ok(_) if matches!(e, Errno::NOTDIR | Errno::LOOP) => io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a directory", shown.display()),
        ),
        _ => err(e, format!("{}: {}", shown.display(), io::Error::from(e))),
    }
}

impl Dir {
    /// Opens the existing directory `path`, refusing symbolic links in every component.
    ///
    /// # Errors
    /// A component is missing, not a directory, or a symbolic link.
    pub fn open(path: &Path) -> io::Result<Dir> {
        Dir::walk(path, None)
    }

    /// Opens `path`, creating the missing directories with `mode` (less the umask), and
    /// refusing symbolic links in every component (existing or raced in).
    ///
    /// # Errors
    /// A component cannot be created, is not a directory, or is a symbolic link.
    pub fn create_all(path: &Path, mode: u32) -> io::Result<Dir> {
        Dir::walk(path, Some(mode))
    }

    fn walk(path: &Path, create: Option<u32>) -> io::Result<Dir> {
        let start = if path.is_absolute() { "/" } else { "." };
        let fd = rustix::fs::openat(CWD, start, DIR_FLAGS, Mode::empty())
            .map_err(|e| err(e, format!("{start}: {}", io::Error::from(e))))?;
        let mut dir = Dir {
            fd,
            path: PathBuf::from(start),
        };
        if path.is_absolute() {
            dir.path = PathBuf::from("/");
        } else {
            dir.path = PathBuf::new();
        }
        for c in path.components() {
            match c {
                Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
                Component::ParentDir => dir = dir.step(Path::new(".."), None)?,
                Component::Normal(name) => dir = dir.step(Path::new(name), create)?,
            }
        }
        if dir.path.as_os_str().is_empty() {
            dir.path = PathBuf::from(".");
        }
        Ok(dir)
    }

    /// Enters `name` (one component), creating it when missing and `create` is given.
    fn step(self, name: &Path, create: Option<u32>) -> io::Result<Dir> {
        let shown = self.path.join(name);
        let open = || rustix::fs::openat(&self.fd, name, DIR_FLAGS, Mode::empty());
        let fd = match open() {
            Ok(fd) => fd,
            Err(Errno::NOENT) if create.is_some() => {
                let mode = Mode::from_raw_mode(create.unwrap_or(DIR_MODE));
                match rustix::fs::mkdirat(&self.fd, name, mode) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => {
                        return Err(err(
                            e,
                            format!("cannot create {}: {}", shown.display(), io::Error::from(e)),
                        ))
                    }
                }
                open().map_err(|e| classify(&self.fd, name, &shown, e))?
            }
            Err(e) => return Err(classify(&self.fd, name, &shown, e)),
        };
        Ok(Dir { fd, path: shown })
    }

    /// The path this directory was opened by (for messages).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens or creates the directories of the relative path `rel` below this one, refusing
    /// symbolic links.
    ///
    /// # Errors
    /// As [`Dir::create_all`].
    pub fn create_dir_all(&self, rel: &Path, mode: u32) -> io::Result<Dir> {
        let mut dir = Dir {
            fd: self.fd.try_clone()?,
            path: self.path.clone(),
        };
        for c in rel.components() {
            match c {
                Component::Normal(name) => dir = dir.step(Path::new(name), Some(mode))?,
                Component::CurDir => {}
                _ => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("{}: not a plain relative path", rel.display()),
                    ))
                }
            }
        }
        Ok(dir)
    }

    /// Creates the directory `name` in this one; it must not exist yet.
    ///
    /// # Errors
    /// It exists (as anything, a symbolic link included), or cannot be created.
    pub fn create_dir_new(&self, name: &str, mode: u32) -> io::Result<Dir> {
        let shown = self.path.join(name);
        rustix::fs::mkdirat(&self.fd, name, Mode::from_raw_mode(mode)).map_err(|e| {
            err(
                e,
                format!("cannot create {}: {}", shown.display(), io::Error::from(e)),
            )
        })?;
        let fd = rustix::fs::openat(&self.fd, name, DIR_FLAGS, Mode::empty())
            .map_err(|e| classify(&self.fd, Path::new(name), &shown, e))?;
        Ok(Dir { fd, path: shown })
    }

    /// Creates the new file `name` (write-only, `O_EXCL|O_NOFOLLOW`) with `mode`.
    ///
    /// # Errors
    /// `AlreadyExists` when the name is taken (by anything, a symbolic link included).
    pub fn create_new(&self, name: &str, mode: u32) -> io::Result<File> {
        let flags = OFlags::WRONLY
            .union(OFlags::CREATE)
            .union(OFlags::EXCL)
            .union(OFlags::NOFOLLOW)
            .union(OFlags::CLOEXEC);
        let fd =
            rustix::fs::openat(&self.fd, name, flags, Mode::from_raw_mode(mode)).map_err(|e| {
                err(
                    e,
                    format!("{}: {}", self.path.join(name).display(), io::Error::from(e)),
                )
            })?;
        Ok(File::from(fd))
    }

    /// Whether `name` exists in this directory as anything (a symbolic link is not followed).
    pub fn contains(&self, name: &str) -> bool {
        rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW).is_ok()
    }

    /// Gives the file `from` of this directory the second name `to` (`linkat`, links not
    /// followed): fails with `AlreadyExists` when `to` is taken, so nothing is replaced.
    ///
    /// # Errors
    /// `to` exists, or the file system has no hard links.
    pub fn link_new(&self, from: &str, to: &str) -> io::Result<()> {
        rustix::fs::linkat(&self.fd, from, &self.fd, to, AtFlags::empty()).map_err(|e| {
            err(
                e,
                format!("{}: {}", self.path.join(to).display(), io::Error::from(e)),
            )
        })
    }

    /// Renames `from` to `to` within this directory (`renameat`): `to`, if it exists, is
    /// replaced itself (a symbolic link there is replaced, never followed).
    ///
    /// # Errors
    /// The I/O error, naming `to`.
    pub fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        rustix::fs::renameat(&self.fd, from, &self.fd, to).map_err(|e| {
            err(
                e,
                format!("{}: {}", self.path.join(to).display(), io::Error::from(e)),
            )
        })
    }

    /// Removes the file (or link) `name` of this directory.
    ///
    /// # Errors
    /// The I/O error, naming it.
    pub fn remove_file(&self, name: &str) -> io::Result<()> {
        rustix::fs::unlinkat(&self.fd, name, AtFlags::empty()).map_err(|e| {
            err(
                e,
                format!("{}: {}", self.path.join(name).display(), io::Error::from(e)),
            )
        })
    }

    /// Creates a new file `stem.ext`, or `stem_1.ext`, `stem_2.ext`, … when the name is taken
    /// (`ext` empty: no extension). Returns the file and its path.
    ///
    /// # Errors
    /// The file cannot be created, or 10 000 names are taken.
    pub fn create_unique(&self, stem: &str, ext: &str, mode: u32) -> io::Result<(File, PathBuf)> {
        for k in 0..10_000u32 {
            let mut name = stem.to_owned();
            if k > 0 {
                name.push_str(&format!("_{k}"));
            }
            if !ext.is_empty() {
                name.push('.');
                name.push_str(ext);
            }
            match self.create_new(&name, mode) {
                Ok(f) => return Ok((f, self.path.join(&name))),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("no free name for {stem}.{ext} in {}", self.path.display()),
        ))
    }
}

/// Splits `path` into its parent directory (`.` when it has none) and its file name.
///
/// # Errors
/// `path` has no file name (`/`, `..`).
pub fn split_file(path: &Path) -> io::Result<(PathBuf, String)> {
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: not a file name", path.display()),
        )
    })?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok((parent, name.to_string_lossy().into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    #[test]
    fn directories_are_created_with_their_mode_and_reopened() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("a/b/c");
        let d = Dir::create_all(&p, DIR_MODE).unwrap();
        assert_eq!(d.path(), p);
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o750
        );
        Dir::create_all(&p, DIR_MODE).unwrap();
        Dir::open(&p).unwrap();
        let (_, f1) = d.create_unique("x", "csv", FILE_MODE).unwrap();
        let (_, f2) = d.create_unique("x", "csv", FILE_MODE).unwrap();
        assert_eq!(f1, p.join("x.csv"));
        assert_eq!(f2, p.join("x_1.csv"));
        assert_eq!(
            std::fs::metadata(&f1).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }

    #[test]
    fn a_symlink_anywhere_in_the_path_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let real = t.path().join("real");
        std::fs::create_dir(&real).unwrap();
        symlink(&real, t.path().join("link")).unwrap();
        symlink(t.path().join("nowhere"), t.path().join("dangling")).unwrap();
        for p in ["link", "link/sub", "dangling", "dangling/sub"] {
            let e = Dir::create_all(&t.path().join(p), DIR_MODE).unwrap_err();
            assert!(e.to_string().contains("symbolic link"), "{p}: {e}");
        }
        let e = Dir::create_all(&t.path().join("dangling"), DIR_MODE).unwrap_err();
        assert!(e.to_string().contains("dangling"), "{e}");
        assert!(
            !real.join("sub").exists(),
            "nothing created through the link"
        );
        assert!(!t.path().join("nowhere").exists());
        // a file is "not a directory"; a symlink as the file name is an existing name
        std::fs::write(t.path().join("f"), "x").unwrap();
        let e = Dir::create_all(&t.path().join("f/sub"), DIR_MODE).unwrap_err();
        assert!(e.to_string().contains("not a directory"), "{e}");
        let d = Dir::open(t.path()).unwrap();
        let e = d.create_new("link", FILE_MODE).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        let e = d.create_dir_new("link", DIR_MODE).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        let e = d.create_dir_all(Path::new("link/x"), DIR_MODE).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
    }

    #[test]
    fn links_renames_and_removals_stay_in_the_opened_directory() {
        let t = tempfile::tempdir().unwrap();
        let d = Dir::open(t.path()).unwrap();
        drop(d.create_new("a", FILE_MODE).unwrap());
        d.link_new("a", "b").unwrap();
        assert!(d.contains("b"));
        let e = d.link_new("a", "b").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        // a link as the target name is replaced itself, its target is left alone
        let victim = t.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        symlink(&victim, t.path().join("l")).unwrap();
        assert!(d.contains("l"));
        d.rename("a", "l").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert!(!std::fs::symlink_metadata(t.path().join("l"))
            .unwrap()
            .file_type()
            .is_symlink());
        d.remove_file("b").unwrap();
        assert!(!d.contains("b") && !d.contains("a"));
    }

    #[test]
    fn relative_paths_and_dotdot_walk_from_the_working_directory() {
        let d = Dir::open(Path::new(".")).unwrap();
        assert_eq!(d.path(), Path::new("."));
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir(t.path().join("a")).unwrap();
        Dir::open(&t.path().join("a/../a")).unwrap();
    }
}
