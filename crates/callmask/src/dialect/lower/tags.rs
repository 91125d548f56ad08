//! The structural tags' forms ([`Expr::Schema`] and the variants after it): tags, free text
//! and free tokens between triggered tags or dispatched forms, special tokens named by id or
//! text, and the regions of inline schemas, which are the calls (see `structural.rs` for the
//! semantics, which follow XGrammar's).

use super::*;
use crate::dialect::ir::{bad, call_label, is_object_schema, unsupported, Delim, Tag, TokenRef};
use crate::grammar::ArgEncoding;
use crate::vocab::TokenId;

/// What lowering a structural tag needs besides the compiler: the vocabulary's special tokens,
/// and where in the tag the lowering stands.
#[derive(Default)]
pub(super) struct TagScope<'a> {
    /// The vocabulary's special tokens by id.
    pub(super) token_ids: &'a [(TokenId, String)],
    pub(super) eos_tokens: &'a [TokenId],
    pub(super) vocab_len: usize,
    /// The end tokens of the enclosing tags (an `any_tokens` region stops at them).
    pub(super) end_tokens: Vec<String>,
    /// The enclosing tag's end strings (free text stops at them).
    pub(super) ends: Vec<String>,
    /// The enclosing tag's begin (names the calls inside).
    pub(super) begin: Option<String>,
    /// The JSON pointer of the form being lowered (`None` outside structural tags).
    pub(super) at: Option<String>,
}

/// The vocabulary as a structural tag's lowering sees it (see
/// [`crate::StructuralTagOptions`]).
pub(in crate::dialect) struct TagVocab<'a> {
    /// Special-token texts a literal may hold (matched as the token or as text).
    pub(in crate::dialect) special_tokens: &'a [String],
    /// Special tokens by id, for the token-level forms.
    pub(in crate::dialect) token_ids: &'a [(TokenId, String)],
    pub(in crate::dialect) eos_tokens: &'a [TokenId],
    pub(in crate::dialect) vocab_len: usize,
}

/// Lowers a structural tag's tree into a grammar.
pub(in crate::dialect) fn lower_tag(
    format: &Expr,
    vocab: TagVocab<'_>,
    compile: &CompileOptions,
) -> Result<Grammar> {
    let null = Value::Null;
    let tools = Tools::default();
    let dialect = Dialect {
        name: "structural tag".into(),
        rules: Arc::new(Vec::new()),
    };
    let mut vocab_specials: Vec<String> = vocab
        .special_tokens
        .iter()
        .filter(|s| !s.is_empty())
        .cloned()
        .collect();
    // Longest first, so that a literal is split at the longest special it holds.
    vocab_specials.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
    vocab_specials.dedup();
    let mut l = Lowering::new(Compiler::new(&null, compile), &dialect, &tools, &[], None);
    l.vocab_specials = vocab_specials;
    l.tag = TagScope {
        token_ids: vocab.token_ids,
        eos_tokens: vocab.eos_tokens,
        vocab_len: vocab.vocab_len,
        at: Some(String::new()),
        ..TagScope::default()
    };
    let root = l.lower(format, V::Any, 0)?;
    l.finish(root, false)
}

