//! One call per engine step. An engine adapter masks a batch with [`mask_logits`] (fills the
//! rows' bitmasks, filters end tokens, and, when the logits are on the CPU, writes their -inf
//! in place: one GIL-free call) and feeds the step's sampled tokens with [`accept_batch`]; a
//! worker thread that fills the next step's bitmasks during the forward pass feeds and fills in
//! one call, [`accept_and_mask`]. The
//! logits are read by pointer from a torch CPU tensor (float32, bfloat16, float16) or a numpy
//! array (float32, float16): dtype, shape, strides, alignment, writability and overlap with the
//! bitmask are checked before any write. Logits on another device (CUDA) are left to the
//! adapter, which applies the filled bitmask there with a fused kernel.

use callmask::mask::logits::{apply_bitmask, LogitsLayout, BF16_NEG_INF, F16_NEG_INF};
use callmask::mask::{fill_u32_rows, map_rows};
use callmask::{Matcher, TokenId};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use super::{err, terminated, ArrayInterface, BitmaskError, MaskBuf, PyMatcher};

/// Element types of logits written in place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dtype {
    F32,
    Bf16,
    F16,
}

impl Dtype {
    fn size(self) -> usize {
        match self {
            Dtype::F32 => 4,
            Dtype::Bf16 | Dtype::F16 => 2,
        }
    }
}

/// Writable logits found behind a Python object.
struct LogitsBuf {
    /// Address of the first element (an integer, so that it can cross `detach`).
    addr: usize,
    dtype: Dtype,
    layout: LogitsLayout,
}

fn bad(m: String) -> PyErr {
    BitmaskError::new_err(format!("logits: {m}"))
}

impl LogitsBuf {
    /// Inspects `obj`: a torch tensor (`None` when it is not on the CPU) or a numpy array
    /// (`__array_interface__`), 1-D (one row) or 2-D, elements contiguous within a row.
    fn of(obj: &Bound<'_, PyAny>) -> PyResult<Option<LogitsBuf>> {
        let (addr, dtype, shape, strides) = if obj.hasattr("data_ptr")? && obj.hasattr("stride")? {
            let device = obj.getattr("device")?.getattr("type")?.str()?.to_string();
            if device != "cpu" {
                return Ok(None);
            }
            let dtype = match obj.getattr("dtype")?.str()?.to_string().as_str() {
                "torch.float32" => Dtype::F32,
                "torch.bfloat16" => Dtype::Bf16,
                "torch.float16" => Dtype::F16,
                other => {
                    return Err(bad(format!(
                        "dtype must be float32, bfloat16 or float16, not {other}"
                    )))
                }
            };
            let shape: Vec<usize> = obj.getattr("shape")?.extract()?;
            let strides: Vec<isize> = obj.call_method0("stride")?.extract()?;
            let addr: usize = obj.call_method0("data_ptr")?.extract()?;
            (addr, dtype, shape, strides)
        } else if let Some(ai) = ArrayInterface::read(obj, "logits")? {
            let dtype = match ai.dtype.as_deref() {
                Some("f4") => Dtype::F32,
                Some("f2") => Dtype::F16,
                _ => {
                    return Err(bad(format!(
                        "dtype must be float32 or float16 (native byte order), not {:?}",
                        ai.typestr
                    )))
                }
            };
            let size = dtype.size() as isize;
            let ArrayInterface {
                addr,
                shape,
                strides,
                ..
            } = ai;
            let strides: Vec<isize> = match strides {
                Some(s) => s
                    .into_iter()
                    .map(|b| if b % size == 0 { b / size } else { -1 })
                    .collect(),
                None => {
                    let mut want = vec![1isize; shape.len()];
                    if shape.len() == 2 {
                        want[0] = shape[1] as isize;
                    }
                    want
                }
            };
            (addr, dtype, shape, strides)
        } else {
            return Err(PyTypeError::new_err(format!(
                "logits: expected a torch tensor or a numpy float array, not {}",
                obj.get_type().name()?
            )));
        };
        let (rows, width, row_stride, elem_stride) = match (&shape[..], &strides[..]) {
            ([w], [s]) => (1, *w, *w as isize, *s),
            ([r, w], [rs, s]) => (*r, *w, if *r > 1 { *rs } else { *w as isize }, *s),
            _ => {
                return Err(bad(format!(
                    "expected shape (rows, vocab) or (vocab,), not {shape:?}"
                )))
            }
        };
        if width > 1 && elem_stride != 1 {
            return Err(bad("the elements of a row must be contiguous".into()));
        }
        if row_stride < width as isize {
            return Err(bad(format!(
                "rows overlap or run backwards (row stride {row_stride}, width {width})"
            )));
        }
        let layout = LogitsLayout {
            rows,
            width,
            row_stride: row_stride as usize,
        };
        let len = layout
            .needed_len()
            .filter(|n| {
                n.checked_mul(dtype.size())
                    .is_some_and(|b| b <= isize::MAX as usize)
            })
            .ok_or_else(|| bad(format!("shape {shape:?} is too large")))?;
        if len > 0 && (addr == 0 || addr % dtype.size() != 0) {
            return Err(bad("the data pointer is null or misaligned".into()));
        }
        Ok(Some(LogitsBuf {
            addr,
            dtype,
            layout,
        }))
    }

