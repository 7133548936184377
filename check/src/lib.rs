//! # tep-check
//!
//! The trace checker for tool execution pipelines, as a library: a harness written in Rust checks
//! the traces it records in its own tests, in process, and gets the same verdict `tep check`
//! gives.
//!
//! ```
//! use tep_check::{InvariantId, Verdict};
//!
//! // A trace a harness recorded: pre-execute denied the call, and its body ran anyway.
//! let trace = include_str!("../examples/denied-call-whose-body-ran.jsonl");
//! let report = tep_check::check(trace.as_bytes())?;
//! assert_eq!(report.verdict(false), Verdict::Violated);
//! let violation = &report.violations[0];
//! assert_eq!(violation.invariant, InvariantId::DenySkipsBody);
//! assert_eq!(violation.lines, [7, 5]); // the body's `around`, then the denying `pre`
//! println!("{violation}");
//! # Ok::<(), tep_check::TraceError>(())
//! ```
//!
//! - [`check`] reads a JSON Lines trace and checks it with the options its header gives
//!   ([`CheckOptions::from_header`]); [`TraceCheck`] does the same record by record, and
//!   [`Checker`] with options of your own.
//! - [`CheckReport::verdict`] decides pass or fail, once, for every caller: a MUST violation
//!   fails, a SHOULD one warns unless strict, a trace without a batch checked nothing.
//! - [`CATALOG`] and [`invariant`]: every documented invariant as data (id, level, statement,
//!   sources, revisions, capability, observation level); [`observation`]: which records each
//!   observation level holds; [`checkability`]: what each level can catch.
//! - [`deepseek_harness`]: deepseek-harness's own session log read as a trace at level `events`.
//!
//! `examples/check_trace.rs` is the same as a program: `cargo run -p tep-check --example
//! check_trace -- FILE`. With the feature `testing`, `mutation` and `teeth` plant a breach
//! of each invariant in a valid trace (the checker's teeth), for test suites.
//!
//! Architecture invariant: this crate depends on `tep-model` and a few data crates only. No
//! tokio, no `tep-reference`, no processes, no files; threads only in the parallel reader.

#![warn(missing_docs)]

use std::io::BufRead;

mod catalog;
pub mod checkability;
mod checker;
pub mod deepseek_harness;
mod facts;
pub mod invariants;
#[cfg(any(test, feature = "testing"))]
pub mod mutation;
pub mod observation;
pub(crate) mod rules;
#[cfg(any(test, feature = "testing"))]
pub mod shapes;
mod stream;
#[cfg(any(test, feature = "testing"))]
pub mod teeth;
mod trace_io;
mod verdict;
mod work_queue;

pub use catalog::{CATALOG, invariant};
#[cfg(any(test, feature = "testing"))]
pub use checker::scanned;
pub use checker::{
    CheckReport, Checker, MAX_MESSAGE_BYTES, MAX_STEPS, MAX_VIOLATIONS, StepRecord, TraceError,
    Violation, check_records, cut_message, required_fields,
};
pub use facts::{CheckOptions, InvariantStatus, ScenarioFacts};
pub use invariants::{Invariant, InvariantId, Level};
pub use stream::{OptionsFor, TraceCheck};
#[cfg(any(test, feature = "testing"))]
pub use trace_io::{MAX_IN_FLIGHT_BYTES, repeat_batches};
pub use trace_io::{
    MAX_LINE_BYTES, check_reader, check_reader_parallel, for_each_record, for_each_record_parallel,
    parse_record, parsing_workers, read_records,
};
pub use verdict::{Checkable, Verdict};

// The model's types an embedder needs, so that it depends on this crate alone.
pub use tep_model::graph::{EdgeId, GraphKind, NodeId, Revision};
pub use tep_model::identity::CallId;
pub use tep_model::trace::{Capability, ObservationLevel, TraceHeader, TraceRecord};

/// What `tep check` says of a trace: read as JSON Lines and checked in one pass with the options
/// its header gives ([`CheckOptions::from_header`]: else rev2, every part, level `hooks`).
/// Memory is bounded by the open batch. [`CheckReport::verdict`] says whether it passes.
pub fn check(reader: impl BufRead) -> Result<CheckReport, TraceError> {
    TraceCheck::default().read(reader).map(|(_, report)| report)
}
