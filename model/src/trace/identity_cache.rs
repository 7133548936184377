//! The identities each thread read last, which the single-pass reader shares
//! ([`super::single_pass`]): a call's stages repeat its identity byte for byte.

use std::cell::RefCell;
use std::sync::Arc;

use crate::identity::Identity;

thread_local! {
    /// The identities this thread read last, by their text: the stages of a call repeat its
    /// identity, and reading it again would build the same value. (Call ids are not shared
    /// so: an `Arc<str>`'s atomic counts cost more than copying a short id, measured.)
    pub(super) static RECENT_IDENTITIES: RefCell<RecentIdentities> =
        const { RefCell::new(RecentIdentities::new()) };
}

/// How many identities [`RECENT_IDENTITIES`] keeps: enough for the calls of a batch whose
/// stages interleave, few enough that a miss costs little.
const RECENT: usize = 4;

/// An identity whose text is longer is not remembered: a thread-local copy of a 16 MiB
/// identity (its text and its parsed value, about 40 times the text) would outlive the trace
/// on every parsing thread; measured, 8 such lines took `tep check -j 8` to 4.7 GB. Below
/// this, sharing saves the time it was made for (an identity is usually under 200 bytes).
pub(super) const MAX_REMEMBERED_BYTES: usize = 4096;

/// The last [`RECENT`] identities read, each with its text.
pub(super) struct RecentIdentities {
    entries: [(String, Option<Arc<Identity>>); RECENT],
    next: usize,
}

impl RecentIdentities {
    const fn new() -> Self {
        RecentIdentities {
            entries: [const { (String::new(), None) }; RECENT],
            next: 0,
        }
    }

    /// The identity whose text `rest` starts with, and the text's length. A text is one whole
    /// JSON value (an object or an array), which ends where it ends whatever follows it, so a
    /// line that starts with it holds that value. The latest first: the stages of one call
    /// follow each other, and texts share their first bytes (`{"token":"tok-`), so each miss
    /// costs a comparison.
    pub(super) fn find(&self, rest: &[u8]) -> Option<(usize, Arc<Identity>)> {
        (1..=RECENT).find_map(|back| {
            let (text, identity) = &self.entries[(self.next + RECENT - back) % RECENT];
            let identity = identity.as_ref()?;
            rest.starts_with(text.as_bytes())
                .then(|| (text.len(), Arc::clone(identity)))
        })
    }

    pub(super) fn remember(&mut self, text: &str, identity: &Arc<Identity>) {
        let (kept, slot) = &mut self.entries[self.next];
        kept.clear();
        kept.push_str(text);
        *slot = Some(Arc::clone(identity));
        self.next = (self.next + 1) % RECENT;
    }
}
