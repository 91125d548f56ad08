//! `anyOf`/`oneOf`/type lists: unions of grammar nodes. A `oneOf` is a plain union only when its
//! alternatives are provably disjoint (by their possible first bytes, or by their object keys);
//! otherwise `negate.rs` rewrites it with complements.

use super::*;

impl Compiler<'_> {
    pub(super) fn union(&mut self, ids: Vec<NodeId>, one_of: bool, path: &str) -> Result<NodeId> {
        if one_of {
            self.check_disjoint(&ids, path)?;
        }
        if ids.len() == 1 {
            return Ok(ids[0]);
        }
        self.b.push(Node::Union(ids))
    }

    /// Refuses a `oneOf` whose alternatives might both match one value.
    pub(super) fn check_disjoint(&mut self, ids: &[NodeId], path: &str) -> Result<()> {
        // Alternatives reached through unfinished $refs cannot be inspected yet: refuse.
        let mut firsts = Vec::new();
        for &id in ids {
            match self.first_bytes(id, 0) {
                Some(f) => firsts.push(f),
                None => {
                    return self.b.unsupported(
                        "oneOf",
                        path,
                        "alternatives that cannot be proven disjoint",
                    );
                }
            }
        }
        for i in 0..ids.len() {
            for j in i + 1..ids.len() {
                let overlap = (0..4).any(|w| firsts[i][w] & firsts[j][w] != 0);
                if overlap && !self.disjoint(ids[i], ids[j], 0) {
                    return self.b.unsupported(
                        "oneOf",
                        path,
                        "alternatives that may overlap (only provably disjoint ones are supported)",
                    );
                }
            }
        }
        Ok(())
    }

    /// The first bytes a node's values can start with, or None if not yet known.
    pub(super) fn first_bytes(&self, id: NodeId, depth: usize) -> Option<[u64; 4]> {
        if depth > 50 {
            return None;
        }
        let mut set = [0u64; 4];
        let mut add = |b: u8| set[b as usize / 64] |= 1 << (b % 64);
        match &self.b.nodes[id as usize] {
            Node::Lex(l) => {
                let d = &self.b.lexemes[*l as usize];
                for b in 0..=255u8 {
                    if d.next(d.start(), b) != Dfa::DEAD {
                        add(b);
                    }
                }
            }
            Node::Object(o) => add(o.syntax.open),
            Node::Array(a) => add(a.syntax.open),
            Node::Never => {}
            Node::Union(alts) => {
                if alts.is_empty() {
                    return None; // a $ref placeholder still being compiled
                }
                for &a in alts {
                    let f = self.first_bytes(a, depth + 1)?;
                    for w in 0..4 {
                        set[w] |= f[w];
                    }
                }
            }
            _ => return None,
        }
        Some(set)
    }

    /// True when no value matches both nodes (conservative: false when unsure).
    pub(super) fn disjoint(&self, a: NodeId, b: NodeId, depth: usize) -> bool {
        if depth > 20 {
            return false;
        }
        match (&self.b.nodes[a as usize], &self.b.nodes[b as usize]) {
            (Node::Never, _) | (_, Node::Never) => true,
            (Node::Union(xs), _) => {
                !xs.is_empty() && xs.iter().all(|&x| self.disjoint(x, b, depth + 1))
            }
            (_, Node::Union(ys)) => {
                !ys.is_empty() && ys.iter().all(|&y| self.disjoint(a, y, depth + 1))
            }
            (Node::Lex(x), Node::Lex(y)) => {
                let (x, y) = (&self.b.lexemes[*x as usize], &self.b.lexemes[*y as usize]);
                x.product(y, Op::And, self.opts.max_lexeme_states)
                    .map(|d| d.is_empty())
                    .unwrap_or(false)
            }
            (Node::Object(x), Node::Object(y)) => {
                // A key required by both whose values are disjoint (a discriminator).
                x.required.iter().any(|&kx| {
                    let key = &x.keys[kx as usize];
                    y.keys.iter().position(|k| k == key).is_some_and(|ky| {
                        y.required.contains(&(ky as u32))
                            && self.disjoint(x.values[kx as usize], y.values[ky], depth + 1)
                    })
                }) || {
                    // A key required by one that the other forbids.
                    let forbids = |p: &ObjectNode, q: &ObjectNode| {
                        p.required.iter().any(|&k| {
                            q.additional.is_none() && !q.keys.contains(&p.keys[k as usize])
                        })
                    };
                    forbids(x, y) || forbids(y, x)
                }
            }
            (Node::Array(x), Node::Array(y)) => {
                x.max_items < y.min_items || y.max_items < x.min_items
            }
            (Node::Lex(_), _) | (_, Node::Lex(_)) => true,
            (Node::Object(_), Node::Array(_)) | (Node::Array(_), Node::Object(_)) => true,
            _ => false,
        }
    }
}
