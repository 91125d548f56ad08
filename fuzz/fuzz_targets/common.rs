//! The bodies of the cargo-fuzz targets, shared with `tests/core/fuzz_regressions.rs` (which includes
//! this file with `#[path]` and replays `fuzz/regressions/<target>/*` through the same functions).
//!
//! Every function takes the raw fuzz input and panics only when it finds a bug: a panic inside
//! callmask, or a broken invariant checked here. Errors returned by callmask are fine (they are
//! typed) and are ignored.

use callmask::parse::{Event, StreamParser};
use callmask::{
    CompileOptions, Dialect, DialectOptions, Error, Grammar, Reasoning, TokenAutomaton, TokenId,
    TokenMask, ToolChoice, Tools, Vocab,
};
use std::sync::{Arc, OnceLock};

/// The fuzz targets, by name (the names of `fuzz/fuzz_targets/*.rs` and `fuzz/regressions/*`).
pub const TARGETS: &[&str] = &[
    "schema_compile",
    "dialect_file",
    "matcher_tokens",
    "output_parser",
];

/// Runs the target `name` on `data` (for replaying regressions).
pub fn run(name: &str, data: &[u8]) {
    match name {
        "schema_compile" => schema_compile(data),
        "dialect_file" => dialect_file(data),
        "matcher_tokens" => matcher_tokens(data),
        "output_parser" => output_parser(data),
        _ => panic!("unknown fuzz target {name}"),
    }
}

/// Multi-byte pieces of the small vocabulary (after the 256 single bytes).
const PIECES: &[&[u8]] = &[
    b"{\"",
    b"\"}",
    b"\":",
    b"\": ",
    b"\", \"",
    b", \"",
    b"\"name\"",
    b"\"arguments\"",
    b"\"parameters\"",
    b"name",
    b"arguments",
    b"true",
    b"false",
    b"null",
    b"True",
    b"False",
    b"None",
    b"[{",
    b"}]",
    b"[]",
    b"{}",
    b"()",
    b")]",
    b"),",
    b"='",
    b"')",
    b"=\"",
    b"\")",
    b"=[",
    b"=1",
    b", ",
    b"  ",
    b"    ",
    b"\n",
    b"\n\n",
    b"\r\n",
    b"\t",
    b"get_weather",
    b"get_time",
    b"search",
    b"location",
    b"unit",
    b"celsius",
    b"fahrenheit",
    b"query",
    b"limit",
    b"tags",
    b"opts",
    b"deep",
    b"<tool_call>",
    b"</tool_call>",
    b"<tool_call>\n",
    b"\n</tool_call>",
    b"<f>",
    b"<c>",
    b"functools",
    b"functools[",
    b"<FUNCTION_CALL>",
    b"</FUNCTION_CALL>",
    b"<think>",
    b"</think>",
    b"<|python_tag|>",
    b"Hello",
    b" world",
    b" the",
    b"ing",
    b"\xc3\xa9",
    b"\xe6\x97\xa5\xe6\x9c\xac",
    b"\xe6\x97",
    b"\xa5",
    b"\xf0\x9f",
    b"\x98\x80",
    b"\\u00",
    b"\\\"",
    b"\\n",
    b"\\\\",
    b"\\x",
    b"123",
    b"0.5",
    b"-1",
    b"1e",
    b"e+10",
    b"E-3",
    b".0",
    b"00",
    b"9999999999999999999",
    b"\"\"",
    b"''",
    b"'a'",
    b"\"a\"",
    b"a\"",
    b"}\n",
    b"]\n",
    b"\"]",
    b"[\"",
    b"{\"name\": \"",
    b"\", \"arguments\": {",
    b"}}",
];

/// Special tokens of the small vocabulary: (text, ends generation).
const SPECIALS: &[(&[u8], bool)] = &[
    (b"<|python_tag|>", false),
    (b"<think>", false),
    (b"</think>", false),
    (b"<|eot_id|>", true),
    (b"<|eom_id|>", true),
    (b"<|end|>", false),
    (b"", false),
];

/// A small self-contained vocabulary: every single byte, a hundred multi-byte pieces (some of
/// them split UTF-8 sequences), and special tokens (two of which end generation, one empty).
pub fn small_vocab() -> Arc<Vocab> {
    static VOCAB: OnceLock<Arc<Vocab>> = OnceLock::new();
    VOCAB
        .get_or_init(|| {
            let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
            tokens.extend(PIECES.iter().map(|p| p.to_vec()));
            let mut special = vec![false; tokens.len()];
            let mut eos = Vec::new();
            for (text, is_eos) in SPECIALS {
                if *is_eos {
                    eos.push(tokens.len() as TokenId);
                }
                tokens.push(text.to_vec());
                special.push(true);
            }
            Arc::new(Vocab::from_parts(tokens, special, eos).expect("the small vocabulary"))
        })
        .clone()
}

