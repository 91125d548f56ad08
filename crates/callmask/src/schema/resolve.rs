//! Reference resolution, done once before compiling: base URIs (`$id`, RFC 3986 resolution with
//! `fluent-uri`), `$anchor`s, draft-7 `$id: "#foo"` anchors, embedded resources named by their
//! absolute URI, remote documents from the caller's [`SchemaRegistry`], and
//! `$dynamicRef`/`$dynamicAnchor` — all rewritten into plain `$ref`s that are JSON pointers into
//! one self-contained document, which the rest of the compiler reads as before.
//!
//! How:
//! 1. *Index* every document (the root, and each registry document when a `$ref` first names
//!    it): its resources (`$id`s, resolved against the enclosing base), anchors and dynamic
//!    anchors. Only schema positions are searched (a `$id` inside an `enum` is data).
//! 2. *Rewrite*: the root document is copied in place; every `$ref`/`$dynamicRef` is resolved
//!    against the base URI where it stands. A target in the root document that the in-place
//!    copy already holds under the same dynamic scope is named by its own pointer; any other
//!    target (a registry document, a location reached under another dynamic scope, a location
//!    the in-place walk does not visit) is copied into an array under a root key the user's
//!    document does not hold ([`copies_key`]: [`COPIES`], or it with the first free `-N`
//!    suffix, so no user key is ever taken or refused), once per (target, dynamic scope), and
//!    named by the copy's pointer. Cycles end at the memo.
//!
//! The dynamic scope is static here: compilation starts at the root, and the scope of a location
//! is the list of resources entered to reach it (by nesting or by `$ref`). What matters of it
//! for a `$dynamicRef` is, per dynamic anchor name, the *outermost* resource that defines it: the
//! [`Bindings`]. A `$dynamicRef` whose initial target carries a `$dynamicAnchor` of the
//! fragment's name resolves to the binding of that name (or stays, when none is bound); any
//! other `$dynamicRef` is a `$ref` (2020-12's bookending rule).
//!
//! Drafts: a document whose `$schema` names draft 4, 6 or 7 follows the old rules (`$ref`
//! overrides its siblings, a `$id` beside `$ref` is ignored, no `$anchor`); any other follows
//! 2020-12 (siblings apply alongside, `$anchor`, `$dynamicAnchor`). A registry document without
//! `$schema` follows the root's draft.
//!
//! Bounds: at most [`MAX_DOCUMENTS`] registry documents, [`MAX_COPIES`] copies, and the copies'
//! JSON values count against [`CompileOptions::max_schema_values`]; every walk is iterative, so
//! a deep `$id` chain cannot overflow the stack. Past a bound: [`Error::LimitExceeded`].

use super::*;
use fluent_uri::{Uri, UriRef};
use std::collections::BTreeMap;
use std::rc::Rc;

/// The first choice of root key under which the rewritten document keeps its copies of `$ref`
/// targets (see [`copies_key`]).
pub(crate) const COPIES: &str = "$callmask-refs";

/// The `n`-th candidate copies key: [`COPIES`], `$callmask-refs-1`, `$callmask-refs-2`, ...
fn copies_candidate(n: usize) -> String {
    if n == 0 {
        COPIES.to_string()
    } else {
        format!("{COPIES}-{n}")
    }
}

/// The key a rewritten document keeps its copies under: the last candidate present in `root`.
/// [`resolve_refs`] takes the first candidate the user's document lacks and always inserts it,
/// so in a rewritten document this is that key; in a document without references (not
/// rewritten) it is a user key or none, which nothing references.
pub(crate) fn copies_key(root: &Value) -> Option<String> {
    let o = root.as_object()?;
    let mut last = None;
    for n in 0.. {
        let k = copies_candidate(n);
        if !o.contains_key(&k) {
            return last;
        }
        last = Some(k);
    }
    last
}

/// Most registry documents one compile loads.
pub(crate) const MAX_DOCUMENTS: usize = 256;

/// Most copies of `$ref` targets (remote documents, other dynamic scopes) in one document.
pub(crate) const MAX_COPIES: usize = 4096;

/// The base URI of a root document without `$id`.
const DEFAULT_BASE: &str = "json-schema:///";

/// A location: (document, JSON pointer). Document 0 is the root.
type Loc = (usize, String);

