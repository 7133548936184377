//! The catalog: every invariant's entry, gathered from the rules that check them.
//!
//! The entry types are [`crate::invariants`]'; each entry is written beside its rule
//! (`crate::rules`). This module joins the two, so neither needs the other.

use crate::invariants::{Invariant, InvariantId};

/// Every invariant, in the order the docs list them: each rule's own entry, written beside its
/// check.
pub const CATALOG: &[Invariant] = &crate::rules::CATALOG;

/// The catalog entry of `id`.
pub fn invariant(id: InvariantId) -> &'static Invariant {
    // Every id has an entry (`invariants::tests::catalog_is_complete_and_in_id_order`); the fallback is never taken.
    CATALOG
        .get(id as usize)
        .filter(|i| i.id == id)
        .unwrap_or(&CATALOG[0])
}
