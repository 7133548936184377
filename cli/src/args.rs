//! Argument groups more than one command shares (clap `Args` and value enums).

use clap::{Args, ValueEnum};
use tep_check::invariants::InvariantId;
use tep_conformance::select::Selection;
use tep_model::trace::Capability;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

/// When to colour the terminal report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorWhen {
    /// On a terminal, unless NO_COLOR is set (or CLICOLOR=0; CLICOLOR_FORCE forces it).
    Auto,
    Always,
    Never,
}

/// Which scenarios: all unless filtered.
#[derive(Debug, Clone, Args)]
pub struct SelectArgs {
    /// Only scenarios whose id matches this glob (`deny-*`); repeatable, any may match.
    #[arg(long = "scenario", value_name = "GLOB")]
    pub scenarios: Vec<String>,
    /// Only scenarios that exercise this invariant; repeatable.
    #[arg(long = "invariant", value_name = "ID")]
    pub invariants: Vec<InvariantId>,
    /// Only scenarios that need this capability (approval, fs-gate, ...); repeatable.
    #[arg(long = "capability", value_name = "NAME")]
    pub capabilities: Vec<Capability>,
    /// Leave out scenarios whose id matches this glob; repeatable.
    #[arg(long = "exclude", value_name = "GLOB")]
    pub exclude: Vec<String>,
}

impl SelectArgs {
    pub fn selection(self) -> Selection {
        Selection {
            scenarios: self.scenarios,
            invariants: self.invariants,
            capabilities: self.capabilities,
            exclude: self.exclude,
        }
    }
}

impl ColorWhen {
    /// The writer's choice for this setting.
    pub fn choice(self) -> anstream::ColorChoice {
        match self {
            ColorWhen::Auto => anstream::ColorChoice::Auto,
            ColorWhen::Always => anstream::ColorChoice::Always,
            ColorWhen::Never => anstream::ColorChoice::Never,
        }
    }
}
