//! Strings, numbers, integers, booleans and null: `type`-driven compilation of the scalar part
//! of a schema into one lexeme automaton (lengths, `pattern`, `format`, numeric bounds), with
//! compiled lexemes shared through the compile's [`crate::Caches`] by their defining keywords
//! (the scalar roles of the keyword table; see [`Compiler::scalar_key`]). The scalar part reads
//! the schema once, as a typed [`Schema`] (`typed.rs`).

use super::typed::Schema;
use super::*;

impl Compiler<'_> {
    pub(super) fn compile_typed(&mut self, obj: &Map<String, Value>, path: &str) -> Result<NodeId> {
        let s = Schema::read(obj);
        let mut types = match s.get(Keyword::Type) {
            Some(t) => type_set(t, path)?,
            None => T_ALL,
        };
        if s.is_true(Keyword::Nullable) {
            types |= T_NULL;
        }
        if types & T_NUM != 0 {
            types &= !T_INT;
        }
        let mut alts = Vec::new();
        let mut scalar_types = types & (T_NULL | T_BOOL | T_INT | T_NUM | T_STR);
        if self.enc == Encoding::Gemma && scalar_types & T_STR != 0 {
            // Gemma's strings are their quotes around a lexeme, beside the other scalars'.
            let key = self.scalar_key(&s, T_STR);
            let content = self.gemma_content(key, |this| this.string_dfa_of(&s, path), path)?;
            alts.push(self.gemma_string(content, path)?);
            scalar_types &= !T_STR;
        }
        if scalar_types != 0 {
            let key = self.scalar_key(&s, scalar_types);
            match self.string_of_length_in_string(&s, scalar_types, &key, path)? {
                Some(d) => alts.push(self.b.lexeme(d)?),
                None => {
                    let d = self.cached(key, |this| this.scalar_dfa(&s, scalar_types, path))?;
                    alts.push(self.lexeme(d)?);
                }
            }
        }
        if types & T_OBJ != 0 {
            alts.push(self.compile_object(obj, path)?);
        }
        if types & T_ARR != 0 {
            alts.push(self.compile_array(obj, path)?);
        }
        match alts.len() {
            0 => self.b.push(Node::Never),
            1 => Ok(alts[0]),
            _ => self.b.push(Node::Union(alts)),
        }
    }

    /// The cache key ([`crate::Caches`]) of the scalar automaton of `s` for the scalar types in
    /// `types` (see [`Compiler::scalar_dfa`]).
    ///
    /// The scalar part depends only on the types (`type` and `nullable`, folded into `types`),
    /// the draft's notion of integers and the keywords whose role is scalar in the keyword
    /// table ([`Role::is_scalar`](keywords::Role::is_scalar)): the key holds the canonical form
    /// of every one of those fields ([`Schema::canonical`]), so a scalar keyword cannot be left
    /// out of it. Compiled lexemes are shared through the caches (formats, bounded strings and
    /// numbers recur across tool sets).
    pub(super) fn scalar_key(&self, s: &Schema, types: u8) -> Lexeme {
        // `format` as an annotation by request does not change the automaton.
        let format_annotation = self.opts.format_annotation;
        Lexeme::Scalar {
            types,
            draft4: self.draft4_integers && types & T_INT != 0,
            keywords: s.canonical(|k| {
                k.role().is_scalar() && !(k == Keyword::Format && format_annotation)
            }),
        }
    }

    /// What an automaton built by [`Compiler::string_dfa`] depends on besides its schema and
    /// what [`Compiler::cached`] adds to every key: whether `format` is an annotation. Part of
    /// the key of every cached automaton built from a whole schema object (the dialects' raw
    /// values), where [`Compiler::scalar_key`] is not used.
    pub(crate) fn string_options_key(&self) -> &'static str {
        if self.opts.format_annotation {
            "format-annotation"
        } else {
            "format-asserted"
        }
    }

    /// One automaton for the scalar types in `types` (a union of their lexemes).
    pub(super) fn scalar_dfa(&mut self, s: &Schema, types: u8, path: &str) -> Result<Dfa> {
        let max = self.opts.max_lexeme_states;
        let mut parts: Vec<Dfa> = Vec::new();
        if types & T_NULL != 0 {
            parts.push(self.b.regex(self.literal("null"), path)?);
        }
        if types & T_BOOL != 0 {
            let re = format!("{}|{}", self.literal("true"), self.literal("false"));
            parts.push(self.b.regex(&re, path)?);
        }
        if types & (T_INT | T_NUM) != 0 {
            parts.push(self.number_dfa(s, types & T_NUM == 0, path)?);
        }
        if types & T_STR != 0 {
            match self.string_of_length(s, path)? {
                Some(d) => parts.push(d),
                None => {
                    let d = self.string_dfa_of(s, path)?;
                    parts.push(self.quote(&d, path)?);
                }
            }
        }
        let mut acc = parts.pop().expect("at least one scalar type");
        for p in parts {
            acc = acc
                .product(&p, Op::Or, max)
                .map_err(|e| self.b.dfa_err(e, path, ""))?;
        }
        Ok(acc)
    }

    /// The lengths `min..=max` of a string whose only constraints are a `maxLength` (and a
    /// `minLength`); `None` for any other string.
    fn length_only(&self, s: &Schema, path: &str) -> Result<Option<(u64, u64)>> {
        if !s.strings(Keyword::Pattern, path)?.is_empty()
            || !(self.opts.format_annotation || s.strings(Keyword::Format, path)?.is_empty())
        {
            return Ok(None);
        }
        let min = s.count(Keyword::MinLength, path)?.unwrap_or(0);
        let max = s.count(Keyword::MaxLength, path)?.filter(|&m| m >= min);
        Ok(max.map(|max| (min, max)))
    }

    /// A string-only scalar with just a length, inside arguments written as a JSON string
    /// ([`Encoding::JsonInString`]): its lexeme as the outer string spells it, built directly
    /// ([`Dfa::json_in_string_of_length`]) rather than by escaping the literal afterwards
    /// ([`Compiler::lexeme`]), which cost about 1 M instructions per `maxLength: 100` string.
    /// `None` where that does not apply. `key` is the scalar's cache key.
    fn string_of_length_in_string(
        &mut self,
        s: &Schema,
        types: u8,
        key: &Lexeme,
        path: &str,
    ) -> Result<Option<Arc<Dfa>>> {
        if self.enc != Encoding::JsonInString || types != T_STR {
            return Ok(None);
        }
        let Some((min, max)) = self.length_only(s, path)? else {
            return Ok(None);
        };
        let limit = self.opts.max_lexeme_states;
        let one = self.char_spelling(CharSpelling::JsonInString, path)?;
        self.cached(Lexeme::InString(Box::new(key.clone())), |this| {
            Dfa::json_in_string_of_length(&one, min, max, limit)
                .map_err(|e| this.b.dfa_err(e, path, ""))
        })
        .map(Some)
    }

    /// A string whose only constraints are a `maxLength` (and a `minLength`), spelled as a
    /// literal of the current encoding directly ([`Dfa::json_string_of_length`],
    /// [`Dfa::python_string_of_length`]: the language of quoting its content, built in a
    /// fraction of the time); `None` for any other string.
    fn string_of_length(&mut self, s: &Schema, path: &str) -> Result<Option<Dfa>> {
        let Some((min, max)) = self.length_only(s, path)? else {
            return Ok(None);
        };
        let limit = self.opts.max_lexeme_states;
        match self.enc {
            Encoding::Json | Encoding::JsonInString => {
                let one = self.char_spelling(CharSpelling::Json, path)?;
                Dfa::json_string_of_length(&one, min, max, limit)
            }
            Encoding::Python => {
                let single = self.char_spelling(CharSpelling::Python(b'\''), path)?;
                let double = self.char_spelling(CharSpelling::Python(b'"'), path)?;
                Dfa::python_string_of_length(&single, &double, min, max, limit)
            }
            // Not one lexeme ([`Compiler::gemma_string`]).
            Encoding::Gemma => return Ok(None),
        }
        .map(Some)
        .map_err(|e| self.b.dfa_err(e, path, ""))
    }

    /// One character's spelling inside a literal ([`Dfa::char_spelling`]), kept in the
    /// compile's caches (and read from the table of standard lexemes where it has it).
    fn char_spelling(&mut self, spelling: CharSpelling, path: &str) -> Result<Arc<Dfa>> {
        self.cached(Lexeme::Char(spelling), |this| {
            Dfa::char_spelling(spelling).map_err(|e| this.b.dfa_err(e, path, ""))
        })
    }

    /// The automaton over a string's decoded content, for the string keywords of `obj`.
    pub(crate) fn string_dfa(&mut self, obj: &Map<String, Value>, path: &str) -> Result<Dfa> {
        self.string_dfa_of(&Schema::read(obj), path)
    }

    /// The automaton over a string's decoded content, for the string keywords of `s`.
    pub(super) fn string_dfa_of(&mut self, s: &Schema, path: &str) -> Result<Dfa> {
        let mut parts: Vec<Dfa> = Vec::new();
        let min = s.count(Keyword::MinLength, path)?;
        let max = s.count(Keyword::MaxLength, path)?;
        if min.is_some() || max.is_some() {
            let min = min.unwrap_or(0);
            if max.is_some_and(|m| m < min) {
                return Ok(Dfa::literals(std::iter::empty(), 10).unwrap());
            }
            let d = Dfa::char_count(min, max, self.opts.max_lexeme_states)
                .map_err(|e| self.b.dfa_err(e, path, ""))?;
            parts.push(d);
        }
        for p in s.strings(Keyword::Pattern, path)? {
            parts.push(self.pattern_dfa(p, path)?);
        }
        let formats = s.strings(Keyword::Format, path)?;
        for f in formats.iter().filter(|_| !self.opts.format_annotation) {
            match format_regex(f) {
                Some(re) => parts.push(
                    match format_automata::prebuilt(&re, self.opts.max_lexeme_states) {
                        Some(d) => d,
                        None => self.b.regex(&re, path)?,
                    },
                ),
                None => self.b.unsupported(
                    Keyword::Format.name(),
                    path,
                    &format!("format {f:?} is not supported"),
                )?,
            }
        }
        let mut acc = match parts.pop() {
            Some(d) => d,
            None => self.b.regex("(?s:.)*", path)?,
        };
        for p in parts {
            acc = self.b.and(&acc, &p, path)?;
        }
        Ok(acc)
    }

    /// The strings an ECMA-262 `pattern` matches somewhere in (a search, as `RegExp.test`).
    pub(super) fn pattern_dfa(&self, p: &str, path: &str) -> Result<Dfa> {
        let refused = |message: String| Error::InvalidPattern {
            pattern: p.into(),
            path: ptr(path),
            message,
        };
        if let Some(why) = ecma_unsupported(p) {
            return Err(refused(why));
        }
        let body = translate_ecma(p);
        if let Some(why) = pattern_syntax_error(&body, p) {
            return Err(refused(why));
        }
        // A search is a whole-input match with any text around; an end every match of the
        // pattern is anchored at (`^…`, `…$`, as in most tool schemas) needs no text there,
        // and leaving it out spares a determinization of `(?s:.)*` on that side.
        let (start, end) = anchored_ends(&body);
        let around = |anchored: bool| if anchored { "" } else { "(?s:.)*" };
        let re = format!("{}(?:{body}){}", around(start), around(end));
        Dfa::from_regex(&re, self.opts.max_lexeme_states).map_err(|e| match e {
            DfaError::Regex(m) => refused(m),
            DfaError::TooLarge => Error::LimitExceeded {
                what: "states in one lexeme automaton",
                limit: self.opts.max_lexeme_states,
                option: "max_lexeme_states",
                path: ptr(path),
            },
        })
    }

    /// Numbers (or integers) within the bounds and, with `multipleOf`, multiples of every step.
    pub(super) fn number_dfa(&mut self, s: &Schema, integer: bool, path: &str) -> Result<Dfa> {
        let mut acc = self.bounded_number_dfa(s, integer, path)?;
        // Merged `allOf` parts: every step must hold.
        for n in s.steps(path)? {
            if n.as_f64().is_none_or(|f| f <= 0.0) {
                return Err(invalid(path, "multipleOf must be a number greater than 0"));
            }
            let Some((m, s)) = numbers::decimal_step(n) else {
                self.b.unsupported(
                    Keyword::MultipleOf.name(),
                    path,
                    &format!("the step {n} has more than 18 significant digits"),
                )?;
                continue;
            };
            if m.saturating_mul(u64::from(s) + 2) > numbers::MULTIPLE_OF_MAX_STEP_STATES {
                self.b.unsupported(
                    Keyword::MultipleOf.name(),
                    path,
                    &format!(
                        "the step {n} needs {m} remainders × {} places, over the {} an exact automaton is built for",
                        s + 2,
                        numbers::MULTIPLE_OF_MAX_STEP_STATES
                    ),
                )?;
                continue;
            }
            let d = numbers::multiple_of_dfa(m, s, self.opts.max_lexeme_states)
                .map_err(|e| self.b.dfa_err(e, path, ""))?;
            acc = self.b.and(&acc, &d, path)?;
        }
        Ok(acc)
    }

    fn bounded_number_dfa(&mut self, s: &Schema, integer: bool, path: &str) -> Result<Dfa> {
        // (bound, exclusive), lower and upper.
        let mut lowers: Vec<(&Number, bool)> = Vec::new();
        let mut uppers: Vec<(&Number, bool)> = Vec::new();
        // draft-04 style boolean exclusives
        let excl_min_bool = s.is_true(Keyword::ExclusiveMinimum);
        let excl_max_bool = s.is_true(Keyword::ExclusiveMaximum);
        if let Some(m) = s.number(Keyword::Minimum, path)? {
            lowers.push((m, excl_min_bool));
        }
        if let Some(m) = s.number(Keyword::ExclusiveMinimum, path)? {
            lowers.push((m, true));
        }
        if let Some(m) = s.number(Keyword::Maximum, path)? {
            uppers.push((m, excl_max_bool));
        }
        if let Some(m) = s.number(Keyword::ExclusiveMaximum, path)? {
            uppers.push((m, true));
        }
        if integer {
            let lo = lowers
                .iter()
                .map(|&(b, ex)| integer_bound(b, ex, Side::Lower))
                .max();
            let hi = uppers
                .iter()
                .map(|&(b, ex)| integer_bound(b, ex, Side::Upper))
                .min();
            let reach = if self.opts.ijson_numbers {
                numbers::IJSON_MAX_INT
            } else {
                i128::MAX
            };
            let (lo, hi) = numbers::int_range(lo, hi, reach);
            // `1.0` is an integer; by default only one zero, as a model that writes
            // `2.00000000000000000000` for an integer is running on, not spelling it.
            let zeros = if self.draft4_integers {
                0
            } else if self.opts.ijson_numbers {
                1
            } else {
                20
            };
            return match numbers::int_range_dfa(lo, hi, zeros, self.opts.max_lexeme_states) {
                Ok(Some(d)) => Ok(d),
                Ok(None) => Ok(Dfa::literals(std::iter::empty(), 10).unwrap()),
                Err(e) => Err(self.b.dfa_err(e, path, "")),
            };
        }
        // I-JSON digits, unless a bound lies past what they reach.
        let past_ijson = lowers
            .iter()
            .chain(&uppers)
            .any(|(b, _)| b.as_f64().is_none_or(|f| f.abs() >= 1e15));
        let spelling = if self.opts.ijson_numbers && !past_ijson {
            NumberSpelling::IJSON
        } else {
            NumberSpelling::JSON
        };
        if lowers.is_empty() && uppers.is_empty() {
            return self.number_spelling(spelling, path);
        }
        let mut acc = self.number_spelling(spelling.without_exponent(), path)?;
        for (b, ex) in lowers
            .into_iter()
            .filter_map(|(b, ex)| Some((b.as_f64()?, ex)))
        {
            let re = ge_regex(&Dec::from_f64(b), ex);
            let d = self.b.regex(&re, path)?;
            acc = self.b.and(&acc, &d, path)?;
        }
        for (b, ex) in uppers
            .into_iter()
            .filter_map(|(b, ex)| Some((b.as_f64()?, ex)))
        {
            let re = le_regex(&Dec::from_f64(b), ex);
            let d = self.b.regex(&re, path)?;
            acc = self.b.and(&acc, &d, path)?;
        }
        Ok(acc)
    }

    /// The numbers spelled within `spelling` (see [`numbers::number_spelling_dfa`]).
    pub(super) fn number_spelling(&self, spelling: NumberSpelling, path: &str) -> Result<Dfa> {
        numbers::number_spelling_dfa(spelling, self.opts.max_lexeme_states)
            .map_err(|e| self.b.dfa_err(e, path, ""))
    }
}

