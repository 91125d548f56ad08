//! Per-sequence matchers: one sequence's position in a [`TokenAutomaton`]'s grammar, its masks
//! (under a token budget when one is set), accepted tokens and rollback.
//!
//! Trade-offs: a matcher holds its states (the grammar stacks it may be in) and one snapshot of
//! them per accepted token for rollback, bounded by [`Matcher::set_max_rollback`]; everything
//! that can be shared (walks, whole masks, completion costs) lives in the automaton.

use super::distinct::{CallLog, Ctx, FilterScratch};
use super::{read, FullEntry, TokenAutomaton, TokenMask, DEFAULT_MAX_ROLLBACK, FULL_CACHE_ENTRIES};
use crate::automaton::complete::INF;
use crate::automaton::{advance, advance_traced, Stack, Sym, SPECIAL};
use crate::error::{Error, Result};
use crate::grammar::DistinctCalls;
use crate::vocab::TokenId;
use std::collections::VecDeque;
use std::sync::Arc;

/// One sequence's position in the grammar: fill masks, accept tokens, roll back, fork (clone).
///
/// Memory: one state snapshot per accepted token, for [`Matcher::rollback`], at most
/// [`Matcher::set_max_rollback`] of them (default [`DEFAULT_MAX_ROLLBACK`]), plus the accepted
/// token ids.
#[derive(Clone, Debug)]
pub struct Matcher {
    auto: TokenAutomaton,
    states: Vec<Stack>,
    /// The states before each of the last `history.len()` accepted tokens, oldest first.
    history: VecDeque<Vec<Stack>>,
    max_rollback: usize,
    tokens: Vec<TokenId>,
    finished: bool,
    /// Token budget: tokens left when it was set, and how many tokens were accepted then.
    budget: Option<(usize, usize)>,
    /// Masks in which the budget removed tokens the grammar alone allows.
    steered: u64,
    /// What a call that repeats an earlier one does ([`Matcher::set_distinct_calls`]).
    distinct: DistinctCalls,
    /// The calls so far, for `distinct` (built lazily; dropped on rollback).
    log: Option<Box<CallLog>>,
    /// Whether an accepted token may have completed a call ([`super::distinct::may_end_call`];
    /// true errs on the safe side). Until then no call is complete and the log is not fed:
    /// the parser's work per token is most of a dialect's step.
    call_may_be_done: bool,
    /// Whether an accepted token may have completed a call since the log was last fed: until
    /// then the log's completed calls are current even where its last tokens are not fed.
    ended_since_sync: bool,
    /// The cache entry of the current states' grammar mask, once filled.
    entry: Option<Arc<FullEntry>>,
    /// The base mask of the last cache entry used: the first base a new entry is compared
    /// with (see [`FullEntry`]).
    near: Option<Arc<TokenMask>>,
    /// After an accept: the cache entry of the new states, where the entry before it had
    /// the accepted token linked (a hit without hashing the states) ...
    linked: Option<Arc<FullEntry>>,
    /// ... else the entry before and the token, to link once the new states' entry is known.
    link_from: Option<(Arc<FullEntry>, TokenId)>,
    /// Scratch masks of the distinct-calls filter, reused between masks.
    filter_scratch: FilterScratch,
    /// Masks where the distinct-calls rule gave way (see `distinct_gave_up`).
    distinct_gave_up: u64,
}

impl Matcher {
    /// A matcher of `auto` at the start of an output.
    pub(super) fn at_start(auto: TokenAutomaton) -> Matcher {
        let states = vec![auto.g().start_stack()];
        let distinct = auto.g().distinct_calls;
        Matcher {
            auto,
            states,
            history: VecDeque::new(),
            max_rollback: DEFAULT_MAX_ROLLBACK,
            tokens: Vec::new(),
            finished: false,
            budget: None,
            steered: 0,
            distinct,
            log: None,
            call_may_be_done: false,
            ended_since_sync: false,
            entry: None,
            near: None,
            linked: None,
            link_from: None,
            filter_scratch: FilterScratch::default(),
            distinct_gave_up: 0,
        }
    }

