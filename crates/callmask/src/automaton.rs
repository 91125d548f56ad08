//! Byte-level matching over a compiled grammar: a stack machine whose frames are JSON containers
//! and lexemes.
//!
//! A matcher state is a small set of stacks (more than one only while `anyOf`/`oneOf`
//! alternatives are undecided). Each stack starts with a [`Frame::Root`]; objects and arrays push
//! frames, lexemes (strings, numbers, literals) are one frame holding a [`Dfa`] state.
//! Every state reachable from the start can still be completed: lexeme automata are trimmed and
//! containers only take a byte that keeps a completion possible, so the token mask never leads
//! the model into a dead end.
//!
//! Whitespace policy: between JSON tokens (and before/after the top-level value), as
//! [`crate::grammar::Whitespace`] says: by default spaces and tabs, at most one line break, and
//! an indentation bounded by the nesting depth ([`GrammarInner::gap_ws`]).

pub(crate) mod complete;

pub use crate::error::Rejection;
use crate::grammar::dfa::fresh::{self, literal_value};
use crate::grammar::dfa::{Dfa, StateId};
use crate::grammar::{
    is_gap_ws, is_ws, Grammar, GrammarInner, LexId, Node, NodeId, ObjectNode, GAP_CLOSED, GAP_NL,
};
use std::sync::Arc;

/// Key id for a key matched by an object's `additionalProperties`; with kinds of extra keys
/// (`ObjectNode::extra_kinds`), kind `i` is `ADDITIONAL - i` (see [`is_extra`]).
pub(crate) const ADDITIONAL: u32 = u32::MAX;
/// Most kinds of extra keys one object may have (`patternProperties` makes at most 16).
const MAX_EXTRA_KINDS: u32 = 64;

/// True for a key id that stands for an extra key (of some kind).
pub(crate) fn is_extra(k: u32) -> bool {
    k > ADDITIONAL - MAX_EXTRA_KINDS
}

/// The value node of extra key id `k` (see [`is_extra`]), if extra keys are allowed.
pub(crate) fn extra_value(o: &ObjectNode, k: u32) -> Option<NodeId> {
    if o.extra_kinds.is_empty() {
        o.additional.map(|a| a.1)
    } else {
        o.extra_kinds.get((ADDITIONAL - k) as usize).map(|x| x.1)
    }
}

/// The key id of a complete extra key whose decoded name is `name`.
fn extra_key_id(o: &ObjectNode, name: &[u8]) -> Option<u32> {
    if o.extra_kinds.is_empty() {
        return Some(ADDITIONAL);
    }
    o.extra_kinds
        .iter()
        .position(|(d, _)| d.matches(name))
        .map(|i| ADDITIONAL - i as u32)
}
/// No position in a key trie.
pub(crate) const NO_TRIE: u32 = u32::MAX;

/// The keys of an object already used: listed keys by id (in sorted-key order), and the other
/// keys (`additionalProperties`) by value, so that no key is written twice.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Seen {
    listed: Listed,
    /// Keys matched by `additionalProperties` (absent until the first byte of one).
    extra: Option<Arc<Literals>>,
}

/// Listed key ids already used.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Listed {
    Small(u64),
    Large(Arc<[u64]>),
}

/// Literals of one container that must all differ (an object's `additionalProperties` keys, a
/// `uniqueItems` array's strings): those written (decoded, sorted) and the bytes of the one
/// being written.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Literals {
    /// Shared between the frames of one container, so that a byte of the literal being written
    /// copies only that literal.
    done: Arc<Vec<Vec<u8>>>,
    current: Vec<u8>,
    /// The complete characters of `current` already make it a prefix of no value in `done`:
    /// whatever it ends as is fresh, and no more search is needed (a function of the two
    /// fields above, so equal states stay equal).
    diverged: bool,
}

impl Literals {
    /// These literals with `byte` added to the one being written.
    fn with_byte(&self, byte: u8) -> Literals {
        let mut current = Vec::with_capacity(self.current.len() + 1);
        current.extend_from_slice(&self.current);
        current.push(byte);
        let diverged = self.diverged || fresh::diverges(&current, &self.done);
        Literals {
            done: self.done.clone(),
            current,
            diverged,
        }
    }

    /// These literals with the one being written ended by `byte` and added; `None` when its
    /// value is already there.
    fn ended_by(&self, byte: u8) -> Option<Literals> {
        let mut current = self.current.clone();
        current.push(byte);
        let value = literal_value(&current);
        let at = self.done.binary_search(&value).err()?;
        let mut done = self.done.clone();
        Arc::make_mut(&mut done).insert(at, value);
        Some(Literals {
            done,
            current: Vec::new(),
            diverged: false,
        })
    }

    /// True when the literal being written, at state `state` of lexeme `lex`, can still end
    /// fresh.
    fn can_end_fresh(&self, g: &GrammarInner, lex: LexId, state: StateId) -> bool {
        self.diverged
            || g.lexeme_open(lex)
            || fresh::can_be_fresh(&g.lexemes[lex as usize], state, &self.current, &self.done)
    }
}

impl Seen {
    fn initial(o: &ObjectNode) -> Seen {
        let n = o.keys.len();
        let listed = if n <= 64 {
            let mut w = 0u64;
            for &k in &o.unavailable {
                w |= 1 << k;
            }
            Listed::Small(w)
        } else {
            let mut v = vec![0u64; n.div_ceil(64)];
            for &k in &o.unavailable {
                v[k as usize / 64] |= 1 << (k % 64);
            }
            Listed::Large(v.into())
        };
        Seen {
            listed,
            extra: None,
        }
    }

    #[inline]
    pub(crate) fn contains(&self, k: u32) -> bool {
        match &self.listed {
            Listed::Small(w) => w >> k & 1 == 1,
            Listed::Large(v) => v[k as usize / 64] >> (k % 64) & 1 == 1,
        }
    }

    /// The number of keys written: listed ones (each once, whatever its spellings) and extra
    /// ones. Unavailable keys are marked seen from the start and are not counted.
    pub(crate) fn count_keys(&self, o: &ObjectNode) -> u32 {
        let listed = (0..o.keys.len() as u32)
            .filter(|&k| {
                self.contains(k)
                    && o.unavailable.binary_search(&k).is_err()
                    && o.alias.get(k as usize).is_none_or(|&a| a >= k)
            })
            .count();
        (listed + self.extra.as_ref().map_or(0, |x| x.done.len())) as u32
    }

    /// The set with key `k` added, and its other spellings in `o`, if any.
    fn with_key(&self, o: &ObjectNode, k: u32) -> Seen {
        let mut s = self.with(k);
        if let Some(&first) = o.alias.get(k as usize) {
            for (j, &a) in o.alias.iter().enumerate() {
                if a == first && j as u32 != k {
                    s = s.with(j as u32);
                }
            }
        }
        s
    }

    fn with(&self, k: u32) -> Seen {
        let listed = match &self.listed {
            Listed::Small(w) => Listed::Small(w | 1 << k),
            Listed::Large(v) => {
                let mut v: Vec<u64> = v.to_vec();
                v[k as usize / 64] |= 1 << (k % 64);
                Listed::Large(v.into())
            }
        };
        Seen {
            listed,
            extra: self.without_current(),
        }
    }

    /// The extra keys with no key in progress.
    fn without_current(&self) -> Option<Arc<Literals>> {
        match &self.extra {
            Some(x) if !x.current.is_empty() => Some(Arc::new(Literals {
                done: x.done.clone(),
                current: Vec::new(),
                diverged: false,
            })),
            other => other.clone(),
        }
    }

    /// The bytes of the extra key being written.
    pub(crate) fn current_extra(&self) -> &[u8] {
        self.extra.as_ref().map_or(&[], |x| &x.current)
    }

    /// The extra keys already used (decoded, sorted).
    pub(crate) fn extra_done(&self) -> &[Vec<u8>] {
        self.extra.as_ref().map_or(&[], |x| &x.done[..])
    }

