//! The comparison suite: callmask, llguidance and XGrammar in the same run, on the same
//! vocabularies, grammars and token sequences. Writes `target/bench/results.json`, the
//! crate's `BENCHMARKS.md` and the plots under `docs/bench/`.
//!
//! ```text
//! scripts/bench.sh                  # sets up XGrammar's venv, then the line below
//! cargo bench --bench suite         # the whole suite (~35 minutes on 2 cores)
//! CALLMASK_BENCH_VOCABS=llama CALLMASK_BENCH_WORKLOADS=tools_5 cargo bench --bench suite
//! ```
//!
//! Workloads:
//! - `tools_N` (N = 1, 5, 20, 100, 400, 1000; the sets are stored in `benches/tools/tools_N.json`): the JSON
//!   Schema of a functools-style call list (`[{"name": F, "arguments": {...}}, ...]`,
//!   [`callmask_testkit::bench::call_list_schema`]), run by every engine; the output is one or two calls in
//!   `json.dumps` layout.
//! - `tools_N/DIALECT` (functools, pythonic, empower, inline): callmask's real dialects on the same
//!   tool set, for information (no peer has them); the output is written as the dialect's model
//!   writes it (`callmask_testkit::writer`), special tokens as special tokens.
//! - `tools_N/FORMAT/CHOICE` (FORMAT = hermes, llama31_json; CHOICE = auto, required): a
//!   tool-calling format every engine can express, on the same tools and output: callmask's
//!   dialect with that `tool_choice`; llguidance's Lark grammar ([`llg::lark_for`]: the call as
//!   `%json{...}`, Hermes text before `<tool_call>` as a lazy lexeme); XGrammar's own preset
//!   (`get_model_structural_tag("qwen_3" | "llama", tools, tool_choice, reasoning="disabled")`,
//!   a `triggered_tags` structural tag). The output is text, then the calls as the model writes
//!   them.
//! - `schema/NAME`: the schemas of `benches/schemas/` with their instances.
//!
//! Vocabularies: Llama 3.1 (`tokenizer.json`, 128,256 tokens) and Gemma 3 (the 270M GGUF,
//! 262,144 tokens). Texts are tokenized by callmask's `Vocab::tokenize` (the `tokenizers` crate for
//! Llama, llama.cpp for Gemma), and every engine gets the same ids. llguidance and XGrammar get the
//! same token bytes: llguidance on Llama through its own `tokenizer.json` loader (checked equal),
//! on Gemma through a `TokTrie` built from callmask's token bytes; XGrammar from a hex dump of
//! them.
//!
//! Measures per vocabulary, workload and engine (setup checks first, untimed, that every token is
//! allowed and accepted and that the output can end there):
//! - load: vocabulary + token trie, once per vocabulary and engine.
//! - compile: grammar → matcher with its first mask computed, median over
//!   `CALLMASK_BENCH_COMPILE` trials (default 5), each on fresh objects. For callmask, the
//!   caches (`Caches`: compiled lexemes, lexeme walks) are cleared before each trial ("cold"),
//!   and a second series keeps them ("warm", a server's steady state).
//! - first mask: the first mask's own time in those trials (median).
//! - new request: a request's JSON text (the schema, or the tools) in, its first mask out: parse,
//!   compile (llguidance: the Lark text built from the tools; XGrammar: its structural tag
//!   preset), matcher, first mask; median over the compile trials. callmask: caches cleared
//!   ("cold") and kept ("warm"), each also timed in its phases (text parsed, grammar compiled,
//!   automaton bound, first mask). The summary compares each to the best peer (target ≤ 0.5).
//! - mask p50 / p99 / max: per-token mask time along the output, over `CALLMASK_BENCH_REPS`
//!   (default 10) warm passes with fresh matchers on one compiled grammar; callmask's first pass
//!   over a fresh automaton apart (each state's mask computed for the first time); the steps'
//!   fastest masks also split by where in the output each step is (text, brackets, strings).
//! - memory: live heap bytes (a counting global allocator) held by one compiled grammar with its
//!   first mask, and by one more sequence (matcher) after a full pass. XGrammar's are not counted
//!   (C++ heap): "n/a".
//! - batch fill: masks for a batch of sequences (1, 8, 64) at staggered positions, one call on a
//!   2-thread rayon pool: callmask's `mask::fill_u32_rows` (rows on the calling thread for
//!   `mask::SERIAL_ROWS_BUDGET`, the rest on the pool) against llguidance's matchers'
//!   `compute_mask` in a rayon `par_iter` (what its C API's `llg_par_compute_mask` does); µs per
//!   whole-batch fill along 64 decoding steps.
//! - targets and misses: each of issue 29's targets with its misses, and every miss with its
//!   profile from the measures above and the design change its largest part needs
//!   ([`CHANGES`]).
//! - fuzz (callmask): uniform random walks over the masks (each step a uniformly drawn allowed
//!   token, end-of-sequence included; walks stop at the end or at 256 tokens), for
//!   `CALLMASK_BENCH_FUZZ_MS` (default 300) ms per workload: walks/s and tokens/s.
//!
//! Environment: `CALLMASK_CACHE`; `CALLMASK_BENCH_VOCABS` (`llama,gemma`);
//! `CALLMASK_BENCH_WORKLOADS` (comma list of workload name prefixes, e.g. `tools_5,schema/`, or
//! exact names ending in `$`, e.g. `tools_1$`);
//! `CALLMASK_BENCH_ENGINES` (`callmask,llguidance,xgrammar`); `CALLMASK_BENCH_REPS`,
//! `CALLMASK_BENCH_COMPILE`, `CALLMASK_BENCH_FUZZ_MS`; `CALLMASK_XGRAMMAR_PYTHON` (default
//! `$CALLMASK_CACHE/venv-xgrammar/bin/python`), `CALLMASK_XGRAMMAR_SCRIPT` (default
//! `scripts/bench_xgrammar.py`); `CALLMASK_BENCH_WRITE_DOCS=0` keeps `BENCHMARKS.md` and the
//! plots untouched (the JSON is always written); `CALLMASK_BENCH_FROM_JSON=path/results.json`
//! only regenerates `BENCHMARKS.md`, `docs/bench/results.json` and the plots from an earlier run;
//! `CALLMASK_BENCH_SUMMARY_ONLY=1` prints the summary and writes no documents
//! (`scripts/bench.sh --quick`). Batch fill: `CALLMASK_BENCH_BATCH_WORKLOADS` (exact names,
//! default `tools_5,tools_5/hermes/auto`), `CALLMASK_BENCH_BATCH` (sizes, `1,8,64`),
//! `CALLMASK_BENCH_THREADS` (rayon pool, 2), `CALLMASK_BENCH_BATCH_STEPS` (64).

use callmask_testkit::writer;

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use callmask::{
    CompileOptions, Dialect, DialectOptions, Grammar, TokenAutomaton, TokenId, TokenMask, Tools,
    Vocab,
};
use callmask_llama::GgufVocab;
use callmask_testkit::bench::*;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

// ---------------------------------------------------------------------------------------------
// A counting allocator: live heap bytes.

/// The system allocator, counting live bytes.
struct Counting;

/// Live heap bytes (all threads).
static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call forwards to `System` with the caller's arguments unchanged; the counter is
// only bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(l) };
        if !p.is_null() {
            LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            LIVE.fetch_add(new as isize - l.size() as isize, Ordering::Relaxed);
        }
        q
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

// ---------------------------------------------------------------------------------------------
// Settings

const LLAMA31_TOKENIZER: &str = "tokenizers/llama3_1-3.7.2/tokenizer.json";
const GEMMA3_GGUF: &str = "gemma-1.0.0/gemma-3-270m-q4_k_m.gguf";
const DIALECTS: [&str; 4] = ["functools", "pythonic", "empower", "inline"];
/// The dialects every engine runs (`tools_N/DIALECT/CHOICE`).
const PEER_DIALECTS: [&str; 2] = ["hermes", "llama31_json"];
const ENGINES: [&str; 3] = ["callmask", "llguidance", "xgrammar"];
const PEERS: [&str; 2] = ["llguidance", "xgrammar"];
const FUZZ_MAX_TOKENS: usize = 256;
const TEXT_BEFORE: &str = "Let me look that up.";

struct Knobs {
    reps: usize,
    compile: usize,
    fuzz_ms: u64,
    engines: Vec<String>,
    workloads: Option<Vec<String>>,
}

