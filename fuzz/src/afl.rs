//! `tep-fuzz-afl`: one target under AFL++'s coverage-guided fuzzing. A broken property is a
//! panic, which AFL++ records as a crash. The target comes from `TEP_FUZZ_TARGET` (default:
//! trace); seeds come from `tep-fuzz --export-seeds DIR`.

fn main() {
    let target = std::env::var("TEP_FUZZ_TARGET")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(tep_fuzz::Target::Trace);
    afl::fuzz!(|data: &[u8]| {
        if let Err(broken) = tep_fuzz::targets::run(target, data) {
            panic!("{target}: {broken}");
        }
    });
}
