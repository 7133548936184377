//! What the `tep` binary's tests share: one way to start it, one place for the files a run
//! writes, and adapter fixtures.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;

/// The binary under test.
pub const TEP: &str = env!("CARGO_BIN_EXE_tep");

/// Removes the variables that change `tep`'s output: `CI` (the progress display and insta),
/// `NO_COLOR`, `CLICOLOR`, `CLICOLOR_FORCE`; stdin is empty unless the test sets it.
pub fn without_output_env(command: &mut Command) -> &mut Command {
    command
        .env_remove("CI")
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR")
        .env_remove("CLICOLOR_FORCE")
        .stdin(Stdio::null())
}

/// `tep`, without the variables that change its output ([`without_output_env`]).
pub fn tep_command() -> Command {
    let mut command = Command::new(TEP);
    without_output_env(&mut command);
    command
}

/// `tep ARGS` in [`scratch`].
pub fn tep(args: &[&str]) -> Output {
    tep_in(scratch(), args)
}

/// `tep ARGS` in `cwd`.
pub fn tep_in(cwd: &Path, args: &[&str]) -> Output {
    tep_command().args(args).current_dir(cwd).output().unwrap()
}

/// A new empty directory for one test's files, its own: the name says what for, a counter
/// keeps two calls (of any test of this binary) apart.
pub fn temp_dir(name: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("tep-tests-{}-{n}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The working directory of runs whose files no test reads (failing runs keep their traces
/// under `./target/tep-runs`: not in the source tree), one for the whole binary.
pub fn scratch() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| temp_dir("cwd"))
}

/// Writes `text` to `dir/name`; returns the path, for a command line.
pub fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The last line of a run's text output: its summary.
pub fn summary(out: &str) -> &str {
    out.trim_end().lines().last().unwrap_or_default()
}

pub fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

/// Stdout as JSON.
pub fn json(o: &Output) -> Value {
    serde_json::from_str(&stdout(o)).unwrap_or_else(|e| panic!("{e}: {}", stdout(o)))
}

/// `sh -c '<script>'` as one adapter command (quoted so shlex keeps it whole).
pub fn adapter_command(script: &str) -> String {
    format!("sh -c '{script}'")
}

/// A protocol-1 adapter's handshake, escaped for [`adapter_command`]'s script.
pub const READY: &str = r#"{\"ready\":true,\"protocol\":1,\"implementation\":{\"name\":\"fixture\"},\"capabilities\":[],\"specs\":[\"rev2\"]}"#;

/// Two scenarios run through the adapter `script`, with a 2 s timeout, reported as JSON.
pub fn run_fixture(script: &str) -> Output {
    tep(&[
        "run",
        "--adapter",
        &adapter_command(script),
        "--timeout",
        "2",
        "--scenario",
        "allow-runs-body",
        "--scenario",
        "pre-deny-skips-body",
        "--format",
        "json",
    ])
}

/// Each scenario's status, reason and the adapter's stderr, from a JSON report on stdout.
pub fn statuses(o: &Output) -> Vec<(String, String, String)> {
    json(o)["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["status"].as_str().unwrap_or_default().to_owned(),
                r["reason"].as_str().unwrap_or_default().to_owned(),
                r["stderr"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// Whether `pid` is a running process (a zombie has ended; only its exit status is left).
#[cfg(target_os = "linux")]
pub fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let rest = stat.get(stat.rfind(')')? + 1..)?.trim_start().to_owned();
            Some(!rest.starts_with('Z'))
        })
        .unwrap_or(false)
}

/// Those of `pids` still running after up to 10 s. A SIGKILL takes effect when the process
/// next runs, which on a loaded machine may be after `tep` has exited: a killed process is
/// given that long to die, and one nobody killed (a `sleep 600`) is still there after it.
#[cfg(target_os = "linux")]
pub fn still_running(pids: &[u32]) -> Vec<u32> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut alive: Vec<u32> = pids.iter().copied().filter(|&p| running(p)).collect();
    while !alive.is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
        alive.retain(|&p| running(p));
    }
    alive
}
