//! The binary's output: stdout that ends quietly when its reader goes away, best-effort stderr,
//! both showing control characters escaped (see `tep_conformance::terminal`),
//! and output files checked before any work starts.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use anyhow::{Context, Result};
use tep_conformance::terminal::escape_controls;

/// Standard output that ends quietly when its reader goes away: after a broken pipe (as in
/// `tep scenarios list | head -1`) the rest of the output is dropped instead of failing, or
/// panicking as `println!` does. The exit code still says what the command found.
pub struct Stdout {
    inner: std::io::Stdout,
    closed: bool,
}

impl Stdout {
    pub fn new() -> Self {
        Stdout {
            inner: std::io::stdout(),
            closed: false,
        }
    }

    fn quiet<T>(&mut self, result: std::io::Result<T>, done: T) -> std::io::Result<T> {
        match result {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(done)
            }
            Err(e) => Err(std::io::Error::new(
                e.kind(),
                format!("cannot write to standard output: {e}"),
            )),
            ok => ok,
        }
    }
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.closed {
            return Ok(buf.len());
        }
        // No colour is written here: every control character but newline and tab is shown
        // escaped (a trace or an adapter controls much of what is printed).
        let text = String::from_utf8_lossy(buf);
        let result = self
            .inner
            .write_all(escape_controls(&text).as_bytes())
            .map(|()| buf.len());
        self.quiet(result, buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.closed {
            return Ok(());
        }
        let result = self.inner.flush();
        self.quiet(result, ())
    }
}

/// Writes to stderr, best effort: a closed stderr must not turn into a panic. Control
/// characters are shown escaped (an error may quote an adapter's stderr or a trace).
pub fn note(message: std::fmt::Arguments<'_>) {
    let _ = writeln!(
        std::io::stderr(),
        "{}",
        escape_controls(&message.to_string())
    );
}

/// Fails now, before any work, if `path` cannot be written; leaves no file behind.
pub fn check_writable(path: &Path, what: &str) -> Result<()> {
    refuse_foreign_link(path)?;
    let existed = path.exists();
    // The report writers create missing directories; so does this check.
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| {
            format!(
                "cannot write the {what} to {}: cannot create {}",
                path.display(),
                dir.display()
            )
        })?;
    }
    // A file made only to be tried is listed as temporary: a signal now removes it too.
    let opened = if existed {
        std::fs::OpenOptions::new().write(true).open(path).map(drop)
    } else {
        create_temporary(path).map(|_| remove_temporary(path))
    };
    opened.with_context(|| format!("cannot write the {what} to {}", path.display()))
}

/// The temporary files this process is writing: the signal handler removes them before it
/// exits ([`remove_temporaries`]). A file is listed from the moment it is created (under the
/// lock, so a signal never finds one created and not listed) until it is renamed or removed.
static TEMPORARIES: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn temporaries() -> MutexGuard<'static, Vec<PathBuf>> {
    TEMPORARIES.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Removes every temporary file being written, for a signal handler about to exit. The lock is
/// held until the process exits, so no temporary is created or renamed after this.
pub fn remove_temporaries() -> MutexGuard<'static, Vec<PathBuf>> {
    let mut listed = temporaries();
    for path in listed.drain(..) {
        let _ = std::fs::remove_file(path);
    }
    listed
}

/// Creates `path`, a temporary file of this process's own: `create_new`, so never a file or a
/// symbolic link already there (which is then not ours to write or remove either). Listed for
/// the signal handler until [`remove_temporary`].
pub fn create_temporary(path: &Path) -> std::io::Result<std::fs::File> {
    let mut listed = temporaries();
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?;
    listed.push(path.to_owned());
    Ok(file)
}

/// Removes a temporary file made by [`create_temporary`].
pub fn remove_temporary(path: &Path) {
    let mut listed = temporaries();
    let _ = std::fs::remove_file(path);
    listed.retain(|p| p != path);
}