impl Knobs {
    fn from_env() -> Knobs {
        let engines = env_list("CALLMASK_BENCH_ENGINES")
            .unwrap_or_else(|| ENGINES.iter().map(|s| s.to_string()).collect());
        for e in &engines {
            assert!(
                ENGINES.contains(&e.as_str()),
                "CALLMASK_BENCH_ENGINES: unknown engine {e:?} ({ENGINES:?})"
            );
        }
        Knobs {
            reps: env_usize("CALLMASK_BENCH_REPS", 10).max(1),
            compile: env_usize("CALLMASK_BENCH_COMPILE", 5).max(1),
            fuzz_ms: env_usize("CALLMASK_BENCH_FUZZ_MS", 300) as u64,
            engines,
            workloads: env_list("CALLMASK_BENCH_WORKLOADS"),
        }
    }
    fn uses(&self, engine: &str) -> bool {
        self.engines.iter().any(|e| e == engine)
    }
    fn wants(&self, workload: &str) -> bool {
        self.workloads.as_ref().is_none_or(|w| {
            w.iter().any(|p| match p.strip_suffix('$') {
                Some(exact) => workload == exact,
                None => workload.starts_with(p.as_str()),
            })
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Workloads

/// What a workload compiles.
enum Source {
    /// A JSON Schema (every engine).
    Schema(Value),
    /// A callmask dialect over a tool set (callmask only).
    Dialect(&'static str, Tools),
    /// A tool-calling format every engine can express (`hermes`, `llama31_json`) with a
    /// `tool_choice` (`auto`, `required`): callmask's dialect, llguidance's Lark grammar
    /// ([`llg::lark_for`]), XGrammar's structural tag (`get_model_structural_tag`).
    Tooling(&'static str, &'static str, Tools),
}

struct Workload {
    name: String,
    /// `tools`, `dialect` or `schema`
    kind: &'static str,
    n_tools: Option<usize>,
    source: Source,
    text: String,
    /// What a request brings: the schema's or the tool set's JSON text (the "new request"
    /// measure starts from it).
    input: String,
}

fn workloads(knobs: &Knobs) -> Vec<Workload> {
    let mut out = Vec::new();
    for n in TOOL_COUNTS {
        let tools_json = store_tool_set(n);
        let calls = calls_for(n);
        let name = format!("tools_{n}");
        // The call list, as a model writes JSON.
        let list: Vec<Value> = calls
            .iter()
            .map(|(f, a)| json!({"name": f, "arguments": a}))
            .collect();
        if knobs.wants(&name) {
            out.push(Workload {
                name: name.clone(),
                kind: "tools",
                n_tools: Some(n),
                source: Source::Schema(call_list_schema(&tools_json)),
                text: to_model_text(&Value::Array(list)),
                input: call_list_schema(&tools_json).to_string(),
            });
        }
        let tools = Tools::from_openai_json(&tools_json).unwrap();
        let wcalls: Vec<writer::Call> = calls
            .iter()
            .map(|(f, a)| (&*Box::leak(f.clone().into_boxed_str()), a.clone()))
            .collect();
        for d in DIALECTS {
            let wname = format!("{name}/{d}");
            if knobs.wants(&wname) {
                out.push(Workload {
                    name: wname,
                    kind: "dialect",
                    n_tools: Some(n),
                    source: Source::Dialect(d, tools.clone()),
                    text: writer::write(d, TEXT_BEFORE, &wcalls),
                    input: tools_json.to_string(),
                });
            }
        }
        for d in PEER_DIALECTS {
            // Llama 3.1 JSON: one call per message (callmask's dialect); `required`: the call
            // first (XGrammar's `at_least_one` triggered tags start with a call).
            let calls = if d == "llama31_json" {
                &wcalls[..1]
            } else {
                &wcalls[..]
            };
            for choice in ["auto", "required"] {
                let before = if choice == "auto" { TEXT_BEFORE } else { "" };
                let wname = format!("{name}/{d}/{choice}");
                if knobs.wants(&wname) {
                    out.push(Workload {
                        name: wname,
                        kind: "tooling",
                        n_tools: Some(n),
                        source: Source::Tooling(d, choice, tools.clone()),
                        text: writer::write(d, before, calls),
                        input: tools_json.to_string(),
                    });
                }
            }
        }
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/schemas");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            let f = e.ok()?.file_name().into_string().ok()?;
            f.strip_suffix(".schema.json").map(str::to_string)
        })
        .collect();
    names.sort();
    for s in names {
        let name = format!("schema/{s}");
        if knobs.wants(&name) {
            let schema = read_json(&dir.join(format!("{s}.schema.json")));
            out.push(Workload {
                name,
                kind: "schema",
                n_tools: None,
                input: schema.to_string(),
                source: Source::Schema(schema),
                text: to_model_text(&read_json(&dir.join(format!("{s}.instance.json")))),
            });
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Results

/// The phases of callmask's new request, in order: the JSON text parsed (tools or schema), the
/// grammar compiled, the automaton bound to the vocabulary, the first mask (matcher + fill).
const PHASES: [&str; 4] = ["parse", "grammar", "automaton", "first_mask"];

/// Median ms per phase over trials.
fn phases_json(trials: &[[f64; 4]]) -> Value {
    let mut o = serde_json::Map::new();
    for (i, name) in PHASES.iter().enumerate() {
        let xs: Vec<f64> = trials.iter().map(|t| t[i]).collect();
        o.insert(name.to_string(), num3(summarize(&xs).p50));
    }
    Value::Object(o)
}

/// One engine's numbers on one workload.
#[derive(Default)]
struct Row {
    /// ms, one per trial (callmask: caches cleared)
    compile_ms: Vec<f64>,
    /// ms, callmask with its caches (`Caches`) warm
    compile_warm_ms: Vec<f64>,
    /// ms, a new request: its JSON text (schema or tools) in, first mask out (callmask: caches
    /// cleared)
    new_request_ms: Vec<f64>,
    /// ms, the same with callmask's caches (`Caches`) warm
    new_request_warm_ms: Vec<f64>,
    /// ms per phase of each cold new request (callmask: [`PHASES`])
    new_request_phases: Vec<[f64; 4]>,
    /// ms per phase of each warm new request
    new_request_warm_phases: Vec<[f64; 4]>,
    /// µs, one per trial
    first_mask_us: Vec<f64>,
    /// µs per mask, warm passes
    mask_us: Vec<f64>,
    /// µs per mask, the first pass over a fresh automaton (callmask: each state's mask computed
    /// for the first time, the lexeme walks in the caches warm)
    first_pass_us: Vec<f64>,
    /// tokens per pass (`mask_us` holds passes of this many masks)
    steps: usize,
    mem_grammar: Option<i64>,
    mem_sequence: Option<i64>,
    fuzz: Option<Value>,
    /// Numbers given directly (XGrammar's script).
    external: Option<Value>,
    error: Option<String>,
}

impl Row {
    fn failed(e: impl Into<String>) -> Row {
        Row {
            error: Some(e.into()),
            ..Row::default()
        }
    }
    /// Each step's fastest mask over the warm passes (robust to preemption on a loaded machine).
    fn step_min(&self) -> Vec<f64> {
        if self.steps == 0 {
            return Vec::new();
        }
        let mut min = vec![f64::INFINITY; self.steps];
        for (i, &x) in self.mask_us.iter().enumerate() {
            let j = i % self.steps;
            min[j] = min[j].min(x);
        }
        min
    }
    /// Each step's fastest mask (µs), also for a peer that reports them (XGrammar's script).
    fn step_minima(&self) -> Vec<f64> {
        match &self.external {
            Some(x) => x["mask_step_min_samples_us"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_f64)
                .collect(),
            None => self.step_min(),
        }
    }
    /// p99 of the per-step minima.
    fn step_min_p99(&self) -> f64 {
        match &self.external {
            Some(x) => x["mask_step_min_us"]["p99"].as_f64().unwrap_or(f64::NAN),
            None => summarize(&self.step_min()).p99,
        }
    }
    /// A new request, JSON text to first mask (ms): (caches cleared, caches warm); the same
    /// number twice for a peer.
    fn new_request(&self) -> (f64, f64) {
        if self.error.is_some() {
            return (f64::NAN, f64::NAN);
        }
        if let Some(x) = &self.external {
            let v = x["new_request_ms"].as_f64().unwrap_or(f64::NAN);
            return (v, v);
        }
        let cold = summarize(&self.new_request_ms).p50;
        if self.new_request_warm_ms.is_empty() {
            (cold, cold)
        } else {
            (cold, summarize(&self.new_request_warm_ms).p50)
        }
    }
    /// (compile ms median, first mask µs, mask summary)
    fn key_numbers(&self) -> Option<(f64, f64, Summary)> {
        if self.error.is_some() {
            return None;
        }
        if let Some(x) = &self.external {
            let g = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
            let m = &x["mask_us"];
            return Some((
                g(&x["compile_ms"]["median"]),
                g(&x["first_mask_us"]),
                Summary {
                    p50: g(&m["p50"]),
                    p99: g(&m["p99"]),
                    max: g(&m["max"]),
                    mean: g(&m["mean"]),
                    n: m["n"].as_u64().unwrap_or(0) as usize,
                },
            ));
        }
        Some((
            summarize(&self.compile_ms).p50,
            summarize(&self.first_mask_us).p50,
            summarize(&self.mask_us),
        ))
    }
    fn to_json(&self) -> Value {
        if let Some(e) = &self.error {
            return json!({ "error": e });
        }
        if let Some(x) = &self.external {
            let mut x = x.clone();
            x["mem_grammar_bytes"] = Value::Null;
            x["mem_sequence_bytes"] = Value::Null;
            if let Some(o) = x.as_object_mut() {
                o.remove("mask_step_min_samples_us");
            }
            return x;
        }
        let c = summarize(&self.compile_ms);
        let mut o = json!({
            "compile_ms": {"cold": num3(self.compile_ms.first().copied().unwrap_or(f64::NAN)),
                           "median": num3(c.p50), "max": num3(c.max), "n": c.n},
            "first_mask_us": num3(summarize(&self.first_mask_us).p50),
            "mask_us": summary_json(summarize(&self.mask_us)),
            "mask_step_min_us": summary_json(summarize(&self.step_min())),
            "mask_first_pass_us": summary_json(summarize(&self.first_pass_us)),
            "mem_grammar_bytes": self.mem_grammar,
            "mem_sequence_bytes": self.mem_sequence,
        });
        if !self.compile_warm_ms.is_empty() {
            o["compile_warm_caches_ms"] = num3(summarize(&self.compile_warm_ms).p50);
        }
        if !self.new_request_ms.is_empty() {
            o["new_request_ms"] = num3(summarize(&self.new_request_ms).p50);
        }
        if !self.new_request_warm_ms.is_empty() {
            o["new_request_warm_caches_ms"] = num3(summarize(&self.new_request_warm_ms).p50);
        }
        if !self.new_request_phases.is_empty() {
            o["new_request_phases_ms"] = json!({
                "cold": phases_json(&self.new_request_phases),
                "warm": phases_json(&self.new_request_warm_phases),
            });
        }
        if let Some(f) = &self.fuzz {
            o["fuzz"] = f.clone();
        }
        o
    }
}

// ---------------------------------------------------------------------------------------------
// callmask

mod cm {
    use super::*;

    /// The caches a server keeps across requests: compiled lexemes and token walks (warm runs
    /// find them filled; cold runs empty them first).
    pub fn caches() -> &'static callmask::Caches {
        static CACHES: std::sync::OnceLock<callmask::Caches> = std::sync::OnceLock::new();
        CACHES.get_or_init(callmask::Caches::default)
    }

    /// Default compile options, with the server's caches.
    fn compile_options() -> CompileOptions {
        CompileOptions::default().caches(Some(caches().clone()))
    }

    /// Default dialect options, with the server's caches.
    fn dialect_options() -> DialectOptions {
        DialectOptions::default().compile(compile_options())
    }

    pub fn grammar(w: &Workload) -> callmask::Result<Grammar> {
        match &w.source {
            Source::Schema(s) => Grammar::from_json_schema(s, &compile_options()),
            Source::Dialect(d, tools) => Dialect::by_name(d)?.compile(tools, &dialect_options()),
            Source::Tooling(d, choice, tools) => {
                Dialect::by_name(d)?.compile(tools, &dialect_options().tool_choice(choice.parse()?))
            }
        }
    }

    /// The request's JSON text (schema or tools) parsed, as a server gets it.
    fn parse_input(w: &Workload) -> callmask::Result<Input> {
        let v: Value = serde_json::from_str(&w.input)
            .map_err(|e| callmask::Error::InvalidTools(e.to_string()))?;
        Ok(match &w.source {
            Source::Schema(_) => Input::Schema(v),
            Source::Dialect(..) | Source::Tooling(..) => Input::Tools(Tools::from_openai_value(v)?),
        })
    }

    /// The grammar of a parsed request.
    fn grammar_from_input(w: &Workload, input: Input) -> callmask::Result<Grammar> {
        match (&w.source, input) {
            (_, Input::Schema(v)) => Grammar::from_json_schema(&v, &compile_options()),
            (Source::Tooling(d, choice, _), Input::Tools(t)) => {
                Dialect::by_name(d)?.compile(&t, &dialect_options().tool_choice(choice.parse()?))
            }
            (Source::Dialect(d, _), Input::Tools(t)) => {
                Dialect::by_name(d)?.compile(&t, &dialect_options())
            }
            (Source::Schema(_), Input::Tools(_)) => unreachable!("a schema parses as a schema"),
        }
    }

    /// A request's parsed JSON text.
    enum Input {
        Schema(Value),
        Tools(Tools),
    }

    /// A new request: its JSON text in, its first mask out; ms per phase ([`PHASES`]: the
    /// text parsed, the grammar compiled, the automaton bound to the vocabulary, the first
    /// mask).
    fn new_request(w: &Workload, vocab: &Arc<Vocab>) -> [f64; 4] {
        let t0 = Instant::now();
        let input = parse_input(w).unwrap();
        let t1 = Instant::now();
        let g = grammar_from_input(w, input).unwrap();
        let t2 = Instant::now();
        let a = TokenAutomaton::new(&g, vocab.clone()).unwrap();
        let t3 = Instant::now();
        let mut m = a.matcher();
        let mut mask = TokenMask::new(vocab.len());
        m.fill_mask(&mut mask);
        let t4 = Instant::now();
        black_box(&mask);
        let ms = |a: Instant, b: Instant| (b - a).as_secs_f64() * 1e3;
        [ms(t0, t1), ms(t1, t2), ms(t2, t3), ms(t3, t4)]
    }

    /// Grammar → automaton → matcher → first mask: (automaton, total ms, first mask µs).
    fn compile(w: &Workload, vocab: &Arc<Vocab>) -> callmask::Result<(TokenAutomaton, f64, f64)> {
        let t0 = Instant::now();
        let g = grammar(w)?;
        let a = TokenAutomaton::new(&g, vocab.clone())?;
        let mut m = a.matcher();
        let mut mask = TokenMask::new(vocab.len());
        let t1 = Instant::now();
        m.fill_mask(&mut mask);
        let t2 = Instant::now();
        black_box(&mask);
        Ok((a, (t2 - t0).as_secs_f64() * 1e3, micros(t2 - t1)))
    }

    /// Per-mask times of one pass (µs), checking each token.
    fn pass(
        a: &TokenAutomaton,
        tokens: &[TokenId],
        mask: &mut TokenMask,
        out: &mut Vec<f64>,
    ) -> Result<(), String> {
        let mut m = a.matcher();
        for (i, &t) in tokens.iter().enumerate() {
            let t0 = Instant::now();
            m.fill_mask(mask);
            out.push(micros(t0.elapsed()));
            if !mask.is_allowed(t) {
                return Err(format!("token #{i} ({t}) not allowed"));
            }
            m.accept(t)
                .map_err(|e| format!("token #{i} ({t}): accept: {e}"))?;
        }
        if !m.can_end() {
            return Err("cannot end after the whole output".into());
        }
        m.fill_mask(mask);
        if !a.vocab().eos_tokens().iter().any(|&e| mask.is_allowed(e)) && !m.is_finished() {
            return Err("no end-of-sequence token allowed at the end".into());
        }
        Ok(())
    }

    /// Tokenizes the workload's text as the model would.
    pub fn tokenize(w: &Workload, vocab: &Arc<Vocab>) -> Result<Vec<TokenId>, String> {
        let g = grammar(w).map_err(|e| e.to_string())?;
        let a = TokenAutomaton::new(&g, vocab.clone()).map_err(|e| e.to_string())?;
        let toks = a.tokenize(&w.text).map_err(|e| e.to_string())?;
        let back = a.vocab().decode(&toks);
        if back != w.text.as_bytes() {
            return Err(format!(
                "tokenization does not round-trip: {:?}",
                String::from_utf8_lossy(&back)
            ));
        }
        Ok(toks)
    }

    pub fn measure(w: &Workload, vocab: &Arc<Vocab>, tokens: &[TokenId], k: &Knobs) -> Row {
        let mut row = Row::default();
        let mut mask = TokenMask::new(vocab.len());
        // Correctness, untimed.
        let a = match compile(w, vocab) {
            Ok((a, _, _)) => a,
            Err(e) => return Row::failed(e.to_string()),
        };
        if let Err(e) = pass(&a, tokens, &mut mask, &mut Vec::new()) {
            return Row::failed(format!("callmask rejects the output: {e}"));
        }
        drop(a);
        // Compile, first-ever (caches cleared) then warm caches.
        for _ in 0..k.compile {
            caches().clear();
            let (a, ms, first) = compile(w, vocab).unwrap();
            row.compile_ms.push(ms);
            row.first_mask_us.push(first);
            drop(a);
        }
        for _ in 0..k.compile {
            let (a, ms, _) = compile(w, vocab).unwrap();
            row.compile_warm_ms.push(ms);
            drop(a);
        }
        // A new request from its JSON text, caches cleared, then warm.
        for _ in 0..k.compile {
            caches().clear();
            let phases = new_request(w, vocab);
            row.new_request_ms.push(phases.iter().sum());
            row.new_request_phases.push(phases);
        }
        for _ in 0..k.compile {
            let phases = new_request(w, vocab);
            row.new_request_warm_ms.push(phases.iter().sum());
            row.new_request_warm_phases.push(phases);
        }
        // Memory of one compiled grammar with its first mask (caches warm: what a request adds).
        let before = live();
        let (a, _, _) = compile(w, vocab).unwrap();
        row.mem_grammar = Some((live() - before) as i64);
        // Warm passes.
        pass(&a, tokens, &mut mask, &mut row.first_pass_us).unwrap();
        row.steps = tokens.len();
        for _ in 0..k.reps {
            pass(&a, tokens, &mut mask, &mut row.mask_us).unwrap();
        }
        // One more sequence after a full pass.
        let before = live();
        let mut m = a.matcher();
        for &t in tokens {
            m.fill_mask(&mut mask);
            m.accept(t).unwrap();
        }
        row.mem_sequence = Some((live() - before) as i64);
        drop(m);
        if k.fuzz_ms > 0 {
            row.fuzz = Some(fuzz(&a, &mut mask, k.fuzz_ms));
        }
        row
    }

    /// Batch fills ([`callmask::mask::fill_u32_rows`], rayon, on `pool`): `batch` sequences at
    /// staggered positions along `tokens`, `steps` decoding steps (each: one timed fill of every
    /// row, then every sequence accepts its next token; one that has taken its last token starts
    /// again). µs per fill call.
    pub fn batch(
        w: &Workload,
        vocab: &Arc<Vocab>,
        tokens: &[TokenId],
        batch: usize,
        steps: usize,
        pool: &rayon::ThreadPool,
    ) -> Vec<f64> {
        let g = grammar(w).unwrap();
        let a = TokenAutomaton::new(&g, vocab.clone()).unwrap();
        let row_words = vocab.len().div_ceil(32);
        let mut rows = vec![0u32; batch * row_words];
        let mut seqs: Vec<(callmask::Matcher, usize)> = (0..batch)
            .map(|i| {
                let mut m = a.matcher();
                let pos = (i * 7) % tokens.len();
                for &t in &tokens[..pos] {
                    m.accept(t).unwrap();
                }
                (m, pos)
            })
            .collect();
        let mut out = Vec::with_capacity(steps);
        for _ in 0..steps {
            let mut refs: Vec<Option<&mut callmask::Matcher>> =
                seqs.iter_mut().map(|(m, _)| Some(m)).collect();
            let t0 = Instant::now();
            pool.install(|| callmask::mask::fill_u32_rows(&mut refs, &mut rows, row_words))
                .unwrap();
            out.push(micros(t0.elapsed()));
            black_box(&rows);
            for (m, pos) in &mut seqs {
                m.accept(tokens[*pos]).unwrap();
                *pos += 1;
                if *pos == tokens.len() {
                    *m = a.matcher();
                    *pos = 0;
                }
            }
        }
        out
    }

    /// The `k`-th allowed token of `mask`.
    fn nth_allowed(mask: &TokenMask, mut k: usize) -> TokenId {
        for (i, &w) in mask.words().iter().enumerate() {
            let c = w.count_ones() as usize;
            if k < c {
                let mut w = w;
                for _ in 0..k {
                    w &= w - 1;
                }
                return (i * 64) as TokenId + w.trailing_zeros();
            }
            k -= c;
        }
        unreachable!("k beyond the mask's count")
    }

    /// Uniform random walks over the masks for `ms` milliseconds.
    fn fuzz(a: &TokenAutomaton, mask: &mut TokenMask, ms: u64) -> Value {
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed);
        let vocab = a.vocab().clone();
        let (mut walks, mut ended, mut tokens, mut dead) = (0u64, 0u64, 0u64, 0u64);
        let t0 = Instant::now();
        let budget = Duration::from_millis(ms);
        while t0.elapsed() < budget {
            let mut m = a.matcher();
            walks += 1;
            for _ in 0..FUZZ_MAX_TOKENS {
                if m.is_finished() {
                    ended += 1;
                    break;
                }
                m.fill_mask(mask);
                let n = mask.count();
                if n == 0 {
                    dead += 1;
                    break;
                }
                let t = nth_allowed(mask, rng.random_range(0..n));
                tokens += 1;
                if vocab.is_eos(t) {
                    ended += 1;
                    break;
                }
                if m.accept(t).is_err() {
                    dead += 1;
                    break;
                }
            }
        }
        let s = t0.elapsed().as_secs_f64();
        json!({"walks": walks, "ended": ended, "dead_ends": dead, "tokens": tokens,
               "walks_per_s": num3(walks as f64 / s), "tokens_per_s": num3(tokens as f64 / s),
               "max_tokens": FUZZ_MAX_TOKENS})
    }
}

// ---------------------------------------------------------------------------------------------
// llguidance

mod llg {
    use super::*;
    use llguidance::api::TopLevelGrammar;
    use llguidance::toktrie::{ApproximateTokEnv, TokEnv, TokRxInfo, TokTrie};
    use llguidance::{Matcher, ParserFactory};
    use toktrie_hf_tokenizers::ByteTokenizer;

    pub struct Engine {
        factory: ParserFactory,
    }

    /// What llguidance compiles: a JSON Schema or a Lark grammar.
    pub enum Prepared {
        Schema(Value),
        Lark(String),
    }

    /// A Lark string literal.
    fn lark_str(s: &str) -> String {
        serde_json::to_string(s).unwrap()
    }

    /// llguidance's grammar for a tool-calling format (`hermes`, `llama31_json`) and
    /// `tool_choice` (`auto`, `required`) over `tools` (bare OpenAI functions), written as its
    /// users write them: the call as `%json{...}` (one `anyOf` alternative per tool, the name a
    /// `const`), free text before a Hermes call as a lazy lexeme that ends at `<tool_call>`.
    /// Same language as callmask's dialect where Lark can say it: Hermes = optional text, then
    /// (auto: optionally) calls between `<tool_call>` and `</tool_call>` separated by
    /// whitespace; Llama 3.1 JSON = `<|python_tag|>`? then one or more call objects, or (auto)
    /// a reply that does not start with `{` or whitespace.
    pub fn lark_for(dialect: &str, choice: &str, tools: &Value, vocab: &Vocab) -> String {
        let args_key = if dialect == "hermes" {
            "arguments"
        } else {
            "parameters"
        };
        let mut call = call_list_schema(tools);
        let mut one = call["items"].take();
        for alt in one["anyOf"].as_array_mut().into_iter().flatten() {
            let props = alt["properties"].as_object_mut().unwrap();
            let args = props.remove("arguments").unwrap();
            props.insert(args_key.into(), args);
            alt["required"] = json!(["name", args_key]);
        }
        if let Some(d) = call.get_mut("$defs") {
            one["$defs"] = d.take();
        }
        let json = serde_json::to_string(&one).unwrap();
        let required = choice == "required";
        let mut g = String::from("%llguidance {}\n");
        match dialect {
            "hermes" => {
                g.push_str(if required {
                    "start: pre calls\n"
                } else {
                    "start: TEXT | pre calls\n"
                });
                g.push_str("pre[lazy]: /(.|\\n)*<tool_call>/\n");
                g.push_str(&format!(
                    "calls: body (WS? {} body)*\nbody: WS? call WS? {}\n",
                    lark_str("<tool_call>"),
                    lark_str("</tool_call>")
                ));
                g.push_str("TEXT: /(.|\\n)*/\nWS: /[ \\t\\n\\r]+/\n");
            }
            _ => {
                // The special token by id (llguidance's `<[ID]>` syntax: its Llama 3.1 loader
                // names token 128010 by its Llama 3 name), where the vocabulary has it.
                let tag = match vocab.special_token("<|python_tag|>") {
                    Some(id) => format!("<[{id}]>? "),
                    None => String::new(),
                };
                g.push_str(&format!(
                    "start: {tag}call+{}\n",
                    if required { "" } else { " | REPLY" }
                ));
                g.push_str("REPLY: /([^{ \\t\\n\\r](.|\\n)*)?/\n");
            }
        }
        g.push_str(&format!("call: %json {json}\n"));
        g
    }

    /// From a `tokenizer.json`, llguidance's own loader.
    pub fn from_tokenizer_json(path: &Path, eos: &[TokenId]) -> Engine {
        let mut bt = ByteTokenizer::from_file(path)
            .unwrap_or_else(|e| panic!("llguidance: loading {}: {e}", path.display()));
        bt.set_eos_tokens(eos);
        let env = bt.into_tok_env(None).expect("llguidance: TokEnv");
        engine(env)
    }

    /// From callmask's token bytes (special tokens marked with llguidance's 0xFF prefix).
    pub fn from_vocab(v: &Vocab) -> Engine {
        let words: Vec<Vec<u8>> = (0..v.len() as TokenId)
            .map(|i| {
                let b = v.token_bytes(i).unwrap();
                if v.is_special(i) {
                    let mut w = vec![TokTrie::SPECIAL_TOKEN_MARKER];
                    if b.is_empty() {
                        w.extend_from_slice(format!("<special_{i}>").as_bytes());
                    } else {
                        w.extend_from_slice(b);
                    }
                    w
                } else {
                    b.to_vec()
                }
            })
            .collect();
        let eos = v.eos_tokens();
        let info = TokRxInfo::new(words.len() as u32, eos[0]);
        let trie = TokTrie::from(&info, &words).with_eos_tokens(eos);
        let env: TokEnv = Arc::new(ApproximateTokEnv::new(trie));
        engine(env)
    }

    fn engine(env: TokEnv) -> Engine {
        let mut factory = ParserFactory::new_simple(&env).expect("llguidance: ParserFactory");
        factory.quiet();
        Engine { factory }
    }

    impl Engine {
        pub fn n_vocab(&self) -> usize {
            self.factory.tok_env().tok_trie().vocab_size()
        }

        /// Token `i`'s bytes for a non-special token.
        pub fn token_bytes(&self, i: TokenId) -> Vec<u8> {
            self.factory.tok_env().tok_trie().token(i).to_vec()
        }

        /// The grammar of a workload, prepared outside the timed part (as callmask's compile
        /// starts from parsed tools): the schema, or the Lark text.
        fn prepared(&self, w: &Workload, vocab: &Vocab) -> Option<Prepared> {
            match &w.source {
                Source::Schema(s) => Some(Prepared::Schema(s.clone())),
                Source::Tooling(d, choice, _) => {
                    let tools: Value = serde_json::from_str(&w.input).ok()?;
                    Some(Prepared::Lark(lark_for(d, choice, &tools, vocab)))
                }
                Source::Dialect(..) => None,
            }
        }

        fn top_level(p: &Prepared) -> TopLevelGrammar {
            match p {
                Prepared::Schema(s) => TopLevelGrammar::from_json_schema(s.clone()),
                Prepared::Lark(l) => TopLevelGrammar::from_lark(l.clone()),
            }
        }

        fn matcher(&self, p: &Prepared) -> Result<Matcher, String> {
            let m = Matcher::new(self.factory.create_parser(Self::top_level(p)));
            match m.get_error() {
                None => Ok(m),
                Some(e) => Err(e),
            }
        }

        /// (matcher, total ms, first mask µs)
        fn compile(&self, p: &Prepared) -> Result<(Matcher, f64, f64), String> {
            let t0 = Instant::now();
            let g = Self::top_level(p);
            let mut m = Matcher::new(self.factory.create_parser(g));
            if let Some(e) = m.get_error() {
                return Err(e);
            }
            let proto = m.clone();
            let t1 = Instant::now();
            let mask = m.compute_mask().map_err(|e| e.to_string())?;
            let t2 = Instant::now();
            black_box(&mask);
            drop(mask);
            drop(m);
            Ok((proto, (t2 - t0).as_secs_f64() * 1e3, micros(t2 - t1)))
        }

        /// A new request: its JSON text in (parsed, turned into the Lark grammar where the
        /// workload is a tool format), first mask out (ms).
        fn new_request(&self, w: &Workload, vocab: &Vocab) -> f64 {
            let t0 = Instant::now();
            let v: Value = serde_json::from_str(&w.input).unwrap();
            let g = match &w.source {
                Source::Tooling(d, choice, _) => {
                    TopLevelGrammar::from_lark(lark_for(d, choice, &v, vocab))
                }
                _ => TopLevelGrammar::from_json_schema(v),
            };
            let mut m = Matcher::new(self.factory.create_parser(g));
            let mask = m.compute_mask().unwrap();
            let ms = t0.elapsed().as_secs_f64() * 1e3;
            black_box(&mask);
            ms
        }

        fn pass(
            &self,
            proto: &Matcher,
            tokens: &[TokenId],
            out: &mut Vec<f64>,
        ) -> Result<(), String> {
            let mut m = proto.clone();
            for (i, &t) in tokens.iter().enumerate() {
                let t0 = Instant::now();
                let mask = m.compute_mask().map_err(|e| e.to_string())?;
                out.push(micros(t0.elapsed()));
                if !mask.is_allowed(t) {
                    return Err(format!("token #{i} ({t}) not allowed"));
                }
                drop(mask);
                m.consume_token(t)
                    .map_err(|e| format!("token #{i} ({t}): {e}"))?;
            }
            if !m.is_accepting().unwrap_or(false) {
                return Err("not accepting after the whole output".into());
            }
            Ok(())
        }

        /// As [`cm::batch`], llguidance's way: its matchers' `compute_mask` in parallel on
        /// `pool` (rayon), each copied into its row, as its C API's `llg_par_compute_mask`
        /// does. `None` where llguidance has no counterpart of the workload.
        pub fn batch(
            &self,
            w: &Workload,
            vocab: &Vocab,
            tokens: &[TokenId],
            batch: usize,
            steps: usize,
            pool: &rayon::ThreadPool,
        ) -> Option<Vec<f64>> {
            use rayon::prelude::*;
            let proto = self.matcher(&self.prepared(w, vocab)?).ok()?;
            let row_words = vocab.len().div_ceil(32);
            let mut rows = vec![0u32; batch * row_words];
            let mut seqs: Vec<(Matcher, usize)> = (0..batch)
                .map(|i| {
                    let mut m = proto.clone();
                    let pos = (i * 7) % tokens.len();
                    m.consume_tokens(&tokens[..pos]).unwrap();
                    (m, pos)
                })
                .collect();
            let mut out = Vec::with_capacity(steps);
            for _ in 0..steps {
                let t0 = Instant::now();
                pool.install(|| {
                    seqs.par_iter_mut()
                        .zip(rows.par_chunks_mut(row_words))
                        .for_each(|((m, _), row)| {
                            let v = m.compute_mask().unwrap();
                            let src = v.as_slice();
                            let n = src.len().min(row.len());
                            row[..n].copy_from_slice(&src[..n]);
                        })
                });
                out.push(micros(t0.elapsed()));
                black_box(&rows);
                for (m, pos) in &mut seqs {
                    m.consume_token(tokens[*pos]).unwrap();
                    *pos += 1;
                    // A finished sequence starts again (llguidance's stopped parser has no
                    // mask to compute).
                    if *pos == tokens.len() {
                        *m = proto.clone();
                        *pos = 0;
                    }
                }
            }
            Some(out)
        }

        /// `None` where llguidance has no counterpart of the workload.
        pub fn measure(
            &self,
            w: &Workload,
            vocab: &Vocab,
            tokens: &[TokenId],
            k: &Knobs,
        ) -> Option<Row> {
            let p = self.prepared(w, vocab)?;
            Some(self.measure_prepared(w, vocab, &p, tokens, k))
        }

        fn measure_prepared(
            &self,
            w: &Workload,
            vocab: &Vocab,
            schema: &Prepared,
            tokens: &[TokenId],
            k: &Knobs,
        ) -> Row {
            let mut row = Row::default();
            let proto = match self.matcher(schema) {
                Ok(m) => m,
                Err(e) => return Row::failed(e),
            };
            if let Err(e) = self.pass(&proto, tokens, &mut Vec::new()) {
                return Row::failed(format!("llguidance rejects the output: {e}"));
            }
            drop(proto);
            for _ in 0..k.compile {
                let (m, ms, first) = self.compile(schema).unwrap();
                row.compile_ms.push(ms);
                row.first_mask_us.push(first);
                drop(m);
            }
            for _ in 0..k.compile {
                row.new_request_ms.push(self.new_request(w, vocab));
            }
            let before = live();
            let (proto, _, _) = self.compile(schema).unwrap();
            // `compile` computed the first mask on a clone: compute it on the kept matcher too,
            // so that what it holds matches callmask's (a matcher with its first mask done).
            let mut kept = proto.clone();
            let mask = kept.compute_mask().unwrap();
            drop(mask);
            row.mem_grammar = Some((live() - before) as i64);
            drop(kept);
            self.pass(&proto, tokens, &mut Vec::new()).unwrap();
            row.steps = tokens.len();
            for _ in 0..k.reps {
                self.pass(&proto, tokens, &mut row.mask_us).unwrap();
            }
            let before = live();
            let mut m = proto.clone();
            for &t in tokens {
                let mask = m.compute_mask().unwrap();
                drop(mask);
                m.consume_token(t).unwrap();
            }
            row.mem_sequence = Some((live() - before) as i64);
            drop(m);
            row
        }
    }
}

// ---------------------------------------------------------------------------------------------
// XGrammar (through scripts/bench_xgrammar.py)

mod xgr {
    use super::*;

    pub fn python() -> PathBuf {
        std::env::var_os("CALLMASK_XGRAMMAR_PYTHON")
            .map(PathBuf::from)
            .unwrap_or_else(|| cache_dir().join("venv-xgrammar/bin/python"))
    }

    pub fn script() -> PathBuf {
        std::env::var_os("CALLMASK_XGRAMMAR_SCRIPT")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/bench_xgrammar.py")
            })
    }

    /// Why XGrammar cannot run, if it cannot.
    pub fn unavailable() -> Option<String> {
        let (p, s) = (python(), script());
        if !p.exists() {
            return Some(format!(
                "XGrammar's venv is missing ({}): run scripts/setup-xgrammar.sh",
                p.display()
            ));
        }
        if !s.exists() {
            return Some(format!("{} is missing", s.display()));
        }
        None
    }

    /// Runs the script on the cases; (per case name: its JSON), the header (version, settings).
    pub fn run(
        vocab_name: &str,
        v: &Vocab,
        cases: Vec<Value>,
        k: &Knobs,
    ) -> Result<(BTreeMap<String, Value>, Value), String> {
        let hex: Vec<String> = (0..v.len() as TokenId)
            .map(|i| {
                v.token_bytes(i)
                    .unwrap()
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect()
            })
            .collect();
        let special: Vec<TokenId> = v.special_tokens().map(|(i, _)| i).collect();
        let input = json!({"vocab": {"tokens_hex": hex, "eos": v.eos_tokens(), "special": special},
                           "cases": cases, "compile_trials": k.compile});
        let dir = target_dir().join("bench");
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let path = dir.join(format!("xgrammar_input_{vocab_name}.json"));
        std::fs::write(&path, serde_json::to_vec(&input).unwrap()).map_err(|e| e.to_string())?;
        eprintln!(
            "xgrammar: running {} on {}",
            script().display(),
            path.display()
        );
        let budget = env_f64("CALLMASK_XGRAMMAR_COMPILE_BUDGET_S", 8.0);
        let extra = std::env::var("CALLMASK_XGRAMMAR_ARGS").unwrap_or_default();
        let out = std::process::Command::new(python())
            .arg(script())
            .arg(&path)
            .arg("--compile-budget-s")
            .arg(budget.to_string())
            .args(extra.split_whitespace())
            .stderr(std::process::Stdio::inherit())
            .output()
            .map_err(|e| format!("cannot run {}: {e}", python().display()))?;
        if !out.status.success() {
            return Err(format!("bench_xgrammar.py exited with {}", out.status));
        }
        let doc: Value = serde_json::from_slice(&out.stdout)
            .map_err(|e| format!("bench_xgrammar.py output is not JSON: {e}"))?;
        let mut by_name = BTreeMap::new();
        for c in doc["cases"].as_array().into_iter().flatten() {
            if let Some(n) = c["name"].as_str() {
                by_name.insert(n.to_string(), c.clone());
            }
        }
        let mut head = doc.clone();
        if let Some(o) = head.as_object_mut() {
            o.remove("cases");
        }
        Ok((by_name, head))
    }
}

// ---------------------------------------------------------------------------------------------
// The run

/// (workload index, its tokens or why it has none, engine → row)
type WorkloadResult = (
    usize,
    Result<Vec<TokenId>, String>,
    BTreeMap<&'static str, Row>,
);

struct VocabRun {
    name: &'static str,
    label: &'static str,
    vocab: Arc<Vocab>,
    /// engine → (load ms, live bytes)
    load: BTreeMap<&'static str, (f64, Option<i64>)>,
    /// (workload index, tokens or error, engine → row)
    results: Vec<WorkloadResult>,
    xgr_head: Option<Value>,
    xgr_note: Option<String>,
    /// Batch throughput rows (JSON), see [`run_batches`].
    batch: Vec<Value>,
}

/// Batch throughput: for each workload named in `CALLMASK_BENCH_BATCH_WORKLOADS` (default
/// `tools_5,tools_5/hermes/auto`; those the run has), each batch size of `CALLMASK_BENCH_BATCH`
/// (default `1,8,64`) on a rayon pool of `CALLMASK_BENCH_THREADS` threads (default 2): µs per
/// fill of the whole batch, callmask ([`cm::batch`]) and llguidance ([`llg::Engine::batch`]),
/// over `CALLMASK_BENCH_BATCH_STEPS` decoding steps (default 64).
fn run_batches(
    ws: &[Workload],
    results: &[WorkloadResult],
    vocab: &Arc<Vocab>,
    llg: Option<&llg::Engine>,
    k: &Knobs,
) -> Vec<Value> {
    let names = env_list("CALLMASK_BENCH_BATCH_WORKLOADS")
        .unwrap_or_else(|| vec!["tools_5".into(), "tools_5/hermes/auto".into()]);
    let sizes: Vec<usize> = env_list("CALLMASK_BENCH_BATCH")
        .unwrap_or_else(|| vec!["1".into(), "8".into(), "64".into()])
        .iter()
        .filter_map(|x| x.parse().ok())
        .filter(|&b| b > 0)
        .collect();
    let threads = env_usize("CALLMASK_BENCH_THREADS", 2).max(1);
    let steps = env_usize("CALLMASK_BENCH_BATCH_STEPS", 64).max(1);
    if !k.uses("callmask") || sizes.is_empty() {
        return Vec::new();
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("rayon pool");
    let mut out = Vec::new();
    for (wi, toks, _) in results {
        let w = &ws[*wi];
        let Ok(toks) = toks else { continue };
        if !names.iter().any(|n| n == &w.name) || toks.is_empty() {
            continue;
        }
        for &b in &sizes {
            let c = summarize(&cm::batch(w, vocab, toks, b, steps, &pool));
            let l = llg
                .and_then(|e| e.batch(w, vocab, toks, b, steps, &pool))
                .map(|x| summarize(&x));
            eprintln!(
                "batch {:<22} {b:>3} x {threads} threads: callmask {} µs, llguidance {} µs",
                w.name,
                fmt_us(c.p50),
                l.map_or("-".into(), |l| fmt_us(l.p50))
            );
            out.push(
                json!({"workload": w.name, "batch": b, "threads": threads, "steps": steps,
                "callmask_us": summary_json(c),
                "llguidance_us": l.map(summary_json),
                "ratio_p50": l.map_or(Value::Null, |l| ratio(c.p50, l.p50))}),
            );
        }
    }
    out
}

fn load_vocab(name: &str) -> (Arc<Vocab>, f64, i64, f64, i64) {
    let before = live();
    let t0 = Instant::now();
    let v = match name {
        "llama" => {
            let p = cache_dir().join(LLAMA31_TOKENIZER);
            Vocab::from_tokenizer_json(&p).unwrap_or_else(|e| {
                panic!("{}: {e} (scripts/fetch-data.sh tokenizers)", p.display())
            })
        }
        _ => {
            let p = cache_dir().join(GEMMA3_GGUF);
            Vocab::from_gguf(&p)
                .unwrap_or_else(|e| panic!("{}: {e} (scripts/fetch-data.sh gemma)", p.display()))
        }
    };
    let v = Arc::new(v);
    let load_ms = t0.elapsed().as_secs_f64() * 1e3;
    let load_bytes = live() - before;
    // The token trie is built by the first automaton over the vocabulary.
    let before = live();
    let t0 = Instant::now();
    let g =
        Grammar::from_json_schema(&json!({"type": "boolean"}), &CompileOptions::default()).unwrap();
    let a = TokenAutomaton::new(&g, v.clone()).unwrap();
    let trie_ms = t0.elapsed().as_secs_f64() * 1e3;
    drop(a);
    let trie_bytes = live() - before;
    (v, load_ms, load_bytes as i64, trie_ms, trie_bytes as i64)
}

fn run_vocab(name: &'static str, ws: &[Workload], k: &Knobs) -> VocabRun {
    let label = if name == "llama" {
        "Llama 3.1"
    } else {
        "Gemma 3"
    };
    eprintln!("\n== {label} ==");
    let (vocab, load_ms, load_b, trie_ms, trie_b) = load_vocab(name);
    let mut load = BTreeMap::new();
    load.insert("callmask", (load_ms + trie_ms, Some(load_b + trie_b)));
    eprintln!(
        "callmask: vocab {:.0} ms + trie {:.0} ms, {} tokens",
        load_ms,
        trie_ms,
        vocab.len()
    );
    let llg = k.uses("llguidance").then(|| {
        let before = live();
        let t0 = Instant::now();
        let e = if name == "llama" {
            llg::from_tokenizer_json(&cache_dir().join(LLAMA31_TOKENIZER), vocab.eos_tokens())
        } else {
            llg::from_vocab(&vocab)
        };
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        load.insert("llguidance", (ms, Some((live() - before) as i64)));
        eprintln!("llguidance: TokEnv + ParserFactory {ms:.0} ms");
        assert_eq!(e.n_vocab(), vocab.len(), "llguidance vocabulary size");
        let differ = (0..vocab.len() as TokenId)
            .filter(|&i| !vocab.is_special(i) && e.token_bytes(i) != vocab.token_bytes(i).unwrap())
            .count();
        assert_eq!(differ, 0, "llguidance and callmask token bytes differ");
        e
    });
    let mut results = Vec::new();
    for (wi, w) in ws.iter().enumerate() {
        let tokens = cm::tokenize(w, &vocab);
        let mut rows = BTreeMap::new();
        match &tokens {
            Err(e) => eprintln!("{}: {e}", w.name),
            Ok(toks) => {
                let t0 = Instant::now();
                if k.uses("callmask") {
                    rows.insert("callmask", cm::measure(w, &vocab, toks, k));
                }
                if let Some(row) = llg.as_ref().and_then(|e| e.measure(w, &vocab, toks, k)) {
                    rows.insert("llguidance", row);
                }
                let p50 = |e: &str| {
                    rows.get(e)
                        .and_then(|r: &Row| r.key_numbers())
                        .map(|x| fmt_us(x.2.p50))
                        .unwrap_or_else(|| "-".into())
                };
                eprintln!(
                    "{:<24} {:>4} tokens  p50 callmask {} µs, llguidance {} µs  ({:.1} s)",
                    w.name,
                    toks.len(),
                    p50("callmask"),
                    p50("llguidance"),
                    t0.elapsed().as_secs_f64()
                );
                for (e, r) in &rows {
                    if let Some(err) = &r.error {
                        eprintln!("  {e}: {err}");
                    }
                }
            }
        }
        results.push((wi, tokens, rows));
    }
    let batch = run_batches(ws, &results, &vocab, llg.as_ref(), k);
    let mut run = VocabRun {
        name,
        label,
        vocab,
        load,
        results,
        batch,
        xgr_head: None,
        xgr_note: None,
    };
    if k.uses("xgrammar") {
        match xgr::unavailable() {
            Some(why) => {
                eprintln!("xgrammar skipped: {why}");
                run.xgr_note = Some(why);
            }
            None => {
                let cases: Vec<Value> = run
                    .results
                    .iter()
                    .filter_map(|(wi, t, _)| {
                        let w = &ws[*wi];
                        let t = t.as_ref().ok()?;
                        let mut c = json!({"name": w.name, "input": w.input, "tokens": t,
                                           "reps": k.reps});
                        match &w.source {
                            Source::Schema(s) => c["schema"] = s.clone(),
                            Source::Tooling(d, choice, _) => {
                                let model = if *d == "hermes" { "qwen_3" } else { "llama" };
                                c["structural_tag"] =
                                    json!({"model": model, "tool_choice": choice});
                            }
                            Source::Dialect(..) => return None,
                        }
                        Some(c)
                    })
                    .collect();
                match xgr::run(name, &run.vocab, cases, k) {
                    Ok((by_name, head)) => {
                        if let Some(l) = head["vocab"]["build_ms"].as_f64() {
                            run.load.insert("xgrammar", (l, None));
                        }
                        for (wi, _, rows) in &mut run.results {
                            if let Some(c) = by_name.get(&ws[*wi].name) {
                                let row = match c.get("error") {
                                    Some(e) => Row::failed(
                                        e.as_str().map(str::to_string).unwrap_or(e.to_string()),
                                    ),
                                    None => Row {
                                        external: Some(c.clone()),
                                        ..Row::default()
                                    },
                                };
                                rows.insert("xgrammar", row);
                            }
                        }
                        run.xgr_head = Some(head);
                    }
                    Err(e) => {
                        eprintln!("xgrammar failed: {e}");
                        run.xgr_note = Some(e);
                    }
                }
            }
        }
    }
    run
}

// ---------------------------------------------------------------------------------------------
// Output: JSON, BENCHMARKS.md, plots

fn cmd_out(cmd: &str, args: &[&str]) -> String {
    std::process::Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn machine() -> Value {
    let lscpu = cmd_out("lscpu", &[]);
    let field = |k: &str| {
        lscpu
            .lines()
            .find(|l| l.trim_start().starts_with(k))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default()
    };
    json!({
        "cpu": field("Model name"),
        "cpus": field("CPU(s)"),
        "loadavg": std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim(),
        "os": cmd_out("uname", &["-srm"]),
        "rustc": cmd_out("rustc", &["--version"]),
    })
}

/// Ratio callmask / peer as JSON.
fn ratio(a: f64, b: f64) -> Value {
    if a.is_finite() && b.is_finite() && b > 0.0 {
        json!(((a / b) * 1e5).round() / 1e5)
    } else {
        Value::Null
    }
}

fn ratios(rows: &BTreeMap<&'static str, Row>) -> Value {
    let mut o = serde_json::Map::new();
    let Some(c) = rows.get("callmask").and_then(Row::key_numbers) else {
        return Value::Object(o);
    };
    let warm = rows
        .get("callmask")
        .map_or(f64::NAN, |r| summarize(&r.compile_warm_ms).p50);
    let (nr, nr_warm) = rows["callmask"].new_request();
    // The best peer's number per measure (the smallest), for the targets.
    let mut best = [f64::INFINITY; 5];
    for p in PEERS {
        if let Some(x) = rows.get(p).and_then(Row::key_numbers) {
            let pn = rows[p].new_request().0;
            o.insert(
                p.into(),
                json!({"compile": ratio(c.0, x.0), "compile_warm_caches": ratio(warm, x.0), "first_mask": ratio(c.1, x.1),
                       "new_request": ratio(nr, pn), "new_request_warm_caches": ratio(nr_warm, pn),
                       "mask_p50": ratio(c.2.p50, x.2.p50), "mask_p99": ratio(c.2.p99, x.2.p99),
                       "mask_p99_step_min": ratio(rows["callmask"].step_min_p99(), rows[p].step_min_p99())}),
            );
            for (b, v) in best.iter_mut().zip([pn, x.0, x.2.p50, x.2.p99, x.1]) {
                if v.is_finite() {
                    *b = b.min(v);
                }
            }
        }
    }
    if best.iter().all(|b| b.is_finite()) {
        o.insert(
            "best_peer".into(),
            json!({"new_request": ratio(nr, best[0]), "new_request_warm_caches": ratio(nr_warm, best[0]),
                   "compile": ratio(c.0, best[1]), "compile_warm_caches": ratio(warm, best[1]),
                   "first_mask": ratio(c.1, best[4]),
                   "mask_p50": ratio(c.2.p50, best[2]), "mask_p99": ratio(c.2.p99, best[3])}),
        );
    }
    Value::Object(o)
}

/// Where in the output each step is, by the bytes before its token: `string` (inside a quoted
/// string within brackets), `structure` (inside brackets: JSON, a call's arguments) or `text`
/// (outside brackets: free text, call markers). A lexical split for the profile of the mask
/// times, the same for every engine.
const REGIONS: [&str; 3] = ["text", "structure", "string"];

/// Each step's region ([`REGIONS`]).
fn step_regions(vocab: &Vocab, toks: &[TokenId]) -> Vec<&'static str> {
    let mut depth = 0usize;
    let mut quote: Option<u8> = None;
    let mut escaped = false;
    let mut out = Vec::with_capacity(toks.len());
    for &t in toks {
        out.push(match (quote, depth) {
            (Some(_), _) => "string",
            (None, 0) => "text",
            (None, _) => "structure",
        });
        for &b in vocab.token_bytes(t).unwrap_or(&[]) {
            match quote {
                Some(_) if escaped => escaped = false,
                Some(_) if b == b'\\' => escaped = true,
                Some(q) if b == q => quote = None,
                Some(_) => {}
                None if depth > 0 && (b == b'"' || b == b'\'') => quote = Some(b),
                None if b == b'{' || b == b'[' || b == b'(' => depth += 1,
                None if b == b'}' || b == b']' || b == b')' => depth = depth.saturating_sub(1),
                None => {}
            }
        }
    }
    out
}

/// Per region: the p50 of the steps' fastest masks (µs) and the steps counted.
fn by_region(minima: &[f64], regions: &[&str]) -> Value {
    let mut o = serde_json::Map::new();
    for r in REGIONS {
        let xs: Vec<f64> = minima
            .iter()
            .zip(regions)
            .filter(|(_, g)| **g == r)
            .map(|(x, _)| *x)
            .collect();
        if !xs.is_empty() {
            o.insert(
                r.into(),
                json!({"p50": num3(summarize(&xs).p50), "steps": xs.len()}),
            );
        }
    }
    Value::Object(o)
}

fn results_json(runs: &[VocabRun], ws: &[Workload], k: &Knobs, meta: &Value) -> Value {
    let vocabs: Vec<Value> = runs
        .iter()
        .map(|r| {
            let load: serde_json::Map<String, Value> = r
                .load
                .iter()
                .map(|(e, (ms, b))| (e.to_string(), json!({"ms": num3(*ms), "bytes": b})))
                .collect();
            json!({"name": r.name, "label": r.label, "size": r.vocab.len(), "load": load,
                   "xgrammar": r.xgr_head, "xgrammar_note": r.xgr_note, "batch": r.batch})
        })
        .collect();
    let mut results = Vec::new();
    for r in runs {
        for (wi, toks, rows) in &r.results {
            let w = &ws[*wi];
            let regions = toks
                .as_ref()
                .map(|t| step_regions(&r.vocab, t))
                .unwrap_or_default();
            let engines: serde_json::Map<String, Value> = rows
                .iter()
                .map(|(e, row)| {
                    let mut o = row.to_json();
                    let minima = row.step_minima();
                    if row.error.is_none() && minima.len() >= regions.len() && !regions.is_empty() {
                        o["mask_step_min_by_region_us"] = by_region(&minima, &regions);
                    }
                    (e.to_string(), o)
                })
                .collect();
            let mut o = json!({"vocab": r.name, "workload": w.name, "kind": w.kind,
                "n_tools": w.n_tools, "text": w.text, "engines": engines, "ratios": ratios(rows)});
            match toks {
                Ok(t) => o["tokens"] = json!(t.len()),
                Err(e) => o["error"] = json!(e),
            }
            results.push(o);
        }
    }
    json!({"meta": meta, "knobs": {"reps": k.reps, "compile_trials": k.compile, "fuzz_ms": k.fuzz_ms,
           "engines": k.engines}, "vocabs": vocabs, "results": results})
}

fn fmt_ms(x: f64) -> String {
    if !x.is_finite() {
        "-".into()
    } else if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 1.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.3}")
    }
}

fn fmt_bytes(b: &Value) -> String {
    match b.as_f64() {
        Some(x) if x >= 1024.0 * 1024.0 => format!("{:.1} MB", x / 1024.0 / 1024.0),
        Some(x) => format!("{:.0} KB", x / 1024.0),
        None => "n/a".into(),
    }
}

fn fmt_r(v: &Value) -> String {
    match v.as_f64() {
        Some(r) if r < 0.00095 => format!("{r:.1e}×"),
        Some(r) if r < 0.0095 => format!("{r:.4}×"),
        Some(r) if r < 0.095 => format!("{r:.3}×"),
        Some(r) => format!("{r:.2}×"),
        None => "-".into(),
    }
}

fn geomean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    (xs.iter().map(|x| x.ln()).sum::<f64>() / xs.len() as f64).exp()
}

/// The summary: geometric means of the ratios per vocabulary and peer (and against the best
/// peer per measure), target misses, and each workload's ratios against the best peer.
fn summary_md(doc: &Value) -> String {
    let mut s = String::new();
    s.push_str("## Summary\n\n");
    s.push_str("Geometric mean of callmask / peer over the workloads both ran (count in parentheses), and how many workloads miss the ≤ 0.5 target. *best peer* = the faster peer per workload and measure. **new request** = the request's JSON text (schema or tools) in, first mask out; callmask with its caches (`Caches`) cleared (cold) or kept (warm).\n\n");
    s.push_str("| vocabulary | peer | new request, cold | new request, warm | compile | compile, callmask caches warm | first mask | mask p50 | mask p99 | mask p99, step minima | misses (new request cold / warm / compile / p50 / p99) |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    const COLS: [&str; 8] = [
        "new_request",
        "new_request_warm_caches",
        "compile",
        "compile_warm_caches",
        "first_mask",
        "mask_p50",
        "mask_p99",
        "mask_p99_step_min",
    ];
    for v in doc["vocabs"].as_array().into_iter().flatten() {
        let vn = v["name"].as_str().unwrap_or("");
        for p in PEERS.iter().copied().chain(["best_peer"]) {
            let mut cols: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
            for r in doc["results"].as_array().into_iter().flatten() {
                if r["vocab"] != vn {
                    continue;
                }
                if let Some(x) = r["ratios"][p].as_object() {
                    for k in COLS {
                        if let Some(f) = x.get(k).and_then(Value::as_f64) {
                            cols.entry(k).or_default().push(f.max(1e-6));
                        }
                    }
                }
            }
            if cols.is_empty() {
                continue;
            }
            let g = |k: &str| match cols.get(k) {
                Some(xs) => format!("{} ({})", fmt_r(&json!(geomean(xs))), xs.len()),
                None => "-".into(),
            };
            let miss = |k: &str| {
                cols.get(k)
                    .map_or(0, |xs| xs.iter().filter(|&&x| x > 0.5).count())
            };
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} / {} / {} / {} |\n",
                v["label"].as_str().unwrap_or(""),
                if p == "best_peer" { "*best peer*" } else { p },
                g(COLS[0]),
                g(COLS[1]),
                g(COLS[2]),
                g(COLS[3]),
                g(COLS[4]),
                g(COLS[5]),
                g(COLS[6]),
                g(COLS[7]),
                miss(COLS[0]),
                miss(COLS[1]),
                miss(COLS[2]),
                miss(COLS[5]),
                miss(COLS[6])
            ));
        }
    }
    s.push_str("\n### New request per workload\n\nms from the request's JSON text to its first mask; ratio = callmask / best peer (target ≤ 0.5).\n\n| vocabulary | workload | callmask cold | callmask warm | llguidance | xgrammar | cold / best | warm / best | mask p50 / best |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for r in doc["results"].as_array().into_iter().flatten() {
        let e = &r["engines"];
        let f = |v: &Value| fmt_ms(v.as_f64().unwrap_or(f64::NAN));
        if e["callmask"]["new_request_ms"].is_null() {
            continue;
        }
        let b = &r["ratios"]["best_peer"];
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r["vocab"].as_str().unwrap_or(""),
            r["workload"].as_str().unwrap_or(""),
            f(&e["callmask"]["new_request_ms"]),
            f(&e["callmask"]["new_request_warm_caches_ms"]),
            f(&e["llguidance"]["new_request_ms"]),
            f(&e["xgrammar"]["new_request_ms"]),
            fmt_r(&b["new_request"]),
            fmt_r(&b["new_request_warm_caches"]),
            fmt_r(&b["mask_p50"]),
        ));
    }
    let mut head = false;
    for v in doc["vocabs"].as_array().into_iter().flatten() {
        for b in v["batch"].as_array().into_iter().flatten() {
            if !head {
                s.push_str("\n### Batch fill\n\nµs per fill of a whole batch (p50 over the decoding steps; sequences at staggered positions, each accepting its next token between fills), rayon pool: callmask `mask::fill_u32_rows`, llguidance `compute_mask` per matcher in `par_iter` (as its `llg_par_compute_mask`).\n\n| vocabulary | workload | batch | threads | callmask µs | llguidance µs | callmask / llguidance |\n|---|---|---:|---:|---:|---:|---:|\n");
                head = true;
            }
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} |\n",
                v["label"].as_str().unwrap_or(""),
                b["workload"].as_str().unwrap_or(""),
                b["batch"],
                b["threads"],
                fmt_us(b["callmask_us"]["p50"].as_f64().unwrap_or(f64::NAN)),
                fmt_us(b["llguidance_us"]["p50"].as_f64().unwrap_or(f64::NAN)),
                fmt_r(&b["ratio_p50"])
            ));
        }
    }
    s
}