    /// The set with `byte` added to the extra key being written.
    fn with_extra_byte(&self, byte: u8) -> Seen {
        let x = self.extra.as_deref().map_or_else(
            || Literals::default().with_byte(byte),
            |x| x.with_byte(byte),
        );
        Seen {
            listed: self.listed.clone(),
            extra: Some(Arc::new(x)),
        }
    }

    /// The set with the extra key being written, ended by `byte`, added; `None` when that key
    /// is already used.
    fn with_extra_done(&self, byte: u8) -> Option<Seen> {
        let x = match &self.extra {
            Some(x) => x.ended_by(byte)?,
            None => Literals::default().ended_by(byte)?,
        };
        Some(Seen {
            listed: self.listed.clone(),
            extra: Some(Arc::new(x)),
        })
    }

    /// True when some key id in `lo..hi` is not seen.
    fn any_unseen(&self, lo: u32, hi: u32) -> bool {
        if lo >= hi {
            return false;
        }
        let mask = |a: u32, b: u32| -> u64 {
            // bits a..b of a word (0 <= a < b <= 64)
            let hi = if b == 64 { u64::MAX } else { (1u64 << b) - 1 };
            hi & !((1u64 << a) - 1)
        };
        match &self.listed {
            Listed::Small(w) => !w & mask(lo, hi) != 0,
            Listed::Large(v) => {
                let (wl, wh) = (lo / 64, (hi - 1) / 64);
                (wl..=wh).any(|wi| {
                    let a = if wi == wl { lo % 64 } else { 0 };
                    let b = if wi == wh { (hi - 1) % 64 + 1 } else { 64 };
                    !v[wi as usize] & mask(a, b) != 0
                })
            }
        }
    }
}

/// Phase of the top-level frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum RootPhase {
    Before,
    InValue,
    After,
}

/// Phase of an object frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum ObjPhase {
    AfterOpen,
    /// Inside a key: position in the key trie and in the additional-key automaton.
    InKey {
        trie: u32,
        extra: StateId,
    },
    AfterKey(u32),
    AfterColon(u32),
    InValue,
    AfterValue,
    AfterComma,
    Done,
}

impl ObjPhase {
    /// True between the object's tokens, where whitespace may stand (a gap).
    fn is_gap(self) -> bool {
        matches!(
            self,
            ObjPhase::AfterOpen
                | ObjPhase::AfterComma
                | ObjPhase::AfterKey(_)
                | ObjPhase::AfterColon(_)
                | ObjPhase::AfterValue
        )
    }
}

/// Phase of an array frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum ArrPhase {
    AfterOpen,
    InValue,
    /// Inside an item that matches the array's `contains`.
    InMatch,
    /// Inside a string item of a `uniqueItems` array (`ArrayNode::unique_strings`), which the
    /// array frame writes itself: its lexeme and state.
    InString {
        lex: LexId,
        state: StateId,
    },
    AfterValue,
    AfterComma,
    Done,
}

impl ArrPhase {
    /// True between the array's tokens, where whitespace may stand (a gap).
    fn is_gap(self) -> bool {
        matches!(
            self,
            ArrPhase::AfterOpen | ArrPhase::AfterValue | ArrPhase::AfterComma
        )
    }
}

/// One frame of a matcher stack.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Frame {
    Root {
        phase: RootPhase,
        ws: u16,
    },
    Lex {
        lex: LexId,
        state: StateId,
    },
    Obj {
        node: NodeId,
        phase: ObjPhase,
        seen: Seen,
        ws: u16,
    },
    Arr {
        node: NodeId,
        phase: ArrPhase,
        count: u32,
        /// Items that matched `contains` (0 without it).
        matched: u32,
        /// With `ArrayNode::unique_strings`: the strings written (absent until the first).
        strings: Option<Arc<Literals>>,
        ws: u16,
    },
    /// A sequence whose elements before `idx` are done (element `idx - 1` may be on top).
    Seq {
        node: NodeId,
        idx: u32,
    },
    /// A repetition with `count` items started.
    Rep {
        node: NodeId,
        count: u32,
    },
    /// A capture around its node; `done` once the node is complete.
    Cap {
        node: NodeId,
        done: bool,
    },
    /// A complete atomic value (a special token), popped at once.
    Done,
}

impl Frame {
    /// This frame with its gap state (a root's, object's or array's `ws`) set to `ws`.
    fn with_gap_state(&self, ws: u16) -> Frame {
        let mut f = self.clone();
        if let Frame::Root { ws: w, .. } | Frame::Obj { ws: w, .. } | Frame::Arr { ws: w, .. } =
            &mut f
        {
            *w = ws;
        }
        f
    }
}

/// An input symbol: a byte (0-255), or `SPECIAL + i` for the grammar's special token `i`.
pub(crate) type Sym = u16;
/// The first special-token symbol.
pub(crate) const SPECIAL: Sym = 256;

/// A matcher stack, bottom first.
pub(crate) type Stack = Vec<Frame>;

/// Frames a copied stack has room for beyond its own: a step usually pushes one or two (a
/// value started inside a sequence, a union's alternative), and a copy without that room
/// grows (a reallocation and a second copy) on its first push.
const STACK_ROOM: usize = 4;

/// A copy of `stack` with room to grow ([`STACK_ROOM`]).
fn copy_stack(stack: &[Frame]) -> Stack {
    let mut s = Vec::with_capacity(stack.len() + STACK_ROOM);
    s.extend_from_slice(stack);
    s
}

/// Spare stacks a [`StepOut`] keeps at most.
const SPARE_STACKS: usize = 64;

/// Where a step writes the stacks it makes: the output, and spare stacks (empty, allocated)
/// whose buffers the new stacks reuse. A first mask's walk steps once per trie node it visits;
/// with the stacks of the steps before handed back as spares, a step allocates nothing.
pub(crate) struct StepOut<'a> {
    stacks: &'a mut Vec<Stack>,
    spare: &'a mut Vec<Stack>,
    /// Whether a union of captured objects of one shape starts as one merged frame (token
    /// walks only: see [`crate::grammar::MergedUnion::caps`]).
    merge_captured: bool,
}

impl StepOut<'_> {
    /// A copy of `stack`, in a spare buffer where there is one.
    fn copy(&mut self, stack: &[Frame]) -> Stack {
        match self.spare.pop() {
            Some(mut s) => {
                s.extend_from_slice(stack);
                s
            }
            None => copy_stack(stack),
        }
    }

    /// `stack` with its top frame replaced by `top`.
    fn with_top(&mut self, stack: &[Frame], top: Frame) -> Stack {
        let mut s = self.copy(&stack[..stack.len() - 1]);
        s.push(top);
        s
    }

    /// Outputs `stack`.
    fn push(&mut self, stack: Stack) {
        self.stacks.push(stack);
    }

    /// Outputs `stack` with its top frame replaced by `top`.
    fn push_with_top(&mut self, stack: &[Frame], top: Frame) {
        let s = self.with_top(stack, top);
        self.stacks.push(s);
    }

    /// Keeps `stack`'s buffer for a later copy.
    fn recycle(&mut self, stack: Stack) {
        recycle(self.spare, stack);
    }
}

/// Keeps `stack`'s buffer, emptied, in `spare` (up to [`SPARE_STACKS`]).
fn recycle(spare: &mut Vec<Stack>, mut stack: Stack) {
    if spare.len() < SPARE_STACKS && stack.capacity() > 0 {
        stack.clear();
        spare.push(stack);
    }
}

impl GrammarInner {
    /// See [`GrammarInner::open`].
    fn lexeme_open(&self, lex: LexId) -> bool {
        *self.open[lex as usize].get_or_init(|| fresh::always_open(&self.lexemes[lex as usize]))
    }

    fn object(&self, node: NodeId) -> &ObjectNode {
        match &self.nodes[node as usize] {
            Node::Object(o) => o,
            _ => unreachable!("object frame on a non-object node"),
        }
    }

    fn array(&self, node: NodeId) -> &crate::grammar::ArrayNode {
        match &self.nodes[node as usize] {
            Node::Array(a) => a,
            _ => unreachable!("array frame on a non-array node"),
        }
    }

