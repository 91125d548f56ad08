//! Numbers as exact digit automata: the spelling of a number (digit limits, built directly as
//! a small counter automaton), integer ranges (a digit-by-digit comparison with the range's
//! ends, also built directly), decimal bounds (regular expressions over digits), and
//! `multipleOf` (a remainder automaton).
//!
//! Trade-offs: every automaton decides on the decimal digits as written, never through a
//! double, so bounds and steps are exact; the price is a digit limit on every number. By
//! default the limits are I-JSON's (RFC 7493: integers within ±(2^53 − 1), at most 15
//! significant digits), so that the decimal the model writes is the value every JSON parser
//! reads; a schema whose bounds reach further keeps plain JSON's 19 digits on that side.

use crate::grammar::dfa::{Dfa, DfaError};
use std::cmp::Ordering;

/// Largest magnitude with 19 digits.
const MAX_MAG: u128 = 9_999_999_999_999_999_999;

/// How a number lexeme may be spelled: the digit limits of one JSON number (see
/// [`number_spelling_dfa`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct NumberSpelling {
    /// Most digits before the decimal point.
    pub(super) int_digits: u8,
    /// Most digits after it.
    pub(super) frac_digits: u8,
    /// Most significant digits (from the first non-zero digit on, trailing zeros included),
    /// or no limit.
    pub(super) significant: Option<u8>,
    /// Whether an exponent (`e`, an optional sign, at most two digits) may follow.
    pub(super) exponent: bool,
}

impl NumberSpelling {
    /// Numbers a JSON parser reads exactly (I-JSON, RFC 7493): at most 15 significant digits,
    /// so the decimal written is the shortest spelling of its double, and every value finite.
    pub(super) const IJSON: NumberSpelling = NumberSpelling {
        int_digits: 15,
        frac_digits: 20,
        significant: Some(15),
        exponent: true,
    };
    /// Plain JSON numbers with bounded digits (I-JSON off, or bounds past its reach): at most 19
    /// integer and 20 fraction digits.
    pub(super) const JSON: NumberSpelling = NumberSpelling {
        int_digits: 19,
        frac_digits: 20,
        significant: None,
        exponent: true,
    };

    /// The same digits without an exponent (numbers with bounds are compared digit by digit).
    pub(super) fn without_exponent(self) -> NumberSpelling {
        NumberSpelling {
            exponent: false,
            ..self
        }
    }
}

/// Where a number's spelling is: the phase and the one counter it needs.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Spelled {
    Start,
    Minus,
    /// The integer part `0` (negative when `-0`: not a number of its own until a non-zero
    /// fraction digit).
    Zero {
        neg: bool,
    },
    /// A non-zero integer part of this many digits.
    Int(u8),
    /// After the point, with this many digits still allowed.
    Dot(u8),
    /// Fraction digits after a non-zero digit, this many more allowed.
    Frac(u8),
    /// After `0.`: this many zeros so far.
    FracZeros {
        neg: bool,
        zeros: u8,
    },
    Exp,
    ExpSign,
    ExpDigits(u8),
}

/// The numbers spelled within `spelling`: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]{1,2})?`
/// with its digit limits, and never negative zero (`-0`, `-0.0`, `-0e1`: parsers read them as a
/// zero of their own, and JSON Schema values equal to 0 are written `0`).
pub(super) fn number_spelling_dfa(
    spelling: NumberSpelling,
    max_states: usize,
) -> Result<Dfa, DfaError> {
    use Spelled::*;
    let NumberSpelling {
        int_digits,
        frac_digits,
        significant,
        exponent,
    } = spelling;
    let sig = significant.unwrap_or(u8::MAX);
    let mut classes = [0u8; 256];
    classes[b'0' as usize] = 1;
    for b in b'1'..=b'9' {
        classes[b as usize] = 2;
    }
    classes[b'-' as usize] = 3;
    classes[b'+' as usize] = 4;
    classes[b'.' as usize] = 5;
    classes[b'e' as usize] = 6;
    classes[b'E' as usize] = 6;
    let exp = |ok: bool| (exponent && ok).then_some(Exp);
    Dfa::build(
        Start,
        max_states,
        &classes,
        |st, b| match (*st, b) {
            (Start, b'-') => Some(Minus),
            (Start, b'0') => Some(Zero { neg: false }),
            (Minus, b'0') => Some(Zero { neg: true }),
            (Start | Minus, b'1'..=b'9') => Some(Int(1)),
            (Int(n), b'0'..=b'9') => (n < int_digits.min(sig)).then_some(Int(n + 1)),
            (Int(n), b'.') => {
                let left = frac_digits.min(sig.saturating_sub(n));
                (left > 0).then_some(Dot(left))
            }
            (Zero { neg }, b'.') => (frac_digits > 0).then_some(FracZeros { neg, zeros: 0 }),
            (Dot(left) | Frac(left), b'0'..=b'9') => (left > 0).then(|| Frac(left - 1)),
            (FracZeros { neg, zeros }, b'0') => (zeros < frac_digits).then_some(FracZeros {
                neg,
                zeros: zeros + 1,
            }),
            (FracZeros { zeros, .. }, b'1'..=b'9') => (zeros < frac_digits)
                .then(|| Frac((frac_digits - zeros - 1).min(sig.saturating_sub(1)))),
            (Zero { neg }, b'e' | b'E') => exp(!neg),
            (FracZeros { neg, zeros }, b'e' | b'E') => exp(!neg && zeros > 0),
            (Int(_) | Frac(_), b'e' | b'E') => exp(true),
            (Exp, b'+' | b'-') => Some(ExpSign),
            (Exp | ExpSign, b'0'..=b'9') => Some(ExpDigits(1)),
            (ExpDigits(1), b'0'..=b'9') => Some(ExpDigits(2)),
            _ => None,
        },
        |st| match *st {
            Zero { neg } => !neg,
            FracZeros { neg, zeros } => !neg && zeros > 0,
            Int(_) | Frac(_) | ExpDigits(_) => true,
            _ => false,
        },
    )
}

