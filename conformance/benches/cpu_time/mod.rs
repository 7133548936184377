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
