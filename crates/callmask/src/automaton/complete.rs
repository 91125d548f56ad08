//! Shortest completions: how many more symbols a matcher position needs before the output may
//! end, and one shortest way to write them.
//!
//! The fuzzer walks the token masks at random for a while, then finishes the output along a
//! shortest completion, so that every walk ends in a complete output however deep it went.
//!
//! Lengths count symbols (a byte or a special token each) by default. A token budget counts
//! tokens instead ([`Completer::in_tokens`]): each lexeme's and key's rest is spelled with the
//! fewest vocabulary tokens along one fixed shortest way to write it, and the pieces are added
//! up. That is an upper bound on the tokens a complete output needs, and a consistent one: from
//! any position, the first token of its spelling leads to a position whose bound is at least one
//! lower. So a matcher that allows only tokens after which the bound still fits can always go
//! on, and ends within its budget (see `mask.rs`).
//!
//! Not every vocabulary has a token for every byte alone (SmolLM2's has none for `04`, `c0`,
//! `f5`-`ff`, ...). A byte without a single-byte token is never counted as one symbol or token:
//! a structural byte (an object's or array's open, close, comma or colon) without one makes
//! every way through it cost [`INF`], and keys and lexemes are spelled only with the tokens
//! there are (a lexeme's way avoids such bytes where it can, and goes through one only where a
//! longer token spells it). Every finite count is therefore spelled by real tokens, each of
//! which lowers it by one, and the argument above holds on any vocabulary; a position whose
//! count is infinite is one the budget never lets a matcher enter.

use super::{
    advance, extra_value, is_extra, ArrPhase, Frame, ObjPhase, RootPhase, Seen, Stack, Sym,
    NO_TRIE, SPECIAL,
};
use crate::grammar::dfa::{fresh, Dfa, StateId};
use crate::grammar::{Capture, GrammarInner, Node, NodeId, ObjectNode, Syntax};
use crate::vocab::Vocab;
use std::collections::HashSet;
use std::sync::{Arc, OnceLock};

/// The longest token looked for when spelling a completion in tokens (longer ones are ignored,
/// which only makes the bound less tight).
const LOOKAHEAD: usize = 64;

/// Most relaxation passes over the lexeme states whose ways need a byte without a single-byte
/// token (see [`LexWays::new`]).
const JUMP_PASSES: usize = 4;

/// Symbols tried first when steering.
const FIRST: &[u8] = b"\"}]),:[({'";

/// No completion.
pub(crate) const INF: u32 = u32::MAX / 4;

fn add(a: u32, b: u32) -> u32 {
    a.saturating_add(b).min(INF)
}

/// Shortest-completion lengths over one grammar (computed once, then read).
pub(crate) struct Completer {
    g: Arc<GrammarInner>,
    /// Per node: fewest symbols of a complete value.
    node_min: Vec<u32>,
    /// Per lexeme: per state, fewest symbols (or tokens) to an accepting state, and one
    /// shortest way there.
    lex_dist: Vec<OnceLock<LexWays>>,
    /// Per special token of the grammar: can it be written (the vocabulary has it)?
    special_ok: Vec<bool>,
    /// Count tokens of this vocabulary instead of symbols.
    tokens: Option<Arc<Vocab>>,
    /// Per node (objects only, when counting tokens): per key, per byte offset, the fewest
    /// tokens that spell the rest of the key.
    key_tokens: Vec<OnceLock<Vec<Vec<u32>>>>,
    /// Per byte: may it be written on its own, as one symbol (or one token)? A byte without
    /// a single-byte token is not: a way through it costs [`INF`] unless a longer token spells
    /// it (keys and lexemes only; see [`LexWays::new`]).
    usable: [bool; 256],
    /// Count only completions that start no call ([`Completer::without_calls`]).
    no_calls: bool,
}

impl Completer {
    /// Computes the shortest value of every node.
    pub(crate) fn new(g: Arc<GrammarInner>) -> Completer {
        let all = vec![true; g.specials.len()];
        Completer::with_specials(g, all)
    }

    /// Like [`Completer::new`], but special token `i` counts as writable only if
    /// `special_ok[i]` (a completion never goes through a special token the vocabulary lacks).
    pub(crate) fn with_specials(g: Arc<GrammarInner>, special_ok: Vec<bool>) -> Completer {
        Completer::build(g, special_ok, None, [true; 256])
    }

    /// Like [`Completer::with_specials`], but byte `b` counts as writable only if `usable[b]`
    /// (a completion never goes through a byte that no single-byte token spells).
    pub(crate) fn with_bytes(
        g: Arc<GrammarInner>,
        special_ok: Vec<bool>,
        usable: [bool; 256],
    ) -> Completer {
        Completer::build(g, special_ok, None, usable)
    }

    /// Like [`Completer::with_specials`], but lengths count tokens of `vocab` (a special token
    /// still counts one), and a byte that no single-byte token of `vocab` spells is written
    /// only inside longer tokens: see the module documentation.
    pub(crate) fn in_tokens(
        g: Arc<GrammarInner>,
        special_ok: Vec<bool>,
        vocab: Arc<Vocab>,
    ) -> Completer {
        let usable = single_byte_tokens(&vocab);
        Completer::build(g, special_ok, Some(vocab), usable)
    }

    fn build(
        g: Arc<GrammarInner>,
        special_ok: Vec<bool>,
        tokens: Option<Arc<Vocab>>,
        usable: [bool; 256],
    ) -> Completer {
        Completer::build_with(g, special_ok, tokens, usable, false)
    }

    /// Like [`Completer::in_tokens`], but a completion may start no new call (a call capture
    /// costs [`INF`]; the call a position is inside of is finished as usual): the cost of
    /// ending an output with the calls it has, for the distinct-calls rule of the matcher.
    pub(crate) fn without_calls(
        g: Arc<GrammarInner>,
        special_ok: Vec<bool>,
        vocab: Arc<Vocab>,
    ) -> Completer {
        let usable = single_byte_tokens(&vocab);
        Completer::build_with(g, special_ok, Some(vocab), usable, true)
    }