    fn seq(&self, node: NodeId) -> &[NodeId] {
        match &self.nodes[node as usize] {
            Node::Seq(e) => e,
            _ => unreachable!("sequence frame on a non-sequence node"),
        }
    }

    fn repeat(&self, node: NodeId) -> (NodeId, u32, u32) {
        match &self.nodes[node as usize] {
            Node::Repeat { item, min, max } => (*item, *min, *max),
            _ => unreachable!("repeat frame on a non-repeat node"),
        }
    }

    fn captured(&self, node: NodeId) -> NodeId {
        match &self.nodes[node as usize] {
            Node::Capture(_, n) => *n,
            _ => unreachable!("capture frame on a non-capture node"),
        }
    }

    /// The start stack.
    pub(crate) fn start_stack(&self) -> Stack {
        vec![Frame::Root {
            phase: RootPhase::Before,
            ws: 0,
        }]
    }

    /// True when `frame` holds a complete value (it may be popped).
    #[inline]
    pub(crate) fn is_complete(&self, frame: &Frame) -> bool {
        match frame {
            Frame::Lex { lex, state } => self.lexemes[*lex as usize].is_accepting(*state),
            Frame::Obj { phase, .. } => *phase == ObjPhase::Done,
            Frame::Arr { phase, .. } => *phase == ArrPhase::Done,
            Frame::Root { phase, .. } => {
                *phase == RootPhase::After
                    || (*phase == RootPhase::Before && self.nullable[self.root as usize])
            }
            Frame::Seq { node, idx } => self.seq(*node)[*idx as usize..]
                .iter()
                .all(|&e| self.nullable[e as usize]),
            Frame::Rep { node, count } => {
                let (item, min, _) = self.repeat(*node);
                *count >= min || self.nullable[item as usize]
            }
            Frame::Cap { node, done } => *done || self.nullable[self.captured(*node) as usize],
            Frame::Done => true,
        }
    }

    /// True when `frame` is complete and can take no further byte.
    fn is_final(&self, frame: &Frame) -> bool {
        match frame {
            Frame::Lex { lex, state } => {
                let d = &self.lexemes[*lex as usize];
                d.is_accepting(*state) && !d.has_out(*state)
            }
            Frame::Obj { phase, .. } => *phase == ObjPhase::Done,
            Frame::Arr { phase, .. } => *phase == ArrPhase::Done,
            Frame::Root { .. } => false,
            Frame::Seq { node, idx } => *idx as usize == self.seq(*node).len(),
            Frame::Rep { node, count } => *count == self.repeat(*node).2,
            Frame::Cap { done, .. } => *done,
            Frame::Done => true,
        }
    }

    /// Tells the parent (top of `stack`) that its child value is complete.
    pub(crate) fn child_done(parent: &mut Frame) {
        match parent {
            Frame::Root { phase, ws } => {
                *phase = RootPhase::After;
                *ws = 0;
            }
            Frame::Obj { phase, ws, .. } => {
                *phase = ObjPhase::AfterValue;
                *ws = 0;
            }
            Frame::Arr {
                phase,
                count,
                matched,
                ws,
                ..
            } => {
                if *phase == ArrPhase::InMatch {
                    *matched += 1;
                }
                *phase = ArrPhase::AfterValue;
                *count += 1;
                *ws = 0;
            }
            Frame::Cap { done, .. } => *done = true,
            Frame::Seq { .. } | Frame::Rep { .. } => {}
            Frame::Lex { .. } | Frame::Done => unreachable!("a lexeme has no children"),
        }
    }

    /// When the top frame is, for its next bytes, just a lexeme automaton: the automaton, its
    /// state, and what the frame becomes once the lexeme is complete (`None`: it is popped).
    ///
    /// A frame in a gap is its gap's whitespace automaton ([`crate::grammar::GapLexeme`]) in
    /// the state of the gap's length, then the frame with its gap closed ([`GAP_CLOSED`]: no
    /// more whitespace; every other byte taken as before, since none depends on the length).
    pub(crate) fn as_lexeme(&self, frame: &Frame) -> Option<(LexId, StateId, Option<Frame>)> {
        let (space_only, depth, ws) = match frame {
            Frame::Lex { lex, state } => return Some((*lex, *state, None)),
            Frame::Root { phase, ws }
                if self.root_ws
                    && match phase {
                        RootPhase::Before => !matches!(self.nodes[self.root as usize], Node::Never),
                        RootPhase::After => true,
                        RootPhase::InValue => false,
                    } =>
            {
                (false, 0, *ws)
            }
            Frame::Obj {
                node, phase, ws, ..
            } if phase.is_gap() => {
                let space_only = self.object(*node).syntax.space_only;
                (space_only, self.gap_depth(*node), *ws)
            }
            Frame::Arr {
                node, phase, ws, ..
            } if phase.is_gap() => {
                let space_only = self.array(*node).syntax.space_only;
                (space_only, self.gap_depth(*node), *ws)
            }
            // An object key matched by `additionalProperties` alone is not walked as a plain
            // lexeme: whether its closing byte is allowed depends on the object's other extra
            // keys (no key twice), which only `advance` checks.
            _ => return None,
        };
        let (lex, state) = self.gap_state(space_only, depth, ws)?;
        Some((lex, state, Some(frame.with_gap_state(GAP_CLOSED))))
    }

    /// The depth whose gap lexeme a container `node` uses (0 without an indentation policy).
    fn gap_depth(&self, node: NodeId) -> u16 {
        if self.indent.is_some() {
            self.depth[node as usize]
        } else {
            0
        }
    }

    /// The gap lexeme of gaps of spaces only or any whitespace at `depth` (the root's: 0) and
    /// its state in gap state `ws`; `None` without one (a policy too large for one, a closed
    /// gap).
    fn gap_state(&self, space_only: bool, depth: u16, ws: u16) -> Option<(LexId, StateId)> {
        let gap = self.gaps[usize::from(space_only)]
            .get(usize::from(depth))?
            .as_ref()?;
        let state = if ws & GAP_NL != 0 {
            gap.broken.get(usize::from(ws & !GAP_NL))
        } else {
            gap.plain.get(usize::from(ws))
        };
        Some((gap.lex, *state?))
    }

    /// `states` with every full set of a merged call union's alternatives that no value has
    /// started in as the union's merged frame. A matcher keeps one stack per call (`P`, the
    /// call's capture, its object), alike but for the call; token walks carry such a set as one
    /// frame (`P`, the merged object: [`crate::grammar::MergedUnion`]), which takes the same
    /// bytes and has the least of the alternatives' costs, and is walked once instead of once
    /// per call. `None` where no set is full (then nothing merges).
    pub(crate) fn merge_call_stacks(&self, states: &[Stack]) -> Option<Vec<Stack>> {
        if self.merged_cap.is_empty() || states.len() < 2 {
            return None;
        }
        // The stacks of each set, by its merged stack: (stack index, alternative).
        let mut sets: rustc_hash::FxHashMap<Stack, Vec<(usize, u32)>> = Default::default();
        for (i, s) in states.iter().enumerate() {
            let n = s.len();
            if n < 2 {
                continue;
            }
            let (
                Frame::Cap {
                    node: cap,
                    done: false,
                },
                Frame::Obj {
                    node,
                    phase,
                    seen,
                    ws,
                },
            ) = (&s[n - 2], &s[n - 1])
            else {
                continue;
            };
            let before_values = matches!(
                phase,
                ObjPhase::AfterOpen
                    | ObjPhase::InKey { .. }
                    | ObjPhase::AfterKey(_)
                    | ObjPhase::AfterColon(_)
            );
            let Some(&(u, j)) = self.merged_cap.get(cap) else {
                continue;
            };
            if !before_values || self.merged[u as usize].alts[j as usize] != *node {
                continue;
            }
            let mut merged = s[..n - 2].to_vec();
            merged.push(Frame::Obj {
                node: self.merged_base + u,
                phase: *phase,
                seen: seen.clone(),
                ws: *ws,
            });
            sets.entry(merged).or_default().push((i, j));
        }
        // Where each full set's stacks go: the merged stack at its first, nothing at the others.
        let mut at: rustc_hash::FxHashMap<usize, Option<Stack>> = Default::default();
        for (merged, mut members) in sets {
            let Some(Frame::Obj { node, .. }) = merged.last() else {
                continue;
            };
            let alts = self.merged[(*node - self.merged_base) as usize].alts.len();
            members.sort_unstable_by_key(|m| m.1);
            members.dedup_by_key(|m| m.1);
            if members.len() != alts {
                continue;
            }
            let first = members.iter().map(|m| m.0).min().unwrap_or(0);
            for (i, _) in &members {
                at.insert(*i, None);
            }
            at.insert(first, Some(merged));
        }
        if at.is_empty() {
            return None;
        }
        let mut out = Vec::with_capacity(states.len() - at.len() + 1);
        for (i, s) in states.iter().enumerate() {
            match at.remove(&i) {
                Some(Some(merged)) => out.push(merged),
                Some(None) => {}
                None => out.push(s.clone()),
            }
        }
        Some(out)
    }

