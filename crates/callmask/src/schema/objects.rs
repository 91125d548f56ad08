//! Objects (JSON, JSON inside a string, Python keyword arguments) and arrays: properties in any
//! order, each at most once, required ones enforced; `additionalProperties`; `items`,
//! `prefixItems`, `minItems`/`maxItems`.

use super::*;

impl Compiler<'_> {
    /// Builds an object node from `(key, value)` entries (keys unencoded) in the current encoding.
    pub(crate) fn object_node(
        &mut self,
        entries: Vec<(String, NodeId)>,
        required: &[String],
        additional: Option<(LexId, NodeId)>,
        syntax: Syntax,
        kwargs: bool,
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
                        .find(|&j| j != i && spelled[j].1 == spelled[i].1)
                        .unwrap_or(i) as u32
                })
                .collect()
        } else {
            Vec::new()
        };
        Ok(ObjectNode {
            trie: KeyTrie::new(&keys),
            keys,
            values,
            required: req,
            unavailable: vec![],
            additional,
            syntax,
            alias,
        })
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
        let mut s = schema.clone();
        for _ in 0..32 {
            let Some(o) = s.as_object() else { break };
            if let Some(r) = o.get("$ref") {
                let r = r
                    .as_str()
                    .ok_or_else(|| invalid(path, "$ref must be a string"))?;
                let pointer = self.ref_pointer(r, path)?;
                let target = self
                    .root
                    .pointer(&pointer)
                    .ok_or_else(|| Error::UnresolvedRef {
                        reference: r.into(),
                        path: ptr(path),
                    })?
                    .clone();
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
        for k in ["anyOf", "oneOf", "enum", "const"] {
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
        let required: Vec<String> = match obj.get("required") {
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
        if kwargs {
            for k in props.keys().chain(required.iter()) {
                if !is_identifier(k) {
                    return Err(Error::Unrepresentable {
                        what: "argument name",
                        name: k.clone(),
                        dialect: "Python keyword-argument".into(),
                        reason: "it is not a Python identifier".into(),
                    });
                }
            }
        }
        let id = self.b.push(Node::Never)?;
        let additional_node = match obj.get("additionalProperties") {
            None | Some(Value::Bool(true)) => Some(self.any()?),
            Some(Value::Bool(false)) => None,
            Some(s @ Value::Object(_)) => {
                Some(self.compile(s, &format!("{path}/additionalProperties"))?)
            }
            Some(_) => return Err(invalid(path, "additionalProperties must be a schema")),
        };
        let never = self.b.push(Node::Never)?;
        let mut entries: Vec<(String, NodeId)> = Vec::new();
        for (k, s) in props {
            let p = format!("{path}/properties/{}", escape_ptr(k));
            let v = self.compile(s, &p)?;
            entries.push((k.clone(), v));
        }
        for r in &required {
            if !props.contains_key(r) && !entries.iter().any(|e| &e.0 == r) {
                // A required key that only additionalProperties can match.
                entries.push((r.clone(), additional_node.unwrap_or(never)));
            }
        }
        let additional = match additional_node {
            None => None,
            Some(v) => {
                let max = self.opts.max_lexeme_states;
                let d = if kwargs {
                    // an identifier and `=`, other than the listed names
                    let names: Vec<String> = entries.iter().map(|e| format!("{}=", e.0)).collect();
                    let listed = Dfa::literals(names.iter().map(|n| n.as_bytes()), max)
                        .map_err(|e| self.b.dfa_err(e, path, ""))?;
                    self.b
                        .regex("[A-Za-z_][A-Za-z0-9_]*=", path)?
                        .product(&listed, Op::AndNot, max)
                        .map_err(|e| self.b.dfa_err(e, path, ""))?
                } else {
                    let listed: Vec<&[u8]> = entries.iter().map(|e| e.0.as_bytes()).collect();
                    let lit =
                        Dfa::literals(listed, max).map_err(|e| self.b.dfa_err(e, path, ""))?;
                    let d = self
                        .b
                        .regex("(?s:.)*", path)?
                        .product(&lit, Op::AndNot, max)
                        .map_err(|e| self.b.dfa_err(e, path, ""))?;
                    self.quote(&d, path)?
                };
                Some((self.key_lexeme(Arc::new(d), path)?, v))
            }
        };
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
        let o = self.object_node(entries, &required, additional, syntax, kwargs)?;
        self.b.nodes[id as usize] = Node::Object(Box::new(o));
        Ok(id)
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
        self.b.nodes[id as usize] = Node::Array(ArrayNode {
            prefix,
            items,
            min_items,
            max_items,
            syntax: self.arr_syntax(),
        });
        Ok(id)
    }
}
