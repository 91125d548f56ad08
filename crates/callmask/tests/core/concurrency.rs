//! Many threads share one compiled grammar, one token automaton (and its lazily filled mask
//! caches) and one vocabulary, each with its own matchers: every walk gives exactly what it gives
//! when the same work is done serially, with std threads, with rayon, and with matchers forked
//! and handed to other threads mid-walk.

use callmask_testkit as testkit;

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use callmask::{
    CompileOptions, Dialect, DialectOptions, Grammar, Matcher, TokenAutomaton, TokenMask,
    ToolChoice, Tools, Vocab,
};
use rayon::prelude::*;
use serde_json::json;

/// What these types promise: shared across threads (matchers and masks move between them).
#[allow(dead_code)]
fn static_assertions() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Grammar>();
    send_sync::<TokenAutomaton>();
    send_sync::<Vocab>();
    send_sync::<Arc<Vocab>>();
    send_sync::<Matcher>();
    send::<TokenMask>();
}

const THREADS: usize = 16;
const SEEDS: u64 = 12;
const STEPS: usize = 40;
const FORK_AT: usize = 8;

/// A deterministic xorshift generator.
#[derive(Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// One walk's record: tokens chosen, a hash of each mask, and how the output parses.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Record {
    tokens: Vec<u32>,
    masks: Vec<u64>,
    result: String,
}

fn mask_hash(mask: &TokenMask) -> u64 {
    let mut h = DefaultHasher::new();
    mask.words().hash(&mut h);
    h.finish()
}

/// The grammars: several dialects over the same tools, and a JSON schema.
fn grammars() -> Vec<Grammar> {
    let tools = Tools::from_json_str(
        r#"[
        {"name": "get_weather", "parameters": {"type": "object",
            "properties": {"city": {"type": "string", "maxLength": 12},
                           "unit": {"enum": ["c", "f"]}},
            "required": ["city"]}},
        {"name": "add", "parameters": {"type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "number"}},
            "required": ["a", "b"], "additionalProperties": false}}
    ]"#,
    )
    .unwrap();
    let opts = DialectOptions::default()
        .tool_choice(ToolChoice::Required)
        .compile(CompileOptions::default().max_whitespace(2))
        .max_text_chars(Some(20));
    let mut out: Vec<Grammar> = ["pythonic", "hermes", "llama31_json", "functools"]
        .iter()
        .map(|d| Dialect::by_name(d).unwrap().compile(&tools, &opts).unwrap())
        .collect();
    let schema = json!({
        "type": "object",
        "properties": {
            "id": {"type": "integer", "minimum": 0},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 3},
            "ok": {"type": "boolean"}
        },
        "required": ["id"],
        "additionalProperties": false
    });
    out.push(
        Grammar::from_json_schema(&schema, &CompileOptions::default().max_whitespace(1)).unwrap(),
    );
    out
}

/// Continues `m` for up to `steps` tokens, picking from the mask with `rng` (an end token a
/// third of the time where one is allowed, after a few tokens), and records the walk into `rec`.
fn walk(m: &mut Matcher, rng: &mut Rng, steps: usize, rec: &mut Record) {
    let vocab = m.automaton().vocab().clone();
    let mut mask = TokenMask::new(vocab.len());
    for _ in 0..steps {
        let step = rec.tokens.len();
        m.fill_mask(&mut mask);
        rec.masks.push(mask_hash(&mask));
        let allowed: Vec<u32> = mask.iter().collect();
        if allowed.is_empty() {
            break;
        }
        let ends: Vec<u32> = allowed
            .iter()
            .copied()
            .filter(|&t| vocab.is_eos(t))
            .collect();
        let t = if !ends.is_empty() && step >= 6 && rng.below(3) == 0 {
            ends[rng.below(ends.len())]
        } else {
            allowed[rng.below(allowed.len())]
        };
        m.accept(t).unwrap();
        rec.tokens.push(t);
        if m.is_finished() {
            break;
        }
    }
}