    /// What a call that would repeat an earlier call of the output (same function, arguments
    /// equal as JSON values: key order, spelling and number form aside) does; `true` is
    /// [`DistinctCalls::End`] and `false` [`DistinctCalls::Allow`]. The default is the
    /// grammar's ([`crate::DialectOptions::distinct_calls`], `End`).
    ///
    /// - `End`: the repeat may complete only where the output can then end with no further
    ///   call, within the budget; after it, no call may start (the parsers leave it out).
    /// - `Bend`: a call may not complete as a repeat. See the `distinct` module notes in
    ///   [`crate::mask`]: where the bounded check cannot tell, a token is removed; where that
    ///   would empty the mask, the tokens along the completion that admitted the last token
    ///   are allowed.
    /// - `Allow`: the mask is the grammar's (and the budget's) alone.
    ///
    /// Where the rule would leave no token at all, it gives way for the rest of the output
    /// ([`Matcher::distinct_gave_up`]).
    pub fn set_distinct_calls(&mut self, rule: impl Into<DistinctCalls>) {
        let rule = rule.into();
        if rule != self.distinct {
            if !self.tokens.is_empty() {
                // Tokens accepted under another rule were not watched for ended calls.
                self.call_may_be_done = true;
                self.ended_since_sync = true;
            }
            // The log closes on a repeat or breaks, as the rule says: built again.
            self.log = None;
        }
        self.distinct = rule;
    }

    /// What a repeated call does ([`Matcher::set_distinct_calls`]).
    pub fn distinct_calls(&self) -> DistinctCalls {
        self.distinct
    }

    /// True when some rule on repeated calls applies (not [`DistinctCalls::Allow`]).
    fn distinct_on(&self) -> bool {
        self.distinct != DistinctCalls::Allow
    }

    /// How many masks the distinct-calls rule gave way in: its bounded check found no way on
    /// that ends with distinct calls (within the budget), so the mask was left the grammar's
    /// and the budget's, never empty; from the first one on, a repeated call may come.
    pub fn distinct_gave_up(&self) -> u64 {
        self.distinct_gave_up
    }

    /// True when the distinct-calls rule can remove tokens here (on, and some call is
    /// complete): [`Matcher::is_allowed`] does not apply it, only masks do.
    pub(crate) fn distinct_active(&mut self) -> bool {
        !self.finished && self.distinct_gave_up == 0 && self.calls_done()
    }

    /// True when the rule is on and some call of the output is complete.
    fn calls_done(&mut self) -> bool {
        self.call_may_be_done && self.sync_log().is_some_and(CallLog::has_calls)
    }

    /// The log of calls, fed up to the accepted tokens; `None` when the rule cannot apply
    /// (off, or a grammar without calls).
    fn sync_log(&mut self) -> Option<&CallLog> {
        if !self.distinct_on() || self.auto.g().functions.is_empty() {
            return None;
        }
        let end = self.distinct == DistinctCalls::End;
        let log = self
            .log
            .get_or_insert_with(|| Box::new(CallLog::new(self.auto.grammar(), end)));
        let vocab = self.auto.shared.vocab.clone();
        while log.fed < self.tokens.len() {
            let t = self.tokens[log.fed];
            log.push_token(&vocab, t);
        }
        self.ended_since_sync = false;
        Some(&**log)
    }

    /// The limit on a completion's tokens after the next token (end-of-generation aside).
    fn distinct_limit(&self) -> u32 {
        match self.tokens_left() {
            Some(left) if left >= 2 => (left - 2).min(INF as usize - 1) as u32,
            Some(_) => 0,
            None => INF - 1,
        }
    }

    /// Removes from `mask` the tokens after which no output with distinct calls fits.
    fn filter_distinct(&mut self, mask: &mut TokenMask) {
        if self.finished {
            return;
        }
        let limit = self.distinct_limit();
        if self.distinct_gave_up > 0 || !self.call_may_be_done {
            return;
        }
        if self.tokens_left().is_none() && self.no_call_ends_here(mask) {
            return;
        }
        if !self.calls_done() {
            return;
        }
        let mut scratch = std::mem::take(&mut self.filter_scratch);
        let Some(log) = self.log.as_deref() else {
            return;
        };
        let ctx = Ctx::new(&self.auto, log, limit);
        let next = |t: TokenId| self.next_states(t).ok();
        let end = self.distinct == DistinctCalls::End;
        let remove = if end {
            ctx.filter_end(&self.states, mask, &next, &mut scratch)
        } else {
            ctx.filter(&self.states, mask, &next, &mut scratch)
        };
        self.filter_scratch = scratch;
        if remove.is_empty() {
            return;
        }
        if end && remove.len() == mask.count() {
            // No token completes a repeat and then ends, nor goes on without one (a grammar
            // that needs more calls after it): the rule gives way here, counted.
            self.distinct_gave_up += 1;
            return;
        }
        let empties = remove.len() == mask.count();
        let before = if empties { Some(mask.clone()) } else { None };
        for t in remove {
            mask.words[t as usize / 64] &= !(1u64 << (t % 64));
        }
        if let Some(before) = before {
            // The witness: the completion that admitted the last token (the same search from
            // here, one token more, finds it again). The tokens that spell a prefix of it are
            // allowed: after each the rest of it ends the output with distinct calls, within
            // the budget. Where it is not found (a bound hit), the mask stays empty.
            let wide = Ctx::new(&self.auto, log, limit.saturating_add(1).min(INF - 1));
            let vocab = &self.auto.shared.vocab;
            match wide.search(&self.states, log.clone()) {
                Some(path) if path.is_empty() => {
                    // Here is already a goal: a value of a call made before that one more
                    // character makes new. The one-byte tokens that pass the rule's own check
                    // (each names a completion).
                    let fresh = Ctx::new(&self.auto, log, limit);
                    for t in before.iter() {
                        if vocab.token_bytes(t).is_some_and(|b| b.len() == 1)
                            && self
                                .next_states(t)
                                .is_ok_and(|nx| fresh.token_ok(t, nx.as_deref()))
                        {
                            mask.set(t);
                        }
                    }
                }
                Some(path) => {
                    // The first tokens of the path's shortest spellings.
                    let bytes: Vec<u8> = path.iter().map(|&b| b as u8).collect();
                    for k in super::distinct::first_tokens(vocab, &bytes) {
                        if let Some(t) = vocab.token_id(&bytes[..k]) {
                            if before.is_allowed(t) && !vocab.eos_tokens().contains(&t) {
                                mask.set(t);
                            }
                        }
                    }
                }
                None => {}
            }
            if mask.count() == 0 {
                // No way on found within the bounds: the rule gives way here (the grammar's
                // and the budget's mask, never a dead end), counted.
                *mask = before;
                self.distinct_gave_up += 1;
            }
        }
    }

