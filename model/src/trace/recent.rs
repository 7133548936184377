//! The identities and results each thread read last, which the single-pass reader shares
//! ([`super::single_pass`]): a call's stages repeat its identity, and its later stages its
//! result, byte for byte.

use std::cell::RefCell;
use std::sync::Arc;

use crate::identity::Identity;
use crate::result::ToolResult;

thread_local! {
    /// The identities this thread read last, by their text: the stages of a call repeat its
    /// identity, and reading it again would build the same value. (Call ids are not shared
    /// so: an `Arc<str>`'s atomic counts cost more than copying a short id, measured.)
    pub(super) static RECENT_IDENTITIES: RefCell<Recent<Identity>> =
        const { RefCell::new(Recent::new()) };
    /// The results this thread read last, by their text: `post`, `finalize` and `final` (and
    /// an `around` that saw the result) usually record one result.
    pub(super) static RECENT_RESULTS: RefCell<Recent<ToolResult>> =
        const { RefCell::new(Recent::new()) };
}

/// How many values a [`Recent`] keeps: enough for the calls of a batch whose stages
/// interleave, few enough that a miss costs little.
const RECENT: usize = 4;

/// A value whose text is longer is not remembered: a thread-local copy of a 16 MiB identity
/// (its text and its parsed value, about 40 times the text) would outlive the trace on every
/// parsing thread; measured, 8 such lines took `tep check -j 8` to 4.7 GB. Below this, sharing
/// saves the time it was made for (an identity or a result is usually under 200 bytes).
pub(super) const MAX_REMEMBERED_BYTES: usize = 4096;

/// The last [`RECENT`] values read, each with its text.
pub(super) struct Recent<T> {
    entries: [(String, Option<Arc<T>>); RECENT],
    next: usize,
}

impl<T> Recent<T> {
    const fn new() -> Self {
        Recent {
            entries: [const { (String::new(), None) }; RECENT],
            next: 0,
        }
    }

    /// The value whose text `rest` starts with, and the text's length. A text is one whole
    /// JSON value (an object or an array), which ends where it ends whatever follows it, so a
    /// line that starts with it holds that value. The latest first: the stages of one call
    /// follow each other, and texts share their first bytes (`{"token":"tok-`), so each miss
    /// costs a comparison.
    pub(super) fn find(&self, rest: &[u8]) -> Option<(usize, Arc<T>)> {
        (1..=RECENT).find_map(|back| {
            let (text, value) = &self.entries[(self.next + RECENT - back) % RECENT];
            let value = value.as_ref()?;
            rest.starts_with(text.as_bytes())
                .then(|| (text.len(), Arc::clone(value)))
        })
    }

    pub(super) fn remember(&mut self, text: &str, value: &Arc<T>) {
        let (kept, slot) = &mut self.entries[self.next];
        kept.clear();
        kept.push_str(text);
        *slot = Some(Arc::clone(value));
        self.next = (self.next + 1) % RECENT;
    }
}