/// Most magnitude of an integer that every JSON parser reads exactly (I-JSON, RFC 7493):
/// 2^53 − 1, the largest run of integers a double holds.
pub(super) const IJSON_MAX_INT: i128 = (1 << 53) - 1;

/// The integers a schema's bounds allow, `lo..=hi`: a missing bound is `∓reach`, or the most
/// 19 digits hold where the other bound lies past `reach` (the schema's own bounds say the
/// numbers go that far); every bound is kept within 19 digits.
pub(super) fn int_range(lo: Option<i128>, hi: Option<i128>, reach: i128) -> (i128, i128) {
    let max = MAX_MAG as i128;
    let lo_default = if hi.is_some_and(|h| h < -reach) {
        -max
    } else {
        -reach
    };
    let hi_default = if lo.is_some_and(|l| l > reach) {
        max
    } else {
        reach
    };
    (
        lo.unwrap_or(lo_default).clamp(-max - 1, max + 1),
        hi.unwrap_or(hi_default).clamp(-max - 1, max + 1),
    )
}

/// Where an integer's spelling is, for [`int_range_dfa`].
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum IntRead {
    Start,
    Minus,
    /// `k` digits of the magnitude, compared as a prefix with the least (`lo`) and the most
    /// (`hi`) magnitude of the sign read (`lo` is `Greater` once past the least's length);
    /// `zero`: the magnitude `0`, which no digit follows.
    Digits {
        neg: bool,
        k: u8,
        lo: Ordering,
        hi: Ordering,
        zero: bool,
    },
    /// After the point, this many zeros.
    Point(u8),
}

