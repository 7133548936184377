//! # tep-check
//!
//! The trace checker for tool execution pipelines, as a library: a harness written in Rust can
//! check the traces it records in its own tests, in process.
//!
//! - [`invariants`], [`rules`] and [`catalog`]: every documented invariant as data (id, level,
//!   statement, sources, revisions, capability, observation level, the records it reads) beside
//!   its check.
//! - [`facts`]: what the core knows of a trace and every rule reads (options, batch, walk).
//! - [`observation`]: the observation contract (which records each level holds, their windows).
//! - [`checker`] and [`trace_io`]: one streaming pass over a JSON Lines trace, every violation
//!   with its witness lines; reading on worker threads for long traces.
//! - [`deepseek_harness`]: deepseek-harness's own session log read as a trace at level `events`
//!   (a converter over lines, every record keeping its original line).
//! - [`mutation`]: planting a breach of each invariant in a valid trace (the checker's teeth),
//!   each written beside its rule.
//!
//! ```
//! use tep_check::checker::CheckOptions;
//! use tep_check::invariants::InvariantId;
//! use tep_check::trace_io::check_reader;
//! use tep_model::graph::Revision;
//!
//! // A trace a harness recorded: pre-execute denied the call, and its body ran anyway.
//! let trace = include_str!("../examples/denied-call-whose-body-ran.jsonl");
//! let report = check_reader(&CheckOptions::new(Revision::Rev2), trace.as_bytes())?;
//! let violation = &report.violations[0];
//! assert_eq!(violation.invariant, InvariantId::DenySkipsBody);
//! assert_eq!(violation.lines, [7, 5]); // the body's `around`, then the denying `pre`
//! println!("{violation}");
//! # Ok::<(), tep_check::checker::TraceError>(())
//! ```
//!
//! `examples/check_trace.rs` is the same as a program: `cargo run -p tep-check --example
//! check_trace -- FILE`.
//!
//! Architecture invariant: this crate depends on `tep-model` and a few data crates only. No
//! tokio, no `tep-reference`, no processes, no files; threads only in the parallel reader.

pub mod catalog;
pub mod checkability;
pub mod checker;
pub mod deepseek_harness;
pub mod facts;
pub mod invariants;
pub mod mutation;
pub mod observation;
pub mod rules;
pub mod teeth;
pub mod trace_io;
