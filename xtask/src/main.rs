//! `cargo xtask`: maintainer tasks (see `xtask/src/lib.rs`).
//!
//! Exit codes: 0 done (or fresh), 1 stale docs, unknown names in prose, a spec clause list that
//! does not hold (`spec/clauses.toml`) or a fuzzing finding,
//! 2 could not run (or a package did not build).

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use xtask::docs::{self, DocsError};

#[derive(Debug, Parser)]
#[command(
    name = "cargo xtask",
    about = "Maintainer tasks for the tool execution pipeline toolkit"
)]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Debug, Subcommand)]
enum Task {
    /// Regenerate docs/ from the definitions.
    Docs {
        /// Write nothing; fail (exit 1) if a committed file differs from what would be generated.
        #[arg(long)]
        check: bool,
        /// The repository to work on (default: this one).
        #[arg(long, value_name = "DIR")]
        root: Option<std::path::PathBuf>,
    },
    /// Build the packages into target/dist/: the Python wheel (tep and the Python kit, via
    /// maturin) and the TypeScript kit's npm tarball.
    Dist {
        /// The cargo profile of the wheel's tep binary (CI uses dev, to reuse its debug build).
        #[arg(long, default_value = "release")]
        profile: String,
        /// Where the packages go (default: target/dist under the repository).
        #[arg(long, value_name = "DIR")]
        out: Option<std::path::PathBuf>,
    },
    /// Fuzz tep's readers (the `tep-fuzz` crate, built in release) for a while.
    Fuzz {
        /// Minutes per target.
        #[arg(long, default_value_t = 1.0)]
        minutes: f64,
        /// trace, scenario or protocol (default: each in turn).
        #[arg(long)]
        target: Option<String>,
        /// The random seed (default: from the clock).
        #[arg(long)]
        seed: Option<u64>,
        /// Build in the dev profile instead of release (quicker to build, slower to run).
        #[arg(long)]
        dev: bool,
    },
}

fn main() -> ExitCode {
    match Cli::parse().task {
        Task::Docs { check, root } => docs_task(check, root),
        Task::Dist { profile, out } => dist_task(profile, out),
        Task::Fuzz {
            minutes,
            target,
            seed,
            dev,
        } => fuzz_task(minutes, target, seed, dev),
    }
}

/// Runs `cargo run -p tep-fuzz` with the same cargo, from the repository root (so findings go
/// to target/fuzz/findings).
fn fuzz_task(minutes: f64, target: Option<String>, seed: Option<u64>, dev: bool) -> ExitCode {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = std::process::Command::new(cargo);
    command
        .current_dir(xtask::repo_root())
        .args(["run", "--quiet"]);
    if !dev {
        command.arg("--release");
    }
    command.args([
        "--package",
        "tep-fuzz",
        "--bin",
        "tep-fuzz",
        "--",
        "--minutes",
        &minutes.to_string(),
    ]);
    if let Some(target) = target {
        command.args(["--target", &target]);
    }
    if let Some(seed) = seed {
        command.args(["--seed", &seed.to_string()]);
    }
    match command.status() {
        Ok(status) => ExitCode::from(status.code().map_or(2, |c| u8::try_from(c).unwrap_or(2))),
        Err(e) => {
            eprintln!("error: cannot run cargo: {e}");
            ExitCode::from(2)
        }
    }
}

fn dist_task(profile: String, out: Option<std::path::PathBuf>) -> ExitCode {
    let root = xtask::repo_root();
    let out = out.unwrap_or_else(|| root.join("target").join("dist"));
    let options = xtask::dist::DistOptions { root, out, profile };
    match xtask::dist::build(&options) {
        Ok(packages) => {
            for path in &packages {
                println!("built {}", path.display());
            }
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::from(2)
        }
    }
}

fn docs_task(check: bool, root: Option<std::path::PathBuf>) -> ExitCode {
    let root = root.unwrap_or_else(xtask::repo_root);
    let generated = match docs::generate(&root) {
        Ok(g) => g,
        Err(err @ (DocsError::UnknownNames(_) | DocsError::Coverage(_))) => {
            eprintln!("error: {err}");
            return ExitCode::from(1);
        }
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::from(2);
        }
    };
    if check {
        let stale = docs::stale(&root, &generated);
        if stale.is_empty() {
            println!("docs are fresh ({} generated files)", generated.len());
            return ExitCode::SUCCESS;
        }
        for s in &stale {
            eprintln!("stale: {}\n{}", s.path.display(), s.diff);
        }
        eprintln!(
            "{} generated file(s) differ from what the definitions produce; run `cargo xtask docs` and commit the result",
            stale.len()
        );
        return ExitCode::from(1);
    }
    match docs::write(&root, &generated) {
        Ok(written) => {
            for path in &written {
                println!("updated {}", path.display());
            }
            println!(
                "{} of {} generated files changed",
                written.len(),
                generated.len()
            );
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::from(2)
        }
    }
}