/// The parse of what `m` accepted.
fn finish(m: &Matcher, mut rec: Record) -> Record {
    let vocab = m.automaton().vocab();
    let toks: Vec<u32> = m
        .accepted_tokens()
        .iter()
        .copied()
        .filter(|&t| !vocab.is_eos(t))
        .collect();
    assert_eq!(m.accepted_tokens(), &rec.tokens[..]);
    let text = String::from_utf8_lossy(&vocab.decode(&toks)).into_owned();
    let g = m.automaton().grammar();
    rec.result = if g.functions().is_empty() {
        format!("{text:?}: {:?}", g.check_bytes(text.as_bytes()).is_ok())
    } else {
        match g.parse(&text) {
            Ok(p) => format!(
                "{text:?}: text {:?}, calls {:?}",
                p.text,
                p.tool_calls
                    .iter()
                    .map(|c| (c.function.name.clone(), c.function.arguments.clone()))
                    .collect::<Vec<_>>()
            ),
            Err(e) => format!("{text:?}: error {e}"),
        }
    };
    rec
}

fn one_walk(a: &TokenAutomaton, seed: u64) -> Record {
    let mut m = a.matcher();
    let mut rec = Record {
        tokens: vec![],
        masks: vec![],
        result: String::new(),
    };
    walk(&mut m, &mut Rng::new(seed), STEPS, &mut rec);
    finish(&m, rec)
}

/// Work items: (automaton index, seed).
fn items(n: usize) -> Vec<(usize, u64)> {
    (0..n)
        .flat_map(|i| (0..SEEDS).map(move |s| (i, s + 1000 * i as u64)))
        .collect()
}

fn automata(grammars: &[Grammar], vocab: &Arc<Vocab>) -> Vec<TokenAutomaton> {
    grammars
        .iter()
        .map(|g| TokenAutomaton::new(g, vocab.clone()).unwrap())
        .collect()
}

fn serial(autos: &[TokenAutomaton]) -> Vec<Record> {
    items(autos.len())
        .into_iter()
        .map(|(i, s)| one_walk(&autos[i], s))
        .collect()
}

