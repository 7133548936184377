//! Running a plan on several implementations at once: a shared queue, one thread each, the
//! results in corpus order, interrupted through [`RunControl`] and its [`Interrupter`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;
use std::time::Instant;

use super::{Implementation, Plan, Slot};
use crate::outcome::{Coverage, RunReport, ScenarioResult};

impl Plan {
    /// Runs the plan on several implementations at once (one thread each), reporting each
    /// scenario to `on_event` as it finishes. The report is in corpus order whatever the
    /// completion order. An error from `on_event` stops the run (the running scenarios finish)
    /// and is returned.
    pub fn run_parallel<E>(
        self,
        workers: Vec<Box<dyn Implementation + Send>>,
        control: RunControl,
        mut on_event: impl FnMut(RunEvent<'_>) -> Result<(), E>,
    ) -> Result<RunReport, E> {
        let started = Instant::now();
        let RunControl {
            stop,
            presses: _,
            tx,
            rx,
        } = control;
        let mut results: Vec<Option<ScenarioResult>> = vec![None; self.slots.len()];
        let mut failure: Option<E> = None;
        let mut emit = |event: RunEvent<'_>, failure: &mut Option<E>| {
            if failure.is_none()
                && let Err(e) = on_event(event)
            {
                *failure = Some(e);
                stop.store(true, Ordering::SeqCst);
            }
        };
        for (index, slot) in self.slots.iter().enumerate() {
            if let Slot::NotApplicable(result) = slot {
                let mut result = (**result).clone();
                emit(
                    RunEvent::Finished {
                        index,
                        result: &mut result,
                    },
                    &mut failure,
                );
                results[index] = Some(result);
            }
        }
        let queue = self.queue();
        let next = Arc::new(AtomicUsize::new(0));
        let plan = Arc::new(self);
        let count = workers.len();
        let handles = Worker {
            plan: plan.clone(),
            queue: queue.clone(),
            next: next.clone(),
            stop: stop.clone(),
            tx: tx.clone(),
        }
        .spawn_each(workers);
        let mut coverage = Coverage::default();
        let mut finished = 0;
        let mut done = 0;
        let mut interrupted = false;
        let mut abandoned = false;
        while done < count {
            // The control keeps a sender, so this only ends through the messages.
            let Ok(message) = rx.recv() else { break };
            match message {
                Message::Started { index } => {
                    if let Some(Slot::Run(scenario)) = plan.slots.get(index) {
                        emit(
                            RunEvent::Started {
                                index,
                                id: &scenario.id,
                            },
                            &mut failure,
                        );
                    }
                }
                Message::Finished {
                    index,
                    mut result,
                    coverage: taken,
                } => {
                    finished += 1;
                    coverage.extend(&taken);
                    emit(
                        RunEvent::Finished {
                            index,
                            result: &mut result,
                        },
                        &mut failure,
                    );
                    results[index] = Some(*result);
                }
                Message::WorkerDone => done += 1,
                Message::Interrupt => {
                    interrupted = true;
                    let dispatched = next.load(Ordering::SeqCst).min(queue.len());
                    emit(
                        RunEvent::Interrupted {
                            running: dispatched.saturating_sub(finished),
                        },
                        &mut failure,
                    );
                }
                Message::Abandon => {
                    abandoned = true;
                    break;
                }
            }
        }
        if !abandoned {
            for handle in handles {
                // A worker that panicked has already lost its scenario; the rest is reported.
                let _ = handle.join();
            }
        }
        if let Some(e) = failure {
            return Err(e);
        }
        Ok(plan.report(results, coverage, interrupted, started.elapsed()))
    }

    /// The places in the selection of the scenarios to send, in corpus order.
    fn queue(&self) -> Arc<[usize]> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| matches!(s, Slot::Run(_)))
            .map(|(i, _)| i)
            .collect()
    }
}

