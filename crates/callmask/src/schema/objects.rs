//! Objects (JSON, JSON inside a string, Python keyword arguments) and arrays: properties in any
//! order, each at most once, required ones enforced; `additionalProperties` (and
//! `patternProperties`, see `pattern_properties.rs`); `items`,
//! `prefixItems`, `minItems`/`maxItems`.

use super::pattern_properties::PatternKeys;
use super::*;
use crate::grammar::MAX_UNIQUE_STRINGS_REQUIRED;

impl Compiler<'_> {
    /// Builds an object node from `(key, value)` entries (keys unencoded) in the current encoding.
    pub(crate) fn object_node(
        &mut self,
        entries: Vec<(String, NodeId)>,
        required: &[String],
        additional: Option<(LexId, NodeId)>,
        syntax: Syntax,
        kwargs: bool,
        dependencies: &[(String, Vec<String>)],
    ) -> Result<ObjectNode> {
        let mut spelled: Vec<(Vec<u8>, usize)> = Vec::new();
        for (i, (k, _)) in entries.iter().enumerate() {
            let sp = if kwargs {
                vec![format!("{k}=").into_bytes()]
            } else {
                self.key_spellings(k)?
            };
            spelled.extend(sp.into_iter().map(|s| (s, i)));
        }
        spelled.sort();
        spelled.dedup_by(|a, b| a.0 == b.0);
        let keys: Vec<Vec<u8>> = spelled.iter().map(|e| e.0.clone()).collect();
        let values = spelled.iter().map(|e| entries[e.1].1).collect();
        let req = spelled
            .iter()
            .enumerate()
            .filter(|(_, e)| required.contains(&entries[e.1].0))
            .map(|(i, _)| i as u32)
            .collect();
        let alias = if spelled.len() > entries.len() {
            (0..spelled.len())
                .map(|i| {
                    (0..spelled.len())
                        .find(|&j| spelled[j].1 == spelled[i].1)
                        .unwrap_or(i) as u32
                })
                .collect()
        } else {
            Vec::new()
        };
        let id_of = |name: &str| spelled.iter().position(|e| entries[e.1].0 == name);
        let mut deps = Vec::new();
        for (trigger, needs) in dependencies {
            let needs: Vec<u32> = needs
                .iter()
                .filter(|n| *n != trigger)
                .filter_map(|n| id_of(n).map(|i| i as u32))
                .collect();
            if needs.is_empty() {
                continue;
            }
            for (i, e) in spelled.iter().enumerate() {
                if entries[e.1].0 == *trigger {
                    deps.push((i as u32, needs.clone()));
                }
            }
        }
        deps.sort();
        Ok(ObjectNode {
            trie: KeyTrie::new(&keys),
            keys,
            values,
            required: req,
            unavailable: vec![],
            dependencies: deps,
            min_props: 0,
            max_props: u32::MAX,
            additional,
            extra_kinds: Vec::new(),
            syntax,
            alias,
            first: Vec::new(),
        })
    }

    /// The node of the values matching every schema of `parts`: any value for none, the part
    /// itself for one (so that a `$ref` keeps its identity and recursion through it ends), an
    /// `allOf` otherwise.
    fn compile_all(&mut self, mut parts: Vec<Value>, path: &str) -> Result<NodeId> {
        match parts.len() {
            0 => self.any(),
            1 => {
                let only = parts.pop().expect("one part");
                self.compile(&only, path)
            }
            _ => self.compile(&serde_json::json!({ "allOf": parts }), path),
        }
    }

    /// Registers a lexeme built outside `lexeme()` (object keys): escaped inside JSON strings.
    pub(super) fn key_lexeme(&mut self, dfa: Arc<Dfa>, path: &str) -> Result<LexId> {
        let dfa = self.encoded(dfa, path)?;
        self.b.lexeme_id(dfa)
    }

    pub(super) fn compile_object(
        &mut self,
        obj: &Map<String, Value>,
        path: &str,
    ) -> Result<NodeId> {
        self.compile_object_as(obj, path, false)
    }

    /// A function's parameters as Python keyword arguments `(k=v, ...)`: the schema (after its
    /// top-level `$ref`s and `allOf`s are resolved) must be one object schema.
    pub(crate) fn compile_kwargs(&mut self, schema: &Value, path: &str) -> Result<NodeId> {
        let mut s = match schema.as_object() {
            Some(o) => match self.rewrite_unevaluated(o, path)? {
                Some(o) => Value::Object(o),
                None => schema.clone(),
            },
            None => schema.clone(),
        };
        for _ in 0..32 {
            let Some(o) = s.as_object() else { break };
            if let Some(r) = o.get("$ref") {
                let r = r
                    .as_str()
                    .ok_or_else(|| invalid(path, "$ref must be a string"))?;
                let target = self.ref_target_of(r, path)?.1.clone();
                let mut rest = o.clone();
                rest.remove("$ref");
                s = self.merge_all(&[target, Value::Object(rest)], path)?;
                continue;
            }
            if let Some(all) = o.get("allOf") {
                let mut parts = all
                    .as_array()
                    .ok_or_else(|| invalid(path, "allOf must be an array"))?
                    .clone();
                let mut rest = o.clone();
                rest.remove("allOf");
                parts.push(Value::Object(rest));
                s = self.merge_all(&parts, path)?;
                continue;
            }
            break;
        }
        let o = match &s {
            Value::Object(o) => o.clone(),
            Value::Bool(true) => Map::new(),
            _ => return Err(invalid(path, "parameters must be an object schema")),
        };
        for k in ["anyOf", "oneOf", "enum", "const", "not", "if"] {
            if o.contains_key(k) {
                return Err(Error::Unrepresentable {
                    what: "parameters schema",
                    name: path.trim_start_matches('/').into(),
                    dialect: "Python keyword-argument".into(),
                    reason: format!(
                        "`{k}` at the top of the parameters cannot be keyword arguments"
                    ),
                });
            }
        }
        if let Some(t) = o.get("type") {
            if type_set(t, path)? & T_OBJ == 0 {
                return Err(invalid(path, "parameters must be an object schema"));
            }
        }
        self.refuse_unsupported(&o, path)?;
        self.compile_object_as(&o, path, true)
    }

    /// An object; with `kwargs`, spelled as Python keyword arguments `(k=v, ...)`.
    pub(crate) fn compile_object_as(
        &mut self,
        obj: &Map<String, Value>,
        path: &str,
        kwargs: bool,
    ) -> Result<NodeId> {
        let empty = Map::new();
        let props = match obj.get("properties") {
            None => &empty,
            Some(Value::Object(p)) => p,
            Some(_) => return Err(invalid(path, "properties must be an object")),
        };
        let dependencies = dependencies::dependent_required(obj, path)?;
        let required = required_names(obj, &dependencies, path)?;
        if kwargs {
            check_kwarg_names(props, &required, &dependencies)?;
        }
        let id = self.b.push(Node::Never)?;
        let additional_node = self.additional_node(obj, path)?;
        let never = self.b.push(Node::Never)?;
        let names = self.property_names_dfa(obj, path)?;
        let listed = listed_names(props, &required, &dependencies);
        let patterns = if kwargs && obj.contains_key("patternProperties") {
            self.b
                .unsupported("patternProperties", path, "on Python keyword arguments")?;
            None
        } else {
            self.pattern_keys(obj, &listed, names.as_ref(), path)?
        };
        let mut entries = self.property_entries(
            listed,
            props,
            patterns.as_ref(),
            additional_node,
            never,
            path,
        )?;
        // propertyNames: listed keys it refuses cannot appear; extra keys are limited to it.
        if let Some(nd) = &names {
            for e in entries.iter_mut() {
                if !nd.matches(e.0.as_bytes()) {
                    e.1 = never;
                }
            }
            if kwargs && additional_node.is_some() {
                return self
                    .b
                    .unsupported("propertyNames", path, "on extra Python keyword arguments")
                    .and_then(|()| {
                        self.compile_object_as(&without(obj, "propertyNames"), path, kwargs)
                    });
            }
        }
        let (additional, extra_kinds) = self.extra_keys(
            additional_node,
            patterns.as_ref(),
            &entries,
            names.as_ref(),
            kwargs,
            path,
        )?;
        let syntax = if kwargs {
            Syntax {
                open: b'(',
                close: b')',
                colon: None,
                space_only: false,
            }
        } else {
            self.obj_syntax()
        };
        let mut o = self.object_node(
            entries,
            &required,
            additional,
            syntax,
            kwargs,
            &dependencies,
        )?;
        o.extra_kinds = extra_kinds;
        if !self.property_counts(obj, &mut o, required.len(), &dependencies, path)? {
            return Ok(id); // still Node::Never
        }
        self.b.nodes[id as usize] = Node::Object(Box::new(o));
        Ok(id)
    }

    /// The node of the values of the properties `additionalProperties` governs; `None` where
    /// it allows none.
    fn additional_node(&mut self, obj: &Map<String, Value>, path: &str) -> Result<Option<NodeId>> {
        Ok(match obj.get("additionalProperties") {
            None | Some(Value::Bool(true)) => Some(self.any()?),
            Some(Value::Bool(false)) => None,
            Some(s @ Value::Object(_)) => {
                Some(self.compile(s, &format!("{path}/additionalProperties"))?)
            }
            Some(_) => return Err(invalid(path, "additionalProperties must be a schema")),
        })
    }

    /// The entries of the listed names: each name's value node, from its property schema and
    /// the `patternProperties` schemas its name matches (`additional` for a name with
    /// neither; `never` where none is allowed).
    fn property_entries(
        &mut self,
        listed: Vec<&str>,
        props: &Map<String, Value>,
        patterns: Option<&PatternKeys>,
        additional: Option<NodeId>,
        never: NodeId,
        path: &str,
    ) -> Result<Vec<(String, NodeId)>> {
        let mut entries: Vec<(String, NodeId)> = Vec::new();
        for k in listed {
            let by_pattern = patterns.map(|p| p.schemas_for(k)).unwrap_or_default();
            let own = props.get(k);
            let p = format!("{path}/properties/{}", escape_ptr(k));
            let v = match (own, by_pattern.is_empty()) {
                (Some(s), true) => self.compile(s, &p)?,
                // A required (or dependency) key that only additionalProperties can match.
                (None, true) => additional.unwrap_or(never),
                (own, false) => {
                    let parts: Vec<Value> = own.into_iter().cloned().chain(by_pattern).collect();
                    self.compile_all(parts, &p)?
                }
            };
            entries.push((k.to_string(), v));
        }
        Ok(entries)
    }

    /// How keys other than the listed ones may appear: the key lexeme and value node of the
    /// extra keys (from `patternProperties` or `additionalProperties`, limited to
    /// `propertyNames`), and, when `patternProperties` gives them different schemas, each kind
    /// of extra key with its value node.
    #[allow(clippy::type_complexity)]
    fn extra_keys(
        &mut self,
        additional_node: Option<NodeId>,
        patterns: Option<&PatternKeys>,
        entries: &[(String, NodeId)],
        names: Option<&Dfa>,
        kwargs: bool,
        path: &str,
    ) -> Result<(Option<(LexId, NodeId)>, Vec<(Arc<Dfa>, NodeId)>)> {
        let mut extra_kinds: Vec<(Arc<Dfa>, NodeId)> = Vec::new();
        let additional = match (additional_node, patterns) {
            (_, Some(pk)) if pk.extra.is_empty() => None,
            (_, Some(pk)) => {
                let mut names: Option<Dfa> = None;
                for (d, parts) in &pk.extra {
                    let v =
                        self.compile_all(parts.clone(), &format!("{path}/patternProperties"))?;
                    if matches!(self.b.nodes[v as usize], Node::Never) {
                        // No value fits this kind (patterns whose schemas contradict): its
                        // keys cannot appear.
                        continue;
                    }
                    extra_kinds.push((Arc::new(d.clone()), v));
                    names = Some(match names {
                        None => d.clone(),
                        Some(n) => n
                            .product(d, Op::Or, self.opts.max_lexeme_states)
                            .map_err(|e| self.b.dfa_err(e, path, ""))?,
                    });
                }
                match names {
                    None => None,
                    Some(names) => {
                        let first = extra_kinds[0].1;
                        if extra_kinds.len() == 1 {
                            extra_kinds.clear();
                        }
                        let d = self.key_quote(&names, path)?;
                        Some((self.key_lexeme(Arc::new(d), path)?, first))
                    }
                }
            }
            (None, None) => None,
            (Some(v), None) => {
                let listed: Vec<&str> = entries.iter().map(|e| e.0.as_str()).collect();
                let d = match names {
                    // Any key but the listed ones, by the listed names alone: kept in the caches.
                    None => {
                        let key = Lexeme::ExtraKeys {
                            kwargs,
                            listed: listed.iter().map(|k| k.to_string()).collect(),
                        };
                        self.cached(key, |this| this.other_keys(&listed, None, kwargs, path))?
                    }
                    Some(nd) => Arc::new(self.other_keys(&listed, Some(nd), kwargs, path)?),
                };
                Some((self.key_lexeme(d, path)?, v))
            }
        };
        Ok((additional, extra_kinds))
    }

    /// The keys other than `listed` as the encoding writes them, within `names` (a
    /// `propertyNames` automaton) where given: an identifier and `=` (`kwargs`), or a quoted
    /// string.
    fn other_keys(
        &mut self,
        listed: &[&str],
        names: Option<&Dfa>,
        kwargs: bool,
        path: &str,
    ) -> Result<Dfa> {
        let max = self.opts.max_lexeme_states;
        if kwargs {
            let names: Vec<String> = listed.iter().map(|n| format!("{n}=")).collect();
            let listed = Dfa::literals(names.iter().map(|n| n.as_bytes()), max)
                .map_err(|e| self.b.dfa_err(e, path, ""))?;
            return self
                .b
                .regex("[A-Za-z_][A-Za-z0-9_]*=", path)?
                .product(&listed, Op::AndNot, max)
                .map_err(|e| self.b.dfa_err(e, path, ""));
        }
        let lit = Dfa::literals(listed.iter().map(|n| n.as_bytes()), max)
            .map_err(|e| self.b.dfa_err(e, path, ""))?;
        let mut d = self
            .b
            .regex("(?s:.)*", path)?
            .product(&lit, Op::AndNot, max)
            .map_err(|e| self.b.dfa_err(e, path, ""))?;
        if let Some(nd) = names {
            d = self.b.and(&d, nd, path)?;
        }
        self.key_quote(&d, path)
    }

    pub(super) fn compile_array(&mut self, obj: &Map<String, Value>, path: &str) -> Result<NodeId> {
        let id = self.b.push(Node::Never)?;
        let mut prefix = Vec::new();
        let mut items = None;
        let mut items_set = false;
        if let Some(Value::Array(p)) = obj.get("prefixItems") {
            for (i, s) in p.iter().enumerate() {
                prefix.push(self.compile(s, &format!("{path}/prefixItems/{i}"))?);
            }
        }
        match obj.get("items") {
            Some(Value::Array(p)) => {
                // draft-07 tuple form
                for (i, s) in p.iter().enumerate() {
                    prefix.push(self.compile(s, &format!("{path}/items/{i}"))?);
                }
                match obj.get("additionalItems") {
                    None => {}
                    Some(s) => {
                        items = Some(self.compile(s, &format!("{path}/additionalItems"))?);
                        items_set = true;
                    }
                }
            }
            Some(s) => {
                items = Some(self.compile(s, &format!("{path}/items"))?);
                items_set = true;
            }
            None => {}
        }
        if !items_set {
            items = Some(self.any()?);
        }
        let min_items = get_count(obj, "minItems", path)?.unwrap_or(0) as u32;
        let max_items = get_count(obj, "maxItems", path)?
            .map_or(u32::MAX, |m| m.min(u32::MAX as u64 - 1) as u32);
        if min_items > max_items {
            self.b.nodes[id as usize] = Node::Never;
            return Ok(id);
        }
        let contains = match self.contains_node(obj, !prefix.is_empty(), path)? {
            Some(c) if c.min > c.max || c.min > max_items => {
                self.b.nodes[id as usize] = Node::Never;
                return Ok(id);
            }
            Some(c) => {
                items = Some(self.b.push(Node::Union(vec![c.matched, c.other]))?);
                Some(c)
            }
            None => None,
        };
        let mut unique = Vec::new();
        let mut unique_strings = Vec::new();
        let mut max_items = max_items;
        // At most one item, or none possible: uniqueness holds by itself.
        let no_items = prefix.is_empty()
            && items.is_some_and(|it| matches!(self.b.nodes[it as usize], Node::Never));
        if obj.get("uniqueItems") == Some(&Value::Bool(true)) && max_items > 1 && !no_items {
            let refuse =
                |this: &mut Self, reason: &str| this.b.unsupported("uniqueItems", path, reason);
            if !prefix.is_empty() || contains.is_some() {
                refuse(
                    self,
                    "beside prefixItems or contains, item uniqueness is not enforced",
                )?;
            } else if let Some(values) = self.unique_values(obj, path)? {
                for (i, v) in values.iter().enumerate() {
                    unique.push(self.const_node(v, &format!("{path}/items/enum/{i}"))?);
                }
                items = Some(self.b.push(Node::Union(unique.clone()))?);
                max_items = max_items.min(unique.len() as u32);
                if min_items > max_items {
                    return Ok(id); // still Node::Never
                }
            } else if let Some(lexes) = items.and_then(|it| self.string_lexemes(it)) {
                if min_items > MAX_UNIQUE_STRINGS_REQUIRED {
                    refuse(
                        self,
                        &format!("more than {MAX_UNIQUE_STRINGS_REQUIRED} distinct strings required (minItems)"),
                    )?;
                } else {
                    // As many distinct strings as minItems asks for must exist.
                    let mut used: Vec<Vec<u8>> = Vec::new();
                    while (used.len() as u32) < min_items {
                        let v = lexes.iter().find_map(|&l| {
                            crate::grammar::dfa::fresh::fresh_value(
                                &self.b.lexemes[l as usize],
                                &used,
                            )
                        });
                        match v {
                            Some(v) => {
                                let at = used.binary_search(&v).unwrap_err();
                                used.insert(at, v);
                            }
                            None => return Ok(id), // still Node::Never
                        }
                    }
                    unique_strings = lexes;
                }
            } else {
                refuse(
                    self,
                    "item uniqueness is enforced only over strings or a finite set of item values (an enum or const, booleans, null; at most 32 values)",
                )?;
            }
        }
        self.b.nodes[id as usize] = Node::Array(ArrayNode {
            prefix,
            items,
            min_items,
            max_items,
            syntax: self.arr_syntax(),
            contains,
            unique,
            unique_strings,
        });
        Ok(id)
    }

    /// The string lexemes that make up item node `items` (a string lexeme, or a union of
    /// them; none where no item can be written), or `None` if it holds anything else.
    fn string_lexemes(&self, items: NodeId) -> Option<Vec<LexId>> {
        let is_string = |l: LexId| {
            let d = &self.b.lexemes[l as usize];
            (0..=255u8)
                .all(|b| d.next(d.start(), b) == Dfa::DEAD || matches!(b, b'"' | b'\'' | b'\\'))
        };
        let lexes: Vec<LexId> = match &self.b.nodes[items as usize] {
            Node::Lex(l) => vec![*l],
            Node::Union(alts) => alts
                .iter()
                .filter(|&&a| !matches!(self.b.nodes[a as usize], Node::Never))
                .map(|&a| match self.b.nodes[a as usize] {
                    Node::Lex(l) => Some(l),
                    _ => None,
                })
                .collect::<Option<_>>()?,
            _ => return None,
        };
        lexes.iter().all(|&l| is_string(l)).then_some(lexes)
    }

    /// `uniqueItems: true`: the finite set of values the items come from, deduplicated (JSON
    /// equality: `1` and `1.0` are one value), when the items schema is an `enum`/`const`
    /// (filtered by its `type`), `boolean` or `null`, at most [`MAX_UNIQUE_VALUES`] values;
    /// `None` otherwise.
    fn unique_values(
        &mut self,
        obj: &Map<String, Value>,
        path: &str,
    ) -> Result<Option<Vec<Value>>> {
        let mut schema = obj.get("items").cloned().unwrap_or(Value::Bool(true));
        // One `$ref` (with annotations beside it) is followed.
        if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
            if schema
                .as_object()
                .is_some_and(|m| m.keys().all(|k| k == "$ref" || is_annotation(k)))
            {
                schema = self.ref_target_of(r, path)?.1.clone();
            }
        }
        let Some(m) = schema.as_object() else {
            return Ok(None);
        };
        if m.keys().any(|k| {
            !matches!(k.as_str(), "type" | "enum" | "const" | "nullable") && !is_annotation(k)
        }) {
            return Ok(None);
        }
        let mut types = match m.get("type") {
            Some(t) => type_set(t, path)?,
            None => T_ALL,
        };
        if m.get("nullable") == Some(&Value::Bool(true)) {
            types |= T_NULL;
        }
        let mut values: Vec<Value> = match (m.get("enum"), m.get("const")) {
            (Some(Value::Array(e)), Some(c)) => {
                e.iter().filter(|x| json_eq(x, c)).cloned().collect()
            }
            (Some(Value::Array(e)), None) => e.clone(),
            (Some(_), _) => return Err(invalid(path, "enum must be an array")),
            (None, Some(c)) => vec![c.clone()],
            (None, None) if types & !(T_NULL | T_BOOL) == 0 => {
                let mut v = Vec::new();
                if types & T_NULL != 0 {
                    v.push(Value::Null);
                }
                if types & T_BOOL != 0 {
                    v.extend([Value::Bool(false), Value::Bool(true)]);
                }
                v
            }
            (None, None) => return Ok(None),
        };
        values.retain(|v| {
            types
                & match v {
                    Value::Null => T_NULL,
                    Value::Bool(_) => T_BOOL,
                    Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0) => {
                        T_INT | T_NUM
                    }
                    Value::Number(_) => T_NUM,
                    Value::String(_) => T_STR,
                    Value::Array(_) => T_ARR,
                    Value::Object(_) => T_OBJ,
                }
                != 0
        });
        let mut distinct: Vec<Value> = Vec::new();
        for v in values {
            if !distinct.iter().any(|d| json_eq(d, &v)) {
                distinct.push(v);
            }
        }
        if distinct.len() > MAX_UNIQUE_VALUES {
            return Ok(None);
        }
        Ok(Some(distinct))
    }
}

