//! Checks a JSON Lines trace file as `tep check FILE` does, in process: the options come from
//! the trace's header, the verdict from tep-check.
//!
//! `cargo run -p tep-check --example check_trace -- check/examples/denied-call-whose-body-ran.jsonl`

use std::fs::File;
use std::io::BufReader;
use std::process::ExitCode;

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
    match tep_check::check(BufReader::new(file)) {
        Ok(report) => {
            for violation in &report.violations {
                println!("{path}: {violation}");
            }
            let verdict = report.verdict(false);
            println!("{path}: {} records, {verdict}", report.records);
            if verdict.passes() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("{path}: {e}");
            ExitCode::from(2)
        }
    }
}
