//! Output parsing: a dialect's output back to the reply's text, its reasoning and its calls in
//! the OpenAI `tool_calls` shape, all at once ([`crate::Grammar::parse`]) or streaming
//! ([`StreamParser`]).
//!
//! The parser runs the same automaton that constrained the output. The grammar marks spans
//! with captures (free text, reasoning, one call of function `i`, a call's arguments); while
//! bytes are matched, each live interpretation records where its captures start and end. An
//! event is emitted once every live interpretation agrees on it, so streaming never takes
//! anything back: text that might still turn out to be the start of a call marker is held until
//! it is known to be text. Arguments are converted to JSON ([`convert`]) as they stream.

mod convert;
mod recover;
mod repeats;

pub use recover::{Recovery, MAX_RESTARTS};
pub(crate) use repeats::{args_differ, json_eq};

pub use crate::grammar::ArgEncoding;

use crate::automaton::{Frame, Stack, Sym, SPECIAL};
use crate::error::Rejection;
use crate::error::{Error, Result};
use crate::grammar::{Capture, Grammar, GrammarInner, Node};
use crate::tools::ToolCall;
use crate::vocab::{TokenId, Vocab};
use convert::StreamConverter;

/// A parsed output: the reply's text, the reasoning (if the model wrote any), and the calls.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct Parsed {
    /// The free text of the reply (surrounding whitespace trimmed), empty when there is none.
    pub text: String,
    /// The reasoning block's content, when there was one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// The calls, in order, each with the id the model wrote (Mistral's 9-character ids, Kimi
    /// K2's `functions.NAME:IDX`, Command R7B's `tool_call_id`) or else `call_0`, `call_1`, ...
    pub tool_calls: Vec<ToolCall>,
    /// What [`Grammar::parse_recovering`] had to assume or skip to read the output (always
    /// empty from the strict [`Grammar::parse`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub recovered: Vec<Recovery>,
}

/// What a [`StreamParser`] reports, as soon as it is certain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// More reply text.
    Text(String),
    /// More reasoning text.
    Reasoning(String),
    /// A call begins: its index, id and function name.
    CallStart {
        /// 0 for the first call, then 1, ...
        index: usize,
        /// `call_<index>`; a [`Event::CallId`] follows where the model writes its own id.
        id: String,
        /// The function.
        name: String,
    },
    /// More of a call's arguments, as JSON text (the pieces concatenate to the arguments).
    Arguments {
        /// The call's index.
        index: usize,
        /// The JSON text.
        delta: String,
    },
    /// The id the model wrote for a call (in dialects whose calls carry one, e.g. Mistral's
    /// `[CALL_ID]` or `"id"`, Kimi K2's `functions.NAME:IDX`): it replaces the provisional
    /// `call_<index>` of [`Event::CallStart`]. Comes before the call's [`Event::CallEnd`].
    CallId {
        /// The call's index.
        index: usize,
        /// The id, as the model wrote it (a JSON string's content, decoded).
        id: String,
    },
    /// A call is complete.
    CallEnd {
        /// The call's index.
        index: usize,
    },
}

/// One capture in one interpretation: kind, where it is on the stack, where it starts and ends.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seg {
    kind: Capture,
    key: (usize, u32),
    start: usize,
    end: Option<usize>,
}

/// Agreed segment `k` as the event emitter sees it: the first interpretation's segment, whether
/// every interpretation ended it at the same place, how far its content is certain, and the
/// bytes read so far.
struct SegNow {
    k: usize,
    seg: Seg,
    ended: bool,
    certain: usize,
    now: usize,
}

#[derive(Debug, Clone)]
struct Path {
    stack: Stack,
    /// Shared between the interpretations a symbol splits one into, copied only by the one
    /// that opens or closes a capture (most symbols do neither).
    segs: std::sync::Arc<Vec<Seg>>,
}