/// The names `required` lists, with the names that the dependencies of required names require
/// (transitively).
fn required_names(
    obj: &Map<String, Value>,
    dependencies: &[(String, Vec<String>)],
    path: &str,
) -> Result<Vec<String>> {
    let mut required: Vec<String> = match obj.get("required") {
        None => vec![],
        Some(Value::Array(r)) => r
            .iter()
            .map(|x| {
                x.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| invalid(path, "required must list strings"))
            })
            .collect::<Result<_>>()?,
        Some(_) => return Err(invalid(path, "required must be an array")),
    };
    // Keys that required keys require are required too.
    let mut i = 0;
    while i < required.len() {
        if let Some((_, needs)) = dependencies.iter().find(|d| d.0 == required[i]) {
            for n in needs {
                if !required.contains(n) {
                    required.push(n.clone());
                }
            }
        }
        i += 1;
    }
    Ok(required)
}

/// Refuses, as Python keyword arguments, any name (listed, required or in a dependency) that
/// is not a Python identifier.
fn check_kwarg_names(
    props: &Map<String, Value>,
    required: &[String],
    dependencies: &[(String, Vec<String>)],
) -> Result<()> {
    for k in props.keys().chain(required).chain(
        dependencies
            .iter()
            .flat_map(|d| std::iter::once(&d.0).chain(&d.1)),
    ) {
        if !is_identifier(k) {
            return Err(Error::Unrepresentable {
                what: "argument name",
                name: k.clone(),
                dialect: "Python keyword-argument".into(),
                reason: "it is not a Python identifier".into(),
            });
        }
    }
    Ok(())
}

