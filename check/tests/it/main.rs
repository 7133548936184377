//! tep-check's integration tests, one binary (ripgrep's `tests/it` shape): the checker on the
//! corpus traces the reference records, each one with one thing done wrong or left out.
//!
//! - `claims`: how a fault is reported (once, under its id, at its line, in words);
//! - `named`: the guarantees once held only by an expected outcome or the walk, under their
//!   own names, and silent where the premise is not seen;
//! - `next_request`: the model's next request (level `boundary`), with its breaches;
//! - `observation`: the observation contract (only what an implementation can observe);
//! - `revisions`: the two revisions differ where the spec does, and only there;
//! - `streaming`: state bounded by the open batch, work per record bounded, the caps, on the
//!   synthetic traces of `tep_check::shapes` (a wide batch, a long program, many contexts);
//! - `steps`: the walk's steps, kept on request;
//!
//! The tests that need the reference itself (its mutants, random scenarios run on it) are the
//! conformance crate's (`conformance/tests/it/{corpus,checker_props,reference_checked}.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod claims;
mod named;
mod next_request;
mod observation;
mod revisions;
mod steps;
mod streaming;
mod util;