impl<'a> Lowering<'a> {
    /// A structural tag's form (see [`lower_tag`]).
    pub(super) fn tag_form(&mut self, e: &'a Expr, depth: usize) -> Result<NodeId> {
        self.c.b.check_budget()?;
        let ends = self.tag.ends.clone();
        match e {
            Expr::Token(t) => {
                let s = self.token_text(t)?;
                self.special(&s)
            }
            Expr::AnyTokens(excl) => {
                let excluded = self.token_texts(excl)?;
                self.any_tokens(&excluded, &ends)
            }
            Expr::ExcludeToken(_) => Err(unsupported(
                "exclude_token",
                self.tag.at.as_deref().unwrap_or(""),
                "exactly one token of any kind needs the matcher to see token boundaries \
                 (callmask matches ordinary tokens by their bytes); it is compiled only right \
                 before `any_tokens` in a sequence (one token or more)",
            )),
            Expr::SomeTokens { first, rest } => {
                let first = self.token_texts(first)?;
                let rest = self.token_texts(rest)?;
                self.some_tokens(&first, &rest, &ends)
            }
            Expr::TokenTriggered(t) => {
                let trig = self.token_texts(&t.triggers)?;
                for tag in &t.tags {
                    let Delim::Token(b) = &tag.begin else {
                        unreachable!("checked when read")
                    };
                    let b = self.token_text(b)?;
                    if !trig.contains(&b) {
                        return Err(bad(
                            &tag.path,
                            format!("the tag's begin token {b:?} is not one of the trigger tokens"),
                        ));
                    }
                }
                let g = self.tags(&t.tags, depth)?;
                let mut excluded = self.token_texts(&t.excludes)?;
                excluded.extend(trig);
                self.triggered(
                    g,
                    &mut |l: &mut Self| l.any_tokens(&excluded, &ends),
                    t.at_least_one,
                    t.stop_after_first,
                )
            }
            Expr::TokenDispatch(d) => {
                let mut excluded = self.token_texts(&d.excludes)?;
                let mut alts = Vec::new();
                for (tok, x) in &d.rules {
                    let t = self.token_text(tok)?;
                    let sp = self.special(&t)?;
                    let body = self.within(None, Some(t.clone()), x, depth)?;
                    alts.push(self.seq(vec![sp, body])?);
                    excluded.push(t);
                }
                let g = self.c.b.push(Node::Union(alts))?;
                self.dispatched(g, d.looping, &mut |l: &mut Self| {
                    l.any_tokens(&excluded, &ends)
                })
            }
            Expr::Schema(r) if r.xml.is_some() && !r.is_arguments() => {
                let style = r.xml.expect("matched");
                self.xml_value(&r.schema, style, &r.path, &ends)
            }
            Expr::Schema(r) if r.xml.is_some() => {
                let style = r.xml.expect("matched");
                self.xml_style_args(&r.schema, style, &r.path)
            }
            Expr::Schema(r) => {
                self.c.set_document(&r.schema, Encoding::Json);
                let node = self.c.compile(&r.schema, "")?;
                if !is_object_schema(&r.schema) {
                    return Ok(node);
                }
                let args = self
                    .c
                    .b
                    .push(Node::Capture(Capture::Args(ArgEncoding::Json), node))?;
                self.region_call(args)
            }
            Expr::AnyText {
                excludes,
                max_chars,
            } => {
                let m: Vec<String> = excludes.iter().chain(&ends).cloned().collect();
                self.free_text(&m, *max_chars)
            }
            Expr::Tag(t) => self.tag(t, depth),
            Expr::Triggered(t) => {
                let g = self.tags(&t.tags, depth)?;
                let markers: Vec<String> = t
                    .triggers
                    .iter()
                    .chain(&t.excludes)
                    .chain(&ends)
                    .cloned()
                    .collect();
                self.triggered(
                    g,
                    &mut |l: &mut Self| l.free_text(&markers, None),
                    t.at_least_one,
                    t.stop_after_first,
                )
            }
            Expr::Separated {
                tags,
                separator,
                at_least_one,
                stop_after_first,
            } => {
                let g = self.tags(tags, depth)?;
                let min = u32::from(*at_least_one);
                if *stop_after_first {
                    return self.repeat(g, min, 1);
                }
                let sep = self.lit(separator.as_bytes())?;
                let next = self.seq(vec![sep, g])?;
                let more = self.repeat(next, 0, u32::MAX)?;
                let list = self.seq(vec![g, more])?;
                self.repeat(list, min, 1)
            }
            Expr::Dispatch(d) => {
                let mut alts = Vec::new();
                let mut markers: Vec<String> = d.excludes.iter().chain(&ends).cloned().collect();
                for (pat, x) in &d.rules {
                    markers.push(pat.clone());
                    let p = self.lit(pat.as_bytes())?;
                    let body = self.within(None, Some(pat.clone()), x, depth)?;
                    alts.push(self.seq(vec![p, body])?);
                }
                let g = self.c.b.push(Node::Union(alts))?;
                self.dispatched(g, d.looping, &mut |l: &mut Self| {
                    l.free_text(&markers, None)
                })
            }
            _ => unreachable!("not a structural tag's form"),
        }
    }

    /// `x` lowered inside a tag: with its end strings (`ends`, kept where `None`) and its
    /// begin (names the calls).
    fn within(
        &mut self,
        ends: Option<Vec<String>>,
        begin: Option<String>,
        x: &'a Expr,
        depth: usize,
    ) -> Result<NodeId> {
        let saved_ends = ends.map(|e| std::mem::replace(&mut self.tag.ends, e));
        let saved_begin = std::mem::replace(&mut self.tag.begin, begin);
        let r = self.lower(x, V::Any, depth + 1);
        if let Some(e) = saved_ends {
            self.tag.ends = e;
        }
        self.tag.begin = saved_begin;
        r
    }

    /// A schema region's value (`args`, captured) reported as a call named by the enclosing
    /// tag's begin.
    pub(super) fn region_call(&mut self, args: NodeId) -> Result<NodeId> {
        self.functions.push(call_label(self.tag.begin.as_deref()));
        let i = self.functions.len() as u32 - 1;
        self.c.b.push(Node::Capture(Capture::Call(i), args))
    }