/// The names an object lists: its properties, then the names required or in a dependency that
/// are not properties.
fn listed_names<'s>(
    props: &'s Map<String, Value>,
    required: &'s [String],
    dependencies: &'s [(String, Vec<String>)],
) -> Vec<&'s str> {
    let mut listed: Vec<&str> = props.keys().map(String::as_str).collect();
    let named = required.iter().chain(
        dependencies
            .iter()
            .flat_map(|d| std::iter::once(&d.0).chain(&d.1)),
    );
    for r in named {
        if !listed.contains(&r.as_str()) {
            listed.push(r);
        }
    }
    listed
}

/// `obj` without the keyword `k`.
fn without(obj: &Map<String, Value>, k: &str) -> Map<String, Value> {
    let mut o = obj.clone();
    o.remove(k);
    o
}

impl Compiler<'_> {
    /// The automaton of the key names `propertyNames` allows (over the decoded name), or `None`
    /// when the object has none. `false`, or a `type` without `string`, allows no name. Other
    /// keywords than those of a string schema ([`Keyword::fits_string_schema`]; a key is a string:
    /// other types never match) and annotations are refused by name.
    fn property_names_dfa(&mut self, obj: &Map<String, Value>, path: &str) -> Result<Option<Dfa>> {
        let none = || Dfa::literals(std::iter::empty(), 10).unwrap();
        let p = format!("{path}/propertyNames");
        let m = match obj.get("propertyNames") {
            None | Some(Value::Bool(true)) => return Ok(None),
            Some(Value::Bool(false)) => return Ok(Some(none())),
            Some(Value::Object(m)) => m,
            Some(_) => return Err(invalid(path, "propertyNames must be a schema")),
        };
        if let Some(k) = m.keys().find(|k| {
            !Keyword::from_name(k).is_some_and(Keyword::fits_string_schema) && !is_annotation(k)
        }) {
            self.b.unsupported(
                "propertyNames",
                path,
                &format!("only string keywords (length, pattern, format, enum, const) are enforced on names, not `{k}`"),
            )?;
            return Ok(None);
        }
        if let Some(t) = m.get("type") {
            if type_set(t, &p)? & T_STR == 0 {
                return Ok(Some(none()));
            }
        }
        let mut d = self.string_dfa(m, &p)?;
        let listed: Option<Vec<Value>> = match (m.get("enum"), m.get("const")) {
            (Some(Value::Array(e)), _) => Some(e.clone()),
            (Some(_), _) => return Err(invalid(&p, "enum must be an array")),
            (None, Some(c)) => Some(vec![c.clone()]),
            (None, None) => None,
        };
        if let Some(values) = listed {
            let names: Vec<&[u8]> = values
                .iter()
                .filter_map(Value::as_str)
                .map(str::as_bytes)
                .collect();
            let lit = Dfa::literals(names, self.opts.max_lexeme_states)
                .map_err(|e| self.b.dfa_err(e, &p, ""))?;
            d = self.b.and(&d, &lit, &p)?;
        }
        Ok(Some(d))
    }
}

