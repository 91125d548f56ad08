//! The compiled grammar: what a JSON Schema becomes, shared across threads and sequences.
//!
//! A grammar is a graph of [`Node`]s (objects, arrays, unions) whose leaves are lexemes, each a
//! trimmed byte [`Dfa`]. Recursion (`$ref` cycles) is a cycle in the graph; the matcher's stack
//! unrolls it at run time. Compile with [`Grammar::from_json_schema`].

pub(crate) mod builder;
pub(crate) mod dfa;
pub(crate) mod registry;

pub use builder::{CompileOptions, Whitespace};
use dfa::Dfa;
pub use registry::SchemaRegistry;
use std::sync::Arc;

/// What happens to a call that would repeat an earlier call of the same output (the same
/// function, arguments equal as JSON values: key order, spelling and number form aside).
///
/// In JSON: `"end"`, `"bend"` or `"allow"`; `true` is `"end"` (the default) and `false` is
/// `"allow"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DistinctCalls {
    /// The repeat ends the calls (the default): the mask lets it complete only where the
    /// output can then end, with no further call, within the token budget; the parsed reply
    /// and the streamed calls leave it (and anything after it) out, and a call that may still
    /// turn out to be a repeat is held back from the stream until it differs. A small model
    /// that repeats a call is saying it is done.
    #[default]
    End,
    /// The mask keeps a call from completing as a repeat: the model is steered to a call that
    /// differs (an argument changed or added).
    Bend,
    /// No rule: a repeat is a call like any other.
    Allow,
}

impl From<bool> for DistinctCalls {
    /// `true`: [`DistinctCalls::End`]; `false`: [`DistinctCalls::Allow`].
    fn from(on: bool) -> DistinctCalls {
        if on {
            DistinctCalls::End
        } else {
            DistinctCalls::Allow
        }
    }
}

impl std::str::FromStr for DistinctCalls {
    type Err = crate::error::Error;
    fn from_str(s: &str) -> crate::error::Result<DistinctCalls> {
        match s {
            "end" | "true" => Ok(DistinctCalls::End),
            "bend" => Ok(DistinctCalls::Bend),
            "allow" | "false" => Ok(DistinctCalls::Allow),
            other => Err(crate::error::Error::InvalidOptions(format!(
                "distinct_calls: {other:?} is none of \"end\", \"bend\", \"allow\" (or true, false)"
            ))),
        }
    }
}

impl<'de> serde::Deserialize<'de> for DistinctCalls {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Either {
            Flag(bool),
            Name(String),
        }
        match Either::deserialize(d)? {
            Either::Flag(on) => Ok(on.into()),
            Either::Name(name) => name.parse().map_err(serde::de::Error::custom),
        }
    }
}

/// Index of a node in a grammar.
pub(crate) type NodeId = u32;
/// Index of a lexeme automaton in a grammar.
pub(crate) type LexId = u32;

/// A compiled JSON Schema, ready to drive matchers. Cheap to clone; `Send + Sync`.
#[derive(Clone, Debug)]
pub struct Grammar {
    pub(crate) inner: Arc<GrammarInner>,
}

