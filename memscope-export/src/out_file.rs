//! Output files written under a temporary name in the target's directory and moved into place
//! only when complete, never over an existing file: a viewer or engine never meets a
//! half-written output, and nothing the user already has is lost. As everywhere memscope
//! writes (issue 17, M1), no symbolic link is followed: directories are walked and created
//! with `memscope_dump::safe_fs`, files created `O_EXCL|O_NOFOLLOW` relative to their folder.

use std::fs::File;
use std::io::{self, BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use memscope_dump::safe_fs::{split_file, Dir};

use crate::error::ExportError;

/// Mode of created files and directories before the umask (what `File::create` and
/// `create_dir_all` would give: outputs are meant to be shared with viewers).
const MODE: u32 = 0o666;
const DIR_MODE: u32 = 0o777;

/// Creates `dir` and its parents, refusing a symbolic link in any component.
///
/// # Errors
/// [`ExportError::Write`] naming the component at fault.
pub fn create_dirs(dir: &Path) -> Result<(), ExportError> {
    Dir::create_all(dir, DIR_MODE)
        .map(drop)
        .map_err(|e| ExportError::write(dir, e))
}

/// The folder of `path` (opened without following links) and the file name.
fn folder_of(path: &Path) -> Result<(Dir, String), ExportError> {
    let (parent, name) = split_file(path).map_err(|e| ExportError::write(path, e))?;
    let dir = Dir::open(&parent).map_err(|e| ExportError::write(path, e))?;
    Ok((dir, name))
}

/// Creates the temporary file `tmp` (`O_EXCL|O_NOFOLLOW`), replacing a leftover of a killed
/// export with the same name.
///
/// # Errors
/// Its folder is not writable or passes through a symbolic link.
pub fn create_tmp(tmp: &Path) -> Result<File, ExportError> {
    let (dir, name) = folder_of(tmp)?;
    dir.create_new(&name, MODE)
        .or_else(|e| {
            if e.kind() == io::ErrorKind::AlreadyExists {
                dir.remove_file(&name)?;
                dir.create_new(&name, MODE)
            } else {
                Err(e)
            }
        })
        .map_err(|e| ExportError::write(tmp, e))
}

/// Where an exporter writes: a byte sink that can be cut back (to redo a part).
pub trait Sink: Write {
    /// Bytes written so far.
    fn pos(&self) -> u64;
    /// Cuts the output back to `pos` bytes.
    ///
    /// # Errors
    /// The I/O error.
    fn truncate_to(&mut self, pos: u64) -> io::Result<()>;
}

impl Sink for Vec<u8> {
    fn pos(&self) -> u64 {
        self.len() as u64
    }
    fn truncate_to(&mut self, pos: u64) -> io::Result<()> {
        self.truncate(pos as usize);
        Ok(())
    }
}

impl Sink for OutFile {
    fn pos(&self) -> u64 {
        OutFile::pos(self)
    }
    fn truncate_to(&mut self, pos: u64) -> io::Result<()> {
        OutFile::truncate_to(self, pos)
    }
}

/// Fails when `path` exists (memscope never overwrites an output).
///
/// # Errors
/// [`ExportError::Output`] naming `path`.
pub fn refuse_existing(path: &Path) -> Result<(), ExportError> {
    if std::fs::symlink_metadata(path).is_ok() {
        return Err(ExportError::Output {
            path: path.display().to_string(),
            msg: "exists already; memscope does not overwrite outputs (remove it or choose another name)".into(),
        });
    }
    Ok(())
}

/// The temporary sibling of `path`: `.<name>.tmp-<pid>` in the same directory.
pub fn tmp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into());
    path.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}

