//! Applying token bitmasks to logits in place: every forbidden token's logit set to -inf.
//!
//! The bitmask layout is the one the engines share (vLLM, SGLang, llguidance, XGrammar): rows of
//! `u32` words, token `t` allowed iff bit `t % 32` of word `t / 32` is set. Logits are rows of
//! `width` elements, `row_stride` elements apart, of any element type whose -inf the caller
//! names: `f32`, or the bit patterns of bfloat16 and float16 as `u16` ([`BF16_NEG_INF`],
//! [`F16_NEG_INF`]). Tokens past the bitmask's `32 * words` (a model padding its vocabulary)
//! are never allowed.
//!
//! Trade-offs: a row is walked word by word: a word of all ones is skipped, a word of zeros
//! fills 32 logits at once, and a mixed word writes only its forbidden bits, so the cost is the
//! logits written, not a vocabulary-wide boolean temporary. Rows go to the thread pool (rayon)
//! only when a call may write at least [`PARALLEL_MIN_ELEMENTS`] logits (32 for each word that
//! is not all ones, counted first), so that a call that writes little never pays the hop: rows
//! of free text, which forbid a few hundred tokens, are written in place by the calling thread
//! (inside an engine, the pool's threads would first have to be woken while the forward pass's
//! threads still hold the cores). The apply is bound by memory bandwidth: on a 2-core machine a
//! 151,936-wide row that allows a few tokens takes 20-60 µs whether rows run one by one or in
//! parallel (`scripts/engines/apply_bench.py` measures it against XGrammar's CPU kernel), so
//! the pool helps only for large batches on machines whose cores have bandwidth to spare.

use crate::error::{Error, Result};
use rayon::prelude::*;

/// The bits of bfloat16's -inf.
pub const BF16_NEG_INF: u16 = 0xFF80;
/// The bits of IEEE half precision's (float16) -inf.
pub const F16_NEG_INF: u16 = 0xFC00;
/// The fewest logits a call may write (32 for each bitmask word of its rows that is not all
/// ones) to spread its rows over the thread pool.
///
/// About 55 rows of a 151,936-wide vocabulary that allow few tokens, 1-2 ms of writes on one
/// core: the hop to the pool, inside an engine whose forward pass has just held every core,
/// costs 0.1-0.4 ms (vLLM on 2 cores, 16 such rows: 0.29 ms on the calling thread, 0.39-0.73 ms
/// on the pool), so the pool pays only for writes well above it, on a machine with memory
/// bandwidth to spare.
pub const PARALLEL_MIN_ELEMENTS: usize = 1 << 23;

/// Where the rows of a logits buffer are: `rows` rows of `width` elements, `row_stride`
/// elements from one row's start to the next (`row_stride >= width`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogitsLayout {
    /// Number of rows.
    pub rows: usize,
    /// Elements per row (the model's logits width).
    pub width: usize,
    /// Elements between the starts of two consecutive rows.
    pub row_stride: usize,
}

impl LogitsLayout {
    /// Contiguous rows: `row_stride == width`.
    pub fn contiguous(rows: usize, width: usize) -> LogitsLayout {
        LogitsLayout {
            rows,
            width,
            row_stride: width,
        }
    }

    /// The elements a buffer must hold for this layout (`None` on overflow).
    pub fn needed_len(&self) -> Option<usize> {
        match self.rows {
            0 => Some(0),
            n => (n - 1)
                .checked_mul(self.row_stride)
                .and_then(|x| x.checked_add(self.width)),
        }
    }
}

/// Sets the forbidden logits to `neg_inf`, in place: logits row `l` of each pair `(l, b)` in
/// `pairs` takes bitmask row `b` (`bitmask` holds rows of `row_words` words); logits rows named
/// by no pair are untouched.
///
/// Errors ([`Error::LogitsShape`], nothing written): a layout the buffer does not hold, a row
/// out of range, or a logits row named twice.
pub fn apply_bitmask<T: Copy + Send + Sync>(
    logits: &mut [T],
    layout: LogitsLayout,
    bitmask: &[u32],
    row_words: usize,
    pairs: &[(usize, usize)],
    neg_inf: T,
) -> Result<()> {
    let rows = Rows {
        bitmask,
        row_words,
        pairs,
    };
    apply_bitmask_from(logits, layout, rows, neg_inf, PARALLEL_MIN_ELEMENTS)
}

