//! `callmask bench`: the callmask-only measures for a user's grammar.

use crate::*;

/// Arguments of `callmask bench`.
#[derive(Debug, Args)]
pub(crate) struct BenchArgs {
    /// The grammar.
    #[command(flatten)]
    pub(crate) grammar: GrammarArgs,
    /// The vocabulary.
    #[command(flatten)]
    pub(crate) vocab: VocabArgs,
    /// Compile trials.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub(crate) compiles: usize,
    /// Valid outputs to measure masks along (drawn by the fuzzer, then tokenized as the model
    /// would).
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub(crate) outputs: u64,
    /// Passes over each output with fresh matchers (the first is cold).
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub(crate) passes: usize,
    /// Seed of the outputs.
    #[arg(long, default_value_t = 0)]
    pub(crate) seed: u64,
}

/// Median, p99 and max of `xs` (sorted in place), in the unit given.
pub(crate) fn stats(xs: &mut [f64]) -> (f64, f64, f64) {
    if xs.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    xs.sort_by(f64::total_cmp);
    let at = |p: usize| xs[((xs.len() - 1) * p).div_ceil(100)];
    (at(50), at(99), xs[xs.len() - 1])
}

/// `callmask bench`.
pub(crate) fn bench(args: &BenchArgs) -> Result<ExitCode, BadInput> {
    let t = Instant::now();
    let vocab = load_vocab(&args.vocab)?;
    let load_ms = t.elapsed().as_secs_f64() * 1e3;
    let loaded = load_grammar(&args.grammar, Some(&vocab))?;
    let t = Instant::now();
    let automaton = TokenAutomaton::new(&loaded.grammar, vocab.clone())?;
    let mut mask = callmask::TokenMask::new(vocab.len());
    automaton.matcher().fill_mask(&mut mask);
    let trie_ms = t.elapsed().as_secs_f64() * 1e3;

    // Compile: tools or schema -> automaton -> first mask, fresh each time; cold = the
    // vocabulary's caches (compiled lexemes, lexeme walks) emptied first, warm = kept.
    let mut compile = |clear: bool| -> Result<(Vec<f64>, Vec<f64>), BadInput> {
        let (mut total, mut first) = (Vec::new(), Vec::new());
        for _ in 0..args.compiles.max(1) {
            if clear {
                vocab.caches().clear();
            }
            let t0 = Instant::now();
            let g = loaded.recompile()?;
            let a = TokenAutomaton::new(&g, vocab.clone())?;
            let t1 = Instant::now();
            a.matcher().fill_mask(&mut mask);
            total.push(t0.elapsed().as_secs_f64() * 1e3);
            first.push(t1.elapsed().as_secs_f64() * 1e6);
        }
        Ok((total, first))
    };
    let (mut cold, mut cold_first) = compile(true)?;
    let (mut warm, mut warm_first) = compile(false)?;

    // Valid outputs, tokenized as the model would.
    let fuzzer = Fuzzer::new(&automaton, FuzzOptions::default().seed(args.seed))?;
    let mut texts: Vec<Vec<TokenId>> = Vec::new();
    let started = Instant::now();
    let (mut drawn, mut drawn_tokens) = (0u64, 0u64);
    for i in 0..args.outputs.max(1) * 4 {
        if texts.len() as u64 >= args.outputs.max(1) {
            break;
        }
        let s = fuzzer.draw(i, &HashSet::new());
        drawn += 1;
        drawn_tokens += s.tokens.len() as u64;
        if s.outcome != Outcome::Valid {
            continue;
        }
        let Ok(text) = std::str::from_utf8(&s.text) else {
            continue;
        };
        let Ok(tokens) = automaton.tokenize(text) else {
            continue;
        };
        let mut m = automaton.matcher();
        if tokens.iter().all(|&t| m.accept(t).is_ok()) && m.can_end() {
            texts.push(tokens);
        }
    }
    let fuzz_secs = started.elapsed().as_secs_f64();

    // Masks along the outputs: fresh matchers on the one automaton.
    let (mut first_pass, mut later) = (Vec::new(), Vec::new());
    let mut seq_bytes = Vec::new();
    for pass in 0..args.passes.max(1) {
        for tokens in &texts {
            let mut m = automaton.matcher();
            for &t in tokens {
                let t0 = Instant::now();
                m.fill_mask(&mut mask);
                let us = t0.elapsed().as_secs_f64() * 1e6;
                if pass == 0 {
                    first_pass.push(us)
                } else {
                    later.push(us)
                }
                let _ = m.accept(t);
            }
            if pass == 0 {
                seq_bytes.push(m.accepted_tokens().len() * 4);
            }
        }
    }
    let n_tokens: usize = texts.iter().map(Vec::len).sum();
    let (cp50, cp99, cmax) = stats(&mut cold);
    let (wp50, wp99, wmax) = stats(&mut warm);
    let (cf50, _, _) = stats(&mut cold_first);
    let (wf50, _, _) = stats(&mut warm_first);
    let (f50, f99, fmax) = stats(&mut first_pass);
    let (m50, m99, mmax) = stats(&mut later);
    println!("| measure | value |");
    println!("|---|---|");
    println!("| vocabulary | {} tokens, loaded in {load_ms:.0} ms; token trie + first automaton {trie_ms:.1} ms |", vocab.len());
    println!("| compile, cold caches (ms) | p50 {cp50:.3}, p99 {cp99:.3}, max {cmax:.3} (first mask p50 {cf50:.0} µs) |");
    println!("| compile, warm caches (ms) | p50 {wp50:.3}, p99 {wp99:.3}, max {wmax:.3} (first mask p50 {wf50:.0} µs) |");
    println!("| mask per token, first pass (µs) | p50 {f50:.2}, p99 {f99:.2}, max {fmax:.1} over {} tokens of {} outputs |", first_pass.len(), texts.len());
    println!(
        "| mask per token, warm (µs) | p50 {m50:.2}, p99 {m99:.2}, max {mmax:.1} over {} masks |",
        later.len()
    );
    println!("| memory | grammar {} KB, mask caches {} KB after the passes, {} B per sequence of {:.0} tokens (token history) |",
        loaded.grammar.memory_bytes() / 1024, automaton.cache_bytes() / 1024,
        seq_bytes.iter().sum::<usize>() / seq_bytes.len().max(1), n_tokens as f64 / texts.len().max(1) as f64);
    println!(
        "| fuzz (1 thread) | {:.0} outputs/s, {:.0} tokens/s ({drawn} outputs drawn) |",
        drawn as f64 / fuzz_secs,
        drawn_tokens as f64 / fuzz_secs
    );
    Ok(ExitCode::SUCCESS)
}
