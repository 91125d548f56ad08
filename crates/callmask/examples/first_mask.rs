//! Time to the first mask of a new request: the tools' JSON text in, the first mask out, for one
//! dialect and `tool_choice` on the Llama 3.1 vocabulary. A profiling driver (the comparison
//! with the peers is `cargo bench --bench suite`, see `scripts/bench.sh`).
//!
//! ```text
//! CALLMASK_CACHE=.cache cargo run --release --example first_mask -- hermes auto 5 10
//! # instruction counts (repeatable, unlike wall-clock times) of every request, the cold one
//! # included; `--toggle-collect='*first_mask::warm_request*'` counts the warm ones only:
//! valgrind --tool=callgrind --toggle-collect='*first_mask::new_request*' \
//!     target/release/examples/first_mask functools auto 1 3
//! ```
//!
//! Arguments: dialect (default `hermes`; or `schema/NAME` for `benches/schemas/NAME.schema.json`
//! alone, without tools, or a JSON Schema file's path ending in `.json`), tool choice (`auto`), number of tools (1, 5, 20,
//! 100, 400 or 1000: `benches/tools/tools_N.json`; default 1), requests (default 5). The first request runs
//! with the server's caches cleared ("cold"); the others keep them ("warm"). One untimed
//! request before them builds what the vocabulary keeps itself: its token trie and the walks of
//! the default whitespace policy's gaps.

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use callmask::{Dialect, DialectOptions, TokenAutomaton, TokenMask, Tools, Vocab};

/// What a request compiles: a dialect over tools, or one JSON Schema.
enum Work {
    Dialect(Dialect),
    Schema,
}

/// One request: parse the tools (or schema), compile, bind the vocabulary, fill the first mask.
#[inline(never)]
fn new_request(work: &Work, opts: &DialectOptions, text: &str, vocab: &Arc<Vocab>) -> usize {
    let g = match work {
        Work::Dialect(dialect) => {
            let tools = Tools::from_json_str(text).expect("tools");
            dialect.compile(&tools, opts).expect("compile")
        }
        Work::Schema => {
            callmask::Grammar::from_json_schema_str(text, &opts.compile).expect("schema")
        }
    };
    let a = TokenAutomaton::new(&g, vocab.clone()).expect("automaton");
    let mut m = a.matcher();
    let mut mask = TokenMask::new(vocab.len());
    m.fill_mask(&mut mask);
    black_box(&mask).count()
}

/// A request after the first (the caches warm): [`new_request`] under its own name, so that a
/// profiler can count the warm requests apart from the cold one.
#[inline(never)]
fn warm_request(work: &Work, opts: &DialectOptions, text: &str, vocab: &Arc<Vocab>) -> usize {
    new_request(work, opts, text, vocab)
}

/// Builds the vocabulary's token trie and its gaps' walks (through a throwaway automaton's
/// first mask), outside the requests.
#[inline(never)]
fn load_trie(vocab: &Arc<Vocab>) {
    // (The trie is the vocabulary's, built on first use; an automaton asks for it. Its first
    // mask walks the default whitespace policy's gaps, which the vocabulary keeps.)
    let g = callmask::Grammar::from_json_schema_str(r#"{"type": "boolean"}"#, &Default::default())
        .expect("boolean schema");
    let a = TokenAutomaton::new(&g, vocab.clone()).expect("automaton");
    a.matcher().fill_mask(&mut TokenMask::new(vocab.len()));
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, d: &str| args.get(i).cloned().unwrap_or_else(|| d.to_string());
    let first = arg(0, "hermes");
    // `schema/NAME` (benches/schemas) or a schema file's path (`*.json`).
    let schema = first
        .strip_prefix("schema/")
        .map(str::to_string)
        .or_else(|| first.ends_with(".json").then(|| first.clone()));
    let work = match &schema {
        Some(_) => Work::Schema,
        None => Work::Dialect(Dialect::by_name(&first).expect("dialect")),
    };
    let choice = arg(1, "auto").parse().expect("tool choice");
    let n: usize = arg(2, "1").parse().expect("number of tools");
    let reps: usize = arg(3, "5").parse().expect("requests");
    let mut opts = DialectOptions::default().tool_choice(choice);
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let text = match &schema {
        Some(path) if path.ends_with(".json") => {
            std::fs::read_to_string(path).expect("the schema file")
        }
        Some(name) => {
            std::fs::read_to_string(root.join(format!("benches/schemas/{name}.schema.json")))
                .expect("benches/schemas/NAME.schema.json")
        }
        None => std::fs::read_to_string(root.join(format!("benches/tools/tools_{n}.json")))
            .expect("benches/tools/tools_N.json (N = 1, 5, 20, 100, 400, 1000)"),
    };
    let cache = std::env::var_os("CALLMASK_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("../../.cache"));
    let vocab = Arc::new(
        Vocab::from_tokenizer_json(cache.join("tokenizers/llama3_1-3.7.2/tokenizer.json"))
            .expect("Llama 3.1 tokenizer.json (scripts/fetch-data.sh tokenizers)"),
    );
    // The vocabulary's token trie is built once per vocabulary, on its first automaton, as a
    // server does when it loads the model: not part of a request.
    let t0 = Instant::now();
    load_trie(&vocab);
    println!(
        "vocabulary's token trie and text index: {:.3} ms (once per vocabulary)",
        t0.elapsed().as_secs_f64() * 1e3
    );
    // The caches a server keeps across requests (compiled lexemes and token walks), emptied
    // before the first (cold) request; the vocabulary's own (its trie, its gaps' walks) stay.
    let server = callmask::Caches::default();
    opts.compile.caches = Some(server.clone());
    for i in 0..reps.max(1) {
        if i == 0 {
            server.clear();
        }
        let t0 = Instant::now();
        let allowed = if i == 0 {
            new_request(&work, &opts, &text, &vocab)
        } else {
            warm_request(&work, &opts, &text, &vocab)
        };
        println!(
            "{} request: {:.3} ms, {allowed} tokens allowed",
            if i == 0 { "cold" } else { "warm" },
            t0.elapsed().as_secs_f64() * 1e3
        );
    }
}
