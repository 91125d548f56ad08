//! The dialect file syntax: a GBNF-like text lexed and parsed into rules of [`Expr`], with
//! every rule reference checked. Nothing here knows about tools or grammars; lowering the rules
//! into a grammar is `lower.rs`.

use super::ir::*;
use super::*;

/// Lexes and parses a dialect file into its rules; checks that `root` exists, that no rule is
/// defined twice, that every reference names a rule, and that the call parts stand where they
/// belong. Errors carry the line (0: the file).
pub(super) fn parse_rules(text: &str) -> LexResult<Vec<(String, Expr)>> {
    let toks = lex(text)?;
    let mut p = Parser { toks, pos: 0 };
    let mut rules: Vec<(String, Expr)> = Vec::new();
    // Each rule's tokens, to find the line of what an error is about.
    let mut spans: Vec<std::ops::Range<usize>> = Vec::new();
    while p.pos < p.toks.len() {
        let start = p.pos;
        let line = p.toks[p.pos].1;
        let name = match &p.toks[p.pos].0 {
            Tok::Ident(n) => n.clone(),
            t => return Err((line, format!("expected a rule name, found {t:?}"))),
        };
        p.pos += 1;
        if p.peek() != Some(&Tok::Define) {
            return Err((line, format!("expected `::=` after {name}")));
        }
        p.pos += 1;
        let e = p.alt(0)?;
        if rules.iter().any(|(n, _)| *n == name) {
            return Err((line, format!("rule {name} is defined twice")));
        }
        rules.push((name, e));
        spans.push(start..p.pos);
    }
    if !rules.iter().any(|(n, _)| n == "root") {
        return Err((0, "no `root` rule".into()));
    }
    // The line of the first token `want` in rule `r` (else the rule's first line).
    let line_of = |r: usize, want: &dyn Fn(&Tok) -> bool| -> usize {
        let span = spans[r].clone();
        p.toks[span.clone()]
            .iter()
            .find(|(t, _)| want(t))
            .or(p.toks.get(span.start))
            .map_or(0, |t| t.1)
    };
    for (r, (_, e)) in rules.iter().enumerate() {
        check_refs(e, &rules).map_err(|n| {
            (
                line_of(r, &|t| matches!(t, Tok::Ident(i) if *i == n)),
                format!("unknown rule {n}"),
            )
        })?;
    }
    // From `root`, through every reference: a rule is checked as it is used (inside a call or
    // not), so a rule that holds `@args` is fine where every use of it is inside a call.
    let mut cx = CallCheck {
        rules: &rules,
        stack: Vec::new(),
        reached: vec![false; rules.len()],
    };
    let root = rules
        .iter()
        .position(|(n, _)| n == "root")
        .expect("checked");
    let fail = |e: CallErr| {
        let (r, tok) = (e.rule, e.tok);
        (
            line_of(
                r,
                &|t| matches!(t, Tok::Builtin(b) if tok.contains(&b.as_str())),
            ),
            format!("rule {}: {}", rules[r].0, e.message),
        )
    };
    cx.rule(root, false).map_err(fail)?;
    // Rules that nothing reaches: checked as used outside a call, or else inside one.
    for r in 0..rules.len() {
        if !cx.reached[r] && cx.rule(r, false).is_err() {
            cx.rule(r, true).map_err(fail)?;
        }
    }
    Ok(rules)
}

/// A misplaced call part: in which rule, the builtin tokens it may be, what is wrong.
struct CallErr {
    rule: usize,
    tok: &'static [&'static str],
    message: String,
}

/// Checks the `@call(...)` parts: `@name`, `@args...`, `@xml_args` and `@call_id` only inside a
/// call, no call inside a call, and at most one arguments part on any path through a call.
struct CallCheck<'r> {
    rules: &'r [(String, Expr)],
    /// The rules being checked (recursion), with whether inside a call.
    stack: Vec<(usize, bool)>,
    reached: Vec<bool>,
}