/// The shared contents of a [`Grammar`].
#[derive(Debug)]
pub(crate) struct GrammarInner {
    pub(crate) nodes: Vec<Node>,
    pub(crate) lexemes: Vec<Arc<Dfa>>,
    pub(crate) root: NodeId,
    /// Most whitespace bytes allowed in one gap between JSON tokens (with a tidy policy: on
    /// the gap's first line).
    pub(crate) max_whitespace: u16,
    /// The tidy whitespace policy's indentation per level; `None`: any whitespace
    /// ([`crate::grammar::builder::Whitespace`]).
    pub(crate) indent: Option<u16>,
    /// Most nested objects and arrays.
    pub(crate) max_depth: u32,
    /// What lenient mode dropped, as "keyword at /pointer".
    pub(crate) dropped: Vec<String>,
    /// Whether whitespace may surround the root value (JSON Schema grammars; dialects spell
    /// their own whitespace).
    pub(crate) root_ws: bool,
    /// Whether a complete value may hand any byte to its parent (dialect grammars), or only the
    /// bytes that can follow a JSON value (whitespace, `,`, `}`, `]`).
    pub(crate) pop_any: bool,
    /// Per node: true when it matches the empty output.
    pub(crate) nullable: Vec<bool>,
    /// Per node: the bytes its value may start with (bit `b` of word `b / 64`), so that a union
    /// tries only the alternatives that can take the next byte (a call union of 1,000 functions
    /// would otherwise copy the stack 1,000 times per byte). Special tokens are not in it.
    pub(crate) first: Vec<[u64; 4]>,
    /// Per node: the most objects and arrays on a path from the root to it, itself included
    /// (capped at `max_depth + 1`, which recursion reaches); bounds the indentation of the
    /// tidy whitespace policy.
    pub(crate) depth: Vec<u16>,
    /// The special tokens the grammar refers to, by text; [`Node::Special`] holds the index.
    pub(crate) specials: Vec<String>,
    /// The functions, by index of [`Capture::Call`] (empty for a plain JSON Schema grammar).
    pub(crate) functions: Vec<String>,
    /// The argument names of [`Capture::RawArgs`], by its index.
    pub(crate) raw_arg_keys: Vec<String>,
    /// The markers that end the grammar's free text (`@text_without`'s), each once: what
    /// opens the structures after text, which the recovering parse puts back where a model
    /// left one out.
    pub(crate) text_markers: Vec<String>,
    /// The key suffixes of each tagged form of arguments (`" string="true">` and `"
    /// string="false">`), as texts: the recovering parse tries another where a model wrote a
    /// value under the wrong one.
    pub(crate) type_tags: Vec<Vec<String>>,
    /// The caches it was compiled with ([`crate::CompileOptions::caches`]): automata over it
    /// keep their token walks there.
    pub(crate) caches: Option<crate::cache::Caches>,
    /// The default of [`crate::Matcher::set_distinct_calls`] for matchers over it, and what
    /// the parsers do with a repeated call ([`crate::DialectOptions::distinct_calls`]).
    pub(crate) distinct_calls: DistinctCalls,
    /// Per lexeme, computed on first use: can a literal of it always end as a value not used
    /// yet ([`dfa::fresh::always_open`]), so that extra keys and unique strings need no search.
    pub(crate) open: Vec<std::sync::OnceLock<bool>>,
    /// The whitespace of a gap as a lexeme, for gaps of spaces only (index 1: JSON inside a
    /// JSON string) or any whitespace (index 0), by depth under the tidy policy (index 0
    /// otherwise); missing for a policy too large for one ([`GapLexeme`]).
    pub(crate) gaps: [Vec<Option<GapLexeme>>; 2],
    /// Unions of objects of one shape, each matched as one object frame while its keys are
    /// written ([`MergedUnion`]); the merged frames' nodes are `merged_base + i`.
    pub(crate) merged: Vec<MergedUnion>,
    /// The first merged node (`nodes.len()` without any).
    pub(crate) merged_base: NodeId,
    /// The merged form of each merged union, by the union's node.
    pub(crate) merged_of: rustc_hash::FxHashMap<NodeId, NodeId>,
    /// Per capture node around an alternative of a merged union (a dialect's call): the
    /// union's index in `merged` and the alternative's.
    pub(crate) merged_cap: rustc_hash::FxHashMap<NodeId, (u32, u32)>,
}

/// A union of objects that differ only in their values (the same keys, required keys and
/// spelling, no other keys): `anyOf` over a tool set's calls, each `{"name": .., "arguments":
/// ..}`. Until a value starts, every alternative takes the same bytes and stays alive, so a
/// matcher carries them as one object frame on a node of their own (a copy of the first
/// alternative's object, whose values are never started), not as one stack per alternative:
/// a first mask over 1,000 tools steps one stack down the token trie, not 1,000. At the first
/// byte of a value (or the close of an empty object) the frame becomes the alternatives' own
/// frames, and each goes on as it would have. The trade-off: code that reads an object
/// frame's values (the completion costs, coverage) takes the least or the union over the
/// alternatives ([`GrammarInner::merged_alts`]).
#[derive(Debug)]
pub(crate) struct MergedUnion {
    /// The alternatives' object nodes.
    pub(crate) alts: Vec<NodeId>,
    /// Where each alternative is a capture around its object (a dialect's calls): the capture
    /// nodes, by alternative. Such a union is merged only inside token walks, whose stacks
    /// nothing reads captures from: a matcher's states, the output parser and the
    /// distinct-calls rule keep one stack per call.
    pub(crate) caps: Option<Vec<NodeId>>,
}

