//! The price of the distinct-calls rule on the masks of random outputs, as an engine's batch of
//! a random-weight model pays it: random walks through one dialect's masks (each token drawn
//! uniformly from the allowed ones, as temperature-1 sampling of random logits nearly does),
//! under a token budget, timed with the rule on and off over the same walks' seeds. A profiling
//! driver (the engine's own measurement is `scripts/vllm-bench.sh`).
//!
//! ```text
//! CALLMASK_CACHE=.cache cargo run --release --example distinct_walk -- hermes required 100 64 32
//! # instruction counts of the masks with the rule on only:
//! valgrind --tool=callgrind --toggle-collect='*distinct_walk::fill*' \
//!     target/release/examples/distinct_walk hermes required 100 64 8 on
//! ```
//!
//! Arguments: dialect (`hermes`), tool choice (`required`), number of tools (1, 5, 20, 100, 400
//! or 1000: `benches/tools/tools_N.json`; 100), token budget (64), walks (32), and `on`, `off`
//! or `both` (default) for the rule; `TOOLS=FILE` reads the tools from `FILE` instead (e.g.
//! the tool sets of `scripts/engines/vllm_bench.py`). The vocabulary is Qwen3's (the tiny random model
//! `scripts/vllm-bench.sh` runs), else Llama 3.1's. Environment: `SEED` (the first walk's,
//! 0), `SLOW=MS` (print each mask slower than that, with the text before it), `NOWARM` (no
//! untimed pass first), `FRESH` (the untimed pass over the same tools under other names: the
//! vocabulary's caches warm, this tool set's automaton cold, as an engine's first batch of a new
//! tool set).

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use callmask::{Dialect, DialectOptions, Matcher, TokenAutomaton, TokenMask, Tools, Vocab};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// One mask, under its own name for the profiler.
#[inline(never)]
fn fill(m: &mut Matcher, mask: &mut TokenMask) {
    m.fill_mask(mask);
    black_box(&*mask);
}

/// What the walks of one setting of the rule measured.
#[derive(Default)]
struct Totals {
    masks: usize,
    time: Duration,
    longest: Duration,
    calls: usize,
    gave_up: u64,
    /// A checksum of every mask (equal masks, equal sums: a change that must not change the
    /// masks is checked by comparing it).
    sum: u64,
}

/// `walks` random outputs, each drawn with its own seed, the rule `on` or off.
fn walk_all(auto: &TokenAutomaton, vocab: &Vocab, budget: usize, walks: usize, on: bool) -> Totals {
    let mut t = Totals::default();
    let mut mask = TokenMask::new(vocab.len());
    for seed in first_seed()..first_seed() + walks {
        let mut rng = StdRng::seed_from_u64(seed as u64);
        let mut m = auto.matcher();
        m.set_distinct_calls(on);
        m.set_token_budget(Some(budget)).expect("budget");
        while !m.is_finished() {
            let t0 = Instant::now();
            fill(&mut m, &mut mask);
            let dt = t0.elapsed();
            t.masks += 1;
            t.time += dt;
            t.longest = t.longest.max(dt);
            if std::env::var_os("SLOW").is_some()
                && dt
                    > Duration::from_millis(
                        std::env::var("SLOW")
                            .ok()
                            .and_then(|s| s.parse().ok())
                            .unwrap_or(20),
                    )
            {
                let text: Vec<u8> = m
                    .accepted_tokens()
                    .iter()
                    .flat_map(|&k| vocab.token_bytes(k).unwrap_or_default().to_vec())
                    .collect();
                eprintln!(
                    "{:.1} ms {} allowed after {:?}",
                    dt.as_secs_f64() * 1e3,
                    mask.count(),
                    String::from_utf8_lossy(&text)
                );
            }
            t.sum = mask.words().iter().fold(t.sum, |h, &w| {
                (h.rotate_left(5) ^ w).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            });
            let allowed: Vec<_> = mask.iter().collect();
            assert!(!allowed.is_empty(), "empty mask before the end");
            let tok = allowed[rng.random_range(0..allowed.len())];
            if vocab.eos_tokens().contains(&tok) {
                break;
            }
            m.accept(tok).expect("accept an allowed token");
        }
        let text: Vec<u8> = m
            .accepted_tokens()
            .iter()
            .flat_map(|&k| vocab.token_bytes(k).unwrap_or_default().to_vec())
            .collect();
        t.calls += String::from_utf8_lossy(&text).matches("\"name\"").count();
        t.gave_up += m.distinct_gave_up();
    }
    t
}

