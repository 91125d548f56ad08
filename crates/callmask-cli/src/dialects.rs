//! `callmask dialects`: the table of built-in dialects (names, families, output shapes,
//! detection markers, sources), as text, as names only, or as the Markdown table
//! `docs/dialects.md` carries.

use std::process::ExitCode;

use callmask::Dialect;
use clap::Args;

use crate::BadInput;

/// Arguments of `callmask dialects`.
#[derive(Debug, Args)]
pub(crate) struct DialectsArgs {
    /// Print the names only, one per line.
    #[arg(long, conflicts_with = "markdown")]
    names: bool,
    /// Print the Markdown table of `docs/dialects.md`.
    #[arg(long)]
    markdown: bool,
}

/// The `--dialect` help: the number of built-in dialects, from the dialect table, and where
/// their names are (`callmask dialects`), not the names themselves.
pub(crate) fn dialect_help() -> String {
    format!(
        "Tool-call dialect: one of the {} built-in ones (`callmask dialects` lists and describes \
         them), the path of a grammar file, or (`generate`) `auto`: the one the model's chat \
         template shows",
        Dialect::table().len(),
    )
}

/// `callmask prompt --dialect` help, as [`dialect_help`].
pub(crate) fn prompt_dialect_help() -> String {
    format!(
        "Dialect whose built-in prompt template to render: one of the {} built-in ones \
         (`callmask dialects` lists them)",
        Dialect::table().len(),
    )
}

/// The Markdown table of the built-in dialects (one row each, in the table's order).
pub(crate) fn markdown() -> String {
    let mut out = String::from(
        "| dialect | model family | output | detected by (chat template) |\n|---|---|---|---|\n",
    );
    for d in Dialect::table() {
        let esc = |s: &str| s.replace('|', "\\|");
        let detect = if d.detect.is_empty() {
            "(give the name)".to_owned()
        } else {
            d.detect
                .iter()
                .map(|g| {
                    g.iter()
                        .map(|m| format!("`{}`", esc(m)))
                        .collect::<Vec<_>>()
                        .join(" + ")
                })
                .collect::<Vec<_>>()
                .join(" or ")
        };
        let name = if d.aliases.is_empty() {
            format!("`{}`", d.name)
        } else {
            format!("`{}` (= {})", d.name, d.aliases.join(", "))
        };
        out += &format!(
            "| {name} | {} | {} | {detect} |\n",
            esc(d.family),
            esc(d.output)
        );
    }
    out
}

pub(crate) fn dialects(args: &DialectsArgs) -> Result<ExitCode, BadInput> {
    if args.names {
        for n in Dialect::builtin_names() {
            println!("{n}");
        }
    } else if args.markdown {
        print!("{}", markdown());
    } else {
        for d in Dialect::table() {
            println!("{}: {}", d.name, d.family);
            println!("  output: {}", d.output);
            if !d.aliases.is_empty() {
                println!("  also named: {}", d.aliases.join(", "));
            }
            for s in d.sources {
                println!("  source: {s}");
            }
        }
        for r in Dialect::refused() {
            println!("{}: not supported: {}", r.name, r.reason);
        }
    }
    Ok(ExitCode::SUCCESS)
}