/// What a parallel run reports while it goes.
#[derive(Debug)]
pub enum RunEvent<'a> {
    /// A scenario was sent to an implementation (for a progress display: what is running).
    Started { index: usize, id: &'a str },
    /// A scenario finished (or was found not applicable); `index` is its place in the selection.
    /// The receiver may mark it (`expected_failure`) or drop its trace.
    Finished {
        index: usize,
        result: &'a mut ScenarioResult,
    },
    /// The first interrupt: no scenario starts any more; `running` ones finish.
    Interrupted { running: usize },
}

enum Message {
    Started {
        index: usize,
    },
    Finished {
        index: usize,
        result: Box<ScenarioResult>,
        coverage: Coverage,
    },
    WorkerDone,
    Interrupt,
    Abandon,
}

/// Stops a parallel run: hand its [`Interrupter`] to a Ctrl-C handler.
#[derive(Debug)]
pub struct RunControl {
    stop: Arc<AtomicBool>,
    presses: Arc<AtomicUsize>,
    tx: Sender<Message>,
    rx: Receiver<Message>,
}

impl std::fmt::Debug for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Message::Started { .. } => "Started",
            Message::Finished { .. } => "Finished",
            Message::WorkerDone => "WorkerDone",
            Message::Interrupt => "Interrupt",
            Message::Abandon => "Abandon",
        })
    }
}

impl Default for RunControl {
    fn default() -> Self {
        let (tx, rx) = channel();
        RunControl {
            stop: Arc::new(AtomicBool::new(false)),
            presses: Arc::new(AtomicUsize::new(0)),
            tx,
            rx,
        }
    }
}

impl RunControl {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn interrupter(&self) -> Interrupter {
        Interrupter {
            stop: self.stop.clone(),
            presses: self.presses.clone(),
            tx: self.tx.clone(),
        }
    }
}

/// Interrupts a parallel run from any thread.
#[derive(Debug, Clone)]
pub struct Interrupter {
    stop: Arc<AtomicBool>,
    presses: Arc<AtomicUsize>,
    tx: Sender<Message>,
}

impl Interrupter {
    /// The first call stops starting scenarios and lets the running ones finish (each within
    /// its timeout); the next abandons them: the run returns at once with what finished.
    /// Returns whether this call abandoned the run.
    pub fn interrupt(&self) -> bool {
        self.stop.store(true, Ordering::SeqCst);
        let abandon = self.presses.fetch_add(1, Ordering::SeqCst) > 0;
        let _ = self.tx.send(if abandon {
            Message::Abandon
        } else {
            Message::Interrupt
        });
        abandon
    }

    /// Whether the run was abandoned (interrupted twice).
    pub fn abandoned(&self) -> bool {
        self.presses.load(Ordering::SeqCst) > 1
    }
}

/// One implementation taking scenarios from the shared queue until it is empty or stopped.
#[derive(Clone)]
struct Worker {
    plan: Arc<Plan>,
    queue: Arc<[usize]>,
    next: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    tx: Sender<Message>,
}

impl Worker {
    /// Starts a thread for each implementation, each working as a copy of this worker.
    fn spawn_each(
        &self,
        implementations: Vec<Box<dyn Implementation + Send>>,
    ) -> Vec<JoinHandle<()>> {
        implementations
            .into_iter()
            .map(|implementation| {
                let worker = self.clone();
                std::thread::spawn(move || worker.work(implementation))
            })
            .collect()
    }

    fn work(self, mut implementation: Box<dyn Implementation + Send>) {
        // Each implementation numbers its own requests.
        let mut seq = 0;
        while !self.stop.load(Ordering::SeqCst) {
            let Some(&index) = self.queue.get(self.next.fetch_add(1, Ordering::SeqCst)) else {
                break;
            };
            let Some(Slot::Run(scenario)) = self.plan.slots.get(index) else {
                break;
            };
            seq += 1;
            if self.tx.send(Message::Started { index }).is_err() {
                break;
            }
            let (result, coverage) = self.plan.run_one(implementation.as_mut(), seq, scenario);
            let message = Message::Finished {
                index,
                result: Box::new(result),
                coverage,
            };
            if self.tx.send(message).is_err() {
                break;
            }
        }
        // Stop the adapter before saying this worker is done.
        drop(implementation);
        let _ = self.tx.send(Message::WorkerDone);
    }
}
