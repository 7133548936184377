//! # tep-conformance
//!
//! The conformance suite for tool execution pipelines.
//!
//! - [`invariants`] and [`rules`]: every documented invariant as data (id, level, statement,
//!   sources, revisions, capability, observation level, the records it reads) beside its check.
//! - [`observation`]: the observation contract (which records each level holds, their windows).
//! - [`checker`] and [`trace_io`]: replay mode. One streaming pass over a JSON Lines trace,
//!   every violation with its witness lines.
//! - [`scenario`]: the language-neutral corpus (`conformance/scenarios/*.json`, embedded);
//!   [`limits`]: how big a scenario may be.
//! - [`scripted`]: the built-in implementation (the reference with a scenario's scripts).
//! - [`protocol`], [`adapter`], [`serve`]: drive mode against any implementation over
//!   newline-delimited JSON on stdin/stdout.
//! - [`select`], [`runner`], [`baseline`], [`report`], [`progress`]: choosing scenarios, running
//!   them (in parallel, interruptibly), judging traces, expected-failure baselines,
//!   terminal/JSON/JUnit reports, live output; [`html`]: the HTML report, the run drawn on
//!   the docs' pictures of the graphs; [`suite`]: the version and corpus hash.
//! - [`mutation`]: trace mutations that prove the checker has teeth.
//! - [`generate`]: synthetic traces (the corpus mix, wide batches, long Code Mode programs, many
//!   contexts) for the benches and load tests.

pub mod adapter;
pub mod baseline;
pub mod expectations;
pub mod fuzz;
pub mod generate;
pub mod html;
pub mod mutants;
pub mod protocol;
pub mod report;
pub mod runner;
pub mod scenario;
pub mod scripted;
pub mod select;
pub mod serve;
pub mod suite;

/// How big a scenario may be: part of reading one.
pub use scenario::limits;

// The checker is `tep-check`'s; these paths stay for the suite's users.
pub use tep_check::{catalog, checker, invariants, mutation, observation, rules, trace_io};