/// A call's bitmask rows: `bitmask` holds rows of `row_words` words; logits row `l` of each pair
/// `(l, b)` takes bitmask row `b`.
#[derive(Clone, Copy)]
struct Rows<'a> {
    bitmask: &'a [u32],
    row_words: usize,
    pairs: &'a [(usize, usize)],
}

/// [`apply_bitmask`], on the thread pool from `parallel_min` logits to write.
fn apply_bitmask_from<T: Copy + Send + Sync>(
    logits: &mut [T],
    layout: LogitsLayout,
    rows: Rows<'_>,
    neg_inf: T,
    parallel_min: usize,
) -> Result<()> {
    let Rows {
        bitmask,
        row_words,
        pairs,
    } = rows;
    let plan = plan_rows(logits.len(), layout, bitmask.len(), row_words, pairs)?;
    if pairs.is_empty() || layout.width == 0 {
        return Ok(());
    }
    let LogitsLayout {
        width, row_stride, ..
    } = layout;
    let bitmask_row = |b: usize| &bitmask[b * row_words..(b + 1) * row_words];
    let span = &mut logits[..layout.needed_len().unwrap_or(0)];
    let parallel = pairs.len() > 1
        && pairs.len().saturating_mul(width) >= parallel_min
        && may_write(pairs, bitmask_row, width.saturating_sub(row_words * 32)) >= parallel_min;
    if parallel {
        span.par_chunks_mut(row_stride)
            .zip(plan.par_iter())
            .for_each(|(row, b)| {
                if let Some(b) = *b {
                    apply_row(&mut row[..width], bitmask_row(b), neg_inf);
                }
            });
    } else {
        for (row, b) in span.chunks_mut(row_stride).zip(plan.iter()) {
            if let Some(b) = *b {
                apply_row(&mut row[..width], bitmask_row(b), neg_inf);
            }
        }
    }
    Ok(())
}

/// An upper bound on the logits a call writes: 32 for each word of its bitmask rows that is not
/// all ones, and each row's `past` logits beyond its words (the words are read once more, a
/// fraction of the writes' cost).
fn may_write<'a>(
    pairs: &[(usize, usize)],
    bitmask_row: impl Fn(usize) -> &'a [u32],
    past: usize,
) -> usize {
    pairs
        .iter()
        .map(|&(_, b)| bitmask_row(b).iter().filter(|&&w| w != u32::MAX).count() * 32 + past)
        .sum()
}

/// For each logits row, the bitmask row it takes (checked against the buffers' sizes).
fn plan_rows(
    logits_len: usize,
    layout: LogitsLayout,
    bitmask_len: usize,
    row_words: usize,
    pairs: &[(usize, usize)],
) -> Result<Vec<Option<usize>>> {
    let bad = |message: String| Error::LogitsShape { message };
    if layout.rows > 0 && layout.row_stride < layout.width {
        return Err(bad(format!(
            "row stride {} is below the width {}",
            layout.row_stride, layout.width
        )));
    }
    let needed = layout
        .needed_len()
        .ok_or_else(|| bad(format!("layout {layout:?} overflows")))?;
    if logits_len < needed {
        return Err(bad(format!(
            "{logits_len} logits for {} rows of {} (stride {})",
            layout.rows, layout.width, layout.row_stride
        )));
    }
    let bitmask_rows = bitmask_len.checked_div(row_words).unwrap_or(0);
    let mut plan = vec![None; layout.rows];
    for &(l, b) in pairs {
        if l >= layout.rows {
            return Err(bad(format!(
                "logits row {l} out of range for {} rows",
                layout.rows
            )));
        }
        if b >= bitmask_rows {
            return Err(bad(format!(
                "bitmask row {b} out of range for {bitmask_rows} rows"
            )));
        }
        if plan[l].replace(b).is_some() {
            return Err(bad(format!("logits row {l} is named twice")));
        }
    }
    Ok(plan)
}