/// A gap's whitespace (between the tokens of an object or array, around the root value) as a
/// lexeme automaton, which lets token walks run a gap the way they run a string: one automaton
/// over the trie's whitespace tokens, shared per vocabulary, then what follows the gap from
/// the nodes where it may end, instead of a grammar step per trie node. A frame in a gap is
/// then "this automaton in the state of its byte count, then the frame with its gap closed"
/// ([`GrammarInner::as_lexeme`]): what follows a gap does not depend on its length.
#[derive(Debug)]
pub(crate) struct GapLexeme {
    /// The automaton's id in [`GrammarInner::lexemes`].
    pub(crate) lex: LexId,
    /// Its state after a gap of `n` bytes, by `n` (0 up to the most whitespace allowed).
    pub(crate) plain: Vec<dfa::StateId>,
    /// Under the tidy policy, its state after the gap's line break and `n` bytes of
    /// indentation, by `n`.
    pub(crate) broken: Vec<dfa::StateId>,
    /// What the automaton is a function of (the policy's limits, the kind, the depth): equal
    /// keys, equal automata, in any grammar.
    pub(crate) key: builder::GapKey,
}

/// True for JSON's whitespace bytes (space, tab, line feed, carriage return).
#[inline]
pub(crate) fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// Whitespace allowed between tokens of a container with this spelling.
#[inline]
pub(crate) fn is_gap_ws(b: u8, syntax: &Syntax) -> bool {
    if syntax.space_only {
        b == b' '
    } else {
        is_ws(b)
    }
}

/// Gap state bit: the gap has had its line break (the count is then the indentation).
pub(crate) const GAP_NL: u16 = 0x8000;

/// Gap state of a gap closed to more whitespace: the frame after its gap's lexeme
/// ([`GrammarInner::as_lexeme`]), only ever in a token walk's stacks.
pub(crate) const GAP_CLOSED: u16 = u16::MAX;

impl GrammarInner {
    /// The merged union ([`MergedUnion`]) a node is the merged form of, `None` for any other
    /// node.
    #[inline]
    fn merged_union(&self, node: NodeId) -> Option<&MergedUnion> {
        let i = node.checked_sub(self.merged_base)?;
        self.merged.get(i as usize)
    }

    /// The alternatives' object nodes of a merged union's node ([`MergedUnion`]), `None` for
    /// any other node.
    #[inline]
    pub(crate) fn merged_alts(&self, node: NodeId) -> Option<&[NodeId]> {
        self.merged_union(node).map(|m| m.alts.as_slice())
    }

    /// The capture nodes around a merged union's alternatives ([`MergedUnion::caps`]).
    #[inline]
    pub(crate) fn merged_caps(&self, node: NodeId) -> Option<&[NodeId]> {
        self.merged_union(node).and_then(|m| m.caps.as_deref())
    }

    /// The key of the gap automaton that lexeme `lex` is, if it is one ([`GapLexeme::key`]).
    pub(crate) fn gap_key(&self, lex: LexId) -> Option<&builder::GapKey> {
        self.gaps
            .iter()
            .flatten()
            .flatten()
            .find(|g| g.lex == lex)
            .map(|g| &g.key)
    }

