//! How big a scenario may be. A scenario comes from a file or from the adapter protocol, so it is
//! input like any other: these limits keep running one (in the reference or in an adapter)
//! bounded in time and memory. They sit far above what the corpus uses (at most 6 calls,
//! 4 body steps, 6 binding calls per program, 3 retry attempts, 500 ms of virtual time per step)
//! and are checked by [`Scenario::validate`]. `docs/limits.md` lists them with every other limit.

use super::{BodyStep, ProgramStep, Scenario, ScenarioError, WrapperSpec};

/// Bytes of a scenario's id, which names files (`<id>.json`, `--traces DIR/<id>.jsonl`; most file
/// systems allow 255 bytes) and starts every error about the scenario.
pub const MAX_ID_BYTES: usize = 128;
/// Calls in the batch, counting every sub-call of its `run_code` programs.
pub const MAX_CALLS: usize = 64;
/// Steps of one program; each binding call of an `all` group counts as a step.
pub const MAX_PROGRAM_STEPS: usize = 64;
/// Steps of one tool body.
pub const MAX_BODY_STEPS: usize = 16;
/// Entries of each extension-point list (`pre`, `guards`, `wrappers`, `post`, `observers`).
pub const MAX_EXTENSIONS: usize = 8;
/// Dispatches of one call: the product of the `attempts` of every retry wrapper. No virtual time
/// need pass between attempts, so only this bounds the work (and trace) of a failing body.
pub const MAX_DISPATCHES_PER_CALL: u64 = 4;
/// Every duration a scenario names (`sleep`, `asyncMs`, `delayMs`, `timeoutMs`), in milliseconds:
/// the virtual time a whole scenario may take (`scripted::VIRTUAL_TIME_LIMIT`, one hour).
pub const MAX_DURATION_MS: u64 = 3_600_000;
/// How deep the scenario's JSON nests (objects and arrays, the scenario's own object counting
/// one). A `run` request is the scenario one level deeper, and `tep reference-adapter` reads
/// requests with serde_json's recursion limit (128): every valid scenario's request is readable.
pub const MAX_NESTING: usize = 64;
/// Bytes of every string of what the implementation runs (the scenario but its `id`,
/// `description`, `spec`, `revisions`, `requires`, `exercises` and `expect`): texts, contents,
/// ids, object keys. A trace quotes them over and over (a context text in every call's
/// records, an argument in every stage's identity).
pub const MAX_TEXT_BYTES: usize = 256;
/// Bytes of what the implementation runs, written as compact JSON. With the counts above this
/// keeps every scenario's trace under the answer limit (`adapter::MAX_ANSWER_BYTES`, 16 MiB):
/// the largest we could build is about 6 MB (`docs/limits.md`; the test
/// `the_largest_scenarios_answer_within_the_answer_limit`).
pub const MAX_RUNNABLE_BYTES: usize = 16 * 1024;

/// The fields of a scenario that describe it rather than run: no trace quotes them, and they
/// hold no construct of the scenario language (`fuzz_stats`).
pub const DESCRIPTIVE_FIELDS: &[&str] = &[
    "id",
    "description",
    "spec",
    "revisions",
    "requires",
    "exercises",
    "expect",
];

/// Checks a scenario against the limits. The error names the field and the limit.
pub fn check_scenario(scenario: &Scenario) -> Result<(), ScenarioError> {
    check_id(scenario)?;
    let fail = |message: String| ScenarioError {
        id: scenario.id.clone(),
        message: format!("{message} (docs/limits.md)"),
    };
    check_extensions(scenario).map_err(fail)?;
    check_calls(scenario).map_err(fail)?;
    let value = serde_json::to_value(scenario).map_err(|e| fail(e.to_string()))?;
    let nesting = nesting(&value);
    if nesting > MAX_NESTING {
        return Err(fail(format!(
            "the scenario nests {nesting} deep; at most {MAX_NESTING} levels are allowed"
        )));
    }
    let serde_json::Value::Object(fields) = value else {
        return Ok(());
    };
    check_runnable(fields).map_err(fail)
}

