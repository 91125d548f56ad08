//! Strings: ECMA-262 patterns in the regex crate's syntax, and the supported formats.

/// Rewrites ECMA-262 class escapes that differ in the regex crate (`\d`, `\w` are ASCII there).
pub(super) fn translate_ecma(p: &str) -> String {
    let mut out = String::new();
    let mut in_class = false;
    let mut chars = p.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(n) = chars.next() else {
                    out.push('\\');
                    break;
                };
                let rep = match (n, in_class) {
                    ('d', false) => "[0-9]",
                    ('d', true) => "0-9",
                    ('D', false) => "[^0-9]",
                    ('w', false) => "[0-9A-Za-z_]",
                    ('w', true) => "0-9A-Za-z_",
                    ('W', false) => "[^0-9A-Za-z_]",
                    ('b', false) => r"(?-u:\b)",
                    ('B', false) => r"(?-u:\B)",
                    _ => {
                        out.push('\\');
                        out.push(n);
                        continue;
                    }
                };
                out.push_str(rep);
            }
            '[' if !in_class => {
                in_class = true;
                out.push(c);
                if chars.peek() == Some(&'^') {
                    out.push(chars.next().unwrap());
                }
                if chars.peek() == Some(&']') {
                    out.push_str("\\]");
                    chars.next();
                }
            }
            ']' if in_class => {
                in_class = false;
                out.push(c);
            }
            '[' if in_class => out.push_str("\\["),
            // ECMA-262's `.` stops at every line terminator, the regex crate's only at `\n`.
            '.' if !in_class => out.push_str("[^\\n\\r\\u{2028}\\u{2029}]"),
            _ => out.push(c),
        }
    }
    out
}

