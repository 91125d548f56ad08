//! What a fuzz run reached: grammar states, functions, enum values and optional properties.
//!
//! Grammar states are the positions the byte-level automaton can be in, counted per reachable
//! grammar node: each byte state of each lexeme automaton (strings, numbers, literals, free
//! text), each key of each object, empty / one / several items of each array, each element of
//! each sequence, one or several repetitions, each capture. The schema-side counts come from the
//! original schemas: every `enum`/`const` value and every optional property, reached when a
//! valid output holds it.

use super::check::Checked;
use crate::automaton::{advance, Frame, ObjPhase, Stack};
use crate::grammar::{GrammarInner, Node};
use crate::{Grammar, Tools};
use serde_json::Value;
use std::collections::HashSet;

/// One grammar state, as recorded.
type StateKey = (u8, u32, u32);

/// Counts of one kind: reached out of all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Count {
    /// Reached at least once.
    pub reached: usize,
    /// All there are.
    pub total: usize,
}

impl Count {
    /// `reached / total` in percent (100 when there is nothing to reach).
    pub fn percent(&self) -> f64 {
        if self.total == 0 {
            100.0
        } else {
            100.0 * self.reached as f64 / self.total as f64
        }
    }
}

impl std::fmt::Display for Count {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}/{} ({:.1}%)",
            self.reached,
            self.total,
            self.percent()
        )
    }
}

/// The coverage of a run so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CoverageReport {
    /// Grammar states (see the module documentation).
    pub grammar_states: Count,
    /// Functions called at least once (zero total for a schema grammar).
    pub functions: Count,
    /// `enum` and `const` values written at least once.
    pub enum_values: Count,
    /// Optional properties written at least once.
    pub optional_properties: Count,
}

/// A place in the original schemas that an output may reach.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Site {
    /// Value `value` (canonical JSON) of the enum at `path` of function `f`.
    Enum {
        f: usize,
        path: String,
        value: String,
    },
    /// Optional property `key` of the object schema at `path` of function `f`.
    Optional { f: usize, path: String, key: String },
}

/// The grammar states one output went through (see [`Coverage::observe`]).
#[derive(Debug, Clone, Default)]
pub struct Observation(HashSet<StateKey>);

/// Accumulates coverage over a run.
#[derive(Debug)]
pub struct Coverage {
    /// Every grammar state there is.
    all_states: HashSet<StateKey>,
    states: HashSet<StateKey>,
    /// The schemas by function (one, index 0, for a schema grammar).
    schemas: Vec<Value>,
    all_sites: HashSet<Site>,
    sites: HashSet<Site>,
    functions: usize,
    called: HashSet<usize>,
}

impl Coverage {
    /// Coverage of `grammar`, compiled from `schema`.
    pub fn for_schema(grammar: &Grammar, schema: &Value) -> Coverage {
        Coverage::new(grammar, vec![schema.clone()], 0)
    }

    /// Coverage of a dialect `grammar` over `tools`.
    pub fn for_tools(grammar: &Grammar, tools: &Tools) -> Coverage {
        let schemas = tools
            .as_slice()
            .iter()
            .map(|t| t.parameters.clone().unwrap_or(Value::Null))
            .collect();
        Coverage::new(grammar, schemas, tools.len())
    }

    /// Coverage of a structural-tag `grammar` whose calls are `calls` (see
    /// [`crate::StructuralTag::calls`]).
    pub fn for_calls(grammar: &Grammar, calls: &[(String, Value)]) -> Coverage {
        let schemas = calls.iter().map(|(_, s)| s.clone()).collect();
        Coverage::new(grammar, schemas, calls.len())
    }

    fn new(grammar: &Grammar, schemas: Vec<Value>, functions: usize) -> Coverage {
        let mut all_sites = HashSet::new();
        for (f, s) in schemas.iter().enumerate() {
            let mut refs = HashSet::new();
            collect_sites(f, s, s, String::new(), &mut refs, &mut all_sites, 0);
        }
        Coverage {
            all_states: grammar_states(&grammar.inner),
            states: HashSet::new(),
            schemas,
            all_sites,
            sites: HashSet::new(),
            functions,
            called: HashSet::new(),
        }
    }

