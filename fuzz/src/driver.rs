//! The fuzzing loop: pick an input from the pool, mutate it, run it under `catch_unwind`, keep
//! it if it reached an outcome no input reached before, save it if it broke a property.

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, Once, PoisonError};
use std::time::{Duration, Instant};

use crate::Target;
use crate::mutate::Mutator;
use crate::targets;

/// How long to fuzz: whichever limit comes first.
#[derive(Debug, Clone, Copy, Default)]
pub struct Budget {
    pub cases: Option<u64>,
    pub time: Option<Duration>,
}

/// How a run went.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub cases: u64,
    pub elapsed: Duration,
    /// Distinct outcomes reached (the pool grows by one input for each).
    pub outcomes: usize,
    pub findings: Vec<Finding>,
    /// The slowest case, and how long it took.
    pub slowest: Duration,
    /// The largest growth of the checker's memory over a repeated garbage chunk (trace target).
    pub memory_growth: Option<(u64, usize)>,
}

impl Report {
    pub fn cases_per_second(&self) -> f64 {
        self.cases as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// An input that panicked or broke a property.
#[derive(Debug, Clone)]
pub struct Finding {
    pub message: String,
    /// Where the input was saved, if it could be.
    pub saved: Option<PathBuf>,
}

/// Most inputs kept, so that a long run does not grow without bound.
const MAX_POOL: usize = 4096;
/// Past this much growth over a repeated chunk, the checker's state is taken to grow with the
/// length of the trace (a tenth of a million records fed; 64 MiB is 640 bytes per record).
pub const MAX_CHECKER_GROWTH: u64 = 64 * 1024 * 1024;
/// Records fed in a memory probe.
pub const PROBE_RECORDS: usize = 100_000;

thread_local! {
    /// Set while this thread runs a case: its panic message is kept, not printed.
    static CAPTURING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}
static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);
static HOOK: Once = Once::new();

/// Installs (once) a panic hook that keeps the message of a case's panic instead of printing it,
/// and leaves every other thread's panics to the previous hook.
fn install_hook() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if CAPTURING.with(|c| c.get()) {
                let at = info
                    .location()
                    .map(|l| format!(" at {}:{}", l.file(), l.line()))
                    .unwrap_or_default();
                let payload = info
                    .payload()
                    .downcast_ref::<&str>()
                    .map(ToString::to_string)
                    .or_else(|| info.payload().downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".to_owned());
                *LAST_PANIC.lock().unwrap_or_else(PoisonError::into_inner) =
                    Some(format!("panicked{at}: {payload}"));
            } else {
                previous(info);
            }
        }));
    });
}

/// Runs one input: its outcome, or what went wrong (a panic or a broken property).
pub fn run_case(target: Target, input: &[u8]) -> Result<String, String> {
    catching(|| targets::run(target, input))
}

/// Runs `case`, turning a panic into an error carrying its message and place.
fn catching(case: impl FnOnce() -> Result<String, String>) -> Result<String, String> {
    install_hook();
    CAPTURING.with(|c| c.set(true));
    let result = std::panic::catch_unwind(AssertUnwindSafe(case));
    CAPTURING.with(|c| c.set(false));
    match result {
        Ok(outcome) => outcome,
        Err(_) => Err(LAST_PANIC
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .unwrap_or_else(|| "panicked".to_owned())),
    }
}

fn hash(bytes: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

/// Saves a failing input as `<dir>/<name>-<hash>.bin`.
fn save(dir: &Path, name: &str, input: &[u8]) -> Option<PathBuf> {
    std::fs::create_dir_all(dir).ok()?;
    let path = dir.join(format!("{name}-{:016x}.bin", hash(input)));
    std::fs::write(&path, input).ok()?;
    Some(path)
}

/// Fuzzes `target` from `seeds` within `budget`. Failing inputs go to `findings_dir`;
/// `progress` is called about every ten seconds.
pub fn fuzz(
    target: Target,
    seeds: &[Vec<u8>],
    budget: Budget,
    rng_seed: u64,
    findings_dir: Option<&Path>,
    progress: impl FnMut(&Report),
) -> Report {
    let check = |input: &[u8]| targets::run(target, input);
    fuzz_with(
        target.as_str(),
        check,
        seeds,
        budget,
        rng_seed,
        findings_dir,
        progress,
    )
}

/// [`fuzz`] with any check: `name` prefixes the saved files.
pub fn fuzz_with(
    name: &str,
    check: impl Fn(&[u8]) -> Result<String, String>,
    seeds: &[Vec<u8>],
    budget: Budget,
    rng_seed: u64,
    findings_dir: Option<&Path>,
    mut progress: impl FnMut(&Report),
) -> Report {
    let started = Instant::now();
    let mut mutator = Mutator::new(rng_seed, seeds);
    let mut pool: Vec<Vec<u8>> = seeds.to_vec();
    let mut seen: HashSet<String> = HashSet::new();
    let mut failed: HashSet<String> = HashSet::new();
    let mut report = Report::default();
    let mut last_progress = Instant::now();
    // The seeds themselves are cases too.
    let mut queue: Vec<Vec<u8>> = seeds.iter().rev().cloned().collect();
    loop {
        report.elapsed = started.elapsed();
        if budget.cases.is_some_and(|n| report.cases >= n)
            || budget.time.is_some_and(|t| report.elapsed >= t)
        {
            break;
        }
        let input = match queue.pop() {
            Some(input) => input,
            None if pool.is_empty() => break,
            None => {
                // Half the time from a seed: kept inputs drift towards what is refused early
                // (cheap, shallow), seeds reach the deep paths.
                let from = if mutator.rng().bool() {
                    seeds.len().max(1)
                } else {
                    pool.len()
                };
                let base = &pool[mutator.rng().usize(..from.min(pool.len()))];
                mutator.mutate(base, &pool)
            }
        };
        let case_started = Instant::now();
        let outcome = catching(|| check(&input));
        report.slowest = report.slowest.max(case_started.elapsed());
        report.cases += 1;
        match outcome {
            Ok(signature) => {
                if seen.insert(signature) && pool.len() < MAX_POOL {
                    pool.push(input.clone());
                }
                // Every so often, check that the checker does not grow with the trace's length.
                if name == Target::Trace.as_str() && report.cases % 2000 == 0 {
                    probe_memory(&input, name, findings_dir, &mut report);
                }
            }
            Err(message) => {
                // One saved input per distinct failure (numbers aside) is enough to act on.
                let key: String = message.chars().filter(|c| !c.is_ascii_digit()).collect();
                if failed.insert(key) {
                    let saved = findings_dir.and_then(|d| save(d, name, &input));
                    report.findings.push(Finding { message, saved });
                }
            }
        }
        report.outcomes = seen.len();
        if last_progress.elapsed() >= Duration::from_secs(10) {
            last_progress = Instant::now();
            report.elapsed = started.elapsed();
            progress(&report);
        }
    }
    report.elapsed = started.elapsed();
    report
}

fn probe_memory(input: &[u8], name: &str, findings_dir: Option<&Path>, report: &mut Report) {
    let Some((growth, fed)) = targets::checker_memory_growth(input, PROBE_RECORDS) else {
        return;
    };
    if report.memory_growth.is_none_or(|(most, _)| growth > most) {
        report.memory_growth = Some((growth, fed));
    }
    if growth > MAX_CHECKER_GROWTH {
        let saved = findings_dir.and_then(|d| save(d, name, input));
        report.findings.push(Finding {
            message: format!(
                "the checker grew by {growth} bytes over {fed} records of this input repeated"
            ),
            saved,
        });
    }
}
