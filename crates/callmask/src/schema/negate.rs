//! `not`, `if`/`then`/`else` and `oneOf` with alternatives that may overlap, by exact
//! rewriting into what the compiler already enforces.
//!
//! - `if`/`then`/`else` becomes `(if ∧ then) ∨ (not if ∧ else)` (a missing branch is `true`;
//!   `then`/`else` without `if` are annotations).
//! - `{rest, "not": N}` is split by JSON type:
//!   - scalars (null, booleans, numbers, strings) are regular languages over their lexemes, closed
//!     under every combinator: the complement of `N` is computed on automata (De Morgan through
//!     `allOf`/`anyOf`/`oneOf`/`not`/`if`/`$ref`, `AndNot` against the type's lexeme universe) and
//!     intersected with the lexemes of `rest`;
//!   - objects and arrays: the complement of `N` is a union of plain JSON Schemas (a required key
//!     missing, a listed property present with a value in the complement of its schema — a nested
//!     `not` —, too few or too many items, a prefix item in the complement of its schema), each
//!     merged with `rest` and compiled as usual.
//! - `oneOf` whose alternatives are not provably disjoint becomes
//!   `anyOf[A_i ∧ not A_j (j ≠ i)]`, capped at [`MAX_ONE_OF`] alternatives.
//!
//! Exactness of the scalar complement: the complement is taken within a *universe* in which every
//! value has exactly one spelling: strings as the encoding's string literals (a decoded string
//! has disjoint spellings from any other, and every automaton over string contents goes through
//! the same quoting), numbers in canonical decimal form (no exponent, no `-0`, no trailing
//! fraction zero, at most 15 significant digits so that distinct spellings are distinct doubles),
//! and the literals. The automata of the negated keywords (the scalar ones [`Keyword::negatable`] marks, `type`,
//! `enum`/`const`) accept the canonical spelling of every value they allow, so the difference is
//! exact. Keywords whose automata are not known to be complete (`format`, which is also an
//! annotation in 2020-12, and any constraining keyword the table in `keywords.rs` does not mark
//! negatable) are refused by name inside `not`.

use super::*;

/// Most alternatives of a `oneOf` that may overlap (each becomes one alternative with the
/// complements of all the others).
pub(super) const MAX_ONE_OF: usize = 8;
/// Most object or array schemas the complement of one schema may expand into.
const MAX_CLAUSES: usize = 64;
/// Most nested `$ref`s, `allOf`s and `not`s followed while building one complement.
const MAX_NEG_DEPTH: usize = 32;

/// Scalar keywords whose automata accept every canonical spelling of the values they allow:
/// the negatable keywords of the scalar roles (see [`Keyword::negatable`]).
fn scalar_exact() -> impl Iterator<Item = Keyword> {
    Keyword::ALL
        .iter()
        .copied()
        .filter(|k| k.role().is_scalar() && k.negatable())
}

const SCALARS: u8 = T_NULL | T_BOOL | T_INT | T_NUM | T_STR;

/// Canonical JSON numbers: no exponent, no `-0`, no trailing zero in the fraction, at most 15
/// significant digits (so distinct spellings are distinct doubles).
fn canonical_number_regex() -> String {
    let mut alts = vec![r"0\.0{0,4}[1-9](?:[0-9]{0,13}[1-9])?".to_string()];
    for i in 1..=15usize {
        let int = format!("[1-9][0-9]{{{}}}", i - 1);
        if i == 15 {
            alts.push(int);
        } else {
            alts.push(format!(r"{int}(?:\.[0-9]{{0,{}}}[1-9])?", 14 - i));
        }
    }
    format!("0|-?(?:{})", alts.join("|"))
}

/// The canonical spelling of a JSON number, as [`canonical_number_regex`] writes it (or a
/// spelling outside it, for values it does not contain).
fn canonical_number(n: &serde_json::Number) -> String {
    if n.is_i64() || n.is_u64() {
        return n.to_string();
    }
    match n.as_f64() {
        Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
        // Rust writes doubles as the shortest decimal that reads back, without exponent.
        Some(f) => format!("{f}"),
        None => n.to_string(),
    }
}

/// A schema with this keyword (`true` unless present).
fn kw_or_true(obj: &Map<String, Value>, k: &str) -> Value {
    obj.get(k).cloned().unwrap_or(Value::Bool(true))
}

