//! Driving an implementation as a subprocess that speaks the adapter protocol.
//!
//! The runner never trusts the adapter: every answer has a deadline (reading and parsing it
//! included), lines are bounded, stderr is drained continuously into a bounded tail, and after
//! any problem the process is killed and a fresh one is started for the next scenario. A
//! misbehaving adapter costs one `errored` scenario, never a hang or a panic of ours.
//!
//! Killing an adapter ends everything it started. On Unix its process group is killed; on Linux
//! also every process below it (a grandchild that called `setsid` has left the group), and, once
//! [`adopt_orphans`] has made this process a child subreaper, every process it orphaned on the
//! way (a daemon whose parent exited is reparented to us rather than to init): the orphans in
//! its process group or started with its [`JOB_MARKER`], never another adapter's. Orphans that
//! exit are reaped after every scenario; [`end_orphans`] ends the ones nobody claimed. Elsewhere
//! only the process group is killed.

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tep_model::graph::Revision;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::task::JoinHandle;

use crate::protocol::{PROTOCOL_VERSION, Ready, Request, RunAnswer, SUPPORTED_PROTOCOLS};
use crate::runner::{Answer, Implementation};
use crate::scenario::Scenario;

/// The longest protocol line accepted from an adapter: the same bound as a trace line
/// ([`tep_check::MAX_LINE_BYTES`]), a thousand times the corpus's largest answer (about
/// 15 KiB). Reading, parsing and checking an answer this big took 130 MB and 1 s (debug build).
pub const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;
/// The shortest per-scenario timeout `tep run --timeout` accepts. Below it the verdict measures
/// the scheduler rather than the adapter: starting a request and reading its answer through two
/// pipes takes milliseconds on a loaded machine, and tokio's timer has a 1 ms granularity.
pub const MIN_TIMEOUT: Duration = Duration::from_millis(100);
/// The longest per-scenario timeout: one day. A scenario is one batch of a few calls; more is a
/// mistake, and this keeps every deadline far from the overflow of `Instant + Duration`.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(86_400);
/// How much of the adapter's stderr is kept.
pub const STDERR_TAIL_BYTES: usize = 8 * 1024;

/// How to run an adapter.
#[derive(Debug, Clone)]
pub struct AdapterOptions {
    /// The command line, split like a shell would (no shell is involved).
    pub command: String,
    /// How long one scenario may take.
    pub timeout: Duration,
    /// How long the handshake may take.
    pub handshake_timeout: Duration,
}

impl AdapterOptions {
    pub fn new(command: impl Into<String>) -> Self {
        AdapterOptions {
            command: command.into(),
            timeout: Duration::from_secs(30),
            handshake_timeout: Duration::from_secs(10),
        }
    }
}

/// Why an adapter could not be used at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdapterError {
    #[error("the adapter command is empty or not valid shell words: {0:?}")]
    BadCommand(String),
    #[error("cannot start a runtime: {0}")]
    Runtime(String),
    #[error("the adapter did not complete the handshake: {message}{}", stderr_suffix(.stderr))]
    Handshake { message: String, stderr: String },
}

fn stderr_suffix(stderr: &str) -> String {
    if stderr.trim().is_empty() {
        String::new()
    } else {
        format!("\nadapter stderr (tail):\n{stderr}")
    }
}

/// The last bytes an adapter wrote to stderr.
#[derive(Debug, Default)]
struct Tail {
    bytes: VecDeque<u8>,
}

impl Tail {
    fn push(&mut self, chunk: &[u8]) {
        self.bytes.extend(chunk);
        let excess = self.bytes.len().saturating_sub(STDERR_TAIL_BYTES);
        self.bytes.drain(..excess);
    }