/// One target of the suite: what it measures, its threshold, and how a workload's row gives
/// the number (`None`: the target does not apply to that row).
struct Target {
    /// What the target says, as in the issue that set it.
    label: &'static str,
    /// The row's number (a ratio, or ms), or `None` where the target does not apply.
    value: fn(&Value) -> Option<f64>,
    /// The largest number that meets the target.
    limit: f64,
    /// How the number is printed: a ratio (`×`) or ms.
    ratio: bool,
    /// A miss's profile and the change it needs (the misses table).
    profile: fn(&Value) -> Option<Profile>,
}

/// The tool-scale targets' workloads: N tools cold in Hermes and in a text-first dialect
/// (functools), with their limits in ms.
fn scale_limit(workload: &str) -> Option<f64> {
    let (n, rest) = workload.strip_prefix("tools_")?.split_once('/')?;
    if rest != "hermes/auto" && rest != "functools" {
        return None;
    }
    match n {
        "100" => Some(5.0),
        "400" => Some(20.0),
        "1000" => Some(60.0),
        _ => None,
    }
}

/// The suite's targets, each with the workloads it applies to and its misses.
const TARGETS: [Target; 5] = [
    Target {
        label: "new request, cold: ≤ 0.5× the best peer",
        value: |r| r["ratios"]["best_peer"]["new_request"].as_f64(),
        limit: 0.5,
        ratio: true,
        profile: |r| request_profile(r, false),
    },
    Target {
        label: "new request, warm: ≤ 0.25× the best peer",
        value: |r| r["ratios"]["best_peer"]["new_request_warm_caches"].as_f64(),
        limit: 0.25,
        ratio: true,
        profile: |r| request_profile(r, true),
    },
    Target {
        label: "first mask alone: ≤ 1× llguidance's",
        value: |r| r["ratios"]["llguidance"]["first_mask"].as_f64(),
        limit: 1.0,
        ratio: true,
        profile: first_mask_profile,
    },
    Target {
        label: "100 / 400 / 1,000 tools cold (hermes/auto, functools): < 5 / 20 / 60 ms",
        // Normalized to the workload's own limit: 1 is the limit.
        value: |r| {
            let limit = scale_limit(r["workload"].as_str()?)?;
            Some(r["engines"]["callmask"]["new_request_ms"].as_f64()? / limit)
        },
        limit: 1.0,
        ratio: false,
        profile: |r| request_profile(r, false),
    },
    Target {
        label: "mask p50: ≤ 0.5× the best peer",
        value: |r| r["ratios"]["best_peer"]["mask_p50"].as_f64(),
        limit: 0.5,
        ratio: true,
        profile: p50_profile,
    },
];

