//! End to end on the default model (Gemma 3 270M Q4_K_M, CPU, greedy): for each seed dialect and
//! the 20 prompts of `callmask_testkit::e2e`, one sequence at a time, constrained and
//! unconstrained: the share of outputs that parse and whose calls validate (`jsonschema`), and
//! tokens per second after the prompt.
//!
//! ```text
//! cargo bench --bench generate                 # all 20 prompts (several minutes on 2 cores)
//! CALLMASK_E2E_PROMPTS=5 cargo bench --bench generate
//! ```
//! `CALLMASK_E2E_MAX_TOKENS` (default 160) bounds each output; an unconstrained output that
//! reaches it without a parseable answer counts as invalid.

use callmask_testkit::e2e;

use std::time::Duration;

use callmask::{Dialect, TokenAutomaton};
use callmask_llama::{Engine, SamplingParams};

fn main() {
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return;
    }
    let model = callmask_testkit::gemma_gguf();
    let n: usize = std::env::var("CALLMASK_E2E_PROMPTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let max_tokens: usize = std::env::var("CALLMASK_E2E_MAX_TOKENS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(160);
    let engine = Engine::load(&model, None).expect("run scripts/fetch-data.sh gemma");
    println!("| dialect | mode | valid | unfinished | tokens | tokens/s | fast path |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    let mut speed = Vec::new();
    for d in e2e::DIALECTS {
        let row = |constrained: bool, check_first: bool| {
            let (mut valid, mut unfinished, mut tokens, mut time, mut fast, mut masked) =
                (0, 0, 0usize, Duration::ZERO, 0u64, 0u64);
            for (file, prompt) in e2e::PROMPTS.iter().take(n) {
                let tools = e2e::tools(file);
                let grammar = Dialect::by_name(d)
                    .unwrap()
                    .compile(&tools, &e2e::options())
                    .unwrap();
                let auto = TokenAutomaton::new(&grammar, engine.vocab().clone()).unwrap();
                let text = e2e::render(d, &tools, prompt, &engine.bos_text());
                let g = engine
                    .generate(
                        &text,
                        constrained.then_some(&auto),
                        &SamplingParams::default().check_first(check_first),
                        max_tokens,
                        &mut |_| {},
                    )
                    .unwrap();
                tokens += g.tokens.len();
                time += g.gen_time;
                fast += g.stats.fast;
                masked += g.stats.masked;
                if !g.finished {
                    unfinished += 1;
                }
                if g.finished
                    && e2e::validate(&tools, &grammar, &g.text).is_ok_and(|calls| calls > 0)
                {
                    valid += 1;
                }
            }
            let tps = tokens as f64 / time.as_secs_f64().max(1e-9);
            let fast_share = if constrained {
                format!(
                    "{:.0}%",
                    100.0 * fast as f64 / (fast + masked).max(1) as f64
                )
            } else {
                "-".into()
            };
            let mode = match (constrained, check_first) {
                (false, _) => "unconstrained",
                (true, true) => "constrained",
                (true, false) => "constrained, mask every token",
            };
            println!("| {d} | {mode} | {valid}/{n} | {unfinished} | {tokens} | {tps:.1} | {fast_share} |");
            tps
        };
        let c = row(true, true);
        let m = row(true, false);
        let u = row(false, true);
        speed.push((d, c / u, m / u));
    }
    for (d, r, m) in speed {
        println!(
            "{d}: constrained speed = {:.1}% of unconstrained ({:.1}% when masking every token)",
            100.0 * r,
            100.0 * m
        );
    }
}
