//! Offline fuzzing: random complete outputs drawn from the token masks, each validated against
//! the original schemas by code independent of the automaton.
//!
//! Each output is a random walk over the masks (uniformly among the allowed tokens, or preferring
//! tokens that lead somewhere not visited before), for a random number of tokens around
//! [`FuzzOptions::walk_tokens`]; then it is finished along a shortest completion (single-byte
//! tokens chosen by the byte-level automaton, each of them checked against the token mask) and an
//! end-of-generation token. Every output therefore ends, however deep the walk went, and the mask
//! is exercised both where a model wanders and where it closes everything.
//!
//! Runs are reproducible: output `i` depends only on the seed, `i`, and (coverage strategy) the
//! positions visited by earlier batches, never on the number of threads.

mod check;
mod coverage;

pub use check::{parse_strict, Checked, Checker};
pub use coverage::{Count, Coverage, CoverageReport, Observation};

use crate::automaton::complete::{Completer, Dive};
use crate::automaton::{Stack, Sym};
use crate::{DistinctCalls, Matcher, Result, TokenAutomaton, TokenId, TokenMask};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use std::collections::HashSet;

/// How the walk picks the next token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Any allowed token, uniformly.
    Uniform,
    /// Among a few random allowed tokens (and single-byte ones), one leading to a grammar position
    /// not visited before, when there is one: reaches rare branches and markers sooner.
    Coverage,
}

/// How outputs are drawn.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FuzzOptions {
    /// Seed of the run; the same seed gives the same outputs.
    pub seed: u64,
    /// Most tokens in one output (walk and completion); longer ones count as unfinished.
    pub max_tokens: usize,
    /// Mean length of the random walk before the output is finished along a shortest
    /// completion (each output walks a uniform 0..=2×this many tokens). 0: walk only, never
    /// complete (outputs end only by an end-of-generation token).
    pub walk_tokens: usize,
    /// Where the output may end, end it with this probability.
    pub end_bias: f64,
    /// How tokens are picked.
    pub strategy: Strategy,
    /// Tokens forced at the start of every output (like a prefill).
    pub prefix: Vec<TokenId>,
    /// For a dialect grammar: the probability that an output, after its first few random
    /// tokens, steers along a shortest path into a call of a function picked uniformly (then
    /// walks on at random): free text rarely writes a call marker by chance.
    pub dive: f64,
    /// Token budgets ([`crate::Matcher::set_token_budget`]): each output gets as budget the
    /// fewest tokens a complete output needs, plus a slack drawn uniformly from this range, and
    /// walks at random (no shortest completion) until the budget's mask makes it end. An output
    /// that does not end with an end-of-generation token within its budget is a violation.
    pub budget_slack: Option<(usize, usize)>,
}

crate::setters::option_setters!(FuzzOptions { seed: u64, max_tokens: usize, walk_tokens: usize, end_bias: f64, strategy: Strategy, prefix: Vec<TokenId>, dive: f64 });

impl Default for FuzzOptions {
    fn default() -> Self {
        FuzzOptions {
            seed: 0,
            max_tokens: 512,
            walk_tokens: 32,
            end_bias: 0.0,
            strategy: Strategy::Uniform,
            prefix: Vec::new(),
            dive: 0.5,
            budget_slack: None,
        }
    }
}

/// What checking an output found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A complete output that parses and satisfies the schemas.
    Valid,
    /// Hit [`FuzzOptions::max_tokens`] before it could end (not checked).
    Unfinished,
    /// A complete output that violates the schemas, or a broken walk (a dead end, or the matcher
    /// refusing a token its mask allowed): always a bug.
    Violation(String),
}