/// A design change a miss needs, named in the misses table by its id.
struct Change {
    id: &'static str,
    what: &'static str,
}

/// The changes the misses point to, each for the part of the time it removes.
const CHANGES: [Change; 10] = [
    Change {
        id: "typed-parse",
        what: "Tools deserialized straight from the request's JSON text (a serde `Deserialize` \
               for `Tools`), not through a `serde_json::Value` tree and \
               `Tools::from_openai_value`.",
    },
    Change {
        id: "lazy-lexemes",
        what: "Lexemes a cold request builds, each at a fraction of a full construction: a \
               string literal's automaton merges the byte classes that behave alike (a \
               `maxLength` string 42 -> 26 classes, an `email` 43 -> 8), one character's \
               spelling (which a `maxLength` string copies per count), every built-in format's \
               quoted string and the plain types are read from the library's table of standard \
               lexemes, an `enum` of plain words is spelled as literals, and integer ranges \
               write whole lengths as one repetition (callgrind, cold new request on Llama 3.1: \
               `schema/notify` 6.62M -> 2.98M instructions, `schema/shipment` 4.44M -> 3.24M). \
               What is left: user `pattern`s and a number's bounds go through regex-automata's \
               determinization (`schema/shipment`: 1.5M of its 3.2M); next, counted strings (a \
               `maxLength` string as one character's automaton plus a counter in the matcher's \
               frame) and bounds built digit by digit.",
    },
    Change {
        id: "tool-fragments",
        what: "Each tool's argument grammar compiled once and kept in `Caches` by the tool's \
               schema text, so a request compiles only the tools it has not seen; the \
               dialect's call structure joins the fragments.",
    },
    Change {
        id: "schema-lexemes",
        what: "The lexemes a warm request of a schema still builds kept in `Caches` by the \
               keywords that define them (an object's extra-key automaton, any key but the \
               listed properties, is kept by the listed names; with `propertyNames` it is built \
               per request).",
    },
    Change {
        id: "lazy-binding",
        what: "The automaton's per-vocabulary tables (bounded text automata, special tokens) \
               built at the first step that needs them, not when the grammar is bound.",
    },
    Change {
        id: "vocab-walks",
        what: "Walks of the standard lexemes over the vocabulary's token trie made once per \
               vocabulary, outside the compile caches, so a cold request walks only its own \
               lexemes. Done for whitespace gaps (their walks are kept in the vocabulary's own \
               caches by the policy: callgrind, `schema/shipment`'s cold first mask 132k -> 72k \
               instructions; every first mask of the suite is now under llguidance's, on both \
               vocabularies); left: plain strings, integers, numbers and free keys.",
    },
    Change {
        id: "start-masks",
        what: "The first mask of a tool-calling request kept in `Caches` by the start state's \
               shape (in `auto` a text-first dialect's first mask is free text plus the tokens \
               that open a call, which depend on the tools only through tokens reaching into a \
               function name). Free-text walks already hand their dense token sets over as \
               bitmaps, and a union of calls of one shape is one frame inside the walks until \
               the calls part (`llama31_json` required over 1,000 tools: the first masks of 1 \
               cold + 2 warm requests 16.8M -> 0.23M instructions, the same for 100 tools); what \
               is left of a text-first first mask is the walk out of the text's exits into a \
               call's opening (one walk per token that goes on past the text), the same for any \
               number of tools.",
    },
    Change {
        id: "distinct-log",
        what: "The distinct-calls rule, on by default for dialects. The call log is fed only \
               once a call may be complete, and where no budget binds, a mask inside a call of \
               a function not called yet is the grammar's after a check of the stacks (cached \
               with the mask), so a dialect's warm step costs what a JSON Schema's does: the \
               suite's hermes step minima are the same with one call (`tools_1`, the rule never \
               active) and two (`tools_5`). What is left is the call boundary: the masks after a \
               call ends, at the next call's opening and at a name that may still be a function \
               called before go to the bounded search, 10 µs to 1 ms each (14 of the 72 steps \
               of `tools_5/hermes/auto` on Llama 3.1); they show in p99 and max, not p50. The \
               change: a cheap rule for a call opening from which a function not called yet can \
               still be chosen, and for the close of a call of one.",
    },
    Change {
        id: "mask-hit",
        what: "A warm step is a whole-mask cache hit: a base mask that many entries share \
               copied (or the words cleared, for a mask close to empty) and the words where the \
               entry differs patched; right after an accept the matcher follows its entry's \
               link to the next state's entry by token (`examples/pass_profile.rs`, \
               `tools_100/hermes/required`: the first fill after an accept 0.36 µs at the \
               median step, the name steps where 100 calls are open 0.2-0.5 µs). What is left \
               is hermes' text steps: the `<tool_call>` marker and, right after a call, the \
               distinct-calls search (50-500 µs). Next: a cheaper distinct-calls check for the \
               tokens that start a call.",
    },
    Change {
        id: "first-masks",
        what: "A state's first mask walks the token trie. Gaps are walked as lexemes (a frame \
               in a gap is the gap's whitespace automaton, shared per vocabulary through \
               `Caches`, then the frame with its gap closed), steps reuse the buffers of the \
               stacks stepped past, and a byte is tried with a cheap test before a step; a JSON \
               Schema's warm first mask is 6 µs on Llama 3.1 (callgrind, `schema/weather`'s \
               warm first mask: 390k -> 78k instructions). A union of objects of one shape (a \
               call list's `anyOf` over N functions) is one object frame until a value starts, \
               so its first mask steps one stack down the trie, not N (callgrind, `tools_1000`'s \
               call list: the first masks of 1 cold + 2 warm requests 16.0M -> 0.49M \
               instructions). What is left: in a cold request the walks of the gap's and the \
               values' lexemes over the trie (145k instructions cold, most of the time in \
               reading trie nodes not in the CPU's caches).",
    },
];

