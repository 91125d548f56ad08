//! Distinct calls bent (issue 44 item 3, `DistinctCalls::Bend`): after a call of a function without arguments, the mask
//! never lets that call complete again, and the output can still end, with or without a budget.

use callmask::{Dialect, DialectOptions, DistinctCalls, TokenAutomaton, TokenMask, Tools, Vocab};

/// The options of the rule these tests check: a call is bent rather than repeated.
fn bend() -> DialectOptions {
    DialectOptions::from_json(&serde_json::json!({"distinct_calls": "bend"})).unwrap()
}
use std::sync::Arc;

/// 256 single-byte tokens, then an end-of-generation token.
fn byte_vocab() -> Arc<Vocab> {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    tokens.push(b"</s>".to_vec());
    let mut special = vec![false; 256];
    special.push(true);
    Arc::new(Vocab::from_parts(tokens, special, vec![256]).unwrap())
}

fn tools() -> Tools {
    Tools::from_json_str(
        r#"[{"type": "function", "function": {"name": "g", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}},
            {"type": "function", "function": {"name": "get", "parameters": {"type": "object", "properties": {"k": {"type": "integer"}}, "required": ["k"]}}}]"#,
    )
    .unwrap()
}

/// Feeds `text` byte by byte, each byte checked against the mask.
fn feed(m: &mut callmask::Matcher, mask: &mut TokenMask, text: &str) {
    for &b in text.as_bytes() {
        m.fill_mask(mask);
        assert!(
            mask.is_allowed(b as u32),
            "{:?} refused in {text:?}",
            b as char,
        );
        m.accept(b as u32).unwrap();
    }
}

/// Walks greedily (the lowest allowed byte, else the end) from `m`, checking that the mask is
/// never empty before the end; returns the text walked.
fn walk_to_end(m: &mut callmask::Matcher, mask: &mut TokenMask, first: &[u8]) -> String {
    let mut out = Vec::new();
    for step in 0..600 {
        m.fill_mask(mask);
        assert!(
            mask.count() > 0,
            "dead end after {:?}",
            String::from_utf8_lossy(&out)
        );
        if mask.is_allowed(256) {
            m.accept(256).unwrap();
            return String::from_utf8(out).unwrap();
        }
        // The given bytes first (steers into a repeat), then the token that leaves the least
        // to the end.
        let t = first
            .iter()
            .map(|&b| b as u32)
            .find(|&t| step < 400 && mask.is_allowed(t))
            .or_else(|| {
                mask.iter()
                    .filter_map(|t| {
                        let mut n = m.clone();
                        n.accept(t).ok()?;
                        Some((n.min_tokens_to_end().unwrap_or(usize::MAX), t))
                    })
                    .min()
                    .map(|(_, t)| t)
            })
            .unwrap();
        m.accept(t).unwrap();
        out.push(t as u8);
    }
    panic!(
        "no end after 600 tokens: {:?}",
        String::from_utf8_lossy(&out)
    );
}

#[test]
fn a_call_without_arguments_is_not_repeated_and_the_output_still_ends() {
    let vocab = byte_vocab();
    for (dialect, once, again) in [
        ("pythonic", "[g(), ", "g("),
        (
            "hermes",
            "<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"",
            "g\"",
        ),
    ] {
        let g = Dialect::by_name(dialect)
            .unwrap()
            .compile(&tools(), &bend())
            .unwrap();
        let auto = TokenAutomaton::new(&g, vocab.clone()).unwrap();
        for budget in [None, Some(200)] {
            let mut m = auto.matcher();
            if budget.is_some() {
                m.set_token_budget(budget).unwrap();
            }
            let mut mask = TokenMask::new(vocab.len());
            feed(&mut m, &mut mask, once);
            // Steering at the repeated call: it is never completed.
            let rest = walk_to_end(&mut m, &mut mask, again.as_bytes());
            let text = format!("{once}{rest}");
            let parsed = g.parse(&text).unwrap_or_else(|e| {
                panic!("{dialect}: {text:?} does not parse: {e}");
            });
            let gs = parsed
                .tool_calls
                .iter()
                .filter(|c| c.function.name == "g")
                .count();
            assert_eq!(gs, 1, "{dialect} {budget:?}: g() twice in {text:?}");
            assert_eq!(m.distinct_gave_up(), 0);
            // Off, the repeat is allowed.
            let mut m = auto.matcher();
            m.set_distinct_calls(false);
            feed(&mut m, &mut mask, once);
            feed(&mut m, &mut mask, again);
        }
    }
}