    /// Bytes spanned by the rows.
    fn byte_len(&self) -> usize {
        self.layout.needed_len().unwrap_or(0) * self.dtype.size()
    }

    /// Refuses logits whose memory overlaps the bitmask's.
    fn check_apart(&self, mask: &MaskBuf) -> PyResult<()> {
        let (a0, a1) = (self.addr, self.addr + self.byte_len());
        let (b0, b1) = (mask.addr, mask.addr + mask.rows * mask.row_words * 4);
        if a0 < a1 && b0 < b1 && a0 < b1 && b0 < a1 {
            return Err(bad("the logits and the bitmask share memory".into()));
        }
        Ok(())
    }

    /// Writes -inf over the forbidden logits of each `(logits row, bitmask row)` pair.
    ///
    /// # Safety
    ///
    /// `self` must describe live, writable memory as checked by [`LogitsBuf::of`], apart from
    /// `words` (checked by [`LogitsBuf::check_apart`]), that nothing else accesses during the
    /// call; the Python object owning it must be kept alive meanwhile.
    unsafe fn apply(
        &self,
        words: &[u32],
        row_words: usize,
        pairs: &[(usize, usize)],
    ) -> callmask::Result<()> {
        let len = self.layout.needed_len().unwrap_or(0);
        if len == 0 {
            return apply_bitmask::<f32>(&mut [], self.layout, words, row_words, pairs, 0.0);
        }
        match self.dtype {
            Dtype::F32 => {
                // SAFETY: the caller guarantees a live, writable, f32-aligned (checked in `of`)
                // allocation of `len` elements no larger than isize::MAX bytes, not aliased
                // during this call; every bit pattern is a valid f32.
                let data = unsafe { std::slice::from_raw_parts_mut(self.addr as *mut f32, len) };
                apply_bitmask(
                    data,
                    self.layout,
                    words,
                    row_words,
                    pairs,
                    f32::NEG_INFINITY,
                )
            }
            Dtype::Bf16 | Dtype::F16 => {
                // SAFETY: as above, for 2-byte elements seen as u16 (same size and alignment as
                // bfloat16/float16; every bit pattern is a valid u16).
                let data = unsafe { std::slice::from_raw_parts_mut(self.addr as *mut u16, len) };
                let neg_inf = if self.dtype == Dtype::Bf16 {
                    BF16_NEG_INF
                } else {
                    F16_NEG_INF
                };
                apply_bitmask(data, self.layout, words, row_words, pairs, neg_inf)
            }
        }
    }
}

/// The `(logits row, bitmask row)` pairs of `indices` / `bitmask_rows` (XGrammar's convention:
/// without `indices` every logits row takes the bitmask row of the same number).
fn pairs_of(
    rows: usize,
    indices: Option<Vec<usize>>,
    bitmask_rows: Option<Vec<usize>>,
) -> PyResult<Vec<(usize, usize)>> {
    match (indices, bitmask_rows) {
        (None, None) => Ok((0..rows).map(|i| (i, i)).collect()),
        (None, Some(_)) => Err(PyValueError::new_err(
            "apply_token_bitmask: bitmask_rows needs indices",
        )),
        (Some(ix), None) => Ok(ix.into_iter().map(|i| (i, i)).collect()),
        (Some(ix), Some(bx)) if ix.len() == bx.len() => Ok(ix.into_iter().zip(bx).collect()),
        (Some(ix), Some(bx)) => Err(PyValueError::new_err(format!(
            "apply_token_bitmask: {} indices but {} bitmask_rows",
            ix.len(),
            bx.len()
        ))),
    }
}