/// True when a schema accepts every value (`true`, or only annotations).
fn is_trivial(s: &Value) -> bool {
    match s {
        Value::Bool(b) => *b,
        Value::Object(o) => o.keys().all(|k| is_annotation(k)),
        _ => false,
    }
}

fn not_refused(path: &str, reason: impl Into<String>) -> Error {
    Error::UnsupportedKeyword {
        keyword: "not".into(),
        path: ptr(path),
        reason: reason.into(),
    }
}

fn too_deep() -> Error {
    Error::LimitExceeded {
        what: "nesting of negated schemas",
        limit: MAX_NEG_DEPTH,
        option: "",
        path: String::new(),
    }
}

/// The type bits of a schema's `type` and `nullable` (all types when absent).
fn types_of(obj: &Map<String, Value>, path: &str) -> Result<u8> {
    let mut t = match obj.get("type") {
        Some(t) => type_set(t, path)?,
        None => T_ALL,
    };
    if obj.get("nullable") == Some(&Value::Bool(true)) {
        t |= T_NULL;
    }
    Ok(t)
}

/// `types` as `scalar_dfa` takes them: `number` includes integers.
fn dfa_types(t: u8) -> u8 {
    if t & T_NUM != 0 {
        t & !T_INT
    } else {
        t
    }
}

fn all_of(mut parts: Vec<Value>) -> Value {
    if parts.len() == 1 {
        return parts.pop().unwrap_or(Value::Bool(true));
    }
    serde_json::json!({ "allOf": parts })
}

/// `{"type": kind}`.
fn typed(kind: &str) -> Value {
    serde_json::json!({ "type": kind })
}

