//! Drive mode against a shipped harness: each scenario in a fresh temporary home and workspace,
//! the harness started as its profile says, tep playing the model, the tools and the hooks, and
//! the harness's own session log read back as the trace. Faults are errors, never verdicts: a
//! harness that exits early, never calls the model or hangs is `errored` with its stderr tail,
//! every process it started is ended, and the run directory is removed unless kept.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tep_check::Violation;
use tep_conformance::protocol::{ImplementationInfo, PROTOCOL_VERSION, Ready};
use tep_conformance::runner::{Answer, Implementation};
use tep_conformance::scenario::Scenario;
use tep_model::graph::Revision;
use tep_model::identity::CallId;
use tep_model::trace::{Capability, ObservationLevel};

use crate::evidence::{self, RunRecords};
use crate::hook::{HOOKS_FILE, HookRecord, hooks_json};
use crate::mcp::{BODIES_FILE, BodyRecord, SCRIPT_FILE, read_lines};
use crate::model_server::{ModelRequest, ModelServer, RequestKind};
use crate::profile::{HookDialect, Placeholders, Profile};
use crate::record::{
    lined_trace_of_log, locate, on_trace_lines, read_log, timeline, with_next_requests,
};
use crate::script::RunScript;

/// Where a run directory keeps what tep's own records showed beyond the trace
/// ([`evidence::Judgement`]).
pub const BEYOND_FILE: &str = "beyond.json";

/// The bytes of the harness's stderr an error quotes.
pub const STDERR_TAIL_BYTES: usize = 8 * 1024;

/// How a harness is driven.
#[derive(Debug, Clone)]
pub struct HarnessOptions {
    pub profile: Profile,
    /// The command and its first arguments, instead of the profile's `command` (the profile's
    /// `args` follow).
    pub command: Option<Vec<String>>,
    /// The `tep` binary the harness starts as its MCP server and hook command.
    pub tep: PathBuf,
    /// How long one scenario may take, from the harness's start to its exit.
    pub timeout: Duration,
    /// How long the harness may take to send its first request to the model.
    pub boot_timeout: Duration,
    /// Keep each run's directory (its home, workspace, overlay and records).
    pub keep: bool,
}

impl HarnessOptions {
    pub fn new(profile: Profile, tep: PathBuf) -> Self {
        HarnessOptions {
            profile,
            command: None,
            tep,
            timeout: Duration::from_secs(120),
            boot_timeout: Duration::from_secs(60),
            keep: false,
        }
    }
}

/// A harness, as an implementation the runner drives.
#[derive(Debug)]
pub struct HarnessDriver {
    ready: Ready,
    options: HarnessOptions,
    runtime: tokio::runtime::Runtime,
    /// The run directories kept (`keep`).
    pub kept: Vec<PathBuf>,
    /// What the last run's own records showed beyond its trace.
    beyond: Vec<Violation>,
}

impl HarnessDriver {
    pub fn new(options: HarnessOptions) -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        Ok(HarnessDriver {
            ready: Ready {
                ready: true,
                protocol: PROTOCOL_VERSION,
                implementation: ImplementationInfo {
                    name: options.profile.description.clone(),
                    version: None,
                    language: None,
                    homepage: None,
                },
                // What the harness has; a scenario whose constructs have no public interface is
                // N/A by name (`RunScript::of`).
                capabilities: Capability::ALL.to_vec(),
                specs: vec![Revision::Rev2],
                // The session log, plus the model's next request (`record::with_next_requests`).
                observation: Some(ObservationLevel::Boundary),
            },
            options,
            runtime,
            kept: Vec::new(),
            beyond: Vec::new(),
        })
    }
}

impl Implementation for HarnessDriver {
    fn ready(&self) -> &Ready {
        &self.ready
    }