/// A miss's profile (what the table prints) and the change its largest part needs.
type Profile = (String, &'static str);

/// A new request's phases (ms): parse, lexemes (what the caches hold: the grammar phase cold
/// minus warm), the rest of the grammar phase, automaton, first mask; the largest names the
/// change. `warm`: the warm request's phases (no lexemes part).
fn request_profile(r: &Value, warm: bool) -> Option<Profile> {
    let ph = &r["engines"]["callmask"]["new_request_phases_ms"];
    let (c, w) = (&ph["cold"], &ph["warm"]);
    let f = |v: &Value, k: &str| v[k].as_f64();
    let run = if warm { w } else { c };
    let lexemes = if warm {
        0.0
    } else {
        (f(c, "grammar")? - f(w, "grammar")?).max(0.0)
    };
    let first_cold = f(run, "first_mask")?;
    let first_walks = (first_cold - f(w, "first_mask")?).max(0.0);
    let structure = structure_walk_change(r);
    let parts = [
        ("parse", f(run, "parse")?, "typed-parse"),
        ("lexemes", lexemes, "lazy-lexemes"),
        (
            "grammar",
            f(run, "grammar")? - lexemes,
            if r["kind"] == "schema" {
                "schema-lexemes"
            } else {
                "tool-fragments"
            },
        ),
        ("automaton", f(run, "automaton")?, "lazy-binding"),
        (
            "first mask",
            first_cold,
            if first_walks > first_cold - first_walks {
                "vocab-walks"
            } else {
                structure
            },
        ),
    ];
    let total: f64 = parts.iter().map(|p| p.1).sum();
    let text = parts
        .iter()
        .filter(|p| !(warm && p.0 == "lexemes"))
        .map(|(n, x, _)| format!("{n} {} ({:.0}%)", fmt_ms(*x), 100.0 * x / total))
        .collect::<Vec<_>>()
        .join(" · ");
    let largest = parts.iter().max_by(|a, b| a.1.total_cmp(&b.1))?;
    Some((format!("{text} ms; largest: {}", largest.0), largest.2))
}

/// The change a first mask's structure walk needs: the start masks of a tool-calling dialect,
/// the stack copies of a schema's walk.
fn structure_walk_change(r: &Value) -> &'static str {
    if r["kind"] == "dialect" || r["kind"] == "tooling" {
        "start-masks"
    } else {
        "first-masks"
    }
}

