//! Arguments written as tags, one lowering for both front ends: a dialect file's
//! `@xml_args(...)` ([`XmlArgs`], per function of the tool set) and the XML styles of a
//! structural tag's `json_schema` regions (each style is an [`XmlArgs`] too, see
//! [`XmlStyle::args`]). Per argument: `key_prefix KEY suffix VALUE value_suffix`, the value raw
//! text where it is a string and JSON otherwise, told apart by the schema or by the suffix
//! ([`XmlTyping`]); the arguments in any order, each at most once (up to
//! [`XML_ANY_ORDER_MAX`] of them; in the schema's order beyond).
//!
//! The two readings ([`XmlReading`]) differ where the peers' parsers do: a dialect file's is
//! strict (a raw value may not hold the key prefix nor a special token's text, argument names
//! must be plain, a required argument not listed is an error); XGrammar's styles follow
//! XGrammar (a raw value stops only at its closing tag, an open object takes any argument
//! names, whitespace around JSON values and constrained raw ones).

use super::*;
use crate::dialect::ir::{unsupported, XmlReading, XmlStyle};

/// Most listed arguments for which tagged arguments may come in any order (the lowering
/// tracks which were written, one grammar node per subset); with more, they come in the
/// schema's order.
pub(super) const XML_ANY_ORDER_MAX: usize = 8;

/// Top-level keywords of an arguments schema written as tags (besides annotations): its
/// properties and the definitions their local `$ref`s point into.
const XML_TOP_KEYWORDS: &[Keyword] = &[
    Keyword::Type,
    Keyword::Properties,
    Keyword::Required,
    Keyword::AdditionalProperties,
    Keyword::Defs,
    Keyword::Definitions,
];

/// True when `k` is one of [`XML_TOP_KEYWORDS`].
pub(super) fn xml_top_keyword(k: &str) -> bool {
    Keyword::from_name(k).is_some_and(|k| XML_TOP_KEYWORDS.contains(&k))
}

/// Whose arguments are written as tags: for errors, and for the document of the JSON values'
/// `$ref`s.
#[derive(Clone, Copy)]
enum Owner<'s> {
    /// Function `i` of the tool set (`@xml_args`).
    Function(usize),
    /// A structural tag's `json_schema` region in an XML style, at `path`.
    Region { style: XmlStyle, path: &'s str },
}

impl Lowering<'_> {
    /// An error saying why `owner`'s arguments cannot be written as tags.
    fn refuse(&self, owner: Owner, reason: impl Into<String>) -> Error {
        match owner {
            Owner::Function(i) => Error::Unrepresentable {
                what: "arguments of",
                name: self.tools.as_slice()[i].name.clone(),
                dialect: self.dialect.name.clone(),
                reason: reason.into(),
            },
            Owner::Region { style, path } => {
                unsupported(format!("style: {}", style.name()), path, &reason.into())
            }
        }
    }

    /// An error saying why argument `k` of `owner` cannot be written raw.
    fn refuse_raw(&self, owner: Owner, k: &str, reason: String) -> Error {
        match owner {
            Owner::Function(i) => Error::Unrepresentable {
                what: "argument",
                name: format!("{}.{k}", self.tools.as_slice()[i].name),
                dialect: self.dialect.name.clone(),
                reason: format!("its string values are written raw, and {reason}"),
            },
            Owner::Region { style, path } => {
                // `k` empty: the region's own schema (one value), or any argument's.
                let at = match k {
                    "" => format!("{path}/json_schema"),
                    k => format!("{path}/json_schema/properties/{k}"),
                };
                unsupported(format!("style: {}", style.name()), &at, &reason)
            }
        }
    }
}

impl<'a> Lowering<'a> {
    /// `@xml_args(...)`: the arguments of function `i` as tagged fields (see [`XmlArgs`]).
    pub(super) fn xml_args(&mut self, i: usize, x: &XmlArgs) -> Result<NodeId> {
        let normalized = crate::schema::normalize_type_aliases(&self.params[i]);
        let body = self.tagged_fields(&normalized, x, Owner::Function(i))?;
        self.c.b.push(Node::Capture(Capture::Fields, body))
    }

    /// A `json_schema` region in an XML style: the arguments, reported as a call.
    pub(super) fn xml_style_args(
        &mut self,
        schema: &'a Value,
        style: XmlStyle,
        path: &str,
    ) -> Result<NodeId> {
        self.c.set_document(schema, Encoding::Json);
        let body = self.tagged_fields(schema, &style.args(), Owner::Region { style, path })?;
        let ws = ws_node(&mut self.c)?;
        let body = self.seq(vec![body, ws])?;
        let fields = self.c.b.push(Node::Capture(Capture::Fields, body))?;
        self.region_call(fields)
    }