/// The id against [`MAX_ID_BYTES`]. An error must name its scenario: an empty or huge id
/// cannot, so it gets a stand-in.
fn check_id(scenario: &Scenario) -> Result<(), ScenarioError> {
    if scenario.id.is_empty() || scenario.id.len() > MAX_ID_BYTES {
        let shown: String = scenario.id.chars().take(32).collect();
        return Err(ScenarioError {
            id: if shown.is_empty() {
                "<no id>".to_owned()
            } else {
                format!("{shown}...")
            },
            message: format!(
                "`id` has {} bytes; from 1 to {MAX_ID_BYTES} are allowed (docs/limits.md)",
                scenario.id.len()
            ),
        });
    }
    Ok(())
}

/// The message of a list `field` with `n` entries (`what`) over its `limit`.
fn over_limit(field: &str, n: usize, limit: usize, what: &str) -> String {
    format!("`{field}` has {n} {what}; at most {limit} are allowed")
}

/// A duration `field` of `ms` milliseconds against [`MAX_DURATION_MS`]; the error is the message.
fn check_duration(field: String, ms: u64) -> Result<(), String> {
    if ms > MAX_DURATION_MS {
        Err(format!(
            "`{field}` is {ms} ms; at most {MAX_DURATION_MS} ms (one hour of virtual time) is allowed"
        ))
    } else {
        Ok(())
    }
}

/// A tool body `field` against [`MAX_BODY_STEPS`] and its sleeps against [`MAX_DURATION_MS`].
fn check_body(field: String, steps: &[BodyStep]) -> Result<(), String> {
    if steps.len() > MAX_BODY_STEPS {
        return Err(over_limit(&field, steps.len(), MAX_BODY_STEPS, "steps"));
    }
    for (k, step) in steps.iter().enumerate() {
        if let BodyStep::Sleep(ms) = step {
            check_duration(format!("{field}[{k}].sleep"), *ms)?;
        }
    }
    Ok(())
}

/// The extension-point lists against [`MAX_EXTENSIONS`], the retry wrappers against
/// [`MAX_DISPATCHES_PER_CALL`], and the durations of wrappers, tools and observers; the error is
/// the message.
fn check_extensions(scenario: &Scenario) -> Result<(), String> {
    let lists = [
        ("pre", scenario.pre.len()),
        ("guards", scenario.guards.len()),
        ("wrappers", scenario.wrappers.len()),
        ("post", scenario.post.len()),
        ("observers", scenario.observers.len()),
    ];
    for (field, n) in lists {
        if n > MAX_EXTENSIONS {
            return Err(over_limit(field, n, MAX_EXTENSIONS, "entries"));
        }
    }
    let mut dispatches: u64 = 1;
    for (i, wrapper) in scenario.wrappers.iter().enumerate() {
        if let WrapperSpec::Retry { attempts, delay_ms } = wrapper {
            check_duration(format!("wrappers[{i}].delayMs"), *delay_ms)?;
            dispatches = dispatches.saturating_mul(u64::from((*attempts).max(1)));
            if dispatches > MAX_DISPATCHES_PER_CALL {
                return Err(format!(
                    "`wrappers[{i}].attempts` is {attempts}, which makes {dispatches} or more dispatches per call with the retry wrappers before it; at most {MAX_DISPATCHES_PER_CALL} are allowed"
                ));
            }
        }
    }
    for (i, tool) in scenario.tools.iter().enumerate() {
        if let Some(ms) = tool.timeout_ms {
            check_duration(format!("tools[{i}].timeoutMs"), ms)?;
        }
    }
    for (i, observer) in scenario.observers.iter().enumerate() {
        check_duration(format!("observers[{i}].asyncMs"), observer.async_ms)?;
    }
    Ok(())
}

