//! The recovering parse ([`Grammar::parse_recovering`]): reads what it can of an output the
//! strict grammar refuses, as the peers' tool parsers do for unconstrained models, and reports
//! each liberty it took as a [`Recovery`].
//!
//! It takes only these liberties, both checked by the strict grammar itself, so it never returns
//! a call the text does not contain:
//! - **Closing an output that stops early.** When the text is a prefix of an output the grammar
//!   accepts (a missing `</tool_call>` at the end), one shortest completion is appended, but
//!   only if it writes no argument, call name or text: closing markers and brackets only.
//! - **Closing a structure the model left open** before the next one (a missing
//!   `</tool_call>` before the next `<tool_call>`): a prefix of the shortest completion at the
//!   failing byte, again only closing markers and brackets, after which the rest reads.
//! - **Skipping what cannot be read.** When the parse fails at some byte, the longest prefix
//!   that is a complete output is kept, and the rest is read again as a fresh output from the
//!   first position after the failure where that works (recursively), so the calls after a
//!   malformed one, or after text where the format allows none, are still found; the skipped
//!   bytes are reported.
//!
//! - **Reading arguments written as a JSON string.** Where the parse fails at a `"` and the
//!   JSON string there holds a JSON object (`"arguments": "{\"a\": 1}"`, as models trained on
//!   OpenAI's wire format write them), the string is read as that object, if the strict grammar
//!   then reads past it; later offsets refer to the text with the string decoded.
//!
//! - **Reading a value under another type tag.** Where the parse fails in a value of a tagged
//!   form (DeepSeek V3.2's `string="true"`/`string="false"`), the last tag before the failure
//!   is read as another of the same form if the strict grammar then reads past the failure
//!   (`string="true">42` for an integer: `42`), as the peers coerce such values by the schema.
//!
//! - **Reading Python's `True`, `False`, `None` as JSON's literals** where the parse fails at
//!   one and then reads on (a boolean in a Qwen3-Coder XML value).
//!
//! - **Finding calls after text.** Where the format's calls must open the output (a Python
//!   list, a bare JSON call: the bytes a call-bearing output can start with are few) and
//!   nothing above found a call, the calls are looked for further in, at each byte that can
//!   open them, as the peers' parsers do ("Here is the call: [f(a=1)]"): each complete run of
//!   calls found there is returned, and the text around them as the reply's text.
//!
//! - **Putting back an opening marker the model left out.** Where nothing above found a
//!   call, one of the markers that end the format's free text (`<|tool_call>`, `<tool_call>`)
//!   is assumed before text that, so opened, reads as a complete call (`call:f{..}` after
//!   Gemma 4's thought channel, a Qwen3-Coder `<function=f>` without its `<tool_call>`), as
//!   the peers' fallbacks read them; only where the marker is then not read as text, and later
//!   offsets refer to the text with the markers put back.
//!
//! - **Reading an output written escaped.** Where nothing above found a call and the output
//!   holds JSON string escapes (`[{\"id\": \"1\"}]` inside GLM's `<arg_value>`), the whole
//!   output is read once more with its escapes undone.
//!
//! Trade-off: it is a search with the strict grammar as the oracle, not a second, looser
//! grammar per dialect; it needs no knowledge of a dialect's markers, and what it accepts is by
//! construction what the grammar accepts in pieces. Its cost is bounded by
//! [`MAX_RESTARTS`] fresh parses for each of its three searches (the strict reading's, the markers'
//! put back, the unescaped output).

use super::{collect, Capture, Event, Parsed, StreamParser, SPECIAL};
use crate::automaton::complete::Completer;
use crate::error::{Error, Result};
use crate::grammar::{Grammar, GrammarInner, Node, NodeId};

/// Most fresh parses one recovering parse tries after failures.
pub const MAX_RESTARTS: usize = 2048;

/// Most bytes before a failure where a left-out closing marker is looked for.
const MAX_CLOSE_BACK: usize = 32;

/// Most symbols appended to close an output that stops early.
const MAX_CLOSING: usize = 256;

