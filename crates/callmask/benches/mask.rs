//! callmask vs llguidance, side by side, on the Llama 3.1 vocabulary (128,256 tokens).
//!
//! ```text
//! cargo bench --bench mask                      # criterion benches, then the summary table
//! cargo bench --bench mask -- compile/          # only the compile benches (+ table)
//! cargo bench --bench mask -- per_token/llguidance
//! cargo bench --bench mask -- table             # no criterion bench matches: just the table
//! ```
//!
//! What is measured, for each schema in `benches/schemas/NAME.schema.json`:
//!
//! - `compile/ENGINE/NAME`: schema JSON → a matcher whose first mask is computed.
//!   callmask: `Grammar::from_json_schema` + `TokenAutomaton::new` (fresh every iteration, so no
//!   mask cache survives between iterations) + `.matcher()` + first `fill_mask`.
//!   llguidance: `TopLevelGrammar::from_json_schema` + `ParserFactory::create_parser` +
//!   `Matcher::new` + first `compute_mask`.
//!   The vocabulary (callmask `Vocab`, llguidance `TokEnv` + `ParserFactory` with its token-slice
//!   precomputation) is built once, outside all timings, for both engines.
//! - `per_token/callmask+budget/NAME` and `per_token/callmask+tight_budget/NAME`: the same under
//!   a token budget that never binds (the cost of the check) and the smallest one the instance
//!   fits in (it binds where the instance comes closest to its end; the share of masks it
//!   changed is printed).
//! - `per_token/ENGINE/NAME`: mask then accept, token after token, along the tokenized
//!   `NAME.instance.json`; one criterion iteration is one token, so criterion reports time per
//!   token. Fresh matchers (matcher reset time excluded) share one warm automaton (callmask) or one
//!   parser's shared lexer (llguidance: `Matcher::clone`, which shares the lexer/DFA cache): the
//!   steady state of a server.
//!
//! After the criterion run, a table (markdown, on stdout; JSON in `target/callmask-bench.json`)
//! gives per schema and engine: compile time (median of the cold trials; the JSON also has
//! p99/max/mean), and per-mask time
//! (`Instant` around each `fill_mask` / `compute_mask` only, accept excluded) as median / p99 / max
//! over (a) `CALLMASK_BENCH_REPS` (default 20) warm passes with fresh matchers on a shared automaton
//! and (b) `CALLMASK_BENCH_COLD` (default 10) cold first passes, each on a freshly compiled schema;
//! then the ratio callmask / llguidance (< 1 means callmask is faster).
//!
//! Instances are serialized the way Llama-family models write JSON (Python `json.dumps` style):
//! `", "` between items and `": "` after keys, no newlines, non-ASCII kept as UTF-8, keys in the
//! instance file's order (which is the schema's order: llguidance only accepts schema order).
//! They are tokenized with the Llama 3.1 `tokenizer.json` through the `tokenizers` crate
//! (`encode(text, add_special_tokens = false)`), and the same ids are fed to both engines.
//!
//! Setup (not timed) checks that both engines accept every token of every instance and allow an
//! end-of-sequence token at the end; it panics naming engine, schema and position otherwise. It
//! also checks the vocabularies have the same size, and the tokenization round-trips.
//!
//! Environment:
//! - `CALLMASK_CACHE`: data cache (default `<crate>/.cache`; fill it with `scripts/fetch-data.sh`).
//! - `CALLMASK_BENCH_ENGINES`: comma list among `callmask,llguidance` (default both).
//! - `CALLMASK_BENCH_SCHEMAS`: comma list of schema names (default all).
//! - `CALLMASK_BENCH_SCHEMA_DIR`: benchmark every `NAME.schema.json` (+ `NAME.instance.json`) of
//!   another folder instead of `benches/schemas/`.
//! - `CALLMASK_BENCH_REPS`, `CALLMASK_BENCH_COLD`: see above. `CALLMASK_BENCH_TABLE=0`: no table.
//! - `CALLMASK_BENCH_CLEAR_CACHES=1`: clear callmask's process-wide caches (compiled lexemes,
//!   shared lexeme walks) before each cold trial, for first-ever compile and mask times.
//! - `CALLMASK_BENCH_ALLOW_SKIPS=1`: exit 0 even if an engine could not compile some schema (such
//!   a schema is skipped for that engine, listed at the end, and by default makes the exit status 1).
//!
//! Engine configuration:
//! - callmask: `CompileOptions::default()` (at the time of writing: at most 20 whitespace bytes
//!   per gap, properties in any order, 20,000 states per lexeme automaton).
//! - llguidance 1.9: `ParserFactory::new_simple` (default `InferenceCapabilities`, general token
//!   slices), `quiet()`; JSON options are the defaults (`JsonCompileOptions::default()`: flexible
//!   whitespace `[\x20\x0A\x0D\x09]+` wherever JSON allows it, separators `,` and `:`, not lenient,
//!   so unsupported keywords are errors; properties in schema order — llguidance has no
//!   any-order option). End-of-sequence tokens: Llama 3.1's `<|eot_id|>` 128009, `<|eom_id|>`
//!   128008 and `<|end_of_text|>` 128001.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use callmask_testkit::bench::*;
use criterion::{BatchSize, BenchmarkId, Criterion, Throughput};
use serde_json::{json, Value};

