//! The one way grammars are built: nodes and lexemes added under the limits of
//! [`CompileOptions`], then finished into a shared [`Grammar`].
//!
//! Both JSON Schema compilation (`schema`) and dialect lowering (`dialect`) drive a
//! [`GrammarBuilder`]; neither touches the node list directly. The builder charges every node
//! and lexeme against the memory, state and node limits as it goes, so a hostile input fails
//! with [`Error::LimitExceeded`] while it is being built rather than after, and `finish`
//! normalises the graph once (flattened unions, unproductive nodes pruned, nullable flags).

use super::dfa::{Dfa, DfaError, Op};
use super::registry::SchemaRegistry;
use super::GAP_NL;
use super::{GapLexeme, Grammar, GrammarInner, LexId, Node, NodeId, ObjectNode};
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::{Duration, Instant};

crate::setters::options_struct! {
/// How to compile a schema, and the limits that keep hostile schemas bounded.
///
/// The one options type of JSON Schema compiles: the bindings (C, Python), the engine specs and
/// the CLI's `--options` read it from JSON with the field names below (every field optional, a
/// missing one keeps its default, an unknown one is an error; see [`CompileOptions::from_json`]).
/// `max_compile_time` is a number of seconds there; `registry` and `caches` are not JSON.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct CompileOptions {
    /// Drop keywords that cannot be enforced (listing them) instead of refusing the schema.
    pub lenient: bool = false,
    /// Most whitespace bytes in one gap between JSON tokens (0 = compact JSON only). With
    /// [`Whitespace::Tidy`] (the default) this bounds the spaces and tabs on the gap's line; the
    /// indentation after a line break has its own, depth-relative bound.
    pub max_whitespace: u16 = 20,
    /// What the whitespace in a gap may look like (between JSON tokens, around a JSON Schema's
    /// value, and in a dialect's `@ws`): by default compact, `", "`-style and pretty-printed
    /// output, but no blank lines and no runaway indentation.
    pub whitespace: Whitespace = Whitespace::default(),
    /// Most nested objects/arrays in an output.
    pub max_depth: u32 = 64,
    /// Most nested subschemas while compiling.
    pub max_schema_depth: usize = 200,
    /// Most states in one lexeme automaton.
    pub max_lexeme_states: usize = 50_000,
    /// Most states over all of a grammar's distinct lexeme automata (one shared by many values
    /// counts once).
    pub max_total_states: usize = 200_000,
    /// Most grammar nodes.
    pub max_nodes: usize = 200_000,
    /// Longest compile time (in JSON: seconds, fractions allowed; the older name
    /// `max_compile_secs` is still read, deprecated).
    #[serde(with = "seconds", alias = "max_compile_secs")]
    pub max_compile_time: Duration = Duration::from_secs(10),
    /// Most JSON values in the schema document(s) (every object, array, string, number,
    /// boolean and null counts one; a dialect counts all its tools' parameters together). This is
    /// the schema-size limit: it is checked before anything else, so an oversized document is
    /// refused in one linear pass. Typical schemas weigh 10–40 bytes of JSON per value.
    pub max_schema_values: usize = 1_000_000,
    /// Most heap bytes of one compiled grammar, estimated as it is built: lexeme automata
    /// (transition tables), grammar nodes, object key lists and key tries.
    pub max_memory: usize = 256 << 20,
    /// Schemas for remote `$ref`s (see [`SchemaRegistry`]); none by default, so a `$ref` to
    /// another document is an [`Error::UnresolvedRef`]. Nothing is fetched over the network.
    #[serde(skip)]
    pub registry: Option<Arc<SchemaRegistry>> = None; own_setter,
    /// Treat `format` as an annotation, as JSON Schema 2020-12 does by default: never enforced
    /// and never refused, so any string passes whatever its `format`. Off by default: callmask
    /// asserts the formats it knows (the format-assertion vocabulary) and refuses the others by
    /// name.
    pub format_annotation: bool = false,
    /// Where compiled lexemes are kept for later compiles, and (for automata over this
    /// grammar) token walks: see [`crate::Caches`]. `None` (the default): a compile shares its
    /// lexemes only within itself, and automata use their vocabulary's caches.
    #[serde(skip)]
    pub caches: Option<crate::cache::Caches> = None,
    /// Numbers every JSON parser reads exactly (I-JSON, RFC 7493), on by default: integers
    /// within ±(2^53 − 1) (and at most one `.0` after one) and other numbers with at most 15
    /// significant digits, unless the
    /// schema's own bounds reach further (a `minimum` past 2^53 − 1 lifts the cap on that side;
    /// a number bound of 10^15 or more keeps 19 digits). Off: integers of up to 19 digits and
    /// numbers of up to 19 integer and 20 fraction digits, as JSON allows.
    pub ijson_numbers: bool = true,
}
}

