//! Every way to stop `tep` is a clean stop: Ctrl-C (SIGINT), SIGTERM (`timeout`, `docker stop`,
//! a CI cancel) and SIGHUP (the terminal went away) are handled from before the first adapter
//! starts until the command ends.
//!
//! | when | SIGINT | SIGTERM, SIGHUP |
//! |---|---|---|
//! | adapters starting (handshakes) | adapters killed, exit 130 | killed, exit 143 / 129 |
//! | `tep run` running | first: no new scenario; second: abandon | abandon at once |
//! | `tep fuzz` running | the case running is abandoned and the report printed | the same |
//! | `tep check`, `tep report` | temporary files removed, exit 130 | the same, 143 / 129 |
//!
//! A run that was stopped writes its reports, marked interrupted, and exits 128 + the signal.
//! Whatever stops, no temporary file is left: a signal that exits removes the ones being
//! written (`output::remove_temporaries`) first.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::{Context, Result};
use tep_conformance::runner::Interrupter;

use crate::output::{note, remove_temporaries};

/// What a signal stops.
enum Target {
    /// A command with nothing to report when stopped (`tep check`, `tep report`): exit.
    Exit,
    /// Adapters are starting: nothing to report yet; kill them and exit.
    Starting,
    /// A `tep run`: interrupt it (SIGINT) or abandon it (SIGTERM, SIGHUP).
    Run(Interrupter),
    /// A `tep fuzz`: stop after the case running, which is abandoned (its adapter killed).
    Fuzz(Arc<AtomicBool>),
}

/// The handler of the three signals, installed by [`Signals::install`].
pub struct Signals {
    target: Arc<Mutex<Target>>,
    /// The first signal caught (its number), 0 for none.
    caught: Arc<AtomicI32>,
}

const SIGINT: i32 = 2;
const SIGHUP: i32 = 1;
const SIGTERM: i32 = 15;

/// The signal that is ending the process (set before its children are killed), so that an
/// error those deaths cause on the main thread exits with the signal's code, not as an error.
static ENDING: AtomicI32 = AtomicI32::new(0);

/// The exit code of a process a signal is ending (128 + the signal), if one is.
pub fn ending_code() -> Option<u8> {
    match ENDING.load(Ordering::SeqCst) {
        0 => None,
        n => u8::try_from(128 + n).ok(),
    }
}

impl Signals {
    /// Takes the three signals from now on: until [`Signals::run`] or [`Signals::fuzz`], a
    /// signal kills the adapters being started and exits.
    pub fn install() -> Result<Signals> {
        Signals::install_with(Target::Starting)
    }

    /// Takes the three signals for a command that has nothing to write when stopped: a signal
    /// removes the temporary files being written and exits 128 + the signal.
    pub fn install_exiting() -> Result<Signals> {
        Signals::install_with(Target::Exit)
    }

    fn install_with(first: Target) -> Result<Signals> {
        let target = Arc::new(Mutex::new(first));
        let caught = Arc::new(AtomicI32::new(0));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the signal handler")?;
        #[cfg(unix)]
        let mut streams = {
            use tokio::signal::unix::{SignalKind, signal};
            let _entered = runtime.enter();
            let mut streams = Vec::new();
            for (kind, number) in [
                (SignalKind::interrupt(), SIGINT),
                (SignalKind::terminate(), SIGTERM),
                (SignalKind::hangup(), SIGHUP),
            ] {
                streams.push((
                    signal(kind).context("cannot handle SIGINT, SIGTERM and SIGHUP")?,
                    number,
                ));
            }
            streams
        };
        let (for_thread, caught_too) = (target.clone(), caught.clone());
        std::thread::Builder::new()
            .name("signals".to_owned())
            .spawn(move || {
                runtime.block_on(async move {
                    loop {
                        #[cfg(unix)]
                        let number = {
                            let [a, b, c] = &mut streams[..] else {
                                return;
                            };
                            tokio::select! {
                                Some(()) = a.0.recv() => a.1,
                                Some(()) = b.0.recv() => b.1,
                                Some(()) = c.0.recv() => c.1,
                                else => return,
                            }
                        };
                        #[cfg(not(unix))]
                        let number = match tokio::signal::ctrl_c().await {
                            Ok(()) => SIGINT,
                            Err(_) => return,
                        };
                        let _ = caught_too.compare_exchange(
                            0,
                            number,
                            Ordering::SeqCst,
                            Ordering::SeqCst,
                        );
                        if handle(&for_thread, number) {
                            return;
                        }
                    }
                });
            })
            .context("cannot start the signal handler")?;
        Ok(Signals { target, caught })
    }

    /// From now on a signal interrupts this run.
    pub fn run(&self, interrupter: Interrupter) {
        *self.target.lock().unwrap_or_else(PoisonError::into_inner) = Target::Run(interrupter);
    }

    /// From now on a signal stops this fuzzing: it sets `stop`.
    pub fn fuzz(&self, stop: Arc<AtomicBool>) {
        *self.target.lock().unwrap_or_else(PoisonError::into_inner) = Target::Fuzz(stop);
    }

    /// The exit code of a stopped command: 128 + the first signal, or `None` if none came.
    pub fn exit_code(&self) -> Option<u8> {
        match self.caught.load(Ordering::SeqCst) {
            0 => None,
            n => u8::try_from(128 + n).ok(),
        }
    }
}

/// Acts on one signal; returns whether nothing more is to be done.
fn handle(target: &Mutex<Target>, number: i32) -> bool {
    let target = target.lock().unwrap_or_else(PoisonError::into_inner);
    if matches!(&*target, Target::Exit | Target::Starting) {
        ENDING.store(number, Ordering::SeqCst);
    }
    match &*target {
        Target::Exit => {
            let _held = remove_temporaries();
            let name = match number {
                SIGINT => "SIGINT",
                SIGTERM => "SIGTERM",
                _ => "SIGHUP",
            };
            note(format_args!("tep: stopped by {name}"));
            std::process::exit(128 + number);
        }
        Target::Starting => {
            let _held = remove_temporaries();
            note(format_args!(
                "tep: stopped while starting the adapters; nothing ran"
            ));
            kill_children();
            std::process::exit(128 + number);
        }
        Target::Run(interrupter) => {
            let abandoned = interrupter.interrupt();
            // SIGTERM and SIGHUP do not wait for the running scenarios.
            if number != SIGINT && !abandoned {
                interrupter.interrupt();
            }
            interrupter.abandoned()
        }
        Target::Fuzz(stop) => {
            stop.store(true, Ordering::SeqCst);
            // The case running is abandoned: its adapter (and what it started) is killed, so
            // the fuzzer returns now rather than at the per-scenario timeout.
            kill_children();
            true
        }
    }
}

/// Kills every process this one started and every orphan it adopted (see
/// `tep_conformance::adapter::adopt_orphans`): each adapter leads its own process group, which
/// takes its children along. Best effort, Linux only (it reads /proc); elsewhere adapters see
/// their stdin close and exit.
pub fn kill_children() {
    #[cfg(target_os = "linux")]
    {
        let me = std::process::id();
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // `pid (comm) state ppid ...`; comm may hold spaces and parentheses.
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<u32>().ok());
            if ppid != Some(me) {
                continue;
            }
            let Some(pid) = i32::try_from(pid)
                .ok()
                .and_then(rustix::process::Pid::from_raw)
            else {
                continue;
            };
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
}