/// The Llama 3.1 tokenizer inside the data cache.
const LLAMA31_TOKENIZER: &str = "tokenizers/llama3_1-3.7.2/tokenizer.json";
/// Llama 3.1 end-of-sequence ids: `<|eot_id|>`, `<|eom_id|>`, `<|end_of_text|>`.
const LLAMA31_EOS: [u32; 3] = [128009, 128008, 128001];

/// The schemas, by file stem under `benches/schemas/`.
const SCHEMAS: &[&str] = &[
    "weather",     // string + enum
    "stock_quote", // pattern ^[A-Z]{1,5}$, format date, enum, boolean
    "user_lookup", // integer range, optional bounded string
    "shipment",    // nested objects, patterns, exclusiveMinimum number
    "order",       // array of objects with minItems/maxItems, uuid
    "cache_set",   // anyOf string|integer, type list [integer, null]
    "tree",        // recursive $ref through $defs
    "track_event", // free-form {} value
    "profile",     // 20 properties, email/uri/date formats
    "flights",     // enum-heavy: 40-airport enums, enum arrays, enum with null
    "meeting",     // date-time, array of emails, uuid, nullable uri
    "notify",      // oneOf of objects discriminated by const
];

// ---------------------------------------------------------------------------------------------
// Data

fn tokenizer_path() -> PathBuf {
    let p = cache_dir().join(LLAMA31_TOKENIZER);
    if !p.is_file() {
        eprintln!(
            "\nerror: the Llama 3.1 tokenizer is missing: {}\n\
             run `scripts/fetch-data.sh tokenizers` first (or point CALLMASK_CACHE at a cache \
             that has it)\n",
            p.display()
        );
        std::process::exit(2);
    }
    p
}

struct Case {
    name: String,
    schema: Value,
    text: String,
    tokens: Vec<u32>,
}

/// The schema names: [`SCHEMAS`], or with `CALLMASK_BENCH_SCHEMA_DIR` every `NAME.schema.json` of
/// that folder (each needs its `NAME.instance.json`).
fn schema_dir_and_names() -> (PathBuf, Vec<String>) {
    match std::env::var_os("CALLMASK_BENCH_SCHEMA_DIR") {
        Some(d) if !d.is_empty() => {
            let dir = PathBuf::from(d);
            let mut names: Vec<String> = std::fs::read_dir(&dir)
                .unwrap_or_else(|e| panic!("CALLMASK_BENCH_SCHEMA_DIR {}: {e}", dir.display()))
                .filter_map(|e| {
                    let f = e.ok()?.file_name().into_string().ok()?;
                    f.strip_suffix(".schema.json").map(str::to_string)
                })
                .collect();
            names.sort();
            assert!(!names.is_empty(), "no *.schema.json in {}", dir.display());
            (dir, names)
        }
        _ => (
            Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/schemas"),
            SCHEMAS.iter().map(|s| s.to_string()).collect(),
        ),
    }
}

fn load_cases(tok: &tokenizers::Tokenizer) -> Vec<Case> {
    let (dir, names) = schema_dir_and_names();
    let only = env_list("CALLMASK_BENCH_SCHEMAS");
    if let Some(only) = &only {
        for o in only {
            assert!(
                names.contains(o),
                "CALLMASK_BENCH_SCHEMAS: unknown schema {o:?} (known: {names:?})"
            );
        }
    }
    names
        .into_iter()
        .filter(|n| only.as_ref().is_none_or(|o| o.contains(n)))
        .map(|name| {
            let schema = read_json(&dir.join(format!("{name}.schema.json")));
            let instance = read_json(&dir.join(format!("{name}.instance.json")));
            let text = to_model_text(&instance);
            let enc = tok
                .encode(text.as_str(), false)
                .unwrap_or_else(|e| panic!("tokenizing {name}: {e}"));
            let tokens = enc.get_ids().to_vec();
            let back = tok.decode(&tokens, false).expect("decode");
            assert_eq!(back, text, "{name}: the tokenization does not round-trip");
            Case {
                name,
                schema,
                text,
                tokens,
            }
        })
        .collect()
}

fn tok_str(tok: &tokenizers::Tokenizer, t: u32) -> String {
    tok.decode(&[t], false).unwrap_or_else(|_| format!("<{t}>"))
}

fn prefix_str(tok: &tokenizers::Tokenizer, toks: &[u32]) -> String {
    let s = tok.decode(toks, false).unwrap_or_default();
    let n = s.chars().count();
    if n > 80 {
        format!("…{}", s.chars().skip(n - 80).collect::<String>())
    } else {
        s
    }
}

// ---------------------------------------------------------------------------------------------
// callmask

mod cm {
    use super::*;
    use callmask::{CompileOptions, Grammar, TokenAutomaton, TokenMask, Vocab};