    /// The gap state after whitespace byte `b` in a gap of a container spelled `syntax` (`None`
    /// at the top level) at nesting `depth` (the container's [`GrammarInner::depth`]: a property
    /// of the node, not of the stack below it, so that masks stay a function of the top frame),
    /// or `None` if the policy refuses the byte. The state
    /// is a byte count, with [`GAP_NL`] set once the gap has had its line break.
    #[inline]
    pub(crate) fn gap_ws(
        &self,
        ws: u16,
        b: u8,
        syntax: Option<&Syntax>,
        depth: usize,
    ) -> Option<u16> {
        let ok = match syntax {
            Some(s) => is_gap_ws(b, s),
            None => is_ws(b),
        };
        if !ok || ws == GAP_CLOSED {
            return None;
        }
        let max = self.max_whitespace;
        let Some(indent) = self.indent else {
            return (ws < max).then_some(ws + 1);
        };
        let count = ws & !GAP_NL;
        match b {
            b' ' | b'\t' if ws & GAP_NL != 0 => {
                let limit = usize::from(indent).saturating_mul(depth + 1);
                (usize::from(count) < limit).then_some(ws + 1)
            }
            b' ' | b'\t' => (count < max).then_some(ws + 1),
            b'\n' if ws & GAP_NL == 0 && max > 0 => Some(GAP_NL),
            _ => None,
        }
    }
}

/// What a [`Node::Capture`] marks, for the output parser.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Capture {
    /// Free text returned as the reply's text.
    Text,
    /// Reasoning before the answer.
    Reasoning,
    /// One call of function `i`.
    Call(u32),
    /// A call's own id as the model wrote it: a JSON string literal (`true`) or raw text.
    CallId(bool),
    /// A call's arguments, written in this encoding.
    Args(ArgEncoding),
    /// A call's arguments written as the raw text of their one string argument
    /// (`@args(as=raw, key=..)`), whose name is [`GrammarInner::raw_arg_keys`] at this index.
    RawArgs(u32),
    /// A call's arguments written as tagged fields (`@xml_args`): holds [`Capture::Key`] and
    /// [`Capture::Value`] spans.
    Fields,
    /// An argument's name, as is.
    Key,
    /// An argument's value: raw text (`true`) or JSON (`false`).
    Value(bool),
}

impl Capture {
    /// True for the captures that hold a call's arguments (in whatever spelling).
    pub(crate) fn is_arguments(self) -> bool {
        matches!(
            self,
            Capture::Args(_) | Capture::Fields | Capture::RawArgs(_)
        )
    }
}

/// How a call's arguments are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArgEncoding {
    /// A JSON object text, e.g. `{"location": "SF"}`, maybe with whitespace around it.
    Json,
    /// A JSON string literal, quotes included, whose content is a JSON object text, e.g.
    /// `"{\"location\": \"SF\"}"`.
    JsonInString,
    /// Python keyword arguments: the text between a call's parentheses, e.g.
    /// `city='SF', n=3, flag=True`.
    Python,
    /// Gemma 4's notation: an object with bare keys, strings between `<|"|>` quotes (raw: no
    /// escapes, a special token where the vocabulary has one), JSON's numbers, `true`, `false`
    /// and `null`, e.g. `{city:<|"|>SF<|"|>,n:3}`.
    Gemma,
}

/// How an object or array is spelled: JSON, JSON inside a JSON string, or Python.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Syntax {
    /// Opening byte (`{`, `[`, `(`).
    pub(crate) open: u8,
    /// Closing byte.
    pub(crate) close: u8,
    /// Byte between a key and its value; `None` when the key spelling includes it (`name=`).
    pub(crate) colon: Option<u8>,
    /// Only spaces between tokens (inside a JSON string, other whitespace would be escaped).
    pub(crate) space_only: bool,
}

impl Syntax {
    /// JSON objects.
    pub(crate) const OBJECT: Syntax = Syntax {
        open: b'{',
        close: b'}',
        colon: Some(b':'),
        space_only: false,
    };
    /// JSON arrays.
    pub(crate) const ARRAY: Syntax = Syntax {
        open: b'[',
        close: b']',
        colon: None,
        space_only: false,
    };
}