    /// True when, with no token budget, the distinct-calls rule removes nothing from `mask`
    /// (the grammar's mask) without the call log fed up to here: no call ended since it was
    /// last fed (so its completed calls are current), every stack is in a call of a function
    /// not called yet ([`super::distinct::in_fresh_calls`]), and every token of the mask keeps
    /// new calls new ([`TokenAutomaton::calls_stay_new`], kept with the mask's cache entry).
    /// Inside a new call, most masks.
    fn no_call_ends_here(&self, mask: &TokenMask) -> bool {
        let Some(log) = self.log.as_deref() else {
            return false;
        };
        if self.ended_since_sync
            || !super::distinct::in_fresh_calls(self.auto.g(), log, &self.states)
        {
            return false;
        }
        // With an entry, `mask` is its mask (filled from it just before).
        match &self.entry {
            Some(e) => *e
                .calls_stay_new
                .get_or_init(|| self.auto.calls_stay_new(&self.states, mask)),
            None => self.auto.calls_stay_new(&self.states, mask),
        }
    }

    /// Sets how many tokens the output may still take, counting the end-of-generation token
    /// (`None`: no limit). From then on [`Matcher::fill_mask`], [`Matcher::is_allowed`] and
    /// [`Matcher::accept`] allow a token only if, after it, a complete output and an
    /// end-of-generation token still fit in the tokens left, so that whatever the model
    /// chooses among the allowed tokens, the output ends complete within the budget.
    ///
    /// Lengths are counted in tokens of the vocabulary: from each position, one shortest way to
    /// finish (in bytes) is spelled with the fewest tokens, each lexeme (string, number,
    /// literal) and key on its own, special tokens one each. That is an upper bound on what the
    /// model needs, and a consistent one (the first token of that spelling is always allowed
    /// and lowers the bound by one), so the mask is never empty before the end. The bound is
    /// about a third of the byte count on JSON calls with Llama 3 or Gemma 3 vocabularies.
    ///
    /// Any vocabulary takes a budget: a byte that no single-byte token spells
    /// ([`TokenAutomaton::bytes_without_token`], e.g. `04` or `f5`-`ff` in SmolLM2's) is never
    /// counted as one token; a way that needs it alone costs too much for any budget, so the
    /// mask never offers it, and where a longer token spells it, that token counts. Where no
    /// complete output from here can be spelled at all,
    /// [`Error::BudgetUnsupported`] (nothing changed) names a byte the shortest one needs and
    /// the text before it; [`Error::BudgetTooSmall`] (nothing changed) when the shortest
    /// complete output from here does not fit in `budget`. The budget goes down by one per
    /// accepted token and back up on [`Matcher::rollback`].
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use callmask::{CompileOptions, Grammar, TokenAutomaton, TokenMask, Vocab};
    /// // 256 single-byte tokens, then an end-of-generation token.
    /// let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    /// tokens.push(b"</s>".to_vec());
    /// let mut special = vec![false; 256];
    /// special.push(true);
    /// let vocab = Arc::new(Vocab::from_parts(tokens, special, vec![256])?);
    /// let schema = r#"{"type": "array", "items": {"type": "integer"}}"#;
    /// let grammar = Grammar::from_json_schema_str(schema, &CompileOptions::default())?;
    /// let mut m = TokenAutomaton::new(&grammar, vocab.clone())?.matcher();
    /// assert!(m.set_token_budget(Some(2)).is_err()); // "[]" + end needs 3
    /// m.set_token_budget(Some(3))?;
    /// let mut mask = TokenMask::new(vocab.len());
    /// m.fill_mask(&mut mask);
    /// assert_eq!(mask.count(), 1); // only "["
    /// # Ok::<(), callmask::Error>(())
    /// ```
    pub fn set_token_budget(&mut self, budget: Option<usize>) -> Result<()> {
        let Some(b) = budget else {
            self.budget = None;
            return Ok(());
        };
        if !self.finished {
            let need = self.tokens_to_end();
            if need >= INF {
                if let Some((byte, after)) = self.auto.unspellable(&self.states) {
                    return Err(Error::BudgetUnsupported { byte, after });
                }
            }
            let need = if need >= INF {
                usize::MAX
            } else {
                need as usize + 1
            };
            if need > b {
                return Err(Error::BudgetTooSmall {
                    budget: b,
                    needed: need,
                });
            }
        }
        self.budget = Some((b, self.tokens.len()));
        Ok(())
    }

