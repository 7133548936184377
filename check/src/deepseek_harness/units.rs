//! The calls and Code Mode sub-calls of the open batch ("units"), in the order they started,
//! and the indexes that find the open ones without reading them all.
//!
//! A hook or dispatch event is attributed to an open unit. Looking through every unit of the
//! batch for it made each event cost as much as the batch so far: a program of 32,000
//! sub-calls took 2.3 s to read, and a batch of 64,000 calls with hooks 11 s, where they now
//! take 0.24 s and 0.7 s; a program with 32,000 sub-calls running at once, 1.9 s and now
//! 0.36 s. What is kept is bounded by the batch, as before.

use std::collections::{BTreeSet, HashMap};
use std::ops::{Index, IndexMut};

use tep_model::identity::CallId;

/// A call or Code Mode sub-call of the open batch, from its start (`tool/call`,
/// `tool/code-dispatch-start`) to its end (`tool/result`, `tool/code-dispatch`).
#[derive(Debug, Clone)]
pub(super) struct Unit {
    pub id: CallId,
    /// The `run_code` call of a sub-call.
    pub parent: Option<CallId>,
    /// The line of its end, once logged.
    pub ended: Option<usize>,
    /// The line of its first PostToolUse hook, and whether that attribution is certain (a
    /// call's commit is head of line; of several sub-calls running, the log does not say which
    /// one commits).
    pub post_since: Option<(usize, bool)>,
    /// PreToolUse hooks invoked and not answered yet.
    pub open_pre: usize,
    /// The line of its latest PreToolUse hook invocation.
    pub last_pre: Option<usize>,
}

/// The units of the open batch, by their index in start order.
#[derive(Debug, Default)]
pub(super) struct Units {
    all: Vec<Unit>,
    /// The units not ended yet.
    open: BTreeSet<usize>,
    /// The open units of each id, the latest last.
    open_by_id: HashMap<CallId, Vec<usize>>,
    /// The latest call (not sub-call) of each id.
    call_by_id: HashMap<CallId, usize>,
    /// The open sub-calls of each `run_code` call id.
    open_subs: HashMap<CallId, BTreeSet<usize>>,
}

impl Units {
    /// Forgets the batch (keeping the room it took, for the next).
    pub fn clear(&mut self) {
        self.all.clear();
        self.open.clear();
        self.open_by_id.clear();
        self.call_by_id.clear();
        self.open_subs.clear();
    }

    /// A unit starts.
    pub fn start(&mut self, id: CallId, parent: Option<CallId>) {
        let unit = self.all.len();
        self.open.insert(unit);
        self.open_by_id.entry(id.clone()).or_default().push(unit);
        match &parent {
            None => {
                self.call_by_id.insert(id.clone(), unit);
            }
            Some(parent) => {
                self.open_subs
                    .entry(parent.clone())
                    .or_default()
                    .insert(unit);
            }
        }
        self.all.push(Unit {
            id,
            parent,
            ended: None,
            post_since: None,
            open_pre: 0,
            last_pre: None,
        });
    }

    /// Ends the latest unit of that id not ended yet (a retried program numbers its sub-calls
    /// anew).
    pub fn end(&mut self, id: &CallId, line: usize) {
        let Some(open) = self.open_by_id.get_mut(id) else {
            return;
        };
        let unit = open.pop();
        if open.is_empty() {
            self.open_by_id.remove(id);
        }
        let Some(unit) = unit else {
            return;
        };
        self.all[unit].ended = Some(line);
        self.open.remove(&unit);
        if let Some(parent) = &self.all[unit].parent
            && let Some(subs) = self.open_subs.get_mut(parent)
        {
            subs.remove(&unit);
            if subs.is_empty() {
                self.open_subs.remove(parent);
            }
        }
    }

    /// The latest call (not sub-call) of that id.
    pub fn call(&self, id: &CallId) -> Option<&Unit> {
        self.call_by_id.get(id).map(|&unit| &self.all[unit])
    }

    /// The unit whose pre-execute stage is open: the latest to start of those still open (a
    /// call's ordered stages run right after its start, one call at a time).
    pub fn pre_stage(&self) -> Option<usize> {
        self.open.last().copied()
    }

