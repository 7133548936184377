//! The binary's output: stdout that ends quietly when its reader goes away, best-effort stderr,
//! and output files checked before any work starts.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};

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
            other => other,
        }
    }
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.closed {
            return Ok(buf.len());
        }
        let result = self.inner.write(buf);
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

/// Writes to stderr, best effort: a closed stderr must not turn into a panic.
pub fn note(message: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr(), "{message}");
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