impl CompileOptions {
    /// Sets [`CompileOptions::registry`].
    #[must_use]
    pub fn registry(mut self, registry: SchemaRegistry) -> Self {
        self.registry = Some(Arc::new(registry));
        self
    }
}

/// The whitespace policy: what a gap between tokens may hold.
///
/// A *gap* is the whitespace between two JSON tokens (`{`, a key, `:`, a value, `,`, ...), before
/// or after a JSON Schema grammar's value, or a dialect's `@ws`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Whitespace {
    /// Any mix of space, tab, newline and carriage return, at most
    /// [`CompileOptions::max_whitespace`] bytes per gap (callmask's policy before 0.2: a small
    /// model could fill it with blank lines).
    Any,
    /// The default, with `indent` 4: spaces and tabs (at most
    /// [`CompileOptions::max_whitespace`]), then at most one line break (`\n`; none when
    /// `max_whitespace` is 0), then an indentation of spaces and tabs of at most
    /// `indent × (depth + 1)` bytes, where `depth` is the number of JSON objects and arrays (or
    /// Python argument lists) the gap is in: 0 around a top-level value and in a dialect's `@ws`,
    /// 1 between the members of a top-level object. So compact (`{"a":1}`), `", "`-style
    /// (`{"a": 1, "b": 2}`) and pretty-printed output (`json.dumps(v, indent=2)` or `indent=4`, a
    /// tab per level, a dialect's list of calls one per line) are all allowed, with one level of
    /// slack for a dialect's own nesting; a blank line, a carriage return, or indentation
    /// deeper than the nesting warrants are not.
    Tidy {
        /// Most indentation bytes per nesting level.
        indent: u16,
    },
}

impl Default for Whitespace {
    fn default() -> Self {
        Whitespace::Tidy { indent: 4 }
    }
}

/// [`Whitespace`] in JSON: `"any"`, `"tidy"` (indentation 4) or `{"tidy": {"indent": N}}`.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum WhitespaceJson {
    Name(String),
    Tidy { tidy: TidyJson },
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TidyJson {
    indent: u16,
}

impl Serialize for Whitespace {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match *self {
            Whitespace::Any => WhitespaceJson::Name("any".into()),
            Whitespace::Tidy { indent } => WhitespaceJson::Tidy {
                tidy: TidyJson { indent },
            },
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Whitespace {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        match WhitespaceJson::deserialize(d).map_err(|_| {
            serde::de::Error::custom(
                "whitespace: expected \"tidy\", \"any\" or {\"tidy\": {\"indent\": N}}",
            )
        })? {
            WhitespaceJson::Name(n) if n == "any" => Ok(Whitespace::Any),
            WhitespaceJson::Name(n) if n == "tidy" => Ok(Whitespace::default()),
            WhitespaceJson::Name(n) => Err(serde::de::Error::custom(format!(
                "whitespace: unknown policy {n:?} (\"tidy\" or \"any\")"
            ))),
            WhitespaceJson::Tidy { tidy } => Ok(Whitespace::Tidy {
                indent: tidy.indent,
            }),
        }
    }
}

/// A [`Duration`] in JSON as a number of seconds (fractions allowed).
mod seconds {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub(super) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let secs = f64::deserialize(d)?;
        Duration::try_from_secs_f64(secs).map_err(|_| {
            serde::de::Error::custom(format!(
                "max_compile_time: {secs} is not a non-negative number of seconds"
            ))
        })
    }
}

