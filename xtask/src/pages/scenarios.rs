//! scenarios.md: the scenario corpus.

use std::fmt::Write as _;

use tep_check::invariants::InvariantId;
use tep_conformance::scenario::Scenario;
use tep_model::trace::Capability;

use super::{cell, header, revisions};

pub fn scenarios_page(corpus: &[Scenario]) -> String {
    let mut out = header("the scenario corpus in conformance/scenarios/");
    let _ = writeln!(out, "# Scenario corpus\n");
    let _ = writeln!(
        out,
        "{} scenarios, each a JSON file in `conformance/scenarios/` (format: [adapter-protocol.md](adapter-protocol.md#scenarios)). \
         `tep scenarios show ID` prints one; `tep scenarios export DIR` writes them all with their schema. \
         *protocol* is the adapter protocol version that has every construct the scenario uses \
         ([Versioning](adapter-protocol.md#versioning)): an adapter declaring an older one is not sent it.\n",
        corpus.len()
    );
    out.push_str(
        "| scenario | revisions | needs | protocol | what it shows |\n|---|---|---|---|---|\n",
    );
    let versions = tep_conformance::scenario::versions::versions();
    for s in corpus {
        let needs: Vec<String> = s
            .requires
            .iter()
            .map(|c: &Capability| format!("`{c}`"))
            .collect();
        let _ = writeln!(
            out,
            "| [`{id}`](#{id}) | {} | {} | {} | {} |",
            revisions(&s.revisions),
            if needs.is_empty() {
                "—".to_owned()
            } else {
                needs.join(", ")
            },
            versions.needs(s),
            cell(&s.description),
            id = s.id
        );
    }
    out.push('\n');
    for s in corpus {
        let _ = writeln!(out, "### {}\n", s.id);
        let _ = writeln!(out, "{}\n", s.description);
        let _ = writeln!(out, "- Spec: {}", s.spec);
        let calls: Vec<String> = s
            .calls
            .iter()
            .map(|c| format!("`{}` → `{}`", c.call_id, c.tool))
            .collect();
        let _ = writeln!(out, "- Batch: {}", calls.join(", "));
        let invariants: Vec<String> = s
            .exercises
            .iter()
            .map(|id: &InvariantId| format!("[`{id}`](invariants.md#{id})"))
            .collect();
        let _ = writeln!(out, "- Exercises: {}", invariants.join(", "));
        let _ = writeln!(
            out,
            "- File: [`conformance/scenarios/{id}.json`](../conformance/scenarios/{id}.json)\n",
            id = s.id
        );
    }
    out
}