    /// A call played by the shipped safe tool that is expected to succeed: its answer reaches
    /// the model as the harness formats it, so its expected content cannot be compared.
    fn unchecked_content(&self, scenario: &Scenario) -> Vec<(CallId, String)> {
        let Ok(script) = RunScript::of(scenario, &self.options.profile) else {
            return Vec::new();
        };
        script
            .calls
            .iter()
            .filter(|c| c.query.is_some())
            .filter(|c| {
                scenario
                    .expect
                    .calls
                    .get(&c.call_id)
                    .is_some_and(|e| !e.is_error)
            })
            .map(|c| {
                let why = format!(
                    "`{}` is played by the shipped `{}`, which formats a successful answer its own way",
                    c.tool, c.model_name
                );
                (CallId::from(c.call_id.as_str()), why)
            })
            .collect()
    }

    fn breaches_beyond_the_trace(&mut self) -> Vec<Violation> {
        std::mem::take(&mut self.beyond)
    }

    fn run(&mut self, _seq: u64, _spec: Revision, scenario: &Scenario) -> Answer {
        self.beyond.clear();
        let script = match RunScript::of(scenario, &self.options.profile) {
            Ok(script) => script,
            Err(construct) => return Answer::Skipped(format!("N/A: {construct}")),
        };
        let dir = match tempfile::Builder::new()
            .prefix(&format!("tep-{}-", scenario.id))
            .tempdir()
        {
            Ok(dir) => dir,
            Err(e) => return errored(format!("cannot make a run directory: {e}"), None),
        };
        let (answer, beyond) = self
            .runtime
            .block_on(run_one(&self.options, &script, dir.path()));
        self.beyond = beyond;
        if self.options.keep {
            let kept = dir.keep();
            // The runner owns the driver until the run ends: say where it is now.
            eprintln!(
                "tep: kept the run directory of {}: {}",
                scenario.id,
                kept.display()
            );
            self.kept.push(kept);
        }
        answer
    }
}

/// A run's answer, and the breaches its own records show beyond the trace.
type Ran = (Answer, Vec<Violation>);

fn failed(message: String, stderr: Option<String>) -> Ran {
    (errored(message, stderr), Vec::new())
}

fn errored(message: String, stderr: Option<String>) -> Answer {
    Answer::Errored { message, stderr }
}

/// A YAML single-quoted scalar.
fn yaml(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// A POSIX shell word.
fn sh(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

async fn run_one(options: &HarnessOptions, script: &RunScript, run: &Path) -> Ran {
    let profile = &options.profile;
    let home = run.join("home");
    let workspace = run.join("ws");
    for d in [&home, &workspace] {
        if let Err(e) = std::fs::create_dir_all(d) {
            return failed(format!("cannot make {}: {e}", d.display()), None);
        }
    }
    let written = serde_json::to_vec_pretty(script)
        .map_err(std::io::Error::other)
        .and_then(|bytes| std::fs::write(run.join(SCRIPT_FILE), bytes));
    if let Err(e) = written {
        return failed(format!("cannot write the run's script: {e}"), None);
    }
    let bodies = Some(run.join(BODIES_FILE));
    let model = match ModelServer::start_recording(script.clone(), bodies).await {
        Ok(m) => m,
        Err(e) => return failed(format!("cannot start the model server: {e}"), None),
    };
    let values = match write_overlay(options, script, run, &model.url()) {
        Ok(values) => values,
        Err(message) => return failed(message, None),
    };

    let argv: Vec<String> = options
        .command
        .clone()
        .unwrap_or_else(|| vec![profile.command.clone()])
        .into_iter()
        .chain(profile.args.iter().map(|a| values.fill(a)))
        .collect();
    let stderr_path = run.join("stderr");
    let stdout_path = run.join("stdout");
    let child = spawn(
        &argv,
        profile,
        &values,
        &workspace,
        &stdout_path,
        &stderr_path,
    );
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            return failed(
                format!("cannot start the harness `{}`: {e}", argv.join(" ")),
                None,
            );
        }
    };
    let ended = wait(&mut child, &model, options).await;
    // Whatever it left running in its process group (its MCP server, a hook) ends with it.
    end_group(&mut child);
    let stderr = tail(&stderr_path);
    let requests = model.requests();
    drop(model);
    let side = write_side_records(run, &requests);
    if let Err(e) = side {
        return failed(format!("cannot write the run's records: {e}"), stderr);
    }
    let status: ExitStatus = match ended {
        Ok(s) => s,
        Err(message) => return failed(message, stderr),
    };
    if !status.success() {
        return failed(format!("the harness exited with {status}"), stderr);
    }
    let steps: Vec<usize> = requests
        .iter()
        .filter(|r| r.kind == RequestKind::Step)
        .filter_map(|r| r.step)
        .collect();
    if steps.is_empty() {
        return failed(
            "the harness exited without calling the model".to_owned(),
            stderr,
        );
    }
    if !steps.iter().any(|s| *s >= 1) {
        return failed(
            "the harness exited without sending the batch's results to the model".to_owned(),
            stderr,
        );
    }
    match read_record(profile, script, run, &home, &requests) {
        Ok(record) => record,
        Err(message) => failed(message, stderr),
    }
}