/// Which side of the allowed integers a bound is on.
#[derive(Clone, Copy)]
enum Side {
    /// `minimum` / `exclusiveMinimum`.
    Lower,
    /// `maximum` / `exclusiveMaximum`.
    Upper,
}

/// The integer nearest to bound `b` that it lets through: the least one `>= b` (`> b` when
/// exclusive) for a lower bound, the greatest one `<= b` (`< b`) for an upper bound, exactly:
/// integers are read as written, past 2^53 too; a fractional bound is below 2^53, where
/// doubles hold every integer. An upper bound is the lower bound of the negated numbers.
fn integer_bound(b: &Number, exclusive: bool, side: Side) -> i128 {
    let sign: i128 = match side {
        Side::Lower => 1,
        Side::Upper => -1,
    };
    if let Some(i) = exact_integer(b) {
        // Saturating: `exact_integer` saturates a double past i128 (`1e300`) at its ends.
        return i.saturating_add(sign * i128::from(exclusive));
    }
    let f = sign as f64 * b.as_f64().unwrap_or(f64::NAN);
    let least = if exclusive {
        (f.floor() as i128).saturating_add(1)
    } else {
        f.ceil() as i128
    };
    // `as` saturates; so does the negation back.
    if sign < 0 {
        least.saturating_neg()
    } else {
        least
    }
}