    /// One pass of `$m` (a callmask matcher, whose type we need not name) over `$toks`: times each
    /// `fill_mask` and each `accept`; evaluates to the first mask's time in µs.
    macro_rules! cm_pass {
        ($m:expr, $mask:expr, $toks:expr, $masks:expr, $accepts:expr) => {{
            let mut first = 0.0;
            for (i, &t) in $toks.iter().enumerate() {
                let t0 = Instant::now();
                $m.fill_mask($mask);
                let t1 = Instant::now();
                black_box(&*$mask);
                $m.accept(t).unwrap();
                let t2 = Instant::now();
                let d = micros(t1 - t0);
                if i == 0 {
                    first = d;
                }
                $masks.push(d);
                $accepts.push(micros(t2 - t1));
            }
            first
        }};
    }

    pub struct Engine {
        pub vocab: Arc<Vocab>,
        pub opts: CompileOptions,
    }

    pub fn load(path: &Path) -> Engine {
        let vocab = Vocab::from_tokenizer_json(path)
            .unwrap_or_else(|e| panic!("callmask: loading {}: {e}", path.display()));
        // Compiles keep their lexemes in the vocabulary's caches, where the automata keep
        // their walks, as a server would.
        let opts = CompileOptions::default().caches(Some(vocab.caches().clone()));
        Engine {
            vocab: Arc::new(vocab),
            opts,
        }
    }

    impl Engine {
        pub fn n_vocab(&self) -> usize {
            self.vocab.len()
        }

        /// Does the schema compile? (Not timed; a schema that does not is skipped and reported.)
        pub fn try_compile(&self, case: &Case) -> Result<(), String> {
            Grammar::from_json_schema(&case.schema, &self.opts)
                .map(|_| ())
                .map_err(|e| e.to_string())
        }

        pub fn automaton(&self, case: &Case) -> TokenAutomaton {
            let g = Grammar::from_json_schema(&case.schema, &self.opts)
                .unwrap_or_else(|e| panic!("callmask: schema {} does not compile: {e}", case.name));
            TokenAutomaton::new(&g, self.vocab.clone()).unwrap()
        }

        /// Not timed: every token of the instance is allowed and accepted, and EOS is allowed
        /// at the end.
        pub fn verify(&self, case: &Case, tok: &tokenizers::Tokenizer) {
            let a = self.automaton(case);
            for pass in 0..2 {
                // pass 0 on cold caches, pass 1 on the caches pass 0 filled
                let mut m = a.matcher();
                let mut mask = TokenMask::new(self.vocab.len());
                for (i, &t) in case.tokens.iter().enumerate() {
                    m.fill_mask(&mut mask);
                    assert!(
                        mask.is_allowed(t),
                        "callmask, schema {}, pass {pass}: token #{i} {t} {:?} is not allowed by \
                         the mask ({} tokens allowed) after {:?}",
                        case.name,
                        tok_str(tok, t),
                        mask.count(),
                        prefix_str(tok, &case.tokens[..i])
                    );
                    if let Err(e) = m.accept(t) {
                        panic!(
                            "callmask, schema {}, pass {pass}: token #{i} {t} {:?} was allowed \
                             but accept failed: {e} (after {:?})",
                            case.name,
                            tok_str(tok, t),
                            prefix_str(tok, &case.tokens[..i])
                        );
                    }
                }
                m.fill_mask(&mut mask);
                let eos = self.vocab.eos_tokens();
                assert!(
                    eos.iter().any(|&e| mask.is_allowed(e)),
                    "callmask, schema {}: no end-of-sequence token {eos:?} allowed after the \
                     complete instance",
                    case.name
                );
                assert!(
                    m.can_end(),
                    "callmask, schema {}: can_end() is false at the end",
                    case.name
                );
            }
        }

        pub fn bench_compile(&self, b: &mut criterion::Bencher, case: &Case) {
            b.iter_batched(
                || (),
                |()| {
                    let g = Grammar::from_json_schema(black_box(&case.schema), &self.opts).unwrap();
                    let a = TokenAutomaton::new(&g, self.vocab.clone()).unwrap();
                    let mut m = a.matcher();
                    let mut mask = TokenMask::new(self.vocab.len());
                    m.fill_mask(&mut mask);
                    (g, a, m, mask) // dropped outside the timing
                },
                BatchSize::SmallInput,
            )
        }

        /// The automaton the per-token bench shares across its matchers, warmed by one pass.
        /// (Built once per schema, outside criterion's closure, which criterion calls once per
        /// sample: building it there would put a cold pass in every sample.)
        pub fn prepare(&self, case: &Case) -> TokenAutomaton {
            let a = self.automaton(case);
            let mut m = a.matcher();
            let mut mask = TokenMask::new(self.vocab.len());
            for &t in &case.tokens {
                m.fill_mask(&mut mask);
                m.accept(t).unwrap();
            }
            a
        }

