//! What the checker knows about the open batch and each of its calls: the facts every rule
//! reads, updated by the core after the rules have seen a record (so a rule always compares a
//! record with what came before it).

use std::cell::{Cell, OnceCell, RefCell};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Weak};

use serde_json::Value;
use tep_model::graph::{NodeId, Outcome, StageGraph};
use tep_model::identity::{CallId, Identity, parse_arguments};
use tep_model::result::{ContentBlock, ToolResult};

use crate::invariants::InvariantId;
use crate::observation::CallFacts;

use super::bit;

thread_local! {
    static SCANNED: Cell<u64> = const { Cell::new(0) };
}

/// How many call states, sub-call ids and queued contexts the checks have scanned on this
/// thread so far. Looking a call up is not a scan; walking a list is. A per-record step that
/// scans makes this grow faster than the records as batches widen: the tests count it.
#[cfg(any(test, feature = "testing"))]
pub fn scanned() -> u64 {
    SCANNED.with(Cell::get)
}

/// An iterator over part of a batch's state that counts what it yields ([`scanned`]).
#[derive(Debug, Clone)]
pub(crate) struct Scan<I>(I);

impl<I: Iterator> Iterator for Scan<I> {
    type Item = I::Item;

    fn next(&mut self) -> Option<I::Item> {
        let item = self.0.next();
        if item.is_some() {
            SCANNED.with(|n| n.set(n.get() + 1));
        }
        item
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl<I: DoubleEndedIterator> DoubleEndedIterator for Scan<I> {
    fn next_back(&mut self) -> Option<I::Item> {
        let item = self.0.next_back();
        if item.is_some() {
            SCANNED.with(|n| n.set(n.get() + 1));
        }
        item
    }
}

impl<I: ExactSizeIterator> ExactSizeIterator for Scan<I> {}

/// A list of a batch's state whose scans are counted: indexing is not, iterating is.
#[derive(Debug, Clone)]
pub(crate) struct Counted<T>(Vec<T>);

impl<T> Default for Counted<T> {
    fn default() -> Self {
        Counted(Vec::new())
    }
}

impl<T> Counted<T> {
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn push(&mut self, item: T) {
        self.0.push(item);
    }

    pub fn get(&self, i: usize) -> Option<&T> {
        self.0.get(i)
    }

    pub fn last(&self) -> Option<&T> {
        self.0.last()
    }

    pub fn iter(&self) -> Scan<std::slice::Iter<'_, T>> {
        Scan(self.0.iter())
    }

    /// The items from `start` on.
    pub fn iter_from(&self, start: usize) -> Scan<std::slice::Iter<'_, T>> {
        Scan(self.0[start.min(self.0.len())..].iter())
    }

    /// The items before `end`.
    pub fn iter_to(&self, end: usize) -> Scan<std::slice::Iter<'_, T>> {
        Scan(self.0[..end.min(self.0.len())].iter())
    }
}

impl<T> From<Vec<T>> for Counted<T> {
    fn from(items: Vec<T>) -> Self {
        Counted(items)
    }
}

impl<T> std::ops::Index<usize> for Counted<T> {
    type Output = T;

    fn index(&self, i: usize) -> &T {
        &self.0[i]
    }
}

impl<T> std::ops::IndexMut<usize> for Counted<T> {
    fn index_mut(&mut self, i: usize) -> &mut T {
        &mut self.0[i]
    }
}

/// The sections of the ordered lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Section {
    Prepare,
    Commit,
}

impl Section {
    pub fn name(self) -> &'static str {
        match self {
            Section::Prepare => "prepare",
            Section::Commit => "commit",
        }
    }
}

/// One call of the batch, or a Code Mode sub-call of one: who it is, then what the checker
/// has learned of it, in named parts that follow the call's life.
#[derive(Debug)]
pub(crate) struct Call {
    pub id: CallId,
    /// The tool called (learned from `tool/call`, or a sub-call's first identity).
    pub name: String,
    /// `None` when the recording does not say.
    pub safe: Option<bool>,
    /// The graph the call walks: the pipeline, or Code Mode for a sub-call.
    pub graph: &'static StageGraph,
    /// For a Code Mode sub-call: its `run_code` call.
    pub parent: Option<usize>,
    pub facts: CallFacts,
    pub walk: CallWalk,
    pub start: CallStart,
    pub decisions: Decisions,
    pub approval: ApprovalState,
    pub body: BodyState,
    pub commit: CommitState,
    pub presented: Presented,
    pub code: CodeModeState,
    /// Invariants already reported for this call: one fault is reported once.
    pub reported: u128,
}