/// The integers in `lo..=hi` that 19 digits hold, without leading zeros (`-0` is not one),
/// then a point and 1 to `zeros` zeros or nothing (`zeros` 0: nothing); `None` when there are
/// none. The language of `int_range_regex(lo, hi)` and that suffix, built directly, digit by
/// digit, as a comparison of the magnitude read with the range's ends (a few hundred states
/// at most, where determinizing the regex of a range of 16-digit ends cost milliseconds).
pub(super) fn int_range_dfa(
    lo: i128,
    hi: i128,
    zeros: u8,
    max_states: usize,
) -> Result<Option<Dfa>, DfaError> {
    use IntRead::*;
    let max = MAX_MAG as i128;
    let (lo, hi) = (lo.max(-max), hi.min(max));
    if lo > hi {
        return Ok(None);
    }
    let digits = |x: i128| x.unsigned_abs().to_string().into_bytes();
    // Per sign, the least and the most magnitude, as digits.
    let pos = (hi >= 0).then(|| (digits(lo.max(0)), digits(hi)));
    let neg = (lo < 0).then(|| (digits(hi.min(-1)), digits(lo)));
    let ends = |negative: bool| if negative { neg.as_ref() } else { pos.as_ref() };
    let within = |negative: bool, k: u8, lo: Ordering, hi: Ordering| {
        ends(negative).is_some_and(|(a, b)| {
            let k = usize::from(k);
            let ge = k > a.len() || (k == a.len() && lo != Ordering::Less);
            let le = k < b.len() || (k == b.len() && hi != Ordering::Greater);
            ge && le
        })
    };
    let digit = |negative: bool, k: u8, lo: Ordering, hi: Ordering, d: u8| {
        let (a, b) = ends(negative)?;
        let at = usize::from(k);
        if at >= b.len() {
            return None;
        }
        let compare = |was: Ordering, end: &[u8]| match end.get(at) {
            Some(&e) if was == Ordering::Equal => d.cmp(&e),
            Some(_) => was,
            None => Ordering::Greater,
        };
        Some(Digits {
            neg: negative,
            k: k + 1,
            lo: compare(lo, a),
            hi: compare(hi, b),
            zero: k == 0 && d == b'0',
        })
    };
    let mut classes = [0u8; 256];
    for (i, b) in (b'0'..=b'9').enumerate() {
        classes[b as usize] = 1 + i as u8;
    }
    classes[b'-' as usize] = 11;
    classes[b'.' as usize] = 12;
    let eq = Ordering::Equal;
    Dfa::build(
        Start,
        max_states,
        &classes,
        |st, b| match (*st, b) {
            (Start, b'-') => neg.as_ref().map(|_| Minus),
            (Start, b'0'..=b'9') => digit(false, 0, eq, eq, b),
            (Minus, b'0'..=b'9') => digit(true, 0, eq, eq, b),
            (Digits { zero: true, .. }, b'0'..=b'9') => None,
            (Digits { neg, k, lo, hi, .. }, b'0'..=b'9') => digit(neg, k, lo, hi, b),
            (Digits { neg, k, lo, hi, .. }, b'.') => {
                (zeros > 0 && within(neg, k, lo, hi)).then_some(Point(0))
            }
            (Point(n), b'0') => (n < zeros).then_some(Point(n + 1)),
            _ => None,
        },
        |st| match *st {
            Digits { neg, k, lo, hi, .. } => within(neg, k, lo, hi),
            Point(n) => n > 0,
            _ => false,
        },
    )
    .map(Some)
}

/// Regex for the integers in `lo..=hi` that 19 digits hold (None when there are none): the
/// reference [`int_range_dfa`] is checked against.
#[cfg(test)]
fn int_range_regex(lo: i128, hi: i128) -> Option<String> {
    let max = MAX_MAG as i128;
    let (lo, hi) = (lo.max(-max), hi.min(max));
    if lo > hi {
        return None;
    }
    let mut alts = Vec::new();
    if hi >= 0 {
        alts.push(pos_range(lo.max(0) as u128, hi as u128));
    }
    if lo < 0 {
        let a = (-(hi.min(-1))) as u128;
        let b = (-lo) as u128;
        alts.push(format!("-(?:{})", pos_range(a, b)));
    }
    Some(alts.join("|"))
}

/// Regex for non-negative integers in `a..=b`, without leading zeros. The lengths whose every
/// value is in range (all of them up to 19 digits under a lone lower bound) are one
/// `[1-9][0-9]{m,n}`, not one alternative each: the regex's automaton is the same, its
/// construction a fraction (a number with `exclusiveMinimum: 0` about 1M instructions).
fn pos_range(a: u128, b: u128) -> String {
    let digits = |x: u128| x.to_string().len();
    let mut alts = Vec::new();
    // The run of whole lengths being gathered: its shortest and longest.
    let mut whole: Option<(usize, usize)> = None;
    let flush = |whole: &mut Option<(usize, usize)>, alts: &mut Vec<String>| {
        if let Some((m, n)) = whole.take() {
            alts.push(match (m, n) {
                (1, 1) => "[1-9]".to_string(),
                (m, n) if m == n => format!("[1-9][0-9]{{{}}}", m - 1),
                (m, n) => format!("[1-9][0-9]{{{},{}}}", m - 1, n - 1),
            });
        }
    };
    for len in digits(a)..=digits(b) {
        let first = if len == 1 {
            0
        } else {
            10u128.pow(len as u32 - 1)
        };
        let last = 10u128.pow(len as u32) - 1;
        let (mut lo, hi) = (first.max(a), last.min(b));
        if lo > hi {
            continue;
        }
        if lo == 0 {
            alts.push("0".to_string());
            lo = 1;
            if hi == 0 {
                continue;
            }
        }
        if lo == first.max(1) && hi == last {
            whole = Some(whole.map_or((len, len), |(m, _)| (m, len)));
        } else {
            flush(&mut whole, &mut alts);
            alts.push(eq_len(lo.to_string().as_bytes(), hi.to_string().as_bytes()));
        }
    }
    flush(&mut whole, &mut alts);
    alts.join("|")
}