/// A liberty the recovering parse took.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Recovery {
    /// The output ended before its last structure was closed: `appended` (closing markers or
    /// brackets only) was assumed at the end.
    Closed {
        /// What was assumed.
        appended: String,
    },
    /// A closing marker (or bracket) the model left out before `offset` was assumed there.
    Inserted {
        /// Byte offset in the output.
        offset: usize,
        /// What was assumed.
        text: String,
    },
    /// Text where the format allows none beside calls (before or after them): returned as the
    /// reply's text.
    TextAround {
        /// Byte offset in the output.
        offset: usize,
        /// The text, as written.
        text: String,
    },
    /// A JSON string holding a JSON object, where the format has an object (a call's
    /// arguments written as a string): read as that object.
    Decoded {
        /// Byte offset in the output.
        offset: usize,
        /// The string, as written.
        text: String,
    },
    /// The whole output was written escaped, as inside a JSON string (`\"` for `"`, `\n` for
    /// a line break: GLM's arguments as some serving stacks hand them over), and was read
    /// unescaped; offsets refer to the unescaped text.
    Unescaped,
    /// A value was written under the wrong type tag of its form (`string="true"` before a
    /// number, as DeepSeek V3.2 may write it) and read under another, as the peers' parsers
    /// coerce it by the schema.
    Retagged {
        /// Byte offset in the output.
        offset: usize,
        /// The tag, as written.
        text: String,
        /// The tag it was read as.
        read_as: String,
    },
    /// Python's `True`, `False` or `None` where the format has a JSON value: read as `true`,
    /// `false` or `null`.
    PythonLiteral {
        /// Byte offset in the output.
        offset: usize,
        /// The literal, as written.
        text: String,
    },
    /// The output was read again from here as a fresh one: a second block of calls after
    /// text, where the format has one block (the peers read each block).
    Restarted {
        /// Byte offset in the output.
        offset: usize,
    },
    /// These bytes could not be read as part of a valid output and were skipped.
    Skipped {
        /// Byte offset in the output.
        offset: usize,
        /// The skipped text.
        text: String,
        /// Why the strict parse stopped there.
        reason: String,
    },
}

/// The result of one strict attempt: where it could last have ended, and where it failed.
struct Attempt {
    /// The longest prefix (bytes) after which the output could have ended.
    last_end: Option<usize>,
    /// Where and why it failed (`None`: accepted in full).
    failed: Option<(usize, String)>,
    /// Where the calls completed before the failure end, latest first.
    call_ends: Vec<usize>,
    /// Where the calls still open at the failure start, latest first; at the failure itself
    /// when none is open (the failure is between calls: an unknown function's name).
    open_calls: Vec<usize>,
    /// Where the calls read so far start (open or complete).
    call_starts: Vec<usize>,
}

impl Grammar {
    /// Parses an output like [`Grammar::parse`], but reads what it can of one the strict
    /// grammar refuses (an unconstrained model's), as the peers' tool parsers do: an output
    /// that stops before its closing marker, calls after text or a malformed call that the
    /// format does not allow there. Each liberty is listed in [`Parsed::recovered`]; a call is
    /// only ever returned where the strict grammar accepts it, so none is invented. An output
    /// the strict grammar accepts gives exactly [`Grammar::parse`]'s result, but for calls
    /// after text in a format whose calls must open the output (a Python list, a bare JSON
    /// call), which the strict grammar reads as plain text and this finds, as the peers'
    /// parsers do. Fails only where nothing of the output can be read.
    pub fn parse_recovering(&self, text: &str) -> Result<Parsed> {
        let mut budget = MAX_RESTARTS;
        let opens = call_openers(&self.inner);
        let within = opens.and_then(|o| self.calls_within(text, 0, &o, &mut budget));
        let mut out = match within {
            Some(found) => found,
            None => match self.recover_from(text, 0, &mut budget) {
                Ok(out) => out,
                Err(e) => self
                    .reopen(text, &Parsed::default(), &mut budget)
                    .ok_or(e)?,
            },
        };
        if out.tool_calls.is_empty() {
            let mut budget = MAX_RESTARTS;
            if let Some(reopened) = self.reopen(text, &out, &mut budget) {
                out = reopened;
            }
        }
        if out.tool_calls.is_empty() {
            if let Some(plain) = unescape(text) {
                // A budget of its own: the searches above may have spent theirs.
                let mut budget = MAX_RESTARTS;
                if let Ok(mut read) = self.recover_from(&plain, 0, &mut budget) {
                    if !read.tool_calls.is_empty() {
                        read.recovered.insert(0, Recovery::Unescaped);
                        out = read;
                    }
                }
            }
        }
        for (i, c) in out.tool_calls.iter_mut().enumerate() {
            if c.id.starts_with("call_") {
                c.id = format!("call_{i}");
            }
        }
        Ok(out)
    }