/// What an ECMA-262 `pattern` uses that no regular automaton can match exactly (lookaround,
/// backreferences), named as the user wrote it; None when it uses none of them.
pub(super) fn ecma_unsupported(p: &str) -> Option<String> {
    let mut in_class = false;
    let mut chars = p.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some((_, d @ '1'..='9')) if !in_class => {
                    return Some(format!("the backreference `\\{d}` is not supported"));
                }
                Some((_, 'k')) if !in_class && p[i..].starts_with("\\k<") => {
                    return Some("the named backreference `\\k<...>` is not supported".into());
                }
                _ => {}
            },
            '[' if !in_class => in_class = true,
            ']' if in_class => in_class = false,
            '(' if !in_class => {
                let rest = &p[i..];
                for (opening, kind) in [
                    ("(?=", "lookahead"),
                    ("(?!", "negative lookahead"),
                    ("(?<=", "lookbehind"),
                    ("(?<!", "negative lookbehind"),
                ] {
                    if rest.starts_with(opening) {
                        return Some(format!(
                            "lookaround is not supported: the {kind} `{opening}` at character {} \
                             (callmask's string automata are regular; write the constraint without it)",
                            p[..i].chars().count()
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    None
}

/// Why the regex crate's parser refuses a translated pattern ([`translate_ecma`]), in the
/// parser's words, without the multi-line rendering of its message; None when it parses.
pub(super) fn pattern_syntax_error(body: &str, written: &str) -> Option<String> {
    let err = regex_syntax::Parser::new().parse(body).err()?;
    let (kind, offset) = match &err {
        regex_syntax::Error::Parse(e) => (e.kind().to_string(), e.span().start.offset),
        regex_syntax::Error::Translate(e) => (e.kind().to_string(), e.span().start.offset),
        other => (other.to_string(), usize::MAX),
    };
    // Positions are the translation's; they are the user's where it changed nothing.
    if body == written && offset != usize::MAX {
        Some(format!(
            "{kind} at character {}",
            body[..offset].chars().count()
        ))
    } else {
        Some(kind)
    }
}

/// The supported formats' names (each has a [`format_regex`]); the format table's generator
/// builds each one's automaton.
#[cfg(test)]
pub(super) const FORMAT_NAMES: &[&str] = &[
    "date",
    "time",
    "date-time",
    "email",
    "uuid",
    "ipv4",
    "uri",
    "hostname",
    "ipv6",
    "duration",
    "json-pointer",
    "uri-reference",
    "uri-template",
    "relative-json-pointer",
    "iri",
    "iri-reference",
    "idn-hostname",
    "idn-email",
];

/// Regexes for the supported formats, over the decoded string.
pub(super) fn format_regex(f: &str) -> Option<String> {
    let date = concat!(
        "(?:[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))",
        "|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29)"
    );
    let time = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,9})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])";
    let octet = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])";
    let pchar = "(?:[A-Za-z0-9._~!$&'()*+,;=:@-]|%[0-9A-Fa-f]{2})";
    Some(match f {
        "date" => date.to_string(),
        "time" => time.to_string(),
        "date-time" => format!("{date}T{time}"),
        // A conservative subset of RFC 5321 addresses, within its length limits: a local part
        // of at most 50 characters and a domain of 2-4 labels of at most 63 characters. Domain
        // labels never hold two hyphens in a row: IDNA (RFC 5891) reserves hyphens in the third
        // and fourth places for `xn--` labels, which validators check as Punycode.
        "email" => {
            let part = "[A-Za-z0-9_+-]{1,16}";
            let dlabel = "[A-Za-z0-9](?:-?[A-Za-z0-9]){0,31}";
            format!("{part}(?:\\.{part}){{0,2}}@{dlabel}(?:\\.{dlabel}){{0,2}}\\.[A-Za-z]{{2,16}}")
        }
        "uuid" => "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}".into(),
        "ipv4" => format!("{octet}(?:\\.{octet}){{3}}"),
        // RFC 3986 absolute URIs with an authority: scheme, a host of letters, digits, dots and
        // hyphens, an optional port, then path, query and fragment characters.
        "uri" => format!(
            "[a-z][a-z0-9+.-]*://[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::[0-9]{{1,5}})?(?:/{pchar}*)*(?:\\?(?:{pchar}|[/?])*)?(?:#(?:{pchar}|[/?])*)?"
        ),
        // RFC 1123 host names: 1 to 3 labels of letters, digits and hyphens, each of 1 to 63
        // characters, no hyphen first or last (191 characters in all, under the 253 allowed).
        // Hyphens in both the third and fourth places are refused: IDNA (RFC 5891) reserves
        // them for `xn--` labels, which validators decode as Punycode. A subset: at most 3
        // labels.
        "hostname" => {
            let (c, ch) = ("[A-Za-z0-9]", "[A-Za-z0-9-]");
            let label = format!(
                "(?:{c}(?:{ch}{{0,2}}{c})?|{c}{ch}(?:{c}{ch}|-{c}){ch}{{0,58}}{c})"
            );
            format!("{label}(?:\\.{label}){{0,2}}")
        }
        // RFC 4291 text forms without an embedded IPv4 address: eight groups, or `::` standing
        // for at least two groups (at most six written).
        "ipv6" => {
            let h = "[0-9A-Fa-f]{1,4}";
            let groups = |n: usize| match n {
                0 => String::new(),
                n => format!("{h}(?::{h}){{{}}}", n - 1),
            };
            let mut forms = vec![format!("{h}(?::{h}){{7}}")];
            for head in 0..=6 {
                for tail in 0..=6 - head {
                    forms.push(format!("{}::{}", groups(head), groups(tail)));
                }
            }
            format!("(?:{})", forms.join("|"))
        }
        // RFC 3339 appendix A, exactly.
        "duration" => {
            let (d, t) = (
                "(?:[0-9]+D|[0-9]+M(?:[0-9]+D)?|[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?)",
                "T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)",
            );
            format!("P(?:{d}(?:{t})?|{t}|[0-9]+W)")
        }
        // RFC 6901, exactly: `/`-separated tokens where `~` only escapes (`~0`, `~1`).
        "json-pointer" => "(?:/(?:[^/~]|~[01])*)*".into(),
        // RFC 3986 references: an absolute URI as `uri` above, or a relative reference (an
        // absolute path, or a relative one whose first segment has no colon) with optional
        // query and fragment.
        "uri-reference" => {
            let nc = "(?:[A-Za-z0-9._~!$&'()*+,;=@-]|%[0-9A-Fa-f]{2})";
            let rest = format!("(?:\\?(?:{pchar}|[/?])*)?(?:#(?:{pchar}|[/?])*)?");
            format!(
                "(?:{}|(?:/(?:{pchar}+(?:/{pchar}*)*)?|{nc}+(?:/{pchar}*)*)?{rest})",
                format_regex("uri")?
            )
        }
        // RFC 6570 templates, ASCII: literals (percent-encoded or not) and expressions of one
        // optional operator (levels 2 and 3; the reserved ones `=,!@|` are left out) and
        // `,`-separated variables, each with a prefix length (`:1` to `:9999`) or `*`.
        "uri-template" => {
            let lit = r"[!#$&(-;=?-\[\]_a-z~]|%[0-9A-Fa-f]{2}";
            let vc = "(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})";
            let var = format!(r"{vc}(?:\.?{vc})*(?::[1-9][0-9]{{0,3}}|\*)?");
            format!(r"(?:{lit}|\{{[+#./;?&]?{var}(?:,{var})*\}})*")
        }
        // The relative JSON pointer draft, exactly, without its index manipulation (`0+1`): a
        // level count, then `#` or a JSON pointer.
        "relative-json-pointer" => "(?:0|[1-9][0-9]*)(?:#|(?:/(?:[^/~]|~[01])*)*)".into(),
        // The internationalized forms, as their ASCII subsets: every URI is an IRI (RFC 3987)
        // every RFC 1123 host name an IDN host name (RFC 5890), every RFC 5321 address an RFC
        // 6531 one.
        "iri" => format_regex("uri")?,
        "iri-reference" => format_regex("uri-reference")?,
        "idn-hostname" => format_regex("hostname")?,
        "idn-email" => format_regex("email")?,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_name_has_a_regex() {
        for f in FORMAT_NAMES {
            assert!(format_regex(f).is_some(), "{f}");
        }
    }

    #[test]
    fn ecma_translation() {
        assert_eq!(translate_ecma(r"^\d+[\w-]$"), r"^[0-9]+[0-9A-Za-z_-]$");
        // `.` stops at every ECMA-262 line terminator; `\.` and `[.]` are dots.
        let dot = crate::grammar::dfa::Dfa::from_regex(&translate_ecma(r"a.b\.[.]"), 1000).unwrap();
        assert!(dot.matches(b"axb.."));
        for t in ["\n", "\r", "\u{2028}", "\u{2029}"] {
            assert!(!dot.matches(format!("a{t}b..").as_bytes()), "{t:?}");
        }
    }
}
