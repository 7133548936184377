//! # tep-model
//!
//! The spec's data: what a trace **is**. No runtime, no I/O: serde types and pure functions
//! that the reference pipeline writes and the checker reads.
//!
//! - [`graph`]: the spec's flowchart as typed data (nodes, labeled and dotted edges, kinds,
//!   phases) with a small query API, a Mermaid printer and reader. The single source of truth.
//! - [`identity`]: call ids and the identity a stage records.
//! - [`result`], [`session`]: tool results and session events, in the shapes of the reference
//!   semantics.
//! - [`trace`]: trace records (stage observations, session events, marks) and their reader.
//! - [`vocabulary`]: the names the docs may use.
//! - [`suggest`]: "did you mean" for mistyped names.
//! - [`strict_json`]: JSON read with a key named twice refused (reports, session logs).
//!
//! Architecture invariant: this crate depends on serde, serde_json, schemars, thiserror and
//! strsim (a string distance) only
//! (no tokio, no files, no processes, no threads); everything else may depend on it.

pub mod graph;
pub mod identity;
pub mod result;
pub mod session;
pub mod strict_json;
pub mod suggest;
pub mod trace;
pub mod vocabulary;

/// The name of the reserved Code Mode transport.
pub const RUN_CODE: &str = "run_code";