    fn recover_from(&self, text: &str, base: usize, budget: &mut usize) -> Result<Parsed> {
        let attempt = self.attempt(text);
        let Some((fail_at, reason)) = attempt.failed.clone() else {
            return self.parse(text);
        };
        if fail_at >= text.len() {
            if let Some((parsed, appended)) = self.close(text) {
                let mut parsed = parsed;
                parsed.recovered.push(Recovery::Closed { appended });
                return Ok(parsed);
            }
        }
        if let Some(out) = self.decode_string_object(text, base, fail_at, budget) {
            return Ok(out);
        }
        if let Some(out) = self.retag(text, base, fail_at, budget) {
            return Ok(out);
        }
        if let Some(out) = self.json_literal(text, base, fail_at, budget) {
            return Ok(out);
        }
        // The failure may be noticed a few bytes into the next marker (its spelling read as
        // text): try closing at each of the bytes before it too.
        let floor = fail_at.saturating_sub(MAX_CLOSE_BACK);
        for at in (floor..=fail_at.min(text.len().saturating_sub(1))).rev() {
            if !text.is_char_boundary(at) || *budget == 0 {
                continue;
            }
            *budget -= 1;
            if let Some((mut parsed, appended)) = self.insert_closing(text, at) {
                parsed.recovered.push(Recovery::Inserted {
                    offset: base + at,
                    text: appended,
                });
                return Ok(parsed);
            }
        }
        // A second block after text, where the format has only one: the output up to a marker
        // just before the failure (the failure shows inside the marker, its spelling read as
        // text), then a fresh output from that marker.
        for at in (floor.max(1)..=fail_at.min(text.len().saturating_sub(1))).rev() {
            if !text.is_char_boundary(at) || *budget == 0 {
                continue;
            }
            let opens = self
                .inner
                .specials
                .iter()
                .any(|s| !s.is_empty() && text[at..].starts_with(s.as_str()));
            if !opens {
                continue;
            }
            let Ok(mut out) = self.parse(&text[..at]) else {
                continue;
            };
            *budget -= 1;
            if let Ok(rest) = self.recover_from(&text[at..], base + at, budget) {
                if !rest.tool_calls.is_empty() {
                    out.recovered
                        .push(Recovery::Restarted { offset: base + at });
                    merge(&mut out, rest);
                    return Ok(out);
                }
            }
        }
        // The same, where more is wrong further in: a marker put back after which the output
        // reads past the failure, the rest recovered in turn (`[TOOL_CALLS]f{..}[TOOL_CALLS]g{..}`
        // without Mistral's `[ARGS]`).
        for at in (floor..=fail_at.min(text.len().saturating_sub(1))).rev() {
            if !text.is_char_boundary(at) || *budget == 0 {
                continue;
            }
            *budget -= 1;
            let Some((full, inserted)) = self.insert_reading_on(text, at, fail_at) else {
                continue;
            };
            if let Ok(mut out) = self.recover_from(&full, base, budget) {
                out.recovered.insert(
                    0,
                    Recovery::Inserted {
                        offset: base + at,
                        text: inserted,
                    },
                );
                return Ok(out);
            }
        }
        if let Some(out) = self.splice(text, base, fail_at, &reason, &attempt, budget) {
            return Ok(out);
        }
        let prefix = match attempt.last_end {
            Some(p) => Some((p, self.parse(&text[..p])?)),
            None => None,
        };
        let from = prefix.as_ref().map_or(0, |(p, _)| *p);
        // From the failing byte itself where that skips something or shortens the text (a
        // second block of calls after text, where the format has one: read as a fresh output).
        let mut q = fail_at.max(from).max(1);
        while q <= text.len() && *budget > 0 {
            if text.is_char_boundary(q) {
                *budget -= 1;
                if let Ok(rest) = self.recover_from(&text[q..], base + q, budget) {
                    if !rest.tool_calls.is_empty() || q == text.len() || rest_has_text(&rest) {
                        let mut out = prefix.map(|(_, p)| p).unwrap_or_default();
                        out.recovered.push(if q > from {
                            Recovery::Skipped {
                                offset: base + from,
                                text: text[from..q].to_owned(),
                                reason: reason.clone(),
                            }
                        } else if rest.tool_calls.is_empty() {
                            Recovery::TextAround {
                                offset: base + q,
                                text: text[q..].to_owned(),
                            }
                        } else {
                            Recovery::Restarted { offset: base + q }
                        });
                        merge(&mut out, rest);
                        return Ok(out);
                    }
                }
            }
            q += 1;
        }
        match prefix {
            Some((p, mut out)) => {
                out.recovered.push(Recovery::Skipped {
                    offset: base + p,
                    text: text[p..].to_owned(),
                    reason,
                });
                Ok(out)
            }
            None => Err(Error::Parse(crate::error::Rejection {
                offset: base + fail_at,
                reason,
            })),
        }
    }

