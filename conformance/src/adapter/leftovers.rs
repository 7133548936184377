use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use rustix::process::{Pid, Signal, WaitOptions, kill_process, waitpid};

/// Set by [`adopt`]: orphans are reparented to this process.
static ADOPTING: AtomicBool = AtomicBool::new(false);
/// Adapters tokio has not reaped yet: children of ours that are not orphans.
static ADAPTERS: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());

pub(super) fn adopt() -> std::io::Result<()> {
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))?;
    ADOPTING.store(true, Ordering::SeqCst);
    Ok(())
}

/// Spawns an adapter with the set of adapters locked, and adds it: a sweep or a reaping
/// (which hold the lock) never sees an adapter that is not tracked yet.
pub(super) fn spawn_tracked(
    spawn: impl FnOnce() -> std::io::Result<tokio::process::Child>,
) -> std::io::Result<tokio::process::Child> {
    let mut adapters = ADAPTERS.lock().unwrap_or_else(PoisonError::into_inner);
    let child = spawn()?;
    if let Some(pid) = child.id() {
        adapters.insert(pid);
    }
    Ok(child)
}

/// A marker value no other adapter process of this run has.
pub(super) fn new_marker() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    )
}

/// Whether `pid`'s environment (as it was started) holds `JOB_MARKER=marker`.
fn carries(pid: u32, marker: &str) -> bool {
    let wanted = format!("{}={marker}", super::JOB_MARKER);
    std::fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|env| env.split(|&b| b == 0).any(|v| v == wanted.as_bytes()))
}

/// Reaps the orphans that have exited (zombies reparented to us), now.
///
/// Only our own children are looked at (`/proc/self/task/*/children`), never the machine's
/// process table: this runs after every scenario, and its cost must not grow with the
/// processes of others. A child that is neither a tracked adapter nor exited is left as it is
/// (`WNOHANG`).
pub(super) fn reap() {
    if !ADOPTING.load(Ordering::SeqCst) {
        return;
    }
    // Held throughout: no adapter is spawned (and so none unknown to us) meanwhile.
    let adapters = ADAPTERS.lock().unwrap_or_else(PoisonError::into_inner);
    if !proc_is_ours() {
        return;
    }
    for pid in children_of(std::process::id()) {
        if !adapters.contains(&pid)
            && let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw)
        {
            let _ = waitpid(Some(pid), WaitOptions::NOHANG);
        }
    }
}

/// The adapter has been reaped.
pub(super) fn forget(pid: Option<u32>) {
    if let Some(pid) = pid {
        ADAPTERS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&pid);
    }
}

/// A process as `/proc/<pid>/stat` shows it. The start time tells a reused pid apart.
struct Process {
    parent: u32,
    group: u32,
    session: u32,
    zombie: bool,
    started: u64,
}

/// Whether `/proc` numbers processes as we do. A `/proc` of another PID namespace (entered with
/// `unshare --pid` and no remount) does not: its parent links would name strangers as our
/// children. Such a table is not read at all.
fn proc_is_ours() -> bool {
    std::fs::read_link("/proc/self")
        .ok()
        .and_then(|link| link.to_str()?.parse::<u32>().ok())
        == Some(std::process::id())
}

