//! A call the model repeats ends its list (issue 68). Under the default rule
//! ([`DistinctCalls::End`]), in every dialect with a call writer: a walk that writes a call and
//! then the same call again is let through the repeat (nothing before it or in it bent), no
//! call may start after it, the output then ends within a tight token budget, and the parsed
//! and the streamed calls (under several chunkings) leave the repeat out. Under `Bend` the
//! repeat is refused somewhere; under `Allow` everything passes.

use callmask::parse::{Event, StreamParser};
use callmask::{
    Dialect, DialectOptions, DistinctCalls, Grammar, Matcher, TokenAutomaton, TokenId, TokenMask,
    Tools, Vocab,
};
use serde_json::{json, Value};
use std::sync::Arc;

fn tools() -> Tools {
    Tools::from_json_str(
        &json!([
            {"type": "function", "function": {"name": "get_weather", "parameters": {
                "type": "object", "properties": {"city": {"type": "string"}},
                "required": ["city"]}}},
            {"type": "function", "function": {"name": "get_time", "parameters": {
                "type": "object", "properties": {}}}}
        ])
        .to_string(),
    )
    .unwrap()
}

/// 256 single-byte tokens, the grammar's special tokens, then an end-of-generation token.
fn vocab_for(g: &Grammar) -> Arc<Vocab> {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    let mut special = vec![false; 256];
    for s in g.special_tokens() {
        tokens.push(s.as_bytes().to_vec());
        special.push(true);
    }
    tokens.push(b"<|test_eos|>".to_vec());
    special.push(true);
    let eos = tokens.len() as TokenId - 1;
    Arc::new(Vocab::from_parts(tokens, special, vec![eos]).unwrap())
}

/// `text` as tokens of [`vocab_for`]: the grammar's special tokens where spelled, else bytes.
fn tokens_of(g: &Grammar, text: &str) -> Vec<TokenId> {
    let specials = g.special_tokens();
    let mut out = Vec::new();
    let mut rest = text.as_bytes();
    'next: while !rest.is_empty() {
        for (k, s) in specials.iter().enumerate() {
            if !s.is_empty() && rest.starts_with(s.as_bytes()) {
                out.push(256 + k as TokenId);
                rest = &rest[s.len()..];
                continue 'next;
            }
        }
        out.push(rest[0] as TokenId);
        rest = &rest[1..];
    }
    out
}

fn compile(d: &str, rule: DistinctCalls) -> Grammar {
    let options = DialectOptions::from_json(&json!({ "distinct_calls": rule })).unwrap();
    Dialect::by_name(d)
        .unwrap()
        .compile(&tools(), &options)
        .unwrap()
}

/// Feeds `tokens` through the masks; the index of the first token a mask refuses.
fn feed(m: &mut Matcher, mask: &mut TokenMask, tokens: &[TokenId]) -> Option<usize> {
    for (i, &t) in tokens.iter().enumerate() {
        m.fill_mask(mask);
        if !mask.is_allowed(t) {
            return Some(i);
        }
        m.accept(t).unwrap();
    }
    None
}

/// Walks from `m` to the end (the token that leaves the fewest to the end), checking the
/// masks are never empty; the text walked.
fn walk_to_end(m: &mut Matcher, mask: &mut TokenMask, vocab: &Vocab, what: &str) -> String {
    let mut out = Vec::new();
    for _ in 0..400 {
        m.fill_mask(mask);
        assert!(mask.count() > 0, "{what}: dead end after {out:?}");
        if let Some(&eos) = vocab.eos_tokens().iter().find(|&&t| mask.is_allowed(t)) {
            m.accept(eos).unwrap();
            return String::from_utf8_lossy(&out).into_owned();
        }
        let t = mask
            .iter()
            .filter_map(|t| {
                let mut n = m.clone();
                n.accept(t).ok()?;
                Some((n.min_tokens_to_end().unwrap_or(usize::MAX), t))
            })
            .min()
            .map(|(_, t)| t)
            .unwrap();
        m.accept(t).unwrap();
        out.extend_from_slice(vocab.token_bytes(t).unwrap());
    }
    panic!("{what}: no end after 400 tokens: {out:?}");
}

/// The calls of the events, as (function, arguments).
fn calls_of(events: &[Event]) -> Vec<(String, Value)> {
    let mut calls: Vec<(String, String)> = Vec::new();
    for e in events {
        match e {
            Event::CallStart { index, name, .. } => {
                assert_eq!(*index, calls.len(), "call indices in order");
                calls.push((name.clone(), String::new()));
            }
            Event::Arguments { index, delta } => calls[*index].1.push_str(delta),
            _ => {}
        }
    }
    calls
        .into_iter()
        .map(|(n, a)| (n, serde_json::from_str(&a).unwrap()))
        .collect()
}

/// The calls streamed from `text` pushed `chunk` tokens of [`tokens_of`] at a time (special
/// tokens whole).
fn streamed(g: &Grammar, vocab: &Vocab, text: &str, chunk: usize) -> Vec<(String, Value)> {
    let mut p = StreamParser::new(g);
    let mut events = Vec::new();
    let mut pending: Vec<u8> = Vec::new();
    for piece in tokens_of(g, text).chunks(chunk) {
        pending.extend(vocab.decode(piece));
        // Whole characters only; the rest waits for the next piece.
        let whole = match std::str::from_utf8(&pending) {
            Ok(_) => pending.len(),
            Err(e) => e.valid_up_to(),
        };
        let now: Vec<u8> = pending.drain(..whole).collect();
        events.extend(p.push(std::str::from_utf8(&now).unwrap()).unwrap());
    }
    assert!(pending.is_empty());
    events.extend(p.finish().unwrap());
    calls_of(&events)
}