/// A number written as an integer, or a double with no fraction (`1e18`, `-5.0`), as an
/// integer.
fn exact_integer(b: &Number) -> Option<i128> {
    if let Some(i) = b.as_i64() {
        return Some(i128::from(i));
    }
    if let Some(u) = b.as_u64() {
        return Some(i128::from(u));
    }
    let f = b.as_f64()?;
    // Doubles of 2^53 and more are integers; `as` saturates past i128.
    (f.fract() == 0.0).then_some(f as i128)
}

/// Whether every match of the regex `re` starts at the start of the input (`^` on every
/// path) and whether every match ends at its end (`$`), read from its syntax tree; `(false,
/// false)` for a regex that does not parse (compiling it reports why).
fn anchored_ends(re: &str) -> (bool, bool) {
    use regex_syntax::hir::Look;
    let Ok(hir) = regex_syntax::ParserBuilder::new()
        .unicode(true)
        .utf8(true)
        .build()
        .parse(re)
    else {
        return (false, false);
    };
    let props = hir.properties();
    (
        props.look_set_prefix().contains(Look::Start),
        props.look_set_suffix().contains(Look::End),
    )
}

#[cfg(test)]
mod tests {
    use super::{anchored_ends, integer_bound, Side};
    use serde_json::Number;

    #[test]
    fn integer_bounds_round_towards_the_allowed_side() {
        let n = |s: &str| -> Number { serde_json::from_str(s).unwrap() };
        let cases = [
            // (bound, exclusive, least for a lower bound, greatest for an upper bound)
            ("2.5", false, 3, 2),
            ("2.5", true, 3, 2),
            ("-2.5", false, -2, -3),
            ("-2.5", true, -2, -3),
            ("3", false, 3, 3),
            ("3", true, 4, 2),
            ("-3.0", true, -2, -4),
            (
                "9007199254740993",
                false,
                9007199254740993,
                9007199254740993,
            ),
            (
                "18446744073709551615",
                true,
                18446744073709551616,
                18446744073709551614,
            ),
            ("-1e18", true, -999999999999999999, -1000000000000000001),
        ];
        for (b, ex, lo, hi) in cases {
            assert_eq!(integer_bound(&n(b), ex, Side::Lower), lo, "lower {b} {ex}");
            assert_eq!(integer_bound(&n(b), ex, Side::Upper), hi, "upper {b} {ex}");
        }
        // Past i128 the bound saturates instead of overflowing (an exclusive `1e300` minimum
        // used to wrap around to the least i128, letting every integer through).
        let huge = n("1e300");
        assert_eq!(integer_bound(&huge, true, Side::Upper), i128::MAX - 1);
        assert_eq!(integer_bound(&huge, false, Side::Lower), i128::MAX);
        assert_eq!(integer_bound(&huge, true, Side::Lower), i128::MAX);
        let tiny = n("-1e300");
        assert_eq!(integer_bound(&tiny, true, Side::Lower), i128::MIN + 1);
        assert_eq!(integer_bound(&tiny, false, Side::Upper), i128::MIN);
        assert_eq!(integer_bound(&tiny, true, Side::Upper), i128::MIN);
    }
    use crate::grammar::dfa::{Dfa, Op};