impl Compiler<'_> {
    /// `{if, then, else, ...rest}` as `rest ∧ ((if ∧ then) ∨ (not if ∧ else))`; None without `if`.
    pub(super) fn conditional(
        &self,
        obj: &Map<String, Value>,
        path: &str,
    ) -> Result<Option<Value>> {
        let Some(cond) = obj.get("if") else {
            return Ok(None);
        };
        let mut rest = obj.clone();
        for k in ["if", "then", "else"] {
            rest.remove(k);
        }
        let union = serde_json::json!({ "anyOf": [
            all_of(vec![cond.clone(), kw_or_true(obj, "then")]),
            all_of(vec![serde_json::json!({ "not": cond }), kw_or_true(obj, "else")]),
        ]});
        Ok(Some(self.merge_two(
            &Value::Object(rest),
            &union,
            path,
            0,
        )?))
    }

    /// A schema with `if`: compiles its rewriting; a complement of `if` that cannot be built is
    /// refused under the name `if`.
    pub(super) fn compile_conditional(&mut self, rewritten: &Value, path: &str) -> Result<NodeId> {
        self.compile(rewritten, path).map_err(|e| match e {
            Error::UnsupportedKeyword {
                keyword,
                path: p,
                reason,
            } if keyword == "not" => Error::UnsupportedKeyword {
                keyword: "if".into(),
                path: ptr(path),
                reason: format!("the complement of `if` cannot be built ({p}: {reason})"),
            },
            e => e,
        })
    }

    /// A schema with `not` (and no `$ref`, `allOf`, `anyOf`, `oneOf`, `if`, `enum`, `const`,
    /// which the compiler distributes or filters before): `rest ∧ not N`, type by type.
    pub(super) fn compile_not(&mut self, obj: &Map<String, Value>, path: &str) -> Result<NodeId> {
        let exact = if self.enc == Encoding::Gemma {
            Err(Error::UnsupportedKeyword {
                keyword: "not".into(),
                path: ptr(path),
                reason: "negation is built over one-lexeme values, and Gemma's strings are not"
                    .into(),
            })
        } else {
            self.compile_not_exact(obj, path)
        };
        match exact {
            Err(Error::UnsupportedKeyword {
                keyword, reason, ..
            }) if keyword == "not" && self.opts.lenient => {
                self.b.unsupported("not", path, &reason)?;
                let mut rest = obj.clone();
                rest.remove("not");
                self.compile(&Value::Object(rest), path)
            }
            r => r,
        }
    }

    fn compile_not_exact(&mut self, obj: &Map<String, Value>, path: &str) -> Result<NodeId> {
        let n = obj.get("not").cloned().unwrap_or(Value::Bool(false));
        let mut rest = obj.clone();
        rest.remove("not");
        let types = types_of(&rest, path)?;
        let npath = format!("{path}/not");
        let mut alts = Vec::new();
        let st = types & SCALARS;
        if st != 0 {
            let pos = self.scalar_dfa(&typed::Schema::read(&rest), dfa_types(st), path)?;
            let neg = self.neg_scalars(&n, st, &npath, 0)?;
            let d = self.b.and(&pos, &neg, path)?;
            alts.push(self.lexeme(d)?);
        }
        for (bit, kind) in [(T_OBJ, "object"), (T_ARR, "array")] {
            if types & bit == 0 {
                continue;
            }
            let clauses = self.neg_struct(&n, bit, &npath, 0)?;
            for c in clauses {
                let Some(c) = fit_clause(&rest, c) else {
                    continue;
                };
                if rest.get("items").is_some_and(Value::is_array) && c.get("prefixItems").is_some()
                {
                    return Err(not_refused(
                        path,
                        "the complement of prefix items cannot be merged with draft-07 tuple `items`",
                    ));
                }
                let merged =
                    self.merge_all(&[Value::Object(rest.clone()), typed(kind), c], path)?;
                alts.push(self.compile(&merged, &npath)?);
            }
        }
        match alts.len() {
            0 => self.b.push(Node::Never),
            1 => Ok(alts[0]),
            _ => self.b.push(Node::Union(alts)),
        }
    }

    /// Every scalar value of the types in `st`, one spelling each (see the module doc).
    fn universe(&mut self, st: u8, path: &str) -> Result<Dfa> {
        self.cached(Lexeme::NegUniverse(st), |this| {
            let mut parts = Vec::new();
            if st & T_NULL != 0 {
                parts.push(this.b.regex(this.literal("null"), path)?);
            }
            if st & T_BOOL != 0 {
                let re = format!("{}|{}", this.literal("true"), this.literal("false"));
                parts.push(this.b.regex(&re, path)?);
            }
            if st & (T_INT | T_NUM) != 0 {
                parts.push(this.b.regex(&canonical_number_regex(), path)?);
            }
            if st & T_STR != 0 {
                let any = this.b.regex("(?s:.)*", path)?;
                parts.push(this.quote(&any, path)?);
            }
            let mut acc = empty_dfa();
            for p in parts {
                acc = this.dfa_op(&acc, &p, Op::Or, path)?;
            }
            Ok(acc)
        })
        .map(|d| (*d).clone())
    }

    fn dfa_op(&self, a: &Dfa, b: &Dfa, op: Op, path: &str) -> Result<Dfa> {
        a.product(b, op, self.opts.max_lexeme_states)
            .map_err(|e| self.b.dfa_err(e, path, ""))
    }

    /// The values of `schema` among the scalars of `st` (within the universe).
    fn pos_scalars(&mut self, schema: &Value, st: u8, path: &str, depth: usize) -> Result<Dfa> {
        let u = self.universe(st, path)?;
        let neg = self.neg_scalars(schema, st, path, depth)?;
        self.dfa_op(&u, &neg, Op::AndNot, path)
    }

    /// The scalar values of the types in `st` that `schema` rejects (within the universe).
    fn neg_scalars(&mut self, schema: &Value, st: u8, path: &str, depth: usize) -> Result<Dfa> {
        if depth > MAX_NEG_DEPTH {
            return Err(too_deep());
        }
        self.b.check_budget()?;
        let o = match schema {
            Value::Bool(true) => return Ok(empty_dfa()),
            Value::Bool(false) => return self.universe(st, path),
            Value::Object(o) => o,
            _ => return Err(invalid(path, "a schema must be an object or a boolean")),
        };
        if let Some(r) = self.conditional(o, path)? {
            return self.neg_scalars(&r, st, path, depth + 1);
        }
        check_negatable(o, path, self.opts.format_annotation)?;
        let u = self.universe(st, path)?;
        // The complement of a conjunction: the union of the complements of its parts.
        let mut acc = empty_dfa();
        if let Some(target) = self.ref_target(o, path)? {
            let d = self.neg_scalars(&target, st, path, depth + 1)?;
            acc = self.dfa_op(&acc, &d, Op::Or, path)?;
        }
        for p in list(o, "allOf", path)? {
            let d = self.neg_scalars(p, st, path, depth + 1)?;
            acc = self.dfa_op(&acc, &d, Op::Or, path)?;
        }
        if o.contains_key("anyOf") {
            let mut all = u.clone();
            for p in list(o, "anyOf", path)? {
                let d = self.neg_scalars(p, st, path, depth + 1)?;
                all = self.dfa_op(&all, &d, Op::And, path)?;
            }
            acc = self.dfa_op(&acc, &all, Op::Or, path)?;
        }
        if o.contains_key("oneOf") {
            // None holds, or two hold.
            let alts = list(o, "oneOf", path)?;
            let mut none = u.clone();
            let mut pos = Vec::new();
            for p in &alts {
                let d = self.neg_scalars(p, st, path, depth + 1)?;
                pos.push(self.dfa_op(&u, &d, Op::AndNot, path)?);
                none = self.dfa_op(&none, &d, Op::And, path)?;
            }
            acc = self.dfa_op(&acc, &none, Op::Or, path)?;
            for i in 0..pos.len() {
                for j in i + 1..pos.len() {
                    let both = self.dfa_op(&pos[i], &pos[j], Op::And, path)?;
                    acc = self.dfa_op(&acc, &both, Op::Or, path)?;
                }
            }
        }
        if let Some(m) = o.get("not") {
            let d = self.pos_scalars(m, st, path, depth + 1)?;
            acc = self.dfa_op(&acc, &d, Op::Or, path)?;
        }
        for k in ["const", "enum"] {
            if let Some(v) = o.get(k) {
                let values = enum_values(k, v);
                if k == "enum" && !v.is_array() {
                    return Err(invalid(path, "enum must be an array"));
                }
                let lits = self.scalar_literals(&values, path)?;
                let d = self.dfa_op(&u, &lits, Op::AndNot, path)?;
                acc = self.dfa_op(&acc, &d, Op::Or, path)?;
            }
        }
        // The plain part: types and scalar keywords.
        let t = types_of(o, path)? & st;
        let pos = if t == 0 {
            empty_dfa()
        } else {
            let mut plain = Map::new();
            for k in scalar_exact() {
                if let Some(v) = o.get(k.name()) {
                    plain.insert(k.name().into(), v.clone());
                }
            }
            let d = self.scalar_dfa(&typed::Schema::read(&plain), dfa_types(t), path)?;
            self.dfa_op(&d, &u, Op::And, path)?
        };
        let d = self.dfa_op(&u, &pos, Op::AndNot, path)?;
        self.dfa_op(&acc, &d, Op::Or, path)
    }

    /// The canonical spellings of the scalar values among `values`, as one automaton.
    fn scalar_literals(&mut self, values: &[Value], path: &str) -> Result<Dfa> {
        let max = self.opts.max_lexeme_states;
        let mut strings: Vec<Vec<u8>> = Vec::new();
        let mut others: Vec<Vec<u8>> = Vec::new();
        for v in values {
            match v {
                Value::String(s) => strings.push(s.as_bytes().to_vec()),
                Value::Number(n) => others.push(canonical_number(n).into_bytes()),
                Value::Bool(_) | Value::Null => others.extend(self.literal_bytes(v)),
                _ => {}
            }
        }
        let s = Dfa::literals(strings.iter().map(Vec::as_slice), max)
            .map_err(|e| self.b.dfa_err(e, path, ""))?;
        let s = if strings.is_empty() {
            s
        } else {
            self.quote(&s, path)?
        };
        let o = Dfa::literals(others.iter().map(Vec::as_slice), max)
            .map_err(|e| self.b.dfa_err(e, path, ""))?;
        self.dfa_op(&s, &o, Op::Or, path)
    }

    /// The target of a schema's `$ref`, if it has one.
    fn ref_target(&self, o: &Map<String, Value>, path: &str) -> Result<Option<Value>> {
        let Some(r) = o.get("$ref") else {
            return Ok(None);
        };
        let r = r
            .as_str()
            .ok_or_else(|| invalid(path, "$ref must be a string"))?;
        Ok(Some(self.ref_target_of(r, path)?.1.clone()))
    }

    /// The objects (`kind` = [`T_OBJ`]) or arrays ([`T_ARR`]) that `schema` rejects, as a union
    /// of schemas (each typed `kind`; negations only inside their properties or items).
    fn neg_struct(&self, schema: &Value, kind: u8, path: &str, depth: usize) -> Result<Vec<Value>> {
        if depth > MAX_NEG_DEPTH {
            return Err(too_deep());
        }
        self.b.check_budget()?;
        let name = if kind == T_OBJ { "object" } else { "array" };
        let o = match schema {
            Value::Bool(true) => return Ok(Vec::new()),
            Value::Bool(false) => return Ok(vec![typed(name)]),
            Value::Object(o) => o,
            _ => return Err(invalid(path, "a schema must be an object or a boolean")),
        };
        if let Some(r) = self.conditional(o, path)? {
            return self.neg_struct(&r, kind, path, depth + 1);
        }
        check_negatable(o, path, self.opts.format_annotation)?;
        if types_of(o, path)? & kind == 0 {
            return Ok(vec![typed(name)]);
        }
        let mut out: Vec<Value> = Vec::new();
        let add = |out: &mut Vec<Value>, more: Vec<Value>| -> Result<()> {
            out.extend(more);
            if out.len() > MAX_CLAUSES {
                return Err(not_refused(
                    path,
                    format!("its complement has more than {MAX_CLAUSES} object or array cases"),
                ));
            }
            Ok(())
        };
        if let Some(target) = self.ref_target(o, path)? {
            let c = self.neg_struct(&target, kind, path, depth + 1)?;
            add(&mut out, c)?;
        }
        for p in list(o, "allOf", path)? {
            let c = self.neg_struct(p, kind, path, depth + 1)?;
            add(&mut out, c)?;
        }
        if o.contains_key("anyOf") {
            let c = self.neg_all(&list(o, "anyOf", path)?, kind, path, depth)?;
            add(&mut out, c)?;
        }
        if o.contains_key("oneOf") {
            let alts = list(o, "oneOf", path)?;
            let c = self.neg_all(&alts, kind, path, depth)?;
            add(&mut out, c)?;
            for i in 0..alts.len() {
                for j in i + 1..alts.len() {
                    let both = all_of(vec![alts[i].clone(), alts[j].clone(), typed(name)]);
                    add(&mut out, vec![both])?;
                }
            }
        }
        if let Some(m) = o.get("not") {
            add(&mut out, vec![all_of(vec![m.clone(), typed(name)])])?;
        }
        for k in ["const", "enum"] {
            if let Some(v) = o.get(k) {
                let has = enum_values(k, v)
                    .iter()
                    .any(|x| (kind == T_OBJ && x.is_object()) || (kind == T_ARR && x.is_array()));
                if has {
                    return Err(not_refused(
                        path,
                        format!("the complement of `{k}` with {name} values is not supported"),
                    ));
                }
                add(&mut out, vec![typed(name)])?;
            }
        }
        let plain = if kind == T_OBJ {
            neg_object_keywords(o, path)?
        } else {
            neg_array_keywords(o, path)?
        };
        add(&mut out, plain)?;
        Ok(out)
    }

    /// The values rejected by every schema of `alts` (the complement of their `anyOf`): the
    /// product of their complements.
    fn neg_all(&self, alts: &[&Value], kind: u8, path: &str, depth: usize) -> Result<Vec<Value>> {
        let mut acc: Vec<Vec<Value>> = vec![Vec::new()];
        for a in alts {
            let c = self.neg_struct(a, kind, path, depth + 1)?;
            let mut next = Vec::new();
            for x in &acc {
                for y in &c {
                    let mut v = x.clone();
                    v.push(y.clone());
                    next.push(v);
                }
            }
            if next.len() > MAX_CLAUSES {
                return Err(not_refused(
                    path,
                    format!("the complement of its alternatives has more than {MAX_CLAUSES} cases"),
                ));
            }
            acc = next;
        }
        Ok(acc.into_iter().map(all_of).collect())
    }

    /// `oneOf`: a union when its alternatives are provably disjoint; otherwise
    /// `anyOf[A_i ∧ not A_j (j ≠ i)]` (at most [`MAX_ONE_OF`] alternatives).
    pub(super) fn compile_one_of(
        &mut self,
        ids: Vec<NodeId>,
        alts: &[Value],
        path: &str,
    ) -> Result<NodeId> {
        if self.provably_disjoint(&ids) {
            return self.union(ids, false, path);
        }
        if alts.len() > MAX_ONE_OF {
            self.b.unsupported(
                "oneOf",
                path,
                &format!(
                    "more than {MAX_ONE_OF} alternatives that may overlap (only provably disjoint ones are supported beyond)"
                ),
            )?;
            return self.union(ids, false, path);
        }
        let mut out = Vec::new();
        for (i, a) in alts.iter().enumerate() {
            let mut parts = vec![a.clone()];
            for (j, b) in alts.iter().enumerate() {
                if j != i {
                    parts.push(serde_json::json!({ "not": b }));
                }
            }
            let p = format!("{path}/oneOf/{i}");
            let r = self
                .merge_all(&parts, &p)
                .and_then(|m| self.compile(&m, &p));
            out.push(r.map_err(|e| match e {
                Error::UnsupportedKeyword {
                    keyword,
                    path: q,
                    reason,
                } if keyword == "not" => Error::UnsupportedKeyword {
                    keyword: "oneOf".into(),
                    path: ptr(path),
                    reason: format!(
                        "alternatives that may overlap, whose complements cannot be built ({q}: {reason})"
                    ),
                },
                e => e,
            })?);
        }
        self.union(out, false, path)
    }

    /// True when no two of the nodes can match one value (conservative).
    fn provably_disjoint(&self, ids: &[NodeId]) -> bool {
        let mut firsts = Vec::new();
        for &id in ids {
            match self.first_bytes(id, 0) {
                Some(f) => firsts.push(f),
                None => return false,
            }
        }
        for i in 0..ids.len() {
            for j in i + 1..ids.len() {
                let overlap = (0..4).any(|w| firsts[i][w] & firsts[j][w] != 0);
                if overlap && !self.disjoint(ids[i], ids[j], 0) {
                    return false;
                }
            }
        }
        true
    }
}