/// Feeds `text` byte by byte without looking at the mask; the error of the first refused byte.
fn accept_all(m: &mut callmask::Matcher, text: &str) -> Result<(), String> {
    for &b in text.as_bytes() {
        m.accept(b as u32)
            .map_err(|e| format!("{e} at {:?}", b as char))?;
    }
    Ok(())
}

#[test]
fn arguments_equal_as_json_values_are_a_repeat_and_the_option_turns_the_rule_off() {
    let vocab = byte_vocab();
    let first = "<tool_call>\n{\"name\": \"get\", \"arguments\": {\"k\": 10}}\n</tool_call>\n";
    // The same value in another spelling: refused at the byte that completes the call.
    let again = "<tool_call>\n{\"name\": \"get\", \"arguments\": {\"k\": 10.0}}\n</tool_call>";
    let other = "<tool_call>\n{\"name\": \"get\", \"arguments\": {\"k\": 11}}\n</tool_call>";
    let on = bend();
    let off = DialectOptions::from_json(&serde_json::json!({"distinct_calls": false})).unwrap();
    assert!(on.distinct_calls == DistinctCalls::Bend && off.distinct_calls == DistinctCalls::Allow);
    for (options, repeats) in [(on, false), (off, true)] {
        let g = Dialect::by_name("hermes")
            .unwrap()
            .compile(&tools(), &options)
            .unwrap();
        let auto = TokenAutomaton::new(&g, vocab.clone()).unwrap();
        let mut m = auto.matcher();
        assert_eq!(m.distinct_calls() == DistinctCalls::Allow, repeats);
        accept_all(&mut m, first).unwrap();
        let mut fresh = m.clone();
        accept_all(&mut fresh, other).unwrap();
        let r = accept_all(&mut m, again);
        assert_eq!(r.is_ok(), repeats, "{r:?}");
        if !repeats {
            // The masks never offer the repeat either: after `10`, neither `}` nor `.` (whose
            // only way on is `10.0`, equal to 10), while a digit still makes the value new.
            let mut m = auto.matcher();
            let mut mask = TokenMask::new(vocab.len());
            feed(&mut m, &mut mask, first);
            feed(
                &mut m,
                &mut mask,
                &again[..again.len() - ".0}}\n</tool_call>".len()],
            );
            m.fill_mask(&mut mask);
            assert!(!mask.is_allowed(b'}' as u32) && !mask.is_allowed(b'.' as u32));
            assert!(mask.is_allowed(b'1' as u32));
        }
    }
}

