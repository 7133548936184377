//! `tep-fuzz`: fuzz one target or all of them for a while (`cargo xtask fuzz` runs it in a
//! release build), or replay saved inputs.
//!
//! Exit codes: 0 nothing found, 1 a panic or a broken property (the inputs are saved), 2 usage.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use tep_fuzz::Target;
use tep_fuzz::driver::{Budget, MAX_CHECKER_GROWTH, PROBE_RECORDS, fuzz, run_case};
use tep_fuzz::seeds::{SeedSet, Seeds};

/// Structure-aware mutation fuzzing of tep's readers.
#[derive(Debug, Parser)]
#[command(name = "tep-fuzz")]
struct Cli {
    /// The target (default: all three, one after the other, each for the whole time).
    #[arg(long, value_parser = |s: &str| s.parse::<Target>())]
    target: Option<Target>,
    /// Minutes per target.
    #[arg(long, default_value_t = 1.0)]
    minutes: f64,
    /// Stop a target after this many cases instead (or first).
    #[arg(long)]
    cases: Option<u64>,
    /// The random seed (default: from the clock; printed, to repeat a run).
    #[arg(long)]
    seed: Option<u64>,
    /// Where failing inputs are saved.
    #[arg(long, default_value = "target/fuzz/findings")]
    out: PathBuf,
    /// Run these saved inputs once each (with --target) instead of fuzzing.
    #[arg(long, num_args = 1.., value_name = "FILE")]
    replay: Vec<PathBuf>,
    /// Write the seeds of --target (one file each) into DIR instead of fuzzing (for AFL++).
    #[arg(long, value_name = "DIR")]
    export_seeds: Option<PathBuf>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if !cli.replay.is_empty() {
        return replay(&cli);
    }
    if let Some(dir) = &cli.export_seeds {
        return export_seeds(cli.target, dir);
    }
    if !(cli.minutes.is_finite() && cli.minutes > 0.0 && cli.minutes <= 7.0 * 24.0 * 60.0) {
        eprintln!("error: --minutes must be a positive number of minutes (at most a week)");
        return ExitCode::from(2);
    }
    let seed = cli.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });
    let budget = Budget {
        cases: cli.cases,
        time: Some(Duration::from_secs_f64(cli.minutes * 60.0)),
    };
    println!("recording seeds (reference and mutant traces, corpus, protocol exchanges)...");
    let seeds = Seeds::record(SeedSet::Full);
    let targets = cli.target.map_or(Target::ALL.to_vec(), |t| vec![t]);
    let mut found = 0;
    for target in targets {
        println!(
            "fuzzing {target} from {} seeds, seed {seed}, for {} min",
            seeds.of(target).len(),
            cli.minutes
        );
        let report = fuzz(
            target,
            seeds.of(target),
            budget,
            seed,
            Some(&cli.out),
            |r| {
                println!(
                    "  {target}: {} cases in {:.0} s ({:.0}/s), {} outcomes, {} findings",
                    r.cases,
                    r.elapsed.as_secs_f64(),
                    r.cases_per_second(),
                    r.outcomes,
                    r.findings.len()
                );
            },
        );
        println!(
            "{target}: {} cases in {:.1} s ({:.0} cases/s), {} distinct outcomes, slowest case {:.0} ms, {} findings",
            report.cases,
            report.elapsed.as_secs_f64(),
            report.cases_per_second(),
            report.outcomes,
            report.slowest.as_secs_f64() * 1000.0,
            report.findings.len()
        );
        if let Some((growth, fed)) = report.memory_growth {
            println!(
                "{target}: checker memory grew at most {} KiB over {fed} records of a repeated input (limit {} MiB, {PROBE_RECORDS} records per probe)",
                growth / 1024,
                MAX_CHECKER_GROWTH / (1024 * 1024)
            );
        }
        for f in &report.findings {
            match &f.saved {
                Some(path) => println!(
                    "FOUND {target}: {}\n  input saved to {}",
                    f.message,
                    path.display()
                ),
                None => println!(
                    "FOUND {target}: {} (the input could not be saved)",
                    f.message
                ),
            }
        }
        found += report.findings.len();
    }
    if found > 0 {
        println!("{found} finding(s); replay one with: tep-fuzz --target <target> --replay <file>");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

fn export_seeds(target: Option<Target>, dir: &std::path::Path) -> ExitCode {
    let Some(target) = target else {
        eprintln!("error: --export-seeds needs --target");
        return ExitCode::from(2);
    };
    let seeds = Seeds::record(SeedSet::Small);
    let written = std::fs::create_dir_all(dir).and_then(|()| {
        for (i, seed) in seeds.of(target).iter().enumerate() {
            std::fs::write(dir.join(format!("{target}-{i:04}")), seed)?;
        }
        Ok(())
    });
    match written {
        Ok(()) => {
            println!(
                "wrote {} {target} seeds to {}",
                seeds.of(target).len(),
                dir.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: cannot write to {}: {e}", dir.display());
            ExitCode::from(2)
        }
    }
}

fn replay(cli: &Cli) -> ExitCode {
    let Some(target) = cli.target else {
        eprintln!("error: --replay needs --target");
        return ExitCode::from(2);
    };
    let mut failed = false;
    for path in &cli.replay {
        let input = match std::fs::read(path) {
            Ok(input) => input,
            Err(e) => {
                eprintln!("error: cannot read {}: {e}", path.display());
                return ExitCode::from(2);
            }
        };
        match run_case(target, &input) {
            Ok(outcome) => println!("{}: ok ({outcome})", path.display()),
            Err(message) => {
                failed = true;
                println!("{}: FAILED: {message}", path.display());
            }
        }
    }
    ExitCode::from(u8::from(failed))
}