/// One node of the grammar graph.
#[derive(Debug, Clone)]
pub(crate) enum Node {
    /// A scalar matched by a lexeme automaton (string, number, literal, or a union of them).
    Lex(LexId),
    /// A JSON object.
    Object(Box<ObjectNode>),
    /// A JSON array.
    Array(ArrayNode),
    /// Any of several values (tried in parallel).
    Union(Vec<NodeId>),
    /// No value at all.
    Never,
    /// The nodes one after the other.
    Seq(Vec<NodeId>),
    /// `item` repeated `min..=max` times.
    Repeat {
        /// The repeated node.
        item: NodeId,
        /// Fewest repetitions.
        min: u32,
        /// Most repetitions (`u32::MAX`: unbounded).
        max: u32,
    },
    /// A node whose span the parser reports.
    Capture(Capture, NodeId),
    /// The special token with this index in [`GrammarInner::specials`] (never matched by bytes).
    Special(u32),
}

impl Node {
    /// Estimated heap bytes the node owns (for [`crate::CompileOptions::max_memory`]).
    pub(crate) fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        match self {
            Node::Object(o) => {
                size_of::<ObjectNode>()
                    + o.keys
                        .iter()
                        .map(|k| k.len() + size_of::<Vec<u8>>())
                        .sum::<usize>()
                    + (o.values.len()
                        + o.required.len()
                        + o.unavailable.len()
                        + o.alias.len()
                        + o.first.len())
                        * size_of::<u32>()
                    + o.extra_kinds.iter().map(|k| k.0.memory()).sum::<usize>()
                    + o.dependencies
                        .iter()
                        .map(|d| size_of::<(u32, Vec<u32>)>() + d.1.len() * size_of::<u32>())
                        .sum::<usize>()
                    + o.trie.memory()
            }
            Node::Array(a) => a.prefix.len() * size_of::<NodeId>(),
            Node::Union(v) | Node::Seq(v) => v.len() * size_of::<NodeId>(),
            _ => 0,
        }
    }
}

/// An object: listed properties in any order (but for `first`), each at most once, required
/// ones present.
#[derive(Debug, Clone)]
pub(crate) struct ObjectNode {
    /// Each listed key as canonical JSON (quotes included), sorted bytewise; the index is the key's id.
    pub(crate) keys: Vec<Vec<u8>>,
    /// The value node of each listed key.
    pub(crate) values: Vec<NodeId>,
    /// Byte trie over `keys`.
    pub(crate) trie: KeyTrie,
    /// Required key ids.
    pub(crate) required: Vec<u32>,
    /// Key ids that may not appear (their value admits nothing, or a key they require cannot
    /// appear), treated as already seen.
    pub(crate) unavailable: Vec<u32>,
    /// `dependentRequired`: (key id, the key ids that must also appear when it does), one entry
    /// per spelling of the key. The `required` list is closed under these.
    pub(crate) dependencies: Vec<(u32, Vec<u32>)>,
    /// `minProperties` (0 when unset).
    pub(crate) min_props: u32,
    /// `maxProperties` (`u32::MAX` when unset).
    pub(crate) max_props: u32,
    /// Lexeme for any other key (excluding listed ones) and its value node, when allowed.
    pub(crate) additional: Option<(LexId, NodeId)>,
    /// With `patternProperties` whose kinds of extra keys want different schemas: each kind's
    /// names (decoded) and value node; an extra key's value is its kind's (the kinds are
    /// disjoint and together make `additional`'s lexeme, whose own node is then the first
    /// kind's). Empty otherwise.
    pub(crate) extra_kinds: Vec<(Arc<Dfa>, NodeId)>,
    /// How the object is spelled.
    pub(crate) syntax: Syntax,
    /// Keys with several spellings (Python `'k'` and `"k"`; JSON `"ñ"` and `"\u00f1"`):
    /// `alias[i]` is the first spelling of the key that spelling `i` spells (empty when no key
    /// has two).
    pub(crate) alias: Vec<u32>,
    /// The spellings (key ids) of a required key that comes before every other key: a call
    /// envelope's name, which the models' templates write first.
    /// Empty: any order.
    pub(crate) first: Vec<u32>,
}