/// Regex for digit strings of equal length between `lo` and `hi`.
fn eq_len(lo: &[u8], hi: &[u8]) -> String {
    if lo.is_empty() {
        return String::new();
    }
    if lo[0] == hi[0] {
        return format!("{}{}", lo[0] as char, eq_len(&lo[1..], &hi[1..]));
    }
    let n = lo.len() - 1;
    let lo_zero = lo[1..].iter().all(|&c| c == b'0');
    let hi_nine = hi[1..].iter().all(|&c| c == b'9');
    let mut alts = Vec::new();
    let mut start = lo[0];
    if !lo_zero {
        alts.push(format!(
            "{}(?:{})",
            lo[0] as char,
            eq_len(&lo[1..], &vec![b'9'; n])
        ));
        start += 1;
    }
    let mut end = hi[0];
    let hi_alt = if !hi_nine {
        end -= 1;
        Some(format!(
            "{}(?:{})",
            hi[0] as char,
            eq_len(&vec![b'0'; n], &hi[1..])
        ))
    } else {
        None
    };
    if start <= end {
        alts.push(format!("[{}-{}][0-9]{{{n}}}", start as char, end as char));
    }
    alts.extend(hi_alt);
    format!("(?:{})", alts.join("|"))
}

/// A decimal bound: sign, integer digits (no leading zeros) and fraction digits (no trailing zeros).
pub(super) struct Dec {
    neg: bool,
    int: String,
    frac: String,
}

impl Dec {
    pub(super) fn from_f64(f: f64) -> Dec {
        let s = format!("{}", f.abs());
        let (i, fr) = s.split_once('.').unwrap_or((&s, ""));
        let int = i.trim_start_matches('0');
        Dec {
            neg: f < 0.0,
            int: if int.is_empty() {
                "0".into()
            } else {
                int.into()
            },
            frac: fr.trim_end_matches('0').into(),
        }
    }
    fn is_zero(&self) -> bool {
        self.int == "0" && self.frac.is_empty()
    }
}

const FRAC_OPT: &str = r"(?:\.[0-9]+)?";
const MAG: &str = r"(?:0|[1-9][0-9]*)(?:\.[0-9]+)?";

/// Regex for magnitudes (unsigned numbers) `>= m` (or `> m`).
fn ge_mag(m: &Dec, excl: bool) -> String {
    let mut alts = Vec::new();
    let mi: u128 = m.int.parse().unwrap_or(u128::MAX);
    if mi < MAX_MAG {
        alts.push(format!("(?:{}){FRAC_OPT}", pos_range(mi + 1, MAX_MAG)));
    }
    if m.int.len() <= 19 {
        let tail = if m.frac.is_empty() {
            if excl {
                r"\.[0-9]*[1-9][0-9]*".to_string()
            } else {
                FRAC_OPT.to_string()
            }
        } else {
            format!(r"\.{}", frac_ge(m.frac.as_bytes(), excl))
        };
        alts.push(format!("{}{tail}", m.int));
    }
    if alts.is_empty() {
        return "[^\\s\\S]".into();
    }
    format!("(?:{})", alts.join("|"))
}

/// Regex for magnitudes `<= m` (or `< m`).
fn le_mag(m: &Dec, excl: bool) -> String {
    if m.int.len() > 19 {
        return MAG.into();
    }
    let mut alts = Vec::new();
    let mi: u128 = m.int.parse().unwrap_or(0);
    if mi >= 1 {
        alts.push(format!("(?:{}){FRAC_OPT}", pos_range(0, mi - 1)));
    }
    if m.frac.is_empty() {
        if !excl {
            alts.push(format!(r"{}(?:\.0+)?", m.int));
        }
    } else if let Some(f) = frac_le(m.frac.as_bytes(), excl) {
        alts.push(format!(r"{}(?:\.{f})?", m.int));
    } else {
        alts.push(m.int.clone());
    }
    if alts.is_empty() {
        return "[^\\s\\S]".into();
    }
    format!("(?:{})", alts.join("|"))
}

/// Digit strings `d` with `d >= f` (or `>`), comparing as zero-padded fractions.
fn frac_ge(f: &[u8], excl: bool) -> String {
    if f.is_empty() {
        return if excl {
            "[0-9]*[1-9][0-9]*".into()
        } else {
            "[0-9]*".into()
        };
    }
    let mut alts = Vec::new();
    if f[0] < b'9' {
        alts.push(format!("[{}-9][0-9]*", (f[0] + 1) as char));
    }
    alts.push(format!("{}{}", f[0] as char, frac_ge(&f[1..], excl)));
    format!("(?:{})", alts.join("|"))
}