    /// Pops complete frames that cannot continue, so equal states have equal stacks.
    pub(crate) fn normalize(&self, stack: &mut Stack) {
        while stack.len() > 1 && self.is_final(stack.last().unwrap()) {
            stack.pop();
            Self::child_done(stack.last_mut().unwrap());
        }
    }

    /// True when the stack holds a complete output.
    pub(crate) fn can_end(&self, stack: &[Frame]) -> bool {
        let n = stack.len();
        if !self.is_complete(&stack[n - 1]) {
            return false;
        }
        stack[..n - 1].iter().rev().all(|f| {
            let mut f = f.clone();
            Self::child_done(&mut f);
            self.is_complete(&f)
        })
    }

    /// Every stack that `stack` becomes after `byte`, appended to `out`.
    pub(crate) fn step(&self, stack: &[Frame], sym: Sym, out: &mut Vec<Stack>) {
        self.step_to(
            stack,
            sym,
            &mut StepOut {
                stacks: out,
                spare: &mut Vec::new(),
                merge_captured: false,
            },
        );
    }

    /// [`GrammarInner::step`] into a [`StepOut`].
    fn step_to(&self, stack: &[Frame], sym: Sym, out: &mut StepOut<'_>) {
        let n = stack.len();
        let top = &stack[n - 1];
        self.consume(stack, sym, out);
        // The top value may end here and leave the symbol to its parent.
        let follows = self.pop_any
            || (sym < SPECIAL && (is_ws(sym as u8) || matches!(sym as u8, b',' | b'}' | b']')));
        if n > 1 && follows && self.is_complete(top) {
            let mut parent = out.copy(&stack[..n - 1]);
            Self::child_done(parent.last_mut().unwrap());
            self.step_to(&parent, sym, out);
            out.recycle(parent);
        }
    }

    /// A superset of the bytes `stack` may take (bit `b` of word `b / 64`) where it is known
    /// without stepping, as [`GrammarInner::may_take`] decides them: a stack of the root frame
    /// alone (a JSON Schema grammar's start, after its gap), and an object between its keys and
    /// values (no extra keys in its key phases). `None`: any byte may be taken. A walk reads it
    /// once for a stack that many bytes are tried against (the children of a trie node, a
    /// lexeme's exits), instead of asking `may_take` per byte.
    pub(crate) fn first_bytes(&self, stack: &[Frame]) -> Option<[u64; 4]> {
        fn add(set: &mut [u64; 4], b: u8) {
            set[usize::from(b / 64)] |= 1 << (b % 64);
        }
        let n = stack.len();
        let top = stack.last()?;
        let mut set = [0u64; 4];
        // A complete top may leave the byte to its parent (as in `step_to`).
        if n > 1 && self.is_complete(top) {
            if self.pop_any {
                return None;
            }
            for b in [b' ', b'\t', b'\n', b'\r', b',', b'}', b']'] {
                add(&mut set, b);
            }
        }
        match top {
            Frame::Root { phase, ws } => {
                match phase {
                    RootPhase::Before => {
                        let first = &self.first[self.root as usize];
                        for (w, f) in set.iter_mut().zip(first) {
                            *w |= f;
                        }
                    }
                    RootPhase::InValue | RootPhase::After => {}
                }
                if self.root_ws && *ws != GAP_CLOSED && *phase != RootPhase::InValue {
                    for b in [b' ', b'\t', b'\n', b'\r'] {
                        add(&mut set, b);
                    }
                }
            }
            Frame::Obj { node, phase, .. } => {
                let o = self.object(*node);
                let syn = &o.syntax;
                if phase.is_gap() {
                    for b in [b' ', b'\t', b'\n', b'\r'] {
                        if is_gap_ws(b, syn) {
                            add(&mut set, b);
                        }
                    }
                }
                let key = |set: &mut [u64; 4], trie: u32, extra: StateId| {
                    if extra != Dfa::DEAD && o.additional.is_some() {
                        return false; // an extra key's first bytes: not listed here
                    }
                    if trie != NO_TRIE {
                        for &(b, _) in o.trie.children(trie) {
                            add(set, b);
                        }
                    }
                    true
                };
                match *phase {
                    ObjPhase::AfterOpen | ObjPhase::AfterComma => {
                        add(&mut set, syn.close);
                        if !key(&mut set, 0, self.extra_start(o)) {
                            return None;
                        }
                    }
                    ObjPhase::InKey { trie, extra } => {
                        if !key(&mut set, trie, extra) {
                            return None;
                        }
                    }
                    ObjPhase::AfterKey(_) => {
                        if let Some(c) = syn.colon {
                            add(&mut set, c);
                        }
                    }
                    ObjPhase::AfterValue => {
                        add(&mut set, b',');
                        add(&mut set, syn.close);
                    }
                    ObjPhase::AfterColon(_) | ObjPhase::InValue | ObjPhase::Done => return None,
                }
            }
            _ => return None,
        }
        Some(set)
    }

    /// False when `stack` cannot take `sym` (no stack after it), found without stepping: a
    /// walk offers every child byte of the trie nodes it takes, and most are refused. True when
    /// it may (the step decides): a superset of [`GrammarInner::step`]'s, exact for the frames
    /// most steps start from (a lexeme, the root, an object between its keys and values), and
    /// true for any other frame.
    pub(crate) fn may_take(&self, stack: &[Frame], sym: Sym) -> bool {
        let n = stack.len();
        let top = &stack[n - 1];
        if sym >= SPECIAL {
            return true;
        }
        let byte = sym as u8;
        // A complete top may leave the byte to its parent (as in `step_to`).
        if n > 1
            && (self.pop_any || is_ws(byte) || matches!(byte, b',' | b'}' | b']'))
            && self.is_complete(top)
        {
            return true;
        }
        match top {
            Frame::Lex { lex, state } => {
                self.lexemes[*lex as usize].next(*state, byte) != Dfa::DEAD
            }
            Frame::Root { phase, .. } => match phase {
                RootPhase::Before => {
                    if self.root_ws && is_ws(byte) {
                        !matches!(self.nodes[self.root as usize], Node::Never)
                    } else {
                        self.may_start(self.root, sym)
                    }
                }
                RootPhase::After => self.root_ws && is_ws(byte),
                RootPhase::InValue => false,
            },
            Frame::Obj { node, phase, .. } => {
                let o = self.object(*node);
                let syn = &o.syntax;
                let gap = phase.is_gap();
                if gap && is_gap_ws(byte, syn) {
                    return true;
                }
                let key_byte = |trie: u32, extra: StateId| {
                    (trie != NO_TRIE && o.trie.child(trie, byte).is_some())
                        || (extra != Dfa::DEAD
                            && o.additional.is_some_and(|(lex, _)| {
                                self.lexemes[lex as usize].next(extra, byte) != Dfa::DEAD
                            }))
                };
                match *phase {
                    ObjPhase::AfterOpen | ObjPhase::AfterComma => {
                        byte == syn.close || key_byte(0, self.extra_start(o))
                    }
                    ObjPhase::InKey { trie, extra } => key_byte(trie, extra),
                    ObjPhase::AfterKey(_) => Some(byte) == syn.colon,
                    ObjPhase::AfterValue => byte == b',' || byte == syn.close,
                    ObjPhase::AfterColon(_) | ObjPhase::InValue | ObjPhase::Done => true,
                }
            }
            _ => true,
        }
    }