    /// The output read with the opening markers a model left out put back (see the module
    /// doc): at each position where one of the grammar's text-ending markers, put there, makes
    /// what follows a complete call, the marker is assumed if the whole output then reads with
    /// more calls than `found` (and the marker is not read as text); `None` when none is.
    fn reopen(&self, text: &str, found: &Parsed, budget: &mut usize) -> Option<Parsed> {
        let markers = &self.inner.text_markers;
        let mut text = text.to_owned();
        let mut best: Option<Parsed> = None;
        let mut assumed = Vec::new();
        let mut q = 0;
        while q < text.len() && *budget > 0 {
            if !text.is_char_boundary(q) {
                q += 1;
                continue;
            }
            // Not before a bare JSON value: prose shows those as examples, and the peers that
            // look for calls without their marker read only calls that open with a keyword.
            if matches!(text.as_bytes()[q], b'{' | b'[' | b'"') {
                q += 1;
                continue;
            }
            let mut next = q + 1;
            for m in markers {
                if m.is_empty() || text[q..].starts_with(m.as_str()) || *budget == 0 {
                    continue;
                }
                *budget -= 1;
                let probe = format!("{m}{}", &text[q..]);
                let a = self.attempt(&probe);
                // A call must start right after the marker and be read to its end.
                let reads_call = a.call_starts.contains(&m.len())
                    && (!a.call_ends.is_empty()
                        || a.failed.as_ref().is_none_or(|(f, _)| *f >= probe.len()));
                if !reads_call {
                    continue;
                }
                let full = format!("{}{m}{}", &text[..q], &text[q..]);
                let Ok(out) = self.recover_from(&full, 0, budget) else {
                    continue;
                };
                let have = best.as_ref().unwrap_or(found).tool_calls.len();
                let as_text = out.text.contains(m.as_str())
                    || out
                        .reasoning
                        .as_ref()
                        .is_some_and(|r| r.contains(m.as_str()));
                if out.tool_calls.len() > have && !as_text {
                    assumed.push(Recovery::Inserted {
                        offset: q,
                        text: m.clone(),
                    });
                    best = Some(out);
                    text = full;
                    next = q + m.len() + 1;
                    break;
                }
            }
            q = next;
        }
        let mut out = best?;
        // Offsets in the output as written: each assumed marker shifts the later ones.
        let mut shift = 0;
        for r in &mut assumed {
            if let Recovery::Inserted { offset, text } = r {
                *offset -= shift;
                shift += text.len();
            }
        }
        out.recovered.splice(0..0, assumed);
        Some(out)
    }

    /// Reads the value the output fails in under another of its form's type tags (see the
    /// module doc): the last tag starting at or before `fail_at` replaced by another of the same form, if the
    /// strict grammar then reads past the failure; `None` otherwise.
    fn retag(&self, text: &str, base: usize, fail_at: usize, budget: &mut usize) -> Option<Parsed> {
        for tags in &self.inner.type_tags {
            // The last tag that starts at or before the failure (which may fail inside it).
            let last = |t: &String| {
                let mut end = (fail_at + t.len()).min(text.len());
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                text[..end].rfind(t.as_str()).filter(|&i| i <= fail_at)
            };
            let Some((at, tag)) = tags
                .iter()
                .filter(|t| !t.is_empty())
                .filter_map(|t| last(t).map(|i| (i, t)))
                .max_by_key(|(i, _)| *i)
            else {
                continue;
            };
            for other in tags.iter().filter(|o| *o != tag && !o.is_empty()) {
                if *budget == 0 {
                    return None;
                }
                *budget -= 1;
                let end = at + tag.len();
                let full = format!("{}{other}{}", &text[..at], &text[end..]);
                let moved = (fail_at + other.len()).saturating_sub(tag.len());
                if self.attempt(&full).failed.is_some_and(|(f, _)| f <= moved) {
                    continue;
                }
                let Ok(mut out) = self.recover_from(&full, base, budget) else {
                    continue;
                };
                out.recovered.insert(
                    0,
                    Recovery::Retagged {
                        offset: base + at,
                        text: tag.clone(),
                        read_as: other.clone(),
                    },
                );
                return Some(out);
            }
        }
        None
    }

    /// Reads Python's `True`, `False` or `None` at `fail_at` as JSON's `true`, `false` or
    /// `null` (a boolean written the Python way in an XML value, as vLLM's and SGLang's
    /// Qwen3-Coder parsers read it), if the strict grammar then reads past it.
    fn json_literal(
        &self,
        text: &str,
        base: usize,
        fail_at: usize,
        budget: &mut usize,
    ) -> Option<Parsed> {
        let rest = text.get(fail_at..)?;
        let (python, json) = [("True", "true"), ("False", "false"), ("None", "null")]
            .into_iter()
            .find(|(p, _)| rest.starts_with(p))?;
        if *budget == 0 {
            return None;
        }
        *budget -= 1;
        let full = format!("{}{json}{}", &text[..fail_at], &rest[python.len()..]);
        if self
            .attempt(&full)
            .failed
            .is_some_and(|(f, _)| f < fail_at + json.len())
        {
            return None;
        }
        let mut out = self.recover_from(&full, base, budget).ok()?;
        out.recovered.insert(
            0,
            Recovery::PythonLiteral {
                offset: base + fail_at,
                text: python.to_owned(),
            },
        );
        Some(out)
    }

