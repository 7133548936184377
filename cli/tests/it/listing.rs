//! The JSON of `tep check`, `tep scenarios list` and `tep invariants list` is typed: each
//! output validates against its generated schema (`docs/schemas/`, also `tep schema NAME`),
//! and the schema refuses what the type does not have.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util::tep_command;

use std::path::Path;

use serde_json::Value;

fn tep(args: &[&str]) -> (Option<i32>, Value) {
    let out = tep_command().args(args).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{args:?}: {e}: {text}"));
    (out.status.code(), value)
}

fn schema(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../docs/schemas")
        .join(format!("{name}.schema.json"));
    let mut file: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    // The committed file is what `tep schema` prints, with its "generated" comment.
    let (code, printed) = tep(&["schema", name]);
    assert_eq!(code, Some(0));
    let comment = file.as_object_mut().unwrap().remove("$comment");
    assert!(comment.is_some_and(|c| c.to_string().contains("cargo xtask docs")));
    assert!(
        printed == file,
        "{name}: docs/schemas and `tep schema` disagree"
    );
    file
}

fn assert_valid(schema: &Value, value: &Value, what: &str) {
    let validator = jsonschema::validator_for(schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{what}: {errors:#?}");
}

fn assert_refused(schema: &Value, value: &Value, what: &str) {
    let validator = jsonschema::validator_for(schema).unwrap();
    assert!(!validator.is_valid(value), "{what} was accepted");
}

#[test]
fn tep_check_json_has_a_schema_with_teeth() {
    let dir = std::env::temp_dir().join(format!("tep-listing-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let status = tep_command()
        .args([
            "run",
            "--mutant",
            "run-body-after-deny",
            "--scenario",
            "pre-deny-skips-body",
        ])
        .args(["--traces", dir.to_str().unwrap()])
        .output()
        .unwrap()
        .status;
    assert_eq!(status.code(), Some(1));
    let schema = schema("check-report");
    let trace = dir.join("pre-deny-skips-body.jsonl");
    let (code, failing) = tep(&["check", trace.to_str().unwrap(), "--format", "json"]);
    assert_eq!(code, Some(1));
    assert_eq!(failing["conformant"], false);
    assert!(failing["violations"][0]["lines"].is_array());
    assert_valid(&schema, &failing, "a failing check");
    let log = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/deepseek-harness/unknown-type.jsonl");
    let (_, from_log) = tep(&[
        "check",
        "--from",
        "deepseek-harness",
        log.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert!(
        from_log["sessionLog"]["unknownTypes"].is_array(),
        "{from_log}"
    );
    assert_valid(&schema, &from_log, "a session log's check");
    let mut extra = failing.clone();
    extra["passed"] = Value::from(3);
    assert_refused(&schema, &extra, "an unknown field");
    let mut wrong = failing.clone();
    wrong["violations"][0]["level"] = Value::from("MAY");
    assert_refused(&schema, &wrong, "an unknown level");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_lists_have_schemas_with_teeth() {
    let (code, scenarios) = tep(&["scenarios", "list", "--format", "json"]);
    assert_eq!(code, Some(0));
    let scenario_list = schema("scenario-list");
    assert_valid(&scenario_list, &scenarios, "the scenario list");
    let mut wrong = scenarios.clone();
    wrong[0]["revisions"] = Value::from(vec!["rev9"]);
    assert_refused(&scenario_list, &wrong, "an unknown revision");
    let (code, invariants) = tep(&["invariants", "list", "--format", "json"]);
    assert_eq!(code, Some(0));
    let invariant_list = schema("invariant-list");
    assert_valid(&invariant_list, &invariants, "the invariant list");
    let mut wrong = invariants.clone();
    wrong[0]["id"] = Value::from("no-such-invariant");
    assert_refused(&invariant_list, &wrong, "an unknown invariant id");
}