        pub fn bench_per_token(&self, b: &mut criterion::Bencher, case: &Case, a: &TokenAutomaton) {
            let mut mask = TokenMask::new(self.vocab.len());
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                let mut left = iters as usize;
                while left > 0 {
                    let n = left.min(case.tokens.len());
                    let mut m = a.matcher();
                    let t0 = Instant::now();
                    for &t in &case.tokens[..n] {
                        m.fill_mask(&mut mask);
                        black_box(&mask);
                        m.accept(t).unwrap();
                    }
                    total += t0.elapsed();
                    left -= n;
                }
                total
            })
        }

        /// Like `bench_per_token`, under a token budget: `tight` gives the smallest budget under
        /// which the instance's tokens are all allowed (it binds where the instance comes
        /// closest to its end: the fewest tokens to an end there, as the budget counts them,
        /// plus the tokens before); otherwise a budget that never binds, to measure the check
        /// alone. Prints how many masks the budget changed.
        pub fn bench_per_token_budget(
            &self,
            b: &mut criterion::Bencher,
            case: &Case,
            a: &TokenAutomaton,
            tight: bool,
        ) {
            let budget = if tight {
                let mut m = a.matcher();
                let mut b = m.min_tokens_to_end().unwrap();
                for (k, &t) in case.tokens.iter().enumerate() {
                    m.accept(t).unwrap();
                    b = b.max(m.min_tokens_to_end().unwrap() + k + 1);
                }
                b
            } else {
                1 << 20
            };
            let mut mask = TokenMask::new(self.vocab.len());
            let (mut steered, mut masks) = (0, 0);
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                let mut left = iters as usize;
                while left > 0 {
                    let n = left.min(case.tokens.len());
                    let mut m = a.matcher();
                    m.set_token_budget(Some(budget)).unwrap();
                    let t0 = Instant::now();
                    for &t in &case.tokens[..n] {
                        m.fill_mask(&mut mask);
                        black_box(&mask);
                        m.accept(t).unwrap();
                    }
                    total += t0.elapsed();
                    left -= n;
                    steered += m.budget_steered();
                    masks += n as u64;
                }
                total
            });
            eprintln!(
                "  budget {budget} ({}): {steered} of {masks} masks steered ({:.1}%)",
                if tight { "tight" } else { "loose" },
                100.0 * steered as f64 / masks.max(1) as f64
            );
        }

        /// (compile time to first mask, per-position mask times) of one cold trial, and the
        /// warmed automaton.
        fn cold_trial(
            &self,
            case: &Case,
            masks: &mut Vec<f64>,
            accepts: &mut Vec<f64>,
        ) -> (f64, TokenAutomaton) {
            if std::env::var("CALLMASK_BENCH_CLEAR_CACHES").as_deref() == Ok("1") {
                self.vocab.caches().clear();
            }
            let t0 = Instant::now();
            let g = Grammar::from_json_schema(&case.schema, &self.opts).unwrap();
            let a = TokenAutomaton::new(&g, self.vocab.clone()).unwrap();
            let mut m = a.matcher();
            let mut mask = TokenMask::new(self.vocab.len());
            let build = t0.elapsed();
            let first = cm_pass!(m, &mut mask, &case.tokens, masks, accepts);
            (micros(build) + first, a)
        }

        pub fn measure(&self, case: &Case, reps: usize, cold: usize) -> EngineStats {
            let mut st = EngineStats::default();
            let mut warm_a = None;
            for _ in 0..cold.max(1) {
                let (c, a) = self.cold_trial(case, &mut st.cold, &mut st.accept);
                st.compile.push(c);
                warm_a = Some(a);
            }
            let a = warm_a.unwrap();
            let mut mask = TokenMask::new(self.vocab.len());
            for _ in 0..reps {
                let mut m = a.matcher();
                cm_pass!(m, &mut mask, &case.tokens, &mut st.warm, &mut st.accept);
            }
            st
        }
    }
}

// ---------------------------------------------------------------------------------------------
// llguidance

mod llg {
    use super::*;
    use llguidance::api::TopLevelGrammar;
    use llguidance::toktrie::TokEnv;
    use llguidance::{Matcher, ParserFactory};
    use toktrie_hf_tokenizers::ByteTokenizer;

    pub struct Engine {
        pub factory: ParserFactory,
        pub tok_env: TokEnv,
    }

    pub fn load(path: &Path) -> Engine {
        let mut bt = ByteTokenizer::from_file(path)
            .unwrap_or_else(|e| panic!("llguidance: loading {}: {e}", path.display()));
        bt.set_eos_tokens(&LLAMA31_EOS);
        let tok_env = bt.into_tok_env(None).expect("llguidance: TokEnv");
        let mut factory = ParserFactory::new_simple(&tok_env).expect("llguidance: ParserFactory");
        factory.quiet();
        Engine { factory, tok_env }
    }

    impl Engine {
        pub fn n_vocab(&self) -> usize {
            self.tok_env.tok_trie().vocab_size()
        }

        /// Does the schema compile? (Not timed; a schema that does not is skipped and reported.)
        pub fn try_compile(&self, case: &Case) -> Result<(), String> {
            let g = TopLevelGrammar::from_json_schema(case.schema.clone());
            match Matcher::new(self.factory.create_parser(g)).get_error() {
                None => Ok(()),
                Some(e) => Err(e),
            }
        }

