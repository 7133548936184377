//! The CPU clocks the benches read, so that a busy machine's other processes do not count.
//! (A folder of its own: cargo would take a `benches/*.rs` file for a bench.)

use std::time::Duration;

/// The time this thread has run on a CPU (Linux's schedstat). `None` elsewhere: the benches
/// then use wall time.
pub fn on_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let nanos = stat.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(nanos))
}

/// The CPU time of every thread of this process, those that ended included.
#[cfg(unix)]
pub fn process_cpu() -> Option<Duration> {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Some(Duration::new(
        u64::try_from(t.tv_sec).ok()?,
        u32::try_from(t.tv_nsec).ok()?,
    ))
}

#[cfg(not(unix))]
pub fn process_cpu() -> Option<Duration> {
    None
}

/// `floor`'s time over `check`'s, measured in `rounds` pairs run back to back (this thread's
/// CPU time, else wall time; each pass timed on its second run in a row), the two taking turns
/// to go first, sorted. A pair shares the machine's state of the moment, so a noisy neighbour
/// moves both of its halves: on this 2-core machine the ratio of two medians measured apart
/// moved from 0.47 to 0.63 between runs where the pairs' medians were 0.50 and 0.52.
pub fn paired_ratios(rounds: usize, mut floor: impl FnMut(), mut check: impl FnMut()) -> Vec<f64> {
    let timed = |f: &mut dyn FnMut()| {
        // Warm, as criterion's iterations are: run once untimed, so that neither pass is timed
        // with caches and branch predictors the other one left.
        f();
        let (cpu, wall) = (on_cpu(), std::time::Instant::now());
        f();
        match (cpu, on_cpu()) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => wall.elapsed(),
        }
        .as_secs_f64()
    };
    let mut ratios: Vec<f64> = (0..rounds)
        .map(|round| {
            let (f, c) = if round % 2 == 0 {
                let f = timed(&mut floor);
                (f, timed(&mut check))
            } else {
                let c = timed(&mut check);
                (timed(&mut floor), c)
            };
            f / c.max(1e-9)
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    ratios
}

/// How many pairs [`paired_ratios`] runs: one in criterion's `--test` mode (CI: each bench
/// once, no timing judged), else `rounds`.
pub fn pairs(rounds: usize) -> usize {
    if std::env::args().any(|a| a == "--test") {
        1
    } else {
        rounds
    }
}

/// "median 0.50x (the middle half 0.48–0.52x, 21 pairs)", of sorted ratios.
pub fn describe_ratios(sorted: &[f64]) -> String {
    if sorted.is_empty() {
        return "no pairs".to_owned();
    }
    let at = |q: usize| {
        sorted
            .get(q * (sorted.len() - 1) / 4)
            .copied()
            .unwrap_or(0.0)
    };
    let pairs = match sorted.len() {
        1 => "1 pair".to_owned(),
        n => format!("{n} pairs"),
    };
    format!(
        "median {:.2}x (the middle half {:.2}–{:.2}x, {pairs})",
        at(2),
        at(1),
        at(3)
    )
}