    /// The grammar states `text` goes through (found by replaying its bytes); independent of
    /// the run, so it can be computed in parallel.
    pub fn observe(grammar: &Grammar, text: &[u8]) -> Observation {
        Observation(observe(&grammar.inner, text))
    }

    /// Records one output: the states it went through and, when it is valid, what it holds.
    pub fn record(&mut self, observed: Observation, checked: Option<&Checked>) {
        self.states.extend(
            observed
                .0
                .into_iter()
                .filter(|k| self.all_states.contains(k)),
        );
        let mut hit = HashSet::new();
        match checked {
            Some(Checked::Value(v)) => {
                if let Some(s) = self.schemas.first() {
                    visit(0, s, s, String::new(), v, &mut hit, 0);
                }
            }
            Some(Checked::Calls(calls)) => {
                for (f, args) in calls {
                    self.called.insert(*f);
                    if let Some(s) = self.schemas.get(*f) {
                        visit(*f, s, s, String::new(), args, &mut hit, 0);
                    }
                }
            }
            None => {}
        }
        self.sites
            .extend(hit.into_iter().filter(|s| self.all_sites.contains(s)));
    }

    /// The counts so far.
    pub fn report(&self) -> CoverageReport {
        let count =
            |pred: fn(&Site) -> bool, set: &HashSet<Site>| set.iter().filter(|s| pred(s)).count();
        let is_enum = |s: &Site| matches!(s, Site::Enum { .. });
        let is_opt = |s: &Site| matches!(s, Site::Optional { .. });
        CoverageReport {
            grammar_states: Count {
                reached: self.states.len(),
                total: self.all_states.len(),
            },
            functions: Count {
                reached: self.called.len(),
                total: self.functions,
            },
            enum_values: Count {
                reached: count(is_enum, &self.sites),
                total: count(is_enum, &self.all_sites),
            },
            optional_properties: Count {
                reached: count(is_opt, &self.sites),
                total: count(is_opt, &self.all_sites),
            },
        }
    }

    /// The enum values and optional properties never reached, described (at most `limit`).
    pub fn missed(&self, limit: usize) -> Vec<String> {
        let mut out: Vec<String> = self
            .all_sites
            .difference(&self.sites)
            .map(|s| match s {
                Site::Enum { f, path, value } => {
                    format!("{} enum value {value} at {path:?}", self.fname(*f))
                }
                Site::Optional { f, path, key } => {
                    format!("{} optional property {key:?} at {path:?}", self.fname(*f))
                }
            })
            .collect();
        out.sort();
        out.truncate(limit);
        out
    }

    fn fname(&self, f: usize) -> String {
        if self.functions == 0 {
            "schema:".to_owned()
        } else {
            format!("function #{f}:")
        }
    }
}

/// The key of a frame's state, if it is one that coverage counts.
fn state_key(frame: &Frame, g: &GrammarInner) -> Option<StateKey> {
    Some(match frame {
        Frame::Lex { lex, state } => (0, *lex, *state),
        Frame::Obj { node, phase, .. } => match phase {
            ObjPhase::AfterKey(k) | ObjPhase::AfterColon(k) => (1, *node, *k),
            _ => return None,
        },
        Frame::Arr { node, count, .. } => {
            let max = match &g.nodes[*node as usize] {
                Node::Array(a) => a.max_items,
                _ => return None,
            };
            (2, *node, (*count).min(2).min(max))
        }
        Frame::Seq { node, idx } => (3, *node, *idx),
        Frame::Rep { node, count } => (4, *node, (*count).min(2)),
        Frame::Cap { node, .. } => (5, *node, 0),
        Frame::Root { .. } | Frame::Done => return None,
    })
}

