//! The stage-graph definitions reproduce the spec's flowcharts node for node and edge for edge.
//!
//! The Mermaid blocks are parsed out of the vendored spec files (`spec/`), so a change to either
//! side shows up here as a list of named differences.

use std::path::PathBuf;

use tep_model::graph::mermaid::{Flowchart, LabelStyle, find_mermaid_block, parse_flowchart};
use tep_model::graph::{Revision, StageGraph};

fn spec_flowchart(file: &str) -> Flowchart {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../spec")
        .join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let block = find_mermaid_block(&text)
        .unwrap_or_else(|| panic!("{} has no ```mermaid block", path.display()));
    parse_flowchart(block).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn assert_same(expected: &Flowchart, actual: &Flowchart, what: &str) {
    let diff = expected.differences(actual);
    assert!(
        diff.is_empty(),
        "{what}: the definition differs from the spec:\n  {}",
        diff.join("\n  ")
    );
    let order = expected.order_differences(actual);
    assert!(order.is_empty(), "{what}: {}", order.join("\n"));
}

#[test]
fn rev2_definition_equals_the_rev2_flowchart() {
    let spec = spec_flowchart("rev2.txt");
    assert_eq!(spec.direction, "TD");
    assert_eq!((spec.nodes.len(), spec.edges.len()), (19, 29));
    let ours = Flowchart::of(StageGraph::of(Revision::Rev2), LabelStyle::Markup);
    assert_same(&spec, &ours, "rev2");
}

#[test]
fn rev1_definition_equals_the_rev1_flowchart() {
    let spec = spec_flowchart("rev1.txt");
    assert_eq!((spec.nodes.len(), spec.edges.len()), (17, 22));
    // The flat rev1 text lost its markup; compare words, with line breaks as newlines.
    let ours = Flowchart::of(StageGraph::of(Revision::Rev1), LabelStyle::Markup).without_markup();
    assert_same(&spec, &ours, "rev1");
}

#[test]
fn rev1_markup_is_restored_only_where_rev2_has_the_same_words() {
    let rev1 = StageGraph::of(Revision::Rev1);
    let rev2 = StageGraph::of(Revision::Rev2);
    for node in rev1.nodes() {
        let Some(twin) = rev2.node(node.id) else {
            continue;
        };
        if node.label.plain_lines() == twin.label.plain_lines() {
            assert_eq!(
                node.label, twin.label,
                "{}: same words, same markup",
                node.id
            );
        }
        for code in node.label.code_names() {
            assert!(
                twin.label.code_names().any(|c| c == code),
                "{}: `{code}` is marked as code in rev1 but not in rev2",
                node.id
            );
        }
    }
}