/// One row: its forbidden logits (a clear bit, or past the words) to `neg_inf`.
fn apply_row<T: Copy>(row: &mut [T], words: &[u32], neg_inf: T) {
    let covered = row.len().min(words.len().saturating_mul(32));
    let (masked, past) = row.split_at_mut(covered);
    for (chunk, &word) in masked.chunks_mut(32).zip(words) {
        if word == u32::MAX {
            continue;
        }
        if word == 0 {
            chunk.fill(neg_inf);
            continue;
        }
        let mut forbidden = !word;
        if chunk.len() < 32 {
            forbidden &= (1u32 << chunk.len()) - 1;
        }
        while forbidden != 0 {
            chunk[forbidden.trailing_zeros() as usize] = neg_inf;
            forbidden &= forbidden - 1;
        }
    }
    past.fill(neg_inf);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(row: &mut [f32], words: &[u32]) {
        for (t, x) in row.iter_mut().enumerate() {
            let allowed = words.get(t / 32).is_some_and(|w| (w >> (t % 32)) & 1 == 1);
            if !allowed {
                *x = f32::NEG_INFINITY;
            }
        }
    }

    #[test]
    fn rows_match_the_reference() {
        let mut seed = 0x9e37_79b9_u32;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed
        };
        for width in [0usize, 1, 31, 32, 33, 64, 100, 1000] {
            for words in [0usize, 1, 2, 4, 40] {
                let bitmask: Vec<u32> = (0..words * 3)
                    .map(|i| match i % 5 {
                        0 => 0,
                        1 => u32::MAX,
                        _ => next(),
                    })
                    .collect();
                let layout = LogitsLayout {
                    rows: 3,
                    width,
                    row_stride: width + 2,
                };
                let len = layout.needed_len().unwrap();
                let start: Vec<f32> = (0..len).map(|i| i as f32).collect();
                let mut got = start.clone();
                let pairs = [(0, 2), (2, 0)];
                if words == 0 {
                    assert!(apply_bitmask(
                        &mut got,
                        layout,
                        &bitmask,
                        words,
                        &pairs,
                        f32::NEG_INFINITY
                    )
                    .is_err());
                    continue;
                }
                apply_bitmask(&mut got, layout, &bitmask, words, &pairs, f32::NEG_INFINITY)
                    .unwrap();
                let mut want = start.clone();
                for (l, b) in pairs {
                    let s = l * layout.row_stride;
                    reference(
                        &mut want[s..s + width],
                        &bitmask[b * words..(b + 1) * words],
                    );
                }
                assert_eq!(got, want, "width {width}, words {words}");
            }
        }
    }

    #[test]
    fn large_calls_match_the_reference() {
        // Rows that forbid most tokens (past the threshold to write: the thread pool) and rows
        // that allow most (the calling thread), wider than their bitmask; row 3 is untouched.
        let (rows, width, words) = (5usize, 150_000usize, 4_600usize);
        let pairs = [(0, 3), (1, 1), (2, 4), (4, 0)];
        let parallel_min = 1 << 19;
        for sparse in [true, false] {
            let bitmask: Vec<u32> = (0..rows * words)
                .map(|i| match (sparse, i % 97) {
                    (true, 0) => 0x8000_0001,
                    (true, _) => 0,
                    (false, 0) => 0x7fff_fffe,
                    (false, _) => u32::MAX,
                })
                .collect();
            let row = |b: usize| &bitmask[b * words..(b + 1) * words];
            let writes = may_write(&pairs, row, width - words * 32);
            assert_eq!(writes >= parallel_min, sparse);
            let start: Vec<f32> = (0..rows * width).map(|i| i as f32).collect();
            let mut want = start.clone();
            for (l, b) in pairs {
                reference(&mut want[l * width..(l + 1) * width], row(b));
            }
            for min in [parallel_min, PARALLEL_MIN_ELEMENTS, usize::MAX] {
                let mut got = start.clone();
                let rows_of = Rows {
                    bitmask: &bitmask,
                    row_words: words,
                    pairs: &pairs,
                };
                let layout = LogitsLayout::contiguous(rows, width);
                apply_bitmask_from(&mut got, layout, rows_of, f32::NEG_INFINITY, min).unwrap();
                assert!(got == want, "sparse {sparse}, from {min}");
            }
        }
    }

    #[test]
    fn bad_shapes_are_refused_untouched() {
        let mut logits = vec![1.0f32; 64];
        let layout = LogitsLayout::contiguous(2, 32);
        let bm = [0u32; 2];
        for pairs in [&[(2, 0)][..], &[(0, 2)], &[(0, 0), (0, 1)]] {
            let e = apply_bitmask(&mut logits, layout, &bm, 1, pairs, f32::NEG_INFINITY);
            assert!(matches!(e, Err(Error::LogitsShape { .. })), "{pairs:?}");
        }
        let e = apply_bitmask(
            &mut logits,
            LogitsLayout::contiguous(3, 32),
            &bm,
            1,
            &[],
            0.0,
        );
        assert!(matches!(e, Err(Error::LogitsShape { .. })));
        assert!(logits.iter().all(|&x| x == 1.0));
    }
}