/// The calls of the batch against [`MAX_CALLS`] (their programs' sub-calls included), their
/// programs against [`MAX_PROGRAM_STEPS`], and their bodies; the error is the message.
fn check_calls(scenario: &Scenario) -> Result<(), String> {
    let mut calls = scenario.calls.len();
    if calls > MAX_CALLS {
        return Err(over_limit("calls", calls, MAX_CALLS, "calls"));
    }
    for (i, call) in scenario.calls.iter().enumerate() {
        check_body(format!("calls[{i}].body"), &call.body)?;
        let Some(program) = &call.program else {
            continue;
        };
        let mut steps = 0;
        for (k, step) in program.iter().enumerate() {
            let bindings = match step {
                ProgramStep::Call(c) => std::slice::from_ref(c),
                ProgramStep::All(cs) => cs.as_slice(),
                _ => &[],
            };
            steps += bindings.len().max(1);
            calls += bindings.len();
            if steps > MAX_PROGRAM_STEPS {
                return Err(format!(
                    "`calls[{i}].program` has more than {MAX_PROGRAM_STEPS} steps (binding calls of an `all` group count one each); at most {MAX_PROGRAM_STEPS} are allowed"
                ));
            }
            if calls > MAX_CALLS {
                return Err(format!(
                    "the batch has more than {MAX_CALLS} calls counting the sub-calls of its programs (at `calls[{i}].program[{k}]`); at most {MAX_CALLS} are allowed"
                ));
            }
            for (j, binding) in bindings.iter().enumerate() {
                let field = match step {
                    ProgramStep::All(_) => format!("calls[{i}].program[{k}].all[{j}].body"),
                    _ => format!("calls[{i}].program[{k}].call.body"),
                };
                check_body(field, &binding.body)?;
            }
        }
    }
    Ok(())
}

/// The runnable part of a scenario (its fields but [`DESCRIPTIVE_FIELDS`]) against
/// [`MAX_TEXT_BYTES`] and [`MAX_RUNNABLE_BYTES`]; the error is the message.
fn check_runnable(fields: serde_json::Map<String, serde_json::Value>) -> Result<(), String> {
    let runnable: serde_json::Map<String, serde_json::Value> = fields
        .into_iter()
        .filter(|(k, _)| !DESCRIPTIVE_FIELDS.contains(&k.as_str()))
        .collect();
    if let Some((place, len)) = longest_text(&runnable) {
        return Err(format!(
            "`{place}` is a text of {len} bytes; at most {MAX_TEXT_BYTES} are allowed"
        ));
    }
    let bytes = serde_json::Value::Object(runnable).to_string().len();
    if bytes > MAX_RUNNABLE_BYTES {
        return Err(format!(
            "what the scenario runs (all but its {}) is {bytes} bytes of JSON; at most {MAX_RUNNABLE_BYTES} are allowed",
            DESCRIPTIVE_FIELDS.join(", ")
        ));
    }
    Ok(())
}

/// The first string or key over [`MAX_TEXT_BYTES`] (where it is, as `calls[2].body[0].return`,
/// and its length). Iterative, like [`nesting`].
fn longest_text(fields: &serde_json::Map<String, serde_json::Value>) -> Option<(String, usize)> {
    let mut stack: Vec<(String, &serde_json::Value)> =
        fields.iter().rev().map(|(k, v)| (k.clone(), v)).collect();
    while let Some((place, v)) = stack.pop() {
        match v {
            serde_json::Value::String(text) if text.len() > MAX_TEXT_BYTES => {
                return Some((place, text.len()));
            }
            serde_json::Value::Array(items) => {
                stack.extend(
                    items
                        .iter()
                        .enumerate()
                        .rev()
                        .map(|(i, item)| (format!("{place}[{i}]"), item)),
                );
            }
            serde_json::Value::Object(map) => {
                for (k, item) in map.iter().rev() {
                    if k.len() > MAX_TEXT_BYTES {
                        return Some((format!("{place} (a key)"), k.len()));
                    }
                    stack.push((format!("{place}.{k}"), item));
                }
            }
            _ => {}
        }
    }
    None
}

