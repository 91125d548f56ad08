//! Distinct calls: no call of one output repeats an earlier call of the same function with
//! equal arguments ([`crate::Matcher::set_distinct_calls`], on by default).
//!
//! Equality is decided on the calls as the output parser reads them ([`StreamParser`]): the
//! function's name, and the arguments converted to JSON by `parse::convert` whatever their
//! encoding (a JSON object, JSON inside a JSON string, Python keywords, tagged fields), then
//! compared as JSON values: objects whatever their key order, numbers by value (`1`, `1.0`
//! and `1e0` are equal), strings decoded. The matcher keeps the calls completed so far in a
//! [`CallLog`] (the parser fed with the accepted tokens, rebuilt lazily after a rollback).
//!
//! The rule on the mask: a token is allowed only if, after it, the output can still end, within
//! the token budget when one is set, with every call different from the earlier ones.
//!
//! Most masks need no check at all. The matcher watches every accepted token for a call that
//! may have ended on it ([`leaves_call`] at each step, exact on lineage and erring towards
//! yes): until one may have, no call is complete, the log is not fed, and masks are the
//! grammar's. After that the log is fed only when a mask needs it. With no token budget, where
//! no call may have ended since the log was last fed, every stack is inside a call of a
//! function not called yet ([`in_fresh_calls`]), and every token of the grammar's mask keeps
//! such calls new (the automaton's `calls_stay_new`, a function of the states kept with their
//! cached mask: the token ends no call, from a stack that may end with no further call, or it
//! ends one, is too short to hold another, and leaves a stack outside calls that may end with
//! none), the mask is the grammar's.
//!
//! Elsewhere each allowed token is checked in one of three ways, cheapest first:
//! - **In text outside any call, or inside a call of a function not called yet** (the common
//!   case), a token that stays in the top frame of a stack keeps it there: no call starts or
//!   ends, or the call it is in is new whatever it becomes. Outside calls in a frame that may
//!   start one, the same for the tokens with no byte a call can start with (and no special
//!   token), by their cost of ending with no new call. Such tokens are allowed, a whole cost group at a time, when the
//!   cost of ending without starting another call fits ([`Completer::without_calls`]). When
//!   the call in progress cannot end within the longest token, no token can leave it, and the
//!   mask is the grammar's (no work at all).
//! - **Inside a value lexeme of a call of a function already called**: a token is allowed when,
//!   after it, the lexeme can still take more distinct next characters (letters that are no
//!   escape letter, or digits) than there are earlier calls of the function, each without
//!   raising the lexeme's cost: one of them makes the call new, at one token more than the
//!   shortest completion, which must fit.
//! - **Otherwise** (tokens that close values, keys, calls, or start calls): where no call may
//!   end along the token and a stack after it is outside calls, or in a call of a function
//!   not called yet, with a way to end that starts no call within the budget, the token is
//!   allowed (one more step over its symbols); else a bounded
//!   best-first search over single bytes from the state after the token, in order of bytes
//!   written plus the fewest tokens still needed ([`SEARCH_NODES`] states and
//!   [`SEARCH_BRANCHES`] bytes from each at most), for a position where the calls completed
//!   are all different and either no call of an already-called function is in progress and
//!   the output ends without a new call within the budget, or such a call is in a value that
//!   the rule above shows can still make it new (each searched byte counting one token).
//!   Before its own search, a token replays the ways the searches of earlier tokens of the
//!   same mask found ([`KNOWN_WAYS`], one step per byte where a search tries every byte): the
//!   way after the token's own bytes where they begin it, else the way alone. Tokens that
//!   differ in whitespace, or in how much of a name they spell, mostly share one way.
//!
//! A call of a function called before counts as new, and is checked as the first case, once
//! it differs from each earlier call in an argument it has completed, or in the string value
//! it is writing (the characters so far are not how the earlier value begins).
//!
//! Trade-offs: the checks are exact where they say yes (each names a real completion); where
//! a bound is hit, or the cheap rules do not apply and the search finds nothing, the token is
//! removed. The search counts a spelling's tokens only where, at each token boundary, the
//! budget's own count of the rest fits, so that the way it admits is one the budget's later
//! masks allow. The work of one mask is bounded too: its searches share [`FILTER_NODES`]
//! states, and a token whose states and calls so far are those after another token whose
//! search hit its bound is removed without a search of its own (the calls matter: two digits
//! leave a number in one lexeme state, and only one of them may head for a repeat). That is
//! conservative: it may remove a token that had a fresh completion the search missed.
//!
//! Dead-end freedom rests on a witness: where the rule would empty the mask, the matcher runs
//! the search from the current position with one token more of room, which is the very search
//! that admitted the last token (same states, same log, same limit), so it finds that
//! completion again, and the first tokens of its shortest spellings are allowed (each leaves
//! the rest of it, which ends the output with distinct calls within the budget). Where the
//! current position is itself such an end (a value that one more character makes new), the
//! one-byte tokens that pass the check are allowed. Only a token admitted by a cheap rule or a
//! replay, whose completion the search from the next position does not find within its bound, could
//! still leave an empty mask: there the rule gives way for the rest of the output (the
//! grammar's and the budget's mask, so never a dead end), counted by
//! `Matcher::distinct_gave_up`.
//! The fuzzer checks, on every dialect with and without budgets, that no two calls are equal
//! where the rule did not give way, and that no mask is empty before the end.

use super::{TokenAutomaton, TokenMask};
use crate::automaton::complete::INF;
use crate::automaton::{advance, Frame, Stack, Sym};
use crate::grammar::{Capture, Grammar, GrammarInner, Node};
use crate::parse::{Event, StreamParser};
use crate::vocab::{TokenId, TokenPrefix, Vocab};
use serde_json::Value;

pub(crate) use crate::parse::{args_differ, json_eq};

/// Most states one search expands before it gives up (the token is then removed).
pub(crate) const SEARCH_NODES: usize = 2048;

/// Most next bytes a search follows from one state (the cheapest, in the order tried).
const SEARCH_BRANCHES: usize = 12;

/// Most states all the searches of one mask expand together ([`Ctx::filter`]): past it, the
/// tokens still to check are removed (conservative, as where one search hits its bound).
const FILTER_NODES: usize = 8 * SEARCH_NODES;