    /// The top frame takes `sym` itself (possibly pushing a child value).
    fn consume(&self, stack: &[Frame], sym: Sym, out: &mut StepOut<'_>) {
        // Dialect-level frames (root, sequences, repetitions, captures) take special tokens, and
        // objects and arrays where a value starts.
        let byte = if sym < SPECIAL { sym as u8 } else { 0 };
        let is_byte = sym < SPECIAL;
        match &stack[stack.len() - 1] {
            Frame::Lex { lex, state } => {
                if !is_byte {
                    return;
                }
                let next = self.lexemes[*lex as usize].next(*state, byte);
                if next != Dfa::DEAD {
                    out.push_with_top(
                        stack,
                        Frame::Lex {
                            lex: *lex,
                            state: next,
                        },
                    );
                }
            }
            Frame::Root { .. } => self.consume_root(stack, sym, out),
            Frame::Seq { node, idx } => {
                for (j, &e) in self.seq(*node).iter().enumerate().skip(*idx as usize) {
                    if self.may_start(e, sym) {
                        let s = out.with_top(
                            stack,
                            Frame::Seq {
                                node: *node,
                                idx: j as u32 + 1,
                            },
                        );
                        self.start_value(s, e, sym, out);
                    }
                    if !self.nullable[e as usize] {
                        break;
                    }
                }
            }
            Frame::Rep { node, count } => {
                let (item, _, max) = self.repeat(*node);
                if *count < max && self.may_start(item, sym) {
                    let s = out.with_top(
                        stack,
                        Frame::Rep {
                            node: *node,
                            count: count + 1,
                        },
                    );
                    self.start_value(s, item, sym, out);
                }
            }
            Frame::Cap { node, done: false } if self.may_start(self.captured(*node), sym) => {
                let s = out.with_top(
                    stack,
                    Frame::Cap {
                        node: *node,
                        done: false,
                    },
                );
                self.start_value(s, self.captured(*node), sym, out);
            }
            Frame::Cap { .. } | Frame::Done => {}
            // A special token may start a value (Gemma's strings open with `<|"|>`), never
            // stand for a key, a comma or a close.
            Frame::Obj {
                phase: ObjPhase::AfterColon(_),
                ..
            }
            | Frame::Arr {
                phase: ArrPhase::AfterOpen | ArrPhase::AfterComma,
                ..
            } if !is_byte => match &stack[stack.len() - 1] {
                Frame::Obj { .. } => self.consume_object(stack, byte, sym, out),
                _ => self.consume_array(stack, byte, sym, out),
            },
            _ if !is_byte => {}
            Frame::Obj { .. } => self.consume_object(stack, byte, sym, out),
            Frame::Arr { .. } => self.consume_array(stack, byte, sym, out),
        }
    }

    /// A root frame takes `sym`: white space around a JSON Schema grammar's value, or the value.
    fn consume_root(&self, stack: &[Frame], sym: Sym, out: &mut StepOut<'_>) {
        let byte = if sym < SPECIAL { sym as u8 } else { 0 };
        let is_byte = sym < SPECIAL;
        let Frame::Root { phase, ws } = &stack[stack.len() - 1] else {
            return;
        };
        match phase {
            // Whitespace around a JSON Schema grammar's value, up to the limit (none before
            // a value that cannot exist: an empty grammar admits no byte at all).
            RootPhase::Before | RootPhase::After
                if is_byte
                    && self.root_ws
                    && is_ws(byte)
                    && !(*phase == RootPhase::Before
                        && matches!(self.nodes[self.root as usize], Node::Never)) =>
            {
                if let Some(ws) = self.gap_ws(*ws, byte, None, 0) {
                    out.push_with_top(stack, Frame::Root { phase: *phase, ws });
                }
            }
            RootPhase::Before if is_byte && self.root_ws && is_ws(byte) => {}
            RootPhase::Before if self.may_start(self.root, sym) => {
                let s = out.with_top(
                    stack,
                    Frame::Root {
                        phase: RootPhase::InValue,
                        ws: 0,
                    },
                );
                self.start_value(s, self.root, sym, out);
            }
            _ => {}
        }
    }

    /// An object frame takes `byte`: white space in a gap, a key's bytes, a colon, a comma, the
    /// close, or the start of a value.
    fn consume_object(&self, stack: &[Frame], byte: u8, sym: Sym, out: &mut StepOut<'_>) {
        let Frame::Obj {
            node,
            phase,
            seen,
            ws,
        } = &stack[stack.len() - 1]
        else {
            return;
        };
        let node = *node;
        let o = self.object(node);
        let syn = &o.syntax;
        let gap = phase.is_gap();
        if let Some(alts) = self.merged_alts(node) {
            // A merged union's frame becomes its alternatives' frames where they part: at the
            // first byte of a value (each alternative whose value may start with it), or at the
            // close of an empty object.
            let parts = match *phase {
                ObjPhase::AfterColon(k) if !(gap && is_gap_ws(byte, syn)) => Some(Some(k)),
                // The alternatives share their keys: the close is refused for all or none.
                ObjPhase::AfterOpen if byte == syn.close && !can_close(o, seen) => return,
                ObjPhase::AfterOpen if byte == syn.close => Some(None),
                _ => None,
            };
            if let Some(value) = parts {
                let caps = self.merged_caps(node);
                for (i, &alt) in alts.iter().enumerate() {
                    let starts = value
                        .is_none_or(|k| self.may_start(self.object(alt).values[k as usize], sym));
                    if starts {
                        let mut s = out.copy(&stack[..stack.len() - 1]);
                        if let Some(caps) = caps {
                            s.push(Frame::Cap {
                                node: caps[i],
                                done: false,
                            });
                        }
                        s.push(Frame::Obj {
                            node: alt,
                            phase: *phase,
                            seen: seen.clone(),
                            ws: *ws,
                        });
                        self.consume_object(&s, byte, sym, out);
                        out.recycle(s);
                    }
                }
                return;
            }
        }
        let frame = |phase: ObjPhase, seen: &Seen, ws: u16| Frame::Obj {
            node,
            phase,
            seen: seen.clone(),
            ws,
        };
        if gap && is_gap_ws(byte, syn) {
            let depth = usize::from(self.depth[node as usize]);
            if let Some(ws) = self.gap_ws(*ws, byte, Some(syn), depth) {
                out.push_with_top(stack, frame(*phase, seen, ws));
            }
            return;
        }
        match *phase {
            ObjPhase::AfterOpen | ObjPhase::AfterComma => {
                if byte == syn.close {
                    if *phase == ObjPhase::AfterOpen && can_close(o, seen) {
                        out.push_with_top(stack, frame(ObjPhase::Done, seen, 0));
                    }
                } else if let Some((p, seen)) = self.key_step(o, seen, 0, self.extra_start(o), byte)
                {
                    out.push_with_top(stack, frame(p, &seen, 0));
                }
            }
            ObjPhase::InKey { trie, extra } => {
                if let Some((p, seen)) = self.key_step(o, seen, trie, extra, byte) {
                    out.push_with_top(stack, frame(p, &seen, 0));
                }
            }
            ObjPhase::AfterKey(k) => {
                if Some(byte) == syn.colon {
                    out.push_with_top(stack, frame(ObjPhase::AfterColon(k), seen, 0));
                }
            }
            ObjPhase::AfterColon(k) => {
                let child = if is_extra(k) {
                    match extra_value(o, k) {
                        Some(v) => v,
                        None => return,
                    }
                } else {
                    o.values[k as usize]
                };
                let s = out.with_top(stack, frame(ObjPhase::InValue, seen, 0));
                self.start_value(s, child, sym, out);
            }
            ObjPhase::AfterValue => {
                if byte == b','
                    && self.any_key_left(o, seen)
                    && (o.max_props == u32::MAX || seen.count_keys(o) < o.max_props)
                {
                    out.push_with_top(stack, frame(ObjPhase::AfterComma, seen, 0));
                } else if byte == syn.close && can_close(o, seen) {
                    out.push_with_top(stack, frame(ObjPhase::Done, seen, 0));
                }
            }
            ObjPhase::InValue | ObjPhase::Done => {}
        }
    }

