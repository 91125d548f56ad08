//! Numbers as exact digit automata: integer ranges and decimal bounds as regular expressions.

/// A JSON number (bounded digits; an exponent of at most two digits keeps every value a finite
/// double, which is what JSON parsers give their users).
pub(super) const NUMBER: &str =
    r"-?(?:0|[1-9][0-9]{0,18})(?:\.[0-9]{1,20})?(?:[eE][+-]?[0-9]{1,2})?";
/// A JSON number without exponent (used with bounds).
pub(super) const BOUNDED_NUMBER: &str = r"-?(?:0|[1-9][0-9]{0,18})(?:\.[0-9]{1,20})?";
/// Largest magnitude with 19 digits.
const MAX_MAG: u128 = 9_999_999_999_999_999_999;

/// Regex for integers in `lo..=hi` (None when empty); bounds beyond 19 digits mean no bound.
pub(super) fn int_range_regex(lo: Option<f64>, hi: Option<f64>) -> Option<String> {
    let m = MAX_MAG as f64;
    let lo: i128 = match lo {
        Some(l) if l > m => return None,
        Some(l) if l >= -m => l as i128,
        _ => -(MAX_MAG as i128),
    };
    let hi: i128 = match hi {
        Some(h) if h < -m => return None,
        Some(h) if h <= m => h as i128,
        _ => MAX_MAG as i128,
    };
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

/// Regex for non-negative integers in `a..=b`, without leading zeros.
fn pos_range(a: u128, b: u128) -> String {
    let digits = |x: u128| x.to_string().len();
    let mut alts = Vec::new();
    for len in digits(a)..=digits(b) {
        let lo = if len == 1 {
            0
        } else {
            10u128.pow(len as u32 - 1)
        };
        let hi = 10u128.pow(len as u32) - 1;
        let (lo, hi) = (lo.max(a), hi.min(b));
        if lo <= hi {
            alts.push(eq_len(lo.to_string().as_bytes(), hi.to_string().as_bytes()));
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::dfa::{Dfa, Op};

    fn dfa(re: &str) -> Dfa {
        Dfa::from_regex(re, 100_000).unwrap()
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
            let re = int_range_regex(Some(lo as f64), Some(hi as f64)).unwrap();
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
            let shape = dfa(BOUNDED_NUMBER);
            let ge = shape
                .product(&dfa(&ge_regex(&Dec::from_f64(b), ex)), Op::And, 100_000)
                .unwrap();
            let le = shape
                .product(&dfa(&le_regex(&Dec::from_f64(b), ex)), Op::And, 100_000)
                .unwrap();
            for s in &samples {
                let x: f64 = s.parse().unwrap();
                if s.starts_with("-0") && x == 0.0 {
                    continue;
                }
                let want_ge = if ex { x > b } else { x >= b };
                let want_le = if ex { x < b } else { x <= b };
                assert_eq!(ge.matches(s.as_bytes()), want_ge, "{s} >= {b} excl={ex}");
                assert_eq!(le.matches(s.as_bytes()), want_le, "{s} <= {b} excl={ex}");
            }
        }
    }
}