/// Longest completion (in bytes) a search follows.
const SEARCH_DEPTH: usize = 384;

/// Letters that are never an escape letter or a hex digit in any string encoding the grammars
/// use (JSON's, Python's `\N{..}`, `\U`, `\x`), and digits: each, written after complete
/// characters, is a character of its own.
const PLAIN: &[u8] = b"ghijklmopqswyzGHIJKLMOPQRSTVWYZ0123456789";

/// Symbols tried first by the search (they close and open most things).
const FIRST: &[u8] = b"\"}]),:[({' ";

/// The calls of an output so far, as the parser reads them.
#[derive(Clone, Debug)]
pub(crate) struct CallLog {
    parser: StreamParser,
    /// Tokens fed to the parser.
    pub(crate) fed: usize,
    calls: Vec<Rec>,
    /// Completed calls: function name and arguments.
    done: Vec<(String, Value)>,
    /// A completed call repeats an earlier one (where the log does not close on it), a call
    /// starts after the log closed, or the parser refused the output.
    pub(crate) broken: bool,
    /// A repeat ends the calls ([`crate::DistinctCalls::End`]): the first one closes the log
    /// instead of breaking it.
    end_on_repeat: bool,
    /// A completed call repeated an earlier one and the log closed: no call may follow.
    pub(crate) closed: bool,
}

/// See [`CallLog::key`].
type LogKey = (usize, String, String, bool);

/// One call as it streams.
#[derive(Clone, Debug, Default)]
struct Rec {
    name: String,
    args: String,
    ended: bool,
}

impl CallLog {
    /// The log at the start of an output of `g`; `end_on_repeat`: a repeat closes it
    /// ([`CallLog::closed`]) rather than breaking it.
    pub(crate) fn new(g: &Grammar, end_on_repeat: bool) -> CallLog {
        CallLog {
            parser: StreamParser::raw(g),
            fed: 0,
            calls: Vec::new(),
            done: Vec::new(),
            broken: false,
            end_on_repeat,
            closed: false,
        }
    }

    fn rec(&mut self, index: usize) -> &mut Rec {
        if self.calls.len() <= index {
            self.calls.resize(index + 1, Rec::default());
        }
        &mut self.calls[index]
    }

    fn apply(&mut self, events: Vec<Event>) {
        for e in events {
            match e {
                Event::CallStart { index, name, .. } => {
                    if self.closed {
                        self.broken = true;
                    }
                    self.rec(index).name = name
                }
                Event::Arguments { index, delta } => self.rec(index).args.push_str(&delta),
                Event::CallEnd { index } => {
                    let r = self.rec(index);
                    r.ended = true;
                    let name = r.name.clone();
                    let text = r.args.trim();
                    let value = if text.is_empty() {
                        Ok(Value::Object(Default::default()))
                    } else {
                        serde_json::from_str::<Value>(text)
                    };
                    match value {
                        Ok(v) => {
                            if self.done.iter().any(|(n, w)| *n == name && json_eq(w, &v)) {
                                if self.end_on_repeat && !self.closed {
                                    self.closed = true;
                                } else {
                                    self.broken = true;
                                }
                            }
                            self.done.push((name, v));
                        }
                        Err(_) => self.broken = true,
                    }
                }
                _ => {}
            }
        }
    }

    /// Feeds one accepted token.
    pub(crate) fn push_token(&mut self, vocab: &Vocab, token: TokenId) {
        match self.parser.push_token(vocab, token) {
            Ok(ev) => self.apply(ev),
            Err(_) => self.broken = true,
        }
        self.fed += 1;
    }

    /// Feeds one symbol (a search step).
    fn push_sym(&mut self, sym: Sym) {
        match self.parser.push_sym(sym) {
            Ok(ev) => self.apply(ev),
            Err(_) => self.broken = true,
        }
    }

    /// True when the output may end here as far as distinct calls go: the calls that the end
    /// completes are new too.
    pub(crate) fn may_end(&self) -> bool {
        let mut c = self.clone();
        match c.parser.finish() {
            Ok(ev) => {
                c.apply(ev);
                !c.broken
            }
            // The grammar took the output as complete; the parser's view is not needed.
            Err(_) => !self.broken,
        }
    }

    /// True when some call is complete.
    pub(crate) fn has_calls(&self) -> bool {
        !self.done.is_empty()
    }

    /// What the calls' future depends on: how many there are, and the last one as far as
    /// it is written.
    fn key(&self) -> LogKey {
        let last = self.calls.last();
        (
            self.calls.len() * 2 + usize::from(self.closed),
            last.map_or_else(String::new, |r| r.name.clone()),
            last.map_or_else(String::new, |r| r.args.clone()),
            last.is_some_and(|r| r.ended),
        )
    }

    /// How many completed calls have function `name`.
    pub(crate) fn count(&self, name: &str) -> usize {
        self.done.iter().filter(|(n, _)| n == name).count()
    }

    /// True when a call of a function called before is in progress and not yet shown new
    /// ([`CallLog::open_is_new`]).
    pub(crate) fn open_risky(&self) -> bool {
        self.open_name().is_some_and(|n| self.count(n) > 0) && !self.open_is_new()
    }

    /// True when the call in progress already differs from every earlier call of its function
    /// in an argument it has completed (a key the earlier call lacks, or another value), so
    /// that whatever follows, it is new.
    pub(crate) fn open_is_new(&self) -> bool {
        let Some(open) = self
            .calls
            .iter()
            .rev()
            .find(|r| !r.ended && !r.name.is_empty())
        else {
            return false;
        };
        args_differ(&open.name, &open.args, &self.done)
    }

    /// The function of the call in progress, when the parser knows it.
    fn open_name(&self) -> Option<&str> {
        self.calls
            .iter()
            .rev()
            .find(|r| !r.ended && !r.name.is_empty())
            .map(|r| r.name.as_str())
    }
}