/// Moves `tmp` to `path` (same folder) unless `path` exists: a hard link (which fails on an
/// existing name) then the removal of `tmp`; a plain rename where the file system has no hard
/// links. Neither follows a symbolic link.
///
/// # Errors
/// `path` exists, or the file system refused.
pub fn publish(tmp: &Path, path: &Path) -> Result<(), ExportError> {
    let (dir, name) = folder_of(path)?;
    let tmp_name = tmp
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match dir.link_new(&tmp_name, &name) {
        Ok(()) => {
            let _ = dir.remove_file(&tmp_name);
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            let _ = dir.remove_file(&tmp_name);
            refuse_existing(path)
        }
        Err(_) => {
            if dir.contains(&name) {
                let _ = dir.remove_file(&tmp_name);
                return refuse_existing(path);
            }
            dir.rename(&tmp_name, &name)
                .map_err(|e| ExportError::write(path, e))
        }
    }
}

/// A buffered output file written at a temporary name; [`OutFile::commit`] moves it into place,
/// dropping it uncommitted removes it.
pub struct OutFile {
    path: PathBuf,
    tmp: PathBuf,
    w: Option<BufWriter<File>>,
    pos: u64,
}

impl OutFile {
    /// Starts the output `path` (which must not exist).
    ///
    /// # Errors
    /// `path` exists, or its directory is not writable.
    pub fn create(path: &Path) -> Result<OutFile, ExportError> {
        refuse_existing(path)?;
        let tmp = tmp_path(path);
        // a leftover of a killed export with our pid is replaced
        let f = create_tmp(&tmp)?;
        Ok(OutFile {
            path: path.to_owned(),
            tmp,
            w: Some(BufWriter::with_capacity(1 << 20, f)),
            pos: 0,
        })
    }

    /// The final path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes written so far.
    pub fn pos(&self) -> u64 {
        self.pos
    }

    /// Cuts the file back to `pos` bytes (an exporter going back to redo a part).
    ///
    /// # Errors
    /// The I/O error.
    pub fn truncate_to(&mut self, pos: u64) -> io::Result<()> {
        let w = self.w.as_mut().ok_or_else(|| io::Error::other("closed"))?;
        w.flush()?;
        let f = w.get_mut();
        f.set_len(pos)?;
        f.seek(SeekFrom::Start(pos))?;
        self.pos = pos;
        Ok(())
    }

    /// Flushes, syncs and moves the file into place. Returns its size.
    ///
    /// # Errors
    /// Writing failed, or the final name appeared meanwhile.
    pub fn commit(mut self) -> Result<u64, ExportError> {
        let w = self.w.take().expect("not committed yet");
        let f = w
            .into_inner()
            .map_err(|e| ExportError::write(&self.path, e.into_error()))?;
        f.sync_all()
            .map_err(|e| ExportError::write(&self.path, e))?;
        drop(f);
        publish(&self.tmp, &self.path)?;
        Ok(self.pos)
    }
}

impl Write for OutFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let w = self.w.as_mut().ok_or_else(|| io::Error::other("closed"))?;
        let n = w.write(buf)?;
        self.pos += n as u64;
        Ok(n)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        let w = self.w.as_mut().ok_or_else(|| io::Error::other("closed"))?;
        w.write_all(buf)?;
        self.pos += buf.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.w.as_mut() {
            Some(w) => w.flush(),
            None => Ok(()),
        }
    }
}

impl Drop for OutFile {
    fn drop(&mut self) {
        if self.w.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_appear_only_when_committed_and_never_replace_a_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.bin");
        let mut o = OutFile::create(&p).unwrap();
        o.write_all(b"hello world").unwrap();
        o.truncate_to(5).unwrap();
        o.write_all(b"!").unwrap();
        assert!(!p.exists(), "nothing at the final name before commit");
        assert_eq!(o.commit().unwrap(), 6);
        assert_eq!(std::fs::read(&p).unwrap(), b"hello!");
        assert!(
            OutFile::create(&p).is_err(),
            "an existing output is refused"
        );
        let q = d.path().join("b.bin");
        drop(OutFile::create(&q).unwrap());
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1, "no litter");
    }
}