/// Per dynamic anchor name, where the outermost resource of the dynamic scope that defines it
/// defines it.
type Bindings = BTreeMap<String, Loc>;

/// The subschemas of a schema object, as (pointer suffix, value), in a stable order: the values
/// of the keywords whose [`Kind`](super::keywords::Kind) holds subschemas. With
/// `legacy_ref` (a draft-7 object with `$ref`), only the definitions: the rest is ignored.
fn children(o: &Map<String, Value>, legacy_ref: bool) -> Vec<(String, &Value)> {
    let mut out = Vec::new();
    for (k, v) in o {
        let k = k.as_str();
        if legacy_ref && k != "$defs" && k != "definitions" {
            continue;
        }
        let Some(kind) = Keyword::from_name(k).map(Keyword::kind) else {
            continue;
        };
        if kind.one_schema() && (v.is_object() || v.is_boolean()) {
            out.push((format!("/{}", escape_ptr(k)), v));
        }
        if kind.schema_list() {
            if let Value::Array(a) = v {
                for (i, x) in a.iter().enumerate() {
                    out.push((format!("/{}/{i}", escape_ptr(k)), x));
                }
            }
        }
        if kind.schema_map() {
            if let Value::Object(m) = v {
                for (name, x) in m {
                    if x.is_object() || x.is_boolean() {
                        out.push((format!("/{}/{}", escape_ptr(k), escape_ptr(name)), x));
                    }
                }
            }
        }
    }
    out
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Draft {
    /// Drafts 4 to 7.
    Legacy,
    /// 2019-09 and 2020-12 (and a document that does not say).
    Modern,
}

fn draft_of(doc: &Value, default: Draft) -> Draft {
    match doc.get("$schema").and_then(Value::as_str) {
        Some(s)
            if ["draft-04", "draft-06", "draft-07"]
                .iter()
                .any(|d| s.contains(d)) =>
        {
            Draft::Legacy
        }
        Some(_) => Draft::Modern,
        None => default,
    }
}

/// True when `v` holds a key `$ref` or `$dynamicRef` anywhere (the only documents that need
/// rewriting).
fn has_refs(v: &Value) -> bool {
    let mut todo = vec![v];
    while let Some(v) = todo.pop() {
        match v {
            Value::Object(o) => {
                if o.contains_key("$ref") || o.contains_key("$dynamicRef") {
                    return true;
                }
                todo.extend(o.values());
            }
            Value::Array(a) => todo.extend(a.iter()),
            _ => {}
        }
    }
    false
}

/// A subschema to walk: its pointer in the unit, its pointer in the source, its value, its base
/// URI and its dynamic scope.
type WalkItem<'v> = (String, String, &'v Value, Rc<str>, Rc<Bindings>);

/// A resource: its base URI and the dynamic anchors it defines.
struct Resource {
    uri: String,
    dynamic: Vec<(String, Loc)>,
}

/// A `$ref` or `$dynamicRef` to fill in: where it stands in the output, and how to resolve it.
struct Pending {
    /// The unit (0: in place; k: copy k-1) and the object's pointer in it.
    unit: usize,
    at: String,
    /// Where it stands in its source document (for errors).
    src: Loc,
    reference: String,
    base: Rc<str>,
    scope: Rc<Bindings>,
    dynamic: bool,
}

/// The resolver's state for one root document.
pub(crate) struct Resolver<'r> {
    opts: &'r CompileOptions,
    /// The root key the copies go under (the first candidate the user's root lacks).
    key: String,
    root: &'r Value,
    /// Registry documents loaded, with their draft (document k is `remote[k - 1]`).
    remote: Vec<(Arc<Value>, Draft, String)>,
    root_draft: Draft,
    /// Absolute URI (no fragment) → resource root.
    resources: HashMap<String, Loc>,
    /// Resource roots.
    roots: HashMap<Loc, Resource>,
    /// (resource URI, name) → location, for `$anchor`, `$dynamicAnchor` and draft-7 `$id: "#a"`.
    anchors: HashMap<(String, String), Loc>,
    /// (resource URI, name) → location, for `$dynamicAnchor` only.
    dynamic: HashMap<(String, String), Loc>,
    /// JSON values in the loaded registry documents and the copies.
    values: usize,
    /// Output units: 0 is the root document in place, k is copy k - 1.
    units: Vec<Value>,
    /// The scope each in-place location was rewritten under.
    inplace: HashMap<String, Rc<Bindings>>,
    /// (target, scope) → copy number.
    copies: HashMap<(Loc, Bindings), usize>,
    pending: Vec<Pending>,
}

