//! The checker's memory does not grow with the length of a trace: a chunk of records repeated
//! many times (a valid batch, and batches the mutator garbled) costs no more at the end than
//! after a tenth of it. Alone in its test binary, so no other test moves the resident size.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use tep_fuzz::Target;
use tep_fuzz::driver::{MAX_CHECKER_GROWTH, PROBE_RECORDS};
use tep_fuzz::mutate::Mutator;
use tep_fuzz::seeds::{SeedSet, Seeds};
use tep_fuzz::targets::{checker_memory_growth, resident_bytes};

#[test]
fn the_checker_does_not_grow_with_a_repeated_chunk() {
    if resident_bytes().is_none() {
        return; // No /proc: nothing to measure with.
    }
    let seeds = Seeds::record(SeedSet::Small);
    let traces = seeds.of(Target::Trace);
    let mut mutator = Mutator::new(7, traces);
    let mut chunks = vec![traces[0].clone()];
    // Garbled chunks the checker still reads to the end when repeated.
    while chunks.len() < 3 {
        let base = &traces[mutator.rng().usize(..traces.len())];
        let garbled = mutator.mutate(base, traces);
        if checker_memory_growth(&garbled, 1000).is_some() {
            chunks.push(garbled);
        }
    }
    for chunk in &chunks {
        let (growth, fed) = checker_memory_growth(chunk, PROBE_RECORDS).unwrap();
        assert!(fed >= PROBE_RECORDS, "{fed}");
        assert!(
            growth <= MAX_CHECKER_GROWTH,
            "grew {growth} bytes over {fed} records:\n{}",
            String::from_utf8_lossy(chunk)
        );
    }
}