/// The first mask alone: callmask's with its caches cleared and warm, against llguidance's.
fn first_mask_profile(r: &Value) -> Option<Profile> {
    let ph = &r["engines"]["callmask"]["new_request_phases_ms"];
    let cold = ph["cold"]["first_mask"].as_f64()? * 1e3;
    let warm = ph["warm"]["first_mask"].as_f64()? * 1e3;
    let llg = r["engines"]["llguidance"]["first_mask_us"].as_f64()?;
    let walks = (cold - warm).max(0.0);
    let (largest, change) = if walks > warm {
        ("lexeme walks (cold − warm)", "vocab-walks")
    } else {
        ("structure walk (warm)", structure_walk_change(r))
    };
    Some((
        format!(
            "callmask {} µs cold, {} µs caches warm; llguidance {} µs; largest: {largest}",
            fmt_us(cold),
            fmt_us(warm),
            fmt_us(llg)
        ),
        change,
    ))
}

/// Mask p50 by where the steps are ([`REGIONS`]): callmask's p50 of the per-step minima against
/// the best peer's, with the step counts.
fn p50_profile(r: &Value) -> Option<Profile> {
    let e = &r["engines"];
    let c = &e["callmask"]["mask_step_min_by_region_us"];
    let mut parts = Vec::new();
    for region in REGIONS {
        let Some(cm) = c[region]["p50"].as_f64() else {
            continue;
        };
        let best = PEERS
            .iter()
            .filter_map(|p| e[*p]["mask_step_min_by_region_us"][region]["p50"].as_f64())
            .fold(f64::INFINITY, f64::min);
        let steps = c[region]["steps"].as_u64().unwrap_or(0);
        parts.push(format!(
            "{region} {} / {} µs ({steps} steps)",
            fmt_us(cm),
            if best.is_finite() {
                fmt_us(best)
            } else {
                "-".into()
            }
        ));
    }
    (!parts.is_empty()).then(|| {
        (
            format!(
                "step minima p50, callmask / best peer: {}",
                parts.join(" · ")
            ),
            // Dialects included: their warm steps inside a new call are whole-mask hits too
            // (the distinct-calls rule's call boundaries show in p99, see `distinct-log`).
            "mask-hit",
        )
    })
}

