//! The conformance crate's integration tests, one binary (ripgrep's `tests/it` shape): the
//! suite on the reference and its mutants.
//!
//! - `corpus`: the corpus passes on the reference, covers every edge, and catches every mutant;
//! - `traces`: every scenario's reference trace and facts, snapshotted in `tests/snapshots`
//!   (where `check/tests/it` reads them);
//! - `checker_props`: random scenarios' traces are accepted, their mutations rejected (its
//!   recorded failures are `tests/proptest-regressions/checker_props.txt`, where proptest looks
//!   for a module of this binary);
//! - `reference_checked`, `sub_call_ids`: the checker and drive mode's judgement on traces only
//!   the reference can make;
//! - `fuzz`: generative conformance, the oracle and shrinking;
//! - `versions`: nothing newer than an adapter's protocol is sent;
//! - `limits`: the scenario limits and the answer limit agree;
//! - `build_script`: `build.rs` embeds the corpus or fails the build;
//! - `common`: what the tests that run the reference share.
//!
//! The checkability measurement (`tests/checkability.rs`) is a binary of its own: it needs the
//! crate's `checkability` feature and rewrites a generated table.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod build_script;
mod checker_props;
mod common;
mod corpus;
mod fuzz;
mod limits;
mod reference_checked;
mod sub_call_ids;
mod traces;
mod versions;