        /// A fresh matcher for the schema (no mask computed yet).
        pub fn matcher(&self, case: &Case) -> Matcher {
            let g = TopLevelGrammar::from_json_schema(case.schema.clone());
            let m = Matcher::new(self.factory.create_parser(g));
            if let Some(e) = m.get_error() {
                panic!("llguidance: schema {} does not compile: {e}", case.name);
            }
            m
        }

        pub fn verify(&self, case: &Case, tok: &tokenizers::Tokenizer) {
            let proto = self.matcher(case);
            for pass in 0..2 {
                let mut m = proto.clone();
                for (i, &t) in case.tokens.iter().enumerate() {
                    let mask = m.compute_mask().unwrap_or_else(|e| {
                        panic!(
                            "llguidance, schema {}, pass {pass}: compute_mask failed at token #{i}: \
                             {e} (after {:?})",
                            case.name,
                            prefix_str(tok, &case.tokens[..i])
                        )
                    });
                    assert!(
                        mask.is_allowed(t),
                        "llguidance, schema {}, pass {pass}: token #{i} {t} {:?} is not allowed by \
                         the mask ({} tokens allowed) after {:?}",
                        case.name,
                        tok_str(tok, t),
                        mask.num_set(),
                        prefix_str(tok, &case.tokens[..i])
                    );
                    if let Err(e) = m.consume_token(t) {
                        panic!(
                            "llguidance, schema {}, pass {pass}: token #{i} {t} {:?} was allowed \
                             but consume_token failed: {e}",
                            case.name,
                            tok_str(tok, t)
                        );
                    }
                }
                assert!(
                    m.is_accepting().unwrap_or(false),
                    "llguidance, schema {}: not accepting after the complete instance ({:?})",
                    case.name,
                    m.stop_reason()
                );
                let mask = m.compute_mask_or_eos().unwrap_or_else(|e| {
                    panic!(
                        "llguidance, schema {}: final compute_mask failed: {e}",
                        case.name
                    )
                });
                assert!(
                    LLAMA31_EOS.iter().any(|&e| mask.is_allowed(e)),
                    "llguidance, schema {}: no end-of-sequence token {LLAMA31_EOS:?} allowed after \
                     the complete instance",
                    case.name
                );
            }
        }

        pub fn bench_compile(&self, b: &mut criterion::Bencher, case: &Case) {
            b.iter_batched(
                || case.schema.clone(),
                |schema| {
                    let g = TopLevelGrammar::from_json_schema(schema);
                    let mut m = Matcher::new(self.factory.create_parser(g));
                    let mask = m.compute_mask().unwrap();
                    (m, mask) // dropped outside the timing
                },
                BatchSize::SmallInput,
            )
        }

        /// The fresh matcher the per-token bench clones (clones share its lexer), warmed by one
        /// pass. (Built once per schema, outside criterion's closure; see `cm::Engine::prepare`.)
        pub fn prepare(&self, case: &Case) -> Matcher {
            let proto = self.matcher(case);
            let mut m = proto.clone();
            for &t in &case.tokens {
                m.compute_mask().unwrap();
                m.consume_token(t).unwrap();
            }
            proto
        }

        pub fn bench_per_token(&self, b: &mut criterion::Bencher, case: &Case, proto: &Matcher) {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                let mut left = iters as usize;
                while left > 0 {
                    let n = left.min(case.tokens.len());
                    let mut m = proto.clone(); // shares the lexer (DFA cache) with `proto`
                    let t0 = Instant::now();
                    for &t in &case.tokens[..n] {
                        let mask = m.compute_mask().unwrap();
                        black_box(&mask);
                        m.consume_token(t).unwrap();
                    }
                    total += t0.elapsed();
                    left -= n;
                }
                total
            })
        }

        pub fn measure(&self, case: &Case, reps: usize, cold: usize) -> EngineStats {
            let mut st = EngineStats::default();
            let mut warm_proto = None;
            for _ in 0..cold.max(1) {
                let t0 = Instant::now();
                let g = TopLevelGrammar::from_json_schema(case.schema.clone());
                let proto = Matcher::new(self.factory.create_parser(g));
                let build = t0.elapsed();
                let mut m = proto.clone();
                let first = run_pass_llg(&mut m, &case.tokens, &mut st.cold, &mut st.accept);
                st.compile.push(micros(build) + first);
                warm_proto = Some(proto);
            }
            let proto = warm_proto.unwrap();
            for _ in 0..reps {
                let mut m = proto.clone();
                run_pass_llg(&mut m, &case.tokens, &mut st.warm, &mut st.accept);
            }
            st
        }
    }

    fn run_pass_llg(
        m: &mut Matcher,
        toks: &[u32],
        masks: &mut Vec<f64>,
        accepts: &mut Vec<f64>,
    ) -> f64 {
        let mut first = 0.0;
        for (i, &t) in toks.iter().enumerate() {
            let t0 = Instant::now();
            let mask = m.compute_mask().unwrap();
            let t1 = Instant::now();
            black_box(&mask);
            m.consume_token(t).unwrap();
            let t2 = Instant::now();
            drop(mask);
            let d = micros(t1 - t0);
            if i == 0 {
                first = d;
            }
            masks.push(d);
            accepts.push(micros(t2 - t1));
        }
        first
    }
}