    /// The states masks are computed from: the matcher's, with each full set of a call
    /// union's stacks as its merged frame (`GrammarInner::merge_call_stacks`: the same
    /// tokens and costs, one walk instead of one per call).
    fn mask_states(&self) -> std::borrow::Cow<'_, [Stack]> {
        match self.auto.g().merge_call_stacks(&self.states) {
            Some(merged) => std::borrow::Cow::Owned(merged),
            None => std::borrow::Cow::Borrowed(&self.states),
        }
    }

    /// Tokens left in the budget, the end-of-generation token included (`None`: no budget).
    pub fn tokens_left(&self) -> Option<usize> {
        self.budget
            .map(|(b, at)| (b + at).saturating_sub(self.tokens.len()))
    }

    /// How many masks so far had tokens removed by the budget (tokens the grammar alone
    /// allows but after which no complete output would fit): how often the budget steered.
    pub fn budget_steered(&self) -> u64 {
        self.steered
    }

    /// The fewest tokens (end-of-generation included) that a complete output needs from here,
    /// as the budget counts them (see [`Matcher::set_token_budget`]; `None`: none is
    /// reachable, or finished).
    pub fn min_tokens_to_end(&self) -> Option<usize> {
        if self.finished {
            return None;
        }
        let r = self.tokens_to_end();
        (r < INF).then_some(r as usize + 1)
    }

    /// The fewest tokens (end-of-generation aside) that a complete output needs from here, as
    /// the budget counts them: the completer's count, or, where that is infinite (the way it
    /// counts needs a byte without a single-byte token, which a longer token may spell), one
    /// more than the least count after an allowed token. Both are consistent: the first token
    /// of the way counted is allowed and leaves one less. `INF`: none.
    fn tokens_to_end(&self) -> u32 {
        let r = self.auto.completer().remaining_any(&self.states);
        if r < INF {
            return r;
        }
        let costs = self.auto.state_costs(&self.mask_states());
        costs
            .groups
            .iter()
            .find(|(c, set)| *c < INF && !set.is_empty())
            .map_or(INF, |(c, _)| c.saturating_add(1).min(INF))
    }

    /// Fills `mask` under the budget where it binds (tokens the grammar allows but after which
    /// no complete output fits); returns false, leaving `mask` alone, where it does not.
    fn fill_budget_mask(&mut self, left: usize, mask: &mut TokenMask) -> bool {
        let auto = self.auto.clone();
        let eos = auto.shared.vocab.eos_tokens();
        let can_end = self.can_end();
        let set_eos = |mask: &mut TokenMask| {
            if can_end {
                for &t in eos {
                    if (t as usize) < mask.len() {
                        mask.set(t);
                    }
                }
            }
        };
        if left <= 1 {
            // Room for the end only (or for nothing): rare, so the grammar's mask is computed
            // to count whether the budget steered.
            self.fill_grammar_mask(mask);
            let before = mask.count();
            mask.clear();
            if left == 1 {
                set_eos(mask);
            }
            if mask.count() < before {
                self.steered += 1;
            }
            return true;
        }
        let limit = (left - 2).min(INF as usize - 1) as u32;
        let costs = self.auto.state_costs(&self.mask_states());
        if costs.max <= limit {
            return false;
        }
        // The groups hold every token the grammar allows (end-of-generation aside), so the
        // grammar's own mask is not needed: the groups within the limit are the mask, and the
        // others tell whether the budget removed anything.
        let vocab_len = self.auto.shared.vocab.len();
        if mask.len() != vocab_len {
            *mask = TokenMask::new(vocab_len);
        }
        mask.clear();
        let mut over = TokenMask::new(vocab_len);
        for (c, set) in &costs.groups {
            if *c <= limit {
                set.or_into(mask);
            } else {
                set.or_into(&mut over);
            }
        }
        if over.words.iter().zip(&mask.words).any(|(o, m)| o & !m != 0) {
            self.steered += 1;
        }
        set_eos(mask);
        true
    }

    /// Sets `mask` to the tokens allowed next (end-of-generation tokens only where the output
    /// may end; nothing once finished).
    pub fn fill_mask(&mut self, mask: &mut TokenMask) {
        let budgeted = match self.tokens_left() {
            Some(left) => !self.finished && self.fill_budget_mask(left, mask),
            None => false,
        };
        if !budgeted {
            self.fill_grammar_mask(mask);
        }
        if self.distinct_on() {
            self.filter_distinct(mask);
        }
    }

    /// [`Matcher::fill_mask`] without the budget.
    fn fill_grammar_mask(&mut self, mask: &mut TokenMask) {
        let vocab_len = self.auto.shared.vocab.len();
        if mask.len() != vocab_len {
            *mask = TokenMask::new(vocab_len);
        }
        if self.finished {
            mask.clear();
            return;
        }
        if let Some(e) = self.linked.take() {
            e.write_into(mask);
            self.near = e.base().cloned();
            self.entry = Some(e);
            return;
        }
        let link_from = self.link_from.take();
        let hit = read(&self.auto.shared.full).get(&self.states).cloned();
        if let Some(e) = hit {
            e.write_into(mask);
            if let Some((from, token)) = link_from {
                from.link(token, &e);
            }
            self.near = e.base().cloned();
            self.entry = Some(e);
            return;
        }
        self.auto.fill_states_mask(&self.mask_states(), mask);
        if read(&self.auto.shared.full).len() >= FULL_CACHE_ENTRIES {
            return;
        }
        let first = self.tokens.is_empty();
        let e = Arc::new(self.auto.full_entry(mask, self.near.as_ref(), first));
        let mut full = self
            .auto
            .shared
            .full
            .write()
            .unwrap_or_else(|e| e.into_inner());
        if full.len() < FULL_CACHE_ENTRIES {
            full.insert(self.states.clone(), e.clone());
            drop(full);
            if let Some((from, token)) = link_from {
                from.link(token, &e);
            }
            self.near = e.base().cloned();
            self.entry = Some(e);
        }
    }

    /// Masks a row of logits (one per vocabulary token) in place: disallowed tokens get
    /// `f32::NEG_INFINITY`. For engines other than llama.cpp; `scratch` is reused between calls.
    pub fn apply(&mut self, logits: &mut [f32], scratch: &mut TokenMask) {
        self.fill_mask(scratch);
        for (i, l) in logits.iter_mut().enumerate() {
            if i >= scratch.len() || !scratch.is_allowed(i as TokenId) {
                *l = f32::NEG_INFINITY;
            }
        }
    }

    /// How many of `tokens`, from the first, would be accepted one after the other (the
    /// longest accepted prefix), without changing the matcher. For speculative decoding: the
    /// engine keeps that many draft tokens.
    pub fn validate_tokens(&self, tokens: &[TokenId]) -> usize {
        let mut m = self.clone();
        m.max_rollback = 0;
        m.history.clear();
        tokens.iter().take_while(|&&t| m.accept(t).is_ok()).count()
    }

    /// Fills `out` with the allowed next tokens in the 32-bit layout of
    /// [`TokenMask::write_u32_words`]; `scratch` is reused between calls (any length: it is
    /// resized to the vocabulary).
    pub fn fill_u32_words(&mut self, out: &mut [u32], scratch: &mut TokenMask) -> Result<()> {
        let n = self.auto.shared.vocab.len();
        if scratch.len() != n {
            *scratch = TokenMask::new(n);
        }
        self.fill_mask(scratch);
        scratch.write_u32_words(out)
    }

    /// True when `token` may come next (checks that one token only: cheaper than a mask).
    /// Once a call is complete, the distinct-calls rule too, by its search alone (so it may
    /// refuse a token that a mask allows by a cheaper rule, never the other way round).
    pub fn is_allowed(&self, token: TokenId) -> bool {
        let Ok(next) = self.next_states(token) else {
            return false;
        };
        if !self.distinct_on()
            || self.finished
            || self.distinct_gave_up > 0
            || self.auto.g().functions.is_empty()
            || !self.call_may_be_done
        {
            return true;
        }
        let vocab = &self.auto.shared.vocab;
        let mut log = match &self.log {
            Some(l) => (**l).clone(),
            None => CallLog::new(self.auto.grammar(), self.distinct == DistinctCalls::End),
        };
        while log.fed < self.tokens.len() {
            log.push_token(vocab, self.tokens[log.fed]);
        }
        if !log.has_calls() {
            return true;
        }
        let ctx = Ctx::new(&self.auto, &log, self.distinct_limit());
        match self.distinct {
            DistinctCalls::End => ctx.end_token_ok(&self.states, token, next.as_deref()),
            _ => ctx.token_ok(token, next.as_deref()),
        }
    }

    /// True when the grammar alone, without the budget, allows `token` next.
    pub fn is_allowed_by_grammar(&self, token: TokenId) -> bool {
        self.next_states_grammar(token).is_ok()
    }

    /// [`Matcher::next_states_grammar`], then the budget: [`Error::OverBudget`] for a token
    /// after which no complete output fits in the tokens left.
    pub(crate) fn next_states(&self, token: TokenId) -> Result<Option<Vec<Stack>>> {
        let next = self.next_states_grammar(token)?;
        self.within_budget(token, next)
    }

    /// `next`, the states after `token` by the grammar, where they fit the budget (see
    /// [`Matcher::next_states`]).
    fn within_budget(
        &self,
        token: TokenId,
        next: Option<Vec<Stack>>,
    ) -> Result<Option<Vec<Stack>>> {
        let Some(left) = self.tokens_left() else {
            return Ok(next);
        };
        let fits = match &next {
            None => left >= 1,
            Some(s) => {
                let r = self.auto.completer().remaining_any(s) as usize;
                left >= 2 && r <= left - 2
            }
        };
        if fits {
            Ok(next)
        } else if next.is_some()
            && self.auto.shared.vocab.eos_tokens().contains(&token)
            && self.can_end()
        {
            // A token that is both a special token the grammar takes and an end-of-generation
            // token: where its continuation does not fit, it ends the output (the mask allows
            // it for that reason, and the engine stops there).
            Ok(None)
        } else {
            let vocab = &self.auto.shared.vocab;
            Err(Error::OverBudget {
                token,
                text: String::from_utf8_lossy(vocab.token_bytes(token).unwrap_or_default())
                    .into_owned(),
                left,
            })
        }
    }

    /// The states after `token` (`None`: it ends the output), without accepting it, by the
    /// grammar alone.
    fn next_states_grammar(&self, token: TokenId) -> Result<Option<Vec<Stack>>> {
        self.step_token(token, None)
    }

    /// [`Matcher::next_states_grammar`]; with `ended`, also sets it when a call may have
    /// ended along the way ([`super::distinct::leaves_call`] on every step).
    fn step_token(
        &self,
        token: TokenId,
        mut ended: Option<&mut bool>,
    ) -> Result<Option<Vec<Stack>>> {
        let vocab = &self.auto.shared.vocab;
        let forbidden = || Error::TokenForbidden {
            token,
            text: String::from_utf8_lossy(vocab.token_bytes(token).unwrap_or_default())
                .into_owned(),
        };
        if token as usize >= vocab.len() {
            return Err(Error::TokenOutOfVocabulary {
                token,
                vocab_size: vocab.len(),
            });
        }
        if self.finished {
            return Err(forbidden());
        }
        let g = self.auto.g();
        let mut step = |cur: &[Stack], sym: Sym, next: &mut Vec<Stack>| match ended.as_deref_mut() {
            Some(flag) => advance_traced(g, cur, sym, next, &mut Vec::new(), |s, t| {
                *flag = *flag || super::distinct::leaves_call(g, s, t);
            }),
            None => advance(g, cur, sym, next),
        };
        if let Some(k) = self.auto.special_index(token) {
            let mut next = Vec::new();
            step(&self.states, SPECIAL + k as Sym, &mut next);
            if !next.is_empty() {
                return Ok(Some(next));
            }
        }
        if vocab.eos_tokens().contains(&token) {
            return if self.can_end() {
                Ok(None)
            } else {
                Err(forbidden())
            };
        }
        if vocab.is_special(token) {
            return Err(forbidden());
        }
        let bytes = vocab.token_bytes(token).unwrap_or_default();
        if bytes.is_empty() {
            return Err(forbidden());
        }
        let mut cur = self.states.clone();
        let mut next = Vec::new();
        for &b in bytes {
            step(&cur, b as Sym, &mut next);
            if next.is_empty() {
                return Err(forbidden());
            }
            std::mem::swap(&mut cur, &mut next);
        }
        Ok(Some(cur))
    }

    /// Accepts `token`, or returns a typed error (and changes nothing) when it is not allowed.
    pub fn accept(&mut self, token: TokenId) -> Result<()> {
        // Watch for ended calls while the log may be left unfed (see `ended_since_sync`).
        let watch = self.distinct_on()
            && !(self.call_may_be_done && self.ended_since_sync)
            && !self.auto.g().functions.is_empty();
        let mut ended = false;
        let next = self.step_token(token, watch.then_some(&mut ended))?;
        let next = self.within_budget(token, next)?;
        // Watched and seen to end no call, a token completes no call, so repeats none: the
        // log need not be fed for it.
        let completes_none = watch && !ended && next.is_some();
        if !self.finished && self.distinct_gave_up == 0 && !completes_none && self.calls_done() {
            // A token that completes a call equal to an earlier one (or ends the output on
            // one) is refused whatever the mask was.
            if let Some(log) = self.log.as_deref() {
                let ok = match &next {
                    None => log.may_end(),
                    Some(_) => {
                        let mut l = log.clone();
                        l.push_token(&self.auto.shared.vocab, token);
                        !l.broken
                    }
                };
                if !ok {
                    let vocab = &self.auto.shared.vocab;
                    return Err(Error::TokenForbidden {
                        token,
                        text: String::from_utf8_lossy(vocab.token_bytes(token).unwrap_or_default())
                            .into_owned(),
                    });
                }
            }
        }
        if ended {
            self.call_may_be_done = true;
            self.ended_since_sync = true;
        }
        let before = self.entry.take();
        self.linked = None;
        self.link_from = None;
        let prev = match next {
            Some(s) => {
                if let Some(e) = before {
                    match e.next(token) {
                        Some(n) => self.linked = Some(n),
                        None => self.link_from = Some((e, token)),
                    }
                }
                std::mem::replace(&mut self.states, s)
            }
            None => {
                self.finished = true;
                self.states.clone()
            }
        };
        if self.max_rollback > 0 {
            if self.history.len() >= self.max_rollback {
                self.history.pop_front();
            }
            self.history.push_back(prev);
        }
        self.tokens.push(token);
        Ok(())
    }

    /// Keeps the states needed to roll back at most `n` tokens (dropping older snapshots now);
    /// [`Matcher::rollback`] of more is an [`Error::Rollback`]. `usize::MAX` keeps every one
    /// (memory then grows with the output), 0 none.
    pub fn set_max_rollback(&mut self, n: usize) {
        self.max_rollback = n;
        while self.history.len() > n {
            self.history.pop_front();
        }
    }

    /// How many tokens [`Matcher::rollback`] can undo now.
    pub fn rollback_available(&self) -> usize {
        self.history.len()
    }

    /// True when the output may end here (end-of-generation tokens are allowed).
    pub fn can_end(&self) -> bool {
        !self.finished && self.states.iter().any(|s| self.auto.g().can_end(s))
    }

    /// True once an end-of-generation token was accepted, or when nothing else may follow.
    pub fn is_finished(&self) -> bool {
        if self.finished {
            return true;
        }
        // Complete and no byte can follow.
        let g = self.auto.g();
        self.can_end()
            && (0..=255u8).all(|b| {
                let mut out = Vec::new();
                advance(g, &self.states, b as Sym, &mut out);
                out.is_empty()
            })
    }

    /// Undoes the last `n` accepted tokens: at most the accepted ones, and at most the
    /// matcher's rollback window ([`Matcher::set_max_rollback`]); beyond, an
    /// [`Error::Rollback`] that changes nothing.
    pub fn rollback(&mut self, n: usize) -> Result<()> {
        if n > self.history.len() {
            return Err(Error::Rollback {
                requested: n,
                available: self.history.len(),
            });
        }
        if n == 0 {
            return Ok(());
        }
        let keep = self.history.len() - n;
        self.states = self.history[keep].clone();
        self.history.truncate(keep);
        self.tokens.truncate(self.tokens.len() - n);
        self.finished = false;
        self.log = None;
        self.ended_since_sync = true;
        self.entry = None;
        self.linked = None;
        self.link_from = None;
        Ok(())
    }

    /// A hash of the matcher's position in the grammar: equal positions hash equally (for
    /// coverage-guided fuzzing and deduplication; collisions are possible but rare).
    pub fn state_hash(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.states.hash(&mut h);
        self.finished.hash(&mut h);
        h.finish()
    }

    /// The current position: the live stacks.
    pub(crate) fn states(&self) -> &[Stack] {
        &self.states
    }

    /// The tokens accepted so far.
    pub fn accepted_tokens(&self) -> &[TokenId] {
        &self.tokens
    }

    /// The automaton this matcher runs on.
    pub fn automaton(&self) -> &TokenAutomaton {
        &self.auto
    }
}

