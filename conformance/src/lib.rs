//! # tep-conformance
//!
//! The conformance suite for tool execution pipelines: the corpus, drive mode, reports and
//! fuzzing. The checker is `tep-check`'s: import it from there.
//!
//! - [`scenario`]: the language-neutral corpus (`conformance/scenarios/*.json`, embedded);
//!   [`limits`]: how big a scenario may be.
//! - [`scripted`]: the built-in implementation (the reference with a scenario's scripts).
//! - [`protocol`], [`adapter`], [`serve`]: drive mode against any implementation over
//!   newline-delimited JSON on stdin/stdout.
//! - [`select`], [`runner`], [`expectations`], [`baseline`], [`report`]: choosing scenarios,
//!   running them (in parallel, interruptibly), judging traces against the invariants and the
//!   scenario's expectations, expected-failure baselines, terminal/JSON/JUnit reports;
//!   [`html`]: the HTML report, the run drawn on the docs' pictures of the graphs; [`suite`]:
//!   the version and corpus hash; [`terminal`]: text an implementation controls, shown escaped.
//! - [`input`]: the one bounded reader of a whole JSON file (reports, baselines, scenario files).
//! - [`listing`]: the typed JSON of `tep check`, `tep scenarios list` and `tep invariants list`.
//! - [`mutants`]: what each mutant of the reference breaks.
//! - [`fuzz`]: random scenarios through an implementation, the first failure shrunk.
//! - [`generate`]: synthetic traces (the corpus mix, wide batches, long Code Mode programs, many
//!   contexts) for the benches and load tests.

pub mod adapter;
pub mod baseline;
#[cfg(feature = "checkability")]
pub mod checkability;
pub mod excerpt;
pub mod expectations;
pub mod fuzz;
pub mod fuzz_stats;
#[cfg(feature = "synthetic")]
pub mod generate;
pub mod html;
pub mod input;
pub mod listing;
pub mod mutants;
pub mod oracle;
pub mod outcome;
pub mod protocol;
pub mod redispatch;
pub mod report;
pub mod runner;
pub mod scenario;
pub mod scripted;
pub mod select;
pub mod serve;
pub mod suite;
pub mod terminal;

/// How big a scenario may be: part of reading one.
pub use scenario::limits;
