//! `$ref` resolution: JSON pointers into the same document (`$defs`, `definitions`, any
//! pointer), compiled once per (encoding, target) so recursive schemas become cycles in the
//! grammar graph; and dereferencing of `allOf` parts before they are merged.

use super::*;

impl<'a> Compiler<'a> {
    /// A `$ref`'s JSON pointer and the value it names in the document being compiled.
    pub(super) fn ref_target_of(&self, r: &str, path: &str) -> Result<(String, &'a Value)> {
        let pointer = self.ref_pointer(r, path)?;
        let target = self
            .root
            .pointer(&pointer)
            .ok_or_else(|| Error::UnresolvedRef {
                reference: r.into(),
                path: ptr(path),
            })?;
        Ok((pointer, target))
    }
}

impl Compiler<'_> {
    pub(super) fn compile_ref(&mut self, r: &str, path: &str) -> Result<NodeId> {
        let pointer = self.ref_pointer(r, path)?;
        if let Some(&id) = self.refs.get(&(self.enc, pointer.clone())) {
            return Ok(id);
        }
        let (_, target) = self.ref_target_of(r, path)?;
        let id = self.b.push(Node::Never)?;
        self.refs.insert((self.enc, pointer.clone()), id);
        let t = self.compile(target, &pointer)?;
        self.b.nodes[id as usize] = Node::Union(vec![t]);
        Ok(id)
    }

    /// The JSON pointer a `$ref` names, in the document being compiled.
    pub(super) fn ref_pointer(&self, r: &str, path: &str) -> Result<String> {
        let unresolved = || Error::UnresolvedRef {
            reference: r.into(),
            path: ptr(path),
        };
        let frag = r.strip_prefix('#').ok_or_else(unresolved)?;
        if !(frag.is_empty() || frag.starts_with('/')) {
            return Err(unresolved());
        }
        // Percent-decoding of the fragment.
        let mut out = Vec::new();
        let b = frag.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'%' && i + 2 < b.len() {
                let h = std::str::from_utf8(&b[i + 1..i + 3]).ok();
                if let Some(v) = h.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    out.push(v);
                    i += 3;
                    continue;
                }
            }
            out.push(b[i]);
            i += 1;
        }
        String::from_utf8(out).map_err(|_| unresolved())
    }

    /// Resolves a top-level `$ref` of a part for merging (one level, no recursion needed).
    pub(super) fn deref_part(&self, part: &Value, path: &str, depth: usize) -> Result<Value> {
        self.merge_step()?;
        if depth > 32 {
            return Err(Error::LimitExceeded {
                what: "$ref chain length",
                limit: 32,
                option: "",
                path: String::new(),
            });
        }
        if let Value::Object(o) = part {
            if let Some(r) = o.get("$ref").and_then(Value::as_str) {
                let (_, t) = self.ref_target_of(r, path)?;
                let t = self.deref_part(t, path, depth + 1)?;
                let mut rest = o.clone();
                rest.remove("$ref");
                if rest.keys().all(|k| is_annotation(k)) {
                    return Ok(t);
                }
                return self.merge_two(&t, &Value::Object(rest), path, depth + 1);
            }
            if let Some(Value::Array(all)) = o.get("allOf") {
                let mut rest = o.clone();
                rest.remove("allOf");
                let mut acc = Value::Object(rest);
                for p in all {
                    let p = self.deref_part(p, path, depth + 1)?;
                    acc = self.merge_two(&acc, &p, path, depth + 1)?;
                }
                return Ok(acc);
            }
        }
        Ok(part.clone())
    }
}