#[test]
fn a_repeated_call_ends_the_calls_in_every_dialect() {
    let weather = ("get_weather".to_owned(), json!({"city": "Paris"}));
    let time = ("get_time".to_owned(), json!({}));
    let mut checked = Vec::new();
    for spec in Dialect::table() {
        let d = spec.name;
        let Some(writer) = callmask::prompt::builtin_writer(d) else {
            continue;
        };
        let write =
            |calls: &[(String, Value)]| callmask::prompt::write_calls(writer, "", calls).unwrap();
        let twice = write(&[weather.clone(), weather.clone()]);
        let allow = compile(d, DistinctCalls::Allow);
        if allow.parse(&twice).map(|p| p.tool_calls.len()).ok() != Some(2) {
            continue; // one call per output, or no such spelling
        }
        let end = compile(d, DistinctCalls::End);
        let vocab = vocab_for(&end);
        let auto = TokenAutomaton::new(&end, vocab.clone()).unwrap();
        let tokens = tokens_of(&end, &twice);
        let mut mask = TokenMask::new(vocab.len());
        for budget in [None, Some(tokens.len() + 1)] {
            let what = format!("{d} (budget {budget:?})");
            let mut m = auto.matcher();
            m.set_token_budget(budget).unwrap();
            assert_eq!(m.distinct_calls(), DistinctCalls::End);
            // The repeat, as the model writes it, passes.
            assert_eq!(feed(&mut m, &mut mask, &tokens), None, "{what}: {twice:?}");
            let rest = walk_to_end(&mut m, &mut mask, &vocab, &what);
            let text = format!("{twice}{rest}");
            assert_eq!(m.distinct_gave_up(), 0, "{what}");
            let parsed = end.parse(&text).unwrap();
            let got: Vec<(String, Value)> = parsed
                .tool_calls
                .iter()
                .map(|c| (c.function.name.clone(), c.arguments_json().unwrap()))
                .collect();
            assert_eq!(got, std::slice::from_ref(&weather), "{what}: {text:?}");
            for chunk in [1, 3, 7, 64] {
                assert_eq!(
                    streamed(&end, &vocab, &text, chunk),
                    got,
                    "{what}, chunks of {chunk}"
                );
            }
            // With the rule off, the same text reads as two calls.
            assert_eq!(allow.parse(&text).unwrap().tool_calls.len(), 2, "{what}");
        }
        // No call after the repeat; allowed with the rule off. (Where the calls stay
        // uncertain until the output ends, HyperCLOVA X's, whose reasoning may hold the same
        // text, the mask cannot see the repeat: the parsers still leave it out.)
        let thrice = write(&[weather.clone(), weather.clone(), time.clone()]);
        let seen_before_the_end = StreamParser::new(&allow)
            .push(&thrice)
            .is_ok_and(|ev| ev.iter().any(|e| matches!(e, Event::CallEnd { index: 1 })));
        if allow.parse(&thrice).is_ok() && seen_before_the_end {
            let tokens = tokens_of(&end, &thrice);
            let refused = feed(&mut auto.matcher(), &mut mask, &tokens);
            // Refused after the first call (where `once` and `twice` part).
            let once = write(std::slice::from_ref(&weather));
            let first = once
                .bytes()
                .zip(twice.bytes())
                .take_while(|(a, b)| a == b)
                .count();
            let at = refused.map(|i| vocab.decode(&tokens[..i]).len());
            assert!(
                at.is_some_and(|at| at >= first),
                "{d}: a call after the repeat, refused at {at:?} (first call: {first}): {thrice:?}"
            );
            let auto_off = TokenAutomaton::new(&allow, vocab.clone()).unwrap();
            assert_eq!(
                feed(&mut auto_off.matcher(), &mut mask, &tokens),
                None,
                "{d}"
            );
        }
        // Bent: the repeat is refused somewhere (where the parser sees it end before the
        // output does).
        let repeat_seen = StreamParser::new(&allow)
            .push(&twice)
            .is_ok_and(|ev| ev.iter().any(|e| matches!(e, Event::CallEnd { index: 1 })));
        if repeat_seen {
            let bend = compile(d, DistinctCalls::Bend);
            let auto_bend = TokenAutomaton::new(&bend, vocab.clone()).unwrap();
            let tokens = tokens_of(&bend, &twice);
            assert!(
                feed(&mut auto_bend.matcher(), &mut mask, &tokens).is_some(),
                "{d}: bend lets the repeat through"
            );
        }
        checked.push(d);
    }
    assert!(
        checked.len() >= 40,
        "only {} dialects: {checked:?}",
        checked.len()
    );
}

#[test]
fn the_rule_reads_from_json_as_a_name_or_a_flag() {
    for (v, want) in [
        (json!("end"), DistinctCalls::End),
        (json!("bend"), DistinctCalls::Bend),
        (json!("allow"), DistinctCalls::Allow),
        (json!(true), DistinctCalls::End),
        (json!(false), DistinctCalls::Allow),
    ] {
        let o = DialectOptions::from_json(&json!({ "distinct_calls": v })).unwrap();
        assert_eq!(o.distinct_calls, want);
    }
    assert_eq!(DialectOptions::default().distinct_calls, DistinctCalls::End);
    let e = DialectOptions::from_json(&json!({"distinct_calls": "twice"})).unwrap_err();
    assert!(e.to_string().contains("twice"), "{e}");
}