/// One drawn output.
#[derive(Debug, Clone)]
pub struct Sample {
    /// Its index in the run.
    pub index: u64,
    /// Its tokens, the end-of-generation token excluded.
    pub tokens: Vec<TokenId>,
    /// The end-of-generation token that ended it, if one did.
    pub eos: Option<TokenId>,
    /// How many of `tokens` were steered (a dive into a call, the shortest completion) rather
    /// than drawn at random.
    pub steered: usize,
    /// The decoded bytes.
    pub text: Vec<u8>,
    /// Its token budget (end-of-generation token included), under [`FuzzOptions::budget_slack`].
    pub budget: Option<usize>,
    /// How many masks the budget changed (see [`crate::Matcher::budget_steered`]).
    pub budget_steered: u64,
    /// How many masks the distinct-calls rule gave way in
    /// ([`crate::Matcher::distinct_gave_up`]); from the first, calls may repeat.
    pub distinct_gave_up: u64,
    /// The verdict.
    pub outcome: Outcome,
    /// What a valid output holds (for coverage).
    pub checked: Option<Checked>,
    /// Hashes of the positions the walk reached (coverage strategy).
    seen: Vec<u64>,
}

/// Draws and checks outputs of one token automaton.
pub struct Fuzzer {
    automaton: TokenAutomaton,
    options: FuzzOptions,
    completer: Completer,
    /// The token of each input symbol, where there is one.
    symbol_tokens: Vec<Option<TokenId>>,
    /// The single-symbol tokens.
    single: Vec<TokenId>,
    /// Per function with calls in the grammar: distances to entering one of its calls.
    dives: Vec<Dive>,
}

impl std::fmt::Debug for Fuzzer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fuzzer")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// Mixes the run's seed with the output's index (splitmix64), so that each output has its own
/// random stream.
fn output_seed(seed: u64, index: u64) -> u64 {
    let mut z = seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// One output being drawn: the random source, the matcher and its mask, the sample so far,
/// and the positions this output and earlier ones reached (coverage strategy).
struct Walk<'a> {
    rng: StdRng,
    m: Matcher,
    mask: TokenMask,
    s: Sample,
    local: HashSet<u64>,
    visited: &'a HashSet<u64>,
}

/// Draws random allowed tokens: from the filled mask, or (under a budget, before it is filled)
/// by asking the matcher.
struct Picker {
    /// The vocabulary's size.
    n: TokenId,
    /// Random ids tried before giving up (or counting the mask).
    tries: usize,
    /// Whether the mask is filled for this position.
    filled: bool,
}

impl Picker {
    /// Whether `t` is allowed.
    fn allowed(&self, m: &Matcher, mask: &TokenMask, t: TokenId) -> bool {
        if self.filled {
            mask.is_allowed(t)
        } else {
            m.is_allowed(t)
        }
    }

    /// A random allowed token: a few random ids, then (with a filled mask) one drawn from the
    /// mask's count.
    fn pick(&self, rng: &mut StdRng, m: &Matcher, mask: &TokenMask) -> Option<TokenId> {
        for _ in 0..self.tries {
            let t = rng.random_range(0..self.n);
            if self.allowed(m, mask, t) {
                return Some(t);
            }
        }
        if !self.filled {
            return None;
        }
        match mask.count() {
            0 => None,
            count => mask.iter().nth(rng.random_range(0..count)),
        }
    }
}

/// A sample with nothing drawn yet.
fn empty_sample(index: u64) -> Sample {
    Sample {
        index,
        tokens: Vec::new(),
        eos: None,
        steered: 0,
        text: Vec::new(),
        budget: None,
        budget_steered: 0,
        distinct_gave_up: 0,
        outcome: Outcome::Valid,
        checked: None,
        seen: Vec::new(),
    }
}

/// Under a budget, a valid output must have ended within it.
fn check_budget_end(m: &Matcher, s: &mut Sample) {
    if let (Some(b), Outcome::Valid) = (s.budget, &s.outcome) {
        let used = s.tokens.len() + usize::from(s.eos.is_some());
        if used > b {
            s.outcome = Outcome::Violation(format!("{used} tokens used, over the budget of {b}"));
        } else if s.eos.is_none() && !m.is_finished() {
            s.outcome = Outcome::Violation(format!(
                "no end-of-generation token within the budget of {b} ({used} tokens)"
            ));
        }
    }
}