/// What has been emitted for segment `k` of the common interpretation.
#[derive(Debug, Default, Clone)]
struct Emitted {
    started: bool,
    ended: bool,
    /// Content bytes emitted (text) or fed to the converter (arguments), from the start.
    upto: usize,
    call: Option<usize>,
    conv: Option<StreamConverter>,
    /// Fields written so far (a [`Capture::Fields`] segment).
    fields: usize,
    /// A key was written and its value has not started (a [`Capture::Fields`] segment): an
    /// empty raw value has no segment of its own.
    value_due: bool,
    /// The empty arguments of a call without an arguments capture were sent.
    empty_args_sent: bool,
}

/// Parses an output incrementally (fed text or tokens), emitting [`Event`]s when certain.
#[derive(Clone, Debug)]
pub struct StreamParser {
    grammar: Grammar,
    paths: Vec<Path>,
    buf: Vec<u8>,
    emitted: Vec<Emitted>,
    calls: usize,
    failed: Option<Rejection>,
    /// Tagged-field argument segments started and not yet closed.
    open_fields: Vec<usize>,
    /// Leaves repeated calls out ([`crate::grammar::DistinctCalls::End`]); `None`: every call passes.
    repeats: Option<repeats::RepeatGate>,
}

/// Cap frames of a stack: (position, node).
fn caps(stack: &[Frame]) -> impl Iterator<Item = (usize, u32)> + '_ {
    stack.iter().enumerate().filter_map(|(i, f)| match f {
        Frame::Cap { node, .. } => Some((i, *node)),
        _ => None,
    })
}

fn capture_kind(g: &GrammarInner, node: u32) -> Capture {
    match &g.nodes[node as usize] {
        Node::Capture(c, _) => *c,
        _ => unreachable!("a capture frame is on a capture node"),
    }
}

impl StreamParser {
    /// A parser at the start of an output of `grammar`. Where the grammar's calls end at a
    /// repeat ([`crate::grammar::DistinctCalls::End`], the default of dialects), a call equal to an
    /// earlier one is left out, with any call after it, and a call of a function called
    /// before is held back until it differs from the earlier calls (released then, at once
    /// where it never could be equal).
    pub fn new(grammar: &Grammar) -> StreamParser {
        let mut p = StreamParser::raw(grammar);
        if grammar.inner.distinct_calls == crate::grammar::DistinctCalls::End {
            p.repeats = Some(Default::default());
        }
        p
    }

    /// A parser that reports every call, repeats included (the matcher's call log).
    pub(crate) fn raw(grammar: &Grammar) -> StreamParser {
        StreamParser {
            paths: vec![Path {
                stack: grammar.inner.start_stack(),
                segs: Default::default(),
            }],
            grammar: grammar.clone(),
            buf: Vec::new(),
            emitted: Vec::new(),
            calls: 0,
            failed: None,
            open_fields: Vec::new(),
            repeats: None,
        }
    }