/// Every state of every node reachable from the root.
fn grammar_states(g: &GrammarInner) -> HashSet<StateKey> {
    let mut out = HashSet::new();
    let mut seen = vec![false; g.nodes.len()];
    let mut lexes = HashSet::new();
    let mut stack = vec![g.root];
    while let Some(n) = stack.pop() {
        if std::mem::replace(&mut seen[n as usize], true) {
            continue;
        }
        match &g.nodes[n as usize] {
            Node::Lex(l) => {
                if lexes.insert(*l) {
                    for s in g.lexemes[*l as usize].states_after_a_byte() {
                        out.insert((0, *l, s));
                    }
                }
            }
            Node::Object(o) => {
                for (k, &v) in o.values.iter().enumerate() {
                    if !o.unavailable.contains(&(k as u32)) {
                        out.insert((1, n, k as u32));
                    }
                    stack.push(v);
                }
                if let Some((_, v)) = o.additional {
                    out.insert((1, n, crate::automaton::ADDITIONAL));
                    stack.push(v);
                    stack.extend(o.extra_kinds.iter().map(|k| k.1));
                }
            }
            Node::Array(a) => {
                for c in 0..=a.max_items.min(2) {
                    if c >= a.min_items.min(2) {
                        out.insert((2, n, c));
                    }
                }
                stack.extend(a.prefix.iter().copied());
                stack.extend(a.items);
            }
            Node::Union(alts) => stack.extend(alts.iter().copied()),
            Node::Never | Node::Special(_) => {}
            Node::Seq(elems) => {
                for i in 1..=elems.len() {
                    out.insert((3, n, i as u32));
                }
                stack.extend(elems.iter().copied());
            }
            Node::Repeat { item, max, .. } => {
                for c in 1..=(*max).min(2) {
                    out.insert((4, n, c));
                }
                stack.push(*item);
            }
            Node::Capture(_, inner) => {
                out.insert((5, n, 0));
                stack.push(*inner);
            }
        }
    }
    out
}

/// The states `text` goes through, byte by byte.
fn observe(g: &GrammarInner, text: &[u8]) -> HashSet<StateKey> {
    let mut out = HashSet::new();
    let mut cur: Vec<Stack> = vec![g.start_stack()];
    let mut next = Vec::new();
    for &b in text {
        advance(g, &cur, b as u16, &mut next);
        if next.is_empty() {
            // Special tokens are not bytes: the replay stops at the first one it cannot take.
            break;
        }
        std::mem::swap(&mut cur, &mut next);
        for s in &cur {
            for f in s {
                // A merged union's frame is each of its alternatives' (the stacks it stands for).
                match f {
                    Frame::Obj { node, .. } if g.merged_alts(*node).is_some() => {
                        for &alt in g.merged_alts(*node).unwrap_or_default() {
                            let mut f = f.clone();
                            if let Frame::Obj { node, .. } = &mut f {
                                *node = alt;
                            }
                            out.extend(state_key(&f, g));
                        }
                    }
                    _ => out.extend(state_key(f, g)),
                }
            }
        }
    }
    out
}

/// Deepest schema nesting followed.
const MAX_DEPTH: usize = 64;

/// The local `$ref` target of `schema`, with its path.
fn follow_ref<'a>(root: &'a Value, schema: &'a Value) -> Option<(&'a Value, String)> {
    let r = schema.get("$ref")?.as_str()?;
    let pointer = r.strip_prefix('#')?;
    Some((root.pointer(pointer)?, format!("ref:{pointer}")))
}