    /// One value as an XML style writes an argument's (the region's schema is not an
    /// object's), holding none of the enclosing tag's end strings (`ends`). Not a call: the
    /// enclosing tags name it.
    pub(super) fn xml_value(
        &mut self,
        schema: &'a Value,
        style: XmlStyle,
        path: &str,
        ends: &[String],
    ) -> Result<NodeId> {
        self.c.set_document(schema, Encoding::Json);
        let owner = Owner::Region { style, path };
        let mut x = style.args();
        x.value_suffix.clear();
        x.value_without = ends.iter().filter(|e| !e.is_empty()).cloned().collect();
        let alts = self.value_alternatives(schema, schema, &x, owner, "", path, false)?;
        let alts = alts.into_iter().map(|(_, v)| v).collect();
        self.c.b.push(Node::Union(alts))
    }

    /// The tagged fields of arguments schema `schema`, as `x` writes them.
    fn tagged_fields(&mut self, schema: &Value, x: &XmlArgs, owner: Owner) -> Result<NodeId> {
        let xgrammar = matches!(x.reading, XmlReading::XGrammar { .. });
        let obj = match schema {
            Value::Object(o) => o,
            Value::Bool(false) if xgrammar => return self.never(),
            Value::Bool(true) if xgrammar => return self.any_fields(x, owner),
            _ => return Err(self.refuse(owner, "the arguments schema must be an object schema")),
        };
        if let Some(k) = obj
            .keys()
            .find(|k| !xml_top_keyword(k) && !crate::schema::is_annotation(k))
        {
            return Err(self.refuse(
                owner,
                format!(
                    "arguments written as tags take a plain object schema (properties, \
                     required), not `{k}`"
                ),
            ));
        }
        if obj
            .get("type")
            .is_some_and(|t| t != "object" && t != "dict")
        {
            return Err(self.refuse(owner, "the arguments schema must be of type object"));
        }
        let props: Vec<(&String, &Value)> = match obj.get("properties") {
            None => Vec::new(),
            Some(Value::Object(p)) => p.iter().collect(),
            Some(_) => return Err(self.refuse(owner, "`properties` must be an object")),
        };
        let required: Vec<&str> = match obj.get("required") {
            None => Vec::new(),
            Some(Value::Array(r)) => r.iter().filter_map(Value::as_str).collect(),
            Some(_) => return Err(self.refuse(owner, "`required` must be an array")),
        };
        if xgrammar {
            // XGrammar's reading: an object that leaves extra keys open takes any arguments.
            let open = match obj.get("additionalProperties") {
                None | Some(Value::Bool(true)) => true,
                Some(Value::Bool(false)) => false,
                Some(_) => {
                    return Err(self.refuse(
                        owner,
                        "`additionalProperties` as a schema (callmask compiles true or false)",
                    ))
                }
            };
            match (open, props.is_empty()) {
                (true, true) => return self.any_fields(x, owner),
                (true, false) => {
                    return Err(self.refuse(
                        owner,
                        "extra arguments beside the listed ones (set additionalProperties to \
                         false)",
                    ))
                }
                _ => {}
            }
        }
        if let Some(r) = required
            .iter()
            .find(|r| !props.iter().any(|(k, _)| k == *r))
        {
            // A required argument that cannot be written: nothing satisfies the schema.
            if xgrammar {
                return self.never();
            }
            return Err(self.refuse(
                owner,
                format!("required argument {r:?} is not among the properties"),
            ));
        }
        if !xgrammar {
            // Keys are written as is: no markup or line breaks in them.
            if let Some((k, _)) = props.iter().find(|(k, _)| {
                k.is_empty() || k.bytes().any(|b| b"<>\"&\n\r".contains(&b)) || k.trim() != *k
            }) {
                return Err(Error::Unrepresentable {
                    what: "argument name",
                    name: (*k).clone(),
                    dialect: self.dialect.name.clone(),
                    reason: "a tagged argument name may not be empty, hold <>\"& or line \
                             breaks, nor start or end with a space"
                        .into(),
                });
            }
        }
        let mut fields = Vec::new();
        for (k, p) in &props {
            self.c.b.check_budget()?;
            let key = lit_node(&mut self.c, k.as_bytes())?;
            let key = self.c.b.push(Node::Capture(Capture::Key, key))?;
            fields.push(self.tagged_field(key, k, p, schema, x, owner)?);
        }
        let req: Vec<bool> = props
            .iter()
            .map(|(k, _)| required.contains(&k.as_str()))
            .collect();
        if fields.len() <= XML_ANY_ORDER_MAX {
            // One node per set of written fields: any order, each at most once.
            let mut memo: HashMap<u32, NodeId> = HashMap::new();
            self.field_sets(0, fields.len(), &fields, &req, &mut memo)
        } else {
            let mut items = Vec::new();
            for (f, r) in fields.iter().zip(&req) {
                items.push(if *r { *f } else { self.repeat(*f, 0, 1)? });
            }
            self.seq(items)
        }
    }