impl CallCheck<'_> {
    fn rule(&mut self, r: usize, in_call: bool) -> std::result::Result<usize, CallErr> {
        if self.stack.contains(&(r, in_call)) {
            return Ok(0);
        }
        self.reached[r] = true;
        self.stack.push((r, in_call));
        let body = &self.rules[r].1;
        let n = self.expr(body, r, in_call);
        self.stack.pop();
        n
    }

    fn expr(&mut self, e: &Expr, r: usize, in_call: bool) -> std::result::Result<usize, CallErr> {
        let err = |tok: &'static [&'static str], m: &str| CallErr {
            rule: r,
            tok,
            message: m.into(),
        };
        Ok(match e {
            Expr::Name | Expr::NameJson if !in_call => {
                return Err(err(
                    &["name", "name_json"],
                    "@name and @name_json belong inside @call(...)",
                ))
            }
            Expr::Args(_) | Expr::RawArgs(_) | Expr::XmlArgs(_) if !in_call => {
                return Err(err(
                    &["args", "xml_args"],
                    "@args and @xml_args belong inside @call(...)",
                ))
            }
            Expr::Args(_) | Expr::RawArgs(_) | Expr::XmlArgs(_) => 1,
            Expr::CallId(_) if !in_call => {
                return Err(err(&["call_id"], "@call_id belongs inside @call(...)"))
            }
            Expr::CallId(x) => self.expr(x, r, in_call)?,
            Expr::Call(x, _) => {
                if in_call {
                    return Err(err(&["call"], "a call inside a call"));
                }
                if self.expr(x, r, true)? > 1 {
                    return Err(err(
                        &["call"],
                        "a call writes its arguments once: one @args or @xml_args",
                    ));
                }
                0
            }
            Expr::JsonCall { .. } | Expr::PythonCall(_) | Expr::ParenCall if in_call => {
                return Err(err(
                    &["json_call", "python_call", "paren_call"],
                    "a call inside a call",
                ))
            }
            Expr::Seq(v) => {
                let mut n = 0;
                for x in v {
                    n += self.expr(x, r, in_call)?;
                }
                n
            }
            Expr::Alt(v) => {
                let mut n = 0;
                for x in v {
                    n = n.max(self.expr(x, r, in_call)?);
                }
                n
            }
            Expr::Repeat(x, _, hi) => {
                let n = self.expr(x, r, in_call)?;
                if n > 0 && *hi > 1 {
                    2
                } else {
                    n
                }
            }
            Expr::Rule(name) => {
                let i = self
                    .rules
                    .iter()
                    .position(|(n, _)| n == name)
                    .expect("checked");
                self.rule(i, in_call).map_err(|mut e| {
                    if e.message.contains("belong") && e.rule == i && !in_call {
                        e.message += &format!(
                            " (rule {} uses rule {name} outside a call)",
                            self.rules[r].0
                        );
                    }
                    e
                })?
            }
            _ => 0,
        })
    }
}

fn check_refs(e: &Expr, rules: &[(String, Expr)]) -> std::result::Result<(), String> {
    match e {
        Expr::Rule(n) if !rules.iter().any(|(r, _)| r == n) => Err(n.clone()),
        Expr::Seq(v) | Expr::Alt(v) => v.iter().try_for_each(|x| check_refs(x, rules)),
        Expr::Repeat(x, _, _) | Expr::Call(x, _) | Expr::CallId(x) => check_refs(x, rules),
        _ => Ok(()),
    }
}

/// A token of a dialect file.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    Ident(String),
    Builtin(String),
    Str(Vec<u8>),
    Class(String),
    Regex(String),
    Special(String),
    Define,
    Punct(char),
    Count(u32, u32),
}

pub(super) type LexResult<T> = std::result::Result<T, (usize, String)>;

pub(super) fn lex(text: &str) -> LexResult<Vec<(Tok, usize)>> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line = 1;
    while i < b.len() {
        let c = b[i];
        match c {
            b'\n' => {
                line += 1;
                i += 1;
            }
            b' ' | b'\t' | b'\r' => i += 1,
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b':' if text[i..].starts_with("::=") => {
                out.push((Tok::Define, line));
                i += 3;
            }
            b'"' => {
                let (s, n) = string_lit(&b[i..]).map_err(|m| (line, m))?;
                out.push((Tok::Str(s), line));
                i += n;
            }
            b'[' => {
                let start = i;
                i += 1;
                while i < b.len() && b[i] != b']' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                if i >= b.len() {
                    return Err((line, "unterminated character class".into()));
                }
                i += 1;
                out.push((Tok::Class(text[start..i].to_owned()), line));
            }
            b'/' => {
                let start = i + 1;
                i += 1;
                let mut re = String::new();
                while i < b.len() && b[i] != b'/' {
                    if b[i] == b'\n' {
                        return Err((line, "unterminated /regex/".into()));
                    }
                    if b[i] == b'\\' && b.get(i + 1) == Some(&b'/') {
                        re.push('/');
                        i += 2;
                        continue;
                    }
                    i += 1;
                }
                if i >= b.len() {
                    return Err((line, "unterminated /regex/".into()));
                }
                re.push_str(&text[start..i]);
                // keep escapes other than \/ as written
                let raw = text[start..i].replace("\\/", "/");
                out.push((Tok::Regex(raw), line));
                i += 1;
            }
            b'<' if text[i..].starts_with("<|") => match text[i..].find("|>") {
                Some(end) => {
                    out.push((Tok::Special(text[i..i + end + 2].to_owned()), line));
                    i += end + 2;
                }
                None => return Err((line, "unterminated <|special|> token".into())),
            },
            b'{' => {
                let end = text[i..]
                    .find('}')
                    .ok_or((line, "unterminated {m,n}".to_string()))?;
                let inner = &text[i + 1..i + end];
                let num = |s: &str| -> LexResult<u32> {
                    s.trim()
                        .parse::<u32>()
                        .map_err(|_| (line, format!("bad repetition count {inner:?}")))
                };
                let (lo, hi) = match inner.split_once(',') {
                    None => {
                        let n = num(inner)?;
                        (n, n)
                    }
                    Some((a, "")) => (num(a)?, u32::MAX),
                    Some((a, z)) => (num(a)?, num(z)?),
                };
                if lo > hi || (hi != u32::MAX && hi > 10_000) {
                    return Err((line, format!("bad repetition bounds {{{inner}}}")));
                }
                out.push((Tok::Count(lo, hi), line));
                i += end + 1;
            }
            b'@' | b'a'..=b'z' | b'A'..=b'Z' | b'_' => {
                let start = i;
                i += 1;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'-')
                {
                    i += 1;
                }
                let w = text[start..i].to_owned();
                if let Some(w) = w.strip_prefix('@') {
                    out.push((Tok::Builtin(w.to_owned()), line));
                } else {
                    out.push((Tok::Ident(w), line));
                }
            }
            b'(' | b')' | b'|' | b'?' | b'*' | b'+' | b',' | b'=' => {
                out.push((Tok::Punct(c as char), line));
                i += 1;
            }
            _ => {
                let ch = text[i..].chars().next().unwrap_or('?');
                return Err((line, format!("unexpected character {ch:?}")));
            }
        }
    }
    Ok(out)
}