/// Sets the logits of forbidden tokens to -inf, in place, with the GIL released: `logits` a
/// torch CPU tensor (float32, bfloat16, float16) or numpy array (float32, float16), `(rows,
/// vocab)` or `(vocab,)`, elements contiguous within a row; `bitmask` int32 `(rows, words)` as for
/// `Matcher.fill_bitmask`. Without `indices` logits row `i` takes bitmask row `i` (the row
/// counts must agree); with `indices` only those logits rows are masked, each with the bitmask
/// row of the same number, or with `bitmask_rows[k]` for `indices[k]`. Tokens past the bitmask's
/// words are forbidden. `BitmaskError` on any mismatch (nothing written); `TypeError` for a
/// tensor on another device.
#[pyfunction]
#[pyo3(signature = (logits, bitmask, indices=None, bitmask_rows=None))]
pub(crate) fn apply_token_bitmask(
    py: Python<'_>,
    logits: &Bound<'_, PyAny>,
    bitmask: &Bound<'_, PyAny>,
    indices: Option<Vec<usize>>,
    bitmask_rows: Option<Vec<usize>>,
) -> PyResult<()> {
    let buf = LogitsBuf::of(logits)?.ok_or_else(|| {
        PyTypeError::new_err("apply_token_bitmask: the logits must be on the CPU")
    })?;
    let mask = MaskBuf::of(bitmask)?;
    buf.check_apart(&mask)?;
    if indices.is_none() && mask.rows != buf.layout.rows {
        return Err(bad(format!(
            "{} bitmask rows for {} logits rows",
            mask.rows, buf.layout.rows
        )));
    }
    let pairs = pairs_of(buf.layout.rows, indices, bitmask_rows)?;
    py.detach(|| {
        // SAFETY: `MaskBuf::of` and `LogitsBuf::of` checked both buffers, `check_apart` that
        // they do not overlap; `logits` and `bitmask` are borrowed for this whole call, so their
        // memory stays alive, and the slices do not outlive the closure.
        let words = unsafe { mask.words() };
        // SAFETY: as just said.
        unsafe { buf.apply(words, mask.row_words, &pairs) }
    })
    .map_err(super::err)
}

/// Borrows each entry of `matchers` (a `Matcher` or `None`) mutably; a matcher listed twice is
/// refused.
fn borrow_matchers<'py>(
    matchers: &Bound<'py, PyAny>,
    what: &str,
) -> PyResult<Vec<Option<PyRefMut<'py, PyMatcher>>>> {
    let mut refs = Vec::new();
    for m in matchers.try_iter()? {
        let m = m?;
        if m.is_none() {
            refs.push(None);
            continue;
        }
        let m = m.cast_into::<PyMatcher>().map_err(|_| {
            PyTypeError::new_err(format!("{what}: expected a sequence of Matcher or None"))
        })?;
        refs.push(Some(m.try_borrow_mut().map_err(|_| {
            PyValueError::new_err(format!("{what}: a matcher appears twice (or is in use)"))
        })?));
    }
    Ok(refs)
}

/// Clears token `t`'s bit in `row` (ids past the row are ignored).
fn clear_bit(row: &mut [u32], t: TokenId) {
    if let Some(w) = row.get_mut(t as usize / 32) {
        *w &= !(1u32 << (t % 32));
    }
}

/// Sets token `t`'s bit in `row` (ids past the row are ignored).
fn set_bit(row: &mut [u32], t: TokenId) {
    if let Some(w) = row.get_mut(t as usize / 32) {
        *w |= 1u32 << (t % 32);
    }
}