    /// Any arguments, each once or more, as XGrammar writes an open object: a name
    /// (`[a-zA-Z_][a-zA-Z0-9_]*`), then any value.
    fn any_fields(&mut self, x: &XmlArgs, owner: Owner) -> Result<NodeId> {
        let key = self.regex("[a-zA-Z_][a-zA-Z0-9_]*")?;
        let key = self.c.b.push(Node::Capture(Capture::Key, key))?;
        let any = Value::Bool(true);
        let field = self.tagged_field(key, "", &any, &any, x, owner)?;
        self.repeat(field, 0, u32::MAX)
    }

    /// One argument: `[sep] key_prefix KEY suffix VALUE value_suffix`, `key` being the name's
    /// node, `p` its schema (`root`: the arguments schema, for local `$ref`s).
    fn tagged_field(
        &mut self,
        key: NodeId,
        k: &str,
        p: &Value,
        root: &Value,
        x: &XmlArgs,
        owner: Owner,
    ) -> Result<NodeId> {
        let path = match owner {
            Owner::Function(i) => format!("/{}/properties/{k}", self.tools.as_slice()[i].name),
            Owner::Region { .. } if k.is_empty() => String::new(),
            Owner::Region { .. } => format!("/properties/{k}"),
        };
        let open = self.affix(&x.key_prefix)?;
        let close = self.affix(&x.value_suffix)?;
        let mut alts = Vec::new();
        for (suffix, v) in self.value_alternatives(p, root, x, owner, k, &path, true)? {
            let mid = self.affix(&suffix)?;
            alts.push(self.seq(vec![mid, v])?);
        }
        let value = self.c.b.push(Node::Union(alts))?;
        let mut parts = vec![open, key, value, close];
        if !x.sep.is_empty() {
            let s = lit_node(&mut self.c, &x.sep)?;
            parts.insert(0, self.repeat(s, 0, 1)?);
        }
        self.seq(parts)
    }

    /// The ways to write a value of schema `p` (argument `k`), each after its suffix: raw
    /// where it is a string, JSON otherwise, as `x`'s typing tells them apart; captured as an
    /// argument's value where `capture`.
    #[allow(clippy::too_many_arguments)]
    fn value_alternatives(
        &mut self,
        p: &Value,
        root: &Value,
        x: &XmlArgs,
        owner: Owner,
        k: &str,
        path: &str,
        capture: bool,
    ) -> Result<Vec<(Vec<Affix>, NodeId)>> {
        let without = raw_exclusions(x);
        let mut alts = Vec::new();
        match &x.typing {
            XmlTyping::BySchema => {
                let v = match raw_string_schema(p) {
                    Some(obj) => self.raw_values(&[obj], &without, None, x, path, capture)?,
                    None => match self.raw_or_json(p, root, x, owner, path, capture)? {
                        Some(v) => v,
                        None => self.json_value(p, x, owner, path, capture)?,
                    },
                };
                alts.push((x.key_suffix.clone(), v));
            }
            XmlTyping::Tagged(groups) => {
                let tags: Vec<String> = groups
                    .iter()
                    .map(|g| {
                        String::from_utf8_lossy(&super::super::ir::affix_text(&g.suffix))
                            .into_owned()
                    })
                    .collect();
                if !self.c.b.type_tags.contains(&tags) {
                    self.c.b.type_tags.push(tags);
                }
                for g in groups {
                    let v = if g.raw() {
                        match string_part(p, root, 0) {
                            Ok(None) => continue,
                            Ok(Some(parts)) => {
                                self.raw_values(&parts, &without, None, x, path, capture)?
                            }
                            Err(reason) => return Err(self.refuse_raw(owner, k, reason)),
                        }
                    } else {
                        match restrict_types(p, &g.types) {
                            None => continue,
                            Some(s) => self.json_value(&s, x, owner, path, capture)?,
                        }
                    };
                    alts.push((g.suffix.clone(), v));
                }
            }
        }
        Ok(alts)
    }