/// The run's trace at level `boundary` (its session log and the model's next requests), and
/// what tep's own records of it show beyond that trace ([`evidence`]); the timeline of every
/// record, written beside them.
fn read_record(
    profile: &Profile,
    script: &RunScript,
    run: &Path,
    home: &Path,
    requests: &[ModelRequest],
) -> Result<(Answer, Vec<Violation>), String> {
    let log_path = locate(home, &profile.log).map_err(|e| e.to_string())?;
    let log = read_log(&log_path, profile.log.compression).map_err(|e| e.to_string())?;
    let _ = std::fs::write(run.join("session.jsonl"), &log);
    let bodies: Vec<BodyRecord> = read_lines(&run.join(BODIES_FILE));
    let hook_records: Vec<HookRecord> = read_lines(&run.join(HOOKS_FILE));
    let merged = timeline(&log, requests, &bodies, &hook_records);
    let _ = write_jsonl(&run.join("timeline.jsonl"), &merged);
    let lined =
        lined_trace_of_log(&log_path, &log, &profile.tools, script).map_err(|e| e.to_string())?;
    let (results_at, log_tick_ms) = evidence::results_at(&log, &lined.records);
    // Level `boundary`: the log, and what the model was sent after each batch.
    let records = with_next_requests(
        lined.records.iter().map(|(_, r)| r.clone()).collect(),
        requests,
    );
    // A log that lost the batch would pass every check: it is the harness's fault, not a verdict.
    let batches = records
        .iter()
        .filter(|r| r.node() == Some(tep_model::graph::NodeId::Model))
        .count();
    if batches == 0 {
        return Err(format!(
            "the session log {} holds no batch, although the model sent one",
            log_path.display()
        ));
    }
    let judgement = evidence::judge(&RunRecords {
        trace: &records,
        results_at: &results_at,
        log_tick_ms,
        bodies: &bodies,
        hooks: &hook_records,
        script,
    });
    let _ = std::fs::write(
        run.join(BEYOND_FILE),
        serde_json::to_vec_pretty(&judgement).unwrap_or_default(),
    );
    // What the log itself shows out of place, as `tep check --from` reports it.
    let mut beyond = on_trace_lines(lined.breaches, &lined.records, &records);
    beyond.extend(judgement.breaches);
    Ok((Answer::Ran(records), beyond))
}