    /// The tail as text: the last 20 lines at most.
    fn text(&self) -> String {
        let (a, b) = self.bytes.as_slices();
        let text = String::from_utf8_lossy(&[a, b].concat()).into_owned();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

struct Running {
    child: Child,
    pid: Option<u32>,
    /// The value of [`JOB_MARKER`] this process and everything it starts inherit.
    marker: String,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    tail: Arc<Mutex<Tail>>,
    drain: JoinHandle<()>,
}

/// An implementation reached through the adapter protocol.
pub struct ProcessAdapter {
    options: AdapterOptions,
    argv: Vec<String>,
    runtime: tokio::runtime::Runtime,
    running: Option<Running>,
    ready: Ready,
    /// The seq the running process last answered (to recognise an answer sent twice).
    answered: Option<u64>,
}

impl std::fmt::Debug for ProcessAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessAdapter")
            .field("command", &self.options.command)
            .field("running", &self.running.is_some())
            .finish()
    }
}

impl ProcessAdapter {
    /// Starts the adapter and completes the handshake.
    pub fn start(options: AdapterOptions) -> Result<Self, AdapterError> {
        let argv = shlex::split(&options.command)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| AdapterError::BadCommand(options.command.clone()))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| AdapterError::Runtime(e.to_string()))?;
        let (running, ready) = runtime
            .block_on(launch(&argv, options.handshake_timeout))
            .map_err(|(message, stderr)| AdapterError::Handshake { message, stderr })?;
        Ok(ProcessAdapter {
            options,
            argv,
            runtime,
            running: Some(running),
            ready,
            answered: None,
        })
    }

    /// Kills the current process, if any, and returns its stderr tail.
    fn discard(&mut self) -> String {
        self.answered = None;
        let Some(running) = self.running.take() else {
            return String::new();
        };
        self.runtime.block_on(kill(running))
    }
}

impl Drop for ProcessAdapter {
    fn drop(&mut self) {
        if let Some(mut running) = self.running.take() {
            self.runtime.block_on(async {
                // Taken while the adapter still holds its processes together.
                let below = running.pid.map(leftovers::snapshot).unwrap_or_default();
                let stop = line_of(&Request::Stop);
                let polite = async {
                    running.stdin.write_all(stop.as_bytes()).await.ok()?;
                    running.stdin.flush().await.ok()?;
                    running.child.wait().await.ok()
                };
                let exited = tokio::time::timeout(Duration::from_secs(2), polite)
                    .await
                    .ok()
                    .flatten()
                    .is_some();
                if exited {
                    // It stopped when told to; what it left running must not outlive us.
                    leftovers::forget(running.pid);
                    leftovers::end(&below, running.pid, &running.marker);
                } else {
                    kill(running).await;
                }
            });
        }
    }
}

impl Implementation for ProcessAdapter {
    fn ready(&self) -> &Ready {
        &self.ready
    }

    fn run(&mut self, seq: u64, spec: Revision, scenario: &Scenario) -> Answer {
        if self.running.is_none() {
            match self
                .runtime
                .block_on(launch(&self.argv, self.options.handshake_timeout))
            {
                Ok((running, _)) => {
                    self.running = Some(running);
                    self.answered = None;
                }
                Err((message, stderr)) => {
                    return Answer::Errored {
                        message: format!("could not restart the adapter: {message}"),
                        stderr: Some(stderr).filter(|s| !s.trim().is_empty()),
                    };
                }
            }
        }
        let request = line_of(&Request::Run {
            seq,
            spec,
            scenario: Box::new(scenario.clone()),
        });
        let timeout = self.options.timeout;
        let Some(running) = self.running.as_mut() else {
            return Answer::Errored {
                message: "the adapter is not running".to_owned(),
                stderr: None,
            };
        };
        let exchange = async {
            running
                .stdin
                .write_all(request.as_bytes())
                .await
                .map_err(|e| format!("cannot write the request: {e}"))?;
            running
                .stdin
                .flush()
                .await
                .map_err(|e| format!("cannot write the request: {e}"))?;
            read_message::<RunAnswer>(&mut running.stdout, "an answer").await
        };
        let late = || {
            format!(
                "no answer within {} s (per-scenario timeout)",
                timeout.as_secs_f64()
            )
        };
        let outcome = self.runtime.block_on(async {
            let deadline = tokio::time::Instant::now() + timeout;
            match tokio::time::timeout_at(deadline, exchange).await {
                Err(_) => Err(late()),
                // Parsing is not cancelled at the deadline (it never yields), but counts.
                Ok(Ok(_)) if tokio::time::Instant::now() > deadline => Err(format!(
                    "{} (the answer was read and parsed only after it)",
                    late()
                )),
                Ok(result) => result,
            }
        });
        // What the adapter's helpers left (exited daemons are our zombies): reaped as we go.
        leftovers::reap();
        let answered = self.answered;
        let outcome = outcome.and_then(|answer| match answer.seq {
            s if s == seq => Ok(answer),
            s if Some(s) == answered => Err(format!(
                "the adapter answered seq {s} again (a duplicate answer to the previous request) instead of answering seq {seq}"
            )),
            s => Err(format!("the adapter answered seq {s} to request seq {seq}")),
        });
        match outcome {
            Ok(answer) => {
                self.answered = Some(seq);
                answer.outcome.into()
            }
            Err(message) => {
                // The process is in an unknown state: replace it before the next scenario.
                let stderr = self.discard();
                Answer::Errored {
                    message,
                    stderr: Some(stderr).filter(|s| !s.trim().is_empty()),
                }
            }
        }
    }
}