fn empty_dfa() -> Dfa {
    Dfa::literals(std::iter::empty(), 10).unwrap_or_else(|_| unreachable!("empty automaton"))
}

/// The schemas of a combinator keyword.
fn list<'v>(o: &'v Map<String, Value>, k: &str, path: &str) -> Result<Vec<&'v Value>> {
    match o.get(k) {
        None => Ok(Vec::new()),
        Some(Value::Array(a)) if !a.is_empty() || k == "allOf" => Ok(a.iter().collect()),
        Some(_) => Err(invalid(path, format!("{k} must be a non-empty array"))),
    }
}

/// Refuses, by name, a keyword whose complement is not built exactly.
fn check_negatable(o: &Map<String, Value>, path: &str, format_annotation: bool) -> Result<()> {
    for k in o.keys() {
        let k = k.as_str();
        if k == "format" && !format_annotation {
            return Err(not_refused(
                path,
                "the complement of `format` is not exact (formats are approximated, and are annotations in draft 2020-12)",
            ));
        }
        if k == "pattern" {
            let list: Vec<&str> = match &o[k] {
                Value::String(p) => vec![p.as_str()],
                Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            };
            if let Some(p) = list.into_iter().find(|p| !pattern_negatable(p)) {
                return Err(not_refused(
                    path,
                    format!(
                        "the complement of pattern {p:?} is not exact (its class escapes differ between ECMA-262 and the automaton)"
                    ),
                ));
            }
        }
        if Keyword::from_name(k).is_some_and(Keyword::negatable) || is_annotation(k) {
            continue;
        }
        return Err(not_refused(
            path,
            format!("the complement of `{k}` is not supported"),
        ));
    }
    Ok(())
}

