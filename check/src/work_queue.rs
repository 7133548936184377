//! Work shared in order between worker threads and the thread that hands it out (a trace's
//! chunks, a session log's): items are numbered as they are queued; a worker takes the oldest
//! no one has taken, and so does the handing thread rather than wait for one; they come back
//! in their order. A round-robin of one channel per worker lets a worker the scheduler leaves
//! out hold up every item after its own, and the handing thread waits meanwhile.

use std::collections::{BTreeMap, VecDeque};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// A worker panicked (the scope raises it once the queue is closed): the item it held will not
/// come back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WorkerGone;

/// Runs `body` with a [`Pool`] whose items `work` is done to on one worker thread for each
/// of `states` (each worker's own, such as a channel only it reads), and on this thread by
/// [`Pool::next`]. The workers stop when `body` returns, or unwinds.
pub(crate) fn with_workers<T: Send, S: Send, R>(
    states: Vec<S>,
    work: impl Fn(&mut S, &mut T) + Sync,
    body: impl FnOnce(Pool<'_, T>) -> R,
) -> R {
    let jobs = Jobs::default();
    let (done, worked) = channel::<Done<T>>();
    std::thread::scope(|scope| {
        // The queue closes however this thread stops, before the scope joins the workers.
        let _closed = Closed(&jobs);
        for mut state in states {
            let (jobs, done, work) = (&jobs, done.clone(), &work);
            scope.spawn(move || {
                let _gone = Gone(&done);
                while let Some((n, mut item)) = jobs.wait() {
                    work(&mut state, &mut item);
                    if done.send(Done::Worked(n, item)).is_err() {
                        break;
                    }
                }
            });
        }
        // Only the workers say that an item will not come.
        drop(done);
        body(Pool {
            jobs: &jobs,
            worked,
            ready: BTreeMap::new(),
            queued: 0,
            handed: 0,
        })
    })
}

/// The items queued and not handed back yet.
pub(crate) struct Pool<'j, T> {
    jobs: &'j Jobs<T>,
    worked: Receiver<Done<T>>,
    /// Items done before their turn, by number.
    ready: BTreeMap<usize, T>,
    queued: usize,
    handed: usize,
}

impl<T> Pool<'_, T> {
    /// Queues `item`, after every item queued before it.
    pub(crate) fn queue(&mut self, item: T) {
        self.jobs.add(self.queued, item);
        self.queued += 1;
    }

    /// The oldest item not handed back yet, done. Rather than wait, this thread does the
    /// oldest item no worker has taken (`work`): on a busy machine the workers may not run for
    /// a while. `None` when none is queued.
    pub(crate) fn next(&mut self, mut work: impl FnMut(&mut T)) -> Option<Result<T, WorkerGone>> {
        if self.pending() == 0 {
            return None;
        }
        let n = self.handed;
        loop {
            if let Some(item) = self.ready.remove(&n) {
                self.handed += 1;
                return Some(Ok(item));
            }
            let done = match self.worked.try_recv() {
                Ok(done) => done,
                Err(_) => match self.jobs.take() {
                    Some((k, mut item)) => {
                        work(&mut item);
                        Done::Worked(k, item)
                    }
                    // Every item up to `n` is taken: one comes back.
                    None => self.worked.recv().unwrap_or(Done::Gone),
                },
            };
            match done {
                Done::Worked(k, item) => {
                    self.ready.insert(k, item);
                }
                Done::Gone => return Some(Err(WorkerGone)),
            }
        }
    }

    /// How many items are queued and not handed back yet.
    pub(crate) fn pending(&self) -> usize {
        self.queued - self.handed
    }
}

/// The items queued and not taken yet, in order, each with its number.
struct Jobs<T> {
    queue: Mutex<Queue<T>>,
    added: Condvar,
}

impl<T> Default for Jobs<T> {
    fn default() -> Self {
        Jobs {
            queue: Mutex::new(Queue {
                items: VecDeque::new(),
                closed: false,
            }),
            added: Condvar::new(),
        }
    }
}

struct Queue<T> {
    items: VecDeque<(usize, T)>,
    closed: bool,
}

impl<T> Jobs<T> {
    fn lock(&self) -> MutexGuard<'_, Queue<T>> {
        // Nothing panics while holding the lock (the work is done outside it).
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn add(&self, n: usize, item: T) {
        self.lock().items.push_back((n, item));
        self.added.notify_one();
    }

    /// The oldest item no one has taken, if any.
    fn take(&self) -> Option<(usize, T)> {
        self.lock().items.pop_front()
    }

    /// The oldest item no one has taken, once there is one; `None` once closed.
    fn wait(&self) -> Option<(usize, T)> {
        let mut queue = self.lock();
        loop {
            if queue.closed {
                return None;
            }
            if let Some(job) = queue.items.pop_front() {
                return Some(job);
            }
            queue = self
                .added
                .wait(queue)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// Closes the queue when dropped: the workers stop.
struct Closed<'j, T>(&'j Jobs<T>);

impl<T> Drop for Closed<'_, T> {
    fn drop(&mut self) {
        let mut queue = self.0.lock();
        queue.closed = true;
        queue.items.clear();
        drop(queue);
        self.0.added.notify_all();
    }
}

/// What a worker hands back.
enum Done<T> {
    /// Item `n`, done.
    Worked(usize, T),
    Gone,
}

/// Says [`Done::Gone`] when its worker unwinds.
struct Gone<'d, T>(&'d Sender<Done<T>>);

impl<T> Drop for Gone<'_, T> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = self.0.send(Done::Gone);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::panic::AssertUnwindSafe;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    /// Every item comes back once, done, in the order queued, whoever did it: with no worker
    /// (this thread does all), or several.
    #[test]
    fn items_come_back_in_order_whoever_does_them() {
        for workers in 0..4 {
            let states = vec![(); workers];
            let got = with_workers(
                states,
                |(), item: &mut (usize, bool)| item.1 = true,
                |mut pool| {
                    let mut got = Vec::new();
                    for i in 0..1000 {
                        pool.queue((i, false));
                        if pool.pending() > 8 {
                            got.push(pool.next(|item| item.1 = true).unwrap().unwrap());
                        }
                    }
                    while let Some(item) = pool.next(|item| item.1 = true) {
                        got.push(item.unwrap());
                    }
                    got
                },
            );
            let want: Vec<(usize, bool)> = (0..1000).map(|i| (i, true)).collect();
            assert_eq!(got, want, "{workers} workers");
        }
    }

    /// A worker that panics is reported, not waited for (the other worker, idle, would keep
    /// the channel open forever); the scope then raises its panic.
    #[test]
    fn a_worker_that_panics_is_reported_not_waited_for() {
        let taken = AtomicBool::new(false);
        let mut seen = None;
        let run = std::panic::catch_unwind(AssertUnwindSafe(|| {
            with_workers(
                vec![(); 2],
                |(), _: &mut usize| {
                    taken.store(true, Ordering::SeqCst);
                    panic!("a worker's bug");
                },
                |mut pool| {
                    pool.queue(0);
                    // A worker has taken the item: this thread waits for it.
                    while !taken.load(Ordering::SeqCst) {
                        std::thread::yield_now();
                    }
                    seen = Some(pool.next(|_| {}));
                },
            );
        }));
        assert!(run.is_err(), "the scope raises the worker's panic");
        assert_eq!(seen, Some(Some(Err(WorkerGone))));
    }
}