/// A trie over an object's encoded keys; node 0 is the root.
///
/// Flat: each node's children are a contiguous run of `edges`, so building the trie of an
/// object's keys allocates two vectors, not one per node (a tool set of 1,000 functions has
/// tens of thousands of key-trie nodes).
#[derive(Debug, Clone, Default)]
pub(crate) struct KeyTrie {
    pub(crate) nodes: Vec<KeyTrieNode>,
    /// The children of every node, `(byte, child)`, a node's run in byte order.
    edges: Vec<(u8, u32)>,
}

/// One trie node: keys in `lo..hi` share this prefix (of `depth` bytes); `key` is set where a
/// key ends.
#[derive(Debug, Clone, Default)]
pub(crate) struct KeyTrieNode {
    /// The node's children: `edges[first..first + count]`.
    first: u32,
    count: u16,
    pub(crate) depth: u32,
    pub(crate) lo: u32,
    pub(crate) hi: u32,
    pub(crate) key: Option<u32>,
}

impl KeyTrie {
    /// Builds the trie of sorted, distinct keys.
    pub(crate) fn new(keys: &[Vec<u8>]) -> KeyTrie {
        debug_assert!(
            keys.windows(2).all(|w| w[0] < w[1]),
            "keys sorted and distinct"
        );
        let mut t = KeyTrie {
            nodes: vec![KeyTrieNode {
                hi: keys.len() as u32,
                ..Default::default()
            }],
            edges: Vec::new(),
        };
        // Nodes whose children are not made yet: the keys under a node share its `depth`
        // bytes, so (sorted) the key ending there comes first and the children's runs follow
        // in byte order.
        let mut todo = vec![0u32];
        while let Some(n) = todo.pop() {
            let KeyTrieNode { depth, lo, hi, .. } = t.nodes[n as usize];
            let d = depth as usize;
            let mut i = lo as usize;
            if keys.get(i).is_some_and(|k| k.len() == d) {
                t.nodes[n as usize].key = Some(i as u32);
                i += 1;
            }
            let first = t.edges.len();
            while i < hi as usize {
                let b = keys[i][d];
                let start = i;
                while i < hi as usize && keys[i][d] == b {
                    i += 1;
                }
                let child = t.nodes.len() as u32;
                t.nodes.push(KeyTrieNode {
                    depth: depth + 1,
                    lo: start as u32,
                    hi: i as u32,
                    ..Default::default()
                });
                t.edges.push((b, child));
                todo.push(child);
            }
            let node = &mut t.nodes[n as usize];
            node.first = first as u32;
            node.count = (t.edges.len() - first) as u16;
        }
        t
    }

    /// The children of `node`, `(byte, child)` in byte order.
    #[inline]
    pub(crate) fn children(&self, node: u32) -> &[(u8, u32)] {
        let n = &self.nodes[node as usize];
        &self.edges[n.first as usize..n.first as usize + n.count as usize]
    }

    /// The child of `node` on `byte`.
    #[inline]
    pub(crate) fn child(&self, node: u32, byte: u8) -> Option<u32> {
        self.children(node)
            .iter()
            .find(|c| c.0 == byte)
            .map(|c| c.1)
    }

    /// Bytes the trie holds.
    pub(crate) fn memory(&self) -> usize {
        self.nodes.len() * size_of::<KeyTrieNode>() + self.edges.len() * size_of::<(u8, u32)>()
    }
}

/// An array: `prefix[i]` for the first items, then `items` (or no more items).
#[derive(Debug, Clone)]
pub(crate) struct ArrayNode {
    pub(crate) prefix: Vec<NodeId>,
    pub(crate) items: Option<NodeId>,
    pub(crate) min_items: u32,
    pub(crate) max_items: u32,
    /// How the array is spelled.
    pub(crate) syntax: Syntax,
    /// `contains` with `minContains`/`maxContains` (arrays without a prefix only): `items` is
    /// then the union of the two disjoint item nodes below.
    pub(crate) contains: Option<ContainsNode>,
    /// `uniqueItems` over a finite set of values (arrays without a prefix or `contains`): one
    /// node per value (at most [`MAX_UNIQUE_VALUES`]), `items` being their union. The array
    /// frame keeps the values used so far as bits (in its `matched` count, which `contains`
    /// would use) and starts only the others. Empty otherwise.
    pub(crate) unique: Vec<NodeId>,
    /// `uniqueItems` over strings (arrays without a prefix or `contains`, items not from a
    /// finite set): the items' string lexemes (`items` being their union). The array frame
    /// writes each item itself, keeping the strings written (decoded) so that no item repeats
    /// one and no item begins that could only end as one (see `automaton::fresh`). Empty
    /// otherwise.
    pub(crate) unique_strings: Vec<LexId>,
}