/// True when a pattern's translation accepts exactly what ECMA-262 accepts (rather than a subset
/// or superset): its escapes are ASCII classes, anchors or literal characters.
pub(super) fn pattern_negatable(p: &str) -> bool {
    let mut in_class = false;
    let mut chars = p.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('d' | 'w' | 'b' | 'B' | 'n' | 'r' | 't' | 'f' | 'v' | 'x' | 'u') => {}
                Some('D' | 'W') if !in_class => {}
                Some(n) if !n.is_ascii_alphanumeric() => {}
                _ => return false,
            },
            '[' => in_class = true,
            ']' => in_class = false,
            _ => {}
        }
    }
    true
}

/// The objects that fail the object keywords of `o` (`o` allows objects).
fn neg_object_keywords(o: &Map<String, Value>, path: &str) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    if let Some(ap) = o.get("additionalProperties") {
        if !is_trivial(ap) {
            return Err(not_refused(
                path,
                "the complement of `additionalProperties` (a key outside `properties`) is not supported",
            ));
        }
    }
    let mut required: Vec<&str> = Vec::new();
    match o.get("required") {
        None => {}
        Some(Value::Array(r)) => {
            for k in r {
                required.push(
                    k.as_str()
                        .ok_or_else(|| invalid(path, "required must list strings"))?,
                );
            }
        }
        Some(_) => return Err(invalid(path, "required must be an array")),
    }
    for k in required {
        out.push(serde_json::json!({ "type": "object", "properties": { k: false } }));
    }
    match o.get("properties") {
        None => {}
        Some(Value::Object(p)) => {
            for (k, s) in p {
                if is_trivial(s) {
                    continue;
                }
                out.push(serde_json::json!({
                    "type": "object",
                    "required": [k],
                    "properties": { k: { "not": s } },
                }));
            }
        }
        Some(_) => return Err(invalid(path, "properties must be an object")),
    }
    Ok(out)
}