    /// A forms' union `g` after free text, as `dispatch` arranges them: any number of them
    /// with free text after each (`looping`), else at most one.
    fn dispatched(
        &mut self,
        g: NodeId,
        looping: bool,
        free: &mut dyn FnMut(&mut Self) -> Result<NodeId>,
    ) -> Result<NodeId> {
        let t = free(self)?;
        if looping {
            let t2 = free(self)?;
            let pair = self.seq(vec![g, t2])?;
            let more = self.repeat(pair, 0, u32::MAX)?;
            self.seq(vec![t, more])
        } else {
            let opt = self.repeat(g, 0, 1)?;
            self.seq(vec![t, opt])
        }
    }

    fn delim(&mut self, d: &Delim) -> Result<NodeId> {
        match d {
            Delim::Text(s) => self.lit(s.as_bytes()),
            Delim::Token(t) => {
                let s = self.token_text(t)?;
                self.special(&s)
            }
        }
    }

    /// The text of the special token `t` names: an error naming it when the vocabulary has no
    /// such special token (or, with no vocabulary given, when it is named by id).
    fn token_text(&self, t: &TokenRef) -> Result<String> {
        let known = !self.tag.token_ids.is_empty();
        match &t.id {
            Err(text) => {
                if !known || self.tag.token_ids.iter().any(|(_, s)| s == text) {
                    Ok(text.clone())
                } else {
                    Err(bad(
                        &t.path,
                        format!(
                            "token {text:?} is not a special token of the vocabulary (callmask \
                             matches ordinary tokens by their bytes: write it as a string)"
                        ),
                    ))
                }
            }
            Ok(n) => match self
                .tag
                .token_ids
                .iter()
                .find(|(id, _)| u64::from(*id) == *n)
            {
                Some((_, s)) => Ok(s.clone()),
                None if !known => Err(bad(
                    &t.path,
                    format!(
                        "token id {n} needs the vocabulary: compile with \
                         StructuralTagOptions::for_vocab"
                    ),
                )),
                None if self.tag.vocab_len > 0 && *n >= self.tag.vocab_len as u64 => Err(bad(
                    &t.path,
                    format!(
                        "token id {n} is not in the vocabulary ({} tokens)",
                        self.tag.vocab_len
                    ),
                )),
                None => Err(bad(
                    &t.path,
                    format!(
                        "token id {n} is not a special token of the vocabulary (callmask \
                         matches ordinary tokens by their bytes: write it as a string)"
                    ),
                )),
            },
        }
    }

    fn token_texts(&self, ts: &[TokenRef]) -> Result<Vec<String>> {
        ts.iter().map(|t| self.token_text(t)).collect()
    }

    /// Any tokens but the special tokens `excluded` (and the enclosing tags' end tokens, and
    /// end-of-generation): text holding none of `markers`, with the vocabulary's other special
    /// tokens anywhere in it. Exact at the token level: any ordinary token may come, and the
    /// special tokens are told apart from their spellings.
    fn any_tokens(&mut self, excluded: &[String], markers: &[String]) -> Result<NodeId> {
        let t = self.free_text(markers, None)?;
        match self.token_runs(excluded, markers)? {
            None => Ok(t),
            Some(more) => self.seq(vec![t, more]),
        }
    }

    /// The special tokens a free token region allows: the vocabulary's, but end-of-generation,
    /// `excluded` and the enclosing tags' end tokens.
    fn allowed_specials(&self, excluded: &[String]) -> Vec<String> {
        self.tag
            .token_ids
            .iter()
            .filter(|(id, s)| {
                !self.tag.eos_tokens.contains(id)
                    && !excluded.contains(s)
                    && !self.tag.end_tokens.contains(s)
            })
            .map(|(_, s)| s.clone())
            .collect()
    }

    /// Any number of (allowed special token, text) pairs; `None` when no special token is
    /// allowed.
    fn token_runs(&mut self, excluded: &[String], markers: &[String]) -> Result<Option<NodeId>> {
        let allowed = self.allowed_specials(excluded);
        if allowed.is_empty() {
            return Ok(None);
        }
        let mut alts = Vec::new();
        for s in &allowed {
            alts.push(self.special(s)?);
        }
        let u = self.c.b.push(Node::Union(alts))?;
        let t2 = self.free_text(markers, None)?;
        let pair = self.seq(vec![u, t2])?;
        Ok(Some(self.repeat(pair, 0, u32::MAX)?))
    }

    /// `exclude_token` (`first`) then `any_tokens` (`rest`): one token or more. The first is an
    /// allowed special token then any tokens, or an ordinary token, i.e. non-empty text, then
    /// any tokens (a token boundary inside text is free, so this is exact).
    fn some_tokens(
        &mut self,
        first: &[String],
        rest: &[String],
        markers: &[String],
    ) -> Result<NodeId> {
        let mut alts = Vec::new();
        let firsts = self.allowed_specials(first);
        if !firsts.is_empty() {
            let mut specials = Vec::new();
            for s in &firsts {
                specials.push(self.special(s)?);
            }
            let u = self.c.b.push(Node::Union(specials))?;
            let tail = self.any_tokens(rest, markers)?;
            alts.push(self.seq(vec![u, tail])?);
        }
        let text = self.nonempty_text(markers)?;
        alts.push(match self.token_runs(rest, markers)? {
            None => text,
            Some(more) => self.seq(vec![text, more])?,
        });
        self.c.b.push(Node::Union(alts))
    }