    #[test]
    fn a_pattern_anchored_at_an_end_needs_no_text_there() {
        assert_eq!(anchored_ends("^[A-Z]{1,5}$"), (true, true));
        assert_eq!(anchored_ends("^a|b$"), (false, false));
        assert_eq!(anchored_ends("^(?:a|b)"), (true, false));
        assert_eq!(anchored_ends("(?:^a|^b)c$"), (true, true));
        assert_eq!(anchored_ends("(?m:^)a$"), (false, true));
        assert_eq!(anchored_ends("(?:^)?a"), (false, false));
        assert_eq!(anchored_ends("[unclosed"), (false, false));
        for p in [
            "^[A-Z]{1,5}$",
            "^a|b$",
            "^(?:a|b)",
            "x$",
            "(?:^a|^b)c$",
            "^$",
            "(?m:^)a$",
        ] {
            let around = |a: bool| if a { "" } else { "(?s:.)*" };
            let (s, e) = anchored_ends(p);
            let short = format!("{}(?:{p}){}", around(s), around(e));
            let short = Dfa::from_regex(&short, 10_000).unwrap();
            let wrapped = Dfa::from_regex(&format!("(?s:.)*(?:{p})(?s:.)*"), 10_000).unwrap();
            for (a, b) in [(&wrapped, &short), (&short, &wrapped)] {
                assert!(
                    a.product(b, Op::AndNot, 100_000).unwrap().is_empty(),
                    "{p}: the search and the anchored match differ"
                );
            }
        }
    }
}