fn hash_states(states: &[Stack]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    states.hash(&mut h);
    h.finish()
}

impl Fuzzer {
    /// A fuzzer over `automaton`; fails when the prefix is not allowed by the grammar.
    pub fn new(automaton: &TokenAutomaton, options: FuzzOptions) -> Result<Fuzzer> {
        let mut m = automaton.matcher();
        for &t in &options.prefix {
            m.accept(t)?;
        }
        let symbol_tokens = automaton.symbol_tokens();
        let single = symbol_tokens.iter().flatten().copied().collect();
        // Shortest completions only through symbols that have a token of their own: a byte
        // without a single-byte token (SmolLM2's `04`, `f5`, ...) is never steered to.
        let vocab = automaton.vocab();
        let usable = std::array::from_fn(|b| symbol_tokens[b].is_some_and(|t| !vocab.is_eos(t)));
        let specials_ok = symbol_tokens[256..].iter().map(Option::is_some).collect();
        let completer =
            Completer::with_bytes(automaton.grammar().inner.clone(), specials_ok, usable);
        let dives = completer
            .call_nodes()
            .into_iter()
            .filter(|nodes| !nodes.is_empty())
            .map(|nodes| completer.dive(&nodes))
            .collect();
        Ok(Fuzzer {
            dives,
            completer,
            automaton: automaton.clone(),
            options,
            symbol_tokens,
            single,
        })
    }

    /// The automaton it draws from.
    pub fn automaton(&self) -> &TokenAutomaton {
        &self.automaton
    }

    /// The options.
    pub fn options(&self) -> &FuzzOptions {
        &self.options
    }

    /// Draws output `index` (unchecked: its outcome is `Valid` unless the walk itself broke or
    /// ran out of tokens). `visited`: positions reached by earlier outputs (coverage strategy).
    pub fn draw(&self, index: u64, visited: &HashSet<u64>) -> Sample {
        let mut w = Walk {
            rng: StdRng::seed_from_u64(output_seed(self.options.seed, index)),
            m: self.automaton.matcher(),
            mask: TokenMask::new(self.automaton.vocab().len()),
            s: empty_sample(index),
            local: HashSet::new(),
            visited,
        };
        if !self.start(&mut w) {
            return w.s;
        }
        let (target, dive_at) = self.plan(&mut w.rng);
        let mut walked = 0;
        let ended = loop {
            if dive_at == Some(walked) && !self.dive(&mut w) {
                break true;
            }
            if self.out_of_tokens(&mut w.s) {
                break true;
            }
            if walked >= target {
                break false;
            }
            if !self.step(&mut w) {
                break true;
            }
            walked += 1;
        };
        if !ended {
            self.finish(&mut w.m, &mut w.mask, &mut w.rng, &mut w.s);
        }
        check_budget_end(&w.m, &mut w.s);
        w.s.budget_steered = w.m.budget_steered();
        w.s.distinct_gave_up = w.m.distinct_gave_up();
        w.s.text = self.automaton.vocab().decode(&w.s.tokens);
        w.s
    }

    /// Feeds the prefix, then (with `budget_slack`) sets a random budget above the fewest
    /// tokens to the end; false (a violation recorded) when the matcher refuses the budget.
    fn start(&self, w: &mut Walk) -> bool {
        let o = &self.options;
        for &t in &o.prefix {
            // Checked in `new`.
            let _ = w.m.accept(t);
            w.s.tokens.push(t);
        }
        if let Some((lo, hi)) = o.budget_slack {
            let slack = w.rng.random_range(lo..=hi.max(lo));
            let need = w.m.min_tokens_to_end().unwrap_or(1);
            let b = need.saturating_add(slack);
            if let Err(e) = w.m.set_token_budget(Some(b)) {
                w.s.outcome = Outcome::Violation(format!("budget {b} refused: {e}"));
                return false;
            }
            w.s.budget = Some(b);
        }
        true
    }

