//! `enum` and `const`: the values are filtered through the rest of their schema, then scalars
//! become one literal automaton and containers become fixed-shape nodes.

use super::*;

impl Compiler<'_> {
    pub(super) fn compile_enum(&mut self, obj: &Map<String, Value>, path: &str) -> Result<NodeId> {
        let mut values: Vec<Value> = Vec::new();
        if let Some(c) = obj.get("const") {
            values.push(c.clone());
        }
        if let Some(e) = obj.get("enum") {
            let e = e
                .as_array()
                .ok_or_else(|| invalid(path, "enum must be an array"))?;
            if obj.contains_key("const") {
                values.retain(|v| e.iter().any(|x| json_eq(v, x)));
            } else {
                values.extend(e.iter().cloned());
            }
        }
        // Other keywords filter the values.
        let mut rest = obj.clone();
        rest.remove("const");
        rest.remove("enum");
        let only_type = rest
            .keys()
            .all(|k| k == "type" || k == "nullable" || is_annotation(k));
        if only_type && rest.contains_key("type") {
            // The common case, `{"type": T, "enum": [...]}`: filter by type directly.
            let mut types = type_set(&rest["type"], path)?;
            if rest.get("nullable") == Some(&Value::Bool(true)) {
                types |= T_NULL;
            }
            values.retain(|v| {
                types
                    & match v {
                        Value::Null => T_NULL,
                        Value::Bool(_) => T_BOOL,
                        Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0) => T_INT,
                        Value::Number(_) => T_NUM,
                        Value::String(_) => T_STR,
                        Value::Array(_) => T_ARR,
                        Value::Object(_) => T_OBJ,
                    }
                    != 0
            });
        } else if rest.keys().any(|k| !is_annotation(k)) {
            let mut check = rest.clone();
            let copies = resolve::copies_key(self.root);
            for d in ["$defs", "definitions"]
                .into_iter()
                .chain(copies.as_deref())
            {
                if let Some(v) = self.root.get(d) {
                    check.insert(d.into(), v.clone());
                }
            }
            spell_out_lists(&mut check);
            let v = jsonschema::options()
                .should_validate_formats(!self.opts.format_annotation)
                .build(&Value::Object(check))
                .map_err(|e| {
                    invalid(
                        path,
                        format!("cannot check enum values against the schema: {e}"),
                    )
                })?;
            values.retain(|x| v.is_valid(x));
        }
        let mut scalars_text: Vec<Vec<u8>> = Vec::new();
        let mut strings: Vec<Vec<u8>> = Vec::new();
        let mut others: Vec<NodeId> = Vec::new();
        for v in &values {
            self.b.check_budget()?;
            match v {
                Value::String(s) => strings.push(s.as_bytes().to_vec()),
                Value::Number(n) => {
                    scalars_text.push(n.to_string().into_bytes());
                    if let Some(f) = n.as_f64() {
                        if f.fract() == 0.0 && f.abs() < 1e19 {
                            let i = f as i128;
                            scalars_text.push(i.to_string().into_bytes());
                            scalars_text.push(format!("{i}.0").into_bytes());
                        }
                    }
                }
                Value::Bool(_) | Value::Null => scalars_text.extend(self.literal_bytes(v)),
                Value::Array(items) => {
                    let mut prefix = Vec::new();
                    for (i, it) in items.iter().enumerate() {
                        prefix.push(self.const_node(it, &format!("{path}/enum/{i}"))?);
                    }
                    let n = items.len() as u32;
                    others.push(self.b.push(Node::Array(ArrayNode {
                        prefix,
                        items: None,
                        min_items: n,
                        max_items: n,
                        syntax: self.arr_syntax(),
                        contains: None,
                        unique: Vec::new(),
                        unique_strings: Vec::new(),
                    }))?);
                }
                Value::Object(_) => others.push(self.const_node(v, path)?),
            }
        }
        if self.enc == Encoding::Gemma && !strings.is_empty() {
            // Gemma's strings are their quotes around a lexeme of the words.
            if let Some(w) = strings
                .iter()
                .find(|w| w.windows(5).any(|x| x == b"<|\"|>"))
            {
                return Err(Error::UnsupportedKeyword {
                    keyword: "enum".into(),
                    path: ptr(path),
                    reason: format!(
                        "the value {:?} holds <|\"|>, which ends a string in Gemma's notation",
                        String::from_utf8_lossy(w)
                    ),
                });
            }
            let words = std::mem::take(&mut strings);
            let key = Lexeme::Enum {
                strings: words.clone(),
                scalars: Vec::new(),
            };
            let d = self.cached(key, |this| {
                Dfa::literals(
                    words.iter().map(|w| w.as_slice()),
                    this.opts.max_lexeme_states,
                )
                .map_err(|e| this.b.dfa_err(e, path, ""))
            })?;
            others.push(self.gemma_string(d, path)?);
        }
        if !strings.is_empty() || !scalars_text.is_empty() {
            let key = Lexeme::Enum {
                strings: strings.clone(),
                scalars: scalars_text.clone(),
            };
            let d = self.cached(key, |this| {
                let max = this.opts.max_lexeme_states;
                let mut lex: Option<Dfa> = None;
                if !strings.is_empty() {
                    let words: Vec<&[u8]> = strings.iter().map(|s| s.as_slice()).collect();
                    let quotes = match this.enc {
                        Encoding::Json | Encoding::JsonInString => WordQuotes::Json,
                        Encoding::Python => WordQuotes::Python,
                        Encoding::Gemma => unreachable!("Gemma's strings are taken above"),
                    };
                    let d = Dfa::words_quoted(&words, quotes, max)
                        .map_err(|e| this.b.dfa_err(e, path, ""))?;
                    lex = Some(d);
                }
                if !scalars_text.is_empty() {
                    let d = Dfa::literals(scalars_text.iter().map(|s| s.as_slice()), max)
                        .map_err(|e| this.b.dfa_err(e, path, ""))?;
                    lex = Some(match lex {
                        Some(l) => l
                            .product(&d, Op::Or, max)
                            .map_err(|e| this.b.dfa_err(e, path, ""))?,
                        None => d,
                    });
                }
                Ok(lex.expect("some values"))
            })?;
            others.push(self.lexeme(d)?);
        }
        match others.len() {
            0 => self.b.push(Node::Never),
            1 => Ok(others[0]),
            _ => self.b.push(Node::Union(others)),
        }
    }

    /// A node matching exactly one JSON value.
    pub(super) fn const_node(&mut self, v: &Value, path: &str) -> Result<NodeId> {
        match v {
            Value::Object(m) => {
                let mut entries: Vec<(String, NodeId)> = Vec::new();
                for (k, x) in m {
                    let id = self.const_node(x, &format!("{path}/{}", escape_ptr(k)))?;
                    entries.push((k.clone(), id));
                }
                let required: Vec<String> = m.keys().cloned().collect();
                let syntax = self.obj_syntax();
                let o = self.object_node(entries, &required, None, syntax, false, &[])?;
                self.b.push(Node::Object(Box::new(o)))
            }
            _ => {
                let mut m = Map::new();
                m.insert("const".into(), v.clone());
                self.compile_enum(&m, path)
            }
        }
    }
}