/// The document with every `$ref`/`$dynamicRef` rewritten into a JSON pointer into itself
/// (see the module doc), or `None` when it has no references (nothing to rewrite).
pub(crate) fn resolve_refs(root: &Value, opts: &CompileOptions) -> Result<Option<Value>> {
    if !has_refs(root) {
        return Ok(None);
    }
    let Value::Object(o) = root else {
        return Ok(None);
    };
    let key = (0..)
        .map(copies_candidate)
        .find(|k| !o.contains_key(k))
        .unwrap_or_else(|| COPIES.to_string());
    let mut r = Resolver {
        opts,
        key,
        root,
        remote: Vec::new(),
        root_draft: draft_of(root, Draft::Modern),
        resources: HashMap::new(),
        roots: HashMap::new(),
        anchors: HashMap::new(),
        dynamic: HashMap::new(),
        values: 0,
        units: Vec::new(),
        inplace: HashMap::new(),
        copies: HashMap::new(),
        pending: Vec::new(),
    };
    r.index(0, DEFAULT_BASE)?;
    r.units.push(root.clone());
    let scope = r.enter(&Bindings::new(), &(0, String::new()));
    r.walk(0, (0, String::new()), Rc::new(scope))?;
    while let Some(p) = r.pending.pop() {
        r.fill(p)?;
    }
    let mut units = std::mem::take(&mut r.units).into_iter();
    let mut out = units.next().unwrap_or(Value::Null);
    let copies: Vec<Value> = units.collect();
    if let Value::Object(o) = &mut out {
        o.insert(r.key, Value::Array(copies));
    }
    Ok(Some(out))
}

/// The pointer `p` as a `$ref` fragment (`%` escaped, as `ref_pointer` decodes it).
fn as_ref(p: &str) -> String {
    format!("#{}", p.replace('%', "%25"))
}

