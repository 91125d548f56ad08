//! Compile and mask time per dialect, for tool sets of 1, 5 and 50 realistic functions, on the
//! Llama 3.1 vocabulary (128,256 tokens).
//!
//! ```text
//! cargo bench --bench dialects              # criterion benches, then the summary table
//! cargo bench --bench dialects -- table     # just the table
//! ```
//!
//! - `dialect_compile/D/N`: tools → `Dialect::compile` → `TokenAutomaton::new` → matcher → first
//!   `fill_mask` (the per-request cost), with callmask's process-wide caches warm (compiled
//!   lexemes and lexeme walks survive between requests, as in a server).
//! - `dialect_mask/D/N`: per token, `fill_mask` then `accept`, along a valid output (one or two
//!   calls written the way the dialect's model writes them, tokenized by the Llama 3.1
//!   tokenizer, special tokens as special tokens), fresh matchers on one warm automaton.
//!
//! The table (markdown on stdout) adds: compile on a first-ever request (caches cleared before
//! each trial), and per-mask median / p99 / max over warm passes and over cold first passes (each
//! on a freshly compiled grammar). Environment: `CALLMASK_CACHE` (data cache),
//! `CALLMASK_BENCH_REPS` (warm passes, default 20), `CALLMASK_BENCH_COLD` (cold trials, default 5).

use callmask_testkit::writer;

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use callmask::{
    CompileOptions, Dialect, DialectOptions, Grammar, TokenAutomaton, TokenId, TokenMask, Tools,
    Vocab,
};
use callmask_testkit::bench::{cache_dir, env_usize, tool_set};
use criterion::{BenchmarkId, Criterion, Throughput};
use serde_json::json;

use callmask_testkit::ORIGINAL_DIALECTS as DIALECTS;
const SIZES: [usize; 3] = [1, 5, 50];

/// The output each dialect is measured on: two calls (one for Llama 3.1 JSON).
fn output(dialect: &str) -> String {
    let weather = (
        "get_current_weather",
        json!({"location": "San Francisco, CA", "unit": "celsius"}),
    );
    let stock = (
        "get_stock_price",
        json!({"ticker": "NVDA", "exchange": "NASDAQ"}),
    );
    let calls = if dialect == "llama31_json" {
        vec![weather]
    } else {
        vec![weather, stock]
    };
    writer::write(dialect, "Let me look that up.", &calls)
}

fn tokenize(vocab: &Arc<Vocab>, g: &Grammar, text: &str) -> Vec<TokenId> {
    TokenAutomaton::new(g, vocab.clone())
        .unwrap()
        .tokenize(text)
        .unwrap()
}

struct Case {
    dialect: &'static str,
    n: usize,
    tools: Tools,
    tokens: Vec<TokenId>,
}

/// Default options with the vocabulary's caches, kept across requests as a server keeps them.
fn server_options(vocab: &Vocab) -> DialectOptions {
    DialectOptions::default()
        .compile(CompileOptions::default().caches(Some(vocab.caches().clone())))
}

fn compile_ready(c: &Case, vocab: &Arc<Vocab>) -> (TokenAutomaton, Duration) {
    let t0 = Instant::now();
    let g = Dialect::by_name(c.dialect)
        .unwrap()
        .compile(&c.tools, &server_options(vocab))
        .unwrap();
    let auto = TokenAutomaton::new(&g, vocab.clone()).unwrap();
    let mut m = auto.matcher();
    let mut mask = TokenMask::new(vocab.len());
    m.fill_mask(&mut mask);
    black_box(&mask);
    (auto, t0.elapsed())
}

/// Per-mask times (µs) of one pass along the output.
fn pass(auto: &TokenAutomaton, tokens: &[TokenId], mask: &mut TokenMask) -> Vec<f64> {
    let mut m = auto.matcher();
    let mut times = Vec::with_capacity(tokens.len());
    for &t in tokens {
        let t0 = Instant::now();
        m.fill_mask(mask);
        times.push(t0.elapsed().as_secs_f64() * 1e6);
        assert!(mask.is_allowed(t), "token {t} not allowed");
        m.accept(t).unwrap();
    }
    assert!(m.can_end());
    times
}

fn pct(xs: &mut [f64], p: f64) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    let i = ((xs.len() as f64 - 1.0) * p).round() as usize;
    xs[i]
}