// ---------------------------------------------------------------------------------------------
// Statistics and the table

#[derive(Default, Clone)]
struct EngineStats {
    /// µs, schema → first mask, one per cold trial
    compile: Vec<f64>,
    /// µs per mask, warm passes
    warm: Vec<f64>,
    /// µs per mask, cold first passes
    cold: Vec<f64>,
    /// µs per accept / consume_token, all passes
    accept: Vec<f64>,
}

fn stats_json(st: &EngineStats) -> Value {
    json!({
        "compile_us": summary_json(summarize(&st.compile)),
        "warm_mask_us": summary_json(summarize(&st.warm)),
        "cold_mask_us": summary_json(summarize(&st.cold)),
        "accept_us": summary_json(summarize(&st.accept)),
    })
}

struct Row {
    schema: String,
    tokens: usize,
    per_engine: BTreeMap<&'static str, EngineStats>,
    /// engines that could not compile the schema, with their error
    errors: BTreeMap<&'static str, String>,
}

fn print_table(rows: &[Row], meta: &Value) {
    let engines = ["callmask", "llguidance"];
    let mut out = String::new();
    out.push_str(&format!(
        "\n## callmask vs llguidance — Llama 3.1 vocabulary ({} tokens), one thread\n\n",
        meta["vocab_size"]
    ));
    out.push_str(&format!(
        "compile = schema → first mask ready (median of {} cold trials, ms); mask times in µs per \
         token: warm = {} passes with fresh matchers sharing the compiled automaton, cold = first \
         pass after compile ({} trials); ratio = callmask / llguidance. Load average at start: {} \
         (other processes inflate maxima and p99s).\n\n",
        meta["cold_trials"],
        meta["warm_reps"],
        meta["cold_trials"],
        meta["loadavg_1min_at_start"].as_str().unwrap_or("?")
    ));
    out.push_str("| schema | tokens | engine | compile ms | warm p50 | warm p99 | warm max | cold p50 | cold p99 | cold max | accept p50 |\n");
    out.push_str("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for row in rows {
        let mut sums = BTreeMap::new();
        for e in engines {
            if let Some(err) = row.errors.get(e) {
                let err: String = err.chars().take(120).collect();
                out.push_str(&format!(
                    "| {} | {} | {} | does not compile: {} | | | | | | | |\n",
                    row.schema,
                    row.tokens,
                    e,
                    err.replace('|', "/")
                ));
            }
            if let Some(st) = row.per_engine.get(e) {
                let c = summarize(&st.compile);
                let w = summarize(&st.warm);
                let k = summarize(&st.cold);
                let a = summarize(&st.accept);
                out.push_str(&format!(
                    "| {} | {} | {} | {:.3} | {} | {} | {} | {} | {} | {} | {} |\n",
                    row.schema,
                    row.tokens,
                    e,
                    c.p50 / 1000.0,
                    fmt_us(w.p50),
                    fmt_us(w.p99),
                    fmt_us(w.max),
                    fmt_us(k.p50),
                    fmt_us(k.p99),
                    fmt_us(k.max),
                    fmt_us(a.p50)
                ));
                sums.insert(e, (c, w, k, a));
            }
        }
        if let (Some(x), Some(y)) = (sums.get("callmask"), sums.get("llguidance")) {
            out.push_str(&format!(
                "| {} | {} | ratio | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                row.schema,
                row.tokens,
                fmt_ratio(x.0.p50, y.0.p50),
                fmt_ratio(x.1.p50, y.1.p50),
                fmt_ratio(x.1.p99, y.1.p99),
                fmt_ratio(x.1.max, y.1.max),
                fmt_ratio(x.2.p50, y.2.p50),
                fmt_ratio(x.2.p99, y.2.p99),
                fmt_ratio(x.2.max, y.2.max),
                fmt_ratio(x.3.p50, y.3.p50),
            ));
        }
    }
    print!("{out}");
    let _ = std::io::stdout().flush();
}

/// An engine with, per case, whether it compiled the schema.
type EngineOk<'a, E> = Option<(&'a E, &'a [Option<String>])>;

