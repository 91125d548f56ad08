//! The compiled grammar: what a JSON Schema becomes, shared across threads and sequences.
//!
//! A grammar is a graph of [`Node`]s (objects, arrays, unions) whose leaves are lexemes, each a
//! trimmed byte [`Dfa`]. Recursion (`$ref` cycles) is a cycle in the graph; the matcher's stack
//! unrolls it at run time. Compile with [`Grammar::from_json_schema`].

use crate::automaton::dfa::Dfa;
use crate::automaton::{ByteMatcher, Rejection};
use std::sync::Arc;

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
    /// Most whitespace bytes allowed in one gap between JSON tokens.
    pub(crate) max_whitespace: u16,
    /// Most nested objects and arrays.
    pub(crate) max_depth: u32,
    /// What lenient mode dropped, as "keyword at /pointer".
    pub(crate) dropped: Vec<String>,
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
}

/// An object: listed properties in any order, each at most once, required ones present.
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
    /// Key ids that may not appear (their value admits nothing), treated as already seen.
    pub(crate) unavailable: Vec<u32>,
    /// Lexeme for any other key (excluding listed ones) and its value node, when allowed.
    pub(crate) additional: Option<(LexId, NodeId)>,
}

/// A trie over an object's encoded keys; node 0 is the root.
#[derive(Debug, Clone, Default)]
pub(crate) struct KeyTrie {
    pub(crate) nodes: Vec<KeyTrieNode>,
}

/// One trie node: keys in `lo..hi` share this prefix; `key` is set where a key ends.
#[derive(Debug, Clone, Default)]
pub(crate) struct KeyTrieNode {
    pub(crate) children: Vec<(u8, u32)>,
    pub(crate) lo: u32,
    pub(crate) hi: u32,
    pub(crate) key: Option<u32>,
}

impl KeyTrie {
    /// Builds the trie of sorted keys.
    pub(crate) fn new(keys: &[Vec<u8>]) -> KeyTrie {
        let mut t = KeyTrie {
            nodes: vec![KeyTrieNode {
                lo: 0,
                hi: keys.len() as u32,
                ..Default::default()
            }],
        };
        for (i, k) in keys.iter().enumerate() {
            let mut n = 0usize;
            for &b in k {
                let next = match t.nodes[n].children.iter().find(|c| c.0 == b) {
                    Some(&(_, c)) => c as usize,
                    None => {
                        t.nodes.push(KeyTrieNode {
                            lo: i as u32,
                            hi: i as u32,
                            ..Default::default()
                        });
                        let c = t.nodes.len() - 1;
                        t.nodes[n].children.push((b, c as u32));
                        c
                    }
                };
                n = next;
                t.nodes[n].hi = i as u32 + 1;
            }
            t.nodes[n].key = Some(i as u32);
        }
        t
    }

    /// The child of `node` on `byte`.
    #[inline]
    pub(crate) fn child(&self, node: u32, byte: u8) -> Option<u32> {
        self.nodes[node as usize]
            .children
            .iter()
            .find(|c| c.0 == byte)
            .map(|c| c.1)
    }
}

/// An array: `prefix[i]` for the first items, then `items` (or no more items).
#[derive(Debug, Clone)]
pub(crate) struct ArrayNode {
    pub(crate) prefix: Vec<NodeId>,
    pub(crate) items: Option<NodeId>,
    pub(crate) min_items: u32,
    pub(crate) max_items: u32,
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

impl Grammar {
    /// Compiles a JSON Schema (draft 2020-12 or draft 7) for one JSON value.
    pub fn from_json_schema(
        schema: &serde_json::Value,
        options: &crate::CompileOptions,
    ) -> crate::Result<Grammar> {
        crate::schema::compile(schema, options)
    }

    /// Compiles a JSON Schema given as JSON text.
    pub fn from_json_schema_str(
        schema: &str,
        options: &crate::CompileOptions,
    ) -> crate::Result<Grammar> {
        let v: serde_json::Value = serde_json::from_str(schema)?;
        Self::from_json_schema(&v, options)
    }

    /// In lenient mode, the keywords that were dropped, each as "keyword at /json/pointer".
    pub fn dropped_keywords(&self) -> &[String] {
        &self.inner.dropped
    }

    /// True when the schema admits no value at all (e.g. `false`).
    pub fn is_empty(&self) -> bool {
        matches!(self.inner.nodes[self.inner.root as usize], Node::Never)
    }

    /// Checks a complete output byte by byte; on rejection, says at which byte offset and why.
    pub fn check_bytes(&self, text: &[u8]) -> Result<(), Rejection> {
        let mut m = ByteMatcher::new(self);
        for (i, &b) in text.iter().enumerate() {
            if !m.push_byte(b) {
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

    /// Approximate heap bytes held by the compiled grammar.
    pub fn memory_bytes(&self) -> usize {
        self.inner.lexemes.iter().map(|d| d.memory()).sum::<usize>()
            + self.inner.nodes.len() * std::mem::size_of::<Node>()
    }
}
