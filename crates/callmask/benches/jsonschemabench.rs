//! JSONSchemaBench's labelled instances (MaskBench: `maskbench/data/*.json` of
//! <https://github.com/guidance-ai/jsonschemabench>, about 11,300 schemas with valid and invalid
//! instances): per schema, whether callmask compiles it or refuses it (and by which keyword),
//! whether llguidance compiles it (same run), and for every labelled instance of a compiled
//! schema whether callmask's verdict ([`Grammar::check_bytes`] on the compact JSON text) agrees
//! with the label. A disagreement is checked with the `jsonschema` crate (formats asserted): an
//! instance callmask accepts that both the label and the crate call invalid is a **false
//! accept**, and the run fails on any. Every instance with characters past ASCII is checked
//! again ASCII-escaped, as Python's `json.dumps` writes it by default (`"a\u00f1o"`): its
//! verdict must not change, and the run fails on any that does.
//!
//! ```text
//! git clone https://github.com/guidance-ai/jsonschemabench /tmp/jsb
//! CALLMASK_JSONSCHEMABENCH=/tmp/jsb/maskbench/data cargo bench --bench jsonschemabench
//! ```
//!
//! Not run in CI (the data is not in a package registry). Prints totals per subset (the file
//! name before `---`, or without its `_N` number) and writes `target/bench/jsonschemabench.json`.
//! `CALLMASK_JSONSCHEMABENCH_LIMIT=N` takes the first N files (sorted by name) only;
//! `CALLMASK_JSONSCHEMABENCH_VERBOSE=1` names each file before it is read.

use callmask::{CompileOptions, Error, Grammar, TokenId, Vocab};
use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{ApproximateTokEnv, TokEnv, TokRxInfo, TokTrie};
use llguidance::{Matcher, ParserFactory};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// Counts for one subset (or all).
#[derive(Default, Clone, serde::Serialize)]
struct Tally {
    schemas: usize,
    callmask_compiled: usize,
    callmask_refused: usize,
    callmask_invalid: usize,
    callmask_other_errors: usize,
    llguidance_compiled: usize,
    /// Compiled by callmask, refused by llguidance; and the reverse.
    only_callmask: usize,
    only_llguidance: usize,
    valid_instances: usize,
    valid_accepted: usize,
    invalid_instances: usize,
    invalid_rejected: usize,
    /// Instances labelled invalid that callmask accepts, where the `jsonschema` crate agrees
    /// with the label (false accepts), or with callmask (the label is disputed).
    false_accepts: usize,
    label_disputed: usize,
    /// Instances whose text has characters past ASCII, and of those, the ones whose verdict
    /// changes when they are written ASCII-escaped (as `json.dumps` writes them by default).
    non_ascii_instances: usize,
    ascii_verdict_changed: usize,
}

impl Tally {
    fn add(&mut self, o: &Tally) {
        macro_rules! sum {
            ($($f:ident),*) => { $(self.$f += o.$f;)* };
        }
        sum!(
            schemas,
            callmask_compiled,
            callmask_refused,
            callmask_invalid,
            callmask_other_errors,
            llguidance_compiled,
            only_callmask,
            only_llguidance,
            valid_instances,
            valid_accepted,
            invalid_instances,
            invalid_rejected,
            false_accepts,
            label_disputed,
            non_ascii_instances,
            ascii_verdict_changed
        );
    }
}

/// The subset a file belongs to: `Github_hard---o123.json` → `Github_hard`,
/// `BFCL_java_12.json` → `BFCL_java`.
fn subset(name: &str) -> String {
    if let Some((s, _)) = name.split_once("---") {
        return s.to_string();
    }
    let stem = name.trim_end_matches(".json");
    match stem.rsplit_once('_') {
        Some((s, n)) if n.chars().all(|c| c.is_ascii_digit()) => s.to_string(),
        _ => stem.to_string(),
    }
}