/// The lengths of the first tokens of the spellings of `path` with the fewest tokens
/// (non-special tokens; none when no spelling exists).
pub(crate) fn first_tokens(vocab: &Vocab, path: &[u8]) -> Vec<usize> {
    let n = path.len();
    // fewest[i]: the fewest tokens that spell `path[i..]`.
    let mut fewest = vec![INF; n + 1];
    fewest[n] = 0;
    for i in (0..n).rev() {
        let mut best = INF;
        vocab.token_prefixes(&path[i..], |k| {
            best = best.min(fewest[i + k].saturating_add(1))
        });
        fewest[i] = best;
    }
    let mut firsts = Vec::new();
    if fewest[0] < INF {
        vocab.token_prefixes(path, |k| {
            if fewest[k].saturating_add(1) == fewest[0] {
                firsts.push(k);
            }
        });
    }
    firsts
}

/// True when reading `syms` from `states` may complete a call: along some stack, at some
/// symbol, a call's capture frame is left (popped, whether by its own last symbol or by the
/// next symbol its parent takes). See [`leaves_call`].
pub(crate) fn may_end_call(g: &GrammarInner, states: &[Stack], syms: &[Sym]) -> bool {
    let mut cur = states.to_vec();
    let mut next: Vec<Stack> = Vec::new();
    let mut ended = false;
    for &sym in syms {
        crate::automaton::advance_traced(g, &cur, sym, &mut next, &mut Vec::new(), |s, t| {
            ended = ended || leaves_call(g, s, t);
        });
        if ended {
            return true;
        }
        std::mem::swap(&mut cur, &mut next);
    }
    false
}

/// True when every stack of `states` is inside a call of a function that no call of `log`
/// completed, and the log holds no repeat: then a token after which no call may have ended
/// keeps the calls distinct whatever follows, where the output may then end with no further
/// call ([`crate::TokenAutomaton`]'s `calls_stay_new`; with no token budget to keep to).
pub(crate) fn in_fresh_calls(g: &GrammarInner, log: &CallLog, states: &[Stack]) -> bool {
    !log.broken
        && !log.closed
        && states.iter().all(|s| match open_call(g, s) {
            Some((k, i)) => {
                k + 1 < s.len()
                    && g.functions
                        .get(i as usize)
                        .is_some_and(|n| log.count(n) == 0)
            }
            None => false,
        })
}

/// True when `before` is in a call that `after` (a stack it stepped to) is no longer in.
///
/// Exact on lineage: a call frame that stays at its depth over unchanged frames below it is
/// the same call. Below a capture frame nothing changes while it is on the stack, and a parent
/// that starts a new call after one ends moves on itself (a repetition counts one more, a
/// sequence moves to a later element), so a new call never looks like the old one going on.
/// Where several stacks are live (text that may still be the start of a call), any one
/// leaving a call counts: the answer errs towards true, which costs only speed.
pub(crate) fn leaves_call(g: &GrammarInner, before: &[Frame], after: &[Frame]) -> bool {
    before.iter().enumerate().any(|(i, f)| match f {
        Frame::Cap { node, .. }
            if matches!(g.nodes[*node as usize], Node::Capture(Capture::Call(_), _)) =>
        {
            let same = after.len() > i
                && after[..i] == before[..i]
                && matches!(after[i], Frame::Cap { node: n, .. } if n == *node);
            !same
        }
        _ => false,
    })
}

/// The innermost call in progress on `stack`: its frame's index and function.
pub(crate) fn open_call(g: &GrammarInner, stack: &[Frame]) -> Option<(usize, u32)> {
    stack.iter().enumerate().rev().find_map(|(k, f)| match f {
        Frame::Cap { node, done: false } => match &g.nodes[*node as usize] {
            Node::Capture(Capture::Call(i), _) => Some((k, *i)),
            _ => None,
        },
        _ => None,
    })
}

/// Per node: whether a call may start inside it (a call capture in it, or below it).
pub(crate) fn nodes_with_calls(g: &GrammarInner) -> Vec<bool> {
    let mut has = vec![false; g.nodes.len()];
    loop {
        let mut changed = false;
        for (id, node) in g.nodes.iter().enumerate() {
            if has[id] {
                continue;
            }
            let v = match node {
                Node::Lex(_) | Node::Never | Node::Special(_) => false,
                Node::Capture(Capture::Call(_), _) => true,
                Node::Capture(_, n) => has[*n as usize],
                Node::Union(v) | Node::Seq(v) => v.iter().any(|n| has[*n as usize]),
                Node::Repeat { item, .. } => has[*item as usize],
                // JSON values: not walked (treated as holding calls, which only costs speed).
                Node::Object(_) | Node::Array(_) => true,
            };
            if v {
                has[id] = true;
                changed = true;
            }
        }
        if !changed {
            return has;
        }
    }
}

/// True when `frame`, with what it may still push, can start no call (see [`nodes_with_calls`]).
fn frame_starts_no_call(g: &GrammarInner, calls: &[bool], frame: &Frame) -> bool {
    let has = |n: u32| calls.get(n as usize).copied().unwrap_or(true);
    match frame {
        Frame::Lex { .. } => true,
        Frame::Seq { node, idx } => match &g.nodes[*node as usize] {
            Node::Seq(v) => v.iter().skip(*idx as usize).all(|n| !has(*n)),
            _ => false,
        },
        Frame::Rep { node, .. } => match &g.nodes[*node as usize] {
            Node::Repeat { item, .. } => !has(*item),
            _ => false,
        },
        Frame::Cap { node, done } => *done || !has(*node),
        _ => false,
    }
}

/// True when one of `frames` is a call's arguments capture (a value below it is an argument's).
fn in_args(g: &GrammarInner, frames: &[Frame]) -> bool {
    frames.iter().any(|f| match f {
        Frame::Cap { node, .. } => {
            matches!(&g.nodes[*node as usize], Node::Capture(c, _) if c.is_arguments())
        }
        _ => false,
    })
}

/// One position of a search ([`Ctx::search`]): its states and calls, and how its bytes are
/// spelled.
struct SearchNode {
    states: Vec<Stack>,
    log: CallLog,
    spelling: Spelling,
}

/// The bytes from a search's start, and per prefix of them the fewest tokens that spell it,
/// each token one the budget allows where it comes (INF: none).
struct Spelling {
    bytes: Vec<u8>,
    tokens: Vec<u32>,
    /// Per prefix: the fewest tokens a completion needs from there.
    rests: Vec<u32>,
    /// The starts `j` whose bytes from `j` on begin some token, with those tokens.
    live: Vec<(u32, TokenPrefix)>,
}