/// The tools the dialect targets compile with.
pub const TOOLS_JSON: &str = r#"[
  {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object",
    "properties": {
      "location": {"type": "string", "maxLength": 20},
      "unit": {"enum": ["celsius", "fahrenheit"]},
      "days": {"type": "integer", "minimum": 1, "maximum": 14}
    },
    "required": ["location"]}}},
  {"type": "function", "function": {"name": "get_time"}},
  {"type": "function", "function": {"name": "search", "parameters": {
    "type": "object",
    "properties": {
      "query": {"type": "string"},
      "limit": {"type": ["integer", "null"]},
      "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}, "maxItems": 3},
      "opts": {"type": "object", "properties": {"deep": {"type": "boolean"}, "score": {"type": "number"}},
               "additionalProperties": false}
    },
    "required": ["query"], "additionalProperties": false}}}
]"#;

/// The tool set of [`TOOLS_JSON`].
pub fn tools() -> &'static Tools {
    static TOOLS: OnceLock<Tools> = OnceLock::new();
    TOOLS.get_or_init(|| Tools::from_json_str(TOOLS_JSON).expect("the fuzz tools"))
}

/// Reads bytes from the front of a fuzz input; zeros once it is exhausted.
struct Input<'a> {
    data: &'a [u8],
}

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.byte(), self.byte()])
    }

    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.byte(), self.byte(), self.byte(), self.byte()])
    }

    fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

/// Walks `auto` for up to `steps` tokens, each time taking an allowed token chosen by `pick`,
/// checking that accepting an allowed token always succeeds.
fn walk(auto: &TokenAutomaton, steps: usize, mut pick: impl FnMut() -> usize) {
    let mut m = auto.matcher();
    let mut mask = TokenMask::new(auto.vocab().len());
    for _ in 0..steps {
        m.fill_mask(&mut mask);
        let allowed: Vec<TokenId> = mask.iter().collect();
        if allowed.is_empty() {
            break;
        }
        let t = allowed[pick() % allowed.len()];
        if let Err(e) = m.accept(t) {
            panic!("token {t} was in the mask but accept failed: {e}");
        }
    }
}

/// `schema_compile`: bytes → JSON → a schema compiled strictly and leniently; when it compiles,
/// a token automaton over [`small_vocab`] and a few masks.
pub fn schema_compile(data: &[u8]) {
    let Ok(schema) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let strict = CompileOptions::default().max_compile_time(std::time::Duration::from_secs(5));
    let lenient = strict.clone().lenient(true);
    let _ = Grammar::from_json_schema(&schema, &strict);
    let Ok(grammar) = Grammar::from_json_schema(&schema, &lenient) else {
        return;
    };
    let Ok(auto) = TokenAutomaton::new(&grammar, small_vocab()) else {
        return;
    };
    let mut seed = data.len();
    walk(&auto, 8, || {
        seed = seed.wrapping_mul(31).wrapping_add(7);
        seed >> 3
    });
}

/// `dialect_file`: UTF-8 → a dialect file; when it parses, compiled for [`tools`] with options
/// chosen by the text's length, bound to [`small_vocab`], and walked for a few tokens.
pub fn dialect_file(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(dialect) = Dialect::parse("fuzz", text) else {
        return;
    };
    let n = data.len();
    let options = DialectOptions::default()
        .tool_choice(match n % 4 {
            0 => ToolChoice::Auto,
            1 => ToolChoice::Required,
            2 => ToolChoice::None,
            _ => ToolChoice::Function("search".into()),
        })
        .parallel_calls(n % 3 != 0)
        .reasoning((n % 5 == 0).then(Reasoning::default))
        .max_text_chars((n % 7 == 0).then_some(8))
        .compile(CompileOptions::default().max_compile_time(std::time::Duration::from_secs(5)));
    let Ok(grammar) = dialect.compile(tools(), &options) else {
        return;
    };
    let _ = grammar.parse(text);
    let Ok(auto) = TokenAutomaton::new(&grammar, small_vocab()) else {
        return;
    };
    let mut i = 0usize;
    walk(&auto, 6, || {
        i += 1;
        data[i % n] as usize
    });
}

