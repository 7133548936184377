//! The [`Recorder`] the reference pipeline writes its trace with (the model's trace records), on
//! tokio's clock.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tep_model::trace::*;

use tep_model::identity::CallId;
use tep_model::session::{EventBody, SessionEvent, SurfaceOp};

#[derive(Debug)]
struct RecorderInner {
    records: Vec<TraceRecord>,
    next_seq: u64,
    started: tokio::time::Instant,
}

/// Records a run: appends session events (assigning `seq` and `time`) and stage observations to
/// one ordered trace. Cheap to clone; clones share the trace.
#[derive(Debug, Clone)]
pub struct Recorder {
    inner: Arc<Mutex<RecorderInner>>,
}

impl Default for Recorder {
    fn default() -> Self {
        Self::new()
    }
}

impl Recorder {
    pub fn new() -> Self {
        Recorder {
            inner: Arc::new(Mutex::new(RecorderInner {
                records: Vec::new(),
                next_seq: 1,
                started: tokio::time::Instant::now(),
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, RecorderInner> {
        // A panic while holding the lock cannot leave a half-written record behind: every
        // critical section is a single push.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a stage visit.
    pub fn observe(&self, observation: Observation) {
        self.lock()
            .records
            .push(TraceRecord::Stage(Box::new(observation)));
    }

    /// Records a scripted part's mark.
    pub fn mark(&self, mark: Mark) {
        self.lock().records.push(TraceRecord::Mark(Box::new(mark)));
    }

    /// Appends a session event and returns its `seq`.
    pub fn append(
        &self,
        call: Option<&CallId>,
        body: EventBody,
        surface_op: Option<SurfaceOp>,
        source_event_seqs: Option<Vec<u64>>,
    ) -> u64 {
        let mut inner = self.lock();
        let seq = inner.next_seq;
        inner.next_seq += 1;
        let time = u64::try_from(inner.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        inner.records.push(TraceRecord::Event(Box::new(EventRecord {
            call: call.cloned(),
            event: SessionEvent {
                seq,
                time,
                body,
                surface_op,
                source_event_seqs,
            },
        })));
        seq
    }

    /// The trace so far.
    pub fn records(&self) -> Vec<TraceRecord> {
        self.lock().records.clone()
    }

    /// The session log so far.
    pub fn session_log(&self) -> Vec<SessionEvent> {
        self.lock()
            .records
            .iter()
            .filter_map(|r| match r {
                TraceRecord::Event(e) => Some(e.event.clone()),
                _ => None,
            })
            .collect()
    }

    /// The trace as JSON Lines.
    pub fn to_jsonl(&self) -> String {
        to_jsonl(&self.records())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tep_model::graph::{NodeId, Outcome};

    #[test]
    fn records_round_trip_through_json() {
        let recorder = Recorder::new();
        recorder.observe(
            Observation::at(NodeId::Pre)
                .call(&"c1".into())
                .outcome(Outcome::Deny)
                .reason("no"),
        );
        recorder.append(
            Some(&"c1".into()),
            EventBody::TodoWrite(tep_model::session::TodoWrite { todos: vec![] }),
            None,
            None,
        );
        let jsonl = recorder.to_jsonl();
        let back: Vec<TraceRecord> = jsonl
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        assert_eq!(back, recorder.records());
        assert!(jsonl.starts_with(
            r#"{"kind":"stage","node":"pre","call":"c1","outcome":"deny","reason":"no"}"#
        ));
    }
}