/// The arrays that fail the array keywords of `o` (`o` allows arrays).
fn neg_array_keywords(o: &Map<String, Value>, path: &str) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    if let Some(m) = get_count(o, "minItems", path)? {
        if m > 0 {
            out.push(serde_json::json!({ "type": "array", "maxItems": m - 1 }));
        }
    }
    if let Some(m) = get_count(o, "maxItems", path)? {
        out.push(serde_json::json!({ "type": "array", "minItems": m.saturating_add(1) }));
    }
    let (prefix, tail): (Vec<Value>, Option<&Value>) = match (o.get("prefixItems"), o.get("items"))
    {
        (Some(Value::Array(p)), items) => (p.clone(), items),
        (Some(_), _) => return Err(invalid(path, "prefixItems must be an array")),
        (None, Some(Value::Array(p))) => (p.clone(), o.get("additionalItems")),
        (None, items) => (Vec::new(), items),
    };
    if o.contains_key("prefixItems") && o.get("items").is_some_and(Value::is_array) {
        return Err(not_refused(
            path,
            "`prefixItems` next to draft-07 tuple `items` is not supported",
        ));
    }
    for (i, s) in prefix.iter().enumerate() {
        if is_trivial(s) {
            continue;
        }
        let mut items = vec![Value::Bool(true); i];
        items.push(serde_json::json!({ "not": s }));
        out.push(serde_json::json!({ "type": "array", "minItems": i + 1, "prefixItems": items }));
    }
    match tail {
        None => {}
        Some(t) if is_trivial(t) => {}
        Some(Value::Bool(false)) => {
            out.push(serde_json::json!({ "type": "array", "minItems": prefix.len() + 1 }));
        }
        Some(_) => {
            return Err(not_refused(
                path,
                "the complement of `items` (some item outside its schema) is not supported",
            ))
        }
    }
    Ok(out)
}

/// A complement case made to fit next to `rest` where `rest` forbids keys outside its
/// `properties`: a key it already forbids needs no `false` schema, and a case that requires
/// such a key is impossible (None).
fn fit_clause(rest: &Map<String, Value>, clause: Value) -> Option<Value> {
    if rest.get("additionalProperties") != Some(&Value::Bool(false)) {
        return Some(clause);
    }
    let listed = |k: &str| {
        rest.get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| p.contains_key(k))
    };
    let Value::Object(mut c) = clause else {
        return Some(clause);
    };
    if let Some(Value::Array(req)) = c.get("required") {
        if req.iter().any(|k| k.as_str().is_some_and(|k| !listed(k))) {
            return None;
        }
    }
    if let Some(Value::Object(p)) = c.get_mut("properties") {
        p.retain(|k, v| listed(k) || v != &Value::Bool(false));
        if p.is_empty() {
            c.remove("properties");
        }
    }
    Some(Value::Object(c))
}