impl CompileOptions {
    /// The automaton of one gap at nesting `depth` (a dialect's `@ws`: depth 0), built
    /// directly: `[ \t\n\r]{0,w}` for [`Whitespace::Any`], else `[ \t]{0,w}` then at most one
    /// newline with its indentation (`(?:\n[ \t]{0,i})?`).
    pub(crate) fn whitespace_dfa(&self, depth: u32, max_states: usize) -> Result<Dfa, DfaError> {
        let w = self.max_whitespace as u64;
        let mut classes = [0u8; 256];
        classes[b' ' as usize] = 1;
        classes[b'\t' as usize] = 1;
        classes[b'\n' as usize] = 2;
        classes[b'\r' as usize] = 3;
        // State: (after the newline, bytes in this part).
        match self.whitespace {
            Whitespace::Any => Dfa::build(
                0u64,
                max_states,
                &classes,
                |&n, b| (matches!(b, b' ' | b'\t' | b'\n' | b'\r') && n < w).then_some(n + 1),
                |_| true,
            ),
            Whitespace::Tidy { indent } => {
                let i = u64::from(indent) * (u64::from(depth) + 1);
                Dfa::build(
                    (false, 0u64),
                    max_states,
                    &classes,
                    |&(nl, n), b| match b {
                        b' ' | b'\t' if n < if nl { i } else { w } => Some((nl, n + 1)),
                        b'\n' if !nl && w > 0 => Some((true, 0)),
                        _ => None,
                    },
                    |_| true,
                )
            }
        }
    }
}

/// A grammar under construction: its nodes and lexemes, the limits in force, and what lenient
/// mode dropped.
pub(crate) struct GrammarBuilder<'o> {
    /// The options and limits.
    pub(crate) opts: &'o CompileOptions,
    /// The nodes so far.
    pub(crate) nodes: Vec<Node>,
    /// The distinct lexeme automata so far.
    pub(crate) lexemes: Vec<Arc<Dfa>>,
    /// The id of each automaton in `lexemes`, by its address (the `Arc` in `lexemes` keeps the
    /// address from being reused).
    lexeme_ids: rustc_hash::FxHashMap<usize, LexId>,
    /// What lenient mode dropped, as "keyword at #/pointer".
    pub(crate) dropped: Vec<String>,
    /// The argument names of [`Capture::RawArgs`] so far.
    pub(crate) raw_arg_keys: Vec<String>,
    /// The markers that end free text so far ([`GrammarInner::text_markers`]).
    pub(crate) text_markers: Vec<String>,
    /// The type tags of tagged arguments so far ([`GrammarInner::type_tags`]).
    pub(crate) type_tags: Vec<Vec<String>>,
    /// The finished grammar's [`GrammarInner::distinct_calls`] (dialects set it).
    pub(crate) distinct_calls: super::DistinctCalls,
    total_states: usize,
    /// Estimated heap bytes of the grammar so far.
    memory: usize,
    deadline: Instant,
}

/// A JSON pointer as errors show it (`#` for the root).
pub(crate) fn ptr(path: &str) -> String {
    if path.is_empty() {
        "#".into()
    } else {
        format!("#{path}")
    }
}

impl<'o> GrammarBuilder<'o> {
    /// An empty grammar under `opts`; the compile-time budget starts now.
    pub(crate) fn new(opts: &'o CompileOptions) -> Self {
        GrammarBuilder {
            opts,
            nodes: Vec::new(),
            lexemes: Vec::new(),
            lexeme_ids: Default::default(),
            dropped: Vec::new(),
            raw_arg_keys: Vec::new(),
            text_markers: Vec::new(),
            type_tags: Vec::new(),
            distinct_calls: super::DistinctCalls::End,
            total_states: 0,
            memory: 0,
            deadline: Instant::now() + opts.max_compile_time,
        }
    }

    /// Adds `bytes` to the grammar's estimated memory ([`CompileOptions::max_memory`]).
    pub(crate) fn charge(&mut self, bytes: usize) -> Result<()> {
        self.memory = self.memory.saturating_add(bytes);
        if self.memory > self.opts.max_memory {
            return Err(Error::LimitExceeded {
                what: "grammar memory (bytes)",
                limit: self.opts.max_memory,
                option: "max_memory",
                path: String::new(),
            });
        }
        Ok(())
    }

    /// Adds a lexeme's states to the total ([`CompileOptions::max_total_states`]).
    fn count_states(&mut self, dfa: &Dfa) -> Result<()> {
        self.total_states += dfa.state_count();
        if self.total_states > self.opts.max_total_states {
            return Err(Error::LimitExceeded {
                what: "automaton states",
                limit: self.opts.max_total_states,
                option: "max_total_states",
                path: String::new(),
            });
        }
        Ok(())
    }

    pub(crate) fn push(&mut self, node: Node) -> Result<NodeId> {
        if self.nodes.len() >= self.opts.max_nodes {
            return Err(Error::LimitExceeded {
                what: "grammar nodes",
                limit: self.opts.max_nodes,
                option: "max_nodes",
                path: String::new(),
            });
        }
        // The node, its nullable flag, and what it owns on the heap.
        self.charge(std::mem::size_of::<Node>() + 1 + node.heap_bytes())?;
        self.nodes.push(node);
        Ok(self.nodes.len() as NodeId - 1)
    }