    /// Reads the JSON string at `at` as the JSON object it holds (see the module doc), when
    /// the strict grammar then reads past that object; `None` otherwise.
    fn decode_string_object(
        &self,
        text: &str,
        base: usize,
        at: usize,
        budget: &mut usize,
    ) -> Option<Parsed> {
        if *budget == 0 || text.as_bytes().get(at) != Some(&b'"') {
            return None;
        }
        let mut strings = serde_json::Deserializer::from_str(&text[at..]).into_iter::<String>();
        let inner = strings.next()?.ok()?;
        let len = strings.byte_offset();
        let object: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&inner).ok()?;
        let compact = serde_json::Value::Object(object).to_string();
        let decoded = format!("{}{}{}", &text[..at], compact, &text[at + len..]);
        *budget -= 1;
        let read_past = match self.attempt(&decoded).failed {
            None => true,
            Some((f, _)) => f >= at + compact.len(),
        };
        if !read_past {
            return None;
        }
        let mut out = self.recover_from(&decoded, base, budget).ok()?;
        out.recovered.insert(
            0,
            Recovery::Decoded {
                offset: base + at,
                text: text[at..at + len].to_owned(),
            },
        );
        Some(out)
    }

    /// The runs of calls in `text`, wherever they start at one of the bytes `opens` or a
    /// special token (see the module doc), with the text around them; `None` when no complete
    /// call is found.
    fn calls_within(
        &self,
        text: &str,
        base: usize,
        opens: &ByteSet,
        budget: &mut usize,
    ) -> Option<Parsed> {
        let b = text.as_bytes();
        for q in 0..b.len() {
            if *budget == 0 {
                return None;
            }
            let special_here = self
                .inner
                .specials
                .iter()
                .any(|s| !s.is_empty() && b[q..].starts_with(s.as_bytes()));
            if !text.is_char_boundary(q) || !(special_here || opens.contains(b[q])) {
                continue;
            }
            *budget -= 1;
            let rest = &text[q..];
            let attempt = self.attempt(rest);
            let end = match attempt.failed {
                None => rest.len(),
                Some(_) => match attempt.last_end {
                    Some(e) if e > 0 => e,
                    _ => continue,
                },
            };
            let Ok(calls) = self.parse(&rest[..end]) else {
                continue;
            };
            if calls.tool_calls.is_empty() {
                continue;
            }
            let mut out = Parsed {
                text: text[..q].trim().to_owned(),
                ..Parsed::default()
            };
            if q > 0 {
                out.recovered.push(Recovery::TextAround {
                    offset: base,
                    text: text[..q].to_owned(),
                });
            }
            merge(&mut out, calls);
            let after = &rest[end..];
            if !after.trim().is_empty() {
                let at = base + q + end;
                let tail = self
                    .calls_within(after, at, opens, budget)
                    .unwrap_or_else(|| {
                        let mut p = Parsed {
                            text: after.trim().to_owned(),
                            ..Parsed::default()
                        };
                        p.recovered.push(Recovery::TextAround {
                            offset: at,
                            text: after.to_owned(),
                        });
                        p
                    });
                merge(&mut out, tail);
            }
            return Some(out);
        }
        None
    }

    /// Skips one unreadable stretch: the text up to the end of a complete call (or a complete
    /// output), then the text from some position after the failure, read as one output.
    fn splice(
        &self,
        text: &str,
        base: usize,
        fail_at: usize,
        reason: &str,
        attempt: &Attempt,
        budget: &mut usize,
    ) -> Option<Parsed> {
        // A complete output that holds every call completed so far is the best place to cut
        // (nothing read is lost: Gemma 4's calls end before their closing marker); then the
        // ends of the calls, latest first; then the complete output.
        let mut cuts = Vec::new();
        if let Some(e) = attempt.last_end {
            if attempt.call_ends.first().is_none_or(|&c| e >= c) {
                cuts.push(e);
            }
        }
        cuts.extend(&attempt.call_ends);
        cuts.extend(attempt.last_end);
        // The start of the call that fails (a malformed call among well-formed ones:
        // `[bad(x=b'z'), f(a=1)]`), dropped whole: first where it comes after every other cut
        // (the structure around it is kept), else last.
        let latest = cuts.iter().copied().max();
        for &c in &attempt.open_calls {
            if latest.is_none_or(|l| c > l) {
                cuts.insert(0, c);
            } else {
                cuts.push(c);
            }
        }
        let mut seen = std::collections::HashSet::new();
        cuts.retain(|c| seen.insert(*c));
        for c in cuts {
            // Not to the end: dropping all the rest is the last resort of `recover_from`.
            for q in fail_at.max(c) + 1..text.len() {
                if !text.is_char_boundary(q) || *budget == 0 {
                    continue;
                }
                *budget -= 1;
                let spliced = format!("{}{}", &text[..c], &text[q..]);
                let (mut out, closed) = match self.parse(&spliced) {
                    Ok(p) => (p, None),
                    Err(_) => match self.close(&spliced) {
                        Some((p, appended)) => (p, Some(appended)),
                        None => continue,
                    },
                };
                out.recovered.push(Recovery::Skipped {
                    offset: base + c,
                    text: text[c..q].to_owned(),
                    reason: reason.to_owned(),
                });
                if let Some(appended) = closed {
                    out.recovered.push(Recovery::Closed { appended });
                }
                return Some(out);
            }
        }
        None
    }

    /// Runs the strict parser over `text`, noting where it could have ended and where it fails.
    fn attempt(&self, text: &str) -> Attempt {
        let g = self.inner.clone();
        let mut p = StreamParser::new(self);
        let b = text.as_bytes();
        let can_end = |p: &StreamParser| p.paths.iter().any(|x| g.can_end(&x.stack));
        let mut last_end = can_end(&p).then_some(0);
        let mut i = 0;
        'outer: while i < b.len() {
            for (k, name) in g.specials.iter().enumerate() {
                if !name.is_empty() && b[i..].starts_with(name.as_bytes()) {
                    let sym = SPECIAL + k as crate::automaton::Sym;
                    if p.try_sym(sym, name.len()) {
                        i += name.len();
                        if can_end(&p) {
                            last_end = Some(i);
                        }
                        continue 'outer;
                    }
                }
            }
            if !p.try_sym(b[i] as crate::automaton::Sym, 1) {
                let reason = format!("unexpected {:?}", String::from_utf8_lossy(&b[i..i + 1]));
                return Attempt {
                    last_end,
                    failed: Some((i, reason)),
                    call_ends: call_ends(&p),
                    open_calls: open_calls(&p, i),
                    call_starts: call_starts(&p),
                };
            }
            i += 1;
            if can_end(&p) && text.is_char_boundary(i) {
                last_end = Some(i);
            }
        }
        Attempt {
            last_end,
            call_ends: call_ends(&p),
            open_calls: Vec::new(),
            call_starts: call_starts(&p),
            failed: (!can_end(&p)).then(|| {
                (
                    text.len(),
                    "the output ends before it is complete".to_owned(),
                )
            }),
        }
    }

    /// One shortest completion of `text` (a prefix of an accepted output), as text.
    fn completion(&self, text: &str) -> Option<String> {
        let mut p = StreamParser::new(self);
        p.push(text).ok()?;
        let stacks: Vec<_> = p.paths.iter().map(|x| x.stack.clone()).collect();
        let completer = Completer::new(self.inner.clone());
        let syms = completer.complete(&stacks, |_| true, 0, MAX_CLOSING)?;
        let mut appended = Vec::new();
        for s in syms {
            if s >= SPECIAL {
                appended.extend_from_slice(self.inner.specials[(s - SPECIAL) as usize].as_bytes());
            } else {
                appended.push(s as u8);
            }
        }
        String::from_utf8(appended).ok()
    }

    /// `full` parsed, if it is accepted and the bytes `start..end` (assumed, not the model's)
    /// write no argument, call name, id or text: closing markers and brackets only.
    fn parse_assuming(&self, full: &str, start: usize, end: usize) -> Option<Parsed> {
        let mut q = StreamParser::new(self);
        let mut events: Vec<Event> = q.push(full).ok()?;
        events.extend(q.finish().ok()?);
        let writes_content = q.paths[0].segs.iter().any(|s| {
            let s_end = s.end.unwrap_or(full.len());
            s.start < end && s_end > start && !matches!(s.kind, Capture::Call(_) | Capture::Fields)
        });
        (!writes_content).then(|| collect(events))
    }

    /// `text` with a prefix of the shortest completion of `text[..at]` that is one of the
    /// grammar's markers (a special token's text) put back at `at`, after
    /// which the strict parse reads past `fail_at` (where it failed before), the put-back bytes
    /// writing no argument, call name, id or text; with what was put back.
    fn insert_reading_on(&self, text: &str, at: usize, fail_at: usize) -> Option<(String, String)> {
        let completion = self.completion(&text[..at])?;
        for j in 1..=completion.len() {
            if !completion.is_char_boundary(j) {
                continue;
            }
            let inserted = &completion[..j];
            // Markers only (a special token's text): a bracket or key put back here could
            // re-nest what follows.
            if !self.inner.specials.iter().any(|s| s == inserted) {
                continue;
            }
            let full = format!("{}{inserted}{}", &text[..at], &text[at..]);
            let read = match self.attempt(&full).failed {
                None => full.len(),
                Some((f, _)) if f > fail_at + j => f,
                Some(_) => continue,
            };
            let mut q = StreamParser::new(self);
            if q.push(&full[..read]).is_err() {
                continue;
            }
            let writes_content = q.paths.iter().flat_map(|p| p.segs.iter()).any(|s| {
                let s_end = s.end.unwrap_or(read);
                s.start < at + j
                    && s_end > at
                    && !matches!(s.kind, Capture::Call(_) | Capture::Fields)
            });
            if !writes_content {
                return Some((full, inserted.to_owned()));
            }
        }
        None
    }

    /// `text` (a prefix of an accepted output) closed by one shortest completion that writes
    /// no argument, call name or text; with the text appended.
    fn close(&self, text: &str) -> Option<(Parsed, String)> {
        let appended = self.completion(text)?;
        let full = format!("{text}{appended}");
        let parsed = self.parse_assuming(&full, text.len(), full.len())?;
        Some((parsed, appended))
    }

    /// The output with a closing marker the model left out before byte `at` put back: a
    /// prefix of the shortest completion of `text[..at]`, writing no content, after which the
    /// rest of the text reads (e.g. a missing `</tool_call>` before the next `<tool_call>`).
    fn insert_closing(&self, text: &str, at: usize) -> Option<(Parsed, String)> {
        let completion = self.completion(&text[..at])?;
        for j in 1..=completion.len() {
            if !completion.is_char_boundary(j) {
                continue;
            }
            let inserted = &completion[..j];
            let full = format!("{}{inserted}{}", &text[..at], &text[at..]);
            if let Some(p) = self.parse_assuming(&full, at, at + j) {
                return Some((p, inserted.to_owned()));
            }
        }
        None
    }
}