/// Where the call's walk of its graph is.
#[derive(Debug)]
pub(crate) struct CallWalk {
    pub position: NodeId,
    pub outcome: Option<Outcome>,
    pub position_line: usize,
    /// Every node visited (bit per node).
    pub visited: u32,
    /// The last node visited that is not a side branch, whether the walk moved there or not.
    pub last_node: NodeId,
    pub last_line: usize,
    /// Where the call really is while the walk holds it at `position` after a refused step
    /// (a detour the graph does not allow): its next steps start here, not at `position`.
    pub detour: Option<NodeId>,
}

/// How the call began.
#[derive(Debug, Default)]
pub(crate) struct CallStart {
    /// `tool/call`: line and seq.
    pub logged: Option<(usize, u64)>,
    /// The arguments the model sent, or a sub-call's first identity's.
    pub args: Option<Arguments>,
    /// The first identity's token and line (only the token is compared later: a whole
    /// identity kept per call would hold its arguments, up to a trace line's size).
    pub first_token: Option<(String, usize)>,
    /// The last identity the call was handed that matched the above (nothing of it differed,
    /// [`Call::identity_diff`]); cleared whenever they change. The reader shares one identity
    /// among the records that repeat it byte for byte, so a stage handed this one matches
    /// without comparing. Held weakly: the value is not kept, and while this is held its
    /// address names no other identity.
    pub matched: Option<Weak<Identity>>,
}

impl CallStart {
    /// Whether `identity` is the one [`CallStart::matched`] holds.
    pub fn handed_before(&self, identity: &Arc<Identity>) -> bool {
        self.matched
            .as_ref()
            .is_some_and(|m| std::ptr::eq(m.as_ptr(), Arc::as_ptr(identity)))
    }
}

/// A call's arguments: the text the model sent (`tool/call`), or a value already parsed (a
/// sub-call's).
#[derive(Debug)]
pub(crate) enum Arguments {
    /// The text, and its value once a comparison needed it.
    Text(String, OnceCell<Value>),
    Value(Value),
}

thread_local! {
    /// The text of the last value [`Arguments::is`] wrote out (its buffer, reused).
    static WRITTEN: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A buffer [`WRITTEN`] grew past this is let go after its comparison: a trace line may be
/// 16 MiB, and a thread's buffer outlives the trace.
const MAX_WRITTEN: usize = 64 * 1024;

/// The capacity [`WRITTEN`] keeps on this thread.
#[cfg(test)]
fn written_capacity() -> usize {
    WRITTEN.with_borrow(Vec::capacity)
}

impl Arguments {
    /// The text the model sent, kept as it is: it is parsed only if a comparison needs it.
    pub fn text(text: &str) -> Self {
        Arguments::Text(text.to_owned(), OnceCell::new())
    }

    /// Whether these are `value`, as the model's text parses ([`parse_arguments`]). A value
    /// written out as compact JSON that is the text byte for byte is what the text parses to
    /// (serde_json reads back what it writes): the text is parsed only when they differ.
    pub fn is(&self, value: &Value) -> bool {
        match self {
            Arguments::Value(v) => v == value,
            Arguments::Text(text, parsed) => {
                if let Some(v) = parsed.get() {
                    return v == value;
                }
                let written = WRITTEN.with_borrow_mut(|buf| {
                    buf.clear();
                    let same =
                        serde_json::to_writer(&mut *buf, value).is_ok() && buf == text.as_bytes();
                    if buf.capacity() > MAX_WRITTEN {
                        *buf = Vec::new();
                    }
                    same
                });
                written || parsed.get_or_init(|| parse_arguments(text)) == value
            }
        }
    }
}

/// What of an identity a stage was handed differs from what the call started with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IdentityDiff<'a> {
    pub call_id: bool,
    /// Differs from the name the call was logged with (none known yet: not compared).
    pub name: bool,
    /// Differs from the arguments the model sent (none known yet: not compared).
    pub arguments: bool,
    /// The first token and its line, when the token differs from it.
    pub token: Option<(&'a str, usize)>,
}

impl IdentityDiff<'_> {
    pub fn is_empty(&self) -> bool {
        !self.call_id && !self.name && !self.arguments && self.token.is_none()
    }
}