    /// The value of a property whose schema admits strings and other values, told apart by
    /// schema alone (a dialect file's `@xml_args` without type tags): a string raw, as the
    /// models write it (`<parameter=name>Alice</parameter>` for `Optional[str]`), unless it
    /// reads as JSON of one of the other types the schema names (`null`, `5`, `true`, `{..`,
    /// `[..`), which is that JSON value, as the peers' parsers read it. Each output has one
    /// reading; the cost is that a string spelled like such a value cannot be written.
    /// `None` where the schema admits no string, or its strings cannot be checked raw (then
    /// the value is JSON).
    fn raw_or_json(
        &mut self,
        p: &Value,
        root: &Value,
        x: &XmlArgs,
        owner: Owner,
        path: &str,
        capture: bool,
    ) -> Result<Option<NodeId>> {
        if x.reading != XmlReading::Strict {
            return Ok(None);
        }
        let Ok(Some(parts)) = string_part(p, root, 0) else {
            return Ok(None);
        };
        let others = ["null", "boolean", "integer", "number", "object", "array"];
        let Some(rest) = restrict_types(p, &others) else {
            return Ok(None);
        };
        let mut spell = Vec::new();
        for t in named_types(p) {
            spell.push(match t {
                "null" => "null",
                "boolean" => "true|false",
                "integer" | "number" => r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?",
                "object" => r"\{(?s:.)*",
                "array" => r"\[(?s:.)*",
                _ => continue,
            });
        }
        spell.dedup();
        let ws = if x.json_ws { r"[ \t\r\n]*" } else { "" };
        let exclude = format!("{ws}(?:{}){ws}", spell.join("|"));
        let without = raw_exclusions(x);
        let raw = self.raw_values(&parts, &without, Some(&exclude), x, path, capture)?;
        let json = self.json_value(&rest, x, owner, path, capture)?;
        Ok(Some(self.c.b.push(Node::Union(vec![raw, json]))?))
    }

    /// A raw value matching one of the string schemas `parts` (see [`string_part`]), holding
    /// none of `without` and not matching `exclude` as a whole: with `x`'s pad, or, in
    /// XGrammar's reading, with whitespace around the parts that constrain the string.
    fn raw_values(
        &mut self,
        parts: &[Map<String, Value>],
        without: &[String],
        exclude: Option<&str>,
        x: &XmlArgs,
        path: &str,
        capture: bool,
    ) -> Result<NodeId> {
        let XmlReading::XGrammar { ws_raw } = x.reading else {
            return self.raw_value(parts, without, exclude, &x.pad, path, capture);
        };
        let mut alts = Vec::new();
        for m in parts {
            let v = self.raw_value(
                std::slice::from_ref(m),
                without,
                exclude,
                &[],
                path,
                capture,
            )?;
            let constrained = m
                .keys()
                .any(|k| k != "type" && !crate::schema::is_annotation(k));
            alts.push(if ws_raw && constrained {
                let w1 = self.ws()?;
                let w2 = self.ws()?;
                self.seq(vec![w1, v, w2])?
            } else {
                v
            });
        }
        match alts.as_slice() {
            [one] => Ok(*one),
            _ => self.c.b.push(Node::Union(alts)),
        }
    }

    /// A raw value: text matching one of the string schemas `parts` and holding none of
    /// `without`, with an optional `pad` on either side (captured as an argument's value where
    /// `capture`).
    pub(super) fn raw_value(
        &mut self,
        parts: &[Map<String, Value>],
        without: &[String],
        exclude: Option<&str>,
        pad: &[u8],
        path: &str,
        capture: bool,
    ) -> Result<NodeId> {
        let d = raw_dfa(&mut self.c, parts, without, exclude, path)?;
        self.c.enc = Encoding::Json;
        if !pad.is_empty() {
            return self.padded_raw(&d, pad, path);
        }
        let l = self.c.b.lexeme(d)?;
        if !capture {
            return Ok(l);
        }
        self.c.b.push(Node::Capture(Capture::Value(true), l))
    }

    /// A JSON value of `schema` (a property of `owner`'s arguments): with `x`'s pad on either
    /// side (a JSON value never starts nor ends with the pad's text: line breaks), or, in
    /// XGrammar's reading, with whitespace around it.
    fn json_value(
        &mut self,
        schema: &Value,
        x: &XmlArgs,
        owner: Owner,
        path: &str,
        capture: bool,
    ) -> Result<NodeId> {
        let n = match owner {
            Owner::Function(i) => {
                let doc: &Value = &self.params[i];
                self.c.set_document(doc, Encoding::Json);
                let fname = &self.tools.as_slice()[i].name;
                self.c
                    .compile(schema, path)
                    .map_err(|e| in_function(e, fname))?
            }
            Owner::Region { .. } => self.c.compile(schema, path)?,
        };
        let v = if capture {
            self.c.b.push(Node::Capture(Capture::Value(false), n))?
        } else {
            n
        };
        let around = match x.reading {
            XmlReading::XGrammar { .. } => [self.ws()?, self.ws()?],
            XmlReading::Strict if x.json_ws => [self.ws()?, self.ws()?],
            XmlReading::Strict if x.pad.is_empty() => return Ok(v),
            XmlReading::Strict => {
                let p1 = lit_node(&mut self.c, &x.pad)?;
                let p2 = lit_node(&mut self.c, &x.pad)?;
                [self.repeat(p1, 0, 1)?, self.repeat(p2, 0, 1)?]
            }
        };
        self.seq(vec![around[0], v, around[1]])
    }