impl Spelling {
    /// The spelling of no bytes, `rest` tokens needed from there.
    fn start(rest: u32) -> Spelling {
        Spelling {
            bytes: Vec::new(),
            tokens: vec![0],
            rests: vec![rest],
            live: Vec::new(),
        }
    }

    /// The spelling with `byte` after these bytes (spelled in `spelled` tokens, `rest` needed
    /// after it, live starts `live`).
    fn child(&self, byte: u8, spelled: u32, rest: u32, live: Vec<(u32, TokenPrefix)>) -> Spelling {
        let mut bytes = self.bytes.clone();
        bytes.push(byte);
        let mut tokens = self.tokens.clone();
        tokens.push(spelled);
        let mut rests = self.rests.clone();
        rests.push(rest);
        Spelling {
            bytes,
            tokens,
            rests,
            live,
        }
    }

    /// [`Spelling::child`], in place.
    fn push(&mut self, byte: u8, spelled: u32, rest: u32, live: Vec<(u32, TokenPrefix)>) {
        self.bytes.push(byte);
        self.tokens.push(spelled);
        self.rests.push(rest);
        self.live = live;
    }

    /// The fewest tokens that spell these bytes and then `byte` (INF: none) with
    /// every token the budget's mask allows where it comes (the tokens so far and the fewest
    /// the completer counts from there, `rest` after `byte`, within `limit`), and the starts
    /// whose bytes from there, `byte` included, begin some token: each start so far still
    /// live, and the new byte's own, narrowed by `byte`.
    fn spell_next(
        &self,
        vocab: &Vocab,
        byte: u8,
        rest: u32,
        limit: u32,
    ) -> (u32, Vec<(u32, TokenPrefix)>) {
        let n = self.bytes.len() as u32;
        let mut best = INF;
        let mut live = Vec::with_capacity(self.live.len() + 1);
        let starts = self.live.iter().copied();
        for (j, prefix) in starts.chain(std::iter::once((n, vocab.all_tokens_prefix()))) {
            let (next, exact) = if j == n {
                vocab.first_byte_prefix(byte)
            } else {
                vocab.extend_prefix(prefix, byte)
            };
            if next.is_empty() {
                continue;
            }
            let before = self.tokens[j as usize];
            if exact && before < INF && (before + 1).saturating_add(rest) <= limit {
                best = best.min(before + 1);
            }
            live.push((j, next));
        }
        (best, live)
    }

    /// A lower bound on the tokens of any output that goes on through these bytes and one
    /// more (spelled in `spelled` tokens, `rest` tokens needed after it): the token
    /// that holds the new byte starts at one of the `live` starts (the bytes from there to
    /// the new byte begin some token), or the new byte ends the last token; the spelling up
    /// to that start and the fewest tokens from there add up to at least this. (Only starts a
    /// token can span from: a cheap completion a few bytes back must not let the search
    /// wander on past it for the longest token's length.)
    fn least_tokens(&self, live: &[(u32, TokenPrefix)], spelled: u32, rest: u32) -> u32 {
        live.iter()
            .map(|&(j, _)| self.tokens[j as usize].saturating_add(self.rests[j as usize]))
            .chain(std::iter::once(spelled.saturating_add(rest)))
            .min()
            .unwrap_or(INF)
    }
}

/// Most ways one filter keeps to replay ([`Ctx::replay_known`]).
const KNOWN_WAYS: usize = 4;

/// Adds the way of token bytes `token` then `way` to `known`, unless there, keeping the
/// [`KNOWN_WAYS`] newest.
fn remember_way(known: &mut Vec<(usize, Vec<u8>)>, token: &[u8], way: &[u8]) {
    let mut all = token.to_vec();
    all.extend_from_slice(way);
    if known.iter().any(|(_, w)| *w == all) {
        return;
    }
    if known.len() >= KNOWN_WAYS {
        known.remove(0);
    }
    known.push((token.len(), all));
}

/// What the filter needs to know about the output so far.
pub(crate) struct Ctx<'a> {
    pub(crate) auto: &'a TokenAutomaton,
    pub(crate) log: &'a CallLog,
    /// Most tokens a completion may take after the token checked (end-of-generation aside).
    pub(crate) limit: u32,
    /// States expanded by the searches so far.
    spent: std::cell::Cell<usize>,
}

/// Why a search found no way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Miss {
    /// Every way within the limit was tried.
    None,
    /// A bound was hit first.
    Bound,
}

