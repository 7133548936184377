//! The binary's output: stdout that ends quietly when its reader goes away, best-effort stderr,
//! both showing control characters escaped (see `tep_conformance::terminal`),
//! and output files checked before any work starts.

use std::io::Write;
use std::path::Path;

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
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .with_context(|| format!("cannot write the {what} to {}", path.display()))?;
    if !existed {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// Writes a report whole or not at all: into a temporary file beside `path` (same directory,
/// same file system), flushed to disk, then renamed over `path`, so a reader (a CI upload, a
/// browser) never sees half a report and a full disk leaves the old file or none. Creates the
/// directory. A path that exists and is not a regular file (`/dev/stdout`, `/dev/full`, a FIFO)
/// is written in place: renaming over it would replace the device. A symbolic link is followed,
/// as a plain write would. The error names the file.
pub fn write_atomically(path: &Path, text: &str) -> Result<()> {
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
        None => std::path::PathBuf::from("."),
    };
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temporary = dir.join(format!(".{name}.tep-{}.tmp", std::process::id()));
    let written = (|| -> std::io::Result<()> {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&temporary)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temporary, &target)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
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
    let probed = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .map(|_| ());
    let _ = std::fs::remove_file(&probe);
    for created in missing {
        let _ = std::fs::remove_dir(created);
    }
    probed.with_context(|| format!("cannot write into the {what} {}", dir.display()))
}