/// Fills one row of `rows` per matcher, in the 32-bit layout of
/// [`TokenMask::write_u32_words`]: row `i` is `rows[i * row_words..(i + 1) * row_words]` and
/// belongs to `matchers[i]` (`None` leaves its row untouched, for sequences without a grammar).
/// Rows are filled as [`map_rows`](super::map_rows) runs them: on the calling thread for
/// [`SERIAL_ROWS_BUDGET`](super::SERIAL_ROWS_BUDGET), the rest in parallel (rayon), so a batch
/// of cached masks never pays the hop to the pool and a batch of new ones is spread over it.
///
/// [`Error::BitmaskSize`] when `rows` is shorter than `matchers.len() * row_words` or a row is
/// too short for a matcher's vocabulary (the first such error; the other rows are filled).
pub fn fill_u32_rows(
    matchers: &mut [Option<&mut Matcher>],
    rows: &mut [u32],
    row_words: usize,
) -> Result<()> {
    fill_u32_rows_within(matchers, rows, row_words, super::SERIAL_ROWS_BUDGET)
}

/// [`fill_u32_rows`] with the calling thread's share bounded by `serial_budget`.
fn fill_u32_rows_within(
    matchers: &mut [Option<&mut Matcher>],
    rows: &mut [u32],
    row_words: usize,
    serial_budget: std::time::Duration,
) -> Result<()> {
    if matchers.is_empty() {
        return Ok(());
    }
    let need = matchers.len().saturating_mul(row_words);
    if rows.len() < need || row_words == 0 {
        return Err(Error::BitmaskSize {
            words: rows.len(),
            needed: need.max(1),
        });
    }
    let work: Vec<_> = matchers
        .iter_mut()
        .zip(rows.chunks_mut(row_words))
        .collect();
    let fill = |scratch: &mut TokenMask, (m, row): (&mut Option<&mut Matcher>, &mut [u32])| match m
    {
        Some(m) => m.fill_u32_words(row, scratch),
        None => Ok(()),
    };
    super::rows::map_rows_within(work, || TokenMask::new(0), fill, serial_budget)
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::{CompileOptions, Grammar};
    use crate::vocab::Vocab;
    use std::time::Duration;

    /// A string schema's automaton and outputs at different points: the start, inside the
    /// string, at its `maxLength`.
    fn automaton_and_outputs(n: usize) -> (TokenAutomaton, Vec<Vec<u8>>) {
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        tokens.push(Vec::new());
        let mut special = vec![false; 256];
        special.push(true);
        let vocab = Arc::new(Vocab::from_parts(tokens, special, vec![256]).unwrap());
        let schema = serde_json::json!({"type": "string", "maxLength": 20});
        let g = Grammar::from_json_schema(&schema, &CompileOptions::default()).unwrap();
        let outputs = (0..n)
            .map(|i| {
                if i % 3 == 0 {
                    return Vec::new();
                }
                let mut out = b"\"".to_vec();
                out.extend((0..i % 21).map(|k| b'a' + (k % 26) as u8));
                out
            })
            .collect();
        (TokenAutomaton::new(&g, vocab).unwrap(), outputs)
    }

    #[test]
    fn rows_filled_in_parallel_or_not_are_the_same() {
        let (auto, outputs) = automaton_and_outputs(40);
        let words = auto.vocab().len().div_ceil(32);
        let fill = |budget: Duration| {
            let mut ms: Vec<Matcher> = outputs
                .iter()
                .map(|out| {
                    let mut m = auto.matcher();
                    for &b in out {
                        m.accept(b as TokenId).unwrap();
                    }
                    m
                })
                .collect();
            let mut refs: Vec<Option<&mut Matcher>> = ms.iter_mut().map(Some).collect();
            refs[3] = None;
            let mut rows = vec![7u32; refs.len() * words];
            fill_u32_rows_within(&mut refs, &mut rows, words, budget).unwrap();
            rows
        };
        let serial = fill(Duration::MAX);
        let parallel = fill(Duration::ZERO);
        assert_eq!(serial, parallel);
        assert!(serial[3 * words..4 * words].iter().all(|&w| w == 7));
        let mut one = vec![0u32; words];
        let mut m = auto.matcher();
        for &b in &outputs[0] {
            m.accept(b as TokenId).unwrap();
        }
        m.fill_u32_words(&mut one, &mut TokenMask::new(0)).unwrap();
        assert_eq!(serial[..words], one[..]);
        assert_ne!(serial[..words], serial[words..2 * words]);
        assert_ne!(serial[words..2 * words], serial[20 * words..21 * words]);
    }
}