#[test]
fn threads_and_rayon_match_serial() {
    let vocab = testkit::llama_vocab();
    let gs = grammars();
    let expected = serial(&automata(&gs, &vocab));
    assert!(
        expected.iter().filter(|r| r.tokens.len() > 3).count() > expected.len() / 2,
        "walks too short to mean anything"
    );
    assert!(
        expected.iter().any(|r| r.result.contains("calls [(")),
        "no walk made a call"
    );

    // std threads over fresh automata (cold caches, filled concurrently).
    vocab.caches().clear();
    let autos = automata(&gs, &vocab);
    let work = items(autos.len());
    let mut got: Vec<Option<Record>> = vec![None; work.len()];
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (autos, work) = (&autos, &work);
                s.spawn(move || {
                    (t..work.len())
                        .step_by(THREADS)
                        .map(|k| (k, one_walk(&autos[work[k].0], work[k].1)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for h in handles {
            for (k, r) in h.join().unwrap() {
                got[k] = Some(r);
            }
        }
    });
    for (k, (g, e)) in got.into_iter().zip(&expected).enumerate() {
        assert_eq!(g.as_ref(), Some(e), "std threads, walk {k}");
    }

    // rayon, over one more set of fresh automata.
    vocab.caches().clear();
    let autos = automata(&gs, &vocab);
    let got: Vec<Record> = work
        .par_iter()
        .map(|&(i, s)| one_walk(&autos[i], s))
        .collect();
    assert_eq!(got, expected, "rayon");
}

#[test]
fn forked_matchers_continue_on_other_threads() {
    let vocab = testkit::llama_vocab();
    let gs = grammars();
    let autos = automata(&gs, &vocab);
    // Serially: walk FORK_AT steps, fork, continue the original and the fork with other seeds.
    let run_fork = |m: &Matcher, rec: &Record, seed: u64| {
        let mut m = m.clone();
        let mut rec = rec.clone();
        walk(&mut m, &mut Rng::new(seed), STEPS, &mut rec);
        finish(&m, rec)
    };
    let prefix = |a: &TokenAutomaton, seed: u64| {
        let mut m = a.matcher();
        let mut rec = Record {
            tokens: vec![],
            masks: vec![],
            result: String::new(),
        };
        walk(&mut m, &mut Rng::new(seed), FORK_AT, &mut rec);
        (m, rec)
    };
    let work = items(autos.len());
    let expected: Vec<(Record, Record)> = work
        .iter()
        .map(|&(i, s)| {
            let (m, rec) = prefix(&autos[i], s);
            (run_fork(&m, &rec, s + 1), run_fork(&m, &rec, s + 2))
        })
        .collect();
    assert!(
        expected.iter().any(|(a, b)| a.tokens != b.tokens),
        "forks never diverged"
    );

    // In parallel: each prefix on one thread, its forks sent to two other threads.
    vocab.caches().clear();
    let autos = automata(&gs, &vocab);
    let got: Vec<(Record, Record)> = std::thread::scope(|s| {
        let handles: Vec<_> = work
            .iter()
            .map(|&(i, seed)| {
                let a = &autos[i];
                s.spawn(move || {
                    let (m, rec) = prefix(a, seed);
                    let (m1, r1) = (m.clone(), rec.clone());
                    let left = std::thread::spawn(move || run_fork(&m1, &r1, seed + 1));
                    let right = std::thread::spawn(move || run_fork(&m, &rec, seed + 2));
                    (left.join().unwrap(), right.join().unwrap())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (k, (g, e)) in got.iter().zip(&expected).enumerate() {
        assert_eq!(g, e, "fork {k}");
    }
}

/// Caches have an owner: a small one evicts (least recently used first) and stays within its
/// size while the masks stay exactly those of a large one, filled from many threads; two caches
/// are separate budgets (one model's compiles never touch another's).
#[test]
fn owned_caches_bound_their_bytes_and_change_no_mask() {
    let vocab = testkit::llama_vocab();
    let gs = grammars();
    let expected = serial(&automata(&gs, &vocab));
    let small = callmask::Caches::new(256 << 10);
    let autos: Vec<TokenAutomaton> = gs
        .iter()
        .map(|g| TokenAutomaton::with_caches(g, vocab.clone(), &small).unwrap())
        .collect();
    let got: Vec<Record> = items(autos.len())
        .par_iter()
        .map(|&(i, s)| one_walk(&autos[i], s))
        .collect();
    assert_eq!(got, expected, "masks under a 256 KiB cache");
    let st = small.stats();
    assert!(st.bytes <= st.max_bytes, "{st:?}");
    assert!(st.evictions > 0, "the small cache never evicted: {st:?}");

    // Separate budgets: compiles with `a` fill `a` only.
    let (a, b) = (
        callmask::Caches::new(64 << 20),
        callmask::Caches::new(64 << 20),
    );
    let opts = CompileOptions::default().caches(Some(a.clone()));
    let schema =
        json!({"type": "object", "properties": {"mail": {"type": "string", "format": "email"}}});
    let g = Grammar::from_json_schema(&schema, &opts).unwrap();
    assert!(a.stats().entries > 0);
    assert_eq!(b.stats().entries, 0);
    // The grammar's automata keep their walks with its caches.
    let auto = TokenAutomaton::new(&g, vocab.clone()).unwrap();
    let entries = a.stats().entries;
    let (mut m, mut mask) = (auto.matcher(), TokenMask::new(vocab.len()));
    for t in vocab.tokenize(r#"{"mail": "a.b"#).unwrap() {
        m.fill_mask(&mut mask);
        m.accept(t).unwrap();
    }
    m.fill_mask(&mut mask);
    assert!(
        a.stats().entries > entries,
        "no walk went into the grammar's caches"
    );
}