/// A builtin dialect compiled for [`tools`] with some options: (dialect, tool choice,
/// parallel calls, reasoning).
type Variant = (&'static str, u8, bool, bool);

/// The grammar variants that `matcher_tokens` and `output_parser` run on.
const VARIANTS: &[Variant] = &[
    ("pythonic", 0, true, false),
    ("pythonic", 1, false, true),
    ("hermes", 0, true, false),
    ("hermes", 2, true, true),
    ("llama31_json", 0, false, false),
    ("functools", 0, true, false),
    ("empower", 1, true, false),
    ("inline", 0, true, false),
];

/// The compiled grammars and automata (over [`small_vocab`]) of [`VARIANTS`], built once.
fn automata() -> &'static [TokenAutomaton] {
    static AUTOMATA: OnceLock<Vec<TokenAutomaton>> = OnceLock::new();
    AUTOMATA.get_or_init(|| {
        VARIANTS
            .iter()
            .map(|&(name, choice, parallel, reasoning)| {
                let options = DialectOptions::default()
                    .tool_choice(match choice {
                        0 => ToolChoice::Auto,
                        1 => ToolChoice::Required,
                        _ => ToolChoice::Function("get_weather".into()),
                    })
                    .parallel_calls(parallel)
                    .reasoning(reasoning.then(Reasoning::default));
                let grammar = Dialect::by_name(name)
                    .and_then(|d| d.compile(tools(), &options))
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                TokenAutomaton::new(&grammar, small_vocab())
                    .unwrap_or_else(|e| panic!("{name}: {e}"))
            })
            .collect()
    })
}

/// `matcher_tokens`: a builtin dialect (chosen by the first byte) over [`small_vocab`], driven by
/// operations read from the input: accept a token id (in range or not, or the k-th allowed one),
/// roll back, fork. Checks: `accept` succeeds iff the mask allows the token, fails with
/// `TokenOutOfVocabulary` / `TokenForbidden` (changing nothing) otherwise; rollback restores the
/// earlier state; the mask is empty only once finished; a stream parser fed the accepted tokens
/// agrees.
pub fn matcher_tokens(data: &[u8]) {
    let mut input = Input { data };
    let autos = automata();
    let auto = &autos[input.byte() as usize % autos.len()];
    let vocab = auto.vocab().clone();
    let len = vocab.len();
    let mut m = auto.matcher();
    let mut mask = TokenMask::new(len);
    // The state hash after each accepted token (index 0: the start).
    let mut hashes = vec![m.state_hash()];
    let mut ops = 0;
    while !input.is_empty() && ops < 256 {
        ops += 1;
        m.fill_mask(&mut mask);
        assert_eq!(mask.len(), len);
        let ended = m.accepted_tokens().last().is_some_and(|&t| vocab.is_eos(t));
        if ended {
            assert!(m.is_finished(), "an end token leaves the matcher finished");
            assert_eq!(mask.count(), 0, "nothing is allowed after an end token");
        } else {
            assert!(mask.count() > 0, "dead end: no token allowed");
        }
        if m.can_end() {
            assert!(
                vocab.eos_tokens().iter().all(|&t| mask.is_allowed(t)),
                "the output may end but the end tokens are masked"
            );
        }
        let op = input.byte();
        let token: Option<TokenId> = match op {
            0x00..=0x7f => Some((input.u16() as usize % (len + 8)) as TokenId),
            0x80..=0xbf => {
                let allowed: Vec<TokenId> = mask.iter().collect();
                (!allowed.is_empty()).then(|| allowed[input.byte() as usize % allowed.len()])
            }
            0xc0..=0xdf => {
                let n = (op & 0x1f) as usize % (m.accepted_tokens().len() + 2);
                let before = m.accepted_tokens().len();
                match m.rollback(n) {
                    Ok(()) => {
                        assert!(n <= before);
                        hashes.truncate(before - n + 1);
                        assert_eq!(m.accepted_tokens().len(), before - n);
                        assert_eq!(m.state_hash(), hashes[before - n], "rollback({n}) state");
                    }
                    Err(Error::Rollback {
                        requested,
                        available,
                    }) => {
                        assert!(n > before);
                        assert_eq!((requested, available), (n, before));
                    }
                    Err(e) => panic!("rollback: unexpected error {e}"),
                }
                None
            }
            0xe0..=0xef => {
                let mut fork = m.clone();
                let mut fork_mask = TokenMask::new(len);
                fork.fill_mask(&mut fork_mask);
                assert_eq!(fork_mask.words(), mask.words(), "a fork has the same mask");
                assert_eq!(fork.state_hash(), m.state_hash());
                None
            }
            _ => Some(input.u32()),
        };
        let Some(t) = token else { continue };
        let allowed = (t as usize) < len && mask.is_allowed(t);
        assert_eq!(
            m.is_allowed(t),
            allowed,
            "is_allowed({t}) disagrees with the mask"
        );
        let before = (m.state_hash(), m.accepted_tokens().len());
        match m.accept(t) {
            Ok(()) => {
                assert!(allowed, "token {t} was accepted but not in the mask");
                hashes.push(m.state_hash());
            }
            Err(e) => {
                assert!(!allowed, "token {t} was in the mask but accept failed: {e}");
                match e {
                    Error::TokenOutOfVocabulary { token, vocab_size } => {
                        assert!(t as usize >= len);
                        assert_eq!((token, vocab_size), (t, len));
                    }
                    Error::TokenForbidden { token, .. } => {
                        assert!((t as usize) < len);
                        assert_eq!(token, t);
                    }
                    e => panic!("accept({t}): unexpected error {e}"),
                }
                assert_eq!(
                    (m.state_hash(), m.accepted_tokens().len()),
                    before,
                    "a failed accept changed the matcher"
                );
            }
        }
    }
    // The accepted tokens, fed to a stream parser, parse; complete when the matcher may end.
    let mut p = StreamParser::new(auto.grammar());
    for &t in m.accepted_tokens() {
        if let Err(e) = p.push_token(&vocab, t) {
            panic!(
                "the stream parser rejects accepted token {t}: {e}; accepted text {:?}",
                String::from_utf8_lossy(&vocab.decode(m.accepted_tokens()))
            );
        }
    }
    let ended = m.accepted_tokens().last().is_some_and(|&t| vocab.is_eos(t));
    if m.can_end() || ended {
        if let Err(e) = p.finish() {
            panic!("the matcher may end but the parser does not: {e}");
        }
    }
}

