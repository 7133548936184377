//! The `tep` binary's tests, one binary (ripgrep's `tests/it` shape): each starts `tep` as its
//! users do (`util::tep_command`) and holds what only the binary does: exit codes, files,
//! signals, adapters, terminals.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod check_cli;
mod cli;
mod from_log;
mod fuzz_cli;
mod fuzz_harness;
mod harness;
mod hostile;
mod inputs_outputs;
mod listing;
mod memory;
mod protocol_versions;
mod report_cli;
mod robustness;
mod run;
mod teeth;
mod util;