/// The end offsets of the calls the live interpretations of `p` have completed, latest first.
fn call_ends(p: &StreamParser) -> Vec<usize> {
    let mut ends: Vec<usize> = p
        .paths
        .iter()
        .flat_map(|x| x.segs.iter())
        .filter(|s| matches!(s.kind, Capture::Call(_)))
        .filter_map(|s| s.end)
        .collect();
    ends.sort_unstable_by(|a, b| b.cmp(a));
    ends.dedup();
    ends
}

/// Where the calls the live interpretations of `p` have read (open or complete) start.
fn call_starts(p: &StreamParser) -> Vec<usize> {
    p.paths
        .iter()
        .flat_map(|x| x.segs.iter())
        .filter(|s| matches!(s.kind, Capture::Call(_)))
        .map(|s| s.start)
        .collect()
}

/// The starts of the calls the live interpretations of `p` have open, latest first, or `at`
/// when none has one open but some could start one there (the failure is where a call
/// begins); empty when `p` reads no call there.
fn open_calls(p: &StreamParser, at: usize) -> Vec<usize> {
    let mut starts: Vec<usize> = p
        .paths
        .iter()
        .flat_map(|x| x.segs.iter())
        .filter(|s| matches!(s.kind, Capture::Call(_)) && s.end.is_none())
        .map(|s| s.start)
        .collect();
    if starts.is_empty() && p.expects_call() {
        starts.push(at);
    }
    starts.sort_unstable_by(|a, b| b.cmp(a));
    starts.dedup();
    starts
}