fn run_table(
    cases: &[Case],
    cm: EngineOk<'_, cm::Engine>,
    llg: EngineOk<'_, llg::Engine>,
    meta: Value,
) {
    let reps = env_usize("CALLMASK_BENCH_REPS", 20);
    let cold = env_usize("CALLMASK_BENCH_COLD", 10).max(1);
    let mut meta = meta;
    meta["warm_reps"] = json!(reps);
    meta["cold_trials"] = json!(cold);
    // Other processes on the machine show up in the maxima (and p99s): record the load.
    let load = std::fs::read_to_string("/proc/loadavg").ok();
    let load = load
        .as_deref()
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or("?");
    meta["loadavg_1min_at_start"] = json!(load);
    eprintln!("\ncallmask bench: measuring the per-token table ({reps} warm passes, {cold} cold trials per schema and engine)…");
    let n_engines = cm.is_some() as usize + llg.is_some() as usize;
    let mut rows = Vec::new();
    let mut all: BTreeMap<&'static str, EngineStats> = BTreeMap::new();
    let (mut all_schemas, mut all_tokens) = (0, 0);
    for (i, case) in cases.iter().enumerate() {
        let mut per_engine = BTreeMap::new();
        let mut errors = BTreeMap::new();
        if let Some((e, errs)) = cm {
            match &errs[i] {
                None => {
                    per_engine.insert("callmask", e.measure(case, reps, cold));
                }
                Some(err) => {
                    errors.insert("callmask", err.clone());
                }
            }
        }
        if let Some((e, errs)) = llg {
            match &errs[i] {
                None => {
                    per_engine.insert("llguidance", e.measure(case, reps, cold));
                }
                Some(err) => {
                    errors.insert("llguidance", err.clone());
                }
            }
        }
        if per_engine.len() == n_engines {
            // pooled over the schemas every engine ran, so that ratios compare like with like
            all_schemas += 1;
            all_tokens += case.tokens.len();
            for (k, st) in &per_engine {
                let a = all.entry(*k).or_default();
                a.compile.extend(&st.compile);
                a.warm.extend(&st.warm);
                a.cold.extend(&st.cold);
                a.accept.extend(&st.accept);
            }
        }
        rows.push(Row {
            schema: case.name.clone(),
            tokens: case.tokens.len(),
            per_engine,
            errors,
        });
    }
    meta["pooled_schemas"] = json!(all_schemas);
    rows.push(Row {
        schema: format!("**all** ({all_schemas})"),
        tokens: all_tokens,
        per_engine: all,
        errors: BTreeMap::new(),
    });
    print_table(&rows, &meta);

    // JSON
    let mut schemas = Vec::new();
    for (row, case) in rows
        .iter()
        .zip(cases.iter().map(Some).chain(std::iter::once(None)))
    {
        let mut engines = serde_json::Map::new();
        for (k, st) in &row.per_engine {
            engines.insert(k.to_string(), stats_json(st));
        }
        let name = if case.is_some() {
            row.schema.clone()
        } else {
            "all".to_string()
        };
        let mut o = json!({"schema": name, "tokens": row.tokens, "engines": engines});
        if !row.errors.is_empty() {
            o["compile_errors"] = json!(row.errors);
        }
        if let (Some(x), Some(y)) = (
            row.per_engine.get("callmask"),
            row.per_engine.get("llguidance"),
        ) {
            let (cx, wx, kx) = (
                summarize(&x.compile),
                summarize(&x.warm),
                summarize(&x.cold),
            );
            let (cy, wy, ky) = (
                summarize(&y.compile),
                summarize(&y.warm),
                summarize(&y.cold),
            );
            let r = |a: f64, b: f64| {
                if b > 0.0 && a.is_finite() && b.is_finite() {
                    json!(((a / b) * 1000.0).round() / 1000.0)
                } else {
                    Value::Null
                }
            };
            o["ratio_callmask_over_llguidance"] = json!({
                "compile_p50": r(cx.p50, cy.p50),
                "warm_p50": r(wx.p50, wy.p50), "warm_p99": r(wx.p99, wy.p99), "warm_max": r(wx.max, wy.max),
                "cold_p50": r(kx.p50, ky.p50), "cold_p99": r(kx.p99, ky.p99), "cold_max": r(kx.max, ky.max),
            });
        }
        if let Some(c) = case {
            o["text"] = json!(c.text);
        }
        schemas.push(o);
    }
    let doc = json!({"meta": meta, "results": schemas});
    let path = target_dir().join("callmask-bench.json");
    match std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap() + "\n") {
        Ok(()) => println!("\n(JSON written to {})", path.display()),
        Err(e) => eprintln!("warning: cannot write {}: {e}", path.display()),
    }
}