fn line_of(request: &Request) -> String {
    // Serializing our own request types cannot fail (string keys only).
    let mut line = serde_json::to_string(request).unwrap_or_default();
    line.push('\n');
    line
}

/// Spawns the adapter and completes the handshake; on failure, the message and stderr tail.
async fn launch(
    argv: &[String],
    handshake_timeout: Duration,
) -> Result<(Running, Ready), (String, String)> {
    let mut command = Command::new(&argv[0]);
    command
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    command.process_group(0);
    let marker = leftovers::new_marker();
    command.env(JOB_MARKER, &marker);
    // Tracked as it is spawned: no sweep or reaping sees it as an orphan in between.
    let mut child = leftovers::spawn_tracked(|| command.spawn())
        .map_err(|e| (format!("cannot start {:?}: {e}", argv[0]), String::new()))?;
    let (Some(stdin), Some(stdout), Some(mut stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err((
            "the adapter's pipes could not be opened".to_owned(),
            String::new(),
        ));
    };
    let pid = child.id();
    let tail = Arc::new(Mutex::new(Tail::default()));
    let sink = tail.clone();
    let drain = tokio::spawn(async move {
        let mut buf = vec![0u8; 8192];
        while let Ok(n) = stderr.read(&mut buf).await {
            if n == 0 {
                break;
            }
            sink.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(&buf[..n]);
        }
    });
    let mut running = Running {
        child,
        pid,
        marker,
        stdin,
        stdout: BufReader::new(stdout),
        tail,
        drain,
    };
    let handshake = async {
        running
            .stdin
            .write_all(
                line_of(&Request::Start {
                    protocol: PROTOCOL_VERSION,
                })
                .as_bytes(),
            )
            .await
            .map_err(|e| format!("cannot write the start request: {e}"))?;
        running
            .stdin
            .flush()
            .await
            .map_err(|e| format!("cannot write the start request: {e}"))?;
        let ready: Ready = read_message(&mut running.stdout, "the ready message").await?;
        if !ready.ready {
            return Err("the adapter answered start with \"ready\": false".to_owned());
        }
        if !SUPPORTED_PROTOCOLS.contains(&ready.protocol) {
            return Err(format!(
                "the adapter speaks protocol {}, this runner speaks {PROTOCOL_VERSION} (and accepts {})",
                ready.protocol,
                SUPPORTED_PROTOCOLS
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        Ok(ready)
    };
    let result = match tokio::time::timeout(handshake_timeout, handshake).await {
        Err(_) => Err(format!(
            "no ready message within {} s",
            handshake_timeout.as_secs_f64()
        )),
        Ok(r) => r,
    };
    match result {
        Ok(ready) => Ok((running, ready)),
        Err(message) => {
            let stderr = kill(running).await;
            Err((message, stderr))
        }
    }
}

/// Kills the adapter and every process it started (see the module docs), and returns its stderr
/// tail.
async fn kill(mut running: Running) -> String {
    let below = running.pid.map(leftovers::snapshot).unwrap_or_default();
    #[cfg(unix)]
    if let Some(group) = running
        .pid
        .and_then(|pid| i32::try_from(pid).ok())
        .and_then(rustix::process::Pid::from_raw)
    {
        // The adapter runs in its own process group; take its children down with it.
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
    }
    let _ = running.child.start_kill();
    if tokio::time::timeout(Duration::from_secs(2), running.child.wait())
        .await
        .is_ok()
    {
        leftovers::forget(running.pid);
    }
    leftovers::end(&below, running.pid, &running.marker);
    // Give the drain a moment to collect what was written before the end.
    let _ = tokio::time::timeout(Duration::from_millis(200), &mut running.drain).await;
    running.drain.abort();
    running
        .tail
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .text()
}

/// Makes this process the reaper of every process its adapters orphan (Linux: a child
/// subreaper), so that killing an adapter can end a daemon it started even after that daemon's
/// parent exited. Meant for a program whose only children are adapters (the `tep` binary): after
/// it, each adapter that ends takes its own orphans with it (see [`JOB_MARKER`]), and
/// [`end_orphans`] the rest at the end. Elsewhere it does nothing and only the adapter's process
/// group is killed.
pub fn adopt_orphans() -> std::io::Result<()> {
    leftovers::adopt()
}

/// The environment variable every adapter process is started with, a value of its own per
/// process (`<tep pid>-<n>`); what the adapter starts inherits it. With the adapter's process
/// group, it tells whose an orphan is: an adapter that ends takes only its own orphans along,
/// never another job's live helper (a daemon a language server double-forks, say).
pub const JOB_MARKER: &str = "TEP_ADAPTER_JOB";

/// Kills and reaps every orphan adopted by [`adopt_orphans`] that is still around: the ones no
/// adapter could claim (a daemon that left the adapter's process group and cleared its
/// environment). Meant for the end of a run, once every adapter has stopped.
pub fn end_orphans() {
    leftovers::end_all();
}

/// The processes an adapter leaves behind, found and ended through `/proc` (Linux).
#[cfg(target_os = "linux")]
mod leftovers;

/// Without `/proc`, only the adapter's process group is killed.
#[cfg(not(target_os = "linux"))]
mod leftovers {
    pub(super) fn adopt() -> std::io::Result<()> {
        Ok(())
    }
    pub(super) fn spawn_tracked(
        spawn: impl FnOnce() -> std::io::Result<tokio::process::Child>,
    ) -> std::io::Result<tokio::process::Child> {
        spawn()
    }
    pub(super) fn new_marker() -> String {
        std::process::id().to_string()
    }
    pub(super) fn reap() {}
    pub(super) fn forget(_pid: Option<u32>) {}
    pub(super) fn snapshot(_adapter: u32) -> Vec<(u32, u64)> {
        Vec::new()
    }
    pub(super) fn end(_below: &[(u32, u64)], _adapter: Option<u32>, _marker: &str) {}
    pub(super) fn end_all() {}
}

/// Reads one protocol line and parses it as `T`.
async fn read_message<T: serde::de::DeserializeOwned>(
    stdout: &mut BufReader<ChildStdout>,
    what: &str,
) -> Result<T, String> {
    let mut line = Vec::new();
    // Blank lines carry nothing; skip them.
    while line.iter().all(u8::is_ascii_whitespace) {
        line.clear();
        loop {
            let available = stdout
                .fill_buf()
                .await
                .map_err(|e| format!("cannot read the adapter's stdout: {e}"))?;
            if available.is_empty() {
                return Err(if line.is_empty() {
                    format!("the adapter closed stdout (exited?) before sending {what}")
                } else {
                    format!("the adapter closed stdout in the middle of {what}")
                });
            }
            let (used, done) = match available.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (available.len(), false),
            };
            if line.len() + used > MAX_ANSWER_BYTES {
                return Err(format!(
                    "the adapter sent a line longer than {MAX_ANSWER_BYTES} bytes"
                ));
            }
            line.extend_from_slice(&available[..used]);
            stdout.consume(used);
            if done {
                break;
            }
        }
    }
    let text = String::from_utf8_lossy(&line);
    let text = text.trim();
    serde_json::from_str(text).map_err(|e| {
        let shown: String = text.chars().take(160).collect();
        format!("the adapter sent something that is not {what} ({e}): {shown:?}")
    })
}