    /// A lexeme node for `dfa` as it is (no encoding applied); `Never` for an empty automaton.
    pub(crate) fn lexeme(&mut self, dfa: Arc<Dfa>) -> Result<NodeId> {
        if dfa.is_empty() {
            return self.push(Node::Never);
        }
        let id = self.lexeme_id(dfa)?;
        self.push(Node::Lex(id))
    }

    /// The id of `dfa` in this grammar (one id per shared automaton, whose states and memory
    /// count once).
    pub(crate) fn lexeme_id(&mut self, dfa: Arc<Dfa>) -> Result<LexId> {
        let addr = Arc::as_ptr(&dfa) as usize;
        if let Some(&i) = self.lexeme_ids.get(&addr) {
            return Ok(i);
        }
        self.count_states(&dfa)?;
        self.charge(dfa.memory() + std::mem::size_of::<Arc<Dfa>>())?;
        self.lexemes.push(dfa);
        let id = self.lexemes.len() as LexId - 1;
        self.lexeme_ids.insert(addr, id);
        Ok(id)
    }

    pub(crate) fn dfa_err(&self, e: DfaError, path: &str, pattern: &str) -> Error {
        match e {
            DfaError::TooLarge => Error::LimitExceeded {
                what: "states in one lexeme automaton",
                limit: self.opts.max_lexeme_states,
                option: "max_lexeme_states",
                path: if path.is_empty() {
                    String::new()
                } else {
                    ptr(path)
                },
            },
            DfaError::Regex(message) => Error::InvalidPattern {
                pattern: pattern.into(),
                path: ptr(path),
                message,
            },
        }
    }

    pub(crate) fn regex(&self, re: &str, path: &str) -> Result<Dfa> {
        Dfa::from_regex(re, self.opts.max_lexeme_states).map_err(|e| self.dfa_err(e, path, re))
    }

    /// The intersection of two lexeme automata.
    pub(crate) fn and(&self, a: &Dfa, b: &Dfa, path: &str) -> Result<Dfa> {
        a.product(b, Op::And, self.opts.max_lexeme_states)
            .map_err(|e| self.dfa_err(e, path, ""))
    }

    /// A keyword that cannot be enforced: refused ([`Error::UnsupportedKeyword`]), or dropped
    /// and listed in lenient mode.
    pub(crate) fn unsupported(&mut self, keyword: &str, path: &str, reason: &str) -> Result<()> {
        if self.opts.lenient {
            self.dropped.push(format!("{keyword} at {}", ptr(path)));
            Ok(())
        } else {
            Err(Error::UnsupportedKeyword {
                keyword: keyword.into(),
                path: ptr(path),
                reason: reason.into(),
            })
        }
    }

    /// [`Error::LimitExceeded`] once the compile-time budget is spent.
    pub(crate) fn check_budget(&self) -> Result<()> {
        if Instant::now() > self.deadline {
            return Err(Error::LimitExceeded {
                what: "compile time (ms)",
                limit: self.opts.max_compile_time.as_millis() as usize,
                option: "max_compile_time",
                path: String::new(),
            });
        }
        Ok(())
    }

    /// Finalizes the grammar with `root` as its start node.
    pub(crate) fn finish(
        self,
        root: NodeId,
        json_root: bool,
        specials: Vec<String>,
        functions: Vec<String>,
    ) -> Result<Grammar> {
        let open = (0..self.lexemes.len())
            .map(|_| std::sync::OnceLock::new())
            .collect();
        let mut inner = GrammarInner {
            open,
            nullable: Vec::new(),
            first: Vec::new(),
            depth: Vec::new(),
            nodes: self.nodes,
            lexemes: self.lexemes,
            gaps: Default::default(),
            root,
            max_whitespace: self.opts.max_whitespace,
            indent: match self.opts.whitespace {
                Whitespace::Any => None,
                Whitespace::Tidy { indent } => Some(indent),
            },
            max_depth: self.opts.max_depth,
            dropped: self.dropped,
            root_ws: json_root,
            pop_any: !json_root,
            specials,
            functions,
            raw_arg_keys: self.raw_arg_keys,
            text_markers: self.text_markers,
            type_tags: self.type_tags,
            caches: self.opts.caches.clone(),
            distinct_calls: self.distinct_calls,
            merged: Vec::new(),
            merged_base: NodeId::MAX,
            merged_of: Default::default(),
            merged_cap: Default::default(),
        };
        finalize(&mut inner, self.opts)?;
        add_gap_lexemes(&mut inner, self.opts);
        Ok(Grammar {
            inner: Arc::new(inner),
        })
    }
}

