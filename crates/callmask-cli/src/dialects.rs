//! `callmask dialects`: the table of built-in dialects (names, families, output shapes,
//! detection markers, sources), as text, as names only, or as the Markdown table
//! `docs/dialects.md` carries; or a dialect file derived from a model's chat template
//! (`--from-template`).

use std::process::ExitCode;

use std::path::{Path, PathBuf};

use callmask::{Dialect, Vocab};
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
    /// Derive a dialect file from a chat template (a `.jinja` file, or a
    /// `tokenizer_config.json` with its `chat_template`) and print it.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["names", "markdown"])]
    from_template: Option<PathBuf>,
    /// With `--from-template`: the model's `tokenizer.json`, whose special tokens the derived
    /// file names as such (without it, marker-shaped pieces are written `@marker(..)`).
    #[arg(long, value_name = "FILE", requires = "from_template")]
    tokenizer: Option<PathBuf>,
}

/// The chat template in `path`: a Jinja file, or a `tokenizer_config.json`'s `chat_template`
/// (the `default` one where it lists several, else the first).
fn read_chat_template(path: &Path) -> Result<String, BadInput> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| BadInput(format!("cannot read {}: {e}", path.display())))?;
    if path.extension().is_none_or(|e| e != "json") {
        return Ok(text);
    }
    let config: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| BadInput(format!("{}: not JSON: {e}", path.display())))?;
    let template = match config.get("chat_template") {
        Some(serde_json::Value::String(t)) => Some(t.clone()),
        Some(serde_json::Value::Array(list)) => {
            let named = |n: &serde_json::Value| {
                n.get("template")
                    .and_then(|t| t.as_str())
                    .map(str::to_owned)
            };
            list.iter()
                .find(|n| n.get("name").and_then(|v| v.as_str()) == Some("default"))
                .or_else(|| list.first())
                .and_then(named)
        }
        _ => None,
    };
    template.ok_or_else(|| BadInput(format!("{}: no chat_template", path.display())))
}

/// `--from-template`: the derived dialect file on stdout, what was read on stderr.
fn from_template(path: &Path, tokenizer: Option<&Path>) -> Result<ExitCode, BadInput> {
    let template = read_chat_template(path)?;
    let vocab = match tokenizer {
        Some(t) => Some(Vocab::from_tokenizer_json(t)?),
        None => None,
    };
    let derived = callmask::derive_dialect(&template, vocab.as_ref())?;
    eprintln!("derived: {}", derived.summary());
    print!("{}", derived.text());
    Ok(ExitCode::SUCCESS)
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
    if let Some(path) = &args.from_template {
        return from_template(path, args.tokenizer.as_deref());
    }
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