/// What the stages around the body decided, each with its line.
#[derive(Debug, Default)]
pub(crate) struct Decisions {
    pub pre: Option<usize>,
    /// The line where pre-execute decided `ask`.
    pub pre_asked: Option<usize>,
    /// The decision that denied the call.
    pub denied: Option<usize>,
    /// The first throw before the commit: the stage that threw and its line.
    pub threw: Option<(NodeId, usize)>,
    pub post: Option<(Outcome, usize)>,
    pub finalized: Option<usize>,
    /// `finalizeContent`'s candidate, whether the callback threw, and the line.
    pub candidate: Option<(Arc<ToolResult>, bool, usize)>,
}

/// The approval prompt for an `ask`.
#[derive(Debug, Default)]
pub(crate) struct ApprovalState {
    pub asked: Option<usize>,
    pub decided: Option<(Outcome, usize)>,
    pub outcome: Option<Outcome>,
}

/// The tool body between its dispatch and its return to the wrappers.
#[derive(Debug, Default)]
pub(crate) struct BodyState {
    /// The body runs since this line (from its dispatch to its return to the wrappers).
    pub since: Option<usize>,
    /// The dispatch (line) whose body has not recorded `body-settled` yet.
    pub steps: Option<usize>,
    /// The body's `body-settled` mark is the call's last record: the next `around` is what the
    /// innermost wrapper got back.
    pub just_settled: bool,
}

/// The result: announced, then committed.
#[derive(Debug, Default)]
pub(crate) struct CommitState {
    /// The outcome `tools/result` announced, and the line.
    pub notified: Option<(Arc<ToolResult>, usize)>,
    /// `tool/result` line.
    pub result: Option<usize>,
    /// The recorded `tool/result`'s text and `isError`: the model-facing outcome.
    pub recorded: Option<(RecordedText, bool)>,
    pub started: bool,
}

/// The text of a recorded `tool/result`, what a next request's tool message is compared with
/// (only a result of one text block is: how a harness joins several is its own). Kept without
/// a copy when it is the announced outcome's text, as every valid record's is.
#[derive(Debug)]
pub(crate) enum RecordedText {
    /// One text block, the one the announced outcome has.
    Announced,
    /// One text block, another than the announced outcome's.
    Own(String),
    /// Not one text block.
    NotOne,
}

impl RecordedText {
    /// The text of `blocks` (a recorded result's content), given the announced outcome's.
    pub fn of<'a>(
        mut blocks: impl Iterator<Item = &'a ContentBlock>,
        announced: Option<&ToolResult>,
    ) -> Self {
        let (Some(ContentBlock::Text { text }), None) = (blocks.next(), blocks.next()) else {
            return RecordedText::NotOne;
        };
        match announced.map(|r| r.content.as_slice()) {
            Some([ContentBlock::Text { text: a }]) if a == text => RecordedText::Announced,
            _ => RecordedText::Own(text.clone()),
        }
    }
}

/// What observers and presenters saw of the call.
#[derive(Debug, Default)]
pub(crate) struct Presented {
    /// `observer-settled` marks: line, the observer's work in ms, the observer.
    pub observer_marks: Vec<(usize, u64, String)>,
    pub call: u32,
    pub result: u32,
}

/// A `run_code` call's program runs, or a sub-call's place in one.
#[derive(Debug, Default)]
pub(crate) struct CodeModeState {
    /// How many times the body was dispatched (a retry runs a `run_code` program again).
    pub dispatches: u32,
    /// For a sub-call: the dispatch of its `run_code` call's body it belongs to.
    pub parent_dispatch: u32,
    /// For a sub-call: its place among the sub-calls of that run of the program, from 1.
    pub number: usize,
    /// For a `run_code` call: its sub-calls in the order they started, and the one still
    /// running (started, no `tools/result` yet).
    pub sub_calls: Counted<usize>,
    pub open_sub: Option<usize>,
    pub dispatch_started: Option<usize>,
    pub dispatched: Option<usize>,
    /// The binding's settlement in the program.
    pub binding: Option<usize>,
}

impl Call {
    pub fn new(
        id: CallId,
        name: String,
        safe: Option<bool>,
        graph: &'static StageGraph,
        line: usize,
    ) -> Self {
        Call {
            id,
            name,
            safe,
            graph,
            parent: None,
            facts: CallFacts::default(),
            walk: CallWalk {
                position: graph.entry(),
                outcome: None,
                position_line: line,
                visited: bit(graph.entry()),
                last_node: graph.entry(),
                last_line: line,
                detour: None,
            },
            start: CallStart::default(),
            decisions: Decisions::default(),
            approval: ApprovalState::default(),
            body: BodyState::default(),
            commit: CommitState::default(),
            presented: Presented::default(),
            code: CodeModeState::default(),
            reported: 0,
        }
    }