/// Every enum value and optional property of `schema`.
fn collect_sites(
    f: usize,
    root: &Value,
    schema: &Value,
    path: String,
    refs: &mut HashSet<String>,
    out: &mut HashSet<Site>,
    depth: usize,
) {
    if depth > MAX_DEPTH {
        return;
    }
    let Some(obj) = schema.as_object() else {
        return;
    };
    if let Some((target, p)) = follow_ref(root, schema) {
        if refs.insert(p.clone()) {
            collect_sites(f, root, target, p, refs, out, depth + 1);
        }
    }
    if let Some(values) = obj.get("enum").and_then(Value::as_array) {
        for v in values {
            out.insert(Site::Enum {
                f,
                path: path.clone(),
                value: v.to_string(),
            });
        }
    }
    if let Some(v) = obj.get("const") {
        out.insert(Site::Enum {
            f,
            path: path.clone(),
            value: v.to_string(),
        });
    }
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        let required: HashSet<&str> = obj
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        for (k, sub) in props {
            if !required.contains(k.as_str()) {
                out.insert(Site::Optional {
                    f,
                    path: path.clone(),
                    key: k.clone(),
                });
            }
            collect_sites(
                f,
                root,
                sub,
                format!("{path}/properties/{k}"),
                refs,
                out,
                depth + 1,
            );
        }
    }
    for (kw, sub) in obj {
        match (kw.as_str(), sub) {
            ("items" | "additionalProperties" | "additionalItems", Value::Object(_)) => {
                collect_sites(f, root, sub, format!("{path}/{kw}"), refs, out, depth + 1)
            }
            ("items" | "prefixItems" | "anyOf" | "oneOf" | "allOf", Value::Array(list)) => {
                for (i, s) in list.iter().enumerate() {
                    collect_sites(f, root, s, format!("{path}/{kw}/{i}"), refs, out, depth + 1);
                }
            }
            _ => {}
        }
    }
}

/// Records the sites that `instance` reaches in `schema`.
fn visit(
    f: usize,
    root: &Value,
    schema: &Value,
    path: String,
    instance: &Value,
    out: &mut HashSet<Site>,
    depth: usize,
) {
    if depth > MAX_DEPTH {
        return;
    }
    let Some(obj) = schema.as_object() else {
        return;
    };
    if let Some((target, p)) = follow_ref(root, schema) {
        visit(f, root, target, p, instance, out, depth + 1);
    }
    let in_enum = obj
        .get("enum")
        .and_then(Value::as_array)
        .is_some_and(|vs| vs.contains(instance));
    if in_enum || obj.get("const") == Some(instance) {
        out.insert(Site::Enum {
            f,
            path: path.clone(),
            value: instance.to_string(),
        });
    }
    if let Value::Object(fields) = instance {
        let props = obj.get("properties").and_then(Value::as_object);
        for (k, v) in fields {
            match props.and_then(|p| p.get(k)) {
                Some(sub) => {
                    out.insert(Site::Optional {
                        f,
                        path: path.clone(),
                        key: k.clone(),
                    });
                    visit(
                        f,
                        root,
                        sub,
                        format!("{path}/properties/{k}"),
                        v,
                        out,
                        depth + 1,
                    );
                }
                None => {
                    if let Some(sub @ Value::Object(_)) = obj.get("additionalProperties") {
                        let p = format!("{path}/additionalProperties");
                        visit(f, root, sub, p, v, out, depth + 1);
                    }
                }
            }
        }
    }
    if let Value::Array(items) = instance {
        let prefix = match obj.get("prefixItems").or(obj.get("items")) {
            Some(Value::Array(p)) => Some((
                p,
                if obj.contains_key("prefixItems") {
                    "prefixItems"
                } else {
                    "items"
                },
            )),
            _ => None,
        };
        for (i, v) in items.iter().enumerate() {
            match prefix.and_then(|(p, kw)| Some((p.get(i)?, kw))) {
                Some((sub, kw)) => {
                    visit(f, root, sub, format!("{path}/{kw}/{i}"), v, out, depth + 1)
                }
                None => {
                    let rest = if prefix.is_some() {
                        if obj.contains_key("prefixItems") {
                            "items"
                        } else {
                            "additionalItems"
                        }
                    } else {
                        "items"
                    };
                    if let Some(sub @ Value::Object(_)) = obj.get(rest) {
                        visit(f, root, sub, format!("{path}/{rest}"), v, out, depth + 1);
                    }
                }
            }
        }
    }
    for kw in ["anyOf", "oneOf", "allOf"] {
        if let Some(list) = obj.get(kw).and_then(Value::as_array) {
            for (i, s) in list.iter().enumerate() {
                visit(
                    f,
                    root,
                    s,
                    format!("{path}/{kw}/{i}"),
                    instance,
                    out,
                    depth + 1,
                );
            }
        }
    }
}
