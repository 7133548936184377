//! An in-memory filesystem with versions, and the read-before-edit gate below the fs tools.
//!
//! Tool bodies reach files only through [`crate::pipeline::ToolContext`]: reads record an
//! `fs/observed` event, mutations pass the `fs/write-intent` / `fs/edit-intent` gate. The gate
//! refuses to touch an existing file the agent has not read, or that changed since it was read.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use tep_model::trace::FsIntentKind;

#[derive(Debug, Clone)]
struct File {
    content: String,
    version: u64,
}

#[derive(Debug, Default)]
struct FsState {
    files: BTreeMap<String, File>,
    /// The version of each file the agent last observed.
    observed: BTreeMap<String, u64>,
    next_version: u64,
}

/// The files a run works on.
#[derive(Debug, Default)]
pub struct VirtualFs {
    state: Mutex<FsState>,
}

/// The gate's refusal, as the body sees it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FsRefusal {
    #[error("{intent} refused: {target} has not been read")]
    NotRead {
        intent: &'static str,
        target: String,
    },
    #[error("{intent} refused: {target} changed since it was read")]
    ChangedSinceRead {
        intent: &'static str,
        target: String,
    },
    #[error("{intent} refused: {target} does not exist")]
    Missing {
        intent: &'static str,
        target: String,
    },
}

impl VirtualFs {
    pub fn new() -> Self {
        Self::default()
    }

    /// A filesystem holding `files` (path, content), none of them observed yet.
    pub fn with_files<'a>(files: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let fs = Self::new();
        for (path, content) in files {
            fs.put(path, content);
        }
        fs
    }

    fn lock(&self) -> MutexGuard<'_, FsState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes a file as another actor would: a new version the agent has not observed.
    pub fn put(&self, path: &str, content: &str) -> u64 {
        let mut s = self.lock();
        s.next_version += 1;
        let version = s.next_version;
        s.files.insert(
            path.to_owned(),
            File {
                content: content.to_owned(),
                version,
            },
        );
        version
    }

    /// The content and version of a file.
    pub fn get(&self, path: &str) -> Option<(String, u64)> {
        self.lock()
            .files
            .get(path)
            .map(|f| (f.content.clone(), f.version))
    }

    /// Every file and its content.
    pub fn snapshot(&self) -> BTreeMap<String, String> {
        self.lock()
            .files
            .iter()
            .map(|(k, f)| (k.clone(), f.content.clone()))
            .collect()
    }

    /// Reads a file for the agent and records the version it saw.
    pub(crate) fn observe(&self, path: &str) -> Option<(String, u64)> {
        let mut s = self.lock();
        let file = s.files.get(path).cloned()?;
        s.observed.insert(path.to_owned(), file.version);
        Some((file.content, file.version))
    }

    /// The file's current version, as the gate reports it.
    pub(crate) fn version(&self, path: &str) -> Option<u64> {
        self.lock().files.get(path).map(|f| f.version)
    }

    /// The read-before-edit rule. `enforce` is false only for the `edit-without-read` mutant.
    pub(crate) fn gate(
        &self,
        intent: FsIntentKind,
        path: &str,
        enforce: bool,
    ) -> Result<(), FsRefusal> {
        let s = self.lock();
        let name = intent.event_name();
        let current = s.files.get(path).map(|f| f.version);
        if !enforce {
            return Ok(());
        }
        match (intent, current, s.observed.get(path)) {
            (FsIntentKind::Edit, None, _) => Err(FsRefusal::Missing {
                intent: name,
                target: path.to_owned(),
            }),
            (_, None, _) => Ok(()),
            (_, Some(_), None) => Err(FsRefusal::NotRead {
                intent: name,
                target: path.to_owned(),
            }),
            (_, Some(v), Some(seen)) if *seen != v => Err(FsRefusal::ChangedSinceRead {
                intent: name,
                target: path.to_owned(),
            }),
            _ => Ok(()),
        }
    }

    /// Writes a file for the agent after the gate allowed it; the agent has observed the result.
    pub(crate) fn commit_write(&self, path: &str, content: &str) -> u64 {
        let version = self.put(path, content);
        self.lock().observed.insert(path.to_owned(), version);
        version
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_need_a_read_of_the_current_version() {
        let fs = VirtualFs::with_files([("a.txt", "one")]);
        assert!(matches!(
            fs.gate(FsIntentKind::Edit, "a.txt", true),
            Err(FsRefusal::NotRead { .. })
        ));
        fs.observe("a.txt");
        assert_eq!(fs.gate(FsIntentKind::Edit, "a.txt", true), Ok(()));
        fs.put("a.txt", "changed elsewhere");
        assert!(matches!(
            fs.gate(FsIntentKind::Edit, "a.txt", true),
            Err(FsRefusal::ChangedSinceRead { .. })
        ));
    }

    #[test]
    fn new_files_may_be_written_but_not_edited() {
        let fs = VirtualFs::new();
        assert_eq!(fs.gate(FsIntentKind::Write, "new.txt", true), Ok(()));
        assert!(matches!(
            fs.gate(FsIntentKind::Edit, "new.txt", true),
            Err(FsRefusal::Missing { .. })
        ));
        let v = fs.commit_write("new.txt", "x");
        assert_eq!(fs.version("new.txt"), Some(v));
        assert_eq!(fs.gate(FsIntentKind::Edit, "new.txt", true), Ok(()));
    }

    #[test]
    fn a_snapshot_holds_every_file_as_it_is_now() {
        let fs = VirtualFs::with_files([("a.txt", "one"), ("b.txt", "two")]);
        fs.put("a.txt", "changed");
        fs.commit_write("c.txt", "three");
        assert_eq!(
            fs.snapshot(),
            BTreeMap::from([
                ("a.txt".to_owned(), "changed".to_owned()),
                ("b.txt".to_owned(), "two".to_owned()),
                ("c.txt".to_owned(), "three".to_owned()),
            ])
        );
        assert_eq!(VirtualFs::new().snapshot(), BTreeMap::new());
    }
}