/// How deep `value` nests: 0 for a scalar, 1 for an object or array of scalars. Iterative, so a
/// deep value cannot overflow the stack.
fn nesting(value: &serde_json::Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 0usize)];
    while let Some((v, depth)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &serde_json::Value>> = match v {
            serde_json::Value::Array(items) => Box::new(items.iter()),
            serde_json::Value::Object(map) => Box::new(map.values()),
            _ => continue,
        };
        deepest = deepest.max(depth + 1);
        stack.extend(children.map(|c| (c, depth + 1)));
    }
    deepest
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A corpus scenario with `edit` applied to its JSON.
    fn edited(id: &str, edit: impl FnOnce(&mut serde_json::Value)) -> Result<(), ScenarioError> {
        let (_, text) = crate::scenario::corpus_files()
            .iter()
            .find(|(file, _)| file.trim_end_matches(".json") == id)
            .unwrap_or_else(|| panic!("no scenario {id}"));
        let mut value: serde_json::Value =
            serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}"));
        edit(&mut value);
        Scenario::from_json(&value.to_string()).map(|_| ())
    }

    fn message(result: Result<(), ScenarioError>) -> String {
        match result {
            Ok(()) => panic!("the scenario was accepted"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn the_corpus_is_within_the_limits() {
        for scenario in crate::scenario::corpus().unwrap_or_else(|e| panic!("{e}")) {
            assert_eq!(check_scenario(&scenario), Ok(()), "{}", scenario.id);
        }
    }

    #[test]
    fn an_empty_or_huge_id_is_refused_with_a_stand_in_name() {
        // Found by the fuzzer: "scenario : the id must be kebab-case ASCII" named nothing.
        let e = message(edited("allow-runs-body", |v| v["id"] = "".into()));
        assert_eq!(
            e,
            "scenario <no id>: `id` has 0 bytes; from 1 to 128 are allowed (docs/limits.md)"
        );
        let e = message(edited("allow-runs-body", |v| {
            v["id"] = "a".repeat(129).into()
        }));
        assert!(
            e.starts_with(&format!(
                "scenario {}...: `id` has 129 bytes",
                "a".repeat(32)
            )),
            "{e}"
        );
    }

    #[test]
    fn a_huge_retry_count_is_refused_naming_the_field() {
        let e = message(edited("retry-dispatches-again", |v| {
            v["wrappers"][1]["attempts"] = u32::MAX.into();
        }));
        assert!(
            e.starts_with("scenario retry-dispatches-again: `wrappers[1].attempts` is 4294967295"),
            "{e}"
        );
        assert!(e.contains("at most 4 are allowed"), "{e}");
    }

    #[test]
    fn nested_retries_multiply() {
        let e = message(edited("retry-dispatches-again", |v| {
            let retry = serde_json::json!({"kind": "retry", "attempts": 3});
            v["wrappers"] = serde_json::json!([retry, retry]);
        }));
        assert!(e.contains("`wrappers[1].attempts` is 3"), "{e}");
        assert!(e.contains("9 or more dispatches per call"), "{e}");
    }

    #[test]
    fn a_huge_observer_delay_is_refused() {
        let e = message(edited("tools-result-is-synchronous", |v| {
            v["observers"][0]["asyncMs"] = u64::MAX.into();
        }));
        assert!(
            e.contains("`observers[0].asyncMs` is 18446744073709551615 ms; at most 3600000 ms"),
            "{e}"
        );
    }

    #[test]
    fn long_bodies_programs_and_lists_are_refused() {
        let e = message(edited("allow-runs-body", |v| {
            v["calls"][0]["body"] = serde_json::json!(vec![serde_json::json!({"sleep": 1}); 17]);
        }));
        assert!(
            e.contains("`calls[0].body` has 17 steps; at most 16 are allowed"),
            "{e}"
        );
        let e = message(edited("allow-runs-body", |v| {
            v["calls"][0]["body"] = serde_json::json!([{"sleep": 3_600_001u64}]);
        }));
        assert!(e.contains("`calls[0].body[0].sleep` is 3600001 ms"), "{e}");
        let e = message(edited("allow-runs-body", |v| {
            v["pre"] = serde_json::json!(vec![serde_json::json!({"id": "p"}); 9]);
        }));
        assert!(e.contains("`pre` has 9 entries; at most 8"), "{e}");
        let e = message(edited("code-mode-every-path", |v| {
            let log = serde_json::json!({"log": "x"});
            v["calls"][0]["program"] = serde_json::json!(vec![log; 65]);
        }));
        assert!(
            e.contains("`calls[0].program` has more than 64 steps"),
            "{e}"
        );
    }

    /// `allow-runs-body` whose first call returns a value nesting `depth` arrays.
    pub(crate) fn nested_return(depth: usize) -> serde_json::Value {
        let (_, text) = crate::scenario::corpus_files()
            .iter()
            .find(|(file, _)| *file == "allow-runs-body.json")
            .unwrap_or_else(|| panic!("no allow-runs-body"));
        let mut v: serde_json::Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}"));
        v["id"] = "deep-return".into();
        if let Some(c) = v["expect"]["calls"]["c1"].as_object_mut() {
            c.remove("content");
        }
        let mut deep = serde_json::json!([]);
        for _ in 1..depth {
            deep = serde_json::json!([deep]);
        }
        v["calls"][0]["body"] = serde_json::json!([{ "return": deep }]);
        v
    }

    #[test]
    fn nesting_past_the_limit_is_refused() {
        // The scenario object, `calls`, the call, `body`, the step: 5 levels above the value.
        let ok = Scenario::from_json(&nested_return(MAX_NESTING - 5).to_string());
        assert!(ok.is_ok(), "{ok:?}");
        let e =
            message(Scenario::from_json(&nested_return(MAX_NESTING - 4).to_string()).map(|_| ()));
        assert!(
            e.contains("the scenario nests 65 deep; at most 64 levels are allowed"),
            "{e}"
        );
    }

    #[test]
    fn sub_calls_count_towards_the_call_limit() {
        let e = message(edited("code-mode-every-path", |v| {
            // 64 program steps, but 64 sub-calls beside the batch's own calls.
            let group = serde_json::json!({"all": vec![serde_json::json!({"tool": "read"}); 32]});
            v["calls"][0]["program"] = serde_json::json!([group.clone(), group]);
        }));
        assert!(
            e.contains("more than 64 calls counting the sub-calls of its programs"),
            "{e}"
        );
    }

    #[test]
    fn long_texts_are_refused_where_they_are_run_not_where_they_describe() {
        let long = "x".repeat(MAX_TEXT_BYTES + 1);
        let e = message(edited("allow-runs-body", |v| {
            v["calls"][0]["body"] = serde_json::json!([{ "return": long }]);
        }));
        assert!(
            e.contains("`calls[0].body[0].return` is a text of 257 bytes; at most 256 are allowed"),
            "{e}"
        );
        let e = message(edited("allow-runs-body", |v| {
            v["calls"][0]["arguments"] = serde_json::json!({ long.clone(): 1 });
        }));
        assert!(
            e.contains("`calls[0].arguments (a key)` is a text of 257"),
            "{e}"
        );
        // A description is not run: it may be long.
        assert_eq!(
            edited("allow-runs-body", |v| v["description"] =
                long.clone().into()),
            Ok(())
        );
        let at_the_limit = "x".repeat(MAX_TEXT_BYTES);
        assert_eq!(
            edited("allow-runs-body", |v| {
                v["calls"][0]["body"] = serde_json::json!([{ "return": at_the_limit }]);
            }),
            Ok(())
        );
    }

    #[test]
    fn a_scenario_that_runs_too_much_json_is_refused() {
        let e = message(edited("allow-runs-body", |v| {
            let many: Vec<String> = (0..100).map(|i| format!("{i:0>200}")).collect();
            v["calls"][0]["arguments"] = serde_json::json!({ "many": many });
        }));
        assert!(
            e.contains("bytes of JSON; at most 16384 are allowed"),
            "{e}"
        );
    }
}
