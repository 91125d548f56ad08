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
//! Automata of more than 65,535 states are not written (`None`). A keyed table
//! ([`find_keyed`]) lists such automata under text keys (a format's regex, a lexeme's cache key).

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

/// Bytes of the automaton [`Dfa::to_table`] wrote at the start of `bytes`, read from its
/// header alone; `None` when the header is cut short.
fn table_len(bytes: &[u8]) -> Option<usize> {
    let n = usize::from(u16::from_le_bytes([*bytes.first()?, *bytes.get(1)?]));
    let stride = usize::from(*bytes.get(4)?);
    Some(5 + 256 + n.div_ceil(8) + n * stride * 2)
}

/// Looks `key` up in a keyed table: entries of a key (its length, u16, then its bytes), a
/// number (u32; what it means is the table's), and an automaton ([`Dfa::to_table`]). Entries
/// before the match are skipped by their headers, not read. `None` when no entry has the key
/// or the table is damaged.
pub(crate) fn find_keyed(table: &[u8], key: &[u8]) -> Option<(u32, Dfa)> {
    let mut rest = table;
    while !rest.is_empty() {
        let len = usize::from(u16::from_le_bytes(rest.get(..2)?.try_into().ok()?));
        let text = rest.get(2..2 + len)?;
        let number = u32::from_le_bytes(rest.get(2 + len..6 + len)?.try_into().ok()?);
        let body = rest.get(6 + len..)?;
        if text == key {
            return Some((number, Dfa::from_table(body)?.0));
        }
        rest = body.get(table_len(body)?..)?;
    }
    None
}

/// Appends an entry of a keyed table ([`find_keyed`]) to `out`; false (nothing appended)
/// when the key is too long or the automaton has no table.
#[cfg(test)]
pub(crate) fn push_keyed(out: &mut Vec<u8>, key: &[u8], number: u32, dfa: &Dfa) -> bool {
    let (Ok(len), Some(table)) = (u16::try_from(key.len()), dfa.to_table()) else {
        return false;
    };
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(&number.to_le_bytes());
    out.extend_from_slice(&table);
    true
}

/// Checks that a generated table, `table` as compiled in from `src/{file}`, equals `built`,
/// the table its generator writes now; with `CALLMASK_BLESS` set, writes `built` there first.
#[cfg(test)]
pub(crate) fn check_generated(table: &[u8], built: &[u8], file: &str, test_filter: &str) {
    if std::env::var_os("CALLMASK_BLESS").is_some() {
        let path = format!("{}/src/{file}", env!("CARGO_MANIFEST_DIR"));
        std::fs::write(path, built).expect("write the table");
    }
    assert!(
        table == built,
        "src/{file} is stale: regenerate it with \
         `CALLMASK_BLESS=1 cargo test --release -p callmask --lib {test_filter}`"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keyed lookups find each entry past the others (skipped by their headers) and refuse a
    /// damaged table.
    #[test]
    fn keyed_tables_find_their_entries() {
        let dfas = [
            Dfa::from_regex("[a-z]+", 1000).unwrap(),
            Dfa::from_regex("ab|abc", 1000).unwrap(),
            Dfa::literals([&b"x"[..]], 1000).unwrap(),
        ];
        let mut table = Vec::new();
        for (i, d) in dfas.iter().enumerate() {
            assert!(push_keyed(
                &mut table,
                format!("key{i}").as_bytes(),
                i as u32 * 7,
                d
            ));
        }
        for (i, d) in dfas.iter().enumerate() {
            let found = find_keyed(&table, format!("key{i}").as_bytes());
            assert_eq!(found, Some((i as u32 * 7, d.clone())));
        }
        assert_eq!(find_keyed(&table, b"key3"), None);
        for cut in 0..table.len() {
            assert_eq!(find_keyed(&table[..cut], b"key2"), None, "cut at {cut}");
        }
    }

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