    /// An array frame takes `byte`: white space in a gap, a comma, the close, a unique string
    /// item's bytes, or the start of an item.
    fn consume_array(&self, stack: &[Frame], byte: u8, sym: Sym, out: &mut StepOut<'_>) {
        let Frame::Arr {
            node,
            phase,
            count,
            matched,
            strings,
            ws,
        } = &stack[stack.len() - 1]
        else {
            return;
        };
        let (node, count, matched) = (*node, *count, *matched);
        let a = self.array(node);
        let frame = |phase: ArrPhase, count: u32, ws: u16| Frame::Arr {
            node,
            phase,
            count,
            matched,
            strings: strings.clone(),
            ws,
        };
        let gap = phase.is_gap();
        if gap && is_gap_ws(byte, &a.syntax) {
            let depth = usize::from(self.depth[node as usize]);
            if let Some(ws) = self.gap_ws(*ws, byte, Some(&a.syntax), depth) {
                out.push_with_top(stack, frame(*phase, count, ws));
            }
            return;
        }
        match phase {
            ArrPhase::AfterOpen | ArrPhase::AfterComma => {
                if byte == a.syntax.close {
                    if *phase == ArrPhase::AfterOpen && a.min_items == 0 && contains_ok(a, matched)
                    {
                        out.push_with_top(stack, frame(ArrPhase::Done, count, 0));
                    }
                } else if let Some(item) = a.item(count) {
                    match &a.contains {
                        None if !a.unique_strings.is_empty() => {
                            for &lex in &a.unique_strings {
                                let start = self.lexemes[lex as usize].start();
                                if let Some(f) =
                                    self.string_item_step(node, count, strings, lex, start, byte)
                                {
                                    out.push_with_top(stack, f);
                                }
                            }
                        }
                        None if !a.unique.is_empty() => {
                            // uniqueItems: only the values not used yet.
                            for (i, &v) in a.unique.iter().enumerate() {
                                if matched >> i & 1 == 0 {
                                    let s = out.with_top(
                                        stack,
                                        Frame::Arr {
                                            node,
                                            phase: ArrPhase::InValue,
                                            count,
                                            matched: matched | 1 << i,
                                            strings: None,
                                            ws: 0,
                                        },
                                    );
                                    self.start_value(s, v, sym, out);
                                }
                            }
                        }
                        None => {
                            let s = out.with_top(stack, frame(ArrPhase::InValue, count, 0));
                            self.start_value(s, item, sym, out);
                        }
                        Some(c) => {
                            let (m, n) = self.item_kinds(a, count, matched);
                            if m {
                                let s = out.with_top(stack, frame(ArrPhase::InMatch, count, 0));
                                self.start_value(s, c.matched, sym, out);
                            }
                            if n {
                                let s = out.with_top(stack, frame(ArrPhase::InValue, count, 0));
                                self.start_value(s, c.other, sym, out);
                            }
                        }
                    }
                }
            }
            ArrPhase::AfterValue => {
                if byte == b','
                    && a.item(count).is_some()
                    && (a.unique.is_empty() || (matched.count_ones() as usize) < a.unique.len())
                    && self.any_string_left(a, strings)
                    && (a.contains.is_none() || {
                        let (m, n) = self.item_kinds(a, count, matched);
                        m || n
                    })
                {
                    out.push_with_top(stack, frame(ArrPhase::AfterComma, count, 0));
                } else if byte == a.syntax.close && count >= a.min_items && contains_ok(a, matched)
                {
                    out.push_with_top(stack, frame(ArrPhase::Done, count, 0));
                }
            }
            ArrPhase::InString { lex, state } => {
                if let Some(f) = self.string_item_step(node, count, strings, *lex, *state, byte) {
                    out.push_with_top(stack, f);
                }
            }
            ArrPhase::InValue | ArrPhase::InMatch | ArrPhase::Done => {}
        }
    }

    /// With `contains`: whether item `count` may be one that matches, and one that does not,
    /// given `matched` items so far: a match only below `maxContains`, and either only if the
    /// items left after it can still reach `minContains` within `maxItems`.
    fn item_kinds(&self, a: &crate::grammar::ArrayNode, count: u32, matched: u32) -> (bool, bool) {
        let Some(c) = &a.contains else {
            return (true, true);
        };
        let need = c.min.saturating_sub(matched);
        let room = a.max_items.saturating_sub(count.saturating_add(1));
        let never = |n: NodeId| matches!(self.nodes[n as usize], Node::Never);
        (
            matched < c.max && !never(c.matched) && need.saturating_sub(1) <= room,
            !never(c.other) && need <= room,
        )
    }

    /// One byte of a string item of a `uniqueItems` array (`ArrayNode::unique_strings`) at
    /// state `state` of lexeme `lex`: the array frame after it, unless the string would repeat
    /// one in `strings` or could then only end as one.
    fn string_item_step(
        &self,
        node: NodeId,
        count: u32,
        strings: &Option<Arc<Literals>>,
        lex: LexId,
        state: StateId,
        byte: u8,
    ) -> Option<Frame> {
        let d = &self.lexemes[lex as usize];
        let next = d.next(state, byte);
        if next == Dfa::DEAD {
            return None;
        }
        let none = Literals::default();
        let before = strings.as_deref().unwrap_or(&none);
        let matched = 0;
        if d.is_accepting(next) && !d.has_out(next) {
            let x = before.ended_by(byte)?;
            return Some(Frame::Arr {
                node,
                phase: ArrPhase::AfterValue,
                count: count + 1,
                matched,
                strings: Some(Arc::new(x)),
                ws: 0,
            });
        }
        let x = before.with_byte(byte);
        if !x.can_end_fresh(self, lex, next) {
            return None;
        }
        Some(Frame::Arr {
            node,
            phase: ArrPhase::InString { lex, state: next },
            count,
            matched,
            strings: Some(Arc::new(x)),
            ws: 0,
        })
    }

    /// True unless `a` is a `uniqueItems` array of strings whose every string is in `strings`.
    fn any_string_left(
        &self,
        a: &crate::grammar::ArrayNode,
        strings: &Option<Arc<Literals>>,
    ) -> bool {
        let used = strings.as_ref().map_or(&[][..], |x| &x.done[..]);
        a.unique_strings.is_empty()
            || a.unique_strings.iter().any(|&l| {
                let d = &self.lexemes[l as usize];
                self.lexeme_open(l) || fresh::can_be_fresh(d, d.start(), b"", used)
            })
    }

    /// True when some key can still be written: a listed one not used yet, or an extra one
    /// that can end as a key not used yet.
    fn any_key_left(&self, o: &ObjectNode, seen: &Seen) -> bool {
        seen.any_unseen(0, o.keys.len() as u32)
            || o.additional.is_some_and(|(lex, _)| {
                let d = &self.lexemes[lex as usize];
                self.lexeme_open(lex) || fresh::can_be_fresh(d, d.start(), b"", seen.extra_done())
            })
    }

    fn extra_start(&self, o: &ObjectNode) -> StateId {
        match o.additional {
            Some((lex, _)) => self.lexemes[lex as usize].start(),
            None => Dfa::DEAD,
        }
    }