    /// Free text as [`Self::free_text`], not empty.
    fn nonempty_text(&mut self, markers: &[String]) -> Result<NodeId> {
        let m = sorted_markers(markers);
        let d = self.c.cached(Lexeme::NonEmptyText(m.clone()), |c| {
            let states = c.opts.max_lexeme_states;
            let ms: Vec<&str> = m.iter().map(String::as_str).collect();
            let t = crate::grammar::dfa::Dfa::text_without(&ms, None, states)
                .map_err(|e| c.b.dfa_err(e, "", ""))?;
            let empty = c.b.regex("", "")?;
            t.product(&empty, crate::grammar::dfa::Op::AndNot, states)
                .map_err(|e| c.b.dfa_err(e, "", ""))
        })?;
        let l = self.c.lexeme(d)?;
        self.c.b.push(Node::Capture(Capture::Text, l))
    }

    /// Free text then tags (`g`) as `triggered_tags` arranges them.
    fn triggered(
        &mut self,
        g: NodeId,
        free: &mut dyn FnMut(&mut Self) -> Result<NodeId>,
        at_least_one: bool,
        stop_after_first: bool,
    ) -> Result<NodeId> {
        match (at_least_one, stop_after_first) {
            // Exactly one tag, nothing around it.
            (true, true) => Ok(g),
            // Text, then at most one tag.
            (false, true) => {
                let t = free(self)?;
                let opt = self.repeat(g, 0, 1)?;
                self.seq(vec![t, opt])
            }
            // Text, then any number of (tag, text).
            (false, false) => {
                let t = free(self)?;
                let t2 = free(self)?;
                let pair = self.seq(vec![g, t2])?;
                let more = self.repeat(pair, 0, u32::MAX)?;
                self.seq(vec![t, more])
            }
            // A tag first, then text and tags.
            (true, false) => {
                let t = free(self)?;
                let t2 = free(self)?;
                let pair = self.seq(vec![g, t2])?;
                let more = self.repeat(pair, 0, u32::MAX)?;
                self.seq(vec![g, t, more])
            }
        }
    }

    /// Free text that holds none of `markers` (at most `max_chars` characters), captured as the
    /// reply's text.
    fn free_text(&mut self, markers: &[String], max_chars: Option<u32>) -> Result<NodeId> {
        text_node(
            &mut self.c,
            &sorted_markers(markers),
            max_chars,
            Capture::Text,
        )
    }

    fn tag(&mut self, t: &'a Tag, depth: usize) -> Result<NodeId> {
        let begin = self.delim(&t.begin)?;
        let ends: Vec<String> = t.end.clone().unwrap_or_default();
        let end_token = match &t.end {
            Err(tok) => Some(self.token_text(tok)?),
            Ok(_) => None,
        };
        if let Some(e) = &end_token {
            self.tag.end_tokens.push(e.clone());
        }
        let content = self.within(Some(ends), Some(t.begin_text()), &t.content, depth);
        if end_token.is_some() {
            self.tag.end_tokens.pop();
        }
        let content = content?;
        let end = match &end_token {
            Some(tok) => self.special(tok)?,
            None => {
                let ends = t.end.as_ref().map_or(&[][..], Vec::as_slice);
                let mut alts = Vec::new();
                for e in ends {
                    alts.push(self.lit(e.as_bytes())?);
                }
                if alts.len() == 1 {
                    alts[0]
                } else {
                    self.c.b.push(Node::Union(alts))?
                }
            }
        };
        self.seq(vec![begin, content, end])
    }

    fn tags(&mut self, tags: &'a [Tag], depth: usize) -> Result<NodeId> {
        let mut alts = Vec::new();
        for t in tags {
            alts.push(self.tag(t, depth)?);
        }
        self.c.b.push(Node::Union(alts))
    }

    pub(super) fn repeat(&mut self, item: NodeId, min: u32, max: u32) -> Result<NodeId> {
        self.c.b.push(Node::Repeat { item, min, max })
    }

    pub(super) fn seq(&mut self, items: Vec<NodeId>) -> Result<NodeId> {
        self.c.b.push(Node::Seq(items))
    }
}

/// `markers` without empty ones, sorted, without repeats (one cache key per set).
fn sorted_markers(markers: &[String]) -> Vec<String> {
    let mut m: Vec<String> = markers.iter().filter(|s| !s.is_empty()).cloned().collect();
    m.sort();
    m.dedup();
    m
}