    /// An affix: its literals (plain bytes), special tokens, markers and whitespace in
    /// sequence.
    fn affix(&mut self, a: &[Affix]) -> Result<NodeId> {
        let mut ids = Vec::new();
        for x in a {
            ids.push(match x {
                Affix::Lit(b) => lit_node(&mut self.c, b)?,
                Affix::Special(s) => self.special(s)?,
                Affix::Marker(m) => self.marker(m)?,
                Affix::Ws => self.ws()?,
            });
        }
        match ids.as_slice() {
            [one] => Ok(*one),
            _ => self.c.b.push(Node::Seq(ids)),
        }
    }

    /// A raw value with an optional `pad` on each side that is not part of it: the value may
    /// not start nor end with the pad, and an empty value is written with at most one pad before
    /// and one after, each output with one reading: `pad V pad?`, `V pad?` with V non-empty, or
    /// V empty.
    fn padded_raw(&mut self, d: &Arc<Dfa>, pad: &[u8], path: &str) -> Result<NodeId> {
        let states = self.c.opts.max_lexeme_states;
        let p = regex_syntax::escape(&String::from_utf8_lossy(pad));
        let ends = self.c.b.regex(&format!("{p}(?s:.)*|(?s:.)*{p}"), "")?;
        let inner = d
            .product(&ends, Op::AndNot, states)
            .map_err(|e| self.c.b.dfa_err(e, path, ""))?;
        let empty = self.c.b.regex("", "")?;
        let nonempty = inner
            .product(&empty, Op::AndNot, states)
            .map_err(|e| self.c.b.dfa_err(e, path, ""))?;
        let empty_ok = inner.matches(b"");
        let inner = Arc::new(inner);
        let mut alts = Vec::new();
        // pad V pad?
        let v = self.c.b.lexeme(inner.clone())?;
        let v = self.c.b.push(Node::Capture(Capture::Value(true), v))?;
        let p1 = lit_node(&mut self.c, pad)?;
        let p2 = lit_node(&mut self.c, pad)?;
        let p2 = self.c.b.push(Node::Repeat {
            item: p2,
            min: 0,
            max: 1,
        })?;
        alts.push(self.c.b.push(Node::Seq(vec![p1, v, p2]))?);
        // V pad?, V non-empty
        let v = self.c.b.lexeme(Arc::new(nonempty))?;
        let v = self.c.b.push(Node::Capture(Capture::Value(true), v))?;
        alts.push(self.c.b.push(Node::Seq(vec![v, p2]))?);
        // V empty
        if empty_ok {
            let e = self.c.b.regex("", "")?;
            let v = self.c.b.lexeme(Arc::new(
                e.product(&inner, Op::And, states)
                    .map_err(|e| self.c.b.dfa_err(e, path, ""))?,
            ))?;
            alts.push(self.c.b.push(Node::Capture(Capture::Value(true), v))?);
        }
        self.c.b.push(Node::Union(alts))
    }

    /// The fields that may follow once the fields in `seen` (a bit set) are written.
    fn field_sets(
        &mut self,
        seen: u32,
        n: usize,
        fields: &[NodeId],
        req: &[bool],
        memo: &mut HashMap<u32, NodeId>,
    ) -> Result<NodeId> {
        if let Some(&id) = memo.get(&seen) {
            return Ok(id);
        }
        let mut alts = Vec::new();
        if (0..n).all(|k| !req[k] || seen & (1 << k) != 0) {
            alts.push(self.c.b.push(Node::Seq(vec![]))?);
        }
        for k in 0..n {
            if seen & (1 << k) == 0 {
                let rest = self.field_sets(seen | (1 << k), n, fields, req, memo)?;
                alts.push(self.c.b.push(Node::Seq(vec![fields[k], rest]))?);
            }
        }
        let id = self.c.b.push(Node::Union(alts))?;
        memo.insert(seen, id);
        Ok(id)
    }
}

