//! # tep-fuzz
//!
//! Structure-aware mutation fuzzing of what `tep` reads from the outside, through its public
//! entry points only:
//!
//! - [`Target::Trace`]: the trace reader and the streaming checker
//!   (`trace_io::{for_each_record, check_reader, parse_record}`, `checker::Checker`);
//! - [`Target::Scenario`]: the scenario decoder (`Scenario::from_json`) and running what it
//!   accepts on the reference (`scripted::run_reference`);
//! - [`Target::Protocol`]: requests as `tep reference-adapter` reads them (`serve`) and answers as
//!   `tep run` reads them (`protocol::{RunAnswer, Ready}`, then `checker::check_records`).
//!
//! [`seeds`] records the reference's traces (and the mutants'), the corpus and protocol
//! exchanges; [`mutate`] changes bytes, lines and JSON values (with a dictionary harvested from
//! the seeds); [`targets`] states the properties; [`driver`] runs cases under `catch_unwind`,
//! keeps inputs that reach a new outcome, and saves every failing input to a file.
//!
//! It runs briefly inside `cargo test` (a bounded number of cases) and for as long as asked with
//! `cargo xtask fuzz --minutes N [--target trace|scenario|protocol]`.

pub mod driver;
pub mod mutate;
pub mod seeds;
pub mod targets;

use std::fmt;
use std::str::FromStr;

/// What is fuzzed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Trace,
    Scenario,
    Protocol,
}

impl Target {
    pub const ALL: [Target; 3] = [Target::Trace, Target::Scenario, Target::Protocol];

    pub fn as_str(self) -> &'static str {
        match self {
            Target::Trace => "trace",
            Target::Scenario => "scenario",
            Target::Protocol => "protocol",
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Target {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Target::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| format!("unknown target `{s}` (one of: trace, scenario, protocol)"))
    }
}