/// A new temporary file beside `name` in `dir`: `.NAME.tep-PID.tmp`, or `.NAME.tep-PID-N.tmp`
/// when that name is taken (a planted symbolic link, a file left by a killed process of the
/// same pid): what is there is left untouched.
fn temporary_beside(dir: &Path, name: &str) -> std::io::Result<(PathBuf, std::fs::File)> {
    let pid = std::process::id();
    let mut last = None;
    for n in 0..100 {
        let candidate = match n {
            0 => dir.join(format!(".{name}.tep-{pid}.tmp")),
            n => dir.join(format!(".{name}.tep-{pid}-{n}.tmp")),
        };
        match create_temporary(&candidate) {
            Ok(file) => return Ok((candidate, file)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no temporary name is free")))
}

/// Refuses a symbolic link at `path` that someone else made: in a shared directory another
/// user could point it at a file of ours (or root's), which the write would then replace.
/// Links of our own or root's (`/dev/stdout`) are followed, as a plain write would.
fn refuse_foreign_link(path: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        if let Ok(meta) = std::fs::symlink_metadata(path)
            && meta.file_type().is_symlink()
        {
            let owner = meta.uid();
            let me = rustix::process::geteuid().as_raw();
            if owner != me && owner != 0 {
                anyhow::bail!(
                    "cannot write {}: it is a symbolic link of another user (uid {owner}), not followed",
                    path.display()
                );
            }
        }
    }
    Ok(())
}

/// Writes a report whole or not at all: into a temporary file beside `path` (same directory,
/// same file system), created new (never through a name already there), flushed to disk,
/// then renamed over `path`, so a reader (a CI upload, a browser) never sees half a report,
/// a full disk or a signal leaves the old file or none, and no temporary file is left. Creates
/// the directory. A path that exists and is not a regular file (`/dev/stdout`, `/dev/full`, a
/// FIFO) is written in place: renaming over it would replace the device. A symbolic link of
/// our own is followed, as a plain write would; another user's is refused. The error names
/// the file.
pub fn write_atomically(path: &Path, text: &str) -> Result<()> {
    refuse_foreign_link(path)?;
    let target = match std::fs::canonicalize(path) {
        Ok(resolved) => resolved,
        Err(_) => path.to_owned(),
    };
    if std::fs::metadata(&target).is_ok_and(|m| !m.is_file()) {
        return std::fs::write(&target, text)
            .with_context(|| format!("cannot write {}", path.display()));
    }
    let dir = match target.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| {
                format!(
                    "cannot write {}: cannot create {}",
                    path.display(),
                    dir.display()
                )
            })?;
            dir.to_owned()
        }
        None => PathBuf::from("."),
    };
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (temporary, mut file) = temporary_beside(&dir, &name)
        .with_context(|| format!("cannot write {}", path.display()))?;
    let written = (|| -> std::io::Result<()> {
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        drop(file);
        // Renamed under the lock: a signal handler has either removed the file first, or
        // finds it renamed (and the report whole).
        let mut listed = temporaries();
        let renamed = std::fs::rename(&temporary, &target);
        if renamed.is_ok() {
            listed.retain(|p| p != &temporary);
        }
        renamed
    })();
    if written.is_err() {
        remove_temporary(&temporary);
    }
    written.with_context(|| format!("cannot write {}", path.display()))
}

/// Fails now, before any adapter starts, if the directory `dir` (not created yet: it is made
/// on the first kept trace) could not be created and written; leaves nothing behind.
pub fn check_dir_creatable(dir: &Path, what: &str) -> Result<()> {
    let missing: Vec<&Path> = dir
        .ancestors()
        .take_while(|d| !d.as_os_str().is_empty() && !d.exists())
        .collect();
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create the {what} {}", dir.display()))?;
    let probe = dir.join(format!(".tep-probe-{}", std::process::id()));
    let probed = create_temporary(&probe).map(|_| remove_temporary(&probe));
    for created in missing {
        let _ = std::fs::remove_dir(created);
    }
    probed.with_context(|| format!("cannot write into the {what} {}", dir.display()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tep-output-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[cfg(unix)]
    #[test]
    fn a_link_planted_at_the_temporary_name_is_left_untouched() {
        let dir = scratch("planted");
        let victim = dir.join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let planted = dir.join(format!(".report.json.tep-{}.tmp", std::process::id()));
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        let report = dir.join("report.json");
        write_atomically(&report, "the report").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert_eq!(std::fs::read_link(&planted).unwrap(), victim);
        assert_eq!(std::fs::read_to_string(&report).unwrap(), "the report");
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        let planted_name = planted.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(left, [planted_name.as_str(), "report.json", "victim"]);
        // Tests write at once in this process: none of this directory's is still listed.
        assert!(!temporaries().iter().any(|p| p.starts_with(&dir)));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[cfg(unix)]
    #[test]
    fn another_users_link_at_the_report_is_refused() {
        if !rustix::process::geteuid().is_root() {
            return; // only root can give a link away (lchown)
        }
        let dir = scratch("foreign");
        let victim = dir.join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let link = dir.join("report.json");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        std::os::unix::fs::lchown(&link, Some(65534), Some(65534)).unwrap();
        let e = write_atomically(&link, "the report").unwrap_err();
        assert!(
            format!("{e:#}").contains("symbolic link of another user"),
            "{e:#}"
        );
        assert!(check_writable(&link, "JSON report").is_err());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        // Our own link is followed, as a plain write would.
        std::os::unix::fs::lchown(&link, Some(0), Some(0)).unwrap();
        write_atomically(&link, "the report").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "the report");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