/// The automaton of a raw value: text matching one of the string schemas `parts` (see
/// [`string_part`]) and holding none of `without` (kept in the compile's caches).
fn raw_dfa(
    c: &mut Compiler,
    parts: &[Map<String, Value>],
    without: &[String],
    exclude: Option<&str>,
    path: &str,
) -> Result<Arc<Dfa>> {
    let key = Lexeme::XmlRaw {
        without: without.to_vec(),
        exclude: exclude.map(str::to_owned),
        parts: Value::Array(parts.iter().cloned().map(Value::Object).collect()).to_string(),
        strings: c.string_options_key(),
    };
    c.cached(key, |c| {
        let states = c.opts.max_lexeme_states;
        let mut acc: Option<Dfa> = None;
        for obj in parts {
            let d = raw_string_content(c, obj, path)?;
            acc = Some(match acc {
                None => d,
                Some(a) => a
                    .product(&d, Op::Or, states)
                    .map_err(|e| c.b.dfa_err(e, path, ""))?,
            });
        }
        let d = match acc {
            Some(d) => d,
            None => Dfa::literals(std::iter::empty::<&[u8]>(), states)
                .map_err(|e| c.b.dfa_err(e, path, ""))?,
        };
        let d = match exclude {
            None => d,
            Some(re) => {
                let bad = c.b.regex(re, "")?;
                d.product(&bad, Op::AndNot, states)
                    .map_err(|e| c.b.dfa_err(e, path, ""))?
            }
        };
        if without.is_empty() {
            return Ok(d);
        }
        let alts: Vec<String> = without.iter().map(|w| regex_syntax::escape(w)).collect();
        let bad =
            c.b.regex(&format!("(?s:.)*(?:{})(?s:.)*", alts.join("|")), "")?;
        d.product(&bad, Op::AndNot, states)
            .map_err(|e| c.b.dfa_err(e, path, ""))
    })
}

/// The keywords of a property schema that admits only strings, which `@xml_args` writes raw:
/// `{"type": "string", ...}` (lengths, pattern, format, enum, const) or an enum/const of strings.
pub(super) fn raw_string_schema(p: &Value) -> Option<serde_json::Map<String, Value>> {
    let o = p.as_object()?;
    let typed = match o.get("type") {
        Some(Value::String(t)) => t == "string",
        Some(Value::Array(a)) => a.len() == 1 && a[0] == "string",
        Some(_) => false,
        None => false,
    };
    let all_str = |v: &Value| match v {
        Value::Array(a) => a.iter().all(Value::is_string),
        v => v.is_string(),
    };
    let enum_strings = ["enum", "const"]
        .iter()
        .filter_map(|k| o.get(*k))
        .all(all_str)
        && (o.contains_key("enum") || o.contains_key("const"));
    if !typed && !enum_strings {
        return None;
    }
    let ok = o.keys().all(|k| {
        Keyword::from_name(k).is_some_and(Keyword::fits_string_schema)
            || crate::schema::is_annotation(k)
    });
    if !ok
        || !["enum", "const"]
            .iter()
            .filter_map(|k| o.get(*k))
            .all(all_str)
    {
        return None;
    }
    Some(o.clone())
}

/// Whether raw values may not hold the key prefix's text (the peers' parsers end a value at
/// the next field).
const RAW_WITHOUT_KEY_PREFIX: bool = true;

/// The texts a raw value may not hold: the value suffix's (without the whitespace around it)
/// and `value_without`'s; in the strict reading also the key prefix's and the text of every
/// special token and marker in either (a marker falls back to its text where the vocabulary
/// lacks the token; a special token's spelling would be read as the token by the text parser).
fn raw_exclusions(x: &XmlArgs) -> Vec<String> {
    let trimmed = |a: &[Affix]| {
        let t = String::from_utf8_lossy(&affix_text(a)).into_owned();
        match t.trim() {
            "" => t.clone(),
            s => s.to_owned(),
        }
    };
    let mut v = vec![trimmed(&x.value_suffix)];
    if x.reading == XmlReading::Strict {
        if RAW_WITHOUT_KEY_PREFIX {
            v.push(trimmed(&x.key_prefix));
        }
        for a in x.value_suffix.iter().chain(&x.key_prefix) {
            if let Affix::Special(s) | Affix::Marker(s) = a {
                v.push(s.clone());
            }
        }
    }
    v.extend(x.value_without.iter().cloned());
    // An empty text would forbid every value.
    v.retain(|s| !s.is_empty());
    v.sort();
    v.dedup();
    v
}

/// The decoded content a raw-string schema `obj` allows: its string keywords' automaton, within
/// its `enum`/`const` strings where it has them.
pub(super) fn raw_string_content(
    c: &mut Compiler,
    obj: &Map<String, Value>,
    path: &str,
) -> Result<Dfa> {
    let states = c.opts.max_lexeme_states;
    let d = c.string_dfa(obj, path)?;
    let Some(lits) = raw_literals(obj) else {
        return Ok(d);
    };
    let l = Dfa::literals(lits.iter().map(|s| s.as_bytes()), states)
        .map_err(|e| c.b.dfa_err(e, path, ""))?;
    d.product(&l, Op::And, states)
        .map_err(|e| c.b.dfa_err(e, path, ""))
}