fn table(cases: &[Case], vocab: &Arc<Vocab>) {
    let reps = env_usize("CALLMASK_BENCH_REPS", 20);
    let cold = env_usize("CALLMASK_BENCH_COLD", 5);
    println!("\n| dialect | tools | tokens | compile warm (ms) | compile first-ever (ms) | mask warm p50 / p99 / max (µs) | mask cold p50 / p99 / max (µs) | grammar KB |");
    println!("|---|---:|---:|---:|---:|---|---|---:|");
    let mut mask = TokenMask::new(vocab.len());
    for c in cases {
        // Warm compile: caches filled by a first compile.
        compile_ready(c, vocab);
        let mut warm: Vec<f64> = (0..cold.max(3))
            .map(|_| compile_ready(c, vocab).1.as_secs_f64() * 1e3)
            .collect();
        let mut first = Vec::new();
        let mut cold_masks = Vec::new();
        for _ in 0..cold {
            vocab.caches().clear();
            let (auto, d) = compile_ready(c, vocab);
            first.push(d.as_secs_f64() * 1e3);
            // A cold pass on a fresh grammar (its first mask was computed by compile_ready).
            let g2 = auto.grammar().clone();
            let fresh = TokenAutomaton::new(&g2, vocab.clone()).unwrap();
            cold_masks.extend(pass(&fresh, &c.tokens, &mut mask));
        }
        let (auto, _) = compile_ready(c, vocab);
        let mut warm_masks = Vec::new();
        pass(&auto, &c.tokens, &mut mask);
        for _ in 0..reps {
            warm_masks.extend(pass(&auto, &c.tokens, &mut mask));
        }
        let kb = auto.grammar().memory_bytes() as f64 / 1024.0;
        println!(
            "| {} | {} | {} | {:.3} | {:.3} | {:.2} / {:.2} / {:.1} | {:.2} / {:.1} / {:.0} | {:.0} |",
            c.dialect,
            c.n,
            c.tokens.len(),
            pct(&mut warm, 0.5),
            pct(&mut first, 0.5),
            pct(&mut warm_masks, 0.5),
            pct(&mut warm_masks, 0.99),
            pct(&mut warm_masks, 1.0),
            pct(&mut cold_masks, 0.5),
            pct(&mut cold_masks, 0.99),
            pct(&mut cold_masks, 1.0),
            kb
        );
    }
}

fn main() {
    let path = cache_dir().join("tokenizers/llama3_1-3.7.2/tokenizer.json");
    let vocab = Arc::new(Vocab::from_tokenizer_json(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run scripts/fetch-data.sh tokenizers)",
            path.display()
        )
    }));
    let mut cases = Vec::new();
    for d in DIALECTS {
        for n in SIZES {
            let tools = tool_set(n);
            let g = Dialect::by_name(d)
                .unwrap()
                .compile(&tools, &DialectOptions::default())
                .unwrap();
            let text = output(d);
            // n = 1 has only the weather function: measure a one-call output there.
            let text = if n == 1 {
                writer::write(
                    d,
                    "Let me look that up.",
                    &[(
                        "get_current_weather",
                        json!({"location": "San Francisco, CA", "unit": "celsius"}),
                    )],
                )
            } else {
                text
            };
            let tokens = tokenize(&vocab, &g, &text);
            cases.push(Case {
                dialect: d,
                n,
                tools,
                tokens,
            });
        }
    }
    let mut crit = Criterion::default()
        .configure_from_args()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(20);
    {
        let mut group = crit.benchmark_group("dialect_compile");
        for c in &cases {
            group.bench_function(BenchmarkId::new(c.dialect, c.n), |b| {
                b.iter(|| compile_ready(c, &vocab))
            });
        }
        group.finish();
    }
    {
        let mut group = crit.benchmark_group("dialect_mask");
        let mut mask = TokenMask::new(vocab.len());
        for c in &cases {
            let (auto, _) = compile_ready(c, &vocab);
            group.throughput(Throughput::Elements(c.tokens.len() as u64));
            group.bench_function(BenchmarkId::new(c.dialect, c.n), |b| {
                b.iter(|| pass(&auto, &c.tokens, &mut mask))
            });
        }
        group.finish();
    }
    crit.final_summary();
    if std::env::var("CALLMASK_BENCH_TABLE").as_deref() != Ok("0") {
        table(&cases, &vocab);
    }
}