    /// Feeds output text. Spellings of the grammar's special tokens (e.g. `<|python_tag|>`) are
    /// taken as those tokens where the grammar allows them there (a spelling split across two
    /// calls is read as plain text; use [`StreamParser::push_token`] for token streams).
    pub fn push(&mut self, text: &str) -> Result<Vec<Event>> {
        let b = text.as_bytes();
        let g = self.grammar.inner.clone();
        let mut i = 0;
        'outer: while i < b.len() {
            for (k, name) in g.specials.iter().enumerate() {
                if !name.is_empty() && b[i..].starts_with(name.as_bytes()) {
                    let sym = SPECIAL + k as Sym;
                    if self.try_sym(sym, name.len()) {
                        i += name.len();
                        continue 'outer;
                    }
                }
            }
            self.sym(b[i] as Sym, 1)?;
            i += 1;
        }
        self.events()
    }

    /// Feeds one token of `vocab` (end-of-generation tokens end nothing here: call
    /// [`StreamParser::finish`]).
    pub fn push_token(&mut self, vocab: &Vocab, token: TokenId) -> Result<Vec<Event>> {
        let bytes = vocab
            .token_bytes(token)
            .ok_or(Error::TokenOutOfVocabulary {
                token,
                vocab_size: vocab.len(),
            })?;
        if vocab.is_special(token) {
            let name = String::from_utf8_lossy(bytes).into_owned();
            if let Some(k) = self.grammar.inner.specials.iter().position(|s| *s == name) {
                self.sym(SPECIAL + k as Sym, bytes.len())?;
                return self.events();
            }
            if vocab.is_eos(token) {
                return Ok(Vec::new());
            }
        }
        for &b in bytes {
            self.sym(b as Sym, 1)?;
        }
        self.events()
    }

    /// Ends the output: the remaining events, or a rejection if the output is incomplete.
    pub fn finish(&mut self) -> Result<Vec<Event>> {
        if let Some(r) = &self.failed {
            return Err(Error::Parse(r.clone()));
        }
        let g = &self.grammar.inner;
        let n = self.buf.len();
        match self.paths.iter().position(|p| g.can_end(&p.stack)) {
            None => {
                let r = Rejection {
                    offset: n,
                    reason: "the output ends before it is complete".into(),
                };
                self.failed = Some(r.clone());
                Err(Error::Parse(r))
            }
            Some(i) => {
                let mut p = self.paths.swap_remove(i);
                for s in std::sync::Arc::make_mut(&mut p.segs) {
                    s.end.get_or_insert(n);
                }
                self.paths = vec![p];
                self.events()
            }
        }
    }

    /// Feeds one symbol (a byte, or `SPECIAL + i` for the grammar's special token `i`), as
    /// the distinct-calls search of the matcher does.
    pub(crate) fn push_sym(&mut self, sym: Sym) -> Result<Vec<Event>> {
        let len = if sym < SPECIAL {
            1
        } else {
            self.grammar
                .inner
                .specials
                .get((sym - SPECIAL) as usize)
                .map_or(1, String::len)
        };
        self.sym(sym, len)?;
        self.events()
    }

    /// Whether some interpretation could begin a call with its next symbol (a byte or a
    /// special token): the recovering parse's test that a failure is between calls.
    pub(crate) fn expects_call(&self) -> bool {
        let g = &self.grammar.inner;
        let syms = (0..256).chain((0..g.specials.len()).map(|k| SPECIAL + k as Sym));
        let mut raw = Vec::new();
        for sym in syms {
            for path in &self.paths {
                raw.clear();
                g.step(&path.stack, sym, &mut raw);
                let before: Vec<_> = caps(&path.stack).collect();
                let opens_call = raw.iter().any(|t| {
                    caps(t).any(|key| {
                        !before.contains(&key) && matches!(capture_kind(g, key.1), Capture::Call(_))
                    })
                });
                if opens_call {
                    return true;
                }
            }
        }
        false
    }

    /// Tries a symbol; false (and no change) if no interpretation takes it.
    fn try_sym(&mut self, sym: Sym, len: usize) -> bool {
        let next = self.advance(sym, len);
        if next.is_empty() {
            return false;
        }
        self.paths = next;
        true
    }

    fn sym(&mut self, sym: Sym, len: usize) -> Result<()> {
        if let Some(r) = &self.failed {
            return Err(Error::Parse(r.clone()));
        }
        if self.try_sym(sym, len) {
            return Ok(());
        }
        let what = if sym < SPECIAL {
            format!("byte {:?} is not allowed here", sym as u8 as char)
        } else {
            "this special token is not allowed here".into()
        };
        let r = Rejection {
            offset: self.buf.len(),
            reason: what,
        };
        self.failed = Some(r.clone());
        Err(Error::Parse(r))
    }

    /// Every interpretation after `sym` (spelled by `len` bytes, appended to the buffer).
    fn advance(&mut self, sym: Sym, len: usize) -> Vec<Path> {
        let g = &self.grammar.inner;
        let p = self.buf.len();
        let mut out: Vec<Path> = Vec::new();
        let mut seen = crate::automaton::StackSet::default();
        let mut raw = Vec::new();
        // The capture frames (depth, node) of a stack before, during and after the symbol.
        let (mut before, mut during, mut after) = (Vec::new(), Vec::new(), Vec::new());
        for path in &self.paths {
            raw.clear();
            g.step(&path.stack, sym, &mut raw);
            before.clear();
            before.extend(caps(&path.stack));
            for t in raw.drain(..) {
                let mut segs = path.segs.clone();
                during.clear();
                during.extend(caps(&t));
                for key in &before {
                    if !during.contains(key) {
                        close(&mut segs, *key, p);
                    }
                }
                for &key in &during {
                    if !before.contains(&key) {
                        std::sync::Arc::make_mut(&mut segs).push(Seg {
                            kind: capture_kind(g, key.1),
                            key,
                            start: p,
                            end: None,
                        });
                    }
                }
                let mut t = t;
                g.normalize(&mut t);
                after.clear();
                after.extend(caps(&t));
                for key in &during {
                    if !after.contains(key) {
                        close(&mut segs, *key, p + len);
                    }
                }
                if seen.is_new(&out, |o| &o.stack, &t) {
                    out.push(Path { stack: t, segs });
                }
            }
        }
        if !out.is_empty() {
            // Symbols from special tokens are recorded by their spelling.
            let spelled: Vec<u8> = if sym < SPECIAL {
                vec![sym as u8]
            } else {
                g.specials[(sym - SPECIAL) as usize].as_bytes().to_vec()
            };
            debug_assert_eq!(spelled.len(), len);
            self.buf.extend_from_slice(&spelled);
        }
        out
    }

    /// The events that became certain since the last call.
    /// The events now certain, less the repeated calls the gate holds back or leaves out.
    fn events(&mut self) -> Result<Vec<Event>> {
        let ev = self.raw_events()?;
        Ok(match &mut self.repeats {
            Some(gate) => gate.filter(ev),
            None => ev,
        })
    }

    fn raw_events(&mut self) -> Result<Vec<Event>> {
        let mut ev = Vec::new();
        let common = self.agreed_segments();
        for k in 0..common {
            if !self.open_fields.is_empty() {
                self.close_fields(k, &mut ev);
            }
            if self.emitted.len() <= k {
                self.emitted.resize_with(k + 1, Emitted::default);
            }
            if self.emitted[k].ended {
                continue;
            }
            let at = self.segment_now(k);
            self.emit_segment(&at, &mut ev)?;
        }
        self.close_fields(common, &mut ev);
        Ok(ev)
    }

    /// How many segments all interpretations agree on (same kind and start), in order.
    fn agreed_segments(&self) -> usize {
        let first = &self.paths[0].segs;
        let mut common = 0;
        while common < first.len()
            && self.paths.iter().all(|p| {
                p.segs
                    .get(common)
                    .is_some_and(|s| s.kind == first[common].kind && s.start == first[common].start)
            })
        {
            common += 1;
        }
        common
    }

    /// Agreed segment `k` now: its certain content end and whether it has ended.
    fn segment_now(&self, k: usize) -> SegNow {
        let now = self.buf.len();
        let seg = self.paths[0].segs[k].clone();
        // Certain content end: the earliest end (or the present) over interpretations.
        let end_of = |p: &Path| p.segs[k].end.unwrap_or(now);
        let certain = self.paths.iter().map(end_of).min().unwrap_or(now);
        let ended = self
            .paths
            .iter()
            .all(|p| p.segs[k].end.is_some() && p.segs[k].end == seg.end);
        SegNow {
            k,
            seg,
            ended,
            certain,
            now,
        }
    }

    /// The events of agreed segment `at.k`, by its kind.
    fn emit_segment(&mut self, at: &SegNow, ev: &mut Vec<Event>) -> Result<()> {
        match at.seg.kind {
            Capture::Call(f) => self.emit_call(at, f, ev),
            Capture::CallId(json) => self.emit_call_id(at, json, ev)?,
            Capture::Args(enc) => self.emit_arguments(at, enc, ev)?,
            Capture::Fields => {
                let k = at.k;
                let index = self.enclosing_call(k);
                if !self.emitted[k].started {
                    self.emitted[k].started = true;
                    self.open_fields.push(k);
                    ev.push(Event::Arguments {
                        index,
                        delta: "{".into(),
                    });
                }
                // Closed by `close_fields`, once the fields inside it are out.
            }
            Capture::RawArgs(key) => self.emit_raw_args(at, key, ev)?,
            Capture::Key | Capture::Value(_) => self.emit_field(at, ev)?,
            Capture::Text | Capture::Reasoning => self.emit_text(at, ev)?,
        }
        Ok(())
    }

    /// A call segment: its start, and once it has ended (and its arguments and ids are out),
    /// its empty arguments where it has no arguments capture, and its end.
    fn emit_call(&mut self, at: &SegNow, f: u32, ev: &mut Vec<Event>) {
        let k = at.k;
        let seg = &at.seg;
        let ended = at.ended;
        let now = at.now;
        let g = self.grammar.inner.clone();
        if !self.emitted[k].started {
            let index = self.calls;
            self.calls += 1;
            self.emitted[k].call = Some(index);
            self.emitted[k].started = true;
            ev.push(Event::CallStart {
                index,
                id: format!("call_{index}"),
                name: g.functions[f as usize].clone(),
            });
        }
        if ended {
            let index = self.emitted[k].call.unwrap_or(0);
            // A call without an arguments capture has no arguments.
            let has_args = self.paths[0].segs[k + 1..]
                .iter()
                .any(|s| s.kind.is_arguments() && s.start < seg.end.unwrap_or(now));
            if !has_args && !self.emitted[k].empty_args_sent {
                self.emitted[k].empty_args_sent = true;
                ev.push(Event::Arguments {
                    index,
                    delta: "{}".into(),
                });
            }
            // The arguments and id segments inside close first; they follow in
            // order, so the end waits until they have been emitted.
            self.end_call(k, ev);
        }
    }

    /// A call id segment, once it has ended; then the enclosing call may end.
    fn emit_call_id(&mut self, at: &SegNow, json: bool, ev: &mut Vec<Event>) -> Result<()> {
        let k = at.k;
        let seg = &at.seg;
        let ended = at.ended;
        let now = at.now;
        if ended {
            let index = self.enclosing_call(k);
            let raw = &self.buf[seg.start..seg.end.unwrap_or(now)];
            let id = if json {
                serde_json::from_slice::<String>(raw)
                    .map_err(|m| parse_err(seg.start, m.to_string()))?
            } else {
                String::from_utf8(raw.to_vec()).map_err(|m| parse_err(seg.start, m.to_string()))?
            };
            self.emitted[k].ended = true;
            ev.push(Event::CallId { index, id });
            if let Some(ck) = self.enclosing_call_seg(k) {
                self.end_call(ck, ev);
            }
        }
        Ok(())
    }

    /// An arguments segment: the JSON text converted so far (a Python argument list without
    /// its closing parenthesis until the end); at its end, the enclosing call may end.
    fn emit_arguments(&mut self, at: &SegNow, enc: ArgEncoding, ev: &mut Vec<Event>) -> Result<()> {
        let k = at.k;
        let seg = &at.seg;
        let ended = at.ended;
        let certain = at.certain;
        let now = at.now;
        let index = self.enclosing_call(k);
        let e = &mut self.emitted[k];
        if !e.started {
            e.started = true;
            e.conv = Some(StreamConverter::new(enc));
            // Python arguments are captured with their parentheses.
            e.upto = seg.start + usize::from(enc == ArgEncoding::Python);
        }
        let hold = usize::from(enc == ArgEncoding::Python);
        let stop = if ended {
            seg.end.unwrap_or(now) - hold
        } else {
            certain.saturating_sub(hold)
        };
        let mut delta = String::new();
        if stop > e.upto {
            let conv = e.conv.as_mut().expect("set at start");
            delta += &conv
                .push(&self.buf[e.upto..stop])
                .map_err(|m| parse_err(seg.start, m))?;
            e.upto = stop;
        }
        if ended {
            let conv = e.conv.as_mut().expect("set at start");
            delta += &conv.finish().map_err(|m| parse_err(seg.start, m))?;
            e.ended = true;
        }
        if !delta.is_empty() {
            ev.push(Event::Arguments { index, delta });
        }
        if ended {
            // Close the enclosing call now that its arguments are complete.
            if let Some(ck) = self.enclosing_call_seg(k) {
                self.end_call(ck, ev);
            }
        }
        Ok(())
    }

    /// A raw arguments segment: `{"KEY":` at its start.
    fn emit_raw_args(&mut self, at: &SegNow, key: u32, ev: &mut Vec<Event>) -> Result<()> {
        let k = at.k;
        let seg = &at.seg;
        let g = self.grammar.inner.clone();
        // `{"KEY":`, then the raw value inside (a [`Capture::Value`]); closed
        // with the tagged fields, once the value is out.
        let index = self.enclosing_call(k);
        if !self.emitted[k].started {
            self.emitted[k].started = true;
            self.open_fields.push(k);
            let key = serde_json::to_string(&g.raw_arg_keys[key as usize])
                .map_err(|m| parse_err(seg.start, m.to_string()))?;
            ev.push(Event::Arguments {
                index,
                delta: format!("{{{key}:"),
            });
        }
        Ok(())
    }

    /// A key or value segment of tagged fields: a key once complete, a value as far as it is
    /// certain, with the commas and empty values between fields.
    fn emit_field(&mut self, at: &SegNow, ev: &mut Vec<Event>) -> Result<()> {
        let k = at.k;
        let seg = &at.seg;
        let ended = at.ended;
        let certain = at.certain;
        let now = at.now;
        let index = self.enclosing_call(k);
        let fields = (0..k)
            .rev()
            .find(|&f| {
                matches!(
                    self.paths[0].segs[f].kind,
                    Capture::Fields | Capture::RawArgs(_)
                )
            })
            .filter(|&f| self.paths[0].segs[f].kind == Capture::Fields);
        let e = &mut self.emitted[k];
        let mut delta = String::new();
        if !e.started {
            e.started = true;
            e.upto = seg.start;
            if seg.kind == Capture::Value(true) {
                delta.push('"');
            }
        }
        let stop = if ended {
            seg.end.unwrap_or(now)
        } else {
            certain
        };
        // A key is written whole, once it is complete.
        let stop = if seg.kind == Capture::Key && !ended {
            e.upto
        } else {
            stop
        };
        if stop > e.upto {
            let bytes = &self.buf[e.upto..stop];
            let valid = match std::str::from_utf8(bytes) {
                Ok(_) => bytes.len(),
                Err(err) if ended => return Err(parse_err(e.upto, err.to_string())),
                Err(err) => err.valid_up_to(),
            };
            let piece = String::from_utf8_lossy(&bytes[..valid]).into_owned();
            e.upto += valid;
            match seg.kind {
                Capture::Value(false) => delta.push_str(&piece),
                _ => {
                    let quoted = serde_json::to_string(&piece)
                        .map_err(|m| parse_err(seg.start, m.to_string()))?;
                    let inner = &quoted[1..quoted.len() - 1];
                    if seg.kind == Capture::Key {
                        delta.push('"');
                        delta.push_str(inner);
                        delta.push_str("\":");
                    } else {
                        delta.push_str(inner);
                    }
                }
            }
        }
        if ended {
            e.ended = true;
            if seg.kind == Capture::Value(true) {
                delta.push('"');
            }
        }
        if let Some(f) = fields {
            let fe = &mut self.emitted[f];
            if seg.kind == Capture::Key && !delta.is_empty() {
                if fe.value_due {
                    delta.insert_str(0, "\"\"");
                }
                if fe.fields > 0 {
                    let at = if fe.value_due { 2 } else { 0 };
                    delta.insert(at, ',');
                }
                fe.fields += 1;
                fe.value_due = true;
            } else if matches!(seg.kind, Capture::Value(_)) {
                fe.value_due = false;
            }
        }
        if !delta.is_empty() {
            ev.push(Event::Arguments { index, delta });
        }
        Ok(())
    }

    /// A text or reasoning segment: its bytes as far as they are certain (whole characters).
    fn emit_text(&mut self, at: &SegNow, ev: &mut Vec<Event>) -> Result<()> {
        let k = at.k;
        let seg = &at.seg;
        let ended = at.ended;
        let certain = at.certain;
        let now = at.now;
        let e = &mut self.emitted[k];
        if !e.started {
            e.started = true;
            e.upto = seg.start;
        }
        let stop = if ended {
            seg.end.unwrap_or(now)
        } else {
            certain
        };
        if stop > e.upto {
            let bytes = &self.buf[e.upto..stop];
            let valid = match std::str::from_utf8(bytes) {
                Ok(_) => bytes.len(),
                Err(err) if ended => return Err(parse_err(e.upto, err.to_string())),
                Err(err) => err.valid_up_to(),
            };
            if valid > 0 {
                let s = String::from_utf8_lossy(&bytes[..valid]).into_owned();
                e.upto += valid;
                ev.push(if seg.kind == Capture::Text {
                    Event::Text(s)
                } else {
                    Event::Reasoning(s)
                });
            }
        }
        if ended {
            e.ended = true;
        }
        Ok(())
    }

    /// Closes the open tagged-field arguments (among segments `..upto`) whose end is certain and
    /// whose fields are all out, then their calls.
    fn close_fields(&mut self, upto: usize, ev: &mut Vec<Event>) {
        let mut i = 0;
        while i < self.open_fields.len() {
            let k = self.open_fields[i];
            i += 1;
            if k >= upto {
                continue;
            }
            let Some(end) = self.paths[0].segs[k].end else {
                continue;
            };
            let ended = self.paths.iter().all(|p| p.segs[k].end == Some(end));
            let inner_done = (k + 1..self.paths[0].segs.len())
                .filter(|&j| self.paths[0].segs[j].start < end)
                .all(|j| self.emitted.get(j).is_some_and(|e| e.ended));
            if !ended || !inner_done {
                continue;
            }
            i -= 1;
            self.open_fields.remove(i);
            let index = self.enclosing_call(k);
            self.emitted[k].ended = true;
            let delta = if std::mem::take(&mut self.emitted[k].value_due) {
                "\"\"}"
            } else {
                "}"
            };
            ev.push(Event::Arguments {
                index,
                delta: delta.into(),
            });
            if let Some(ck) = self.enclosing_call_seg(k) {
                self.end_call(ck, ev);
            }
        }
    }

    /// Ends call segment `ck` once every interpretation has ended it and its arguments (if it
    /// has an arguments capture) and its ids have been emitted.
    fn end_call(&mut self, ck: usize, ev: &mut Vec<Event>) {
        if self.emitted.get(ck).is_none_or(|e| e.ended)
            || !self.paths.iter().all(|p| p.segs[ck].end.is_some())
        {
            return;
        }
        let end = self.paths[0].segs[ck].end.unwrap_or(usize::MAX);
        let segs = &self.paths[0].segs;
        let inner_done = |kind: fn(&Capture) -> bool| {
            segs.iter()
                .enumerate()
                .skip(ck + 1)
                .filter(|(_, s)| s.start < end && kind(&s.kind))
                .all(|(j, _)| self.emitted.get(j).is_some_and(|e| e.ended))
        };
        let args_done = inner_done(|c| c.is_arguments());
        let ids_done = inner_done(|c| matches!(c, Capture::CallId(_)));
        if args_done && ids_done {
            let index = self.emitted[ck].call.unwrap_or(0);
            self.emitted[ck].ended = true;
            ev.push(Event::CallEnd { index });
        }
    }

    /// The call index of the call segment enclosing argument segment `k`.
    fn enclosing_call(&self, k: usize) -> usize {
        self.enclosing_call_seg(k)
            .and_then(|c| self.emitted.get(c).and_then(|e| e.call))
            .unwrap_or(0)
    }

    fn enclosing_call_seg(&self, k: usize) -> Option<usize> {
        let segs = &self.paths[0].segs;
        (0..k)
            .rev()
            .find(|&c| matches!(segs[c].kind, Capture::Call(_)) && segs[c].start <= segs[k].start)
    }
}

