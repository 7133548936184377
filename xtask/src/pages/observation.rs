//! The observation contract, as the table adapter-protocol.md embeds.

use std::fmt::Write as _;

use super::cell;

/// The observation contract as a table (`tep_check::observation::RECORDS`).
pub fn observation_table() -> String {
    let mut out = String::from(
        "| record | level | required | window | when it is absent |\n|---|---|---|---|---|\n",
    );
    for r in tep_check::observation::RECORDS {
        let _ = writeln!(
            out,
            "| {} | `{}` | {} | {} | {} |",
            r.record,
            r.level,
            cell(r.required),
            cell(r.window),
            cell(r.absent)
        );
    }
    out
}