/// A `"..."` literal at the start of `b`: its bytes and length.
pub(super) fn string_lit(b: &[u8]) -> std::result::Result<(Vec<u8>, usize), String> {
    let mut out = Vec::new();
    let mut i = 1;
    while i < b.len() {
        match b[i] {
            b'"' => return Ok((out, i + 1)),
            b'\n' => break,
            b'\\' => {
                let e = *b.get(i + 1).ok_or("unterminated string")?;
                i += 2;
                match e {
                    b'n' => out.push(b'\n'),
                    b'r' => out.push(b'\r'),
                    b't' => out.push(b'\t'),
                    b'\\' | b'"' | b'\'' => out.push(e),
                    b'x' => {
                        let h = b.get(i..i + 2).ok_or("bad \\x escape")?;
                        let v = u8::from_str_radix(std::str::from_utf8(h).unwrap_or("zz"), 16)
                            .map_err(|_| "bad \\x escape")?;
                        out.push(v);
                        i += 2;
                    }
                    _ => return Err(format!("unknown escape \\{}", e as char)),
                }
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Err("unterminated string".into())
}

pub(super) struct Parser {
    toks: Vec<(Tok, usize)>,
    pos: usize,
}

impl Parser {
    pub(super) fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.0)
    }

    pub(super) fn line(&self) -> usize {
        self.toks
            .get(self.pos)
            .or(self.toks.last())
            .map_or(0, |t| t.1)
    }

    /// True at the start of the next rule (`name ::=`).
    pub(super) fn at_rule_start(&self) -> bool {
        matches!(self.peek(), Some(Tok::Ident(_)))
            && self.toks.get(self.pos + 1).map(|t| &t.0) == Some(&Tok::Define)
    }

    pub(super) fn alt(&mut self, depth: usize) -> LexResult<Expr> {
        if depth > MAX_NESTING {
            return Err((self.line(), "expression nested too deeply".into()));
        }
        let mut alts = vec![self.seq(depth)?];
        while self.peek() == Some(&Tok::Punct('|')) {
            self.pos += 1;
            alts.push(self.seq(depth)?);
        }
        Ok(if alts.len() == 1 {
            alts.pop().expect("one")
        } else {
            Expr::Alt(alts)
        })
    }

    pub(super) fn seq(&mut self, depth: usize) -> LexResult<Expr> {
        let mut items = Vec::new();
        loop {
            if self.at_rule_start() {
                break;
            }
            match self.peek() {
                None | Some(Tok::Punct('|')) | Some(Tok::Punct(')')) | Some(Tok::Punct(',')) => {
                    break
                }
                _ => {}
            }
            let mut e = self.atom(depth)?;
            loop {
                let (lo, hi) = match self.peek() {
                    Some(Tok::Punct('?')) => (0, 1),
                    Some(Tok::Punct('*')) => (0, u32::MAX),
                    Some(Tok::Punct('+')) => (1, u32::MAX),
                    Some(Tok::Count(a, b)) => (*a, *b),
                    _ => break,
                };
                self.pos += 1;
                e = Expr::Repeat(Box::new(e), lo, hi);
            }
            items.push(e);
        }
        Ok(if items.len() == 1 {
            items.pop().expect("one")
        } else {
            Expr::Seq(items)
        })
    }

    pub(super) fn atom(&mut self, depth: usize) -> LexResult<Expr> {
        let line = self.line();
        let t = self.toks.get(self.pos).cloned().map(|t| t.0);
        self.pos += 1;
        Ok(match t {
            Some(Tok::Str(s)) => Expr::Lit(s),
            Some(Tok::Class(c)) => Expr::Regex(c),
            Some(Tok::Regex(r)) => Expr::Regex(r),
            Some(Tok::Special(s)) => Expr::Special(s),
            Some(Tok::Ident(n)) => Expr::Rule(n),
            Some(Tok::Punct('(')) => {
                let e = self.alt(depth + 1)?;
                if self.peek() != Some(&Tok::Punct(')')) {
                    return Err((line, "expected `)`".into()));
                }
                self.pos += 1;
                e
            }
            Some(Tok::Builtin(b)) if b == "call_id" => {
                if self.peek() != Some(&Tok::Punct('(')) {
                    return Err((line, "@call_id takes an expression in parentheses".into()));
                }
                self.pos += 1;
                let e = self.alt(depth + 1)?;
                if self.peek() != Some(&Tok::Punct(')')) {
                    return Err((line, "expected `)` after @call_id(...".into()));
                }
                self.pos += 1;
                Expr::CallId(Box::new(e))
            }
            Some(Tok::Builtin(b)) if b == "call" => {
                if self.peek() != Some(&Tok::Punct('(')) {
                    return Err((line, "@call takes an expression in parentheses".into()));
                }
                self.pos += 1;
                let e = self.alt(depth + 1)?;
                let mut names = None;
                if self.peek() == Some(&Tok::Punct(',')) {
                    self.pos += 1;
                    match (
                        self.toks.get(self.pos).map(|t| &t.0),
                        self.toks.get(self.pos + 1).map(|t| &t.0),
                        self.toks.get(self.pos + 2).map(|t| &t.0),
                    ) {
                        (Some(Tok::Ident(k)), Some(Tok::Punct('=')), Some(Tok::Str(v)))
                            if k == "names" =>
                        {
                            let v = String::from_utf8(v.clone())
                                .map_err(|_| (line, "non-UTF-8 names".to_string()))?;
                            names = Some(v);
                            self.pos += 3;
                        }
                        _ => return Err((line, "@call(expr, names=\"regex\") expected".into())),
                    }
                }
                if self.peek() != Some(&Tok::Punct(')')) {
                    return Err((line, "expected `)` after @call(...".into()));
                }
                self.pos += 1;
                Expr::Call(Box::new(e), names)
            }
            Some(Tok::Builtin(b)) if b == "xml_args" => self.xml_args(line)?,
            Some(Tok::Builtin(b)) => self.builtin(&b, line)?,
            other => return Err((line, format!("unexpected {other:?}"))),
        })
    }

    /// `@name` or `@name(args)`; args are strings or `key="value"` pairs.
    pub(super) fn builtin(&mut self, name: &str, line: usize) -> LexResult<Expr> {
        let mut pos: Vec<String> = Vec::new();
        let mut kw: Vec<(String, String)> = Vec::new();
        // These take no arguments: a `(` after them groups what follows (`@python_call` takes
        // `(literals=..)`, told from a group by the `name =` right after the parenthesis).
        let keyword_next = matches!(
            (
                self.toks.get(self.pos + 1).map(|t| &t.0),
                self.toks.get(self.pos + 2).map(|t| &t.0)
            ),
            (Some(Tok::Ident(_)), Some(Tok::Punct('=')))
        );
        let bare = match name {
            "python_call" => !keyword_next,
            n => matches!(n, "name" | "name_json" | "ws" | "text" | "paren_call"),
        };
        if !bare && self.peek() == Some(&Tok::Punct('(')) {
            self.pos += 1;
            loop {
                match self.toks.get(self.pos).map(|t| t.0.clone()) {
                    Some(Tok::Punct(')')) => {
                        self.pos += 1;
                        break;
                    }
                    Some(Tok::Str(s)) => {
                        pos.push(String::from_utf8(s).map_err(|_| (line, "non-UTF-8".into()))?);
                        self.pos += 1;
                    }
                    Some(Tok::Ident(k)) => {
                        self.pos += 1;
                        if self.peek() != Some(&Tok::Punct('=')) {
                            return Err((line, format!("expected `=` after {k} in @{name}")));
                        }
                        self.pos += 1;
                        let v = match self.toks.get(self.pos).map(|t| t.0.clone()) {
                            Some(Tok::Str(s)) => String::from_utf8(s).unwrap_or_default(),
                            Some(Tok::Ident(s)) => s,
                            _ => return Err((line, format!("expected a value for {k}"))),
                        };
                        self.pos += 1;
                        kw.push((k, v));
                    }
                    _ => return Err((line, format!("bad arguments to @{name}"))),
                }
                if self.peek() == Some(&Tok::Punct(',')) {
                    self.pos += 1;
                }
            }
        }
        let get = |k: &str, d: &str| {
            kw.iter()
                .find(|(a, _)| a == k)
                .map_or(d.to_owned(), |(_, v)| v.clone())
        };
        let known = |allowed: &[&str]| -> LexResult<()> {
            match kw.iter().find(|(k, _)| !allowed.contains(&k.as_str())) {
                Some((k, _)) => Err((line, format!("@{name} has no argument {k}"))),
                None => Ok(()),
            }
        };
        Ok(match name {
            "text" => {
                known(&[])?;
                Expr::Text(vec![])
            }
            "text_without" => {
                known(&[])?;
                if pos.is_empty() {
                    return Err((line, "@text_without needs at least one marker".into()));
                }
                Expr::Text(pos)
            }
            "text_matching" => match pos.as_slice() {
                [r] => Expr::TextMatching(r.clone()),
                _ => return Err((line, "@text_matching takes one regex".into())),
            },
            "ws" => Expr::Ws,
            "special" => match pos.as_slice() {
                [s] => Expr::Special(s.clone()),
                _ => return Err((line, "@special takes one token text".into())),
            },
            "reasoning" => {
                known(&[])?;
                if pos.is_empty() {
                    return Err((line, "@reasoning needs its end marker".into()));
                }
                Expr::Reasoning(pos)
            }
            "marker" => match pos.as_slice() {
                [s] => Expr::Marker(s.clone()),
                _ => return Err((line, "@marker takes one token text".into())),
            },
            "name" => Expr::Name,
            "name_json" => Expr::NameJson,
            "args" => match {
                known(&["as", "key"])?;
                get("as", "json")
            }
            .as_str()
            {
                "json" | "string" | "python" | "gemma" if kw.iter().any(|(k, _)| k == "key") => {
                    return Err((line, "@args: key= goes with as=raw only".into()))
                }
                "json" => Expr::Args(Encoding::Json),
                "string" => Expr::Args(Encoding::JsonInString),
                "python" => Expr::Args(Encoding::Python),
                "gemma" => Expr::Args(Encoding::Gemma),
                "raw" => match get("key", "").as_str() {
                    "" => {
                        return Err((
                            line,
                            "@args(as=raw) needs key=\"NAME\": the argument the text is".into(),
                        ))
                    }
                    k => Expr::RawArgs(k.to_owned()),
                },
                o => {
                    return Err((
                        line,
                        format!("as={o:?}: expected json, string, python, gemma or raw"),
                    ))
                }
            },
            "json_call" => {
                known(&[
                    "name_key", "args_key", "args", "id_key", "id", "keys", "lines",
                ])?;
                let one_line = match get("lines", "any").as_str() {
                    "any" => false,
                    "one" => true,
                    o => return Err((line, format!("lines={o:?}: expected any or one"))),
                };
                let any_order = match get("keys", "name_first").as_str() {
                    "name_first" => false,
                    "any" => true,
                    o => return Err((line, format!("keys={o:?}: expected name_first or any"))),
                };
                let (enc, either) = match get("args", "object").as_str() {
                    "object" => (Encoding::Json, false),
                    "string" => (Encoding::JsonInString, false),
                    "either" => (Encoding::Json, true),
                    o => {
                        return Err((
                            line,
                            format!("args={o:?}: expected object, string or either"),
                        ))
                    }
                };
                let id = match (
                    kw.iter().any(|(k, _)| k == "id_key"),
                    kw.iter().any(|(k, _)| k == "id"),
                ) {
                    (false, false) => None,
                    (true, true) => Some((get("id_key", ""), get("id", ""))),
                    _ => {
                        return Err((line, "@json_call: give both id_key and id (a regex)".into()))
                    }
                };
                Expr::JsonCall {
                    name_key: get("name_key", "name"),
                    args_key: get("args_key", "arguments"),
                    enc,
                    either,
                    id,
                    any_order,
                    one_line,
                }
            }
            "python_call" => {
                known(&["literals"])?;
                match get("literals", "python").as_str() {
                    "python" => Expr::PythonCall(false),
                    "both" => Expr::PythonCall(true),
                    o => return Err((line, format!("literals={o:?}: expected python or both"))),
                }
            }
            "paren_call" => Expr::ParenCall,
            _ => return Err((line, format!("unknown builtin @{name}"))),
        })
    }

    /// One piece of an affix at the cursor (`"text"`, `<|name|>`, `@special("..")`,
    /// `@marker("..")`), or `None` (nothing consumed).
    fn affix_item(&mut self, line: usize) -> LexResult<Option<Affix>> {
        let item = match self.peek().cloned() {
            Some(Tok::Str(b)) => {
                self.pos += 1;
                Affix::Lit(b)
            }
            Some(Tok::Special(s)) => {
                self.pos += 1;
                Affix::Special(s)
            }
            Some(Tok::Builtin(b)) if b == "special" || b == "marker" => {
                let arg = match (
                    self.toks.get(self.pos + 1).map(|t| &t.0),
                    self.toks.get(self.pos + 2).map(|t| &t.0),
                    self.toks.get(self.pos + 3).map(|t| &t.0),
                ) {
                    (Some(Tok::Punct('(')), Some(Tok::Str(v)), Some(Tok::Punct(')'))) => {
                        String::from_utf8(v.clone())
                            .map_err(|_| (line, format!("@{b}: non-UTF-8 token text")))?
                    }
                    _ => return Err((line, format!("@{b} takes one token text: @{b}(\"..\")"))),
                };
                if arg.is_empty() {
                    return Err((line, format!("@{b} needs a non-empty token text")));
                }
                self.pos += 4;
                if b == "special" {
                    Affix::Special(arg)
                } else {
                    Affix::Marker(arg)
                }
            }
            _ => return Ok(None),
        };
        Ok(Some(item))
    }

    /// Affix pieces up to a `,` or `)`.
    fn affix_seq(&mut self, line: usize, key: &str) -> LexResult<Vec<Affix>> {
        let mut seq = Vec::new();
        while let Some(a) = self.affix_item(line)? {
            seq.push(a);
        }
        match self.peek() {
            Some(Tok::Punct(',' | ')')) | Some(Tok::Ident(_)) => Ok(seq),
            other => Err((
                line,
                format!(
                    "@xml_args {key}: expected \"text\", <|special|>, @special(\"..\") or \
                     @marker(\"..\"), found {other:?}"
                ),
            )),
        }
    }

    /// `@xml_args(key=value, ...)`: each value an affix (`"text"`, special tokens and markers
    /// in sequence, optionally in parentheses), a list of texts in parentheses
    /// (`value_without`), or `(name="text", ...)` (`types`).
    fn xml_args(&mut self, line: usize) -> LexResult<Expr> {
        if self.peek() != Some(&Tok::Punct('(')) {
            return Err((line, "@xml_args takes its parameters in parentheses".into()));
        }
        self.pos += 1;
        let mut p = XmlParams::default();
        loop {
            match self.peek().cloned() {
                Some(Tok::Punct(')')) => {
                    self.pos += 1;
                    break;
                }
                Some(Tok::Ident(k)) => {
                    self.pos += 1;
                    if self.peek() != Some(&Tok::Punct('=')) {
                        return Err((line, format!("expected `=` after {k} in @xml_args")));
                    }
                    self.pos += 1;
                    self.xml_param(line, k, &mut p)?;
                }
                _ => return Err((line, "bad arguments to @xml_args".into())),
            }
            if self.peek() == Some(&Tok::Punct(',')) {
                self.pos += 1;
            }
        }
        p.finish(line)
    }

    /// One `key=value` of `@xml_args(...)` (after the `=`), kept in `p`.
    fn xml_param(&mut self, line: usize, k: String, p: &mut XmlParams) -> LexResult<()> {
        if p.given(&k) {
            return Err((line, format!("@xml_args: {k} is given twice")));
        }
        match k.as_str() {
            "key_prefix" | "key_suffix" | "value_suffix" | "json_key_suffix" => {
                let paren = self.eat_paren();
                let seq = self.affix_seq(line, &k)?;
                if paren {
                    self.close_paren(line, &format!("@xml_args {k}"))?;
                }
                if affix_text(&seq).is_empty() {
                    return Err((line, format!("@xml_args needs a non-empty {k}")));
                }
                p.affixes.push((k, seq));
            }
            "sep" | "pad" => {
                let Some(Tok::Str(v)) = self.peek().cloned() else {
                    return Err((line, format!("@xml_args {k}: expected a text")));
                };
                self.pos += 1;
                if k == "sep" {
                    p.sep = Some(v);
                } else {
                    p.pad = Some(v);
                }
            }
            "json_ws" => {
                let Some(Tok::Ident(v)) = self.peek().cloned() else {
                    return Err((line, "@xml_args json_ws: expected `any` or `none`".into()));
                };
                self.pos += 1;
                p.json_ws = Some(match v.as_str() {
                    "any" => true,
                    "none" => false,
                    _ => {
                        return Err((
                            line,
                            format!("@xml_args json_ws: `{v}` is not `any` or `none`"),
                        ))
                    }
                });
            }
            "value_without" => p.without = Some(self.value_without(line)?),
            "types" => p.types = Some(self.type_tags(line)?),
            _ => return Err((line, format!("@xml_args has no argument {k}"))),
        }
        Ok(())
    }

    /// Skips a `(`; whether there was one.
    fn eat_paren(&mut self) -> bool {
        let paren = self.peek() == Some(&Tok::Punct('('));
        if paren {
            self.pos += 1;
        }
        paren
    }

    /// Skips the `)` that must come next (`what` names the place in the error).
    fn close_paren(&mut self, line: usize, what: &str) -> LexResult<()> {
        if self.peek() != Some(&Tok::Punct(')')) {
            return Err((line, format!("{what}: expected `)`")));
        }
        self.pos += 1;
        Ok(())
    }

    /// `value_without=`: one text, or texts in parentheses, none empty.
    fn value_without(&mut self, line: usize) -> LexResult<Vec<String>> {
        let paren = self.eat_paren();
        let mut list = Vec::new();
        loop {
            let seq = self.affix_seq(line, "value_without")?;
            let text = String::from_utf8(affix_text(&seq))
                .map_err(|_| (line, "@xml_args value_without: non-UTF-8 text".to_string()))?;
            if text.is_empty() {
                return Err((line, "@xml_args value_without: empty text".to_string()));
            }
            list.push(text);
            if paren && self.peek() == Some(&Tok::Punct(',')) {
                self.pos += 1;
                continue;
            }
            break;
        }
        if paren {
            self.close_paren(line, "@xml_args value_without")?;
        }
        Ok(list)
    }

    /// `types=(string="..", number="..", ...)`: each JSON type's tag, none twice.
    fn type_tags(&mut self, line: usize) -> LexResult<Vec<(String, String)>> {
        let expected = "@xml_args types=(string=\"..\", number=\"..\", ...) expected";
        if self.peek() != Some(&Tok::Punct('(')) {
            return Err((line, expected.into()));
        }
        self.pos += 1;
        let mut list: Vec<(String, String)> = Vec::new();
        loop {
            match (
                self.toks.get(self.pos).map(|t| t.0.clone()),
                self.toks.get(self.pos + 1).map(|t| &t.0),
                self.toks.get(self.pos + 2).map(|t| t.0.clone()),
            ) {
                (Some(Tok::Punct(')')), _, _) => {
                    self.pos += 1;
                    return Ok(list);
                }
                (Some(Tok::Ident(t)), Some(Tok::Punct('=')), Some(Tok::Str(v))) => {
                    if !JSON_TYPES.contains(&t.as_str()) {
                        return Err((
                            line,
                            format!(
                                "@xml_args types: {t} is not a JSON type (string, integer, \
                                 number, boolean, null, object, array)"
                            ),
                        ));
                    }
                    if list.iter().any(|(a, _)| *a == t) {
                        return Err((line, format!("@xml_args types: {t} is given twice")));
                    }
                    let v = String::from_utf8(v)
                        .map_err(|_| (line, "@xml_args types: non-UTF-8 tag".to_string()))?;
                    list.push((t, v));
                    self.pos += 3;
                    if self.peek() == Some(&Tok::Punct(',')) {
                        self.pos += 1;
                    }
                }
                _ => return Err((line, expected.into())),
            }
        }
    }
}

/// What `@xml_args(...)` was given, before it is checked as a whole.
#[derive(Default)]
struct XmlParams {
    affixes: Vec<(String, Vec<Affix>)>,
    without: Option<Vec<String>>,
    types: Option<Vec<(String, String)>>,
    sep: Option<Vec<u8>>,
    pad: Option<Vec<u8>>,
    json_ws: Option<bool>,
}

impl XmlParams {
    /// Whether parameter `k` was given already.
    fn given(&self, k: &str) -> bool {
        self.affixes.iter().any(|(a, _)| a == k)
            || (k == "value_without" && self.without.is_some())
            || (k == "types" && self.types.is_some())
            || (k == "sep" && self.sep.is_some())
            || (k == "pad" && self.pad.is_some())
            || (k == "json_ws" && self.json_ws.is_some())
    }

    /// The affix given as `k`.
    fn affix(&self, k: &str) -> Option<Vec<Affix>> {
        self.affixes
            .iter()
            .find(|(a, _)| a == k)
            .map(|(_, v)| v.clone())
    }

    /// The `@xml_args` these parameters make: the three affixes present, the typing read from
    /// `json_key_suffix` or `types`, each type's suffix telling its group.
    fn finish(self, line: usize) -> LexResult<Expr> {
        let need = |k: &str| {
            self.affix(k)
                .ok_or((line, format!("@xml_args needs a non-empty {k}")))
        };
        let key_prefix = need("key_prefix")?;
        let key_suffix = need("key_suffix")?;
        let value_suffix = need("value_suffix")?;
        let typing = xml_typing(line, &key_suffix, self.affix("json_key_suffix"), self.types)?;
        check_suffixes_differ(line, &typing)?;
        Ok(Expr::XmlArgs(Box::new(XmlArgs {
            key_prefix,
            key_suffix,
            value_suffix,
            typing,
            value_without: self.without.unwrap_or_default(),
            sep: self.sep.unwrap_or_default(),
            pad: self.pad.unwrap_or_default(),
            json_ws: self.json_ws.unwrap_or(false),
            reading: XmlReading::Strict,
        })))
    }
}

/// How `@xml_args` tells raw strings from JSON: by the schema; by `json_key_suffix` (JSON
/// values' suffix beside `key_suffix`, the strings'); or by `types`' tags in `key_suffix`'s
/// `{type}` place.
fn xml_typing(
    line: usize,
    key_suffix: &[Affix],
    json: Option<Vec<Affix>>,
    types: Option<Vec<(String, String)>>,
) -> LexResult<XmlTyping> {
    let has_placeholder = key_suffix
        .iter()
        .any(|a| matches!(a, Affix::Lit(b) if b.windows(6).any(|w| w == b"{type}")));
    if types.is_none() && has_placeholder {
        return Err((
            line,
            "@xml_args: key_suffix holds {type} but there is no types=(...)".into(),
        ));
    }
    match (json, types) {
        (Some(_), Some(_)) => Err((
            line,
            "@xml_args: give json_key_suffix or types=(...), not both".into(),
        )),
        (None, None) => Ok(XmlTyping::BySchema),
        (Some(json), None) => Ok(XmlTyping::Tagged(vec![
            TypeGroup {
                types: vec!["string"],
                suffix: key_suffix.to_vec(),
            },
            TypeGroup {
                types: JSON_TYPES[1..].to_vec(),
                suffix: json,
            },
        ])),
        (None, Some(list)) => {
            if !has_placeholder {
                return Err((
                    line,
                    "@xml_args types=(...): key_suffix must hold {type}, the place of the tag"
                        .into(),
                ));
            }
            type_groups(line, key_suffix, list)
        }
    }
}

/// `types=(...)`'s tags as groups of JSON types, each group's suffix `key_suffix` with its
/// tag in the `{type}` place (`integer` takes `number`'s tag where it has none).
fn type_groups(
    line: usize,
    key_suffix: &[Affix],
    mut list: Vec<(String, String)>,
) -> LexResult<XmlTyping> {
    if !list.iter().any(|(t, _)| t == "integer") {
        if let Some((_, tag)) = list.iter().find(|(t, _)| t == "number") {
            let tag = tag.clone();
            list.push(("integer".into(), tag));
        }
    }
    let missing: Vec<&str> = JSON_TYPES
        .iter()
        .copied()
        .filter(|t| !list.iter().any(|(a, _)| a == t))
        .collect();
    if !missing.is_empty() {
        return Err((
            line,
            format!(
                "@xml_args types=(...) needs a tag for every JSON type; missing: {}",
                missing.join(", ")
            ),
        ));
    }
    let mut groups: Vec<(String, Vec<&'static str>)> = Vec::new();
    for t in JSON_TYPES {
        let tag = &list.iter().find(|(a, _)| a == t).expect("checked").1;
        match groups.iter_mut().find(|(g, _)| g == tag) {
            Some((_, ts)) => ts.push(t),
            None => groups.push((tag.clone(), vec![t])),
        }
    }
    if let Some((tag, ts)) = groups
        .iter()
        .find(|(_, ts)| ts.len() > 1 && ts[0] == "string")
    {
        return Err((
            line,
            format!(
                "@xml_args types: string shares its tag {tag:?} with {}: a raw string and a \
                 JSON value could not be told apart",
                ts[1..].join(", ")
            ),
        ));
    }
    let fill = |tag: &str| -> Vec<Affix> {
        key_suffix
            .iter()
            .map(|a| match a {
                Affix::Lit(b) => {
                    let s = String::from_utf8_lossy(b).replace("{type}", tag);
                    Affix::Lit(s.into_bytes())
                }
                other => other.clone(),
            })
            .collect()
    };
    Ok(XmlTyping::Tagged(
        groups
            .iter()
            .map(|(tag, ts)| TypeGroup {
                types: ts.clone(),
                suffix: fill(tag),
            })
            .collect(),
    ))
}

/// The suffix after a key tells the value's group: no suffix may begin another.
fn check_suffixes_differ(line: usize, typing: &XmlTyping) -> LexResult<()> {
    let XmlTyping::Tagged(groups) = typing else {
        return Ok(());
    };
    for (i, a) in groups.iter().enumerate() {
        for b in &groups[i + 1..] {
            let (x, y) = (affix_text(&a.suffix), affix_text(&b.suffix));
            if x.starts_with(&y) || y.starts_with(&x) {
                return Err((
                    line,
                    format!(
                        "@xml_args: the key suffixes {:?} and {:?} must differ before either \
                         ends (one begins the other: a value could be read two ways)",
                        String::from_utf8_lossy(&x),
                        String::from_utf8_lossy(&y)
                    ),
                ));
            }
        }
    }
    Ok(())
}