/// Ends the open segment of capture frame `key` at `at` (copying `segs` only where one is).
fn close(segs: &mut std::sync::Arc<Vec<Seg>>, key: (usize, u32), at: usize) {
    let open = |s: &Seg| s.key == key && s.end.is_none();
    if let Some(i) = segs.iter().rposition(open) {
        std::sync::Arc::make_mut(segs)[i].end = Some(at);
    }
}

fn parse_err(offset: usize, m: String) -> Error {
    Error::Parse(Rejection { offset, reason: m })
}

/// Collects a whole event stream into a [`Parsed`].
pub(crate) fn collect(events: impl IntoIterator<Item = Event>) -> Parsed {
    let mut p = Parsed::default();
    let mut reasoning: Option<String> = None;
    for e in events {
        match e {
            Event::Text(t) => p.text.push_str(&t),
            Event::Reasoning(t) => reasoning.get_or_insert_with(String::new).push_str(&t),
            Event::CallStart { id, name, .. } => p.tool_calls.push(ToolCall::new(id, name, "")),
            Event::Arguments { index, delta } => {
                if let Some(c) = p.tool_calls.get_mut(index) {
                    c.function.arguments.push_str(&delta);
                }
            }
            Event::CallId { index, id } => {
                if let Some(c) = p.tool_calls.get_mut(index) {
                    c.id = id;
                }
            }
            Event::CallEnd { .. } => {}
        }
    }
    p.text = p.text.trim().to_owned();
    p.reasoning = reasoning.map(|r| r.trim().to_owned());
    // Compact, canonical arguments JSON.
    for c in &mut p.tool_calls {
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&c.function.arguments) {
            c.function.arguments = v.to_string();
        }
    }
    p
}

impl Grammar {
    /// Parses a complete output (special tokens spelled as text, e.g. `<|python_tag|>`) into its
    /// text, reasoning and calls; [`Error::Parse`] with the offset where it fails otherwise.
    pub fn parse(&self, text: &str) -> Result<Parsed> {
        let mut p = StreamParser::new(self);
        let mut ev = p.push(text)?;
        ev.extend(p.finish()?);
        Ok(collect(ev))
    }

    /// [`Grammar::parse`]'s calls, repeated calls included (the fuzzer's check of the rule).
    pub(crate) fn parse_every_call(&self, text: &str) -> Result<Vec<ToolCall>> {
        let mut p = StreamParser::raw(self);
        let mut ev = p.push(text)?;
        ev.extend(p.finish()?);
        Ok(collect(ev).tool_calls)
    }

    /// The names of the functions, in the order of the tools the grammar was compiled for.
    pub fn functions(&self) -> &[String] {
        &self.inner.functions
    }

    /// The special tokens the grammar refers to (by text).
    pub fn special_tokens(&self) -> &[String] {
        &self.inner.specials
    }
}