/// Gaps of more states than this are walked byte by byte, without a [`GapLexeme`].
const MAX_GAP_STATES: usize = 2048;

/// The cache key of a gap's automaton: the policy's limits, whether spaces only, and the
/// depth the gap is at (0 without an indentation policy, whose gaps do not depend on it).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct GapKey {
    max: u16,
    indent: Option<u16>,
    space_only: bool,
    depth: u16,
}

impl crate::cache::CacheKey for GapKey {
    type Value = Dfa;
}

/// Adds the grammar's [`GapLexeme`]s: one per kind of gap (spaces only or any whitespace)
/// and, under the tidy policy, per depth that an object or array of that kind is at (the root's
/// gaps at 0). Each automaton is built from [`GrammarInner::gap_ws`] itself (the policy has
/// one definition), and comes from the caches where they are on.
fn add_gap_lexemes(g: &mut GrammarInner, opts: &CompileOptions) {
    let mut wanted: Vec<(bool, u16)> = Vec::new();
    if g.root_ws {
        wanted.push((false, 0));
    }
    for (id, node) in g.nodes.iter().enumerate() {
        let syntax = match node {
            Node::Object(o) => &o.syntax,
            Node::Array(a) => &a.syntax,
            _ => continue,
        };
        let depth = if g.indent.is_some() { g.depth[id] } else { 0 };
        wanted.push((syntax.space_only, depth));
    }
    wanted.sort_unstable();
    wanted.dedup();
    for (space_only, depth) in wanted {
        let Some(gap) = gap_lexeme(g, opts, space_only, depth) else {
            continue;
        };
        let by_depth = &mut g.gaps[usize::from(space_only)];
        if by_depth.len() <= usize::from(depth) {
            by_depth.resize_with(usize::from(depth) + 1, || None);
        }
        by_depth[usize::from(depth)] = Some(gap);
    }
}

/// The [`GapLexeme`] of gaps of one kind at one depth, its automaton added to the grammar's
/// lexemes; `None` for a policy of more than [`MAX_GAP_STATES`] states.
fn gap_lexeme(
    g: &mut GrammarInner,
    opts: &CompileOptions,
    space_only: bool,
    depth: u16,
) -> Option<GapLexeme> {
    let syntax = crate::grammar::Syntax {
        space_only,
        ..crate::grammar::Syntax::OBJECT
    };
    let max = g.max_whitespace;
    // The states: byte counts before the line break, and (tidy) indentations after it.
    let limit = g
        .indent
        .map_or(0, |i| usize::from(i) * (usize::from(depth) + 1));
    if usize::from(max) + limit + 2 > MAX_GAP_STATES || limit >= usize::from(GAP_NL) {
        return None;
    }
    let build = |g: &GrammarInner| {
        let mut classes = [0u8; 256];
        for b in [b' ', b'\t', b'\n', b'\r'] {
            classes[b as usize] = b;
        }
        let step = |ws: &u16, b: u8| g.gap_ws(*ws, b, Some(&syntax), usize::from(depth));
        Dfa::build(0u16, MAX_GAP_STATES + 1, &classes, step, |_| true)
    };
    let key = GapKey {
        max,
        indent: g.indent,
        space_only,
        depth,
    };
    let dfa = match &opts.caches {
        Some(c) => c
            .get_or_build(key.clone(), || {
                build(g).map(|d| {
                    let bytes = d.memory();
                    (d, bytes)
                })
            })
            .ok()?,
        None => Arc::new(build(g).ok()?),
    };
    // A gap's state by the spelling that reaches it: `n` spaces; a line break then `n`.
    let run = |from: u32, n: usize| {
        let mut states = Vec::with_capacity(n + 1);
        let mut s = from;
        for _ in 0..=n {
            states.push(s);
            s = dfa.next(s, b' ');
        }
        states
    };
    let plain = run(dfa.start(), usize::from(max));
    let after_nl = dfa.next(dfa.start(), b'\n');
    let broken = if g.indent.is_some() && after_nl != Dfa::DEAD {
        run(after_nl, limit)
    } else {
        Vec::new()
    };
    g.lexemes.push(dfa);
    g.open.push(std::sync::OnceLock::new());
    Some(GapLexeme {
        lex: g.lexemes.len() as LexId - 1,
        plain,
        broken,
        key,
    })
}