impl<'a> Ctx<'a> {
    /// The filter's context after the calls of `log`, completions of at most `limit` tokens.
    pub(crate) fn new(auto: &'a TokenAutomaton, log: &'a CallLog, limit: u32) -> Ctx<'a> {
        Ctx {
            auto,
            log,
            limit,
            spent: std::cell::Cell::new(0),
        }
    }

    /// Earlier calls of function `i`.
    fn calls_of(&self, i: u32) -> usize {
        self.auto
            .g()
            .functions
            .get(i as usize)
            .map_or(0, |n| self.log.count(n))
    }

    /// True when a call of function `i` in progress is new whatever follows: no earlier call of
    /// `i`, or the call already differs from each ([`CallLog::open_is_new`]).
    fn new_call(&self, i: u32) -> bool {
        self.calls_of(i) == 0
            || (self.log.open_name() == self.auto.g().functions.get(i as usize).map(String::as_str)
                && self.log.open_is_new())
    }

    /// True when the call in progress on `stack` (if any) is of a function called before.
    fn in_risky_call(&self, stack: &[Frame]) -> bool {
        open_call(self.auto.g(), stack).is_some_and(|(_, i)| self.calls_of(i) > 0)
    }

    /// True when `log` (the log after some symbols) and a stack of `states` show a position
    /// from which the output ends, starting no call, within `limit - used` tokens, with every
    /// call distinct.
    fn goal(&self, states: &[Stack], log: &CallLog, used: u32) -> bool {
        if log.broken || used > self.limit {
            return false;
        }
        let risky = log.open_risky();
        let named = log.open_name().is_some();
        let nc = self.auto.no_calls_completer();
        states.iter().any(|s| {
            if risky || (!named && self.in_risky_call(s)) {
                // In a call made before: a value it can still make new.
                self.stack_stays_new(s, self.limit - used)
            } else {
                let r = nc.remaining(s);
                r < INF && used.saturating_add(r) <= self.limit
            }
        })
    }

    /// True when lexeme `lex` in state `state`, a value of a call with `need - 1` earlier calls
    /// of its function, can take `need` distinct plain next characters, each without raising
    /// its cost, and its shortest completion plus one character and `below` (the frames
    /// under it, with no new call) fits the limit: one of those characters makes the call new.
    fn lexeme_stays_new(&self, lex: u32, state: u32, need: usize, below: u32, limit: u32) -> bool {
        use crate::grammar::dfa::Dfa;
        let comp = self.auto.completer();
        let dfa = &self.auto.g().lexemes[lex as usize];
        let here = comp.lex_rest(lex, state);
        if need > PLAIN.len() || here >= INF || here.saturating_add(1).saturating_add(below) > limit
        {
            return false;
        }
        let spare = PLAIN
            .iter()
            .filter(|&&c| {
                comp.usable(c) && {
                    let n = dfa.next(state, c);
                    n != Dfa::DEAD && comp.lex_rest(lex, n) <= here
                }
            })
            .count();
        spare >= need
    }

    /// [`Ctx::lexeme_stays_new`] on stack `s` (after a token): its top is a value lexeme of a
    /// call of a function called before.
    fn stack_stays_new(&self, s: &[Frame], limit: u32) -> bool {
        let g = self.auto.g();
        let (Some((k, i)), Some(Frame::Lex { lex, state })) = (open_call(g, s), s.last()) else {
            return false;
        };
        let calls = self.calls_of(i);
        if calls == 0 || k + 1 >= s.len() || !in_args(g, &s[k + 1..]) {
            return false;
        }
        let below = self.value_below(s);
        below < INF && self.lexeme_stays_new(*lex, *state, calls + 1, below, limit)
    }

    /// The tokens the frames under the value lexeme on top of `s` need once it is complete,
    /// with no call after it: the no-calls count, and never less than the budget's own count
    /// (the grammar's completer), so that the spare token the value rule counts on is one the
    /// budget's mask leaves too.
    fn value_below(&self, s: &[Frame]) -> u32 {
        let nc = self.auto.no_calls_completer().remaining_below(s);
        nc.max(self.auto.completer().remaining_below(s))
    }

    /// True when, after `token` (whose states are `next`, `None` for the end), the output can
    /// end with distinct calls within the limit: the token leaves a value lexeme of a call
    /// made before that can still become new ([`Ctx::stack_stays_new`]), or the bounded
    /// search finds a way.
    pub(crate) fn token_ok(&self, token: TokenId, next: Option<&[Stack]>) -> bool {
        self.check_token(token, next, SEARCH_NODES).is_ok()
    }

    /// [`Ctx::token_ok`], its search expanding at most `cap` states; why not where not.
    fn check_token(&self, token: TokenId, next: Option<&[Stack]>, cap: usize) -> Result<(), Miss> {
        match next {
            None if self.log.may_end() => Ok(()),
            None => Err(Miss::None),
            Some(next) => self.check_after(next, self.log_after(token), cap),
        }
    }

    /// The log after `token`.
    /// True when `token`, with `next` the states after it, keeps the calls distinct whatever
    /// the call in progress becomes: no call ends along any stack while it is read
    /// ([`may_end_call`]), and some stack after it is outside calls or in a call of a
    /// function not called yet, from where the output ends with no further call within the
    /// limit (the no-call completer's count, which names that completion). One more step over
    /// the token's symbols instead of a search; a token that closes a key or a value inside a
    /// new call is the common case.
    fn keeps_calls_new(&self, states: &[Stack], token: TokenId, next: &[Stack]) -> bool {
        if self.log.broken {
            return false;
        }
        let g = self.auto.g();
        let nc = self.auto.no_calls_completer();
        let no_call_open = self.log.open_name().is_none();
        let fits = next.iter().any(|t| {
            let fresh = match open_call(g, t) {
                Some((_, i)) => self.calls_of(i) == 0,
                None => no_call_open,
            };
            fresh && nc.remaining(t) <= self.limit
        });
        fits && !may_end_call(g, states, &self.auto.token_symbols(states, token))
    }

    fn log_after(&self, token: TokenId) -> CallLog {
        let mut log = self.log.clone();
        log.push_token(&self.auto.shared.vocab, token);
        log
    }

    /// [`Ctx::check_token`] for a token whose states are `next` and log `log`.
    fn check_after(&self, next: &[Stack], log: CallLog, cap: usize) -> Result<(), Miss> {
        self.way_after(next, log, cap).map(|_| ())
    }

    /// [`Ctx::check_after`], with the bytes of the way its search found (`None` where the
    /// value rule, [`Ctx::stack_stays_new`], admitted the token).
    fn way_after(&self, next: &[Stack], log: CallLog, cap: usize) -> Result<Option<Vec<u8>>, Miss> {
        if log.broken {
            return Err(Miss::None);
        }
        let open = log.open_name().map(|n| log.count(n));
        if open.is_some_and(|c| c > 0) && next.iter().any(|s| self.stack_stays_new(s, self.limit)) {
            return Ok(None);
        }
        let way = self.search_within(next, log, cap)?;
        Ok(Some(way.iter().map(|&b| b as u8).collect()))
    }

    /// True when one of the `known` ways (newest first) leads to a goal after a token with
    /// bytes `token` (`None`: a special token), states `next` and calls `log`: the way after
    /// the token's own bytes where they begin it, else the way after the bytes of the token
    /// that found it ([`Ctx::replay`]).
    fn replay_known(
        &self,
        known: &[(usize, Vec<u8>)],
        token: Option<&[u8]>,
        next: &[Stack],
        log: &CallLog,
    ) -> bool {
        !log.broken
            && known.iter().rev().any(|(len, way)| {
                let rest = match token {
                    Some(b) if way.starts_with(b) => &way[b.len()..],
                    _ => &way[*len..],
                };
                self.replay(next, log.clone(), rest)
            })
    }

    /// Best-first search over single bytes for a [`Ctx::goal`]: states in order of the fewest
    /// tokens that spell the bytes written plus the fewest tokens still needed (ties: the
    /// nearer to the end first),
    /// at most [`SEARCH_NODES`] expanded. Returns the bytes to the goal (none where `states`
    /// are one), every prefix of them leaving the calls distinct.
    pub(crate) fn search(&self, states: &[Stack], log: CallLog) -> Option<Vec<Sym>> {
        self.search_within(states, log, SEARCH_NODES).ok()
    }

    /// [`Ctx::search`] expanding at most `cap` states (counted in `spent`).
    fn search_within(&self, states: &[Stack], log: CallLog, cap: usize) -> Result<Vec<Sym>, Miss> {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        if self.goal(states, &log, 0) {
            return Ok(Vec::new());
        }
        let Some(h0) = self.start_cost(states) else {
            return Err(Miss::None);
        };
        let vocab = &self.auto.shared.vocab;
        let mut nodes = vec![SearchNode {
            states: states.to_vec(),
            log,
            spelling: Spelling::start(h0),
        }];
        // (tokens + cost, cost, order found, node).
        let mut open = BinaryHeap::new();
        open.push(Reverse((h0, h0, 0usize, 0usize)));
        let mut expanded = 0usize;
        // States and calls seen (whitespace and other bytes reach the same ones many ways).
        let mut visited: rustc_hash::FxHashSet<(Vec<Stack>, LogKey)> = Default::default();
        while let Some(Reverse((_, _, _, at))) = open.pop() {
            if expanded >= cap {
                return Err(Miss::Bound);
            }
            expanded += 1;
            self.spent.set(self.spent.get() + 1);
            if nodes[at].spelling.bytes.len() >= SEARCH_DEPTH {
                continue;
            }
            // (least tokens in all, cost from here, tokens so far, byte, states, live starts).
            type Cand<'s> = (u32, u32, u32, Sym, &'s [Stack], Vec<(u32, TokenPrefix)>);
            let steps = self.auto.byte_steps(&nodes[at].states, FIRST);
            let mut cands: Vec<Cand> = Vec::new();
            for (sym, after, h) in steps.iter() {
                let here = &nodes[at].spelling;
                let (spelled, live) = here.spell_next(vocab, *sym as u8, *h, self.limit);
                let least = here.least_tokens(&live, spelled, *h);
                if least <= self.limit {
                    cands.push((least, *h, spelled, *sym, after, live));
                }
            }
            // Whitespace only where nothing else can come (it never makes a call new, and its
            // many spellings would fill the search); then the cheapest few, in the order tried
            // (enough different bytes to make a value new).
            let ws = |s: Sym| matches!(s, 0x20 | 0x09 | 0x0a | 0x0d);
            if cands.iter().any(|c| !ws(c.3)) {
                cands.retain(|c| !ws(c.3));
            }
            cands.sort_by_key(|c| (c.0, c.1));
            cands.truncate(SEARCH_BRANCHES);
            for (least, h, spelled, sym, st, live) in cands {
                let mut log = nodes[at].log.clone();
                log.push_sym(sym);
                let st = st.to_vec();
                if log.broken || !visited.insert((st.clone(), log.key())) {
                    continue;
                }
                // A goal only where the bytes so far are whole tokens.
                let found = spelled < INF && self.goal(&st, &log, spelled);
                let spelling = nodes[at].spelling.child(sym as u8, spelled, h, live);
                if found {
                    return Ok(spelling.bytes.iter().map(|&b| Sym::from(b)).collect());
                }
                nodes.push(SearchNode {
                    states: st,
                    log,
                    spelling,
                });
                let id = nodes.len() - 1;
                open.push(Reverse((least, h, id, id)));
            }
        }
        Err(Miss::None)
    }

    /// The fewest tokens a completion from `states` needs; `None` where none fits the limit.
    fn start_cost(&self, states: &[Stack]) -> Option<u32> {
        let h0 = self.auto.completer().remaining_any(states);
        (h0 < INF && h0 <= self.limit).then_some(h0)
    }

    /// True when the bytes of `path`, written from `states` with calls `log`, reach a
    /// [`Ctx::goal`] (at their end or before) by the search's own checks, byte by byte: the
    /// completion a search found from another position, tried again from this one at the
    /// price of one step per byte (a search tries every byte at every step).
    fn replay(&self, states: &[Stack], mut log: CallLog, path: &[u8]) -> bool {
        if self.goal(states, &log, 0) {
            return true;
        }
        let Some(h0) = self.start_cost(states) else {
            return false;
        };
        let g = self.auto.g();
        let comp = self.auto.completer();
        let vocab = &self.auto.shared.vocab;
        let mut spelling = Spelling::start(h0);
        let mut now = states.to_vec();
        let mut out = Vec::new();
        for &b in path.iter().take(SEARCH_DEPTH) {
            if !comp.usable(b) {
                return false;
            }
            advance(g, &now, Sym::from(b), &mut out);
            if out.is_empty() {
                return false;
            }
            let h = comp.remaining_any(&out);
            if h >= INF {
                return false;
            }
            let (spelled, live) = spelling.spell_next(vocab, b, h, self.limit);
            if spelling.least_tokens(&live, spelled, h) > self.limit {
                return false;
            }
            log.push_sym(Sym::from(b));
            if log.broken {
                return false;
            }
            if spelled < INF && self.goal(&out, &log, spelled) {
                return true;
            }
            spelling.push(b, spelled, h, live);
            std::mem::swap(&mut now, &mut out);
        }
        false
    }

    /// The tokens of `mask` (the grammar's mask, under the budget) for the states `states`
    /// after which no output with distinct calls fits, in increasing order (`mask` itself is
    /// left as it is: the caller removes them, or keeps a witness where they are all of it).
    /// `next` gives a token's states (`None` when refused, `Some(None)` for the end); `scratch`
    /// holds two masks reused between calls.
    pub(crate) fn filter(
        &self,
        states: &[Stack],
        mask: &TokenMask,
        next: &dyn Fn(TokenId) -> Option<Option<Vec<Stack>>>,
        scratch: &mut FilterScratch,
    ) -> Vec<TokenId> {
        let g = self.auto.g();
        let vocab = &self.auto.shared.vocab;
        let nc = self.auto.no_calls_completer();
        // No token can leave a new call that cannot end within the longest token.
        let longest = self.auto.longest_token();
        let sym = self.auto.symbol_completer();
        if !self.log.open_risky()
            && states.iter().all(|s| match open_call(g, s) {
                Some((k, i)) => {
                    k + 1 < s.len() && self.new_call(i) && sym.remaining(&s[k + 1..]) > longest
                }
                None => false,
            })
        {
            return Vec::new();
        }
        // Tokens accepted by the cheap rules.
        let n = mask.len();
        let FilterScratch(ok, scratch) = scratch;
        for m in [&mut *ok, &mut *scratch] {
            if m.len() != n {
                *m = TokenMask::new(n);
            }
            m.clear();
        }
        let open_risky = self.log.open_risky();
        for s in states {
            let top = &s[s.len() - 1];
            let call = open_call(g, s);
            let Some((k, i)) = call else {
                // Outside any call, in a frame that holds no call (text, a marker): a token that
                // stays in the frame starts and ends no call, so the calls stay as they are
                // (distinct, the log not broken and no call open); the local tokens whose cost
                // fits with no call after them.
                if self.log.broken || self.log.open_name().is_some() {
                    continue;
                }
                let below = nc.remaining_below(s);
                if below >= INF {
                    continue;
                }
                if frame_starts_no_call(g, self.auto.call_nodes(), top) {
                    let local = self.auto.local(top);
                    for (c, set) in &self.auto.local_costs(top, &local).groups {
                        if c.saturating_add(below) <= self.limit {
                            set.or_into(ok);
                        }
                    }
                } else {
                    // A frame that may start calls: its tokens that cannot start one (no byte a
                    // call starts with), where ending with no new call fits.
                    scratch.clear();
                    for (c, set) in &self.auto.no_call_costs(top).groups {
                        if c.saturating_add(below) <= self.limit {
                            set.or_into(scratch);
                        }
                    }
                    let quiet = self.auto.quiet_tokens();
                    for (w, (a, q)) in ok
                        .words
                        .iter_mut()
                        .zip(scratch.words.iter().zip(&quiet.words))
                    {
                        *w |= a & q;
                    }
                }
                continue;
            };
            if k + 1 >= s.len() {
                continue;
            }
            let local = self.auto.local(top);
            let below = nc.remaining_below(s);
            if below >= INF {
                continue;
            }
            if self.new_call(i) && !open_risky {
                // A new call: the local tokens whose cost fits.
                for (c, set) in &self.auto.local_costs(top, &local).groups {
                    if c.saturating_add(below) <= self.limit {
                        set.or_into(ok);
                    }
                }
            } else if let (Frame::Lex { lex, .. }, true) = (top, in_args(g, &s[k + 1..])) {
                // A value of a call made before: tokens after which the lexeme keeps more
                // distinct plain next characters than there are earlier calls.
                let need = self.calls_of(i) + 1;
                let below = self.value_below(s);
                if below >= INF {
                    continue;
                }
                scratch.clear();
                local.allowed.or_into(scratch);
                let dfa = &g.lexemes[*lex as usize];
                let Frame::Lex { state, .. } = top else {
                    continue;
                };
                let mut memo: rustc_hash::FxHashMap<u32, bool> = Default::default();
                for t in scratch.iter() {
                    if !mask.is_allowed(t) || ok.is_allowed(t) {
                        continue;
                    }
                    let Some(bytes) = vocab.token_bytes(t) else {
                        continue;
                    };
                    let mut st = *state;
                    for &b in bytes {
                        st = dfa.next(st, b);
                        if st == crate::grammar::dfa::Dfa::DEAD {
                            break;
                        }
                    }
                    if st == crate::grammar::dfa::Dfa::DEAD {
                        continue;
                    }
                    let good = *memo.entry(st).or_insert_with(|| {
                        self.lexeme_stays_new(*lex, st, need, below, self.limit)
                    });
                    if good {
                        ok.set(t);
                    }
                }
            }
        }
        let vocab_len = vocab.len();
        let mut remove = Vec::new();
        // The states and calls after tokens whose search hit its bound.
        let mut bounded: rustc_hash::FxHashSet<(Vec<Stack>, LogKey)> = Default::default();
        // The ways found from here so far, newest last: a token's bytes, then the way its
        // search found after it (the token's length, the bytes). Each later token tries them
        // before a search of its own: tokens that differ only in whitespace or in how much of
        // a name they spell mostly share one.
        let mut known: Vec<(usize, Vec<u8>)> = Vec::new();
        for t in mask.iter() {
            if (t as usize) < vocab_len && ok.is_allowed(t) {
                continue;
            }
            let left = FILTER_NODES.saturating_sub(self.spent.get());
            if left == 0 && known.is_empty() {
                // The searches' shared bound is spent: the rest is removed unchecked.
                remove.push(t);
                continue;
            }
            let bytes = vocab.token_bytes(t).filter(|_| !vocab.is_special(t));
            let good = match next(t) {
                None => false,
                Some(None) => self.check_token(t, None, 0).is_ok(),
                Some(Some(nx)) if self.keeps_calls_new(states, t, &nx) => true,
                Some(Some(nx)) => {
                    let log = self.log_after(t);
                    // Another token to the same states and calls had a search that hit its
                    // bound: so would this one's; removed unchecked. (The calls matter: two
                    // digits leave a number lexeme in one state, but only one may repeat.)
                    let key = (nx, log.key());
                    if self.replay_known(&known, bytes, &key.0, &log) {
                        true
                    } else if left == 0 || bounded.contains(&key) {
                        false
                    } else {
                        match self.way_after(&key.0, log, SEARCH_NODES.min(left)) {
                            Ok(way) => {
                                if let (Some(way), Some(b)) = (way, bytes) {
                                    remember_way(&mut known, b, &way);
                                }
                                true
                            }
                            Err(Miss::Bound) => {
                                bounded.insert(key);
                                false
                            }
                            Err(Miss::None) => false,
                        }
                    }
                }
            };
            if !good {
                remove.push(t);
            }
        }
        remove
    }
}