#[test]
fn functions_with_equal_parameters_share_nothing_but_their_schema() {
    // Two functions with the same parameters (compiled once, one arguments node for both):
    // each call is still read as its own function's, whether its name comes before its
    // arguments or after them, and the rule tells `f(k=1)` from `h(k=1)` but refuses a
    // second `h(k=1)`.
    let params = r#"{"type": "object", "properties": {"k": {"type": "integer"}}, "required": ["k"], "additionalProperties": false}"#;
    let tools = Tools::from_json_str(&format!(
        r#"[{{"type": "function", "function": {{"name": "f", "parameters": {params}}}}},
            {{"type": "function", "function": {{"name": "h", "parameters": {params}}}}}]"#
    ))
    .unwrap();
    // The keys in any order (`name_first` off), so that a call may name its function last.
    let any_order = bend().name_first(false);
    let g = Dialect::by_name("hermes")
        .unwrap()
        .compile(&tools, &any_order)
        .unwrap();
    // Shared: smaller than the same tools with parameters of the same size that differ.
    let apart = Tools::from_json_str(&format!(
        r#"[{{"type": "function", "function": {{"name": "f", "parameters": {params}}}}},
            {{"type": "function", "function": {{"name": "h", "parameters": {}}}}}]"#,
        params.replace("\"k\"", "\"j\"")
    ))
    .unwrap();
    let apart = Dialect::by_name("hermes")
        .unwrap()
        .compile(&apart, &any_order)
        .unwrap();
    assert!(g.memory_bytes() < apart.memory_bytes());
    let two = "<tool_call>\n{\"arguments\": {\"k\": 1}, \"name\": \"h\"}\n</tool_call>\n\
               <tool_call>\n{\"name\": \"f\", \"arguments\": {\"k\": 1}}\n</tool_call>";
    let parsed = g.parse(two).unwrap();
    let calls: Vec<(&str, &str)> = parsed
        .tool_calls
        .iter()
        .map(|c| (c.function.name.as_str(), c.function.arguments.as_str()))
        .collect();
    assert_eq!(calls, [("h", r#"{"k":1}"#), ("f", r#"{"k":1}"#)]);
    let vocab = byte_vocab();
    let auto = TokenAutomaton::new(&g, vocab.clone()).unwrap();
    let mut m = auto.matcher();
    let mut mask = TokenMask::new(vocab.len());
    // After h(k=1), arguments first: the name `h` would repeat it, `f` is new. Name first:
    // `}` would complete h(k=1) again (a digit makes it new), and completes f(k=1).
    feed(
        &mut m,
        &mut mask,
        &two[..two.find("</tool_call>").unwrap() + 12],
    );
    for (again, repeat, new) in [
        (
            "\n<tool_call>\n{\"arguments\": {\"k\": 1}, \"name\": \"",
            Some(b'h'),
            b'f',
        ),
        (
            "\n<tool_call>\n{\"name\": \"h\", \"arguments\": {\"k\": 1",
            Some(b'}'),
            b'0',
        ),
        (
            "\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"k\": 1",
            None,
            b'}',
        ),
    ] {
        let mut m = m.clone();
        feed(&mut m, &mut mask, again);
        m.fill_mask(&mut mask);
        assert!(
            repeat.is_none_or(|r| !mask.is_allowed(r as u32)) && mask.is_allowed(new as u32),
            "after {again:?}"
        );
    }
}

/// [`byte_vocab`] with `extra` tokens (before the end-of-generation token).
fn vocab_with(extra: &[&str]) -> Arc<Vocab> {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    tokens.extend(extra.iter().map(|t| t.as_bytes().to_vec()));
    tokens.push(b"</s>".to_vec());
    let eos = tokens.len() as u32 - 1;
    let mut special = vec![false; tokens.len()];
    special[eos as usize] = true;
    Arc::new(Vocab::from_parts(tokens, special, vec![eos]).unwrap())
}

#[test]
fn a_number_value_near_the_end_of_the_budget_is_made_new_not_repeated() {
    // BFCL's multiple_8 on SmolLM2: calls with k = 25, 250, 2500 and 25000, then `25` again
    // with the budget nearly spent. Two digits after `25` leave the number lexeme in the same
    // state, but only `0` heads for a repeat; and a merged `}}` token must not make a way look
    // cheaper than the budget counts it.
    let calls: String = ["25", "250", "2500", "25000"]
        .iter()
        .map(|k| {
            format!(
                "<tool_call>\n{{\"name\": \"get\", \"arguments\": {{\"k\": {k}}}}}\n</tool_call>\n"
            )
        })
        .collect();
    let prefix = format!("{calls}<tool_call>\n{{\"name\": \"get\", \"arguments\": {{\"k\": 2");
    for extra in [&[][..], &["}}", "}}\n", "0}}", "</tool_call>"][..]] {
        let vocab = vocab_with(extra);
        let eos = vocab.len() as u32 - 1;
        let g = Dialect::by_name("hermes")
            .unwrap()
            .compile(&tools(), &bend())
            .unwrap();
        let auto = TokenAutomaton::new(&g, vocab.clone()).unwrap();
        for slack in 0..4 {
            let mut m = auto.matcher();
            accept_all(&mut m, &prefix).unwrap();
            // The fewest tokens after `2`: `5`, then a digit that makes the value new, then
            // the end; and `slack` more.
            let budget = m.min_tokens_to_end().unwrap() + 2 + slack;
            m.set_token_budget(Some(budget)).unwrap();
            let mut mask = TokenMask::new(vocab.len());
            let mut out = String::new();
            for _ in 0..budget {
                m.fill_mask(&mut mask);
                assert!(
                    mask.count() > 0,
                    "{extra:?} +{slack}: dead end after {out:?}"
                );
                if mask.is_allowed(eos) {
                    m.accept(eos).unwrap();
                    break;
                }
                // Steer into a repeat: `5`, then `0`s, then the longest token that closes.
                let t = ["5", "0", "0}}", "}}\n", "}}", "}"]
                    .iter()
                    .filter_map(|s| vocab.token_id(s.as_bytes()))
                    .find(|&t| mask.is_allowed(t))
                    .unwrap_or_else(|| mask.iter().next().unwrap());
                m.accept(t).unwrap();
                out.push_str(&String::from_utf8_lossy(vocab.token_bytes(t).unwrap()));
            }
            assert!(m.is_finished(), "{extra:?} +{slack}: not finished: {out:?}");
            let text = format!("{prefix}{out}");
            let parsed = g.parse(&text).unwrap();
            let ks: Vec<String> = parsed
                .tool_calls
                .iter()
                .map(|c| c.function.arguments.clone())
                .collect();
            for (i, k) in ks.iter().enumerate() {
                let v: serde_json::Value = serde_json::from_str(k).unwrap();
                assert!(
                    ks[..i]
                        .iter()
                        .all(|e| serde_json::from_str::<serde_json::Value>(e).unwrap() != v),
                    "{extra:?} +{slack}: a repeated call in {text:?}"
                );
            }
            assert_eq!(m.distinct_gave_up(), 0, "{extra:?} +{slack}: {out:?}");
        }
    }
}

/// Accepts `pieces`, each one token of `vocab`.
fn accept_tokens(m: &mut callmask::Matcher, vocab: &Vocab, pieces: &[&str]) {
    for p in pieces {
        let t = vocab
            .token_id(p.as_bytes())
            .unwrap_or_else(|| panic!("{p:?} is no token"));
        m.accept(t).unwrap_or_else(|e| panic!("{p:?}: {e}"));
    }
}

#[test]
fn a_call_that_ends_inside_a_token_is_seen_whatever_else_the_token_holds() {
    // The call log is fed only once an accepted token may have completed a call: a token that
    // holds a whole call, or the end of one and the start of the next, must count.
    // `g` takes no arguments: once `g` was called, a second call named `g` repeats it, while
    // `get` (which shares its first letter) is still new.
    for (dialect, pieces, repeat) in [
        ("pythonic", &["[", "g()", ", g"][..], "("),
        ("pythonic", &["[g", "(), g"][..], "("),
        (
            "hermes",
            &["<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"g"][..],
            "\"",
        ),
        (
            "hermes",
            &[
                "<tool_call>\n{\"name\": \"g\", \"arguments\": {",
                "}}\n</tool_call>\n<tool_call>\n{\"name\": \"g",
            ][..],
            "\"",
        ),
    ] {
        let vocab = vocab_with(pieces);
        let g = Dialect::by_name(dialect)
            .unwrap()
            .compile(&tools(), &bend())
            .unwrap();
        let auto = TokenAutomaton::new(&g, vocab.clone()).unwrap();
        let mut m = auto.matcher();
        accept_tokens(&mut m, &vocab, pieces);
        let mut mask = TokenMask::new(vocab.len());
        m.fill_mask(&mut mask);
        let t = repeat.as_bytes()[0] as u32;
        assert!(
            !mask.is_allowed(t) && !m.is_allowed(t),
            "{dialect} {pieces:?}: {repeat:?} completes a repeated call"
        );
        assert!(
            mask.is_allowed(b'e' as u32),
            "{dialect} {pieces:?}: `get` refused"
        );
        // With the rule off, the repeat is allowed.
        let mut m = auto.matcher();
        m.set_distinct_calls(false);
        accept_tokens(&mut m, &vocab, pieces);
        assert!(m.is_allowed(t), "{dialect} {pieces:?}: off, {repeat:?} refused");
    }
}
