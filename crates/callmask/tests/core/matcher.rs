//! The matcher API on the real Llama 3.1 vocabulary: one compiled grammar shared by many threads
//! (identical results to serial work), fork (clone) and rollback, typed errors, and the
//! `Send + Sync` contract.

use callmask::{CompileOptions, Error, Grammar, Matcher, TokenAutomaton, TokenMask, Vocab};
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;

fn llama() -> Arc<Vocab> {
    let cache = std::env::var_os("CALLMASK_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.cache"));
    let path = cache.join("tokenizers/llama3_1-3.7.2/tokenizer.json");
    assert!(
        path.exists(),
        "{} is missing: run scripts/fetch-data.sh",
        path.display()
    );
    Arc::new(Vocab::from_tokenizer_json(path).unwrap())
}

fn weather() -> serde_json::Value {
    json!({"type": "object", "properties": {
        "location": {"type": "string", "minLength": 1, "maxLength": 40},
        "unit": {"enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3}
    }, "required": ["location", "unit"], "additionalProperties": false})
}

#[test]
fn shared_types_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Grammar>();
    check::<TokenAutomaton>();
    check::<Matcher>();
    check::<Vocab>();
}

/// Deterministic pseudo-random walk: the k-th allowed token where k comes from a simple LCG.
fn walk(m: &mut Matcher, vocab: &Vocab, seed: u64, steps: usize) -> (Vec<u32>, Vec<usize>) {
    let mut mask = TokenMask::new(vocab.len());
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let (mut toks, mut counts) = (Vec::new(), Vec::new());
    for _ in 0..steps {
        m.fill_mask(&mut mask);
        let allowed: Vec<u32> = mask.iter().collect();
        counts.push(allowed.len());
        if allowed.is_empty() {
            break;
        }
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        // Prefer short tokens that close things, so that walks end.
        let t = allowed[(x >> 33) as usize % allowed.len()];
        m.accept(t).unwrap();
        toks.push(t);
        if m.is_finished() {
            break;
        }
    }
    (toks, counts)
}

#[test]
fn many_threads_share_one_automaton_with_serial_results() {
    let vocab = llama();
    let grammar = Grammar::from_json_schema(&weather(), &CompileOptions::default()).unwrap();
    let serial_auto = TokenAutomaton::new(&grammar, vocab.clone()).unwrap();
    let serial: Vec<_> = (0..8)
        .map(|s| walk(&mut serial_auto.matcher(), &vocab, s, 40))
        .collect();
    // A fresh automaton (cold caches) filled concurrently by 8 threads.
    let shared = TokenAutomaton::new(&grammar, vocab.clone()).unwrap();
    let parallel: Vec<_> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..8)
            .map(|s| {
                let (a, v) = (shared.clone(), vocab.clone());
                sc.spawn(move || walk(&mut a.matcher(), &v, s, 40))
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(serial, parallel);
    assert!(
        serial.iter().any(|(t, _)| t.len() > 5),
        "walks too short to mean anything"
    );
}

#[test]
fn fork_rollback_and_typed_errors() {
    let vocab = llama();
    let grammar = Grammar::from_json_schema(&weather(), &CompileOptions::default()).unwrap();
    let auto = TokenAutomaton::new(&grammar, vocab.clone()).unwrap();
    let text = r#"{"location": "Paris", "unit": "celsius", "days": 3}"#;
    let toks = vocab.tokenize(text).unwrap();
    let mut m = auto.matcher();
    let half = toks.len() / 2;
    for &t in &toks[..half] {
        m.accept(t).unwrap();
    }
    let fork = m.clone();
    for &t in &toks[half..] {
        m.accept(t).unwrap();
    }
    assert!(m.can_end());
    let eos = vocab.eos_tokens()[0];
    // The fork did not move, and finishes the same way on its own.
    let mut f2 = fork.clone();
    for &t in &toks[half..] {
        f2.accept(t).unwrap();
    }
    assert!(f2.can_end());
    // Rollback to the fork point: same masks as the fork.
    m.rollback(toks.len() - half).unwrap();
    let (mut a, mut b) = (TokenMask::new(vocab.len()), TokenMask::new(vocab.len()));
    m.fill_mask(&mut a);
    let mut fork = fork;
    fork.fill_mask(&mut b);
    assert_eq!(a, b);
    assert_eq!(m.accepted_tokens(), &toks[..half]);
    // Typed errors, and nothing changes on error.
    assert!(matches!(
        m.accept(vocab.len() as u32),
        Err(Error::TokenOutOfVocabulary { .. })
    ));
    assert!(
        matches!(m.accept(eos), Err(Error::TokenForbidden { .. })),
        "EOS before the end"
    );
    let brace = vocab.tokenize("}").unwrap()[0];
    assert!(matches!(m.accept(brace), Err(Error::TokenForbidden { .. })));
    assert!(matches!(m.rollback(10_000), Err(Error::Rollback { .. })));
    assert_eq!(m.accepted_tokens(), &toks[..half]);
    // After EOS: finished, empty mask, every token refused.
    for &t in &toks[half..] {
        m.accept(t).unwrap();
    }
    m.accept(eos).unwrap();
    assert!(m.is_finished());
    m.fill_mask(&mut a);
    assert_eq!(a.count(), 0);
    assert!(matches!(m.accept(brace), Err(Error::TokenForbidden { .. })));
    // Special tokens never match their spelling as text.
    let python_tag = vocab.special_token("<|python_tag|>").unwrap();
    let mut fresh = auto.matcher();
    assert!(matches!(
        fresh.accept(python_tag),
        Err(Error::TokenForbidden { .. })
    ));
}