/// Masks one engine step, in one call with the GIL released: fills bitmask row `k` for
/// `matchers[k]` (as `callmask::mask::fill_u32_rows`: the calling thread, then a thread pool), a
/// `None` matcher's row with exactly the tokens `ends` (a request that failed or has no matcher yet
/// may only end), then clears the tokens `forbidden[k]` from row `k` (end tokens the request does
/// not stop on) unless that would leave the row empty, and, when `logits` is given and on the CPU,
/// writes -inf over the forbidden logits of row `rows[k]` (default `k`). Returns True when the
/// logits were written, False when they are elsewhere (a CUDA tensor: apply the bitmask there) or
/// not given.
#[pyfunction]
#[pyo3(signature = (matchers, bitmask, logits=None, rows=None, *, ends=None, forbidden=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn mask_logits(
    py: Python<'_>,
    matchers: &Bound<'_, PyAny>,
    bitmask: &Bound<'_, PyAny>,
    logits: Option<&Bound<'_, PyAny>>,
    rows: Option<Vec<usize>>,
    ends: Option<Vec<TokenId>>,
    forbidden: Option<Vec<Vec<TokenId>>>,
) -> PyResult<bool> {
    let mask = MaskBuf::of(bitmask)?;
    let mut refs = borrow_matchers(matchers, "mask_logits")?;
    let n = refs.len();
    if n > mask.rows {
        return Err(BitmaskError::new_err(format!(
            "bitmask: {n} matchers but only {} rows",
            mask.rows
        )));
    }
    let ends = ends.unwrap_or_default();
    if ends.is_empty() && refs.iter().any(Option::is_none) {
        return Err(PyValueError::new_err(
            "mask_logits: a row without a matcher needs `ends` (the tokens it may end with)",
        ));
    }
    if let Some(f) = &forbidden {
        if f.len() != n {
            return Err(PyValueError::new_err(format!(
                "mask_logits: {} forbidden lists for {n} matchers",
                f.len()
            )));
        }
    }
    let buf = match logits {
        Some(l) => LogitsBuf::of(l)?,
        None => None,
    };
    let pairs: Vec<(usize, usize)> = match rows {
        Some(r) if r.len() != n => {
            return Err(PyValueError::new_err(format!(
                "mask_logits: {} rows for {n} matchers",
                r.len()
            )))
        }
        Some(r) => r.into_iter().zip(0..n).collect(),
        None => (0..n).map(|k| (k, k)).collect(),
    };
    if let Some(b) = &buf {
        b.check_apart(&mask)?;
    }
    let mut ms: Vec<Option<&mut Matcher>> = refs
        .iter_mut()
        .map(|r| r.as_mut().map(|r| &mut r.m))
        .collect();
    let written = buf.is_some();
    py.detach(|| {
        // SAFETY: `MaskBuf::of` checked the buffer (dtype, size, contiguity, alignment,
        // writability); `bitmask` is borrowed for this whole call; the slice does not outlive
        // the closure.
        let all = unsafe { mask.words() };
        fill_rows(&mut ms, all, mask.row_words, &ends, forbidden.as_deref())?;
        if let Some(b) = &buf {
            // SAFETY: `LogitsBuf::of` checked the logits and `check_apart` that they do not
            // overlap the bitmask; `logits` is borrowed for this whole call.
            unsafe { b.apply(all, mask.row_words, &pairs) }?;
        }
        Ok(())
    })
    .map_err(err)?;
    Ok(written)
}

/// Fills bitmask row `k` of `all` (rows of `row_words` words) for `ms[k]` (`fill_u32_rows`), a
/// `None` row with exactly the tokens `ends`, then clears the tokens `forbidden[k]` from row `k`
/// unless that would leave it empty (see [`mask_logits`]).
fn fill_rows(
    ms: &mut [Option<&mut Matcher>],
    all: &mut [u32],
    row_words: usize,
    ends: &[TokenId],
    forbidden: Option<&[Vec<TokenId>]>,
) -> callmask::Result<()> {
    let filled = &mut all[..ms.len() * row_words];
    for (m, row) in ms.iter().zip(filled.chunks_mut(row_words)) {
        if m.is_none() {
            row.fill(0);
            for &t in ends {
                set_bit(row, t);
            }
        }
    }
    fill_u32_rows(ms, filled, row_words)?;
    let Some(forbidden) = forbidden else {
        return Ok(());
    };
    for (row, ids) in filled.chunks_mut(row_words).zip(forbidden) {
        if ids.is_empty() {
            continue;
        }
        let kept: Vec<(usize, u32)> = ids
            .iter()
            .filter_map(|&t| row.get(t as usize / 32).map(|&w| (t as usize / 32, w)))
            .collect();
        for &t in ids {
            clear_bit(row, t);
        }
        if row.iter().all(|&w| w == 0) {
            for (i, w) in kept {
                row[i] = w; // only end tokens were left: the row may still end
            }
        }
    }
    Ok(())
}

/// One row's feeding: how many tokens it took, and why it stopped early (a refused token).
type Fed = (usize, Option<String>);

/// Feeds `tokens[k]` to `matchers[k]` for every row at once, with the GIL released (rows on the
/// calling thread for 100 µs, the rest on a thread pool: `callmask::mask::map_rows`): tokens are
/// accepted in order until the first negative id (an engine's placeholder for a token not known
/// yet) or the first refused token; tokens after an accepted end-of-generation token are counted as
/// fed and ignored (the engine went on past the end). Returns, per row, `(tokens fed, None)` or
/// `(tokens fed, why the next was refused)`; a `None` matcher feeds nothing.
#[pyfunction]
pub(crate) fn accept_batch(
    py: Python<'_>,
    matchers: &Bound<'_, PyAny>,
    tokens: Vec<Vec<i64>>,
) -> PyResult<Vec<Fed>> {
    let mut refs = borrow_matchers(matchers, "accept_batch")?;
    if refs.len() != tokens.len() {
        return Err(PyValueError::new_err(format!(
            "accept_batch: {} token lists for {} matchers",
            tokens.len(),
            refs.len()
        )));
    }
    let mut ms: Vec<Option<&mut PyMatcher>> = refs
        .iter_mut()
        .map(|r| r.as_mut().map(|r| &mut **r))
        .collect();
    Ok(py.detach(|| feed_rows(&mut ms, &tokens)))
}