impl Ctx<'_> {
    /// [`crate::DistinctCalls::End`]: the tokens of `mask` (the grammar's, under the budget)
    /// for the states `states` after which the output cannot go on as the rule asks, in
    /// increasing order. Before a repeat: a token that completes one is kept only where, after
    /// it, some stack is outside calls and the output ends from there with no further call
    /// within the limit (the no-calls completer's count, which names that completion); every
    /// other token keeps the calls as they were or adds a new one. After a repeat (the log
    /// closed): a token is kept only where it starts no call and such an ending fits.
    ///
    /// Only the tokens that may end or start a call are checked one by one: along each stack,
    /// the tokens its top frame takes alone where the call in progress needs more than that
    /// frame, in a new call (or outside calls) the tokens too short to hold a whole call,
    /// outside calls those of a frame that starts none and the tokens with no byte a call can
    /// start with, change no call. A checked token is read by the parser only where a call may
    /// end along it ([`Ctx::end_token_ok`]). A broken log (the
    /// parser refused the output) removes nothing.
    pub(crate) fn filter_end(
        &self,
        states: &[Stack],
        mask: &TokenMask,
        next: &dyn Fn(TokenId) -> Option<Option<Vec<Stack>>>,
        scratch: &mut FilterScratch,
    ) -> Vec<TokenId> {
        if self.log.broken {
            return Vec::new();
        }
        let g = self.auto.g();
        let nc = self.auto.no_calls_completer();
        let sym = self.auto.symbol_completer();
        let longest = self.auto.longest_token();
        let closed = self.log.closed;
        // No token can leave a call that cannot end within the longest token.
        if !closed
            && states.iter().all(|s| match open_call(g, s) {
                Some((k, _)) => k + 1 < s.len() && sym.remaining(&s[k + 1..]) > longest,
                None => false,
            })
        {
            return Vec::new();
        }
        let n = mask.len();
        let FilterScratch(safe, one) = scratch;
        for m in [&mut *safe, &mut *one] {
            if m.len() != n {
                *m = TokenMask::new(n);
            }
            m.clear();
        }
        if closed {
            // `safe`: the tokens that a stack outside calls takes in its top frame, starting
            // no call, where ending from there with no call fits (a union: each names its
            // completion).
            for s in states {
                let top = &s[s.len() - 1];
                let below = nc.remaining_below(s);
                if open_call(g, s).is_some() || below >= INF {
                    continue;
                }
                if frame_starts_no_call(g, self.auto.call_nodes(), top) {
                    let local = self.auto.local(top);
                    for (c, set) in &self.auto.local_costs(top, &local).groups {
                        if c.saturating_add(below) <= self.limit {
                            set.or_into(safe);
                        }
                    }
                } else {
                    one.clear();
                    for (c, set) in &self.auto.no_call_costs(top).groups {
                        if c.saturating_add(below) <= self.limit {
                            set.or_into(one);
                        }
                    }
                    let quiet = self.auto.quiet_tokens();
                    for (w, (a, q)) in safe
                        .words
                        .iter_mut()
                        .zip(one.words.iter().zip(&quiet.words))
                    {
                        *w |= a & q;
                    }
                }
            }
        } else {
            // `safe`: the tokens that change no call along any stack (an intersection).
            safe.words.iter_mut().for_each(|w| *w = !0);
            for s in states {
                let top = &s[s.len() - 1];
                one.clear();
                match open_call(g, s) {
                    Some((k, i)) => {
                        if k + 1 < s.len() && sym.remaining_below(&s[k + 1..]) > 0 {
                            self.auto.local(top).allowed.or_into(one);
                        }
                        if self.new_call(i) && !self.log.open_risky() {
                            // Ending a new call repeats nothing, and a token too short to
                            // hold a whole call completes no other.
                            let short = &self.auto.shorter_than_calls().words;
                            for (w, h) in one.words.iter_mut().zip(short) {
                                *w |= h;
                            }
                        }
                    }
                    None => {
                        if frame_starts_no_call(g, self.auto.call_nodes(), top) {
                            self.auto.local(top).allowed.or_into(one);
                        }
                        // Tokens that cannot start a call, or hold a whole one.
                        let quiet = &self.auto.quiet_tokens().words;
                        let short = &self.auto.shorter_than_calls().words;
                        for (w, (q, h)) in one.words.iter_mut().zip(quiet.iter().zip(short)) {
                            *w |= q | h;
                        }
                    }
                }
                for (w, o) in safe.words.iter_mut().zip(&one.words) {
                    *w &= o;
                }
            }
        }
        let vocab = &self.auto.shared.vocab;
        let mut remove = Vec::new();
        for t in mask.iter() {
            if (t as usize) < vocab.len() && safe.is_allowed(t) {
                continue;
            }
            let good = match next(t) {
                None => false,
                Some(nx) => self.end_token_ok(states, t, nx.as_deref()),
            };
            if !good {
                remove.push(t);
            }
        }
        remove
    }

    /// [`crate::DistinctCalls::End`] for one token read from `states`, whose states are `next`
    /// (`None` for the end): where the calls are closed, some stack after it is outside calls
    /// with an ending that starts no call within the limit; and where a call may end along
    /// the token ([`may_end_call`]), the parser takes it, no call starts after a repeat, and
    /// where the token completes one, that ending fits too. (A token along which no call ends
    /// completes no repeat: the parser, whose copy costs the output's length, is left out.)
    pub(crate) fn end_token_ok(
        &self,
        states: &[Stack],
        token: TokenId,
        next: Option<&[Stack]>,
    ) -> bool {
        let Some(next) = next else {
            return self.log.may_end();
        };
        let g = self.auto.g();
        let nc = self.auto.no_calls_completer();
        let ends_with_no_call = || {
            next.iter()
                .any(|t| open_call(g, t).is_none() && nc.remaining(t) <= self.limit)
        };
        if self.log.closed && !ends_with_no_call() {
            return false;
        }
        if !may_end_call(g, states, &self.auto.token_symbols(states, token)) {
            return true;
        }
        let after = self.log_after(token);
        !after.broken && (!after.closed || ends_with_no_call())
    }
}

/// The two scratch masks of [`Ctx::filter`], kept by a matcher between masks (a clone starts
/// with none: they hold nothing from one call to the next).
#[derive(Debug)]
pub(crate) struct FilterScratch(TokenMask, TokenMask);

impl Default for FilterScratch {
    fn default() -> Self {
        FilterScratch(TokenMask::new(0), TokenMask::new(0))
    }
}

impl Clone for FilterScratch {
    fn clone(&self) -> Self {
        FilterScratch::default()
    }
}
