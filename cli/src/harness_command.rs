//! `tep run --harness NAME`: the corpus through a shipped harness, driven through its public
//! interfaces (`tep_harness`); and the hidden commands the harness starts: `tep harness-mcp`
//! (the scenario's tools over MCP) and `tep harness-hook` (its hook command).

use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use tep_harness::driver::{HarnessDriver, HarnessOptions};
use tep_harness::profile::{HookDialect, Profile};

/// The options of `tep run` and `tep fuzz` that drive a harness.
#[derive(Debug, Clone, Args)]
pub struct HarnessArgs {
    /// Drive this harness through its public interfaces instead of an adapter: a built-in
    /// profile (deepseek-harness) or a profile file (docs/harness-profiles.md).
    #[arg(long, value_name = "NAME", conflicts_with_all = ["adapter", "mutant"])]
    pub harness: Option<String>,
    /// The harness's command (split like a shell would), instead of the profile's (found on PATH).
    #[arg(long, value_name = "CMD", requires = "harness")]
    pub harness_command: Option<String>,
    /// The installed harness has its Claude Code hook bridge (a source checkout): scenarios
    /// that script pre- and post-execute apply.
    #[arg(long, requires = "harness")]
    pub harness_hooks: bool,
    /// Seconds the harness may take to send its first model request.
    #[arg(long, value_name = "SECS", default_value = "20", value_parser = crate::parse_timeout, requires = "harness")]
    pub boot_timeout: Duration,
    /// Keep each scenario's run directory (home, workspace, overlay, the harness's log and
    /// tep's records, timeline.jsonl) and print where.
    #[arg(long, requires = "harness")]
    pub keep: bool,
}

/// One driver per job, for `args.harness`.
pub fn drivers(
    args: &HarnessArgs,
    name: &str,
    timeout: Duration,
    jobs: usize,
) -> Result<Vec<HarnessDriver>> {
    let profile = profile(args, name)?;
    let tep = std::env::current_exe().context("cannot find the tep binary itself")?;
    let mut options = HarnessOptions::new(profile, tep);
    options.timeout = timeout;
    options.boot_timeout = args.boot_timeout.min(timeout);
    options.keep = args.keep;
    if let Some(command) = &args.harness_command {
        let mut words = shlex::split(command)
            .filter(|w| !w.is_empty())
            .with_context(|| format!("--harness-command {command:?} is not a command"))?;
        // The harness starts in a fresh workspace of its own: a relative path to its program
        // means the directory tep was started in, as on a shell's command line.
        if let Some(program) = words.first_mut()
            && program.contains('/')
            && Path::new(program.as_str()).is_relative()
        {
            let here = std::env::current_dir().context("cannot read the current directory")?;
            *program = here.join(program.as_str()).display().to_string();
        }
        options.command = Some(words);
    }
    (0..jobs.max(1))
        .map(|_| HarnessDriver::new(options.clone()).context("cannot start a tokio runtime"))
        .collect()
}

/// The profile `name` names, as `args` adjust it (`--harness-hooks`).
pub fn profile(args: &HarnessArgs, name: &str) -> Result<Profile> {
    let mut profile = Profile::load(name)?;
    if args.harness_hooks {
        profile.hooks.dialect = HookDialect::ClaudeCode;
    }
    Ok(profile)
}

/// `tep harness-mcp RUN_DIR`: the scenario's tools, over stdio.
pub fn mcp(run: PathBuf) -> Result<u8> {
    let stdin = std::io::stdin();
    tep_harness::mcp::serve(&run, BufReader::new(stdin.lock()), std::io::stdout())
        .context("tep's MCP server stopped")?;
    Ok(0)
}

/// `tep harness-hook RUN_DIR`: one hook invocation.
pub fn hook(run: PathBuf) -> Result<u8> {
    let script = tep_harness::mcp::read_script(&run)?;
    let mut payload = String::new();
    std::io::stdin()
        .read_to_string(&mut payload)
        .context("cannot read the hook payload")?;
    let answer = tep_harness::hook::invoke(&run, &script, &payload);
    std::io::stdout().write_all(answer.stdout.as_bytes())?;
    std::io::stderr().write_all(answer.stderr.as_bytes())?;
    Ok(u8::try_from(answer.exit).unwrap_or(1))
}

/// The words of a rerun command that select the same harness.
pub fn rerun_words(args: &HarnessArgs) -> Vec<String> {
    let mut words = Vec::new();
    if let Some(name) = &args.harness {
        words.extend(["--harness".to_owned(), name.clone()]);
    }
    if let Some(command) = &args.harness_command {
        words.extend(["--harness-command".to_owned(), command.clone()]);
    }
    if args.harness_hooks {
        words.push("--harness-hooks".to_owned());
    }
    words
}