/// Most items a `uniqueItems` array of strings may require (`minItems`): the compiler checks
/// that as many distinct strings exist, and the completer counts the cheapest ones.
pub(crate) const MAX_UNIQUE_STRINGS_REQUIRED: u32 = 64;

/// Most values `uniqueItems` is enforced over (the bits of an array frame's `matched`).
pub(crate) const MAX_UNIQUE_VALUES: usize = 32;

/// The items of an array with `contains`, split in two disjoint nodes, and the bounds on how
/// many items match.
#[derive(Debug, Clone)]
pub(crate) struct ContainsNode {
    /// `items ∧ contains`.
    pub(crate) matched: NodeId,
    /// `items ∧ ¬contains`.
    pub(crate) other: NodeId,
    /// `minContains` (1 by default).
    pub(crate) min: u32,
    /// `maxContains` (`u32::MAX` when unset).
    pub(crate) max: u32,
}

impl ArrayNode {
    /// The node of item `i`, if an `i`-th item may appear.
    #[inline]
    pub(crate) fn item(&self, i: u32) -> Option<NodeId> {
        if i >= self.max_items {
            return None;
        }
        self.prefix.get(i as usize).copied().or(self.items)
    }
}

impl GrammarInner {
    /// Per node: whether it admits at least one finite output, with the special tokens in
    /// `missing` unavailable.
    pub(crate) fn productive(&self, missing: &[u32]) -> Vec<bool> {
        let n = self.nodes.len();
        let mut prod = vec![false; n];
        loop {
            let mut changed = false;
            for id in 0..n {
                if prod[id] {
                    continue;
                }
                let p = match &self.nodes[id] {
                    Node::Lex(l) => !self.lexemes[*l as usize].is_empty(),
                    Node::Never => false,
                    Node::Union(alts) => alts.iter().any(|&a| prod[a as usize]),
                    Node::Object(o) => {
                        o.required
                            .iter()
                            .all(|&k| prod[o.values[k as usize] as usize])
                            && (o.min_props == 0
                                || (o.additional.is_some_and(|(_, v)| prod[v as usize])
                                    && o.extra_kinds.iter().all(|k| prod[k.1 as usize]))
                                || (0..o.keys.len())
                                    .filter(|&k| {
                                        prod[o.values[k] as usize]
                                            && o.alias.get(k).is_none_or(|&a| a as usize >= k)
                                    })
                                    .count()
                                    >= o.min_props as usize)
                    }
                    Node::Array(a) => {
                        (0..a.min_items).all(|i| match a.prefix.get(i as usize) {
                            Some(&p) => prod[p as usize],
                            None => a.items.is_some_and(|it| prod[it as usize]),
                        }) && (a.unique.is_empty()
                            || a.unique.iter().filter(|&&v| prod[v as usize]).count()
                                >= a.min_items as usize)
                            && a.contains.as_ref().is_none_or(|c| {
                                c.min == 0 || (prod[c.matched as usize] && c.min <= a.max_items)
                            })
                    }
                    Node::Seq(e) => e.iter().all(|&x| prod[x as usize]),
                    Node::Repeat { item, min, .. } => *min == 0 || prod[*item as usize],
                    Node::Capture(_, x) => prod[*x as usize],
                    Node::Special(i) => !missing.contains(i),
                };
                if p {
                    prod[id] = true;
                    changed = true;
                }
            }
            if !changed {
                return prod;
            }
        }
    }