/// Digit strings `d` with `d <= f` (or `<`), or None when there are none.
fn frac_le(f: &[u8], excl: bool) -> Option<String> {
    if f.is_empty() {
        return if excl { None } else { Some("0*".into()) };
    }
    let mut alts = Vec::new();
    if f[0] > b'0' {
        alts.push(format!("[0-{}][0-9]*", (f[0] - 1) as char));
    }
    match frac_le(&f[1..], excl) {
        // `f[0]` alone pads with zeros, below a non-empty (non-zero) rest.
        Some(rest) if f.len() > 1 => alts.push(format!("{}(?:{rest})?", f[0] as char)),
        Some(rest) => alts.push(format!("{}{rest}", f[0] as char)),
        None if f.len() > 1 => alts.push((f[0] as char).to_string()),
        None => {}
    }
    (!alts.is_empty()).then(|| format!("(?:{})", alts.join("|")))
}

/// Regex for numbers `>= b` (or `> b`).
pub(super) fn ge_regex(b: &Dec, excl: bool) -> String {
    if !b.neg || b.is_zero() {
        ge_mag(b, excl)
    } else {
        format!("{MAG}|-{}", le_mag(b, excl))
    }
}

/// Regex for numbers `<= b` (or `< b`).
pub(super) fn le_regex(b: &Dec, excl: bool) -> String {
    if b.neg && !b.is_zero() {
        format!("-{}", ge_mag(b, excl))
    } else {
        // Negative zero equals zero; `-0` is excluded when zero itself is.
        let neg = if b.is_zero() && excl {
            r"-(?:0\.[0-9]*[1-9][0-9]*|[1-9][0-9]*(?:\.[0-9]+)?)".to_string()
        } else {
            format!("-{MAG}")
        };
        format!("{neg}|{}", le_mag(b, excl))
    }
}

/// Most significant digits of a number under `multipleOf`: with at most 15, the written
/// decimal is the shortest spelling of its double, so validators that divide doubles (and
/// those that compare decimals) agree with the automaton on every value it allows.
pub(super) const MULTIPLE_OF_DIGITS: u8 = 15;

/// Most remainder × fraction-place states of one `multipleOf` automaton: a step `M × 10^-s`
/// (`M` an integer) needs `M × (s + 2)` of them, times the significant-digit counter.
pub(super) const MULTIPLE_OF_MAX_STEP_STATES: u64 = 600;

/// A `multipleOf` step as `(M, s)`: the value is `M × 10^-s`, `M` a positive integer without
/// trailing zeros when `s > 0`. `None` for zero, negative, or more than 18 significant digits.
pub(super) fn decimal_step(n: &serde_json::Number) -> Option<(u64, u32)> {
    let text = n.to_string();
    let (mant, exp) = match text.find(['e', 'E']) {
        Some(i) => (&text[..i], text[i + 1..].parse::<i32>().ok()?),
        None => (&text[..], 0),
    };
    if mant.starts_with('-') {
        return None;
    }
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    let digits = format!("{int}{frac}");
    let digits = digits.trim_start_matches('0');
    // value = digits × 10^(exp - frac.len())
    let mut scale = exp - frac.len() as i32;
    let mut digits = digits.to_string();
    while scale < 0 && digits.ends_with('0') {
        digits.pop();
        scale += 1;
    }
    if digits.is_empty() || digits.len() > 18 {
        return None;
    }
    let mut m: u64 = digits.parse().ok()?;
    while scale > 0 {
        m = m.checked_mul(10)?;
        scale -= 1;
    }
    Some((m, (-scale) as u32))
}