// ---------------------------------------------------------------------------------------------

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let bench_mode = args.iter().any(|a| a == "--bench")
        && !args
            .iter()
            .any(|a| a == "--list" || a == "--test" || a == "--profile-time");

    let engines = env_list("CALLMASK_BENCH_ENGINES")
        .unwrap_or_else(|| vec!["callmask".into(), "llguidance".into()]);
    for e in &engines {
        assert!(
            e == "callmask" || e == "llguidance",
            "CALLMASK_BENCH_ENGINES: unknown engine {e:?} (callmask, llguidance)"
        );
    }
    let use_cm = engines.iter().any(|e| e == "callmask");
    let use_llg = engines.iter().any(|e| e == "llguidance");

    let path = tokenizer_path();
    let hf = tokenizers::Tokenizer::from_file(&path)
        .unwrap_or_else(|e| panic!("loading {}: {e}", path.display()));
    let cases = load_cases(&hf);

    // Vocabularies: built once, outside every timing.
    let t0 = Instant::now();
    let cm_engine = use_cm.then(|| cm::load(&path));
    let cm_load = t0.elapsed();
    let t0 = Instant::now();
    let llg_engine = use_llg.then(|| llg::load(&path));
    let llg_load = t0.elapsed();
    let n_vocab = hf.get_vocab_size(true);
    if let Some(e) = &cm_engine {
        assert_eq!(
            e.n_vocab(),
            n_vocab,
            "callmask Vocab size differs from tokenizer.json"
        );
        eprintln!(
            "callmask: Vocab loaded in {:.0} ms ({} tokens)",
            cm_load.as_secs_f64() * 1e3,
            e.n_vocab()
        );
    }
    if let Some(e) = &llg_engine {
        assert_eq!(
            e.n_vocab(),
            n_vocab,
            "llguidance TokEnv size differs from tokenizer.json"
        );
        eprintln!(
            "llguidance: TokEnv + ParserFactory built in {:.0} ms ({} tokens)",
            llg_load.as_secs_f64() * 1e3,
            e.n_vocab()
        );
    }

    // Correctness first (not timed). A schema an engine cannot compile is skipped for that engine
    // and reported (and the process exits with 1 at the end); a token it rejects is a panic.
    let mut cm_errs: Vec<Option<String>> = vec![None; cases.len()];
    let mut llg_errs: Vec<Option<String>> = vec![None; cases.len()];
    let mut failures = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        if let Some(e) = &cm_engine {
            match e.try_compile(case) {
                Ok(()) => e.verify(case, &hf),
                Err(err) => cm_errs[i] = Some(err),
            }
        }
        if let Some(e) = &llg_engine {
            match e.try_compile(case) {
                Ok(()) => e.verify(case, &hf),
                Err(err) => llg_errs[i] = Some(err),
            }
        }
        for (name, errs) in [("callmask", &cm_errs), ("llguidance", &llg_errs)] {
            if let Some(err) = &errs[i] {
                let msg = format!("{name}: schema {} does not compile: {err}", case.name);
                eprintln!("SKIPPED {msg}");
                failures.push(msg);
            }
        }
    }
    let skipped = if failures.is_empty() {
        ""
    } else {
        " (except the schemas skipped above)"
    };
    eprintln!(
        "verified: {} schemas, {} tokens: every token accepted and EOS allowed at the end by \
         {}{skipped}",
        cases.len(),
        cases.iter().map(|c| c.tokens.len()).sum::<usize>(),
        engines.join(" and ")
    );

    let mut c = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();

    {
        let mut g = c.benchmark_group("compile");
        for (i, case) in cases.iter().enumerate() {
            if let Some(e) = cm_engine.as_ref().filter(|_| cm_errs[i].is_none()) {
                g.bench_with_input(BenchmarkId::new("callmask", &case.name), case, |b, case| {
                    e.bench_compile(b, case)
                });
            }
            if let Some(e) = llg_engine.as_ref().filter(|_| llg_errs[i].is_none()) {
                g.bench_with_input(
                    BenchmarkId::new("llguidance", &case.name),
                    case,
                    |b, case| e.bench_compile(b, case),
                );
            }
        }
        g.finish();
    }
    {
        let mut g = c.benchmark_group("per_token");
        for (i, case) in cases.iter().enumerate() {
            g.throughput(Throughput::Elements(1));
            if let Some(e) = cm_engine.as_ref().filter(|_| cm_errs[i].is_none()) {
                let a = e.prepare(case);
                g.bench_with_input(BenchmarkId::new("callmask", &case.name), case, |b, case| {
                    e.bench_per_token(b, case, &a)
                });
                for (label, tight) in [("callmask+budget", false), ("callmask+tight_budget", true)]
                {
                    g.bench_with_input(BenchmarkId::new(label, &case.name), case, |b, case| {
                        e.bench_per_token_budget(b, case, &a, tight)
                    });
                }
            }
            if let Some(e) = llg_engine.as_ref().filter(|_| llg_errs[i].is_none()) {
                let proto = e.prepare(case);
                g.bench_with_input(
                    BenchmarkId::new("llguidance", &case.name),
                    case,
                    |b, case| e.bench_per_token(b, case, &proto),
                );
            }
        }
        g.finish();
    }
    c.final_summary();

    let table = std::env::var("CALLMASK_BENCH_TABLE")
        .map(|v| v != "0")
        .unwrap_or(true);
    if bench_mode && table {
        let meta = json!({
            "tokenizer": LLAMA31_TOKENIZER,
            "vocab_size": n_vocab,
            "engines": engines,
            "text_style": "json.dumps separators (\", \" and \": \"), UTF-8, keys in schema order",
            "llguidance": "1.9, ParserFactory::new_simple, default JsonCompileOptions (flexible whitespace, schema property order)",
            "callmask": "CompileOptions::default()",
            "eos_llguidance": LLAMA31_EOS,
        });
        run_table(
            &cases,
            cm_engine.as_ref().map(|e| (e, cm_errs.as_slice())),
            llg_engine.as_ref().map(|e| (e, llg_errs.as_slice())),
            meta,
        );
    }
    if !failures.is_empty() {
        eprintln!(
            "\n{} schema(s) skipped because an engine could not compile them:",
            failures.len()
        );
        for f in &failures {
            eprintln!("  - {f}");
        }
        if std::env::var("CALLMASK_BENCH_ALLOW_SKIPS").as_deref() != Ok("1") {
            eprintln!("(exit status 1; set CALLMASK_BENCH_ALLOW_SKIPS=1 to exit 0 anyway)");
            std::process::exit(1);
        }
    }
}