    /// With the special tokens in `missing` unavailable: whether any output is possible, and
    /// which functions can still be called.
    pub(crate) fn reach(&self, missing: &[u32]) -> (bool, Vec<u32>) {
        let n = self.nodes.len();
        let prod = self.productive(missing);
        let mut calls = Vec::new();
        let mut seen = vec![false; n];
        let mut todo = vec![self.root];
        while let Some(id) = todo.pop() {
            if seen[id as usize] || !prod[id as usize] {
                continue;
            }
            seen[id as usize] = true;
            match &self.nodes[id as usize] {
                Node::Union(a) => todo.extend(a),
                Node::Seq(e) if e.iter().all(|&x| prod[x as usize]) => todo.extend(e),
                Node::Repeat { item, .. } => todo.push(*item),
                Node::Capture(c, x) => {
                    if let Capture::Call(f) = c {
                        calls.push(*f);
                    }
                    todo.push(*x);
                }
                _ => {}
            }
        }
        calls.sort_unstable();
        calls.dedup();
        (prod[self.root as usize], calls)
    }
}

impl Grammar {
    /// In lenient mode, the keywords that were dropped, each as "keyword at /json/pointer".
    pub fn dropped_keywords(&self) -> &[String] {
        &self.inner.dropped
    }

    /// True when the schema admits no value at all (e.g. `false`).
    pub fn is_empty(&self) -> bool {
        matches!(self.inner.nodes[self.inner.root as usize], Node::Never)
    }

    /// Approximate heap bytes held by the compiled grammar.
    pub fn memory_bytes(&self) -> usize {
        self.inner.lexemes.iter().map(|d| d.memory()).sum::<usize>()
            + self.inner.nodes.len() * std::mem::size_of::<Node>()
    }
}

#[cfg(test)]
mod tests {
    use super::KeyTrie;

    /// Walks `trie` along `bytes` from the root.
    fn walk(trie: &KeyTrie, bytes: &[u8]) -> Option<u32> {
        bytes.iter().try_fold(0, |n, &b| trie.child(n, b))
    }

    #[test]
    fn key_tries_hold_exactly_their_keys_with_the_ranges_below_each_prefix() {
        let sets: [&[&str]; 5] = [
            &[],
            &[""],
            &["a", "ab", "abc", "b"],
            &[
                "\"city\":",
                "\"count\":",
                "\"country\":",
                "\"unit\":",
                "city=",
            ],
            &["", "x", "xy", "xz", "y"],
        ];
        for set in sets {
            let keys: Vec<Vec<u8>> = set.iter().map(|k| k.as_bytes().to_vec()).collect();
            let trie = KeyTrie::new(&keys);
            for (i, k) in keys.iter().enumerate() {
                let n = walk(&trie, k).expect("every key is in the trie");
                assert_eq!(trie.nodes[n as usize].key, Some(i as u32), "{set:?}");
            }
            // Every node: its depth, the keys below it, no key where none ends.
            for (n, node) in trie.nodes.iter().enumerate() {
                let below: Vec<usize> = (0..keys.len())
                    .filter(|&i| {
                        let k = &keys[i][..keys[i].len().min(node.depth as usize)];
                        walk(&trie, k) == Some(n as u32)
                    })
                    .collect();
                let range: Vec<usize> = (node.lo as usize..node.hi as usize).collect();
                assert_eq!(below, range, "{set:?} node {n}");
                let ending = keys.iter().position(|k| walk(&trie, k) == Some(n as u32));
                assert_eq!(node.key, ending.map(|i| i as u32), "{set:?} node {n}");
                let bytes: Vec<u8> = trie.children(n as u32).iter().map(|c| c.0).collect();
                assert!(
                    bytes.windows(2).all(|w| w[0] < w[1]),
                    "children in byte order"
                );
            }
            assert_eq!(walk(&trie, b"nope"), None);
            let prefixes: usize = {
                let mut all: Vec<&[u8]> = keys
                    .iter()
                    .flat_map(|k| (0..=k.len()).map(move |l| &k[..l]))
                    .collect();
                all.sort();
                all.dedup();
                all.len().max(1)
            };
            assert_eq!(trie.nodes.len(), prefixes, "one node per distinct prefix");
        }
    }
}