    /// How many tokens the random walk takes before the output is finished (unbounded under a
    /// budget), and after how many it dives into a call (if it does).
    fn plan(&self, rng: &mut StdRng) -> (usize, Option<usize>) {
        let o = &self.options;
        let target = if o.walk_tokens == 0 || o.budget_slack.is_some() {
            usize::MAX
        } else {
            rng.random_range(0..=2 * o.walk_tokens)
        };
        let dive_at = match o.dive {
            p if !self.dives.is_empty() && p > 0.0 && rng.random_bool(p.min(1.0)) => {
                // At once half of the time: in dialects where text excludes calls, that is the
                // only chance.
                Some(if rng.random_bool(0.5) {
                    0
                } else {
                    rng.random_range(0..=o.walk_tokens / 2)
                })
            }
            _ => None,
        };
        (target, dive_at)
    }

    /// Steers the walk into a random call; false (a violation recorded) when the mask or the
    /// matcher refuses a steered token.
    fn dive(&self, w: &mut Walk) -> bool {
        let o = &self.options;
        let d = &self.dives[w.rng.random_range(0..self.dives.len())];
        let limit = o.max_tokens.saturating_sub(w.s.tokens.len());
        let start = w.rng.random_range(0..self.symbol_tokens.len());
        let usable = |sym: Sym| self.symbol_tokens[sym as usize].is_some();
        let c = &self.completer;
        match c.steer(
            w.m.states(),
            usable,
            start,
            limit,
            |st| c.to_enter_any(d, st) == 0,
            |st| c.to_enter_any(d, st),
        ) {
            Some(syms) => self.feed(&mut w.m, &mut w.mask, &syms, &mut w.s) != Fed::Violation,
            None => true,
        }
    }

    /// Whether the walk has used its budget (a violation) or `max_tokens` (unfinished) without
    /// an end.
    fn out_of_tokens(&self, s: &mut Sample) -> bool {
        if let Some(b) = s.budget {
            if s.tokens.len() >= b {
                s.outcome = Outcome::Violation(format!(
                    "{} tokens and no end, over the budget of {b}",
                    s.tokens.len()
                ));
                return true;
            }
        } else if s.tokens.len() >= self.options.max_tokens {
            s.outcome = Outcome::Unfinished;
            return true;
        }
        false
    }

    /// One token of the random walk, uniform among the allowed ones (or an end-of-generation
    /// token, or a new position): true when it was taken and the walk goes on, false when the
    /// output ended (an end token, a dead end, or a violation recorded).
    fn step(&self, w: &mut Walk) -> bool {
        // Under a budget the mask is filled only where random tries fail (sparse masks):
        // `is_allowed` applies the same budget, and most positions have dense masks. That
        // keeps budgeted walks fast enough to run at scale; the masks that are filled are
        // still checked for dead ends.
        // Masks too once the distinct-calls rule applies (`is_allowed` does not apply it).
        let filled = self.options.budget_slack.is_none() || w.m.distinct_active();
        let mut p = Picker {
            n: self.automaton.vocab().len() as TokenId,
            // More random tries before filling a mask under a budget: `is_allowed` costs
            // microseconds, a mask where the budget binds costs a walk of the vocabulary.
            tries: if filled { 8 } else { 64 },
            filled,
        };
        if p.filled {
            w.m.fill_mask(&mut w.mask);
        }
        // Uniform among the allowed tokens: a few random ids first (most masks are dense or
        // the walk would be short anyway), else an exact count.
        let mut first = p.pick(&mut w.rng, &w.m, &w.mask);
        if first.is_none() && !p.filled {
            w.m.fill_mask(&mut w.mask);
            p.filled = true;
            first = match w.mask.count() {
                0 => None,
                count => w.mask.iter().nth(w.rng.random_range(0..count)),
            };
        }
        let Some(first) = first else {
            // Nothing may follow: finished if the output may end here.
            if !w.m.can_end() {
                w.s.outcome = Outcome::Violation(
                    "dead end: no token is allowed, yet the output may not end here".into(),
                );
            }
            return false;
        };
        match self.choose(w, &p, first) {
            Some(t) => self.take(w, t),
            None => false,
        }
    }