    fn build_with(
        g: Arc<GrammarInner>,
        special_ok: Vec<bool>,
        tokens: Option<Arc<Vocab>>,
        usable: [bool; 256],
        no_calls: bool,
    ) -> Completer {
        let mut c = Completer {
            no_calls,
            usable,
            special_ok,
            node_min: vec![INF; g.nodes.len()],
            lex_dist: (0..g.lexemes.len()).map(|_| OnceLock::new()).collect(),
            key_tokens: (0..g.nodes.len()).map(|_| OnceLock::new()).collect(),
            tokens,
            g,
        };
        let n_nodes = c.g.nodes.len();
        // Least fixpoint: every pass can only lower a value; a pass without change ends it.
        // Each pass settles at least one more node, so there are at most `nodes + 1` passes.
        for _ in 0..=n_nodes {
            let mut changed = false;
            for n in 0..n_nodes {
                let v = c.value_min(n as NodeId);
                if v < c.node_min[n] {
                    c.node_min[n] = v;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        c
    }

    /// The fewest symbols (or tokens) of the value of an extra key of `o` whose kind is not
    /// known yet: its costliest kind's, so that the count never falls short (see
    /// `ObjectNode::extra_kinds`).
    fn extra_value_min(&self, o: &ObjectNode) -> u32 {
        if o.extra_kinds.is_empty() {
            return o.additional.map_or(INF, |(_, v)| self.node_min[v as usize]);
        }
        o.extra_kinds
            .iter()
            .map(|&(_, v)| self.node_min[v as usize])
            .max()
            .unwrap_or(INF)
    }

    fn lex(&self, lex: u32, state: StateId) -> u32 {
        let d = self.lex_distances(lex);
        d.get(state as usize).copied().unwrap_or(u32::MAX).min(INF)
    }

    /// Per state of lexeme `lex`: fewest bytes (or tokens) to an accepting state (computed
    /// once).
    pub(crate) fn lex_distances(&self, lex: u32) -> &[u32] {
        &self.lex_ways(lex).cost
    }

    fn lex_ways(&self, lex: u32) -> &LexWays {
        self.lex_dist[lex as usize].get_or_init(|| {
            LexWays::new(
                &self.g.lexemes[lex as usize],
                self.tokens.as_deref(),
                &self.usable,
            )
        })
    }

    /// True when byte `b` may be written on its own (as one symbol, or one token).
    pub(crate) fn usable(&self, b: u8) -> bool {
        self.usable[b as usize]
    }

    /// Symbols (or tokens) that write structural byte `b` on its own: 1, or [`INF`] where no
    /// single-byte token spells it.
    fn byte(&self, b: u8) -> u32 {
        if self.usable[b as usize] {
            1
        } else {
            INF
        }
    }

    /// Symbols (or tokens) of `n` commas.
    fn commas(&self, n: u32) -> u32 {
        if n == 0 {
            0
        } else {
            self.byte(b',').saturating_mul(n).min(INF)
        }
    }

    /// Symbols (or tokens) of the byte between a key of `o` and its value (none when the key
    /// spelling includes it).
    fn colon(&self, o: &ObjectNode) -> u32 {
        o.syntax.colon.map_or(0, |c| self.byte(c))
    }

    /// The rest of an array frame in `phase` once its items in progress are done: `need` more
    /// items costing `items` in all, the commas before or between them, and the close.
    fn items_then_close(&self, syn: &Syntax, phase: ArrPhase, items: u32, need: u32) -> u32 {
        let close = self.byte(syn.close);
        match phase {
            ArrPhase::AfterOpen | ArrPhase::AfterComma if need == 0 => close,
            ArrPhase::AfterOpen | ArrPhase::AfterComma => {
                add(add(items, self.commas(need - 1)), close)
            }
            _ => add(add(items, self.commas(need)), close),
        }
    }

    /// Symbols (or tokens) that finish an `additionalProperties` key of `o` from state `state`
    /// of its lexeme `lex`, the key being neither listed nor one of the extra keys in `seen`
    /// (whose bytes so far are `seen`'s current extra key).
    fn extra_key_rest(&self, lex: u32, state: StateId, seen: &Seen) -> u32 {
        self.fresh_rest(lex, state, seen.current_extra(), seen.extra_done())
    }

    /// Symbols (or tokens) that finish a literal of lexeme `lex`, from `state` after its bytes
    /// `raw`, as a value not in `used` (sorted; see [`fresh::literal_value`]): a breadth-first
    /// search over the bytes to write (one symbol or token each), each followed by the lexeme's
    /// fixed shortest way, the first that ends fresh (or whose decoded prefix no used value
    /// has) and is cheapest. Writing along the way found lowers the count by at least one per
    /// token, so the count stays consistent. `INF` when no fresh value can be written.
    pub(crate) fn fresh_rest(&self, lex: u32, state: StateId, raw: &[u8], used: &[Vec<u8>]) -> u32 {
        if used.is_empty() {
            return self.lex(lex, state);
        }
        self.fresh_way(lex, state, raw, used).0
    }

    /// [`Completer::fresh_rest`], and the value (decoded) of the way it counts, if any.
    fn fresh_way(
        &self,
        lex: u32,
        state: StateId,
        raw: &[u8],
        used: &[Vec<u8>],
    ) -> (u32, Option<Vec<u8>>) {
        let dfa = &self.g.lexemes[lex as usize];
        let ways = self.lex_ways(lex);
        let mut best = (INF, None);
        let mut visited = HashSet::new();
        let mut level = vec![(state, raw.to_vec())];
        let mut depth = 0u32;
        while !level.is_empty() && depth < best.0 {
            let mut next_level = Vec::new();
            for (s, r) in level {
                let mut whole = r.clone();
                let finished = ways.finish(dfa, s, &mut whole);
                let value = fresh::literal_value(&whole);
                let fresh_way = finished && used.binary_search(&value).is_err();
                let prefix = fresh::decoded_prefix(&r);
                if fresh_way || (finished && !fresh::some_begins_with(used, &prefix.value)) {
                    let c = add(depth, self.lex(lex, s));
                    if c < best.0 {
                        best = (c, Some(value));
                    }
                    continue;
                }
                if visited.len() >= fresh::SEARCH_LIMIT || !visited.insert((s, prefix)) {
                    continue;
                }
                // One symbol (or token) per byte: only the bytes written on their own.
                for b in (0..=255u8).filter(|&b| self.usable[b as usize]) {
                    let n = dfa.next(s, b);
                    if n != Dfa::DEAD && ways.bytes[n as usize] != u32::MAX {
                        let mut r2 = r.clone();
                        r2.push(b);
                        next_level.push((n, r2));
                    }
                }
            }
            level = next_level;
            depth += 1;
        }
        best
    }

    /// [`Completer::rest`] of a `uniqueItems` array of strings (`ArrayNode::unique_strings`)
    /// with the strings `strings` written: the item in progress (as a fresh string), then the
    /// cheapest distinct fresh strings `minItems` still needs (one after a comma), their commas
    /// and the close. With an item in progress, which may end as any fresh string, one more is
    /// counted and the cheapest left out: never less than needed, and still lowered by every
    /// token along the way counted.
    fn rest_strings(
        &self,
        a: &crate::grammar::ArrayNode,
        phase: ArrPhase,
        count: u32,
        strings: Option<&super::Literals>,
    ) -> u32 {
        let mut used: Vec<Vec<u8>> = strings.map_or(Vec::new(), |x| x.done.to_vec());
        let (cnt, current) = match phase {
            ArrPhase::InString { lex, state } => {
                let raw = strings.map_or(&[][..], |x| &x.current[..]);
                (count + 1, Some(self.fresh_rest(lex, state, raw, &used)))
            }
            ArrPhase::Done => return 0,
            _ => (count, None),
        };
        let mut need = a.min_items.saturating_sub(cnt);
        if phase == ArrPhase::AfterComma && need == 0 {
            need = 1; // a comma promised an item
        }
        let take = if need > 0 && current.is_some() {
            need + 1
        } else {
            need
        };
        let mut costs = Vec::new();
        for _ in 0..take {
            let best = a
                .unique_strings
                .iter()
                .map(|&l| self.fresh_way(l, self.g.lexemes[l as usize].start(), b"", &used))
                .min_by_key(|w| w.0);
            match best {
                Some((c, Some(v))) if c < INF => {
                    costs.push(c);
                    let at = used.binary_search(&v).unwrap_or_else(|e| e);
                    used.insert(at, v);
                }
                _ => return INF,
            }
        }
        let skip = usize::from(take > need);
        let items = costs[skip..].iter().fold(0, |t, &c| add(t, c));
        add(
            current.unwrap_or(0),
            self.items_then_close(&a.syntax, phase, items, need),
        )
    }

    /// Symbols (or tokens) that write key `k` of object `node` from its byte `from` on.
    fn key_rest(&self, node: NodeId, o: &ObjectNode, k: u32, from: u32) -> u32 {
        let key = &o.keys[k as usize];
        let from = (from as usize).min(key.len());
        let Some(vocab) = &self.tokens else {
            let rest = &key[from..];
            return if rest.iter().all(|&b| self.usable[b as usize]) {
                rest.len() as u32
            } else {
                INF
            };
        };
        let costs = self.key_tokens[node as usize]
            .get_or_init(|| o.keys.iter().map(|k| spell(vocab, k)).collect());
        costs[k as usize][from]
    }

    /// Symbols of key `k` of object `node` with its colon and shortest value.
    fn entry(&self, node: NodeId, o: &ObjectNode, k: u32) -> u32 {
        add(
            add(self.key_rest(node, o, k, 0), self.colon(o)),
            self.node_min[o.values[k as usize] as usize],
        )
    }

    /// The shortest value of `node` from the current estimates of its children.
    fn value_min(&self, node: NodeId) -> u32 {
        let m = |n: NodeId| self.node_min[n as usize];
        match &self.g.nodes[node as usize] {
            Node::Lex(l) => self.lex(*l, self.g.lexemes[*l as usize].start()),
            Node::Object(o) if o.min_props > 0 => add(
                self.byte(o.syntax.open),
                self.close_object(node, o, &Seen::initial(o), false, 0),
            ),
            Node::Object(o) => {
                let mut total = add(
                    add(self.byte(o.syntax.open), self.byte(o.syntax.close)),
                    self.commas((o.required.len() as u32).saturating_sub(1)),
                );
                for &k in &o.required {
                    total = add(total, self.entry(node, o, k));
                }
                total
            }
            Node::Array(a) if a.contains.is_some() => add(
                self.byte(a.syntax.open),
                self.rest_with_contains(a, ArrPhase::AfterOpen, 0, 0),
            ),
            Node::Array(a) if !a.unique_strings.is_empty() => add(
                self.byte(a.syntax.open),
                self.rest_strings(a, ArrPhase::AfterOpen, 0, None),
            ),
            Node::Array(a) if !a.unique.is_empty() => add(
                self.byte(a.syntax.open),
                self.rest_unique(a, ArrPhase::AfterOpen, 0, 0),
            ),
            Node::Array(a) => {
                let mut total = add(
                    add(self.byte(a.syntax.open), self.byte(a.syntax.close)),
                    self.commas(a.min_items.saturating_sub(1)),
                );
                for i in 0..a.min_items {
                    total = add(total, a.item(i).map_or(INF, m));
                }
                total
            }
            Node::Union(alts) => alts.iter().map(|&a| m(a)).min().unwrap_or(INF),
            Node::Never => INF,
            Node::Seq(elems) => elems.iter().fold(0, |t, &e| add(t, m(e))),
            Node::Repeat { item, min, .. } => {
                if *min == 0 {
                    0
                } else {
                    m(*item).saturating_mul(*min).min(INF)
                }
            }
            Node::Capture(Capture::Call(_), _) if self.no_calls => INF,
            Node::Capture(_, n) => m(*n),
            Node::Special(i) => {
                if self.special_ok.get(*i as usize).copied().unwrap_or(false) {
                    1
                } else {
                    INF
                }
            }
        }
    }

    /// Symbols needed to close object `o` once the current value is done, with keys `seen`.
    ///
    /// `pending` keys are written (or being written) but not yet in `seen` (an extra key in
    /// progress): they count towards `minProperties`.
    fn close_object(
        &self,
        node: NodeId,
        o: &ObjectNode,
        seen: &Seen,
        after_value: bool,
        pending: u32,
    ) -> u32 {
        let close = self.byte(o.syntax.close);
        let mut total = close;
        let mut missing = 0u32;
        for &k in &o.required {
            if !seen.contains(k) {
                total = add(total, self.entry(node, o, k));
                missing += 1;
            }
        }
        for k in dependents_missing(o, seen) {
            total = add(total, self.entry(node, o, k));
            missing += 1;
        }
        if o.min_props > 0 {
            // The cheapest keys that make up minProperties (the compiler refuses the cases
            // needing more than one fresh extra key, whose cost is not tracked).
            let have = seen.count_keys(o) + pending + super::missing_required(o, seen);
            let need = o.min_props.saturating_sub(have) as usize;
            if need > 0 {
                let mut costs: Vec<u32> = (0..o.keys.len() as u32)
                    .filter(|&k| {
                        !seen.contains(k)
                            && !o.required.contains(&k)
                            && o.alias.get(k as usize).is_none_or(|&a| a >= k)
                    })
                    .map(|k| self.entry(node, o, k))
                    .collect();
                if let Some((lex, _)) = o.additional {
                    let d = self.g.lexemes[lex as usize].start();
                    let key = self.extra_key_rest(lex, d, seen);
                    costs.push(add(add(key, self.colon(o)), self.extra_value_min(o)));
                }
                costs.sort_unstable();
                if costs.len() < need {
                    return INF;
                }
                for &c in &costs[..need] {
                    total = add(total, c);
                    missing += 1;
                }
            }
        }
        if missing == 0 {
            return close;
        }
        // Commas: one before each missing entry after a value, one between them otherwise.
        add(
            total,
            self.commas(if after_value { missing } else { missing - 1 }),
        )
    }

    /// [`Completer::rest`] of an array with `contains`: the items still needed (at least
    /// `minContains - matched` matching ones, at least `minItems` in all; past those, the
    /// cheaper kind while matches are still allowed), their commas and the close.
    fn rest_with_contains(
        &self,
        a: &crate::grammar::ArrayNode,
        phase: ArrPhase,
        count: u32,
        matched: u32,
    ) -> u32 {
        let Some(c) = &a.contains else {
            return INF;
        };
        // The item in progress counts as written.
        let (cnt, mat) = match phase {
            ArrPhase::InValue => (count + 1, matched),
            ArrPhase::InMatch => (count + 1, matched + 1),
            ArrPhase::Done => return 0,
            _ => (count, matched),
        };
        let need_m = c.min.saturating_sub(mat);
        let mut need = a.min_items.saturating_sub(cnt).max(need_m);
        if phase == ArrPhase::AfterComma && need == 0 {
            need = 1; // a comma promised an item
        }
        let m_cost = self.node_min[c.matched as usize];
        let n_cost = self.node_min[c.other as usize];
        let per_extra = if mat.saturating_add(need_m) < c.max {
            m_cost.min(n_cost)
        } else {
            n_cost
        };
        let mul = |x: u32, n: u32| x.saturating_mul(n).min(INF);
        let items = add(mul(m_cost, need_m), mul(per_extra, need - need_m));
        self.items_then_close(&a.syntax, phase, items, need)
    }

    /// [`Completer::rest`] of an array with `uniqueItems` over a finite set: the cheapest of the
    /// values not used yet (bits of `used`), as many as `minItems` still needs (one after a
    /// comma), their commas and the close.
    fn rest_unique(
        &self,
        a: &crate::grammar::ArrayNode,
        phase: ArrPhase,
        count: u32,
        used: u32,
    ) -> u32 {
        // The item in progress counts as written (its bit is set when it starts).
        let cnt = match phase {
            ArrPhase::InValue => count + 1,
            ArrPhase::Done => return 0,
            _ => count,
        };
        let mut need = a.min_items.saturating_sub(cnt) as usize;
        if phase == ArrPhase::AfterComma && need == 0 {
            need = 1; // a comma promised an item
        }
        let mut costs: Vec<u32> = a
            .unique
            .iter()
            .enumerate()
            .filter(|&(i, _)| used >> i & 1 == 0)
            .map(|(_, &v)| self.node_min[v as usize])
            .collect();
        if costs.len() < need {
            return INF;
        }
        costs.sort_unstable();
        let items = costs[..need].iter().fold(0, |t, &c| add(t, c));
        let need = need as u32;
        self.items_then_close(&a.syntax, phase, items, need)
    }

    /// The least of `cost` over the frames of a merged union's alternatives that `frame` (an
    /// object frame on a merged node) stands for: what the alternatives' stacks would cost.
    fn least_over_alts(&self, frame: &Frame, cost: impl Fn(&Frame) -> u32) -> u32 {
        let Frame::Obj { node, .. } = frame else {
            return cost(frame);
        };
        let alts = self.g.merged_alts(*node).unwrap_or_default();
        let mut alt = frame.clone();
        let mut best = INF;
        for &a in alts {
            if let Frame::Obj { node, .. } = &mut alt {
                *node = a;
            }
            best = best.min(cost(&alt));
        }
        best
    }

    /// Symbols that `frame` (with no child above it) still needs before it is complete.
    fn rest(&self, frame: &Frame) -> u32 {
        let g = &*self.g;
        match frame {
            Frame::Lex { lex, state } => self.lex(*lex, *state),
            Frame::Root { phase, .. } => match phase {
                RootPhase::Before => self.node_min[g.root as usize],
                RootPhase::InValue | RootPhase::After => 0,
            },
            Frame::Obj { node, .. } if g.merged_alts(*node).is_some() => {
                self.least_over_alts(frame, |f| self.rest(f))
            }
            Frame::Obj {
                node, phase, seen, ..
            } => {
                let o = g.object(*node);
                let colon = self.colon(o);
                let value = |k: u32| {
                    if is_extra(k) {
                        extra_value(o, k).map_or(INF, |v| self.node_min[v as usize])
                    } else {
                        self.node_min[o.values[k as usize] as usize]
                    }
                };
                match *phase {
                    ObjPhase::AfterOpen => self.close_object(*node, o, seen, false, 0),
                    ObjPhase::AfterComma => {
                        if o.required.iter().any(|&k| !seen.contains(k))
                            || !dependents_missing(o, seen).is_empty()
                        {
                            return self.close_object(*node, o, seen, false, 0);
                        }
                        let mut best = INF;
                        for k in 0..o.keys.len() as u32 {
                            if !seen.contains(k) {
                                // The key, then whatever keys it requires, then the close.
                                let with = seen.with_key(o, k);
                                best = best.min(add(
                                    self.entry(*node, o, k),
                                    self.close_object(*node, o, &with, true, 0),
                                ));
                            }
                        }
                        if let Some((lex, _)) = o.additional {
                            let d = g.lexemes[lex as usize].start();
                            let key = self.extra_key_rest(lex, d, seen);
                            best = best.min(add(
                                add(add(key, colon), self.extra_value_min(o)),
                                self.close_object(*node, o, seen, true, 1),
                            ));
                        }
                        best
                    }
                    ObjPhase::InKey { trie, extra } => {
                        let mut best = INF;
                        if trie != NO_TRIE {
                            let t = &o.trie.nodes[trie as usize];
                            let depth = t.depth;
                            for k in t.lo..t.hi {
                                if seen.contains(k) || !super::may_come_next(o, seen, k) {
                                    continue;
                                }
                                let key = self.key_rest(*node, o, k, depth);
                                let with = seen.with_key(o, k);
                                let c = add(
                                    add(add(key, colon), value(k)),
                                    self.close_object(*node, o, &with, true, 0),
                                );
                                best = best.min(c);
                            }
                        }
                        if extra != Dfa::DEAD {
                            if let Some((lex, _)) = o.additional {
                                let c = add(
                                    add(self.extra_key_rest(lex, extra, seen), colon),
                                    add(
                                        self.extra_value_min(o),
                                        self.close_object(*node, o, seen, true, 1),
                                    ),
                                );
                                best = best.min(c);
                            }
                        }
                        best
                    }
                    ObjPhase::AfterKey(k) => {
                        // The colon (a key is followed by one only in syntaxes that have it).
                        let colon = o.syntax.colon.map_or(INF, |c| self.byte(c));
                        add(
                            add(colon, value(k)),
                            self.close_object(*node, o, seen, true, 0),
                        )
                    }
                    ObjPhase::AfterColon(k) => {
                        add(value(k), self.close_object(*node, o, seen, true, 0))
                    }
                    ObjPhase::InValue | ObjPhase::AfterValue => {
                        self.close_object(*node, o, seen, true, 0)
                    }
                    ObjPhase::Done => 0,
                }
            }
            Frame::Arr {
                node,
                phase,
                count,
                matched,
                ..
            } if g.array(*node).contains.is_some() => {
                self.rest_with_contains(g.array(*node), *phase, *count, *matched)
            }
            Frame::Arr {
                node,
                phase,
                count,
                strings,
                ..
            } if !g.array(*node).unique_strings.is_empty() => {
                self.rest_strings(g.array(*node), *phase, *count, strings.as_deref())
            }
            Frame::Arr {
                node,
                phase,
                count,
                matched,
                ..
            } if !g.array(*node).unique.is_empty() => {
                self.rest_unique(g.array(*node), *phase, *count, *matched)
            }
            Frame::Arr {
                node, phase, count, ..
            } => {
                let a = g.array(*node);
                let need = a.min_items.saturating_sub(*count);
                let mut items = 0;
                for i in *count..a.min_items {
                    items = add(items, a.item(i).map_or(INF, |n| self.node_min[n as usize]));
                }
                match phase {
                    ArrPhase::AfterComma if need == 0 => add(
                        a.item(*count).map_or(INF, |n| self.node_min[n as usize]),
                        self.byte(a.syntax.close),
                    ),
                    ArrPhase::Done => 0,
                    _ => self.items_then_close(&a.syntax, *phase, items, need),
                }
            }
            Frame::Seq { node, idx } => g.seq(*node)[*idx as usize..]
                .iter()
                .fold(0, |t, &e| add(t, self.node_min[e as usize])),
            Frame::Rep { node, count } => {
                let (item, min, _) = g.repeat(*node);
                self.node_min[item as usize]
                    .saturating_mul(min.saturating_sub(*count))
                    .min(INF)
            }
            Frame::Cap { node, done } => {
                if *done {
                    0
                } else {
                    self.node_min[g.captured(*node) as usize]
                }
            }
            Frame::Done => 0,
        }
    }

    /// Fewest symbols (or tokens) a value of `node` needs.
    pub(crate) fn node_min(&self, node: NodeId) -> u32 {
        self.node_min[node as usize]
    }

    /// Fewest symbols before `stack` may end.
    pub(crate) fn remaining(&self, stack: &[Frame]) -> u32 {
        let n = stack.len();
        let mut total = self.rest(&stack[n - 1]);
        for f in stack[..n - 1].iter().rev() {
            let mut f = f.clone();
            GrammarInner::child_done(&mut f);
            total = add(total, self.rest(&f));
        }
        total
    }

    /// Fewest symbols (or tokens) that the frames below the top of `stack` need once the top
    /// value is complete (0 for a stack of one frame).
    pub(crate) fn remaining_below(&self, stack: &[Frame]) -> u32 {
        let n = stack.len();
        if n < 2 {
            return 0;
        }
        let mut p = stack[..n - 1].to_vec();
        GrammarInner::child_done(p.last_mut().unwrap());
        self.remaining(&p)
    }

    /// Fewest symbols (or tokens) that lexeme `lex` needs from `state` to be complete.
    pub(crate) fn lex_rest(&self, lex: u32, state: StateId) -> u32 {
        self.lex(lex, state)
    }

    /// Fewest symbols before any of `states` may end.
    pub(crate) fn remaining_any(&self, states: &[Stack]) -> u32 {
        states
            .iter()
            .map(|s| self.remaining(s))
            .min()
            .unwrap_or(INF)
    }

    /// A shortest way (as far as the estimates are exact) to go from `states` to a position
    /// where the output may end. See [`Completer::steer`].
    pub(crate) fn complete(
        &self,
        states: &[Stack],
        usable: impl Fn(Sym) -> bool,
        start: usize,
        limit: usize,
    ) -> Option<Vec<Sym>> {
        let g = &*self.g;
        self.steer(
            states,
            usable,
            start,
            limit,
            |st| st.iter().any(|s| g.can_end(s)),
            |st| self.remaining_any(st),
        )
    }

    /// Greedy descent on `dist` from `states` until `goal` holds, using only the symbols `usable`
    /// allows; tries the symbols in rotation from `start` so that ties are broken differently
    /// from call to call. `None` when no path of at most `limit` symbols was found.
    pub(crate) fn steer(
        &self,
        states: &[Stack],
        usable: impl Fn(Sym) -> bool,
        start: usize,
        limit: usize,
        goal: impl Fn(&[Stack]) -> bool,
        dist: impl Fn(&[Stack]) -> u32,
    ) -> Option<Vec<Sym>> {
        let g = &*self.g;
        let syms = SPECIAL as usize + g.specials.len();
        let mut cur: Vec<Stack> = states.to_vec();
        let mut out = Vec::new();
        let mut next = Vec::new();
        let mut best_states = Vec::new();
        while !goal(&cur) {
            if out.len() >= limit {
                return None;
            }
            let h = dist(&cur);
            if h >= INF {
                return None;
            }
            let mut best: Option<(u32, Sym)> = None;
            // Punctuation first (it closes and opens most things), then every symbol in rotation.
            let first = FIRST.iter().map(|&b| b as Sym);
            let rotation = (0..syms).map(|i| ((start + i) % syms) as Sym);
            for sym in first.chain(rotation) {
                if !usable(sym) {
                    continue;
                }
                advance(g, &cur, sym, &mut next);
                if next.is_empty() {
                    continue;
                }
                let h2 = dist(&next);
                if best.is_none_or(|(b, _)| h2 < b) {
                    best = Some((h2, sym));
                    std::mem::swap(&mut best_states, &mut next);
                    if h2 < h {
                        break;
                    }
                }
            }
            let (_, sym) = best?;
            out.push(sym);
            std::mem::swap(&mut cur, &mut best_states);
        }
        Some(out)
    }

    /// Per function index, the capture nodes of its calls.
    pub(crate) fn call_nodes(&self) -> Vec<Vec<NodeId>> {
        let mut out = vec![Vec::new(); self.g.functions.len()];
        for (n, node) in self.g.nodes.iter().enumerate() {
            if let Node::Capture(Capture::Call(i), _) = node {
                if let Some(v) = out.get_mut(*i as usize) {
                    v.push(n as NodeId);
                }
            }
        }
        out
    }

    /// Distances to entering one of `targets` (capture nodes).
    pub(crate) fn dive(&self, targets: &[NodeId]) -> Dive {
        let n = self.g.nodes.len();
        let mut d = Dive {
            enter: vec![INF; n],
            target: vec![false; n],
        };
        for &t in targets {
            d.target[t as usize] = true;
        }
        for _ in 0..=n {
            let mut changed = false;
            for node in 0..n {
                let v = self.enter_value(&d, node as NodeId);
                if v < d.enter[node] {
                    d.enter[node] = v;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        d
    }

    /// Fewest symbols from the start of a `node` value to entering a target.
    fn enter_value(&self, d: &Dive, node: NodeId) -> u32 {
        let e = |n: NodeId| d.enter[n as usize];
        match &self.g.nodes[node as usize] {
            Node::Capture(_, inner) => {
                if d.target[node as usize] {
                    // Inside once its first symbol is read.
                    1
                } else {
                    e(*inner)
                }
            }
            Node::Seq(elems) => self.enter_seq(d, elems),
            Node::Union(alts) => alts.iter().map(|&a| e(a)).min().unwrap_or(INF),
            Node::Repeat { item, max, .. } if *max >= 1 => e(*item),
            Node::Object(o) => add(
                self.byte(o.syntax.open),
                self.enter_key(d, o, &Seen::initial(o)),
            ),
            Node::Array(a) => add(self.byte(a.syntax.open), a.item(0).map_or(INF, e)),
            _ => INF,
        }
    }

    fn enter_seq(&self, d: &Dive, elems: &[NodeId]) -> u32 {
        let mut best = INF;
        let mut before = 0;
        for &el in elems {
            best = best.min(add(before, d.enter[el as usize]));
            before = add(before, self.node_min[el as usize]);
        }
        best
    }

    /// Entering a target through a new key of `o` (after the key that comes first, with its
    /// shortest value and a comma, where that one is not written yet).
    fn enter_key(&self, d: &Dive, o: &ObjectNode, seen: &Seen) -> u32 {
        let colon = self.colon(o);
        let key = |k: u32| {
            let key = &o.keys[k as usize];
            if key.iter().all(|&b| self.usable[b as usize]) {
                key.len() as u32
            } else {
                INF
            }
        };
        let through = |k: u32| add(add(key(k), colon), d.enter[o.values[k as usize] as usize]);
        let fresh = (0..o.keys.len() as u32).filter(|&k| !seen.contains(k));
        if !super::first_due(o, seen) {
            return fresh.map(through).min().unwrap_or(INF);
        }
        let first = |k: u32| o.first.contains(&k);
        let before = o
            .first
            .iter()
            .map(|&k| {
                add(
                    add(key(k), colon),
                    self.node_min[o.values[k as usize] as usize],
                )
            })
            .min()
            .map_or(INF, |c| add(c, self.commas(1)));
        fresh
            .map(|k| {
                if first(k) {
                    through(k)
                } else {
                    add(before, through(k))
                }
            })
            .min()
            .unwrap_or(INF)
    }

    /// Fewest symbols from `frame`'s position (no child above) to entering a target.
    fn enter_rest(&self, d: &Dive, frame: &Frame) -> u32 {
        let g = &*self.g;
        match frame {
            Frame::Root {
                phase: RootPhase::Before,
                ..
            } => d.enter[g.root as usize],
            Frame::Seq { node, idx } => self.enter_seq(d, &g.seq(*node)[*idx as usize..]),
            Frame::Rep { node, count } => {
                let (item, _, max) = g.repeat(*node);
                if *count < max {
                    d.enter[item as usize]
                } else {
                    INF
                }
            }
            Frame::Cap { node, done: false } => d.enter[g.captured(*node) as usize],
            Frame::Obj { node, .. } if g.merged_alts(*node).is_some() => {
                self.least_over_alts(frame, |f| self.enter_rest(d, f))
            }
            Frame::Obj {
                node, phase, seen, ..
            } => {
                let o = g.object(*node);
                let value = |k: u32| {
                    if is_extra(k) {
                        INF
                    } else {
                        d.enter[o.values[k as usize] as usize]
                    }
                };
                match *phase {
                    ObjPhase::AfterOpen | ObjPhase::AfterComma => self.enter_key(d, o, seen),
                    ObjPhase::AfterValue | ObjPhase::InValue => {
                        add(self.commas(1), self.enter_key(d, o, seen))
                    }
                    ObjPhase::AfterKey(k) => add(self.colon(o), value(k)),
                    ObjPhase::AfterColon(k) => value(k),
                    _ => INF,
                }
            }
            Frame::Arr {
                node, phase, count, ..
            } => {
                let a = g.array(*node);
                let item = a.item(*count).map_or(INF, |n| d.enter[n as usize]);
                match phase {
                    ArrPhase::AfterOpen | ArrPhase::AfterComma => item,
                    ArrPhase::AfterValue
                    | ArrPhase::InValue
                    | ArrPhase::InMatch
                    | ArrPhase::InString { .. } => add(self.commas(1), item),
                    ArrPhase::Done => INF,
                }
            }
            _ => INF,
        }
    }

    /// Fewest symbols before `stack` is inside a target (0: it is).
    pub(crate) fn to_enter(&self, d: &Dive, stack: &[Frame]) -> u32 {
        if stack
            .iter()
            .any(|f| matches!(f, Frame::Cap { node, .. } if d.target[*node as usize]))
        {
            return 0;
        }
        // A merged union's frame on top stands for its alternatives' capture frames too.
        if let Some(Frame::Obj { node, .. }) = stack.last() {
            let caps = self.g.merged_caps(*node).unwrap_or_default();
            if caps.iter().any(|&c| d.target[c as usize]) {
                return 0;
            }
        }
        let n = stack.len();
        let mut best = self.enter_rest(d, &stack[n - 1]);
        let mut above = self.rest(&stack[n - 1]);
        for f in stack[..n - 1].iter().rev() {
            let mut f = f.clone();
            GrammarInner::child_done(&mut f);
            best = best.min(add(above, self.enter_rest(d, &f)));
            above = add(above, self.rest(&f));
        }
        best
    }

    /// Fewest symbols before any of `states` is inside a target.
    pub(crate) fn to_enter_any(&self, d: &Dive, states: &[Stack]) -> u32 {
        states
            .iter()
            .map(|s| self.to_enter(d, s))
            .min()
            .unwrap_or(INF)
    }
}

/// Distances to entering some target capture nodes (see [`Completer::dive`]).
pub(crate) struct Dive {
    /// Per node: fewest symbols from its start to entering a target.
    enter: Vec<u32>,
    /// Per node: is it a target.
    target: Vec<bool>,
}

/// Per byte: does `vocab` have a token that spells it alone (one the spelling of a completion
/// may use: not special, not an end-of-generation token)?
fn single_byte_tokens(vocab: &Vocab) -> [bool; 256] {
    std::array::from_fn(|b| {
        let mut one = false;
        vocab.token_prefixes(&[b as u8], |k| one |= k == 1);
        one
    })
}

/// Per byte offset `i` of `bytes`: the fewest tokens of `vocab` that spell `bytes[i..]` (INF where
/// none do).
fn spell(vocab: &Vocab, bytes: &[u8]) -> Vec<u32> {
    let n = bytes.len();
    let mut c = vec![INF; n + 1];
    c[n] = 0;
    for i in (0..n).rev() {
        let mut best = INF;
        vocab.token_prefixes(&bytes[i..n.min(i + LOOKAHEAD)], |k| {
            best = best.min(add(c[i + k], 1));
        });
        c[i] = best;
    }
    c
}

/// Per state of a lexeme automaton: one way to an accepting state (shortest in bytes among
/// those the completer can write: see [`LexWays::new`]), and its length in symbols or tokens.
struct LexWays {
    /// Bytes of that way (`u32::MAX`: none).
    bytes: Vec<u32>,
    /// The first byte of the way (for states with `bytes` > 0).
    way: Vec<u8>,
    /// Its length in the completer's unit: bytes, or the fewest tokens that spell it.
    cost: Vec<u32>,
    /// Per state whose way starts with a whole token rather than with `way` (empty when no
    /// state's does): that token's bytes and the state after it.
    jumps: Vec<Option<(Box<[u8]>, StateId)>>,
}

impl LexWays {
    /// The ways form a tree (each state's way is one byte, then the way of the state after
    /// it), so the first token of a state's spelling leads to a state whose count is exactly
    /// one less: the counts are consistent, as the module documentation requires.
    ///
    /// The tree is built over the bytes `usable` allows first (those with a single-byte
    /// token): each state's way is one of its shortest over those bytes, and among the bytes
    /// one step nearer, the one whose state is spelled with the fewest tokens (the lowest
    /// usable byte of its class on ties). Such a way is always spelled, one token per byte at
    /// worst. Counting tokens, a state whose every way needs some other byte gets a way that
    /// starts with a whole token leading to a state that has one (the cheapest such), and none
    /// (`INF`) where no token does: its count is at least one more than that state's, so the
    /// first token of its spelling again leaves at least one less.
    fn new(dfa: &Dfa, vocab: Option<&Vocab>, usable: &[bool; 256]) -> LexWays {
        let near = dfa.distances_over(usable);
        let n = near.len();
        let mut ways = LexWays {
            bytes: vec![u32::MAX; n],
            way: vec![0u8; n],
            cost: vec![INF; n],
            jumps: Vec::new(),
        };
        let mut order: Vec<usize> = (1..n).filter(|&s| near[s] != u32::MAX).collect();
        order.sort_by_key(|&s| near[s]);
        let reps = dfa.usable_representatives(usable);
        for s in order {
            let d = near[s];
            if d == 0 {
                ways.bytes[s] = 0;
                ways.cost[s] = 0;
                continue;
            }
            let mut best: Option<(u32, u8)> = None;
            for &b in &reps {
                let t = dfa.next(s as StateId, b) as usize;
                if t != Dfa::DEAD as usize
                    && near[t] == d - 1
                    && best.is_none_or(|(c, _)| ways.cost[t] < c)
                {
                    best = Some((ways.cost[t], b));
                }
            }
            let Some((_, b)) = best else { continue };
            ways.cost[s] = match vocab {
                Some(vocab) => ways.spelled(dfa, s, b, vocab),
                None => d.min(INF),
            };
            ways.way[s] = b;
            ways.bytes[s] = d;
        }
        let Some(vocab) = vocab else { return ways };
        if usable.iter().all(|&u| u) {
            return ways;
        }
        // The states whose every way needs a byte without a single-byte token: a way that
        // starts with a whole token to a state that has one (a shortest-path relaxation, in
        // order of distance in bytes; each new way is strictly cheaper, so the ways never form
        // a cycle). A few passes settle any realistic lexeme; a state left without a way only
        // makes the count less tight.
        let all = dfa.distances_to_accept();
        let mut rest: Vec<usize> = (1..n)
            .filter(|&s| near[s] == u32::MAX && all[s] != u32::MAX)
            .collect();
        if rest.is_empty() {
            return ways;
        }
        rest.sort_by_key(|&s| all[s]);
        ways.jumps = vec![None; n];
        for _ in 0..JUMP_PASSES {
            let mut changed = false;
            for &s in &rest {
                let mut best: Option<(u32, Vec<u8>, StateId)> = None;
                let cost = &ways.cost;
                vocab.token_walks(
                    s as StateId,
                    Dfa::DEAD,
                    |st, b| dfa.next(st, b),
                    |bytes, t| {
                        let c = add(cost[t as usize], 1);
                        if c < cost[s] && best.as_ref().is_none_or(|x| c < x.0) {
                            best = Some((c, bytes.to_vec(), t));
                        }
                    },
                );
                if let Some((c, bytes, t)) = best {
                    ways.bytes[s] = ways.bytes[t as usize].saturating_add(bytes.len() as u32);
                    ways.cost[s] = c;
                    ways.jumps[s] = Some((bytes.into_boxed_slice(), t));
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        ways
    }

    /// The fewest tokens of `vocab` that spell the way from `s` that starts with byte `first`
    /// and goes on along the way of the state after it (which has one), as far as
    /// [`LOOKAHEAD`] bytes: one token that is a prefix of it, then the cost of the state it
    /// leads to. `INF` when no token is such a prefix.
    fn spelled(&self, dfa: &Dfa, s: usize, first: u8, vocab: &Vocab) -> u32 {
        let mut path = vec![first];
        let mut cur = dfa.next(s as StateId, first) as usize;
        let mut along = vec![cur];
        while self.bytes[cur] > 0 && path.len() < LOOKAHEAD {
            let b = self.way[cur];
            path.push(b);
            cur = dfa.next(cur as StateId, b) as usize;
            along.push(cur);
        }
        let mut c = INF;
        vocab.token_prefixes(&path, |k| c = c.min(add(self.cost[along[k - 1]], 1)));
        c
    }

    /// Appends to `out` the bytes of the way from `state`; false when there is none.
    fn finish(&self, dfa: &Dfa, mut state: StateId, out: &mut Vec<u8>) -> bool {
        loop {
            match self.bytes.get(state as usize) {
                Some(0) => return true,
                Some(&d) if d != u32::MAX => {
                    if let Some(Some((bytes, t))) = self.jumps.get(state as usize) {
                        out.extend_from_slice(bytes);
                        state = *t;
                        continue;
                    }
                    let b = self.way[state as usize];
                    out.push(b);
                    state = dfa.next(state, b);
                }
                _ => return false,
            }
        }
    }
}

/// The keys `dependentRequired` still asks for, given the keys `seen` (and those it asks for
/// in turn), each once; none are required keys (the required list is closed under the
/// dependencies).
fn dependents_missing(o: &ObjectNode, seen: &Seen) -> Vec<u32> {
    if o.dependencies.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<u32> = Vec::new();
    let present = |k: u32, out: &[u32]| seen.contains(k) || out.contains(&k);
    loop {
        let mut changed = false;
        for (t, needs) in &o.dependencies {
            if !present(*t, &out) {
                continue;
            }
            for &n in needs {
                let alias = o.alias.get(n as usize).copied().unwrap_or(n);
                if !present(n, &out) && !present(alias, &out) {
                    out.push(n);
                    changed = true;
                }
            }
        }
        if !changed {
            return out;
        }
    }
}