/// llguidance over callmask's Llama 3.1 token bytes (its grammar compile does not depend on the
/// tokenizer beyond the token bytes).
fn llguidance_factory(vocab: &Vocab) -> ParserFactory {
    let words: Vec<Vec<u8>> = (0..vocab.len() as TokenId)
        .map(|i| {
            let b = vocab.token_bytes(i).unwrap_or_default();
            if vocab.is_special(i) {
                let mut w = vec![TokTrie::SPECIAL_TOKEN_MARKER];
                w.extend_from_slice(if b.is_empty() { b"<special>" } else { b });
                w
            } else {
                b.to_vec()
            }
        })
        .collect();
    let eos = vocab.eos_tokens();
    let info = TokRxInfo::new(words.len() as u32, eos[0]);
    let trie = TokTrie::from(&info, &words).with_eos_tokens(eos);
    let env: TokEnv = Arc::new(ApproximateTokEnv::new(trie));
    let mut f = ParserFactory::new_simple(&env).expect("llguidance: ParserFactory");
    f.quiet();
    f
}

fn main() {
    let Some(dir) = std::env::var_os("CALLMASK_JSONSCHEMABENCH").map(PathBuf::from) else {
        eprintln!(
            "jsonschemabench: set CALLMASK_JSONSCHEMABENCH to the maskbench/data folder of \
             https://github.com/guidance-ai/jsonschemabench (see this file's documentation); \
             nothing to do"
        );
        return;
    };
    let limit: usize = std::env::var("CALLMASK_JSONSCHEMABENCH_LIMIT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(usize::MAX);
    let cache = std::env::var_os("CALLMASK_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../.cache")));
    let vocab = Vocab::from_tokenizer_json(cache.join("tokenizers/llama3_1-3.7.2/tokenizer.json"))
        .expect("Llama 3.1 tokenizer.json (scripts/fetch-data.sh tokenizers)");
    let factory = llguidance_factory(&vocab);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files.truncate(limit);
    let verbose = std::env::var_os("CALLMASK_JSONSCHEMABENCH_VERBOSE").is_some();
    let started = Instant::now();
    let mut by_subset: BTreeMap<String, Tally> = BTreeMap::new();
    let mut refusals: BTreeMap<String, usize> = BTreeMap::new();
    let mut false_accepts: Vec<String> = Vec::new();
    let mut ascii_changed: Vec<String> = Vec::new();
    let mut disputed: Vec<String> = Vec::new();
    let mut unreadable = 0usize;
    for (n, path) in files.iter().enumerate() {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if verbose {
            eprintln!("jsonschemabench: {name}");
        }
        let Ok(text) = std::fs::read_to_string(path) else {
            unreadable += 1;
            continue;
        };
        let Ok(file) = serde_json::from_str::<Value>(&text) else {
            unreadable += 1;
            continue;
        };
        let schema = file["schema"].clone();
        let t = by_subset.entry(subset(&name)).or_default();
        t.schemas += 1;
        let llg_ok = {
            let m = Matcher::new(
                factory.create_parser(TopLevelGrammar::from_json_schema(schema.clone())),
            );
            m.get_error().is_none()
        };
        let compiled = std::panic::catch_unwind(|| {
            Grammar::from_json_schema(&schema, &CompileOptions::default())
        });
        let g = match compiled {
            Ok(Ok(g)) => Some(g),
            Ok(Err(Error::UnsupportedKeyword { keyword, .. })) => {
                t.callmask_refused += 1;
                *refusals.entry(keyword).or_default() += 1;
                None
            }
            Ok(Err(Error::InvalidSchema { .. })) => {
                t.callmask_invalid += 1;
                None
            }
            Ok(Err(e)) => {
                t.callmask_other_errors += 1;
                let kind = match &e {
                    Error::LimitExceeded { what, .. } => format!("limit: {what}"),
                    other => format!("{other}")
                        .split(':')
                        .next()
                        .unwrap_or("")
                        .to_string(),
                };
                *refusals.entry(format!("(error) {kind}")).or_default() += 1;
                None
            }
            Err(_) => panic!("callmask panicked compiling {name}"),
        };
        t.llguidance_compiled += usize::from(llg_ok);
        t.only_callmask += usize::from(g.is_some() && !llg_ok);
        t.only_llguidance += usize::from(g.is_none() && llg_ok);
        let Some(g) = g else { continue };
        t.callmask_compiled += 1;
        let validator = jsonschema::options()
            .should_validate_formats(true)
            .build(&schema)
            .ok();
        for test in file["tests"].as_array().into_iter().flatten() {
            let valid = test["valid"].as_bool().unwrap_or(false);
            let data = &test["data"];
            let text = serde_json::to_string(data).unwrap();
            let accepted = g.check_bytes(text.as_bytes()).is_ok();
            if !text.is_ascii() {
                let ascii = callmask::python::ensure_ascii(&text);
                t.non_ascii_instances += 1;
                if g.check_bytes(ascii.as_bytes()).is_ok() != accepted {
                    t.ascii_verdict_changed += 1;
                    ascii_changed.push(format!(
                        "{name}: {}",
                        ascii.chars().take(200).collect::<String>()
                    ));
                }
            }
            if valid {
                t.valid_instances += 1;
                t.valid_accepted += usize::from(accepted);
            } else {
                t.invalid_instances += 1;
                t.invalid_rejected += usize::from(!accepted);
                if accepted {
                    let crate_says = validator.as_ref().map(|v| v.is_valid(data));
                    let line = format!("{name}: {}", text.chars().take(200).collect::<String>());
                    if crate_says == Some(true) {
                        t.label_disputed += 1;
                        disputed.push(line);
                    } else {
                        t.false_accepts += 1;
                        false_accepts.push(line);
                    }
                }
            }
        }
        if (n + 1) % 1000 == 0 {
            eprintln!(
                "jsonschemabench: {} files, {:.0} s",
                n + 1,
                started.elapsed().as_secs_f64()
            );
        }
    }
    let mut all = Tally::default();
    by_subset.values().for_each(|t| all.add(t));
    println!(
        "| subset | schemas | callmask compiles | llguidance compiles | only callmask | only \
         llguidance | valid accepted | invalid rejected | false accepts | disputed labels |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (s, t) in by_subset
        .iter()
        .chain(std::iter::once((&"all".to_string(), &all)))
    {
        println!(
            "| {s} | {} | {} | {} | {} | {} | {}/{} | {}/{} | {} | {} |",
            t.schemas,
            t.callmask_compiled,
            t.llguidance_compiled,
            t.only_callmask,
            t.only_llguidance,
            t.valid_accepted,
            t.valid_instances,
            t.invalid_rejected,
            t.invalid_instances,
            t.false_accepts,
            t.label_disputed
        );
    }
    let mut top: Vec<(&String, &usize)> = refusals.iter().collect();
    top.sort_by(|a, b| b.1.cmp(a.1));
    println!("\ncallmask refusals by keyword (schemas): {top:?}");
    println!(
        "callmask refused {} schemas, rejected {} as invalid, other errors {}; llguidance \
         refused {}; unreadable files {unreadable}; {:.0} s",
        all.callmask_refused,
        all.callmask_invalid,
        all.callmask_other_errors,
        all.schemas - all.llguidance_compiled,
        started.elapsed().as_secs_f64()
    );
    for d in disputed.iter().take(20) {
        println!("disputed label (the jsonschema crate accepts it too): {d}");
    }
    println!(
        "ASCII-escaped (json.dumps' default): {} of {} instances with characters past ASCII get \
         another verdict",
        all.ascii_verdict_changed, all.non_ascii_instances
    );
    for a in ascii_changed.iter().take(20) {
        println!("verdict changed ASCII-escaped: {a}");
    }
    for f in false_accepts.iter().take(50) {
        println!("FALSE ACCEPT: {f}");
    }
    let out = json!({
        "subsets": by_subset,
        "all": all,
        "refusals": refusals,
        "false_accepts": false_accepts,
        "disputed": disputed,
    });
    let target = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/bench"));
    let _ = std::fs::create_dir_all(&target);
    let _ = std::fs::write(
        target.join("jsonschemabench.json"),
        serde_json::to_string_pretty(&out).unwrap(),
    );
    if !false_accepts.is_empty() || !ascii_changed.is_empty() {
        eprintln!(
            "jsonschemabench: {} false accepts, {} verdicts changed ASCII-escaped",
            false_accepts.len(),
            ascii_changed.len()
        );
        std::process::exit(1);
    }
}
