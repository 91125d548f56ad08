//! A [`Dfa`] written as bytes and read back, for automata that are the same in every process
//! (the built-in string formats: `schema/format_automata.rs`), so that a cold request reads a
//! table instead of determinizing a regex.
//!
//! Layout, little-endian: the number of states `n` (u16; the dead state 0 included), the start
//! state (u16), the number of byte classes `stride` (u8), the 256 byte classes (u8 each), the
//! accepting states as a bitmap (`ceil(n / 8)` bytes), then the `n * stride` transitions (u16
//! each). Reading checks every field, so that a damaged table is refused rather than read out of
//! bounds: every class below `stride`, every target below `n`, state 0 dead. That a table holds
//! the automaton its regex builds is for its writer to check (the format table's test does).
//! Automata of more than 65,535 states are not written (`None`).

use super::{Dfa, StateId};

impl Dfa {
    /// This automaton as bytes ([module docs](self)); `None` when it has more than 65,535
    /// states or carries a text view (which tables do not hold). Written by tests alone (the
    /// format table's generator).
    #[cfg(test)]
    pub(crate) fn to_table(&self) -> Option<Vec<u8>> {
        let n = u16::try_from(self.accept.len()).ok()?;
        if self.text.is_some() || self.text_states.is_some() || self.stride > 256 {
            return None;
        }
        let mut out =
            Vec::with_capacity(5 + 256 + self.accept.len() / 8 + 1 + self.trans.len() * 2);
        out.extend_from_slice(&n.to_le_bytes());
        out.extend_from_slice(&u16::try_from(self.start).ok()?.to_le_bytes());
        out.push(u8::try_from(self.stride).ok()?);
        out.extend_from_slice(&self.classes);
        for chunk in self.accept.chunks(8) {
            out.push(
                chunk
                    .iter()
                    .enumerate()
                    .fold(0u8, |m, (i, &a)| m | (u8::from(a) << i)),
            );
        }
        for &t in &self.trans {
            out.extend_from_slice(&u16::try_from(t).ok()?.to_le_bytes());
        }
        Some(out)
    }

    /// Reads an automaton that [`Dfa::to_table`] wrote at the start of `bytes`, and the number
    /// of bytes it took; `None` when they do not hold a well-formed one.
    pub(crate) fn from_table(bytes: &[u8]) -> Option<(Dfa, usize)> {
        let mut at = 0usize;
        let mut take = |len: usize| {
            let part = bytes.get(at..at.checked_add(len)?)?;
            at += len;
            Some(part)
        };
        let u16_at = |b: &[u8]| u16::from_le_bytes([b[0], b[1]]);
        let n = usize::from(u16_at(take(2)?));
        let start = StateId::from(u16_at(take(2)?));
        let stride = usize::from(take(1)?[0]);
        let classes: [u8; 256] = take(256)?.try_into().ok()?;
        if n == 0 || stride == 0 || start as usize >= n {
            return None;
        }
        if classes.iter().any(|&c| usize::from(c) >= stride) {
            return None;
        }
        let bitmap = take(n.div_ceil(8))?;
        let accept: Vec<bool> = (0..n).map(|s| bitmap[s / 8] >> (s % 8) & 1 == 1).collect();
        let trans: Vec<StateId> = take(n.checked_mul(stride)?.checked_mul(2)?)?
            .chunks_exact(2)
            .map(|b| StateId::from(u16_at(b)))
            .collect();
        if trans.iter().any(|&t| t as usize >= n)
            || accept[0]
            || trans[..stride].iter().any(|&t| t != 0)
        {
            return None;
        }
        let has_out = trans
            .chunks_exact(stride)
            .map(|row| row.iter().any(|&t| t != 0))
            .collect();
        Some((
            Dfa::from_rows(classes, stride, trans, accept, has_out, start),
            at,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_read_back_what_was_written() {
        for re in ["", "a", "[a-z]{2,5}@[0-9]+", "(?s:.)*", "é|ü+"] {
            let d = Dfa::from_regex(re, 10_000).unwrap();
            let mut bytes = d.to_table().unwrap();
            let len = bytes.len();
            bytes.extend_from_slice(b"rest");
            let (back, used) = Dfa::from_table(&bytes).unwrap();
            assert_eq!((back, used), (d, len), "{re:?}");
        }
    }

    #[test]
    fn damaged_tables_are_refused() {
        let table = Dfa::from_regex("[a-c]+x", 1_000)
            .unwrap()
            .to_table()
            .unwrap();
        for cut in 0..table.len() {
            assert!(Dfa::from_table(&table[..cut]).is_none(), "cut at {cut}");
        }
        // A transition to a state past the last one.
        let mut bad = table.clone();
        let last = bad.len() - 2;
        bad[last..].copy_from_slice(&u16::MAX.to_le_bytes());
        assert!(Dfa::from_table(&bad).is_none());
        // A byte class past the stride.
        let mut bad = table;
        bad[5 + b'q' as usize] = 200;
        assert!(Dfa::from_table(&bad).is_none());
    }
}