/// The misses of every target, each with its profile and the change it needs.
fn misses_md(doc: &Value) -> String {
    let mut s = String::from(
        "## Misses: where the time goes, and the change each needs\n\nEvery miss of the targets \
         above, profiled in this run. New request (cold, warm) and tool scale: callmask's \
         request in phases (median ms over the trials): the JSON text parsed; *lexemes*, what \
         `Caches` holds (the grammar phase cold minus warm: lexeme automata); the rest of the \
         grammar phase; the automaton bound to the vocabulary; the first mask. First mask: cold \
         and with warm caches (the difference: lexeme walks over the token trie). Mask p50: the \
         per-step fastest masks split by where the step is in the output (inside brackets, \
         inside a quoted string, outside both). Batch: callmask's first pass over a fresh \
         automaton (each state's first mask) against its warm passes. The change is the one \
         for the largest part ([changes](#changes)).\n\n\
         | vocabulary | target | workload | value | profile | change |\n|---|---|---|---:|---|---|\n",
    );
    let mut used = std::collections::BTreeSet::new();
    for v in doc["vocabs"].as_array().into_iter().flatten() {
        let vn = v["name"].as_str().unwrap_or("");
        let label = v["label"].as_str().unwrap_or("");
        for t in &TARGETS {
            for r in doc["results"].as_array().into_iter().flatten() {
                if r["vocab"] != vn {
                    continue;
                }
                let Some(x) = (t.value)(r).filter(|x| *x > t.limit) else {
                    continue;
                };
                let value = if t.ratio {
                    fmt_r(&json!(x))
                } else {
                    format!("{x:.2} of the limit")
                };
                let (text, change) = (t.profile)(r).unwrap_or(("-".into(), "-"));
                used.insert(change);
                s.push_str(&format!(
                    "| {label} | {} | `{}` | {value} | {text} | {change} |\n",
                    t.label,
                    r["workload"].as_str().unwrap_or("")
                ));
            }
        }
        for b in v["batch"].as_array().into_iter().flatten() {
            let Some(x) = b["ratio_p50"]
                .as_f64()
                .filter(|x| b["batch"] == 1 && *x > 0.5)
            else {
                continue;
            };
            let w = b["workload"].as_str().unwrap_or("");
            let cm = doc["results"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|r| r["vocab"] == vn && r["workload"] == w)
                .map(|r| &r["engines"]["callmask"]);
            let first = cm.and_then(|c| c["mask_first_pass_us"]["p50"].as_f64());
            let warm = cm.and_then(|c| c["mask_step_min_us"]["p50"].as_f64());
            let f = |x: Option<f64>| x.map_or("-".into(), fmt_us);
            used.insert("first-masks");
            s.push_str(&format!(
                "| {label} | one sequence's fill (batch 1) | `{w}` | {} | callmask {} µs per fill, \
                 llguidance {} µs; callmask's first pass p50 {} µs, warm {} µs; largest: first \
                 masks | first-masks |\n",
                fmt_r(&json!(x)),
                f(b["callmask_us"]["p50"].as_f64()),
                f(b["llguidance_us"]["p50"].as_f64()),
                f(first),
                f(warm),
            ));
        }
    }
    s.push_str("\n### Changes\n\n| change | what it is |\n|---|---|\n");
    for c in CHANGES.iter().filter(|c| used.contains(c.id)) {
        s.push_str(&format!("| {} | {} |\n", c.id, c.what));
    }
    s
}

/// The targets table: per vocabulary and target, the workloads it applies to, how many miss,
/// and the worst of them.
fn targets_md(doc: &Value) -> String {
    let mut s = String::from(
        "## Targets\n\nEach target over the workloads it applies to (same run, same machine; the \
         best peer per workload and measure). The tool-scale row gives the time as a fraction of \
         its limit (1 = the limit). The batch row: one sequence's fill (batch 1) against \
         llguidance's, target ≤ 0.5×.\n\n\
         | vocabulary | target | workloads | misses | worst |\n|---|---|---:|---:|---|\n",
    );
    for v in doc["vocabs"].as_array().into_iter().flatten() {
        let vn = v["name"].as_str().unwrap_or("");
        let label = v["label"].as_str().unwrap_or("");
        for t in &TARGETS {
            let mut n = 0;
            let mut misses = 0;
            let mut worst: Option<(f64, &str)> = None;
            for r in doc["results"].as_array().into_iter().flatten() {
                if r["vocab"] != vn {
                    continue;
                }
                let Some(x) = (t.value)(r) else { continue };
                n += 1;
                if x > t.limit {
                    misses += 1;
                }
                if worst.is_none_or(|(w, _)| x > w) {
                    worst = Some((x, r["workload"].as_str().unwrap_or("")));
                }
            }
            if n == 0 {
                continue;
            }
            let worst = worst.map_or("-".into(), |(x, w)| {
                if t.ratio {
                    format!("{} `{w}`", fmt_r(&json!(x)))
                } else {
                    format!("{x:.2} of the limit `{w}`")
                }
            });
            s.push_str(&format!(
                "| {label} | {} | {n} | {misses} | {worst} |\n",
                t.label
            ));
        }
        let batch1: Vec<(f64, String)> = v["batch"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|b| b["batch"] == 1)
            .filter_map(|b| {
                Some((
                    b["ratio_p50"].as_f64()?,
                    b["workload"].as_str()?.to_string(),
                ))
            })
            .collect();
        if !batch1.is_empty() {
            let misses = batch1.iter().filter(|(x, _)| *x > 0.5).count();
            let (x, w) = batch1
                .iter()
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .expect("not empty");
            s.push_str(&format!(
                "| {label} | one sequence's fill (batch 1): ≤ 0.5× llguidance's | {} | {misses} | {} `{w}` |\n",
                batch1.len(),
                fmt_r(&json!(x))
            ));
        }
    }
    s
}

