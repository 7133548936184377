//! The fuzzer inside `cargo test`: a bounded run of each target from a fixed seed, the saved
//! inputs of past findings replayed, and the driver's own promise (a panic is caught, reported
//! and its input saved).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::OnceLock;

use tep_fuzz::Target;
use tep_fuzz::driver::{Budget, Report, fuzz, fuzz_with, run_case};
use tep_fuzz::seeds::{SeedSet, Seeds};

fn seeds() -> &'static Seeds {
    static SEEDS: OnceLock<Seeds> = OnceLock::new();
    SEEDS.get_or_init(|| Seeds::record(SeedSet::Small))
}

/// A short run: a few seconds in a debug build (cases are counted, not timed).
fn bounded(target: Target, cases: u64) -> Report {
    let dir = std::env::temp_dir().join(format!("tep-fuzz-test-{}", std::process::id()));
    let report = fuzz(
        target,
        seeds().of(target),
        Budget {
            cases: Some(cases),
            time: None,
        },
        14,
        Some(&dir),
        |_| {},
    );
    assert_eq!(report.cases, cases);
    assert!(
        report.findings.is_empty(),
        "{target}: {:#?}",
        report.findings
    );
    report
}

#[test]
fn the_trace_reader_and_checker_survive_a_bounded_run() {
    let report = bounded(Target::Trace, 1500);
    assert!(report.outcomes > 50, "mutation reaches many outcomes");
}

#[test]
fn the_scenario_decoder_survives_a_bounded_run() {
    bounded(Target::Scenario, 3000);
}

#[test]
fn the_protocol_readers_survive_a_bounded_run() {
    bounded(Target::Protocol, 500);
}

#[test]
fn saved_findings_stay_fixed() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("regressions");
    for target in Target::ALL {
        let Ok(entries) = std::fs::read_dir(dir.join(target.as_str())) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            let input = std::fs::read(&path).unwrap();
            if let Err(message) = run_case(target, &input) {
                panic!("{}: {message}", path.display());
            }
        }
    }
}

#[test]
fn a_panic_is_caught_reported_and_its_input_saved() {
    let dir = std::env::temp_dir().join(format!("tep-fuzz-driver-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let seeds = vec![b"{\"kind\":\"stage\"}\n".to_vec()];
    let report = fuzz_with(
        "demo",
        |input: &[u8]| {
            if input.contains(&b'}') && input.len() > 20 {
                panic!("too long: {}", input.len());
            }
            Ok(String::from_utf8_lossy(input).into_owned())
        },
        &seeds,
        Budget {
            cases: Some(500),
            time: None,
        },
        3,
        Some(&dir),
        |_| {},
    );
    assert_eq!(report.cases, 500, "the run goes on after a panic");
    let finding = report.findings.first().expect("the panic is found");
    assert!(finding.message.contains("too long"), "{}", finding.message);
    assert!(
        finding.message.contains("fuzz/tests/fuzz.rs"),
        "{}",
        finding.message
    );
    let saved = finding.saved.as_ref().unwrap();
    let input = std::fs::read(saved).unwrap();
    assert!(
        input.contains(&b'}') && input.len() > 20,
        "the saved input is the one that panicked"
    );
    assert!(
        saved
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("demo-")
    );
}
