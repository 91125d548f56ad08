//! The token budget end to end on a real model on the CPU (SmolLM2-135M-Instruct, or Gemma 3
//! 270M with `CALLMASK_E2E_MODEL=gemma`: `testkit::e2e_gguf`): tool sets
//! the project never tuned for (`examples/tools/travel.json`: nested objects, enums, IATA
//! patterns, dates and date-times, arrays, objects without `additionalProperties`), each seed
//! dialect, `tool_choice` `required` and a named tool, `max_tokens` 64 and 200, default dialect
//! options (no `max_text_chars`): every generation must end with its end-of-generation token
//! within `max_tokens` and hold a call whose arguments validate with the `jsonschema` crate.
//!
//! The budget counts tokens (the shortest `book_flight` call fits in well under 64), so a
//! budget refused up front (`Error::BudgetTooSmall`) is a failure too.
//!
//! With `CALLMASK_BUDGET_E2E_COMPARE=1` (as `scripts/budget-e2e.sh` sets it; CI leaves it off,
//! as it asserts nothing), each `max_tokens: 200` generation runs again with the budget off
//! (`SamplingParams::token_budget(false)`: the output is only cut at `max_tokens`) for
//! comparison: the test prints how many of those end with a valid call, and the tokens/s with
//! and without the budget. It always prints how often the budget steered (the model's first
//! choice refused by the budget alone). `CALLMASK_BUDGET_E2E_PROMPTS` (default 1, at most 4) sets
//! how many prompts run; `scripts/budget-e2e.sh` runs all of them.

use callmask_testkit as testkit;
use callmask_testkit::e2e::{render, tools, validate, DIALECTS};

use callmask::{Dialect, DialectOptions, TokenAutomaton, ToolChoice};
use callmask_llama::{Engine, SamplingParams};

const PROMPTS: [(&str, &str); 4] = [
    (
        "book_flight",
        "Book me a business flight from Lisbon (LIS) to Tokyo (HND) on Christmas Eve 2026 for me, Dana, 41, vegetarian.",
    ),
    (
        "schedule_reminder",
        "Remind me every 2 weeks, starting next Monday at 9am, to water the plants; tag it #home.",
    ),
    (
        "convert_currency",
        "How much is 250 euros in Japanese yen?",
    ),
    (
        "book_flight",
        "I want to fly from New York to Paris next Friday with my two kids, aged 6 and 9.",
    ),
];

#[test]
fn every_generation_ends_with_a_valid_call_within_the_budget() {
    let n: usize = std::env::var("CALLMASK_BUDGET_E2E_PROMPTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
        .clamp(1, PROMPTS.len());
    // `CALLMASK_THREADS`: llama.cpp threads (default: one per core; 1 avoids llama.cpp's
    // spinning barriers on a machine busy with other work).
    let threads = std::env::var("CALLMASK_THREADS")
        .ok()
        .and_then(|s| s.parse().ok());
    let compare = std::env::var("CALLMASK_BUDGET_E2E_COMPARE").is_ok_and(|v| v == "1");
    let (path, name) = testkit::e2e_gguf();
    let engine = Engine::load(path, threads).unwrap_or_else(|e| panic!("loading {name}: {e}"));
    let tools = tools("travel.json");
    let (mut runs, mut ok, mut tokens, mut steered, mut secs) = (0, 0, 0u64, 0u64, 0.0);
    let mut failures = Vec::new();
    let (mut free_runs, mut free_ok, mut free_tokens, mut free_secs) = (0, 0, 0u64, 0.0);
    for &(named, prompt) in &PROMPTS[..n] {
        for d in DIALECTS {
            for choice in [ToolChoice::Required, ToolChoice::Function(named.into())] {
                let mut o = DialectOptions::default();
                o.tool_choice = choice.clone();
                let grammar = Dialect::by_name(d).unwrap().compile(&tools, &o).unwrap();
                let auto = TokenAutomaton::new(&grammar, engine.vocab().clone()).unwrap();
                let text = render(d, &tools, prompt, &engine.bos_text());
                for max_tokens in [64, 200] {
                    if compare && max_tokens == 200 {
                        // The same generation with the budget off, for comparison.
                        let free = SamplingParams::default().token_budget(false);
                        let g = engine
                            .generate(&text, Some(&auto), &free, max_tokens, &mut |_| {})
                            .unwrap_or_else(|e| panic!("{d} {choice:?} no budget: {e}"));
                        free_runs += 1;
                        free_tokens += g.tokens.len() as u64 + u64::from(g.finished);
                        free_secs += g.gen_time.as_secs_f64();
                        let within = g.finished && g.tokens.len() < max_tokens;
                        if within && validate(&tools, &grammar, &g.text).is_ok_and(|c| c >= 1) {
                            free_ok += 1;
                        }
                    }
                    let g = engine
                        .generate(
                            &text,
                            Some(&auto),
                            &SamplingParams::default(),
                            max_tokens,
                            &mut |_| {},
                        )
                        .unwrap_or_else(|e| panic!("{d} {choice:?} max {max_tokens}: {e}"));
                    eprintln!(
                        "{d} {choice:?} max {max_tokens}: {} tokens, {} steered: {:?}",
                        g.tokens.len() + 1,
                        g.stats.budget_steered,
                        g.text
                    );
                    runs += 1;
                    tokens += g.tokens.len() as u64 + 1;
                    steered += g.stats.budget_steered;
                    secs += g.gen_time.as_secs_f64();
                    let within = g.finished && g.tokens.len() < max_tokens;
                    match validate(&tools, &grammar, &g.text) {
                        Ok(calls) if calls >= 1 && within => ok += 1,
                        r => failures.push(format!(
                            "{d} {choice:?} max {max_tokens}: {r:?}, finished {}, {} tokens: {:?}",
                            g.finished,
                            g.tokens.len(),
                            g.text
                        )),
                    }
                }
            }
        }
    }
    if compare {
        eprintln!(
            "without the budget (max_tokens 200, cut there): {free_ok}/{free_runs} valid calls that end; {free_tokens} tokens, {:.1} tokens/s",
            free_tokens as f64 / free_secs
        );
    }
    eprintln!(
        "budget e2e: {ok}/{runs} valid calls within the budget; {tokens} tokens, {steered} steered by the budget ({:.1}%), {:.1} tokens/s",
        100.0 * steered as f64 / tokens as f64,
        tokens as f64 / secs
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(ok, runs);
}
