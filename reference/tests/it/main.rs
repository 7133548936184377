//! The reference pipeline's integration tests, one binary (ripgrep's `tests/it` shape):
//!
//! - `pipeline`: one test per documented behaviour of the pipeline;
//! - `pipeline_props`: random scripts of every extension point keep the documented guarantees
//!   (its recorded failures are `tests/proptest-regressions/pipeline_props.txt`, where proptest
//!   looks for a module of this binary);
//! - `code_mode`: `run_code` and the sub-calls of its program;
//! - `retry_bounded`: the retry wrapper stops after its maximum of attempts;
//! - `graph_matches_spec`: the stage graphs reproduce the spec's flowcharts;
//! - `support`: the test tools and the helpers they share.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod code_mode;
mod graph_matches_spec;
mod pipeline;
mod pipeline_props;
mod retry_bounded;
mod support;
