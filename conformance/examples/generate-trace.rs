//! Writes a generated trace ([`tep_conformance::generate`]) as JSON Lines to stdout: copies of
//! one shape until at least RECORDS records, for load tests of `tep check`.
//!
//! ```text
//! cargo run --release -p tep-conformance --example generate-trace -- SHAPE RECORDS > trace.jsonl
//! ```
//!
//! SHAPE is `corpus-mix-rev1`, `corpus-mix-rev2`, `wide-batch-N`, `long-program-N` or
//! `many-contexts-NxK`.

use anyhow::{Context, bail};
use tep_conformance::generate::{Shape, records, write_jsonl};
use tep_model::graph::Revision;

fn shape(name: &str) -> anyhow::Result<Shape> {
    let number = |s: &str| {
        s.parse::<usize>()
            .with_context(|| format!("not a number: {s}"))
    };
    Ok(match name.rsplit_once('-') {
        Some(("corpus-mix", "rev1")) => Shape::CorpusMix(Revision::Rev1),
        Some(("corpus-mix", "rev2")) => Shape::CorpusMix(Revision::Rev2),
        Some(("wide-batch", n)) => Shape::WideBatch(number(n)?),
        Some(("long-program", n)) => Shape::LongProgram(number(n)?),
        Some(("many-contexts", n)) => {
            let (calls, contexts) = n.split_once('x').context("many-contexts-NxK")?;
            Shape::ManyContexts {
                calls: number(calls)?,
                contexts: number(contexts)?,
            }
        }
        _ => bail!("unknown shape {name}"),
    })
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [name, wanted] = args.as_slice() else {
        bail!("usage: generate-trace SHAPE RECORDS");
    };
    let shape = shape(name)?;
    let wanted: usize = wanted.parse().context("RECORDS must be a number")?;
    let per_copy = records(shape)?.len().max(1);
    let written = write_jsonl(shape, wanted.div_ceil(per_copy), std::io::stdout().lock())?;
    eprintln!("{written} records of {}", shape.name());
    Ok(())
}