/// The strings an `enum`/`const` of a raw-string schema `m` allows (the intersection of its
/// lists; members that are not strings never match a raw string), if it has either.
fn raw_literals(m: &Map<String, Value>) -> Option<Vec<String>> {
    let mut acc: Option<Vec<String>> = None;
    for kw in ["enum", "const"] {
        let Some(v) = m.get(kw) else { continue };
        let vals: Vec<String> = match v {
            Value::Array(a) => a
                .iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect(),
            Value::String(s) => vec![s.clone()],
            _ => Vec::new(),
        };
        acc = Some(match acc {
            None => vals,
            Some(a) => a.into_iter().filter(|x| vals.contains(x)).collect(),
        });
    }
    acc
}

/// The strings a property schema admits, as string schemas (`type: string` with `minLength`,
/// `maxLength`, `pattern`, `format`, `enum`/`const` of strings) whose union they are: `None`
/// where it admits no string; an error (why) where its strings depend on something a raw value
/// cannot be checked against (`allOf`, `not`, `if`, a `oneOf` with several string branches,
/// a remote `$ref`, ...). `root`: the parameters schema, for local `$ref`s.
fn string_part(
    p: &Value,
    root: &Value,
    depth: usize,
) -> std::result::Result<Option<Vec<Map<String, Value>>>, String> {
    if depth > 16 {
        return Err("its `$ref`s nest too deeply".into());
    }
    let o = match p {
        Value::Bool(true) => return Ok(Some(vec![Map::new()])),
        Value::Bool(false) => return Ok(None),
        Value::Object(o) => o,
        _ => return Err("it is not a schema".into()),
    };
    if let Some(t) = o.get("type") {
        let strings = match t {
            Value::String(s) => s == "string",
            Value::Array(a) => a.iter().any(|x| x == "string"),
            _ => false,
        };
        if !strings {
            return Ok(None);
        }
    }
    let mut base = Map::new();
    let mut subs: Vec<Vec<Map<String, Value>>> = Vec::new();
    for (k, v) in o {
        match Keyword::from_name(k) {
            Some(Keyword::Type | Keyword::Nullable) => {}
            Some(kw) if kw.role() == Role::String => {
                base.insert(k.clone(), v.clone());
            }
            Some(Keyword::Enum) => {
                let s: Vec<Value> = v
                    .as_array()
                    .map(|a| a.iter().filter(|x| x.is_string()).cloned().collect())
                    .unwrap_or_default();
                if s.is_empty() {
                    return Ok(None);
                }
                base.insert(k.clone(), Value::Array(s));
            }
            Some(Keyword::Const) => {
                if !v.is_string() {
                    return Ok(None);
                }
                base.insert(k.clone(), v.clone());
            }
            Some(Keyword::Ref) => {
                let target = v
                    .as_str()
                    .and_then(|r| r.strip_prefix('#'))
                    .and_then(|ptr| root.pointer(ptr))
                    .ok_or_else(|| format!("its `$ref` {v} is not a local reference"))?;
                match string_part(target, root, depth + 1)? {
                    None => return Ok(None),
                    Some(parts) => subs.push(parts),
                }
            }
            Some(Keyword::AnyOf | Keyword::OneOf) => {
                let mut parts = Vec::new();
                let mut branches = 0;
                for b in v.as_array().map(Vec::as_slice).unwrap_or(&[]) {
                    if let Some(ps) = string_part(b, root, depth + 1)? {
                        branches += 1;
                        parts.extend(ps);
                    }
                }
                if k == "oneOf" && branches > 1 {
                    return Err("several of its `oneOf` branches admit strings".into());
                }
                if branches == 0 {
                    return Ok(None);
                }
                subs.push(parts);
            }
            Some(kw) if kw.never_constrains_strings() => {}
            _ if crate::schema::is_annotation(k) => {}
            _ => {
                return Err(format!(
                    "its strings are constrained through `{k}`, which a raw value cannot be \
                     checked against"
                ))
            }
        }
    }
    let mut out = vec![base];
    if subs.len() > 1 {
        return Err("it combines `$ref`, `anyOf` and `oneOf`".into());
    }
    if let Some(parts) = subs.pop() {
        let base = out.pop().expect("one");
        for mut part in parts {
            for (k, v) in &base {
                match part.get(k) {
                    Some(w) if w != v => {
                        return Err(format!(
                            "its `{k}` stands both beside and inside a subschema"
                        ))
                    }
                    _ => {
                        part.insert(k.clone(), v.clone());
                    }
                }
            }
            out.push(part);
        }
    }
    for m in &mut out {
        m.insert("type".into(), "string".into());
    }
    Ok(Some(out))
}

/// True when `v` is of one of the JSON `types` (an integral number is an `integer`).
fn of_type(v: &Value, types: &[&str]) -> bool {
    match v {
        Value::Null => types.contains(&"null"),
        Value::Bool(_) => types.contains(&"boolean"),
        Value::Number(n) => {
            types.contains(&"number")
                || (types.contains(&"integer")
                    && (n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)))
        }
        Value::String(_) => types.contains(&"string"),
        Value::Array(_) => types.contains(&"array"),
        Value::Object(_) => types.contains(&"object"),
    }
}