impl Compiler<'_> {
    /// Sets `minProperties`/`maxProperties` on `o` (with `required` distinct required keys);
    /// false when no object can satisfy them. Refused by name where the completion count would
    /// not be exact: either bound beside `dependentRequired`, and a `minProperties` that asks
    /// for more than one key past the required ones where extra keys are allowed (the cost of
    /// several fresh key names is not tracked).
    fn property_counts(
        &mut self,
        obj: &Map<String, Value>,
        o: &mut ObjectNode,
        required: usize,
        dependencies: &[(String, Vec<String>)],
        path: &str,
    ) -> Result<bool> {
        let cap = |n: u64| n.min(u64::from(u32::MAX - 1)) as u32;
        let min = get_count(obj, "minProperties", path)?.map(cap);
        let max = get_count(obj, "maxProperties", path)?.map(cap);
        if !dependencies.is_empty() {
            for (k, v) in [("minProperties", min), ("maxProperties", max)] {
                if v.is_some() {
                    self.b.unsupported(
                        k,
                        path,
                        "beside dependentRequired (not counted exactly)",
                    )?;
                }
            }
            return Ok(true);
        }
        let mut min = min.unwrap_or(0);
        if min as usize > required + 1 && o.additional.is_some() {
            self.b.unsupported(
                "minProperties",
                path,
                "more than one key past the required ones where extra keys are allowed",
            )?;
            min = 0;
        }
        let max = max.unwrap_or(u32::MAX);
        if min > max || required > max as usize {
            return Ok(false);
        }
        o.min_props = min;
        o.max_props = max;
        Ok(true)
    }
}