/// The bytes an output of `g` that holds a call can start with (special tokens aside), where
/// they are few ([`MAX_OPENERS`]): the formats whose calls must open the output. `None` where a
/// call may follow free text (the strict parse reads those) or no output holds a call.
fn call_openers(g: &GrammarInner) -> Option<ByteSet> {
    let mut walk = OpenerWalk {
        g,
        has_call: vec![None; g.nodes.len()],
        visiting: vec![false; g.nodes.len()],
        opening: vec![false; g.nodes.len()],
    };
    if !walk.has_call(g.root) {
        return None;
    }
    let set = walk.openers(g.root);
    (set.len() <= MAX_OPENERS).then_some(set)
}

/// Most distinct bytes that may open a call-bearing output for [`call_openers`] to name them.
const MAX_OPENERS: u32 = 8;

/// A set of bytes.
#[derive(Clone, Copy, Default)]
struct ByteSet([u64; 4]);

impl ByteSet {
    fn contains(&self, b: u8) -> bool {
        self.0[(b / 64) as usize] >> (b % 64) & 1 == 1
    }
    fn add(&mut self, other: &[u64; 4]) {
        for (a, o) in self.0.iter_mut().zip(other) {
            *a |= o;
        }
    }
    fn len(&self) -> u32 {
        self.0.iter().map(|w| w.count_ones()).sum()
    }
}