    /// One byte of an object key: the new phase and seen set, if the key can still complete.
    fn key_step(
        &self,
        o: &ObjectNode,
        seen: &Seen,
        trie: u32,
        extra: StateId,
        byte: u8,
    ) -> Option<(ObjPhase, Seen)> {
        // maxProperties: with as many keys written or still required as allowed, only the
        // required keys may start.
        let only_required = o.max_props != u32::MAX
            && seen.count_keys(o) + missing_required(o, seen) >= o.max_props;
        let first_due = first_due(o, seen);
        let t = if trie == NO_TRIE {
            None
        } else {
            o.trie.child(trie, byte).filter(|&c| {
                let n = &o.trie.nodes[c as usize];
                if first_due {
                    (n.lo..n.hi).any(|k| o.first.contains(&k))
                } else if only_required {
                    (n.lo..n.hi).any(|k| !seen.contains(k) && o.required.contains(&k))
                } else {
                    seen.any_unseen(n.lo, n.hi)
                }
            })
        };
        let e = match o.additional {
            Some((lex, _)) if extra != Dfa::DEAD && !only_required && !first_due => {
                self.lexemes[lex as usize].next(extra, byte)
            }
            _ => Dfa::DEAD,
        };
        if let Some(t) = t {
            if let Some(k) = o.trie.nodes[t as usize].key {
                return Some((after_key(o, k), seen.with_key(o, k)));
            }
        }
        let mut e = e;
        if e != Dfa::DEAD {
            let d = &self.lexemes[o.additional.unwrap().0 as usize];
            if d.is_accepting(e) && !d.has_out(e) {
                // An extra key is complete: unless it is one already used. Its kind, if the
                // object has kinds of extra keys, comes from its decoded name.
                let kind = if o.extra_kinds.is_empty() {
                    Some(ADDITIONAL)
                } else {
                    let mut raw = seen.current_extra().to_vec();
                    raw.push(byte);
                    extra_key_id(o, &literal_value(&raw))
                };
                match (kind, seen.with_extra_done(byte)) {
                    (Some(k), Some(seen)) => return Some((after_key(o, k), seen)),
                    _ => e = Dfa::DEAD,
                }
            }
        }
        // Only if the key can still end as one not used yet.
        let mut with_byte = None;
        if e != Dfa::DEAD {
            let lex = o.additional.unwrap().0;
            let s = seen.with_extra_byte(byte);
            if s.extra
                .as_ref()
                .is_some_and(|x| x.can_end_fresh(self, lex, e))
            {
                with_byte = Some(s);
            } else {
                e = Dfa::DEAD;
            }
        }
        if t.is_none() && e == Dfa::DEAD {
            return None;
        }
        let seen = with_byte.unwrap_or_else(|| seen.clone());
        Some((
            ObjPhase::InKey {
                trie: t.unwrap_or(NO_TRIE),
                extra: e,
            },
            seen,
        ))
    }

    /// False when no value of `node` starts with `sym`: a byte outside the node's first bytes
    /// (special tokens are always tried). Checked before a stack is copied for `start_value`,
    /// so that the many bytes a walk offers and a value cannot take cost no allocation.
    #[inline]
    fn may_start(&self, node: NodeId, sym: Sym) -> bool {
        if sym >= SPECIAL {
            return true;
        }
        let b = sym as usize;
        self.first[node as usize][b / 64] & (1 << (b % 64)) != 0
    }

    /// Starts a value of `node` with its first symbol, pushing onto `stack`.
    fn start_value(&self, mut stack: Stack, node: NodeId, sym: Sym, out: &mut StepOut<'_>) {
        if stack.len() > self.max_depth as usize + 8 {
            return;
        }
        let byte = if sym < SPECIAL { sym as u8 } else { 0 };
        let is_byte = sym < SPECIAL;
        match &self.nodes[node as usize] {
            Node::Lex(lex) => {
                let d = &self.lexemes[*lex as usize];
                let next = if is_byte {
                    d.next(d.start(), byte)
                } else {
                    Dfa::DEAD
                };
                if next != Dfa::DEAD {
                    stack.push(Frame::Lex {
                        lex: *lex,
                        state: next,
                    });
                    out.push(stack);
                }
            }
            Node::Object(o) => {
                if is_byte && byte == o.syntax.open && stack.len() <= self.max_depth as usize {
                    stack.push(Frame::Obj {
                        node,
                        phase: ObjPhase::AfterOpen,
                        seen: Seen::initial(o),
                        ws: 0,
                    });
                    out.push(stack);
                }
            }
            Node::Array(a) => {
                if is_byte && byte == a.syntax.open && stack.len() <= self.max_depth as usize {
                    stack.push(Frame::Arr {
                        node,
                        phase: ArrPhase::AfterOpen,
                        count: 0,
                        matched: 0,
                        strings: None,
                        ws: 0,
                    });
                    out.push(stack);
                }
            }
            Node::Union(alts) => {
                // A union of objects of one shape is one frame until a value starts (looked up
                // only in grammars that have one).
                if !self.merged.is_empty() {
                    if let Some(&merged) = self.merged_of.get(&node) {
                        if !is_byte {
                            return; // no object starts with a special token
                        }
                        match self.merged_caps(merged) {
                            None => {
                                self.start_value(stack, merged, sym, out);
                                return;
                            }
                            // The alternatives' capture frames are pushed when they part (one
                            // more frame: the depth limit counts it now).
                            Some(_) if out.merge_captured => {
                                if stack.len() < self.max_depth as usize {
                                    self.start_value(stack, merged, sym, out);
                                }
                                return;
                            }
                            Some(_) => {}
                        }
                    }
                }
                // Unions are flattened at compile time: no alternative is itself a union. A
                // byte outside an alternative's first bytes skips it without copying the stack.
                for &alt in alts {
                    if self.may_start(alt, sym) {
                        self.start_value(out.copy(&stack), alt, sym, out);
                    }
                }
            }
            Node::Never => {}
            // A fresh sequence, repetition or capture frame takes `sym` as `consume` would, with
            // the frame written in place on the stack this call owns (no copy for its top).
            Node::Seq(elems) => {
                // Each element that may start with `sym`, up to the first that cannot be empty;
                // the last one found takes the stack itself, the others a copy.
                let at = stack.len();
                stack.push(Frame::Seq { node, idx: 0 });
                let mut found: Option<(u32, NodeId)> = None;
                for (j, &e) in elems.iter().enumerate() {
                    if self.may_start(e, sym) {
                        if let Some((idx, e)) = found.replace((j as u32 + 1, e)) {
                            let mut s = out.copy(&stack);
                            s[at] = Frame::Seq { node, idx };
                            self.start_value(s, e, sym, out);
                        }
                    }
                    if !self.nullable[e as usize] {
                        break;
                    }
                }
                if let Some((idx, e)) = found {
                    stack[at] = Frame::Seq { node, idx };
                    self.start_value(stack, e, sym, out);
                }
            }
            Node::Repeat { item, max, .. } => {
                if *max > 0 && self.may_start(*item, sym) {
                    stack.push(Frame::Rep { node, count: 1 });
                    self.start_value(stack, *item, sym, out);
                }
            }
            Node::Capture(_, inner) => {
                if self.may_start(*inner, sym) {
                    stack.push(Frame::Cap { node, done: false });
                    self.start_value(stack, *inner, sym, out);
                }
            }
            Node::Special(i) => {
                if sym == SPECIAL + *i as Sym {
                    stack.push(Frame::Done);
                    out.push(stack);
                }
            }
        }
    }
}

/// The phase after key `k` of object `o`: before the colon, or at the value when the key's
/// spelling includes it.
fn after_key(o: &ObjectNode, k: u32) -> ObjPhase {
    if o.syntax.colon.is_some() {
        ObjPhase::AfterKey(k)
    } else {
        ObjPhase::AfterColon(k)
    }
}

fn required_ok(o: &ObjectNode, seen: &Seen) -> bool {
    o.required.iter().all(|&k| seen.contains(k))
        && o.dependencies
            .iter()
            .all(|(t, needs)| !seen.contains(*t) || needs.iter().all(|&k| seen.contains(k)))
}

/// The array may close as far as `contains` goes: at least `minContains` items matched.
fn contains_ok(a: &crate::grammar::ArrayNode, matched: u32) -> bool {
    a.contains.as_ref().is_none_or(|c| matched >= c.min)
}

/// The object may close: its required keys (and dependencies) are there, and at least
/// `minProperties` keys.
fn can_close(o: &ObjectNode, seen: &Seen) -> bool {
    required_ok(o, seen) && (o.min_props == 0 || seen.count_keys(o) >= o.min_props)
}

