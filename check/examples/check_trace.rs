//! Checks a JSON Lines trace file against rev2, as a harness's own test would, in process.
//!
//! `cargo run -p tep-check --example check_trace -- check/examples/denied-call-whose-body-ran.jsonl`

use std::fs::File;
use std::io::BufReader;
use std::process::ExitCode;

use tep_check::checker::CheckOptions;
use tep_check::trace_io::check_reader;
use tep_model::graph::Revision;

fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: check_trace FILE");
        return ExitCode::from(2);
    };
    let file = match File::open(&path) {
        Ok(file) => file,
        Err(e) => {
            eprintln!("{path}: {e}");
            return ExitCode::from(2);
        }
    };
    match check_reader(&CheckOptions::new(Revision::Rev2), BufReader::new(file)) {
        Ok(report) if report.violations.is_empty() => {
            println!("{path}: {} records, no violation", report.records);
            ExitCode::SUCCESS
        }
        Ok(report) => {
            for violation in &report.violations {
                println!("{path}: {violation}");
            }
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("{path}: {e}");
            ExitCode::from(2)
        }
    }
}