    pub fn is_sub_call(&self) -> bool {
        self.parent.is_some()
    }

    pub fn has_visited(&self, node: NodeId) -> bool {
        self.walk.visited & bit(node) != 0
    }

    pub fn was_reported(&self, id: InvariantId) -> bool {
        self.reported & (1u128 << (id as u32)) != 0
    }

    /// Marks `id` reported; false if it already was.
    pub fn mark_reported(&mut self, id: InvariantId) -> bool {
        let first = !self.was_reported(id);
        self.reported |= 1u128 << (id as u32);
        first
    }

    /// Whether the call is a concurrency-safe one, or may be (the recording does not say).
    pub fn may_overlap(&self) -> bool {
        self.safe != Some(false)
    }

    /// What of `identity` differs from what the call started with.
    pub fn identity_diff(&self, identity: &Identity) -> IdentityDiff<'_> {
        IdentityDiff {
            call_id: identity.call_id != self.id,
            name: !self.name.is_empty() && identity.name != self.name,
            arguments: self
                .start
                .args
                .as_ref()
                .is_some_and(|args| !args.is(&identity.arguments)),
            token: self
                .start
                .first_token
                .as_ref()
                .filter(|(first, _)| *first != identity.token)
                .map(|(first, line)| (first.as_str(), *line)),
        }
    }

    /// The text of the recorded `tool/result`, when it is one text block.
    pub fn recorded_text(&self) -> Option<&str> {
        match &self.commit.recorded.as_ref()?.0 {
            RecordedText::Announced => match self.commit.notified.as_ref()?.0.content.as_slice() {
                [block] => Some(block.as_text()),
                _ => None,
            },
            RecordedText::Own(text) => Some(text),
            RecordedText::NotOne => None,
        }
    }

    /// "line 7 (tools/execute, call c2)": the position, for messages.
    pub fn at_position(&self) -> String {
        at(
            self.walk.position_line,
            self.walk.position,
            self.walk.outcome,
            &self.id,
        )
    }
}

/// How a visit is described in messages: "line 7 (toolBody, call c2)", in the trace's words.
pub(crate) fn at(line: usize, node: NodeId, outcome: Option<Outcome>, call: &CallId) -> String {
    match outcome {
        Some(o) => format!("line {line} ({node} {o}, call {call})"),
        None => format!("line {line} ({node}, call {call})"),
    }
}

/// The calls of one assistant message, and what holds across them.
#[derive(Debug)]
pub(crate) struct Batch {
    pub model_line: usize,
    /// The batch's calls (`..top`), then the Code Mode sub-calls as they appear.
    pub calls: Counted<Call>,
    pub index: HashMap<CallId, usize>,
    /// The call [`Batch::find`] found last.
    last_found: Cell<usize>,
    pub top: usize,
    /// The `allResults` record.
    pub settled: Option<usize>,
    /// The line of the `tool/result` that completed the batch.
    pub completed: Option<usize>,
    /// The first call (in model order) without a `tool/call`, and without a `tool/result`.
    pub first_unstarted: usize,
    pub first_unresulted: usize,
    /// The call holding the ordered lane, its section, and the line it took it.
    pub lane: Option<(usize, Section, usize)>,
    /// Calls whose body runs, and those of them that may not overlap.
    pub running_bodies: BTreeSet<usize>,
    pub running_exclusive_bodies: BTreeSet<usize>,
    /// Exclusive calls that started and have no result yet.
    pub open_exclusive: BTreeSet<usize>,
    /// The contexts the announced outcomes carry, in FIFO order (call, text, line announced),
    /// computed when the batch completes; the next expected is at `fifo_next`.
    pub fifo: Counted<(usize, String, usize)>,
    pub fifo_next: usize,
    /// Contexts passed over when a later one came first (that was reported then): still owed,
    /// but no longer what the FIFO waits for, so that one context out of place is one report.
    pub skipped: Vec<(usize, String, usize)>,
    /// Contexts injected before the batch completed (already a violation): they are not
    /// expected again.
    pub early_contexts: Vec<(usize, String)>,
    /// The last call a context was injected for, and the first injection's line.
    pub last_injected: Option<usize>,
    pub first_context: Option<usize>,
    /// Every context injected in the batch, in trace order: the call, the text, the line.
    pub injected: Vec<(usize, String, usize)>,
}