    /// The token to take where `first` is a random allowed one: an allowed end-of-generation
    /// token with probability `end_bias`; under the coverage strategy, the first of some
    /// allowed candidates that reaches a position not reached before.
    fn choose(&self, w: &mut Walk, p: &Picker, first: TokenId) -> Option<TokenId> {
        let o = &self.options;
        let bias = if o.end_bias.is_finite() {
            o.end_bias.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let eos = self
            .automaton
            .vocab()
            .eos_tokens()
            .iter()
            .copied()
            .find(|&e| p.allowed(&w.m, &w.mask, e));
        match eos {
            Some(e) if bias > 0.0 && w.rng.random_bool(bias) => Some(e),
            _ if o.strategy == Strategy::Coverage => {
                let mut cands: Vec<TokenId> = std::iter::once(first)
                    .chain((1..16).filter_map(|_| p.pick(&mut w.rng, &w.m, &w.mask)))
                    .collect();
                for _ in 0..16 {
                    let t = self.single[w.rng.random_range(0..self.single.len())];
                    if p.allowed(&w.m, &w.mask, t) {
                        cands.push(t);
                    }
                }
                let new = cands.iter().copied().find(|&t| match w.m.next_states(t) {
                    Ok(Some(next)) => {
                        let h = hash_states(&next);
                        !w.visited.contains(&h) && !w.local.contains(&h)
                    }
                    _ => false,
                });
                new.or_else(|| cands.first().copied())
            }
            _ => Some(first),
        }
    }

    /// Accepts token `t`: true when the walk goes on, false when `t` ended the output or the
    /// matcher refused it (a violation recorded).
    fn take(&self, w: &mut Walk, t: TokenId) -> bool {
        let vocab = self.automaton.vocab();
        // A token that is both an end-of-generation token and one of the grammar's special
        // tokens (harmony's `<|end|>`) ends the output only where the grammar does not take it.
        let grammar_token = vocab.is_eos(t) && matches!(w.m.next_states(t), Ok(Some(_)));
        if let Err(e) = w.m.accept(t) {
            w.s.outcome = Outcome::Violation(format!(
                "the matcher refuses token {t}, which its mask allowed: {e}"
            ));
            return false;
        }
        if self.options.strategy == Strategy::Coverage {
            let h = hash_states(w.m.states());
            if w.local.insert(h) {
                w.s.seen.push(h);
            }
        }
        if vocab.is_eos(t) && !grammar_token {
            w.s.eos = Some(t);
            return false;
        }
        w.s.tokens.push(t);
        true
    }

    /// Finishes `m` along a shortest completion, then an end-of-generation token.
    fn finish(
        &self,
        m: &mut crate::Matcher,
        mask: &mut TokenMask,
        rng: &mut StdRng,
        s: &mut Sample,
    ) {
        let o = &self.options;
        let vocab = self.automaton.vocab();
        let usable = |sym: Sym| self.symbol_tokens[sym as usize].is_some();
        loop {
            let limit = o.max_tokens.saturating_sub(s.tokens.len());
            let start = rng.random_range(0..self.symbol_tokens.len());
            let Some(syms) = self.completer.complete(m.states(), usable, start, limit) else {
                s.outcome = Outcome::Unfinished;
                return;
            };
            match self.feed(m, mask, &syms, s) {
                Fed::Violation => return,
                Fed::All => break,
                Fed::Refused => {
                    // The shortest completion repeats a call (or no longer fits the budget):
                    // one allowed token that leaves the least to the end, then again.
                    if s.tokens.len() >= o.max_tokens {
                        s.outcome = Outcome::Unfinished;
                        return;
                    }
                    m.fill_mask(mask);
                    if let Some(e) = vocab
                        .eos_tokens()
                        .iter()
                        .copied()
                        .find(|&e| mask.is_allowed(e))
                    {
                        if m.accept(e).is_ok() {
                            s.eos = Some(e);
                        }
                        return;
                    }
                    let comp = &self.completer;
                    let best = mask
                        .iter()
                        .filter_map(|t| match m.next_states(t) {
                            Ok(Some(st)) => Some((comp.remaining_any(&st), t)),
                            _ => None,
                        })
                        .min();
                    let Some((_, t)) = best else {
                        if !m.can_end() {
                            s.outcome = Outcome::Violation(
                                "dead end: no token is allowed, yet the output may not end here"
                                    .into(),
                            );
                        }
                        return;
                    };
                    if let Err(e) = m.accept(t) {
                        s.outcome = Outcome::Violation(format!(
                            "the matcher refuses token {t}, which its mask allowed: {e}"
                        ));
                        return;
                    }
                    s.tokens.push(t);
                }
            }
        }
        if m.is_finished() {
            return;
        }
        m.fill_mask(mask);
        match vocab
            .eos_tokens()
            .iter()
            .copied()
            .find(|&e| mask.is_allowed(e))
        {
            Some(e) => {
                if let Err(err) = m.accept(e) {
                    s.outcome = Outcome::Violation(format!(
                        "the matcher refuses end-of-generation token {e}, which its mask allowed: {err}"
                    ));
                } else {
                    s.eos = Some(e);
                }
            }
            None if m.can_end() && vocab.eos_tokens().is_empty() => {}
            None => {
                s.outcome = Outcome::Violation(
                    "the output may end here, but the mask allows no end-of-generation token"
                        .into(),
                )
            }
        }
    }

    /// Feeds steered symbols to `m` as their tokens, each checked against the mask:
    /// [`Fed::Violation`] (recorded) when the mask or the matcher refuses one the grammar
    /// takes wrongly, [`Fed::Refused`] when the path stops where the budget or the
    /// distinct-calls rule no longer allows it.
    fn feed(
        &self,
        m: &mut crate::Matcher,
        mask: &mut TokenMask,
        syms: &[Sym],
        s: &mut Sample,
    ) -> Fed {
        let vocab = self.automaton.vocab();
        for &sym in syms {
            let t = self.symbol_tokens[sym as usize].unwrap_or_default();
            // Under a budget, `is_allowed` (the same budget, no mask walk) keeps budgeted walks
            // fast; without one, the mask itself is checked against the grammar.
            let allowed = if m.tokens_left().is_some() && !m.distinct_active() {
                m.is_allowed(t)
            } else {
                m.fill_mask(mask);
                mask.is_allowed(t)
            };
            if !allowed
                && (m.tokens_left().is_some() || m.distinct_calls() != DistinctCalls::Allow)
                && m.is_allowed_by_grammar(t)
            {
                // The budget no longer leaves room for this path, or it repeats a call: walk
                // on at random.
                return Fed::Refused;
            }
            if !allowed {
                s.outcome = Outcome::Violation(format!(
                    "the mask forbids token {t} ({:?}), which the grammar allows here",
                    String::from_utf8_lossy(&vocab.decode(&[t]))
                ));
                return Fed::Violation;
            }
            if vocab.is_eos(t) && matches!(m.next_states(t), Ok(None)) {
                // An end-of-generation token that is also the special token of this path ends
                // the output here (the budget leaves no room to go on): walk on at random.
                return Fed::Refused;
            }
            if let Err(e) = m.accept(t) {
                s.outcome = Outcome::Violation(format!(
                    "the matcher refuses token {t}, which its mask allowed: {e}"
                ));
                return Fed::Violation;
            }
            s.tokens.push(t);
            s.steered += 1;
        }
        Fed::All
    }

    /// Checks a drawn sample with `checker` (only samples still `Valid` are checked).
    pub fn check(&self, checker: &Checker, s: &mut Sample) {
        if s.outcome != Outcome::Valid {
            return;
        }
        match std::str::from_utf8(&s.text) {
            Err(e) => s.outcome = Outcome::Violation(format!("output is not valid UTF-8: {e}")),
            Ok(t) => match checker.check_calls(
                self.automaton.grammar(),
                t,
                if s.distinct_gave_up == 0 {
                    self.automaton.grammar().inner.distinct_calls
                } else {
                    DistinctCalls::Allow
                },
            ) {
                Ok(c) => s.checked = Some(c),
                Err(why) => s.outcome = Outcome::Violation(why),
            },
        }
    }

    /// Draws and checks outputs `0..count` in parallel (on the current rayon pool), computes
    /// `extra` for each in parallel too, and hands them to `each` in index order; stops early
    /// when `each` returns false.
    pub fn run<T: Send>(
        &self,
        checker: &Checker,
        count: u64,
        extra: impl Fn(&Sample) -> T + Sync,
        mut each: impl FnMut(Sample, T) -> bool,
    ) {
        let batch: u64 = match self.options.strategy {
            Strategy::Uniform => 256,
            Strategy::Coverage => 32,
        };
        let mut visited: HashSet<u64> = HashSet::new();
        let mut next = 0;
        while next < count {
            let end = (next + batch).min(count);
            let samples: Vec<(Sample, T)> = (next..end)
                .into_par_iter()
                .map(|i| {
                    let mut s = self.draw(i, &visited);
                    self.check(checker, &mut s);
                    let x = extra(&s);
                    (s, x)
                })
                .collect();
            for (mut s, x) in samples {
                visited.extend(std::mem::take(&mut s.seen));
                if !each(s, x) {
                    return;
                }
            }
            next = end;
        }
    }

    /// A shorter token sequence that the matcher still accepts as a complete output and that
    /// `still_bad` still rejects (greedy chunk removal, at most `budget` tries).
    pub fn shrink(
        &self,
        tokens: &[TokenId],
        still_bad: impl Fn(&str) -> bool,
        budget: usize,
    ) -> Vec<TokenId> {
        let vocab = self.automaton.vocab();
        let ok = |ts: &[TokenId]| {
            let mut m = self.automaton.matcher();
            ts.iter().all(|&t| m.accept(t).is_ok())
                && (m.can_end() || m.is_finished())
                && std::str::from_utf8(&vocab.decode(ts)).is_ok_and(&still_bad)
        };
        let mut cur = tokens.to_vec();
        let mut chunk = (cur.len() / 2).max(1);
        let mut tries = 0;
        while chunk >= 1 && tries < budget {
            let mut i = 0;
            let mut removed = false;
            while i + chunk <= cur.len() && tries < budget {
                let cand: Vec<TokenId> =
                    cur[..i].iter().chain(&cur[i + chunk..]).copied().collect();
                tries += 1;
                if ok(&cand) {
                    cur = cand;
                    removed = true;
                } else {
                    i += chunk;
                }
            }
            if !removed {
                if chunk == 1 {
                    break;
                }
                chunk /= 2;
            }
        }
        cur
    }
}

/// How far [`Fuzzer`]'s steered symbols were fed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fed {
    /// All of them.
    All,
    /// Up to one the budget or the distinct-calls rule removed (the walk goes on at random).
    Refused,
    /// Up to a violation (recorded).
    Violation,
}