/// `output_parser`: bytes → text (lossy UTF-8) parsed whole by a builtin dialect's grammar
/// (chosen by the first byte) and streamed in chunks (sizes from the second byte); when the
/// text has no special-token spelling (which a chunk boundary could split), both agree.
pub fn output_parser(data: &[u8]) {
    let mut input = Input { data };
    let autos = automata();
    let grammar = autos[input.byte() as usize % autos.len()].grammar();
    let chunk = 1 + input.byte() as usize % 16;
    let text = String::from_utf8_lossy(input.data);
    let whole = grammar.parse(&text);
    let has_special = grammar
        .special_tokens()
        .iter()
        .any(|s| !s.is_empty() && text.contains(s.as_str()));
    let mut p = StreamParser::new(grammar);
    let mut events = Vec::new();
    let mut rest: &str = &text;
    let mut streamed = Ok(());
    while !rest.is_empty() {
        let mut cut = if has_special {
            rest.len()
        } else {
            chunk.min(rest.len())
        };
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        match p.push(&rest[..cut]) {
            Ok(ev) => events.extend(ev),
            Err(e) => {
                streamed = Err(e);
                break;
            }
        }
        rest = &rest[cut..];
    }
    if streamed.is_ok() {
        match p.finish() {
            Ok(ev) => events.extend(ev),
            Err(e) => streamed = Err(e),
        }
    }
    match (&whole, &streamed) {
        (Ok(parsed), Ok(())) => {
            let mut args = vec![String::new(); parsed.tool_calls.len()];
            let mut names = Vec::new();
            for e in &events {
                match e {
                    Event::CallStart { index, name, .. } => {
                        assert_eq!(*index, names.len(), "call indexes in order");
                        names.push(name.clone());
                    }
                    Event::Arguments { index, delta } => args[*index].push_str(delta),
                    _ => {}
                }
            }
            let want: Vec<&str> = parsed
                .tool_calls
                .iter()
                .map(|c| c.function.name.as_str())
                .collect();
            assert_eq!(names, want, "streamed calls differ from the whole parse");
            for (a, c) in args.iter().zip(&parsed.tool_calls) {
                let a: serde_json::Value =
                    serde_json::from_str(a).expect("streamed arguments are JSON");
                let b: serde_json::Value =
                    serde_json::from_str(&c.function.arguments).expect("parsed arguments are JSON");
                assert_eq!(a, b, "streamed arguments differ from the whole parse");
            }
            // The bytes are in the grammar.
            if !has_special {
                if let Err(r) = grammar.check_bytes(text.as_bytes()) {
                    panic!("parsed, but check_bytes rejects: {r}");
                }
            }
        }
        (Err(_), Err(_)) => {}
        (w, s) => panic!(
            "the whole parse and the stream disagree: {:?} vs {:?}",
            w.as_ref().map(|_| ()).map_err(|e| e.to_string()),
            s.as_ref().map_err(|e| e.to_string())
        ),
    }
}