/// [`accept_batch`]'s feeding, GIL released by the caller.
fn feed_rows(ms: &mut [Option<&mut PyMatcher>], tokens: &[Vec<i64>]) -> Vec<Fed> {
    let feed = |(m, ts): (&mut Option<&mut PyMatcher>, &Vec<i64>)| match m {
        Some(m) => feed_row(m, ts),
        None => (0, None),
    };
    let work: Vec<_> = ms.iter_mut().zip(tokens).collect();
    map_rows(work, || (), |_, row| feed(row))
}

/// The worker's half of an engine step in one GIL-free call (so that it takes the GIL once,
/// not once per part, while the forward pass's thread holds it): feeds `tokens[k]` to
/// `matchers[k]` as [`accept_batch`] does, then fills bitmask row `k` as [`mask_logits`] does
/// without logits, a row whose matcher is `None`, refused a token or has ended with exactly the
/// tokens `ends` (required). Returns [`accept_batch`]'s result.
#[pyfunction]
#[pyo3(signature = (matchers, tokens, bitmask, *, ends, forbidden=None))]
pub(crate) fn accept_and_mask(
    py: Python<'_>,
    matchers: &Bound<'_, PyAny>,
    tokens: Vec<Vec<i64>>,
    bitmask: &Bound<'_, PyAny>,
    ends: Vec<TokenId>,
    forbidden: Option<Vec<Vec<TokenId>>>,
) -> PyResult<Vec<Fed>> {
    let mask = MaskBuf::of(bitmask)?;
    let mut refs = borrow_matchers(matchers, "accept_and_mask")?;
    let n = refs.len();
    if tokens.len() != n {
        return Err(PyValueError::new_err(format!(
            "accept_and_mask: {} token lists for {n} matchers",
            tokens.len()
        )));
    }
    if n > mask.rows {
        return Err(BitmaskError::new_err(format!(
            "bitmask: {n} matchers but only {} rows",
            mask.rows
        )));
    }
    if ends.is_empty() {
        return Err(PyValueError::new_err(
            "accept_and_mask: `ends` must name the tokens a row may end with",
        ));
    }
    if forbidden.as_ref().is_some_and(|f| f.len() != n) {
        return Err(PyValueError::new_err(format!(
            "accept_and_mask: {} forbidden lists for {n} matchers",
            forbidden.as_ref().map_or(0, Vec::len)
        )));
    }
    let mut ms: Vec<Option<&mut PyMatcher>> = refs
        .iter_mut()
        .map(|r| r.as_mut().map(|r| &mut **r))
        .collect();
    py.detach(|| {
        let fed = feed_rows(&mut ms, &tokens);
        let mut rows: Vec<Option<&mut Matcher>> = ms
            .iter_mut()
            .zip(&fed)
            .map(|(m, (_, why))| match m {
                Some(m) if why.is_none() && !terminated(&m.m) => Some(&mut m.m),
                _ => None,
            })
            .collect();
        // SAFETY: `MaskBuf::of` checked the buffer (dtype, size, contiguity, alignment,
        // writability); `bitmask` is borrowed for this whole call; the slice does not outlive
        // the closure.
        let all = unsafe { mask.words() };
        fill_rows(&mut rows, all, mask.row_words, &ends, forbidden.as_deref())?;
        Ok(fed)
    })
    .map_err(err)
}

/// Feeds one row (see [`accept_batch`]).
fn feed_row(m: &mut PyMatcher, tokens: &[i64]) -> Fed {
    let mut fed = 0;
    for &t in tokens {
        if t < 0 {
            break;
        }
        if terminated(&m.m) {
            fed += 1;
            continue;
        }
        let Ok(t) = TokenId::try_from(t) else {
            let why = format!("token {t} is outside the vocabulary");
            m.error = Some(why.clone());
            return (fed, Some(why));
        };
        if let Err(e) = m.m.accept(t) {
            let why = e.to_string();
            m.error = Some(why.clone());
            return (fed, Some(why));
        }
        fed += 1;
    }
    (fed, None)
}