/// Percent-decodes a URI fragment.
fn pct_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let h = b.get(i + 1..i + 3)?;
            let h = std::str::from_utf8(h).ok()?;
            out.push(u8::from_str_radix(h, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// `reference` resolved against `base` (RFC 3986) and normalized, without its fragment; and
/// the fragment as written.
fn resolve_uri(reference: &str, base: &str) -> Option<(String, Option<String>)> {
    let (pre, frag) = match reference.split_once('#') {
        Some((pre, frag)) => (pre, Some(frag.to_string())),
        None => (reference, None),
    };
    let r = UriRef::parse(pre).ok()?;
    let b = Uri::parse(base).ok()?;
    let abs = r.resolve_against(&b).ok()?.normalize();
    Some((abs.strip_fragment().as_str().to_string(), frag))
}

impl Resolver<'_> {
    fn doc(&self, d: usize) -> &Value {
        if d == 0 {
            self.root
        } else {
            &self.remote[d - 1].0
        }
    }

    fn draft(&self, d: usize) -> Draft {
        if d == 0 {
            self.root_draft
        } else {
            self.remote[d - 1].1
        }
    }

    /// A location as errors show it.
    fn show(&self, l: &Loc) -> String {
        if l.0 == 0 {
            ptr(&l.1)
        } else {
            format!("{}#{}", self.remote[l.0 - 1].2, l.1)
        }
    }

    fn unresolved(&self, reference: &str, at: &Loc) -> Error {
        Error::UnresolvedRef {
            reference: reference.into(),
            path: self.show(at),
        }
    }

    /// Indexes document `d`, whose retrieval URI is `base`.
    fn index(&mut self, d: usize, base: &str) -> Result<()> {
        let draft = self.draft(d);
        let arc;
        let doc: &Value = if d == 0 {
            self.root
        } else {
            arc = self.remote[d - 1].0.clone();
            &arc
        };
        self.resources
            .entry(base.to_string())
            .or_insert((d, String::new()));
        // (pointer, value, base URI, resource root)
        let mut todo: Vec<(String, &Value, Rc<str>, Loc)> =
            vec![(String::new(), doc, Rc::from(base), (d, String::new()))];
        while let Some((p, v, mut base, mut res)) = todo.pop() {
            let Value::Object(o) = v else {
                if p.is_empty() {
                    self.roots.entry(res).or_insert(Resource {
                        uri: base.to_string(),
                        dynamic: Vec::new(),
                    });
                }
                continue;
            };
            let legacy_ref = draft == Draft::Legacy && o.contains_key("$ref");
            let id = o.get("$id").and_then(Value::as_str).filter(|_| !legacy_ref);
            if let Some(id) = id {
                let (uri, frag) = resolve_uri(id, &base)
                    .ok_or_else(|| invalid(&p, format!("invalid $id {id:?}")))?;
                if uri != *base {
                    base = Rc::from(uri.as_str());
                    res = (d, p.clone());
                    self.resources.entry(uri.clone()).or_insert(res.clone());
                }
                if let Some(f) = frag.filter(|f| !f.is_empty() && !f.starts_with('/')) {
                    let name = pct_decode(&f).unwrap_or(f);
                    self.anchors.entry((uri, name)).or_insert((d, p.clone()));
                }
            }
            if res.1 == p {
                self.roots.entry(res.clone()).or_insert(Resource {
                    uri: base.to_string(),
                    dynamic: Vec::new(),
                });
            }
            if draft == Draft::Modern {
                if let Some(a) = o.get("$anchor").and_then(Value::as_str) {
                    self.anchors
                        .entry((base.to_string(), a.to_string()))
                        .or_insert((d, p.clone()));
                }
                if let Some(a) = o.get("$dynamicAnchor").and_then(Value::as_str) {
                    let key = (base.to_string(), a.to_string());
                    self.anchors.entry(key.clone()).or_insert((d, p.clone()));
                    if let std::collections::hash_map::Entry::Vacant(e) = self.dynamic.entry(key) {
                        e.insert((d, p.clone()));
                        if let Some(r) = self.roots.get_mut(&res) {
                            r.dynamic.push((a.to_string(), (d, p.clone())));
                        }
                    }
                }
            }
            for (suffix, c) in children(o, legacy_ref).into_iter().rev() {
                todo.push((format!("{p}{suffix}"), c, base.clone(), res.clone()));
            }
        }
        Ok(())
    }

    /// The resource root enclosing `l` (the nearest ancestor-or-self that is one).
    fn resource_of(&self, l: &Loc) -> Loc {
        let mut p = l.1.as_str();
        loop {
            let k = (l.0, p.to_string());
            if self.roots.contains_key(&k) {
                return k;
            }
            match p.rfind('/') {
                Some(i) => p = &p[..i],
                None => return (l.0, String::new()),
            }
        }
    }

    /// `scope` after entering the resource of `l`.
    fn enter(&self, scope: &Bindings, l: &Loc) -> Bindings {
        let mut s = scope.clone();
        if let Some(r) = self.roots.get(&self.resource_of(l)) {
            for (name, at) in &r.dynamic {
                s.entry(name.clone()).or_insert_with(|| at.clone());
            }
        }
        s
    }

    /// The base URI at `l` (its resource's).
    fn base_of(&self, l: &Loc) -> Rc<str> {
        let r = self.resource_of(l);
        match self.roots.get(&r) {
            Some(res) => Rc::from(res.uri.as_str()),
            None if r.0 == 0 => Rc::from(DEFAULT_BASE),
            None => Rc::from(self.remote[r.0 - 1].2.as_str()),
        }
    }

    /// Walks unit `unit` (the source at `src`), under `scope` (the resource of `src` entered),
    /// queueing its references and cleaning its objects.
    fn walk(&mut self, unit: usize, src: Loc, scope: Rc<Bindings>) -> Result<()> {
        let d = src.0;
        let draft = self.draft(d);
        let doc = if d == 0 {
            None
        } else {
            Some(self.remote[d - 1].0.clone())
        };
        let doc: &Value = match &doc {
            Some(a) => a,
            None => self.root,
        };
        let Some(start) = doc.pointer(&src.1) else {
            return Err(self.unresolved(&as_ref(&src.1), &src));
        };
        let base = self.base_of(&src);
        let mut todo: Vec<WalkItem<'_>> = vec![(String::new(), src.1.clone(), start, base, scope)];
        let mut first = true;
        while let Some((at, sp, v, mut base, mut scope)) = todo.pop() {
            let Value::Object(o) = v else {
                first = false;
                continue;
            };
            let loc: Loc = (d, sp.clone());
            if !first && self.roots.contains_key(&loc) {
                base = Rc::from(self.roots[&loc].uri.as_str());
                let s = self.enter(&scope, &loc);
                if s != *scope {
                    scope = Rc::new(s);
                }
            }
            first = false;
            if unit == 0 {
                self.inplace.insert(sp.clone(), scope.clone());
            }
            let legacy_ref = draft == Draft::Legacy && o.contains_key("$ref");
            for (key, dynamic) in [("$ref", false), ("$dynamicRef", true)] {
                if dynamic && draft == Draft::Legacy {
                    continue;
                }
                if let Some(r) = o.get(key).and_then(Value::as_str) {
                    self.pending.push(Pending {
                        unit,
                        at: at.clone(),
                        src: loc.clone(),
                        reference: r.to_string(),
                        base: base.clone(),
                        scope: scope.clone(),
                        dynamic,
                    });
                }
            }
            // Clean the output object: identifiers are resolved now; a draft-7 `$ref` drops
            // its siblings (but keeps the definitions, which pointers may name). (The output
            // object is found from its unit's root, so only where there is something to clean.)
            const IDENTIFIERS: [&str; 3] = ["$id", "$anchor", "$dynamicAnchor"];
            if legacy_ref || IDENTIFIERS.iter().any(|k| o.contains_key(*k)) {
                let out = self.units[unit]
                    .pointer_mut(&at)
                    .and_then(Value::as_object_mut)
                    .ok_or_else(|| invalid(&sp, "internal: lost a subschema while resolving"))?;
                for k in IDENTIFIERS {
                    out.remove(k);
                }
                if legacy_ref {
                    out.retain(|k, _| k == "$ref" || is_annotation(k));
                }
            }
            for (suffix, c) in children(o, legacy_ref).into_iter().rev() {
                todo.push((
                    format!("{at}{suffix}"),
                    format!("{sp}{suffix}"),
                    c,
                    base.clone(),
                    scope.clone(),
                ));
            }
        }
        Ok(())
    }

    /// The location a reference names, from `base`.
    /// With a plain-name fragment, also the (resource URI, name) it named.
    fn locate(
        &mut self,
        reference: &str,
        base: &str,
        at: &Loc,
    ) -> Result<(Loc, Option<(String, String)>)> {
        let (uri, frag) =
            resolve_uri(reference, base).ok_or_else(|| self.unresolved(reference, at))?;
        let res = match self.resources.get(&uri) {
            Some(l) => l.clone(),
            None => self.load(&uri, reference, at)?,
        };
        let frag = frag.unwrap_or_default();
        if frag.is_empty() {
            return Ok((res, None));
        }
        let decoded = pct_decode(&frag).unwrap_or(frag);
        if decoded.starts_with('/') {
            let l = (res.0, format!("{}{decoded}", res.1));
            if self.doc(l.0).pointer(&l.1).is_none() {
                return Err(self.unresolved(reference, at));
            }
            return Ok((l, None));
        }
        let key = (uri, decoded);
        match self.anchors.get(&key) {
            Some(l) => Ok((l.clone(), Some(key))),
            None => Err(self.unresolved(reference, at)),
        }
    }

    /// Loads the registry document at `uri` and indexes it; its root.
    fn load(&mut self, uri: &str, reference: &str, at: &Loc) -> Result<Loc> {
        let missing = || Error::UnresolvedRef {
            reference: if reference.contains(':') {
                reference.into()
            } else {
                uri.into()
            },
            path: String::new(),
        };
        let Some(reg) = self.opts.registry.clone() else {
            return Err(with_path(missing(), self.show(at)));
        };
        let Some(doc) = reg.lookup(uri)? else {
            return Err(with_path(missing(), self.show(at)));
        };
        if self.remote.len() >= MAX_DOCUMENTS {
            return Err(Error::LimitExceeded {
                what: "schema registry documents per compile",
                limit: MAX_DOCUMENTS,
                option: "",
                path: String::new(),
            });
        }
        check_schema_shape([doc.as_ref()], self.opts)?;
        self.count(&doc)?;
        let draft = draft_of(&doc, self.root_draft);
        self.remote.push((doc, draft, uri.to_string()));
        let d = self.remote.len();
        self.index(d, uri)?;
        Ok(self
            .resources
            .get(uri)
            .cloned()
            .unwrap_or((d, String::new())))
    }

    /// Charges `v`'s JSON values against [`CompileOptions::max_schema_values`].
    fn count(&mut self, v: &Value) -> Result<()> {
        let mut todo = vec![v];
        while let Some(v) = todo.pop() {
            self.values += 1;
            match v {
                Value::Array(a) => todo.extend(a.iter()),
                Value::Object(o) => todo.extend(o.values()),
                _ => {}
            }
        }
        if self.values > self.opts.max_schema_values {
            return Err(Error::LimitExceeded {
                what: "schema size (JSON values, with $ref copies)",
                limit: self.opts.max_schema_values,
                option: "max_schema_values",
                path: String::new(),
            });
        }
        Ok(())
    }

    /// Resolves one reference and writes its pointer into the output.
    fn fill(&mut self, p: Pending) -> Result<()> {
        let (mut target, anchor) = self.locate(&p.reference, &p.base, &p.src)?;
        if p.dynamic {
            // Bookending: dynamic only when the initial target has a `$dynamicAnchor` of the
            // fragment's name.
            if let Some(key) = anchor {
                if self.dynamic.get(&key) == Some(&target) {
                    if let Some(l) = p.scope.get(&key.1) {
                        target = l.clone();
                    }
                }
            }
        }
        let scope = self.enter(&p.scope, &target);
        let pointer = match (target.0, self.inplace.get(&target.1)) {
            (0, Some(s)) if **s == scope => target.1.clone(),
            _ => self.copy(target, scope)?,
        };
        let out = self.units[p.unit]
            .pointer_mut(&p.at)
            .and_then(Value::as_object_mut)
            .ok_or_else(|| invalid(&p.src.1, "internal: lost a subschema while resolving"))?;
        let r = Value::String(as_ref(&pointer));
        if !p.dynamic {
            out.insert("$ref".into(), r);
        } else {
            out.remove("$dynamicRef");
            if out.contains_key("$ref") {
                let mut one = Map::new();
                one.insert("$ref".into(), r);
                match out.get_mut("allOf") {
                    Some(Value::Array(a)) => a.push(Value::Object(one)),
                    _ => {
                        out.insert("allOf".into(), Value::Array(vec![Value::Object(one)]));
                    }
                }
            } else {
                out.insert("$ref".into(), r);
            }
        }
        Ok(())
    }

    /// The pointer of the copy of `target` under `scope`, made (and queued for walking) if new.
    fn copy(&mut self, target: Loc, scope: Bindings) -> Result<String> {
        let key = (target, scope);
        if let Some(&k) = self.copies.get(&key) {
            return Ok(format!("/{}/{k}", pct_key(&self.key)));
        }
        let k = self.copies.len();
        if k >= MAX_COPIES {
            return Err(Error::LimitExceeded {
                what: "$ref target copies (remote documents, dynamic scopes)",
                limit: MAX_COPIES,
                option: "",
                path: String::new(),
            });
        }
        let (target, scope) = key;
        let v = self
            .doc(target.0)
            .pointer(&target.1)
            .cloned()
            .ok_or_else(|| self.unresolved(&as_ref(&target.1), &target))?;
        self.count(&v)?;
        self.units.push(v);
        self.copies.insert((target.clone(), scope.clone()), k);
        self.walk(k + 1, target, Rc::new(scope))?;
        Ok(format!("/{}/{k}", pct_key(&self.key)))
    }
}

/// A root key as a JSON pointer token (the candidates hold no `~` or `/`; kept exact anyway).
fn pct_key(k: &str) -> String {
    k.replace('~', "~0").replace('/', "~1")
}

fn with_path(e: Error, path: String) -> Error {
    match e {
        Error::UnresolvedRef { reference, .. } => Error::UnresolvedRef { reference, path },
        e => e,
    }
}
