//! The one reader of a whole JSON file `tep` did not write itself: a run report (`tep report`,
//! `--compare`), a baseline, a scenario file. Each kind has its bound ([limits.md](../../docs/limits.md));
//! past it the file is refused before it is parsed, so memory stays a multiple of the bound.
//!
//! Every path is read the same way: a regular file longer than the bound is refused from its
//! size, before a byte is read; anything else that can be opened for reading (a FIFO, a
//! character device such as `/dev/zero` or `/dev/stdin`, a process substitution) is read up
//! to one byte past the bound and refused there. A directory is refused by name. A trace or a
//! session log is not read whole: it is streamed, each line bounded (`trace_io::MAX_LINE_BYTES`).

use std::io::Read;
use std::path::Path;

/// The largest JSON run report read (`tep report`, `tep run --compare`): 128 MiB, over a
/// thousand times a failing corpus run's (about 50 KB). A report holds no trace; its size
/// grows with its scenarios and their violations (at most 1000 per scenario).
pub const MAX_REPORT_BYTES: u64 = 128 * 1024 * 1024;

/// The largest baseline read (`--baseline`): 16 MiB, thousands of times a corpus-wide one.
pub const MAX_BASELINE_BYTES: u64 = 16 * 1024 * 1024;

/// The largest scenario file read (`--scenario-file`): 1 MiB. What a scenario runs is at most
/// 16 KiB (`limits::MAX_RUNNABLE_BYTES`); the rest is its description and expectations.
pub const MAX_SCENARIO_FILE_BYTES: u64 = 1024 * 1024;

/// Why a file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    // `error`, not `source`: the message says it already, a source would say it twice.
    #[error("cannot read {file}: {error}")]
    Io { file: String, error: std::io::Error },
    #[error("cannot read {file}: it is a directory")]
    Directory { file: String },
    #[error("{file} is {bytes} bytes, longer than the {limit} bytes a {what} may have")]
    TooLong {
        file: String,
        what: &'static str,
        bytes: u64,
        limit: u64,
    },
    #[error(
        "{file} gave more than the {limit} bytes a {what} may have (a device or a pipe that does not end?); stopped reading there"
    )]
    Endless {
        file: String,
        what: &'static str,
        limit: u64,
    },
    #[error("{file} is not UTF-8 text ({error})")]
    NotUtf8 {
        file: String,
        error: std::string::FromUtf8Error,
    },
}

/// Reads the whole of `path`, a `what` (named in errors) of at most `limit` bytes.
pub fn read_bounded(path: &Path, what: &'static str, limit: u64) -> Result<String, InputError> {
    let file = path.display().to_string();
    let io = |error| InputError::Io {
        file: file.clone(),
        error,
    };
    let opened = std::fs::File::open(path).map_err(io)?;
    let meta = opened.metadata().map_err(io)?;
    if meta.is_dir() {
        return Err(InputError::Directory { file });
    }
    if meta.is_file() && meta.len() > limit {
        return Err(InputError::TooLong {
            file,
            what,
            bytes: meta.len(),
            limit,
        });
    }
    // Reserved whole, so the buffer never grows by doubling (a copy and twice the bound at
    // once); the pages of what a device does not fill are never touched.
    let capacity = if meta.is_file() {
        meta.len()
    } else {
        limit.saturating_add(1)
    };
    let mut bytes = Vec::with_capacity(usize::try_from(capacity).unwrap_or(0));
    opened
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(InputError::Endless { file, what, limit });
    }
    String::from_utf8(bytes).map_err(|error| InputError::NotUtf8 { file, error })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("tep-input-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_file_up_to_the_bound_is_read_and_one_past_it_refused_from_its_size() {
        let dir = scratch("size");
        let path = dir.join("r.json");
        std::fs::write(&path, "x".repeat(100)).unwrap();
        assert_eq!(read_bounded(&path, "run report", 100).unwrap().len(), 100);
        let e = read_bounded(&path, "run report", 99).unwrap_err();
        assert!(matches!(e, InputError::TooLong { bytes: 100, .. }), "{e}");
        assert!(e.to_string().contains("r.json"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_device_that_never_ends_is_refused_at_the_bound() {
        let e = read_bounded(Path::new("/dev/zero"), "run report", 1 << 20).unwrap_err();
        assert!(matches!(e, InputError::Endless { .. }), "{e}");
        assert!(e.to_string().contains("/dev/zero"), "{e}");
    }

    #[test]
    fn a_directory_is_refused_by_name() {
        let dir = scratch("dir");
        let e = read_bounded(&dir, "baseline", 10).unwrap_err();
        assert!(e.to_string().contains("is a directory"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