/// The walk behind [`call_openers`] (recursion through the grammar's nodes, each node's
/// "holds a call" remembered; a node met again on its own path (a recursive rule) counts as
/// holding no call, opening nothing and not ending with a special token).
struct OpenerWalk<'g> {
    g: &'g GrammarInner,
    has_call: Vec<Option<bool>>,
    /// The nodes on the path of [`OpenerWalk::has_call`].
    visiting: Vec<bool>,
    /// The nodes on the path of [`OpenerWalk::openers`] or [`OpenerWalk::ends_special`].
    opening: Vec<bool>,
}

impl OpenerWalk<'_> {
    /// Whether some output of `n` holds a call.
    fn has_call(&mut self, n: NodeId) -> bool {
        let i = n as usize;
        if let Some(h) = self.has_call[i] {
            return h;
        }
        if self.visiting[i] {
            return false;
        }
        self.visiting[i] = true;
        let h = match &self.g.nodes[i] {
            Node::Capture(Capture::Call(_), _) => true,
            Node::Capture(_, c) => self.has_call(*c),
            Node::Seq(v) | Node::Union(v) => v.clone().into_iter().any(|c| self.has_call(c)),
            Node::Repeat { item, max, .. } => *max > 0 && self.has_call(*item),
            _ => false,
        };
        self.visiting[i] = false;
        self.has_call[i] = Some(h);
        h
    }

    /// Whether every non-empty output of `n` ends with a special token.
    fn ends_special(&mut self, n: NodeId) -> bool {
        let i = n as usize;
        if self.opening[i] {
            return false;
        }
        self.opening[i] = true;
        let r = match self.g.nodes[i].clone() {
            Node::Special(_) => true,
            Node::Capture(_, c) | Node::Repeat { item: c, .. } => self.ends_special(c),
            Node::Seq(v) => v.last().is_some_and(|&c| self.ends_special(c)),
            Node::Union(v) => v.iter().all(|&c| self.ends_special(c)),
            _ => false,
        };
        self.opening[i] = false;
        r
    }

    /// The bytes a call-bearing output of `n` may start with (special tokens aside).
    fn openers(&mut self, n: NodeId) -> ByteSet {
        let mut set = ByteSet::default();
        let i = n as usize;
        if !self.has_call(n) || self.opening[i] {
            return set;
        }
        self.opening[i] = true;
        match self.g.nodes[i].clone() {
            Node::Capture(Capture::Call(_), c) => set.add(&self.g.first[c as usize]),
            Node::Capture(_, c) => set = self.openers(c),
            Node::Union(v) => {
                for c in v {
                    set.add(&self.openers(c).0);
                }
            }
            Node::Seq(v) => {
                for (k, &c) in v.iter().enumerate() {
                    let later = v[k + 1..].iter().any(|&x| self.has_call(x));
                    if self.has_call(c) {
                        set.add(&self.openers(c).0);
                    }
                    // A prefix that ends with a special token (`<|python_tag|>`, text before it)
                    // opens nothing: that token's spelling is looked for anyway.
                    if later && !self.ends_special(c) {
                        set.add(&self.g.first[c as usize]);
                    }
                    if !self.g.nullable[c as usize] {
                        break;
                    }
                }
            }
            Node::Repeat { item, max, .. } => {
                set.add(&self.openers(item).0);
                if max > 1 {
                    set.add(&self.g.first[item as usize]);
                }
            }
            _ => {}
        }
        self.opening[i] = false;
        set
    }
}

/// `text` read as the content of a JSON string (its escapes `\"`, `\\`, `\n`, `\uXXXX`
/// ... undone; other bytes as they are), where it holds an escape and reads so.
fn unescape(text: &str) -> Option<String> {
    if !text.contains('\\') {
        return None;
    }
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    let mut chars = text.chars();
    while let Some(ch) = chars.next() {
        match ch {
            // An escape: the backslash and what it escapes, as they are.
            '\\' => {
                quoted.push(ch);
                quoted.extend(chars.next());
            }
            '"' => quoted.push_str("\\\""),
            '\n' => quoted.push_str("\\n"),
            '\r' => quoted.push_str("\\r"),
            '\t' => quoted.push_str("\\t"),
            c if (c as u32) < 0x20 => quoted.push_str(&format!("\\u{:04x}", c as u32)),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    serde_json::from_str(&quoted).ok()
}

fn rest_has_text(p: &Parsed) -> bool {
    !p.text.is_empty() || p.reasoning.is_some()
}

/// Appends the calls, text and recoveries of `rest` (read after `out`) to `out`.
fn merge(out: &mut Parsed, rest: Parsed) {
    if !rest.text.is_empty() {
        if !out.text.is_empty() {
            out.text.push(' ');
        }
        out.text.push_str(&rest.text);
    }
    if out.reasoning.is_none() {
        out.reasoning = rest.reasoning;
    }
    out.tool_calls.extend(rest.tool_calls);
    out.recovered.extend(rest.recovered);
}