/// True while `o`'s key that comes first ([`ObjectNode::first`]) is not written: only its
/// spellings may start.
pub(crate) fn first_due(o: &ObjectNode, seen: &Seen) -> bool {
    !o.first.is_empty() && !o.first.iter().any(|&k| seen.contains(k))
}

/// True when key `k` of `o` may come next as far as the order of its keys goes.
pub(crate) fn may_come_next(o: &ObjectNode, seen: &Seen, k: u32) -> bool {
    o.first.contains(&k) || !first_due(o, seen)
}

/// Required keys not written yet, each counted once (not once per spelling).
pub(crate) fn missing_required(o: &ObjectNode, seen: &Seen) -> u32 {
    o.required
        .iter()
        .filter(|&&k| !seen.contains(k) && o.alias.get(k as usize).is_none_or(|&a| a >= k))
        .count() as u32
}

/// Stacks without duplicates, in the order first produced.
///
/// A step of a union's many alternatives produces as many stacks (1,000 for a call union of
/// 1,000 tools), and a linear scan per new stack is quadratic in them. Up to [`StackSet::SCAN`]
/// stacks the scan is the cheaper test; past it, the set indexes each stack by its hash
/// (an equal hash is confirmed by comparing the stacks, a different one proves it new).
#[derive(Default)]
pub(crate) struct StackSet {
    /// Hash of a stack to the index of the first stack with that hash.
    index: rustc_hash::FxHashMap<u64, u32>,
}

impl StackSet {
    /// Stacks up to which a linear scan tests membership.
    const SCAN: usize = 16;

    fn hash(stack: &[Frame]) -> u64 {
        use std::hash::{BuildHasher, BuildHasherDefault};
        BuildHasherDefault::<rustc_hash::FxHasher>::default().hash_one(stack)
    }

    /// True when no item of `items` has a stack (`stack_of`) equal to `stack`; the caller
    /// then pushes the item with it, so that `items` holds exactly the items pushed after
    /// this test (the index remembers the new stack at the end of `items`).
    pub(crate) fn is_new<T>(
        &mut self,
        items: &[T],
        stack_of: impl Fn(&T) -> &[Frame],
        stack: &[Frame],
    ) -> bool {
        if items.len() < Self::SCAN {
            return !items.iter().any(|i| stack_of(i) == stack);
        }
        if self.index.is_empty() {
            for (i, s) in items.iter().enumerate() {
                self.index
                    .entry(Self::hash(stack_of(s)))
                    .or_insert(i as u32);
            }
        }
        match self.index.entry(Self::hash(stack)) {
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(items.len() as u32);
                true
            }
            std::collections::hash_map::Entry::Occupied(e) => {
                // The first stack of this hash, then (a collision) all of them.
                stack_of(&items[*e.get() as usize]) != stack
                    && !items.iter().any(|i| stack_of(i) == stack)
            }
        }
    }
}

/// A byte-at-a-time matcher over a grammar (no tokens involved).
pub(crate) struct ByteMatcher<'g> {
    g: &'g GrammarInner,
    states: Vec<Stack>,
    scratch: Vec<Stack>,
}

impl<'g> ByteMatcher<'g> {
    pub(crate) fn new(grammar: &'g crate::grammar::Grammar) -> Self {
        let g = &*grammar.inner;
        ByteMatcher {
            g,
            states: vec![g.start_stack()],
            scratch: Vec::new(),
        }
    }

    /// Takes one symbol (a byte, or `SPECIAL + i`); false (and no change) if it is not allowed.
    pub(crate) fn push(&mut self, sym: Sym) -> bool {
        advance(self.g, &self.states, sym, &mut self.scratch);
        if self.scratch.is_empty() {
            return false;
        }
        std::mem::swap(&mut self.states, &mut self.scratch);
        true
    }

    pub(crate) fn can_end(&self) -> bool {
        self.states.iter().any(|s| self.g.can_end(s))
    }
}

/// All stacks `states` become after `sym`, normalized and without duplicates, into `out`.
///
/// Each state steps straight into `out`; its new stacks are then normalized and compacted in
/// place, each kept only if no stack before it is equal (no scratch vector per call: a first
/// mask's walk advances once per trie node it visits).
pub(crate) fn advance(g: &GrammarInner, states: &[Stack], sym: Sym, out: &mut Vec<Stack>) {
    advance_traced(g, states, sym, out, &mut Vec::new(), |_, _| {});
}

/// [`advance`] with `out`'s old stacks kept in `spare` (emptied), whose buffers this step's
/// and later steps' stacks reuse: a walk that advances once per trie node allocates no stack.
pub(crate) fn advance_reusing(
    g: &GrammarInner,
    states: &[Stack],
    sym: Sym,
    out: &mut Vec<Stack>,
    spare: &mut Vec<Stack>,
) {
    let [state] = states else {
        advance_with(g, states, sym, out, spare, true, |_, _| {});
        return;
    };
    // One state (most of a walk's steps): no loop over states, no callback.
    while let Some(s) = out.pop() {
        recycle(spare, s);
    }
    let mut o = StepOut {
        stacks: out,
        spare,
        merge_captured: true,
    };
    g.step_to(state, sym, &mut o);
    keep_new(g, &mut o, 0, &mut StackSet::default(), |_| {});
}

/// Normalizes the stacks `o` holds from index `from` on, calling `each` on every one, and
/// keeps those not equal to a stack kept before them (`set` indexes the kept ones).
fn keep_new(
    g: &GrammarInner,
    o: &mut StepOut<'_>,
    from: usize,
    set: &mut StackSet,
    mut each: impl FnMut(&Stack),
) {
    let mut kept = from;
    for r in from..o.stacks.len() {
        let mut t = std::mem::take(&mut o.stacks[r]);
        g.normalize(&mut t);
        each(&t);
        if set.is_new(&o.stacks[..kept], |s| s, &t) {
            o.stacks[kept] = t;
            kept += 1;
        } else {
            o.recycle(t);
        }
    }
    o.stacks.truncate(kept);
}

/// [`advance_reusing`], calling `each(before, after)` for every stack a state steps to
/// (normalized, duplicates included), with the state it came from.
pub(crate) fn advance_traced(
    g: &GrammarInner,
    states: &[Stack],
    sym: Sym,
    out: &mut Vec<Stack>,
    spare: &mut Vec<Stack>,
    each: impl FnMut(&Stack, &Stack),
) {
    advance_with(g, states, sym, out, spare, false, each);
}

/// [`advance`] for token walks: a union of captured objects of one shape may start as one
/// merged frame ([`crate::grammar::MergedUnion::caps`]), whose stacks only a walk may hold.
pub(crate) fn advance_merging(g: &GrammarInner, states: &[Stack], sym: Sym, out: &mut Vec<Stack>) {
    advance_with(g, states, sym, out, &mut Vec::new(), true, |_, _| {});
}

/// [`advance_traced`], merging captured unions where `merge_captured`.
fn advance_with(
    g: &GrammarInner,
    states: &[Stack],
    sym: Sym,
    out: &mut Vec<Stack>,
    spare: &mut Vec<Stack>,
    merge_captured: bool,
    mut each: impl FnMut(&Stack, &Stack),
) {
    while let Some(s) = out.pop() {
        recycle(spare, s);
    }
    let mut o = StepOut {
        stacks: out,
        spare,
        merge_captured,
    };
    let mut set = StackSet::default();
    for s in states {
        let stepped = o.stacks.len();
        g.step_to(s, sym, &mut o);
        keep_new(g, &mut o, stepped, &mut set, |t| each(s, t));
    }
}

impl Grammar {
    /// Checks a complete output byte by byte; on rejection, says at which byte offset and why.
    pub fn check_bytes(&self, text: &[u8]) -> Result<(), Rejection> {
        let mut m = ByteMatcher::new(self);
        for (i, &b) in text.iter().enumerate() {
            if !m.push(b as Sym) {
                return Err(Rejection {
                    offset: i,
                    reason: format!("byte {:?} is not allowed here", b as char),
                });
            }
        }
        if m.can_end() {
            Ok(())
        } else {
            Err(Rejection {
                offset: text.len(),
                reason: "the output ends before the value is complete".into(),
            })
        }
    }
}