/// Waits for the harness to exit, or for the boot or run timeout to pass.
async fn wait(
    child: &mut Child,
    model: &ModelServer,
    options: &HarnessOptions,
) -> Result<ExitStatus, String> {
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status),
            Ok(None) => {}
            Err(e) => return Err(format!("cannot wait for the harness: {e}")),
        }
        let elapsed = started.elapsed();
        if model.requests().is_empty() && elapsed >= options.boot_timeout {
            return Err(format!(
                "the harness never called the model within {} s",
                options.boot_timeout.as_secs_f64()
            ));
        }
        if elapsed >= options.timeout {
            return Err(format!(
                "the harness did not finish within {} s (model requests: {})",
                options.timeout.as_secs_f64(),
                model.requests().len()
            ));
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The placeholders of one run, with the hooks file and the overlay written to the run
/// directory as the profile says.
fn write_overlay(
    options: &HarnessOptions,
    script: &RunScript,
    run: &Path,
    model_url: &str,
) -> Result<Placeholders, String> {
    let profile = &options.profile;
    let (home, workspace) = (run.join("home"), run.join("ws"));
    let tep = options.tep.display().to_string();
    let overlay = run.join(&profile.overlay.file);
    let hooks_file = run.join(&profile.hooks.file);
    let mut values = Placeholders::default();
    values.0.insert("run", run.display().to_string());
    values.0.insert("home", home.display().to_string());
    values
        .0
        .insert("workspace", workspace.display().to_string());
    values.0.insert("overlay", overlay.display().to_string());
    values.0.insert("task", profile.task.clone());
    values.0.insert("model_url", model_url.to_owned());
    values.0.insert("tep", tep.clone());
    values
        .0
        .insert("hooks_file", hooks_file.display().to_string());
    values.0.insert("mcp_command", yaml(&tep));
    values.0.insert(
        "mcp_args",
        format!(
            "[{}, {}]",
            yaml("harness-mcp"),
            yaml(&run.display().to_string())
        ),
    );
    let hooks = script.uses_hooks() && profile.hooks.dialect == HookDialect::ClaudeCode;
    if hooks {
        let command = format!(
            "{} harness-hook {}",
            sh(&tep),
            sh(&run.display().to_string())
        );
        let written = std::fs::write(&hooks_file, hooks_json(&command).to_string());
        if let Err(e) = written {
            return Err(format!("cannot write {}: {e}", hooks_file.display()));
        }
        let row = values.fill(&profile.overlay.hooks_row);
        values.0.insert("hooks_rows", row);
    } else {
        values.0.insert("hooks_rows", String::new());
    }
    for (name, row) in script.overlay_rows(&profile.overlay) {
        values.0.insert(name, row);
    }
    if let Err(e) = std::fs::write(&overlay, values.fill(&profile.overlay.template)) {
        return Err(format!("cannot write the overlay: {e}"));
    }
    Ok(values)
}

fn spawn(
    argv: &[String],
    profile: &Profile,
    values: &Placeholders,
    workspace: &Path,
    stdout: &Path,
    stderr: &Path,
) -> std::io::Result<Child> {
    let Some((program, args)) = argv.split_first() else {
        return Err(std::io::Error::other("the harness command is empty"));
    };
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(workspace)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(stdout)?)
        .stderr(std::fs::File::create(stderr)?);
    for (k, v) in &profile.env {
        command.env(k, values.fill(v));
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // Its own process group, so that ending it ends what it started.
        command.process_group(0);
    }
    command.spawn()
}

/// Ends the harness's process group: SIGTERM, a moment to drain, then SIGKILL; reaps it.
fn end_group(child: &mut Child) {
    #[cfg(unix)]
    if let Some(group) = i32::try_from(child.id())
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        use rustix::process::{Signal, kill_process_group};
        if kill_process_group(group, Signal::TERM).is_ok() {
            let until = Instant::now() + Duration::from_millis(500);
            // The group is gone when a signal 0 finds no member.
            while Instant::now() < until && rustix::process::test_kill_process_group(group).is_ok()
            {
                let _ = child.try_wait();
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = kill_process_group(group, Signal::KILL);
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The last [`STDERR_TAIL_BYTES`] of the harness's stderr, if it wrote any.
fn tail(path: &Path) -> Option<String> {
    let bytes = std::fs::read(path).ok()?;
    if bytes.is_empty() {
        return None;
    }
    let from = bytes.len().saturating_sub(STDERR_TAIL_BYTES);
    Some(String::from_utf8_lossy(&bytes[from..]).into_owned())
}

fn write_side_records(
    run: &Path,
    requests: &[crate::model_server::ModelRequest],
) -> std::io::Result<()> {
    write_jsonl(&run.join("model-requests.jsonl"), requests)
}

fn write_jsonl<T: serde::Serialize>(path: &Path, items: &[T]) -> std::io::Result<()> {
    let mut out = Vec::new();
    for item in items {
        serde_json::to_writer(&mut out, item).map_err(std::io::Error::other)?;
        out.push(b'\n');
    }
    std::fs::write(path, out)
}