    /// The unit whose post-execute stage is open, and whether that is certain: the first open
    /// call (commits are head of line), or, while it runs a program, the first of its open
    /// sub-calls whose post-execute has not begun (else the latest whose has).
    pub fn post_stage(&self) -> Option<(usize, bool)> {
        let head = *self.open.iter().find(|&&i| self.all[i].parent.is_none())?;
        // Its open sub-calls (of its id, started after it), read no further than needed: a
        // program may have thousands running at once.
        let Some(open_subs) = self.open_subs.get(&self.all[head].id) else {
            return Some((head, true));
        };
        let subs = open_subs.range(head + 1..);
        let certain = subs.clone().nth(1).is_none();
        let waiting = subs
            .clone()
            .find(|&&i| self.all[i].post_since.is_none())
            .or(subs.last());
        Some((waiting.copied().unwrap_or(head), certain))
    }
}

impl Index<usize> for Units {
    type Output = Unit;

    fn index(&self, unit: usize) -> &Unit {
        &self.all[unit]
    }
}

impl IndexMut<usize> for Units {
    fn index_mut(&mut self, unit: usize) -> &mut Unit {
        &mut self.all[unit]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What the units are asked, answered by reading every unit (how the converter answered
    /// before the indexes).
    fn pre_stage_by_scan(all: &[Unit]) -> Option<usize> {
        all.iter().rposition(|u| u.ended.is_none())
    }

    fn post_stage_by_scan(all: &[Unit]) -> Option<(usize, bool)> {
        let head = all
            .iter()
            .position(|u| u.ended.is_none() && u.parent.is_none())?;
        let subs: Vec<usize> = (head + 1..all.len())
            .filter(|&i| all[i].ended.is_none() && all[i].parent.as_ref() == Some(&all[head].id))
            .collect();
        let certain = subs.len() <= 1;
        match subs.iter().find(|&&i| all[i].post_since.is_none()) {
            Some(&i) => Some((i, certain)),
            None => Some((subs.last().copied().unwrap_or(head), certain)),
        }
    }

    fn end_by_scan(all: &mut [Unit], id: &CallId, line: usize) {
        if let Some(unit) = all
            .iter_mut()
            .rev()
            .find(|u| u.id == *id && u.ended.is_none())
        {
            unit.ended = Some(line);
        }
    }

    fn call_by_scan<'u>(all: &'u [Unit], id: &CallId) -> Option<&'u Unit> {
        all.iter().rev().find(|u| u.id == *id && u.parent.is_none())
    }

    #[derive(Debug, Clone)]
    enum Op {
        Start(u8, Option<u8>),
        End(u8),
        /// A PostToolUse hook begins for the unit the post stage names.
        Post,
        Clear,
    }

    fn op() -> impl Strategy<Value = Op> {
        // Few ids, so that they repeat (a retried program's sub-calls, a reused call id).
        prop_oneof![
            4 => (0..4u8, prop::option::of(0..3u8)).prop_map(|(id, parent)| Op::Start(id, parent)),
            3 => (0..4u8).prop_map(Op::End),
            2 => Just(Op::Post),
            1 => Just(Op::Clear),
        ]
    }

    proptest! {
        /// Whatever starts and ends, the indexes answer as reading every unit does.
        #[test]
        fn the_indexes_answer_as_a_scan_of_every_unit(ops in prop::collection::vec(op(), 0..60)) {
            let mut units = Units::default();
            let mut scanned: Vec<Unit> = Vec::new();
            let id = |n: u8| CallId::new(format!("c{n}"));
            for (line, op) in ops.into_iter().enumerate() {
                match op {
                    Op::Start(n, parent) => {
                        units.start(id(n), parent.map(id));
                        scanned.push(units[units.all.len() - 1].clone());
                    }
                    Op::End(n) => {
                        units.end(&id(n), line);
                        end_by_scan(&mut scanned, &id(n), line);
                    }
                    Op::Post => {
                        if let Some((unit, certain)) = units.post_stage() {
                            units[unit].post_since.get_or_insert((line, certain));
                            scanned[unit].post_since.get_or_insert((line, certain));
                        }
                    }
                    Op::Clear => {
                        units.clear();
                        scanned.clear();
                    }
                }
                let ended: Vec<_> = units.all.iter().map(|u| u.ended).collect();
                let expected: Vec<_> = scanned.iter().map(|u| u.ended).collect();
                prop_assert_eq!(ended, expected);
                prop_assert_eq!(units.pre_stage(), pre_stage_by_scan(&scanned));
                prop_assert_eq!(units.post_stage(), post_stage_by_scan(&scanned));
                for n in 0..4 {
                    prop_assert_eq!(
                        units.call(&id(n)).map(|u| (u.id.clone(), u.ended)),
                        call_by_scan(&scanned, &id(n)).map(|u| (u.id.clone(), u.ended))
                    );
                }
            }
        }
    }
}