/// The JSON types `p` names (its `type`, `nullable`, the types and `const`/`enum` values of
/// its `anyOf`/`oneOf` branches); all of them where some branch names none.
fn named_types(p: &Value) -> Vec<&'static str> {
    fn of_value(v: &Value) -> &'static str {
        match v {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        }
    }
    fn walk(p: &Value, out: &mut Vec<&'static str>, depth: usize) {
        let all = super::ir::JSON_TYPES;
        let Value::Object(o) = p else {
            out.extend(all);
            return;
        };
        let mut named = false;
        match o.get("type") {
            Some(Value::String(t)) => {
                out.extend(all.iter().filter(|x| **x == t));
                named = true;
            }
            Some(Value::Array(a)) => {
                for t in a.iter().filter_map(Value::as_str) {
                    out.extend(all.iter().filter(|x| **x == t));
                }
                named = true;
            }
            _ => {}
        }
        if o.get("nullable") == Some(&Value::Bool(true)) {
            out.push("null");
        }
        if let Some(c) = o.get("const") {
            out.push(of_value(c));
            named = true;
        }
        if let Some(Value::Array(e)) = o.get("enum") {
            out.extend(e.iter().map(of_value));
            named = true;
        }
        for k in ["anyOf", "oneOf"] {
            if let Some(Value::Array(bs)) = o.get(k) {
                for b in bs {
                    if depth < 8 {
                        walk(b, out, depth + 1);
                    } else {
                        out.extend(all);
                    }
                }
                named = true;
            }
        }
        if !named {
            out.extend(all);
        }
    }
    let mut out = Vec::new();
    walk(p, &mut out, 0);
    out.sort_unstable();
    out.dedup();
    out
}

/// `p` restricted to values of the JSON `types` (its `type` intersected, its `enum`/`const`
/// filtered), or `None` where it admits none of them.
fn restrict_types(p: &Value, types: &[&str]) -> Option<Value> {
    let mut o = match p {
        Value::Bool(false) => return None,
        Value::Bool(true) => Map::new(),
        Value::Object(o) => o.clone(),
        // Not a schema: the compiler says so.
        _ => return Some(p.clone()),
    };
    let mut have: Vec<&str> = match o.get("type") {
        None => types.to_vec(),
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        Some(_) => return Some(p.clone()),
    };
    if o.contains_key("type") && o.get("nullable") == Some(&Value::Bool(true)) {
        have.push("null");
    }
    let mut out: Vec<&str> = Vec::new();
    for t in super::ir::JSON_TYPES {
        let admitted = have.contains(&t) || (t == "integer" && have.contains(&"number"));
        let wanted = types.contains(&t) || (t == "integer" && types.contains(&"number"));
        if admitted && wanted {
            out.push(t);
        }
    }
    // `number` admits integers: where both are in, `number` says it.
    if out.contains(&"number") {
        out.retain(|t| *t != "integer");
    }
    if out.is_empty() {
        return None;
    }
    o.remove("nullable");
    o.insert(
        "type".into(),
        match out.as_slice() {
            [one] => Value::from(*one),
            _ => Value::from(out.clone()),
        },
    );
    if let Some(Value::Array(e)) = o.get("enum") {
        let kept: Vec<Value> = e.iter().filter(|v| of_type(v, &out)).cloned().collect();
        if kept.is_empty() {
            return None;
        }
        o.insert("enum".into(), Value::Array(kept));
    }
    if o.get("const").is_some_and(|c| !of_type(c, &out)) {
        return None;
    }
    Some(Value::Object(o))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::CompileOptions;

    /// A raw value's automaton depends on [`CompileOptions::format_annotation`]: compiled with
    /// it and then without it in one process, the second compile must not reuse the first's
    /// automaton (which ignores `format`). Both shared one cache entry before the key held the
    /// option.
    #[test]
    fn raw_value_cache_keeps_format_annotation_apart() {
        let obj = serde_json::json!({"type": "string", "format": "date"});
        let obj = obj.as_object().expect("an object").clone();
        let root = Value::Bool(true);
        let accepts_non_date = |annotation: bool| {
            let opts = CompileOptions::default().format_annotation(annotation);
            let mut c = Compiler::new(&root, &opts);
            let without = ["</callmask-format-test>".to_owned()];
            raw_dfa(&mut c, std::slice::from_ref(&obj), &without, None, "")
                .expect("a raw value's automaton")
                .matches(b"x")
        };
        for _ in 0..2 {
            assert!(accepts_non_date(true), "format as an annotation: any text");
            assert!(!accepts_non_date(false), "format asserted: `x` is no date");
        }
    }
}