/// How an injected context matches the FIFO of announced contexts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ContextMatch {
    /// It is the next one expected.
    Next,
    /// It is expected, but later: the ones before it were skipped.
    Later(usize),
    /// It was passed over when a later one came first, and comes now.
    Skipped(usize),
    /// No announced outcome carried it.
    Unannounced,
}

/// A closed batch's lists, emptied and kept for the next batch: every batch would otherwise
/// allocate them anew (a batch is opened every few records).
#[derive(Debug, Default)]
pub(crate) struct Spare {
    calls: Vec<Call>,
    index: HashMap<CallId, usize>,
}

/// A batch with more calls than this does not leave its lists for the next one: what is kept
/// between batches stays small whatever the trace.
const MAX_SPARE_CALLS: usize = 256;

impl Batch {
    /// A batch declared at `model_line`, without calls yet ([`Batch::declare`]), in `spare`'s
    /// lists.
    pub fn open(model_line: usize, spare: Spare) -> Self {
        let Spare { calls, index } = spare;
        debug_assert!(calls.is_empty() && index.is_empty());
        Batch {
            model_line,
            top: 0,
            calls: calls.into(),
            index,
            last_found: Cell::new(0),
            settled: None,
            completed: None,
            first_unstarted: 0,
            first_unresulted: 0,
            lane: None,
            running_bodies: BTreeSet::new(),
            running_exclusive_bodies: BTreeSet::new(),
            open_exclusive: BTreeSet::new(),
            fifo: Counted::default(),
            fifo_next: 0,
            skipped: Vec::new(),
            early_contexts: Vec::new(),
            last_injected: None,
            first_context: None,
            injected: Vec::new(),
        }
    }

    /// Adds the next call the batch declares (before any sub-call appears); false, and the
    /// batch unchanged, when it declared that id already.
    pub fn declare(&mut self, call: Call) -> bool {
        debug_assert_eq!(self.top, self.calls.len());
        if self.index.contains_key(&call.id) {
            return false;
        }
        self.index.insert(call.id.clone(), self.calls.len());
        self.calls.push(call);
        self.top += 1;
        true
    }

    /// The batch's lists, emptied, for the next batch (none past [`MAX_SPARE_CALLS`]).
    pub fn into_spare(self) -> Spare {
        let Batch {
            calls, mut index, ..
        } = self;
        let mut calls = calls.0;
        if calls.capacity() > MAX_SPARE_CALLS {
            return Spare::default();
        }
        calls.clear();
        index.clear();
        Spare { calls, index }
    }

    /// The index of a call (or sub-call) of the batch. Consecutive records mostly belong to one
    /// call: it is compared before the id is hashed.
    pub fn find(&self, id: &CallId) -> Option<usize> {
        let last = self.last_found.get();
        if self.calls.get(last).is_some_and(|c| c.id == *id) {
            return Some(last);
        }
        let found = self.index.get(id).copied();
        if let Some(i) = found {
            self.last_found.set(i);
        }
        found
    }

    /// Indexes a call added to the batch; a later call with the id of an earlier one (a
    /// sub-call of a program run again) is the one the id names from then on.
    pub fn index_call(&mut self, id: CallId, i: usize) {
        self.index.insert(id, i);
        self.last_found.set(i);
    }

    /// The calls of the batch (not the sub-calls), with their indexes.
    pub fn top_level(&self) -> impl Iterator<Item = (usize, &Call)> {
        self.calls.iter_to(self.top).enumerate()
    }

    /// The sub-calls, with their indexes.
    pub fn sub_calls(&self) -> impl Iterator<Item = (usize, &Call)> {
        self.calls
            .iter_from(self.top)
            .enumerate()
            .map(|(k, c)| (self.top + k, c))
    }

    /// Whether every call of the batch has its `tool/result`.
    pub fn is_complete(&self) -> bool {
        self.first_unresulted >= self.top
    }

    /// How a context of call `i` with `text` matches the FIFO.
    pub fn match_context(&self, i: usize, text: &str) -> ContextMatch {
        match self
            .fifo
            .iter_from(self.fifo_next)
            .position(|(c, t, _)| *c == i && t == text)
        {
            Some(0) => ContextMatch::Next,
            Some(k) => ContextMatch::Later(self.fifo_next + k),
            None => match self
                .skipped
                .iter()
                .position(|(c, t, _)| *c == i && t == text)
            {
                Some(k) => ContextMatch::Skipped(k),
                None => ContextMatch::Unannounced,
            },
        }
    }