impl Compiler<'_> {
    /// `contains` (with `minContains`/`maxContains`): the item schema split into the items
    /// that match and those that do not (the latter through `not`, so `contains` is refused by
    /// name where its complement is not exact). `None` without `contains`, or where it asks for
    /// nothing (`minContains: 0` and no `maxContains`). Refused beside a prefix (`prefixItems`,
    /// array-form `items`), whose positions would need a split each.
    fn contains_node(
        &mut self,
        obj: &Map<String, Value>,
        has_prefix: bool,
        path: &str,
    ) -> Result<Option<ContainsNode>> {
        let Some(c) = obj.get("contains") else {
            // minContains/maxContains without contains are ignored.
            return Ok(None);
        };
        let cap = |n: u64| n.min(u64::from(u32::MAX - 1)) as u32;
        let min = get_count(obj, "minContains", path)?.map_or(1, cap);
        let max = get_count(obj, "maxContains", path)?.map_or(u32::MAX, cap);
        if min == 0 && max == u32::MAX {
            return Ok(None);
        }
        if has_prefix {
            self.b
                .unsupported("contains", path, "beside prefixItems (or array-form items)")?;
            return Ok(None);
        }
        let items = obj.get("items").cloned().unwrap_or(Value::Bool(true));
        let p = format!("{path}/contains");
        let yes = self.merge_all(&[items.clone(), c.clone()], &p)?;
        let no = self.merge_all(&[items, serde_json::json!({ "not": c })], &p)?;
        let matched = self.compile(&yes, &p)?;
        let other = match self.compile(&no, &p) {
            Ok(n) => n,
            Err(Error::UnsupportedKeyword { reason, .. }) => {
                self.b.unsupported(
                    "contains",
                    path,
                    &format!("the items it does not match cannot be told apart exactly: {reason}"),
                )?;
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        Ok(Some(ContainsNode {
            matched,
            other,
            min,
            max,
        }))
    }
}