/// The first walk's seed (`SEED`, default 0).
fn first_seed() -> usize {
    std::env::var("SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, d: &str| args.get(i).cloned().unwrap_or_else(|| d.to_string());
    let dialect = Dialect::by_name(&arg(0, "hermes")).expect("dialect");
    let choice = arg(1, "required").parse().expect("tool choice");
    let n: usize = arg(2, "100").parse().expect("number of tools");
    let budget: usize = arg(3, "64").parse().expect("token budget");
    let walks: usize = arg(4, "32").parse().expect("walks");
    let which = arg(5, "both");
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let text = match std::env::var_os("TOOLS") {
        Some(path) => std::fs::read_to_string(path).expect("the TOOLS file"),
        None => std::fs::read_to_string(root.join(format!("benches/tools/tools_{n}.json")))
            .expect("benches/tools/tools_N.json (N = 1, 5, 20, 100, 400, 1000)"),
    };
    let cache = std::env::var_os("CALLMASK_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("../../.cache"));
    let qwen = cache.join("models/tiny-qwen3/tokenizer.json");
    let path = if qwen.exists() {
        qwen
    } else {
        cache.join("tokenizers/llama3_1-3.7.2/tokenizer.json")
    };
    let vocab = Arc::new(Vocab::from_tokenizer_json(&path).expect("tokenizer.json"));
    // The lexemes in the vocabulary's caches, as the engine adapters compile them (so that a
    // second tool set of the same schemas shares their walks).
    let mut opts = DialectOptions::default().tool_choice(choice);
    opts.compile.caches = Some(vocab.caches().clone());
    let tools = Tools::from_json_str(&text).expect("tools");
    let g = dialect.compile(&tools, &opts).expect("compile");
    let auto = TokenAutomaton::new(&g, vocab.clone()).expect("automaton");
    if std::env::var_os("FRESH").is_some() {
        // The engine's first batch of a new tool set: the vocabulary's caches warmed by an
        // earlier set of the same schemas under other names, this automaton cold.
        let renamed = text.replace("\"name\": \"", "\"name\": \"earlier_");
        assert_ne!(renamed, text, "the tools' names renamed");
        let tools = Tools::from_json_str(&renamed).expect("tools");
        let g = dialect.compile(&tools, &opts).expect("compile");
        let earlier = TokenAutomaton::new(&g, vocab.clone()).expect("automaton");
        walk_all(&earlier, &vocab, budget, walks, false);
    } else if std::env::var_os("NOWARM").is_none() {
        // One untimed pass warms the automaton's state masks, as the engine's warm batches have.
        walk_all(&auto, &vocab, budget, walks, false);
    }
    println!("vocabulary {} ({} tokens)", path.display(), vocab.len());
    for on in [true, false] {
        if (which == "on" && !on) || (which == "off" && on) {
            continue;
        }
        let t = walk_all(&auto, &vocab, budget, walks, on);
        println!(
            "rule {}: {} masks, {:.3} ms total, {:.1} us/mask, longest {:.3} ms, {} calls, gave way {}, masks' checksum {:016x}",
            if on { "on " } else { "off" },
            t.masks,
            t.time.as_secs_f64() * 1e3,
            t.time.as_secs_f64() * 1e6 / t.masks.max(1) as f64,
            t.longest.as_secs_f64() * 1e3,
            t.calls,
            t.gave_up,
            t.sum
        );
    }
}