    /// The contexts still owed: those passed over, then the rest of the FIFO.
    pub fn owed_contexts(&self) -> impl Iterator<Item = &(usize, String, usize)> {
        self.skipped
            .iter()
            .chain(self.fifo.iter_from(self.fifo_next))
    }

    /// Takes an injected context off the FIFO (resynchronising on it when it came early).
    pub fn consume_context(&mut self, i: usize, text: &str) {
        if !self.is_complete() {
            self.early_contexts.push((i, text.to_owned()));
            return;
        }
        match self.match_context(i, text) {
            ContextMatch::Next => self.fifo_next += 1,
            // The FIFO goes on from the one that came: those before it are passed over.
            ContextMatch::Later(k) => {
                for j in self.fifo_next..k {
                    let owed = self.fifo[j].clone();
                    self.skipped.push(owed);
                }
                self.fifo_next = k + 1;
            }
            ContextMatch::Skipped(k) => {
                self.skipped.remove(k);
            }
            ContextMatch::Unannounced => {}
        }
    }

    pub fn advance_cursors(&mut self) {
        while self.first_unstarted < self.top
            && self.calls[self.first_unstarted].start.logged.is_some()
        {
            self.first_unstarted += 1;
        }
        while self.first_unresulted < self.top
            && self.calls[self.first_unresulted].commit.result.is_some()
        {
            self.first_unresulted += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_kept_as_text_are_the_values_they_parse_to_however_written() {
        use serde_json::json;
        let value = json!({"path": "a.txt", "n": 1.5, "list": [1, "two", null]});
        for text in [
            r#"{"list":[1,"two",null],"n":1.5,"path":"a.txt"}"#,
            // Not as serde_json writes it: spaces, another key order.
            r#"{ "path": "a.txt", "n": 1.5, "list": [1, "two", null] }"#,
        ] {
            let args = Arguments::text(text);
            assert!(args.is(&value), "{text}");
            // Asked again (the second time from the parsed value, when it was parsed).
            assert!(args.is(&value), "{text}");
            assert!(!args.is(&json!({"path": "b.txt", "n": 1.5, "list": [1, "two", null]})));
            assert!(!args.is(&json!(text)), "{text}");
        }
        // As the loop parses them: an empty text is `{}`, an invalid one the text itself.
        assert!(Arguments::text("").is(&json!({})));
        assert!(Arguments::text("{oops").is(&json!("{oops")));
        assert!(!Arguments::text("{oops").is(&json!({})));
        assert!(Arguments::Value(json!([1])).is(&json!([1])));
        assert!(!Arguments::Value(json!([1])).is(&json!([2])));
    }

    #[test]
    fn the_buffer_a_comparison_writes_into_is_kept_only_while_small() {
        use serde_json::json;
        assert!(Arguments::text(r#"{"a":1}"#).is(&json!({"a": 1})));
        let small = written_capacity();
        assert!(small > 0);
        // A long value is written out, then its buffer let go.
        let long = "x".repeat(MAX_WRITTEN * 4);
        assert!(Arguments::text(&format!(r#"["{long}"]"#)).is(&json!([long])));
        assert_eq!(written_capacity(), 0);
    }

    #[test]
    fn a_scan_counts_each_item_it_yields_from_either_end_and_knows_its_length() {
        let list: Counted<u32> = vec![1, 2, 3, 4].into();
        let before = scanned();
        let mut scan = list.iter();
        assert_eq!(scan.size_hint(), (4, Some(4)));
        assert_eq!(scan.len(), 4);
        assert_eq!((scan.next(), scan.next_back()), (Some(&1), Some(&4)));
        assert_eq!(scan.len(), 2);
        assert_eq!(scanned() - before, 2);
        assert_eq!(scan.rev().copied().collect::<Vec<_>>(), [3, 2]);
        assert_eq!(scanned() - before, 4);
        // Indexing is a lookup, not a scan; an exhausted scan counts nothing more.
        assert_eq!(list[2], 3);
        let mut empty = list.iter_from(9);
        assert_eq!((empty.next(), empty.next_back()), (None, None));
        assert_eq!(scanned() - before, 4);
    }
}