/// The children of every thread of `pid` (a reparented orphan's parent is whichever of our
/// threads the kernel picked).
fn children_of(pid: u32) -> Vec<u32> {
    static CHILD_LISTS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let me = std::process::id();
    // A kernel built without CONFIG_PROC_CHILDREN has no child lists: the whole process table
    // is read instead, as it was before there were child lists.
    if !*CHILD_LISTS
        .get_or_init(|| std::path::Path::new(&format!("/proc/{me}/task/{me}/children")).exists())
    {
        return std::fs::read_dir("/proc").map_or_else(
            |_| Vec::new(),
            |dir| {
                dir.filter_map(Result::ok)
                    .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
                    .filter(|&child| process(child).is_some_and(|p| p.parent == pid))
                    .collect()
            },
        );
    }
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|child| child.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

fn process(pid: u32) -> Option<Process> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid ... starttime(22) ...`; comm may hold ')' and spaces.
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(Process {
        zombie: *fields.first()? == "Z",
        parent: fields.get(1)?.parse().ok()?,
        group: fields.get(2)?.parse().ok()?,
        session: fields.get(3)?.parse().ok()?,
        started: fields.get(19)?.parse().ok()?,
    })
}

/// `roots` and every process below them, as `/proc` shows them now: a walk down the kernel's
/// child lists (`/proc/<pid>/task/*/children`), never a scan of the machine's process table,
/// so what it costs is the size of our own tree, whatever else runs on the machine. Every
/// process a sweep may touch is in it: the adapters and their descendants, the orphans
/// reparented to us (a subreaper) and theirs, and the processes an adapter had below it when it
/// ended (passed as roots: reparented elsewhere when we are not a subreaper).
fn tree(roots: impl IntoIterator<Item = u32>) -> BTreeMap<u32, Process> {
    let mut table = BTreeMap::new();
    if !proc_is_ours() {
        return table;
    }
    let mut frontier: Vec<u32> = roots.into_iter().collect();
    while let Some(pid) = frontier.pop() {
        if table.contains_key(&pid) {
            continue;
        }
        let Some(p) = process(pid) else { continue };
        table.insert(pid, p);
        frontier.extend(children_of(pid));
    }
    table
}

/// The process groups to kill among `found`: those of processes in a session other than
/// ours. Our own session and group are read from `/proc` like theirs, not asked of the
/// kernel: in a PID namespace entered without a session of its own (`unshare --pid`, some
/// CI sandboxes) `getsid`/`getpgrp` answer 0, and both `/proc` and the comparison agree
/// on that. Without our own entry no group is killed; ours, the adapters' and the
/// invisible 0 (or init's 1) never are.
fn setsid_groups(
    table: &BTreeMap<u32, Process>,
    me: u32,
    found: &[u32],
    adapters: &BTreeSet<u32>,
) -> BTreeSet<u32> {
    let Some(own) = table.get(&me) else {
        return BTreeSet::new();
    };
    found
        .iter()
        .filter_map(|pid| table.get(pid))
        .filter(|p| p.session != own.session)
        .map(|p| p.group)
        .filter(|group| *group > 1 && *group != own.group && !adapters.contains(group))
        .collect()
}

/// `roots` (those that exist) and every process below them.
fn with_descendants(
    table: &BTreeMap<u32, Process>,
    roots: impl IntoIterator<Item = u32>,
) -> BTreeSet<u32> {
    let mut children: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for (&pid, p) in table {
        children.entry(p.parent).or_default().push(pid);
    }
    let mut found: BTreeSet<u32> = roots
        .into_iter()
        .filter(|pid| table.contains_key(pid))
        .collect();
    let mut frontier: Vec<u32> = found.iter().copied().collect();
    while let Some(parent) = frontier.pop() {
        for &child in children.get(&parent).map(Vec::as_slice).unwrap_or_default() {
            if found.insert(child) {
                frontier.push(child);
            }
        }
    }
    found
}

/// The processes below `adapter` now, with their start times.
pub(super) fn snapshot(adapter: u32) -> Vec<(u32, u64)> {
    let table = tree([adapter]);
    with_descendants(&table, [adapter])
        .into_iter()
        .filter(|&pid| pid != adapter)
        .filter_map(|pid| Some((pid, table.get(&pid)?.started)))
        .collect()
}

/// Kills what an ended adapter left: the processes of `below` still running, everything
/// below them and, after [`adopt`], the orphans reparented to us that are its own (in its
/// process group, or started with its `marker`); reaps them. Another adapter's orphans are
/// left alone.
pub(super) fn end(below: &[(u32, u64)], adapter: Option<u32>, marker: &str) {
    sweep(below, |pid, p| {
        adapter.is_some_and(|a| p.group == a) || carries(pid, marker)
    });
}

/// Kills and reaps every orphan reparented to us, whoever started it.
pub(super) fn end_all() {
    sweep(&[], |_, _| true);
}

fn sweep(below: &[(u32, u64)], ours: impl Fn(u32, &Process) -> bool) {
    let me = std::process::id();
    // A few rounds: a process may fork while its siblings are being killed.
    let mut quiet = false;
    for _ in 0..50 {
        let table = tree(std::iter::once(me).chain(below.iter().map(|&(pid, _)| pid)));
        let adapters = ADAPTERS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let survivors = below
            .iter()
            .filter(|(pid, started)| table.get(pid).is_some_and(|p| p.started == *started))
            .map(|&(pid, _)| pid);
        let orphans: Vec<u32> = if ADOPTING.load(Ordering::SeqCst) {
            table
                .iter()
                .filter(|(pid, p)| p.parent == me && !adapters.contains(pid))
                .filter(|(pid, p)| ours(**pid, p))
                .map(|(&pid, _)| pid)
                .collect()
        } else {
            Vec::new()
        };
        let found: Vec<u32> = with_descendants(&table, survivors.chain(orphans.clone()))
            .into_iter()
            .filter(|pid| *pid != me && !adapters.contains(pid))
            .collect();
        let targets: Vec<u32> = found
            .iter()
            .copied()
            .filter(|pid| table.get(pid).is_some_and(|p| !p.zombie))
            .collect();
        for pid in &targets {
            if let Some(pid) = i32::try_from(*pid).ok().and_then(Pid::from_raw) {
                let _ = kill_process(pid, Signal::KILL);
            }
        }
        // A process found in a session of its own (it called `setsid`) is killed with its
        // whole process group at once: a daemon that forks and exits in a loop changes pid
        // faster than `/proc` can be read, but keeps its group, and the scan may show only
        // the hop that just exited (a zombie), not its child. Every member of such a
        // session descends from the found tree, so no process of ours, of another job or
        // of the user's shell (all in our session) is in that group.
        let groups = setsid_groups(&table, me, &found, &adapters);
        for &group in &groups {
            if let Some(group) = i32::try_from(group).ok().and_then(Pid::from_raw) {
                let _ = rustix::process::kill_process_group(group, Signal::KILL);
            }
        }
        for pid in orphans {
            if let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) {
                let _ = waitpid(Some(pid), WaitOptions::NOHANG);
            }
        }
        // A group just killed is looked at again: its member may have forked meanwhile.
        // (Its zombie orphans are reaped above, so a dead group ends the rounds.)
        // The kernel's child lists may miss a child forked while they are read: the end is
        // taken only when a second walk right after also finds nothing.
        if targets.is_empty() && groups.is_empty() {
            if quiet {
                return;
            }
            quiet = true;
            continue;
        }
        quiet = false;
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process(group: u32, session: u32) -> Process {
        Process {
            parent: 1,
            group,
            session,
            zombie: false,
            started: 0,
        }
    }

    #[test]
    fn only_groups_of_other_sessions_are_killed_and_never_ours() {
        // As in a PID namespace entered without a session: ours reads 0 in `/proc`.
        let me = 10;
        let table = BTreeMap::from([
            (me, process(0, 0)),
            (11, process(0, 0)),   // a child in our session
            (12, process(12, 12)), // a daemon that called setsid
            (13, process(12, 12)), // its child, same group
            (14, process(14, 14)), // an adapter's own session
            (15, process(1, 15)),  // a group no one may kill
        ]);
        let found = [11, 12, 13, 14, 15];
        let adapters = BTreeSet::from([14]);
        assert_eq!(
            setsid_groups(&table, me, &found, &adapters),
            BTreeSet::from([12])
        );
        // Our own group, even seen in another session, is never killed.
        let table = BTreeMap::from([(me, process(7, 7)), (12, process(7, 9))]);
        assert!(setsid_groups(&table, me, &[12], &BTreeSet::new()).is_empty());
        // Without our own entry, no group at all.
        let table = BTreeMap::from([(12, process(12, 12))]);
        assert!(setsid_groups(&table, me, &[12], &BTreeSet::new()).is_empty());
    }

    #[test]
    fn the_tree_holds_our_descendants_and_no_stranger() {
        let mut shell = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & wait"])
            .spawn()
            .unwrap();
        let me = std::process::id();
        // The grandchild appears once the shell has forked it.
        let mut grandchild = None;
        for _ in 0..500 {
            let table = tree([me]);
            grandchild = table
                .iter()
                .find(|(_, p)| p.parent == shell.id())
                .map(|(&pid, _)| pid);
            if grandchild.is_some() {
                assert!(table.contains_key(&shell.id()));
                // Init, and any process not below us, is never looked at.
                assert!(me == 1 || !table.contains_key(&1));
                // Nothing but us and what is below us.
                assert!(
                    table
                        .iter()
                        .all(|(pid, p)| *pid == me || table.contains_key(&p.parent))
                );
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = shell.kill();
        let _ = shell.wait();
        if let Some(pid) = grandchild
            .and_then(|p| i32::try_from(p).ok())
            .and_then(Pid::from_raw)
        {
            let _ = kill_process(pid, Signal::KILL);
        }
        assert!(grandchild.is_some(), "the shell's child was never found");
    }

    #[test]
    fn the_process_table_shows_this_process() {
        let table = tree([std::process::id()]);
        let me = table.get(&std::process::id());
        assert!(me.is_some_and(|p| !p.zombie && p.started > 0));
    }
}