fn markdown(doc: &Value) -> String {
    let meta = &doc["meta"];
    let mut s = String::new();
    s.push_str("# Benchmarks\n\n");
    s.push_str(
        "Generated by `cargo bench --bench suite` (`scripts/bench.sh`); do not edit by hand. \
         Raw numbers: `target/bench/results.json` (copied to `docs/bench/results.json`). callmask, [llguidance](https://github.com/guidance-ai/llguidance) \
         and [XGrammar](https://github.com/mlc-ai/xgrammar) run in the same benchmark run, on the same \
         vocabularies (same token bytes), grammars (the same JSON Schemas) and token sequences, one thread each.\n\n",
    );
    s.push_str(&format!(
        "Machine: {} ({} CPUs), load average at start `{}`, {}, {}.\n\n",
        meta["machine"]["cpu"].as_str().unwrap_or("?"),
        meta["machine"]["cpus"].as_str().unwrap_or("?"),
        meta["machine"]["loadavg"].as_str().unwrap_or("?"),
        meta["machine"]["os"].as_str().unwrap_or("?"),
        meta["machine"]["rustc"].as_str().unwrap_or("?"),
    ));
    s.push_str(&format!(
        "Commands: `{}`. Settings: {} warm passes per workload, {} compile trials, {} ms of fuzzing per workload.\n\n",
        meta["commands"].as_str().unwrap_or(""),
        doc["knobs"]["reps"],
        doc["knobs"]["compile_trials"],
        doc["knobs"]["fuzz_ms"]
    ));
    s.push_str("Engines:\n\n");
    for (e, v) in meta["engines"].as_object().into_iter().flatten() {
        s.push_str(&format!("- **{e}**: {}\n", v.as_str().unwrap_or("")));
    }
    for v in doc["vocabs"].as_array().into_iter().flatten() {
        if let Some(h) = v["xgrammar"].as_object() {
            s.push_str(&format!(
                "- XGrammar run on {}: version {}, settings `{}`\n",
                v["label"].as_str().unwrap_or(""),
                h.get("version").map(|x| x.to_string()).unwrap_or_default(),
                h.get("settings").map(|x| x.to_string()).unwrap_or_default()
            ));
        }
        if let Some(n) = v["xgrammar_note"].as_str() {
            s.push_str(&format!(
                "- XGrammar on {}: **not run** — {n}\n",
                v["label"].as_str().unwrap_or("")
            ));
        }
    }
    s.push_str(
        "\nMeasures: **compile** = grammar (schema or tools) → matcher with its first mask \
         computed, median over trials on fresh objects (callmask: its `Caches` cleared \
         before each trial; the `warm` column keeps them, as a server would); **first** = that \
         first mask alone (µs); **p50 / p99 / max** = per-token mask time (µs) along the output, \
         warm passes with fresh matchers on one compiled grammar; **p99 step-min** = p99 over the \
         output's steps of each step's fastest pass (robust to preemption on a loaded machine); **grammar mem** = live heap \
         bytes held by one compiled grammar with its first mask; **seq mem** = live heap bytes of \
         one more matcher after a full pass (counting global allocator; XGrammar's C++ heap is \
         not counted: n/a). Ratios are callmask / peer: below 1 callmask is faster; the targets \
         are ≤ 0.5 for compile, p50 and p99, and callmask p50 < 5 µs on Llama 3.1.\n\n\
         Workloads: `tools_N` = JSON Schema of a functools-style call list over N functions \
         (`benches/tools/tools_N.json`), every engine; `tools_N/DIALECT` = callmask's dialect on \
         the same tools (for information, no peer runs them); `tools_N/FORMAT/CHOICE` (hermes, \
         llama31_json; auto, required) = the same tool-calling format in every engine: callmask's \
         dialect, llguidance's Lark grammar (`%json` call inside the format's markers, lazy text \
         before a Hermes call), XGrammar's structural tag (`get_model_structural_tag` preset \
         `qwen_3` / `llama`, `triggered_tags`); `schema/NAME` = \
         `benches/schemas/NAME.schema.json`.\n\n",
    );
    s.push_str("Plots: [p50 vs tools](docs/bench/mask_p50_vs_tools.svg), [p99 vs tools](docs/bench/mask_p99_vs_tools.svg), [p50 vs vocabulary size](docs/bench/mask_p50_vs_vocab.svg).\n\n");
    s.push_str("![mask p50 vs tools](docs/bench/mask_p50_vs_tools.svg)\n\n");

    s.push_str(&targets_md(doc));
    s.push('\n');
    s.push_str(&misses_md(doc));
    s.push('\n');
    s.push_str(&summary_md(doc));
    let over5: Vec<String> = doc["results"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["vocab"] == "llama")
        .filter(|r| {
            r["engines"]["callmask"]["mask_us"]["p50"]
                .as_f64()
                .is_some_and(|x| x >= 5.0)
        })
        .map(|r| format!("`{}`", r["workload"].as_str().unwrap_or("")))
        .collect();
    s.push_str(&format!(
        "\ncallmask mask p50 ≥ 5 µs on Llama 3.1: {}.\n",
        if over5.is_empty() {
            "none".to_string()
        } else {
            over5.join(", ")
        }
    ));

    for v in doc["vocabs"].as_array().into_iter().flatten() {
        let vn = v["name"].as_str().unwrap_or("");
        s.push_str(&format!(
            "\n## {} ({} tokens)\n\nVocabulary load + token trie: {}.\n\n",
            v["label"].as_str().unwrap_or(""),
            v["size"],
            v["load"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(e, x)| format!(
                    "{e} {} ms{}",
                    fmt_ms(x["ms"].as_f64().unwrap_or(f64::NAN)),
                    if x["bytes"].is_null() {
                        String::new()
                    } else {
                        format!(" ({})", fmt_bytes(&x["bytes"]))
                    }
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        s.push_str("| workload | tokens | engine | compile ms | warm ms | first µs | p50 µs | p99 µs | max µs | p99 step-min µs | grammar mem | seq mem | fuzz walks/s |\n");
        s.push_str("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for r in doc["results"].as_array().into_iter().flatten() {
            if r["vocab"] != vn {
                continue;
            }
            let wn = r["workload"].as_str().unwrap_or("");
            let toks = r["tokens"]
                .as_u64()
                .map(|t| t.to_string())
                .unwrap_or("-".into());
            if let Some(e) = r["error"].as_str() {
                s.push_str(&format!(
                    "| {wn} | - | all | n/a: {} | | | | | | | | | |\n",
                    e.replace('|', "/")
                ));
                continue;
            }
            for e in ENGINES {
                let x = &r["engines"][e];
                if x.is_null() {
                    continue;
                }
                if let Some(err) = x["error"].as_str() {
                    let err: String = err.chars().take(100).collect();
                    s.push_str(&format!(
                        "| {wn} | {toks} | {e} | n/a: {} | | | | | | | | | |\n",
                        err.replace(['|', '\n'], " ")
                    ));
                    continue;
                }
                let f = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
                s.push_str(&format!(
                    "| {wn} | {toks} | {e} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                    fmt_ms(f(&x["compile_ms"]["median"])),
                    fmt_ms(f(&x["compile_warm_caches_ms"])),
                    fmt_us(f(&x["first_mask_us"])),
                    fmt_us(f(&x["mask_us"]["p50"])),
                    fmt_us(f(&x["mask_us"]["p99"])),
                    fmt_us(f(&x["mask_us"]["max"])),
                    fmt_us(f(&x["mask_step_min_us"]["p99"])),
                    fmt_bytes(&x["mem_grammar_bytes"]),
                    fmt_bytes(&x["mem_sequence_bytes"]),
                    x["fuzz"]["walks_per_s"]
                        .as_f64()
                        .map(|w| format!("{w:.0}"))
                        .unwrap_or_default()
                ));
            }
            for p in PEERS {
                let x = &r["ratios"][p];
                if x.is_object() {
                    s.push_str(&format!(
                        "| {wn} | | *callmask / {p}* | {} | {} | {} | {} | {} | | {} | | | |\n",
                        fmt_r(&x["compile"]),
                        fmt_r(&x["compile_warm_caches"]),
                        fmt_r(&x["first_mask"]),
                        fmt_r(&x["mask_p50"]),
                        fmt_r(&x["mask_p99"]),
                        fmt_r(&x["mask_p99_step_min"])
                    ));
                }
            }
        }
    }
    s.push_str("\n## Fuzz throughput (callmask)\n\nUniform random walks over the masks: each step draws an allowed token uniformly (end-of-sequence included); a walk stops at the end of the output or after 256 tokens.\n\n| vocabulary | workload | walks/s | tokens/s | ended | dead ends |\n|---|---|---:|---:|---:|---:|\n");
    for r in doc["results"].as_array().into_iter().flatten() {
        let f = &r["engines"]["callmask"]["fuzz"];
        if f.is_object() {
            s.push_str(&format!(
                "| {} | {} | {:.0} | {:.0} | {} / {} | {} |\n",
                r["vocab"].as_str().unwrap_or(""),
                r["workload"].as_str().unwrap_or(""),
                f["walks_per_s"].as_f64().unwrap_or(f64::NAN),
                f["tokens_per_s"].as_f64().unwrap_or(f64::NAN),
                f["ended"],
                f["walks"],
                f["dead_ends"]
            ));
        }
    }
    // The engine runs' section (scripts/vllm-bench.sh writes it; BENCHMARKS.md carries it).
    let engines = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/bench/engines.md");
    if let Ok(section) = std::fs::read_to_string(engines) {
        s.push('\n');
        s.push_str(&section);
    }
    s
}

/// Line plots under `docs/bench/`.
mod plot {
    use super::*;
    use plotters::prelude::*;

    const COLORS: [RGBColor; 3] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
    ];

    /// One line per engine: (x, y) points; log-scale y.
    fn lines(
        path: &Path,
        title: &str,
        x_label: &str,
        y_label: &str,
        series: &[(&str, Vec<(f64, f64)>)],
        log_x: bool,
    ) -> Result<(), String> {
        let pts: Vec<(f64, f64)> = series.iter().flat_map(|s| s.1.iter().copied()).collect();
        if pts.is_empty() {
            return Ok(());
        }
        let tx = |x: f64| if log_x { x.log10() } else { x };
        let (x0, x1) = pts.iter().fold((f64::MAX, f64::MIN), |(a, b), p| {
            (a.min(tx(p.0)), b.max(tx(p.0)))
        });
        let (y0, y1) = pts
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
        let pad = ((x1 - x0) * 0.05).max(0.05);
        let root = SVGBackend::new(path, (720, 440)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(x0 - pad..x1 + pad, ((y0 * 0.7)..(y1 * 1.4)).log_scale())
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(y_label)
            .x_label_formatter(&|x| {
                if log_x {
                    format!("{:.0}", 10f64.powf(*x))
                } else {
                    format!("{x:.0}")
                }
            })
            .draw()
            .map_err(|e| e.to_string())?;
        for (i, (name, pts)) in series.iter().enumerate() {
            let c = COLORS[i % COLORS.len()];
            let pts: Vec<(f64, f64)> = pts.iter().map(|p| (tx(p.0), p.1)).collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
                .map_err(|e| e.to_string())?
                .label(*name)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2))
                });
            chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 4, c.filled())))
                .map_err(|e| e.to_string())?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())
    }

    /// An engine's mask percentile on `tools_N` for a vocabulary, per N.
    fn by_tools(doc: &Value, vocab: &str, engine: &str, pct: &str) -> Vec<(f64, f64)> {
        doc["results"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| r["vocab"] == vocab && r["kind"] == "tools")
            .filter_map(|r| {
                Some((
                    r["n_tools"].as_f64()?,
                    r["engines"][engine]["mask_us"][pct].as_f64()?,
                ))
            })
            .collect()
    }

    pub fn all(doc: &Value, dir: &Path) -> Result<Vec<PathBuf>, String> {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        let mut written = Vec::new();
        for pct in ["p50", "p99"] {
            let series: Vec<(&str, Vec<(f64, f64)>)> = ENGINES
                .iter()
                .map(|e| (*e, by_tools(doc, "llama", e, pct)))
                .filter(|s| !s.1.is_empty())
                .collect();
            let p = dir.join(format!("mask_{pct}_vs_tools.svg"));
            lines(
                &p,
                &format!("Per-token mask {pct} vs tool count (Llama 3.1, call-list schema)"),
                "tools (log scale)",
                &format!("mask {pct} (µs, log scale)"),
                &series,
                true,
            )?;
            written.push(p);
        }
        // p50 vs vocabulary size: the median over the tools_N workloads of each engine's p50.
        let mut series = Vec::new();
        for e in ENGINES {
            let mut pts = Vec::new();
            for v in doc["vocabs"].as_array().into_iter().flatten() {
                let vn = v["name"].as_str().unwrap_or("");
                let xs: Vec<f64> = by_tools(doc, vn, e, "p50")
                    .into_iter()
                    .map(|p| p.1)
                    .collect();
                if !xs.is_empty() {
                    pts.push((
                        v["size"].as_f64().unwrap_or(0.0) / 1000.0,
                        summarize(&xs).p50,
                    ));
                }
            }
            if !pts.is_empty() {
                series.push((e, pts));
            }
        }
        let p = dir.join("mask_p50_vs_vocab.svg");
        lines(
            &p,
            "Per-token mask p50 vs vocabulary size (median over tools_N)",
            "vocabulary size (thousands of tokens)",
            "mask p50 (µs, log scale)",
            &series,
            false,
        )?;
        written.push(p);
        Ok(written)
    }
}

/// Writes `BENCHMARKS.md` and the plots (with `CALLMASK_BENCH_WRITE_DOCS=0`: into `dir` instead
/// of the crate), and prints the markdown.
fn write_docs(doc: &Value, dir: &Path) {
    let md = markdown(doc);
    if std::env::var("CALLMASK_BENCH_WRITE_DOCS").as_deref() == Ok("0") {
        let p = dir.join("BENCHMARKS.md");
        std::fs::write(&p, &md).unwrap();
        println!("(CALLMASK_BENCH_WRITE_DOCS=0) markdown: {}", p.display());
        if let Err(e) = plot::all(doc, dir) {
            eprintln!("plots: {e}");
        }
    } else {
        let root = &Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        std::fs::write(root.join("BENCHMARKS.md"), &md).unwrap();
        println!("BENCHMARKS.md written");
        let _ = std::fs::create_dir_all(root.join("docs/bench"));
        let json = serde_json::to_string_pretty(doc).unwrap() + "\n";
        if let Err(e) = std::fs::write(root.join("docs/bench/results.json"), json) {
            eprintln!("docs/bench/results.json: {e}");
        }
        match plot::all(doc, &root.join("docs/bench")) {
            Ok(ps) => ps.iter().for_each(|p| println!("plot: {}", p.display())),
            Err(e) => eprintln!("plots: {e}"),
        }
    }
    println!("{md}");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // `cargo test --benches` runs bench binaries without `--bench`: nothing to do then.
    if !args.iter().any(|a| a == "--bench") {
        return;
    }
    // Only the documents again, from an earlier run's JSON.
    if let Some(p) = std::env::var_os("CALLMASK_BENCH_FROM_JSON") {
        let doc = read_json(Path::new(&p));
        write_docs(&doc, &target_dir().join("bench"));
        return;
    }
    let k = Knobs::from_env();
    let vocabs =
        env_list("CALLMASK_BENCH_VOCABS").unwrap_or_else(|| vec!["llama".into(), "gemma".into()]);
    let ws = workloads(&k);
    assert!(
        !ws.is_empty(),
        "CALLMASK_BENCH_WORKLOADS matches no workload"
    );
    let started = Instant::now();
    let machine = machine();
    let mut runs = Vec::new();
    for v in &vocabs {
        let name: &'static str = match v.as_str() {
            "llama" => "llama",
            "gemma" => "gemma",
            other => panic!("CALLMASK_BENCH_VOCABS: unknown vocabulary {other:?} (llama, gemma)"),
        };
        runs.push(run_vocab(name, &ws, &k));
    }
    let meta = json!({
        "machine": machine,
        "seconds": num3(started.elapsed().as_secs_f64()),
        "commands": "scripts/bench.sh  (= scripts/setup-xgrammar.sh, then cargo bench --bench suite)",
        "engines": {
            "callmask": format!("{} (this crate), CompileOptions::default() / DialectOptions::default() (whitespace: at most 20 bytes per gap; properties in any order)", env!("CARGO_PKG_VERSION")),
            "llguidance": "1.9 (crates.io), ParserFactory::new_simple, default JSON options (flexible whitespace, properties in schema order); Llama: its tokenizer.json loader; Gemma: TokTrie from callmask's token bytes",
            "xgrammar": "scripts/bench_xgrammar.py (Python package in $CALLMASK_CACHE/venv-xgrammar), fed the same token bytes and ids",
        },
        "fuzz_max_tokens": FUZZ_MAX_TOKENS,
    });
    let doc = results_json(&runs, &ws, &k, &meta);
    let dir = target_dir().join("bench");
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("results.json");
    std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap() + "\n")
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    println!("results: {}", path.display());
    if std::env::var("CALLMASK_BENCH_SUMMARY_ONLY").as_deref() == Ok("1") {
        // scripts/bench.sh --quick: the ratios only, documents untouched.
        println!("{}", targets_md(&doc));
        println!("{}", misses_md(&doc));
        println!("{}", summary_md(&doc));
    } else {
        write_docs(&doc, &dir);
    }
    eprintln!("suite: {:.0} s", started.elapsed().as_secs_f64());
}