/// The state of the `multipleOf` automaton.
#[derive(Clone, PartialEq, Eq, Hash)]
struct MultipleState {
    phase: MultiplePhase,
    /// The digits read so far (integer part, then at most `s` fraction digits) modulo `M`.
    rem: u64,
    /// Fraction digits read, capped at `s + 1` (past `s`, only zeros may follow).
    frac: u32,
    /// Significant digits written (from the first non-zero one).
    sig: u8,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum MultiplePhase {
    Start,
    Minus,
    /// The integer part is `0`.
    Zero,
    Int,
    Dot,
    Frac,
}

/// The numbers (JSON spelling, no exponent, at most [`MULTIPLE_OF_DIGITS`] significant digits)
/// that are integer multiples of `M × 10^-s`, decided exactly on the decimal digits: `x` is a
/// multiple when `x × 10^s` is an integer divisible by `M`, i.e. every fraction digit past the
/// `s`-th is zero and the digits up to it, read as an integer, are `0 mod M`.
pub(super) fn multiple_of_dfa(
    m: u64,
    s: u32,
    max_states: usize,
) -> Result<crate::grammar::dfa::Dfa, crate::grammar::dfa::DfaError> {
    use MultiplePhase::*;
    let mut classes = [0u8; 256];
    for (i, b) in (b'0'..=b'9').enumerate() {
        classes[b as usize] = 1 + i as u8;
    }
    classes[b'-' as usize] = 11;
    classes[b'.' as usize] = 12;
    // 10^k mod m for the fraction places left at the end.
    let pow10 = |k: u32| -> u64 {
        let mut p = 1 % m;
        for _ in 0..k {
            p = (p as u128 * 10 % m as u128) as u64;
        }
        p
    };
    let digit = |st: &MultipleState, d: u64| -> Option<MultipleState> {
        let sig = if st.sig > 0 || d != 0 { st.sig + 1 } else { 0 };
        if sig > MULTIPLE_OF_DIGITS {
            return None;
        }
        let rem = ((st.rem as u128 * 10 + d as u128) % m as u128) as u64;
        Some(MultipleState {
            sig,
            rem,
            ..st.clone()
        })
    };
    let start = MultipleState {
        phase: Start,
        rem: 0,
        frac: 0,
        sig: 0,
    };
    Dfa::build(
        start,
        max_states,
        &classes,
        |st, b| {
            let with = |phase: MultiplePhase, x: MultipleState| MultipleState { phase, ..x };
            match (st.phase, b) {
                (Start, b'-') => Some(with(Minus, st.clone())),
                (Start | Minus, b'0') => Some(with(Zero, st.clone())),
                (Start | Minus, b'1'..=b'9') | (Int, b'0'..=b'9') => {
                    digit(st, u64::from(b - b'0')).map(|x| with(Int, x))
                }
                (Zero | Int, b'.') => Some(with(Dot, st.clone())),
                (Dot | Frac, b'0'..=b'9') => {
                    if st.frac >= s {
                        // Past the step's places: only zeros (they change nothing).
                        if b != b'0' {
                            return None;
                        }
                        let x = MultipleState {
                            frac: s + 1,
                            ..st.clone()
                        };
                        let sig = if x.sig > 0 { x.sig + 1 } else { 0 };
                        (sig <= MULTIPLE_OF_DIGITS).then_some(MultipleState {
                            phase: Frac,
                            sig,
                            ..x
                        })
                    } else {
                        digit(st, u64::from(b - b'0')).map(|x| MultipleState {
                            phase: Frac,
                            frac: st.frac + 1,
                            ..x
                        })
                    }
                }
                _ => None,
            }
        },
        |st| match st.phase {
            Zero | Int | Frac => {
                let placed = st.frac.min(s);
                (st.rem as u128 * pow10(s - placed) as u128 % m as u128) == 0
            }
            _ => false,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::dfa::Op;

    #[test]
    fn multiple_of_is_exact_on_decimals() {
        let steps = ["1.5", "0.01", "7", "0.0001", "25", "1e-8", "2.5e1", "0.3"];
        for step in steps {
            let n: serde_json::Number = serde_json::from_str(step).unwrap();
            let (m, s) = decimal_step(&n).unwrap();
            let d = multiple_of_dfa(m, s, 100_000).unwrap();
            // x = k / 1000 for k in a range, spelled plainly and with extra zeros.
            for k in -3000i64..3000 {
                let abs = k.unsigned_abs();
                let text = format!(
                    "{}{}.{:03}",
                    if k < 0 { "-" } else { "" },
                    abs / 1000,
                    abs % 1000
                );
                // exact: k/1000 = j × M × 10^-s  ⇔  k × 10^s divisible by M × 1000
                let want = (k as i128 * 10i128.pow(s)) % (m as i128 * 1000) == 0;
                assert_eq!(d.matches(text.as_bytes()), want, "{text} multipleOf {step}");
                let short = text.trim_end_matches('0').trim_end_matches('.');
                if !short.is_empty() && short != "-" {
                    assert_eq!(
                        d.matches(short.as_bytes()),
                        want,
                        "{short} multipleOf {step}"
                    );
                }
            }
        }
        assert_eq!(
            decimal_step(&serde_json::from_str("1.50").unwrap()),
            Some((15, 1))
        );
        assert_eq!(
            decimal_step(&serde_json::from_str("100").unwrap()),
            Some((100, 0))
        );
        assert_eq!(decimal_step(&serde_json::from_str("0").unwrap()), None);
        assert_eq!(decimal_step(&serde_json::from_str("-2").unwrap()), None);
        // At most 15 significant digits; no exponent.
        let d = multiple_of_dfa(1, 0, 100_000).unwrap();
        assert!(d.matches(b"999999999999999"));
        assert!(!d.matches(b"1000000000000000"));
        assert!(d.matches(b"0.000"));
        assert!(!d.matches(b"1e2"));
        assert!(!d.matches(b"01"));
    }

    fn dfa(re: &str) -> Dfa {
        Dfa::from_regex(re, 100_000).unwrap()
    }

    /// Every range's automaton, built directly, accepts what the range's regex and the
    /// suffix accept.
    #[test]
    fn integer_range_automata_equal_the_range_regexes() {
        let r = IJSON_MAX_INT;
        let max = MAX_MAG as i128;
        let ends = [
            -max - 1,
            -max,
            -r - 1,
            -r,
            -123_456,
            -1000,
            -999,
            -100,
            -17,
            -10,
            -9,
            -1,
            0,
            1,
            5,
            9,
            10,
            99,
            100,
            101,
            250,
            1_000_000,
            r,
            r + 1,
            max,
            max + 1,
        ];
        for &lo in &ends {
            for &hi in &ends {
                for (zeros, suffix) in [(0, ""), (1, r"(?:\.0)?"), (20, r"(?:\.0{1,20})?")] {
                    let direct = int_range_dfa(lo, hi, zeros, 100_000).unwrap();
                    let Some(re) = int_range_regex(lo, hi) else {
                        assert!(direct.is_none(), "[{lo}, {hi}] is empty");
                        continue;
                    };
                    let direct = direct.expect("not empty");
                    let slow = dfa(&format!("(?:{re}){suffix}"));
                    for (a, b) in [(&direct, &slow), (&slow, &direct)] {
                        assert!(
                            a.product(b, Op::AndNot, 1_000_000).unwrap().is_empty(),
                            "[{lo}, {hi}], {zeros} zeros"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn integer_ranges_are_exact() {
        for (lo, hi) in [
            (0, 0),
            (-5, 5),
            (7, 123),
            (-1000, -17),
            (1, 99),
            (10, 10),
            (-3, 250),
        ] {
            let re = int_range_regex(i128::from(lo), i128::from(hi)).unwrap();
            let d = dfa(&re);
            for x in -1200i64..1200 {
                assert_eq!(
                    d.matches(x.to_string().as_bytes()),
                    x >= lo && x <= hi,
                    "{x} in [{lo},{hi}]: {re}"
                );
            }
        }
    }

    #[test]
    fn number_bounds_are_exact() {
        let cases = [
            (0.5, false),
            (-2.25, true),
            (0.0, true),
            (3.0, false),
            (-0.1, false),
        ];
        let samples: Vec<String> = {
            let mut v = Vec::new();
            for i in -400..400 {
                let x = i as f64 / 100.0;
                v.push(format!("{x}"));
                v.push(format!("{x:.3}"));
            }
            v
        };
        for (b, ex) in cases {
            let shape =
                number_spelling_dfa(NumberSpelling::JSON.without_exponent(), 100_000).unwrap();
            let ge = shape
                .product(&dfa(&ge_regex(&Dec::from_f64(b), ex)), Op::And, 100_000)
                .unwrap();
            let le = shape
                .product(&dfa(&le_regex(&Dec::from_f64(b), ex)), Op::And, 100_000)
                .unwrap();
            for s in &samples {
                let x: f64 = s.parse().unwrap();
                if s.starts_with("-0") && x == 0.0 {
                    // Negative zero is never spelled.
                    assert!(
                        !ge.matches(s.as_bytes()) && !le.matches(s.as_bytes()),
                        "{s}"
                    );
                    continue;
                }
                let want_ge = if ex { x > b } else { x >= b };
                let want_le = if ex { x < b } else { x <= b };
                assert_eq!(ge.matches(s.as_bytes()), want_ge, "{s} >= {b} excl={ex}");
                assert_eq!(le.matches(s.as_bytes()), want_le, "{s} <= {b} excl={ex}");
            }
        }
    }

    /// The plain JSON spelling is the digit-bounded JSON number grammar less negative zero.
    #[test]
    fn json_spelling_is_json_numbers_without_negative_zero() {
        let shape = r"-?(?:0|[1-9][0-9]{0,18})(?:\.[0-9]{1,20})?";
        let exp = r"(?:[eE][+-]?[0-9]{1,2})?";
        for (spelling, re) in [
            (NumberSpelling::JSON, format!("{shape}{exp}")),
            (NumberSpelling::JSON.without_exponent(), shape.to_string()),
        ] {
            let neg_zero = dfa(&format!(r"-0(?:\.0+)?{exp}"));
            let want = dfa(&re).product(&neg_zero, Op::AndNot, 100_000).unwrap();
            let got = number_spelling_dfa(spelling, 100_000).unwrap();
            for (a, b) in [(&want, &got), (&got, &want)] {
                assert!(
                    a.product(b, Op::AndNot, 100_000).unwrap().is_empty(),
                    "{re}"
                );
            }
        }
    }

    /// `(digits, exponent)` with the value `0.digits × 10^exponent`, no leading or trailing
    /// zero in `digits` (empty for zero): equal values have equal forms.
    fn decimal_form(text: &str) -> (String, i64) {
        let text = text.trim_start_matches('-');
        let (mantissa, exp) = match text.split_once(['e', 'E']) {
            Some((m, e)) => (m, e.parse::<i64>().unwrap()),
            None => (text, 0),
        };
        let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        let digits = format!("{int}{frac}");
        let lead = digits.len() - digits.trim_start_matches('0').len();
        let digits = digits.trim_matches('0').to_string();
        if digits.is_empty() {
            return (digits, 0);
        }
        (digits, exp + int.len() as i64 - lead as i64)
    }

    /// I-JSON numbers: accepted exactly when the syntax holds and at most 15 significant
    /// digits are written, and every accepted spelling reads back as the same value.
    #[test]
    fn ijson_numbers_read_back_exactly() {
        let d = number_spelling_dfa(NumberSpelling::IJSON, 100_000).unwrap();
        let syntax = dfa(r"-?(?:0|[1-9][0-9]{0,14})(?:\.[0-9]{1,20})?(?:[eE][+-]?[0-9]{1,2})?");
        let significant = |t: &str| {
            let m = t.split(['e', 'E']).next().unwrap().replace(['-', '.'], "");
            m.trim_start_matches('0').len()
        };
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut accepted = 0;
        for _ in 0..200_000 {
            let len = 1 + next(24) as usize;
            let text: String = (0..len)
                .map(|_| match next(20) {
                    0 => '-',
                    1 => '.',
                    2 => 'e',
                    3 => '0',
                    4..=6 => '0',
                    k => char::from(b'0' + (k % 10) as u8),
                })
                .collect();
            let want = syntax.matches(text.as_bytes())
                && significant(&text) <= 15
                && !(text.starts_with('-') && decimal_form(&text).0.is_empty());
            assert_eq!(d.matches(text.as_bytes()), want, "{text}");
            if want {
                accepted += 1;
                let x: f64 = text.parse().unwrap();
                assert!(x.is_finite(), "{text}");
                assert_eq!(
                    decimal_form(&format!("{x:e}")),
                    decimal_form(&text),
                    "{text}"
                );
            }
        }
        assert!(accepted > 1_000, "only {accepted} samples were numbers");
        for (text, want) in [
            ("123456789012345", true),
            ("1234567890123456", false),
            ("9007199254740991", false),
            ("0.000000000000000000001", false),
            ("0.00000000000000000001", true),
            ("1.23456789012345e-99", true),
            ("1.234567890123456", false),
            ("-0", false),
            ("-0.0", false),
            ("-0e5", false),
            ("-0.5", true),
            ("0e5", true),
            ("4444444444444444444", false),
        ] {
            assert_eq!(d.matches(text.as_bytes()), want, "{text}");
        }
    }

    #[test]
    fn integer_ranges_default_to_what_doubles_hold() {
        let max = MAX_MAG as i128;
        let r = IJSON_MAX_INT;
        assert_eq!(int_range(None, None, r), (-r, r));
        assert_eq!(int_range(Some(0), None, r), (0, r));
        // Bounds past the reach keep their side open to 19 digits.
        assert_eq!(int_range(Some(r + 5), None, r), (r + 5, max));
        assert_eq!(int_range(None, Some(-r - 5), r), (-max, -r - 5));
        assert_eq!(int_range(None, Some(10i128.pow(30)), r), (-r, max + 1));
        let re = int_range_regex(-r, r).unwrap();
        let d = dfa(&re);
        for (x, want) in [
            ("9007199254740991", true),
            ("-9007199254740991", true),
            ("9007199254740992", false),
            ("-9007199254740992", false),
            ("4444444444444444", true),
            ("4444444444444444444", false),
            ("-0", false),
            ("0", true),
        ] {
            assert_eq!(d.matches(x.as_bytes()), want, "{x}");
        }
    }
}
