//! `cargo xtask`: maintainer tasks (see `xtask/src/lib.rs`).
//!
//! Exit codes: 0 done (or fresh), 1 stale docs or unknown names in prose, 2 could not run.

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
}

fn main() -> ExitCode {
    let Cli {
        task: Task::Docs { check, root },
    } = Cli::parse();
    let root = root.unwrap_or_else(xtask::repo_root);
    let generated = match docs::generate(&root) {
        Ok(g) => g,
        Err(err @ DocsError::UnknownNames(_)) => {
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