fn finalize(g: &mut GrammarInner, _opts: &CompileOptions) -> Result<()> {
    let n = g.nodes.len();
    // 1. Flatten unions into their non-union leaves (union cycles contribute nothing).
    let mut flat: Vec<Option<Vec<NodeId>>> = vec![None; n];
    fn leaves(g: &GrammarInner, id: NodeId, seen: &mut Vec<bool>, out: &mut Vec<NodeId>) {
        if seen[id as usize] {
            return;
        }
        seen[id as usize] = true;
        match &g.nodes[id as usize] {
            Node::Union(alts) => {
                for &a in alts {
                    leaves(g, a, seen, out);
                }
            }
            Node::Never => {}
            _ => {
                if !out.contains(&id) {
                    out.push(id)
                }
            }
        }
    }
    for (id, slot) in flat.iter_mut().enumerate() {
        if matches!(g.nodes[id], Node::Union(_)) {
            let mut seen = vec![false; n];
            let mut out = Vec::new();
            leaves(g, id as NodeId, &mut seen, &mut out);
            *slot = Some(out);
        }
    }
    for (id, f) in flat.into_iter().enumerate() {
        if let Some(f) = f {
            g.nodes[id] = if f.is_empty() {
                Node::Never
            } else {
                Node::Union(f)
            };
        }
    }
    // 2. Productivity: which nodes admit at least one finite value.
    let prod = g.productive(&[]);
    // 3. Prune what admits nothing.
    for id in 0..n {
        if !prod[id] {
            g.nodes[id] = Node::Never;
            continue;
        }
        match &mut g.nodes[id] {
            Node::Union(alts) => alts.retain(|&a| prod[a as usize]),
            Node::Object(o) => {
                let mut off: Vec<bool> = o.values.iter().map(|&v| !prod[v as usize]).collect();
                // A key that requires an unavailable key is unavailable (to a fixpoint).
                loop {
                    let mut changed = false;
                    for (t, needs) in &o.dependencies {
                        if !off[*t as usize] && needs.iter().any(|&k| off[k as usize]) {
                            off[*t as usize] = true;
                            changed = true;
                        }
                    }
                    if !changed {
                        break;
                    }
                }
                o.unavailable = (0..o.keys.len() as u32)
                    .filter(|&k| off[k as usize])
                    .collect();
                // Extra keys whose value (of any kind) cannot be written are not offered: the
                // kinds share one key lexeme, so one unproductive kind takes them all away.
                if let Some((_, v)) = o.additional {
                    if !prod[v as usize] || o.extra_kinds.iter().any(|k| !prod[k.1 as usize]) {
                        o.additional = None;
                        o.extra_kinds.clear();
                    }
                }
            }
            Node::Array(a) => {
                // Unique values that cannot be written are not offered (they are the items).
                if !a.unique.is_empty() {
                    a.unique.retain(|&v| prod[v as usize]);
                    a.max_items = a.max_items.min(a.unique.len() as u32);
                }
                let first_bad = a.prefix.iter().position(|&p| !prod[p as usize]);
                if let Some(i) = first_bad {
                    a.max_items = a.max_items.min(i as u32);
                    a.prefix.truncate(i);
                } else if a.items.is_some_and(|it| !prod[it as usize]) {
                    a.max_items = a.max_items.min(a.prefix.len() as u32);
                }
                if a.items.is_none() {
                    a.max_items = a.max_items.min(a.prefix.len() as u32);
                }
            }
            Node::Repeat { item, max, .. } if !prod[*item as usize] => *max = 0,
            _ => {}
        }
    }
    // 4. Which nodes match the empty output.
    let mut nullable = vec![false; n];
    loop {
        let mut changed = false;
        for id in 0..n {
            if nullable[id] {
                continue;
            }
            let e = match &g.nodes[id] {
                Node::Lex(l) => {
                    let d = &g.lexemes[*l as usize];
                    !d.is_empty() && d.is_accepting(d.start())
                }
                Node::Union(alts) => alts.iter().any(|&a| nullable[a as usize]),
                Node::Seq(e) => e.iter().all(|&x| nullable[x as usize]),
                Node::Repeat { item, min, .. } => *min == 0 || nullable[*item as usize],
                Node::Capture(_, x) => nullable[*x as usize],
                _ => false,
            };
            if e {
                nullable[id] = true;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    g.nullable = nullable;
    g.first = first_bytes(g);
    g.depth = depths(g);
    merge_object_unions(g);
    Ok(())
}

/// The fewest alternatives a union of objects of one shape needs to be merged
/// ([`crate::grammar::MergedUnion`]).
const MERGE_MIN: usize = 2;

/// True when objects `a` and `b` take the same bytes until a value starts: the same keys
/// (spelled alike), required keys, unavailable keys and counts, no keys beyond the listed ones.
fn same_shape(a: &ObjectNode, b: &ObjectNode) -> bool {
    a.keys == b.keys
        && a.required == b.required
        && a.unavailable == b.unavailable
        && a.dependencies == b.dependencies
        && a.min_props == b.min_props
        && a.max_props == b.max_props
        && a.syntax == b.syntax
        && a.alias == b.alias
        && a.first == b.first
        && a.additional.is_none()
        && b.additional.is_none()
        && a.extra_kinds.is_empty()
        && b.extra_kinds.is_empty()
}

/// Gives each union of [`MERGE_MIN`] or more objects of one shape at one depth a merged node
/// (see [`crate::grammar::MergedUnion`]): a copy of its first object, appended to the nodes
/// with the tables set as that object's.
fn merge_object_unions(g: &mut GrammarInner) {
    let n = g.nodes.len();
    g.merged_base = n as NodeId;
    for id in 0..n {
        let Node::Union(alts) = &g.nodes[id] else {
            continue;
        };
        if alts.len() < MERGE_MIN {
            continue;
        }
        // Each alternative's object node, and its capture node where it has one.
        let object = |a: NodeId| match &g.nodes[a as usize] {
            Node::Object(_) => Some((a, None)),
            Node::Capture(_, x) if matches!(g.nodes[*x as usize], Node::Object(_)) => {
                Some((*x, Some(a)))
            }
            _ => None,
        };
        let Some(parts) = alts.iter().map(|&a| object(a)).collect::<Option<Vec<_>>>() else {
            continue;
        };
        let Node::Object(first) = &g.nodes[parts[0].0 as usize] else {
            continue;
        };
        let rep = parts[0].0 as usize;
        let depth = g.depth[rep];
        let captured = parts[0].1.is_some();
        let mergeable = parts.iter().all(|&(o, cap)| {
            matches!(&g.nodes[o as usize], Node::Object(x) if same_shape(first, x))
                && g.depth[o as usize] == depth
                && cap.is_some() == captured
        });
        if !mergeable {
            continue;
        }
        let copy = Node::Object(first.clone());
        let node = g.nodes.len() as NodeId;
        g.nodes.push(copy);
        g.nullable.push(g.nullable[rep]);
        g.first.push(g.first[rep]);
        g.depth.push(depth);
        for (j, cap) in parts.iter().filter_map(|p| p.1).enumerate() {
            g.merged_cap.insert(cap, (g.merged.len() as u32, j as u32));
        }
        g.merged.push(crate::grammar::MergedUnion {
            alts: parts.iter().map(|p| p.0).collect(),
            caps: captured.then(|| parts.iter().filter_map(|p| p.1).collect()),
        });
        g.merged_of.insert(id as NodeId, node);
    }
}

/// Per node, the bytes its value may start with (to a fixpoint over the graph; `nullable` must
/// be set): what `start_value` can take, so a union skips the alternatives outside it.
fn first_bytes(g: &GrammarInner) -> Vec<[u64; 4]> {
    fn add(set: &mut [u64; 4], b: u8) {
        set[b as usize / 64] |= 1 << (b % 64);
    }
    let n = g.nodes.len();
    let mut first = vec![[0u64; 4]; n];
    // Leaves first, once: their sets do not depend on other nodes (a lexeme's, once per lexeme:
    // many nodes share one).
    let mut lexeme_first: Vec<Option<[u64; 4]>> = vec![None; g.lexemes.len()];
    for (id, set) in first.iter_mut().enumerate() {
        match &g.nodes[id] {
            Node::Lex(l) => {
                *set = *lexeme_first[*l as usize].get_or_insert_with(|| {
                    let d = &g.lexemes[*l as usize];
                    let mut own = [0u64; 4];
                    if !d.is_empty() {
                        for b in 0..=255u8 {
                            if d.next(d.start(), b) != crate::grammar::dfa::Dfa::DEAD {
                                add(&mut own, b);
                            }
                        }
                    }
                    own
                });
            }
            Node::Object(o) => add(set, o.syntax.open),
            Node::Array(a) => add(set, a.syntax.open),
            _ => {}
        }
    }
    loop {
        let mut changed = false;
        for id in 0..n {
            let mut set = first[id];
            match &g.nodes[id] {
                Node::Union(alts) => {
                    for &a in alts {
                        (0..4).for_each(|w| set[w] |= first[a as usize][w]);
                    }
                }
                Node::Seq(e) => {
                    for &x in e {
                        (0..4).for_each(|w| set[w] |= first[x as usize][w]);
                        if !g.nullable[x as usize] {
                            break;
                        }
                    }
                }
                Node::Repeat { item: x, .. } | Node::Capture(_, x) => {
                    (0..4).for_each(|w| set[w] |= first[*x as usize][w]);
                }
                Node::Lex(_)
                | Node::Object(_)
                | Node::Array(_)
                | Node::Special(_)
                | Node::Never => {}
            }
            if set != first[id] {
                first[id] = set;
                changed = true;
            }
        }
        if !changed {
            return first;
        }
    }
}

/// Per node, the most objects and arrays on a path from the root to it (itself included),
/// capped at `max_depth + 1` (a cycle through a container reaches the cap).
fn depths(g: &GrammarInner) -> Vec<u16> {
    let n = g.nodes.len();
    let cap = u16::try_from(g.max_depth.saturating_add(1)).unwrap_or(u16::MAX);
    let own = |id: usize| u16::from(matches!(g.nodes[id], Node::Object(_) | Node::Array(_)));
    let mut depth = vec![0u16; n];
    let mut reached = vec![false; n];
    if n == 0 {
        return depth;
    }
    let root = g.root as usize;
    depth[root] = own(root);
    reached[root] = true;
    let children = |id: usize, out: &mut Vec<NodeId>| match &g.nodes[id] {
        Node::Object(o) => {
            out.extend(&o.values);
            out.extend(o.additional.map(|(_, v)| v));
            out.extend(o.extra_kinds.iter().map(|k| k.1));
        }
        Node::Array(a) => {
            out.extend(&a.prefix);
            out.extend(a.items);
        }
        Node::Union(v) | Node::Seq(v) => out.extend(v),
        Node::Repeat { item, .. } | Node::Capture(_, item) => out.push(*item),
        _ => {}
    };
    // Longest paths, by a worklist: a node is revisited only when its depth rose, which
    // happens at most `cap` times.
    let mut kids = Vec::new();
    let mut todo = vec![root];
    while let Some(id) = todo.pop() {
        kids.clear();
        children(id, &mut kids);
        for &k in &kids {
            let k = k as usize;
            let d = depth[id].saturating_add(own(k)).min(cap);
            if !reached[k] || d > depth[k] {
                reached[k] = true;
                depth[k] = d;
                todo.push(k);
            }
        }
    }
    depth
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The directly built gap automaton has the language of the regex it replaced.
    #[test]
    fn whitespace_dfa_equals_its_regex() {
        let configs = [
            (Whitespace::Tidy { indent: 4 }, 20, 0),
            (Whitespace::Tidy { indent: 2 }, 3, 2),
            (Whitespace::Tidy { indent: 0 }, 0, 0),
            (Whitespace::Tidy { indent: 4 }, 0, 1),
            (Whitespace::Any, 5, 0),
            (Whitespace::Any, 0, 0),
        ];
        for (ws, w, depth) in configs {
            let opts = CompileOptions::default().whitespace(ws).max_whitespace(w);
            let re = match ws {
                Whitespace::Any => format!("[ \\t\\n\\r]{{0,{w}}}"),
                Whitespace::Tidy { .. } if w == 0 => String::new(),
                Whitespace::Tidy { indent } => format!(
                    "[ \\t]{{0,{w}}}(?:\\n[ \\t]{{0,{}}})?",
                    u32::from(indent) * (depth + 1)
                ),
            };
            let slow = Dfa::from_regex(&re, 10_000).unwrap();
            let fast = opts.whitespace_dfa(depth, 10_000).unwrap();
            let mut words: Vec<Vec<u8>> = vec![vec![]];
            while let Some(word) = words.pop() {
                assert_eq!(
                    fast.matches(&word),
                    slow.matches(&word),
                    "{ws:?} {w} {word:?}"
                );
                if word.len() < 9 && (fast.matches(&word) || slow.matches(&word)) {
                    for b in [b' ', b'\t', b'\n', b'\r', b'a'] {
                        let mut n = word.clone();
                        n.push(b);
                        words.push(n);
                    }
                }
            }
        }
    }
}