/// Rewrites, in `schema` and its subschemas, the lists of patterns or formats that merging
/// `allOf` parts leaves in `pattern`/`format` (see `merge.rs`) as one `allOf` part each, so that
/// a validator reads them.
fn spell_out_lists(schema: &mut Map<String, Value>) {
    for k in ["pattern", "format"] {
        if let Some(Value::Array(list)) = schema.get(k) {
            let parts: Vec<Value> = list
                .iter()
                .map(|v| Value::Object(Map::from_iter([(k.to_string(), v.clone())])))
                .collect();
            schema.remove(k);
            match schema.get_mut("allOf") {
                Some(Value::Array(all)) => all.extend(parts),
                _ => {
                    schema.insert("allOf".into(), Value::Array(parts));
                }
            }
        }
    }
    // Into every subschema (the keywords whose kind holds subschemas).
    for (k, v) in schema.iter_mut() {
        let Some(kind) = Keyword::from_name(k).map(Keyword::kind) else {
            continue;
        };
        match v {
            Value::Object(map) if kind.schema_map() => map.values_mut().for_each(spell_out_in),
            Value::Array(list) if kind.schema_list() => list.iter_mut().for_each(spell_out_in),
            v if kind.one_schema() => spell_out_in(v),
            _ => {}
        }
    }
}

/// [`spell_out_lists`] on a subschema (booleans have nothing to rewrite).
fn spell_out_in(v: &mut Value) {
    if let Value::Object(m) = v {
        spell_out_lists(m);
    }
}
