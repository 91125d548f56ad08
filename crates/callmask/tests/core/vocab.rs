//! Tests of the `vocab` module on the real vocabularies (Llama 3.1 and Qwen3 `tokenizer.json`,
//! Gemma 3 270M GGUF) and on small synthetic ones.
//!
//! The real files come from `scripts/fetch-data.sh` (cache: `$CALLMASK_CACHE` or `.cache/` in the
//! crate root). A missing file fails the test: it does not pass silently.

use callmask::vocab::VocabSource;
use callmask::{Error, TokenId, Vocab};
use callmask_llama::GgufVocab;
use std::path::PathBuf;
use std::sync::OnceLock;

/// The data cache folder.
fn cache_dir() -> PathBuf {
    match std::env::var_os("CALLMASK_CACHE") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.cache"),
    }
}

/// A file of the cache, or a panic telling how to get it.
fn cached(rel: &str) -> PathBuf {
    let p = cache_dir().join(rel);
    assert!(
        p.is_file(),
        "missing test data {}: run scripts/fetch-data.sh (or set CALLMASK_CACHE)",
        p.display()
    );
    p
}

const LLAMA: &str = "tokenizers/llama3_1-3.7.2/tokenizer.json";
const QWEN: &str = "tokenizers/qwen3-3.7.2/tokenizer.json";
const GEMMA: &str = "gemma-1.0.0/gemma-3-270m-q4_k_m.gguf";

fn llama() -> &'static Vocab {
    static V: OnceLock<Vocab> = OnceLock::new();
    V.get_or_init(|| Vocab::from_tokenizer_json(cached(LLAMA)).expect("Llama 3.1 tokenizer.json"))
}

fn qwen() -> &'static Vocab {
    static V: OnceLock<Vocab> = OnceLock::new();
    V.get_or_init(|| Vocab::from_tokenizer_json(cached(QWEN)).expect("Qwen3 tokenizer.json"))
}

fn gemma() -> &'static Vocab {
    static V: OnceLock<Vocab> = OnceLock::new();
    V.get_or_init(|| Vocab::from_gguf(cached(GEMMA)).expect("Gemma 3 GGUF"))
}

/// Text of a token, for messages.
fn text(v: &Vocab, id: TokenId) -> String {
    String::from_utf8_lossy(v.token_bytes(id).expect("id in range")).into_owned()
}

/// `tokenize` then `decode` gives the text back, and no special token is used.
fn assert_round_trip(v: &Vocab, s: &str) -> Vec<TokenId> {
    let ids = v.tokenize(s).expect("tokenize");
    assert!(!ids.is_empty() || s.is_empty(), "{s:?} gave no tokens");
    assert_eq!(v.decode(&ids), s.as_bytes(), "{s:?} -> {ids:?}");
    for &id in &ids {
        assert!(
            !v.is_special(id),
            "{s:?} tokenized to special token {id} {:?}",
            text(v, id)
        );
    }
    ids
}

#[test]
fn vocab_is_send_sync_debug() {
    fn check<T: Send + Sync + std::fmt::Debug>() {}
    check::<Vocab>();
    let v = Vocab::from_parts(vec![b"a".to_vec()], vec![false], vec![]).unwrap();
    let dbg = format!("{v:?}");
    assert!(dbg.contains("len: 1"), "{dbg}");
}

// ---------------------------------------------------------------------------------------------
// Llama 3.1 (tokenizer.json, byte-level BPE)

#[test]
fn llama3_size_and_plain_tokens() {
    let v = llama();
    assert_eq!(v.len(), 128_256);
    assert!(!v.is_empty());
    assert_eq!(v.source(), VocabSource::TokenizerJson);
    assert_eq!(v.token_bytes(279), Some(&b" the"[..])); // "Ġthe"
    assert_eq!(v.token_bytes(198), Some(&b"\n"[..])); // "Ċ"
    assert_eq!(v.token_bytes(197), Some(&b"\t"[..])); // "ĉ"
    assert_eq!(v.token_bytes(256), Some(&b"  "[..])); // "ĠĠ"
    assert_eq!(v.token_bytes(978), Some("é".as_bytes())); // "Ã©"
    assert_eq!(v.token_bytes(4046), Some(" é".as_bytes())); // "ĠÃ©"
    assert_eq!(v.token_bytes(5324), Some(&b" {\""[..])); // "Ġ{\""
    assert_eq!(v.token_bytes(0), Some(&b"!"[..]));
    assert!(!v.is_special(279));
    assert_eq!(v.token_bytes(128_256), None);
    assert!(!v.is_special(128_256));
    // Every normal token has bytes; exactly the 256 added tokens are special.
    let specials: Vec<TokenId> = v.special_tokens().map(|(id, _)| id).collect();
    assert_eq!(specials, (128_000..128_256).collect::<Vec<_>>());
    assert!((0..128_000).all(|i| !v.token_bytes(i).unwrap().is_empty()));
}

#[test]
fn llama3_special_tokens_have_llama31_names() {
    let v = llama();
    let expect: [(TokenId, &str); 11] = [
        (128_000, "<|begin_of_text|>"),
        (128_001, "<|end_of_text|>"),
        (128_002, "<|reserved_special_token_0|>"),
        (128_003, "<|reserved_special_token_1|>"),
        (128_004, "<|finetune_right_pad_id|>"),
        (128_005, "<|reserved_special_token_2|>"),
        (128_006, "<|start_header_id|>"),
        (128_007, "<|end_header_id|>"),
        (128_008, "<|eom_id|>"),
        (128_009, "<|eot_id|>"),
        (128_010, "<|python_tag|>"),
    ];
    for (id, name) in expect {
        assert!(v.is_special(id), "{id}");
        assert_eq!(text(v, id), name, "{id}");
        assert_eq!(v.special_token(name), Some(id), "{name}");
    }
    assert_eq!(text(v, 128_011), "<|reserved_special_token_3|>");
    assert_eq!(text(v, 128_255), "<|reserved_special_token_247|>");
    // The Llama 3.0 names of the file are gone.
    assert_eq!(v.special_token("<|reserved_special_token_250|>"), None);
    assert_eq!(
        v.special_token("<|reserved_special_token_4|>"),
        Some(128_012)
    );
    assert_eq!(v.special_token("the"), None);
    assert_eq!(v.eos_tokens(), &[128_001, 128_008, 128_009]);
    assert!(v.is_eos(128_009));
    assert!(!v.is_eos(128_000));
    assert!(!v.is_eos(128_010));
}

#[test]
fn llama3_tokenize() {
    let v = llama();
    assert_eq!(assert_round_trip(v, "Hello world"), [9906, 1917]);
    assert_eq!(assert_round_trip(v, " the"), [279]);
    assert_round_trip(v, "héllo wörld 😀\n\n\t{\"a\": [1, 2.5e-3]}  ");
    // Spellings of special tokens are plain text.
    for s in [
        "<|eot_id|>",
        "<|python_tag|>",
        "<|begin_of_text|>x",
        "a<|reserved_special_token_250|>",
    ] {
        let ids = assert_round_trip(v, s);
        assert!(ids.len() > 1, "{s:?} -> {ids:?}");
    }
    assert_eq!(v.tokenize("").unwrap(), Vec::<TokenId>::new());
    // decode: special tokens give their text; out-of-range ids are skipped
    assert_eq!(
        v.decode(&[9906, 128_009, 999_999, 1917]),
        b"Hello<|eot_id|> world"
    );
}

// ---------------------------------------------------------------------------------------------
// Qwen3 (tokenizer.json, byte-level BPE, non-special added tokens)

#[test]
fn qwen3_tokens() {
    let v = qwen();
    assert_eq!(v.len(), 151_669);
    assert_eq!(v.token_bytes(279), Some(&b" the"[..]));
    assert_eq!(v.token_bytes(963), Some("é".as_bytes()));
    // Added tokens that are not special: normal tokens whose bytes are their content.
    for (id, s) in [
        (151_657, "<tool_call>"),
        (151_658, "</tool_call>"),
        (151_667, "<think>"),
        (151_668, "</think>"),
    ] {
        assert_eq!(text(v, id), s);
        assert!(!v.is_special(id), "{s}");
        assert_eq!(v.token_id(s.as_bytes()), Some(id), "{s}");
        assert_eq!(v.special_token(s), None, "{s}");
    }
    assert_eq!(v.special_token("<|im_end|>"), Some(151_645));
    assert_eq!(v.special_token("<|im_start|>"), Some(151_644));
    assert_eq!(v.eos_tokens(), &[151_643, 151_645]); // <|endoftext|>, <|im_end|>
    assert_eq!(v.token_id(b" the"), Some(279));
    assert_eq!(v.token_id(b"<|im_end|>"), None); // special: not a normal token
    assert_eq!(v.special_tokens().count(), 14);
    // Llama 3 renaming does not touch other vocabularies.
    assert_eq!(v.special_token("<|python_tag|>"), None);
}

#[test]
fn qwen3_tokenize() {
    let v = qwen();
    assert_eq!(assert_round_trip(v, "Hello world"), [9707, 1879]);
    assert_round_trip(v, "héllo wörld 😀\n\n\t{\"a\": [1, 2.5e-3]}  ");
    // Non-special added tokens are matched in text, as Qwen's tokenizer does.
    assert_eq!(assert_round_trip(v, "<tool_call>"), [151_657]);
    assert_eq!(assert_round_trip(v, "<think>\n"), [151_667, 198]);
    // Special ones are not.
    for s in ["<|im_end|>", "<|endoftext|>", "x<|im_start|>user"] {
        let ids = assert_round_trip(v, s);
        assert!(ids.len() > 1, "{s:?} -> {ids:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Gemma 3 270M (GGUF through llama.cpp, SentencePiece)

#[test]
fn gemma_tokens() {
    let v = gemma();
    assert_eq!(v.len(), 262_144);
    assert_eq!(v.source(), VocabSource::Gguf);
    assert_eq!(text(v, 105), "<start_of_turn>");
    assert!(v.is_special(105));
    assert!(!v.is_eos(105));
    assert_eq!(text(v, 106), "<end_of_turn>");
    assert!(v.is_special(106));
    assert!(v.is_eos(106));
    assert_eq!(v.special_token("<start_of_turn>"), Some(105));
    assert_eq!(v.special_token("<end_of_turn>"), Some(106));
    for (id, s) in [
        (0, "<pad>"),
        (1, "<eos>"),
        (2, "<bos>"),
        (3, "<unk>"),
        (6, "<unused0>"),
    ] {
        assert_eq!(text(v, id), s);
        assert!(v.is_special(id), "{s}");
    }
    // llama.cpp's end-of-generation set: <eos>, <end_of_turn>, and </s> (in Gemma 3 an HTML tag
    // token, which llama.cpp nevertheless treats as end of generation and control).
    assert_eq!(v.eos_tokens(), &[1, 106, 212]);
    // Byte-fallback token <0x0A> (id 248) is the byte "\n"; 238 is <0x00>.
    assert_eq!(v.token_bytes(248), Some(&b"\n"[..]));
    assert!(!v.is_special(248));
    assert_eq!(v.token_bytes(238), Some(&[0u8][..]));
    // A user-defined token: normal, its text.
    assert_eq!(text(v, 107), "\n");
    assert_eq!(text(v, 168), "<table>");
    assert!(!v.is_special(168));
    // "▁" is a space.
    assert_eq!(text(v, 1902), " world");
    assert_eq!(v.token_id(b"\n"), Some(107));
    assert_eq!(v.special_tokens().count(), 6250);
}

#[test]
fn gemma_tokenize() {
    let v = gemma();
    // No BOS, no space prefix.
    assert_eq!(assert_round_trip(v, "Hello world"), [9259, 1902]);
    assert_round_trip(v, "héllo wörld 😀\n\n\t{\"a\": [1, 2.5e-3]}  ");
    for s in ["<start_of_turn>user", "<end_of_turn>", "<eos>", "<0x0A>"] {
        let ids = assert_round_trip(v, s);
        assert!(ids.len() > 1, "{s:?} -> {ids:?}");
    }
}

#[test]
fn gguf_errors() {
    let missing = cache_dir().join("no-such-model.gguf");
    match Vocab::from_gguf(&missing) {
        Err(Error::Io { path, .. }) => assert_eq!(path, missing),
        other => panic!("expected Error::Io, got {other:?}"),
    }
    // A file that is not GGUF.
    match Vocab::from_gguf(cached(QWEN)) {
        Err(Error::Vocab(_)) => {}
        other => panic!("expected Error::Vocab, got {other:?}"),
    }
    // The backend is shared: a second call gives the same one.
    let a = callmask_llama::llama_backend().unwrap() as *const _;
    let b = callmask_llama::llama_backend().unwrap() as *const _;
    assert_eq!(a, b);
}

// ---------------------------------------------------------------------------------------------
// from_parts

#[test]
fn from_parts_validates() {
    let t = |s: &[&str]| s.iter().map(|x| x.as_bytes().to_vec()).collect::<Vec<_>>();
    assert!(matches!(
        Vocab::from_parts(t(&["a", "b"]), vec![false], vec![]),
        Err(Error::Vocab(_))
    ));
    assert!(matches!(
        Vocab::from_parts(t(&["a", "<e>"]), vec![false, true], vec![2]),
        Err(Error::Vocab(_))
    ));
    assert!(matches!(
        Vocab::from_parts(t(&["a", ""]), vec![false, false], vec![]),
        Err(Error::Vocab(_))
    ));
    // A special token may be empty; duplicate eos ids are merged and sorted.
    let v = Vocab::from_parts(
        t(&["a", "bc", "<e>", "", "<x>", "bc"]),
        vec![false, false, true, true, true, false],
        vec![4, 2, 4],
    )
    .unwrap();
    assert_eq!(v.len(), 6);
    assert_eq!(v.source(), VocabSource::Parts);
    assert_eq!(v.eos_tokens(), &[2, 4]);
    assert_eq!(v.token_bytes(1), Some(&b"bc"[..]));
    assert_eq!(v.token_bytes(3), Some(&b""[..]));
    assert_eq!(v.token_bytes(6), None);
    assert_eq!(v.special_token("<x>"), Some(4));
    assert_eq!(v.special_token("a"), None);
    assert_eq!(v.special_token(""), None);
    assert_eq!(v.token_id(b"bc"), Some(1));
    assert_eq!(v.token_id(b"<e>"), None);
    assert_eq!(v.token_id(b"b"), None);
    assert_eq!(v.decode(&[0, 2, 1, 99]), b"a<e>bc");
    assert!(matches!(v.tokenize("a"), Err(Error::Vocab(_))));
    // No renaming for parts.
    let empty = Vocab::from_parts(vec![], vec![], vec![]).unwrap();
    assert!(empty.is_empty());
    assert!(matches!(
        Vocab::from_parts(vec![], vec![], vec![0]),
        Err(Error::Vocab(_))
    ));
}

// ---------------------------------------------------------------------------------------------
// Errors on bad tokenizer.json

#[test]
fn tokenizer_json_errors() {
    let missing = cache_dir().join("no/such/tokenizer.json");
    match Vocab::from_tokenizer_json(&missing) {
        Err(Error::Io { path, .. }) => assert_eq!(path, missing),
        other => panic!("expected Error::Io, got {other:?}"),
    }
    // A directory is not readable as a file.
    assert!(matches!(
        Vocab::from_tokenizer_json(cache_dir()),
        Err(Error::Io { .. })
    ));
    assert!(matches!(
        Vocab::from_tokenizer_json_str("not json"),
        Err(Error::Json(_))
    ));
    let full = std::fs::read_to_string(cached(LLAMA)).unwrap();
    assert!(matches!(
        Vocab::from_tokenizer_json_str(&full[..full.len() / 2]),
        Err(Error::Json(_))
    ));
    let bad = [
        "{}",
        "[]",
        r#"{"model": {"type": "BPE", "vocab": {}, "merges": []}}"#,
        r#"{"model": {"type": "BPE", "vocab": {"a": -1}, "merges": []}}"#,
        r#"{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
            "added_tokens": [{"id": 99999999999, "content": "x", "special": true}]}"#,
        r#"{"model": {"type": "Nonsense", "vocab": {"a": 0}}}"#,
        r#"{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a c"]}}"#,
        r#"{"model": {"type": "BPE", "vocab": "abc", "merges": []}}"#,
    ];
    for b in bad {
        match Vocab::from_tokenizer_json_str(b) {
            Err(Error::Vocab(_)) | Err(Error::Json(_)) => {}
            other => panic!("{b}: expected an error, got {other:?}"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Synthetic tokenizer.json files

/// A Llama 2 style SentencePiece BPE with byte fallback and a non-special added token.
const SP_JSON: &str = r#"{
  "version": "1.0", "truncation": null, "padding": null,
  "added_tokens": [
    {"id": 0, "content": "<unk>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
    {"id": 1, "content": "<s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
    {"id": 2, "content": "</s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
    {"id": 12, "content": "<tool>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": false}
  ],
  "normalizer": {"type": "Sequence", "normalizers": [
    {"type": "Prepend", "prepend": "▁"},
    {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
  "pre_tokenizer": null,
  "post_processor": null,
  "decoder": {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
    {"type": "ByteFallback"}, {"type": "Fuse"},
    {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
  "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "continuing_subword_prefix": null,
    "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": true, "ignore_merges": false,
    "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "<0x0A>": 3, "<0x21>": 4, "▁": 5, "H": 6, "i": 7,
              "▁H": 8, "▁Hi": 9, "<0xC3>": 10, "<0xA9>": 11},
    "merges": ["▁ H", "▁H i"]}
}"#;

#[test]
fn sentencepiece_tokenizer_json() {
    let v = Vocab::from_tokenizer_json_str(SP_JSON).unwrap();
    assert_eq!(v.len(), 13);
    assert_eq!(v.token_bytes(3), Some(&b"\n"[..]));
    assert_eq!(v.token_bytes(10), Some(&[0xC3][..]));
    assert_eq!(v.token_bytes(5), Some(&b" "[..]));
    assert_eq!(v.token_bytes(9), Some(&b" Hi"[..]));
    assert_eq!(text(&v, 2), "</s>");
    assert!(v.is_special(0) && v.is_special(1) && v.is_special(2));
    assert_eq!(v.eos_tokens(), &[2]);
    assert!(!v.is_special(12));
    assert_eq!(v.token_id(b"<tool>"), Some(12));
    // The normalizer prepends "▁": the decoded text starts with a space.
    let ids = v.tokenize("Hi!\né").unwrap();
    assert_eq!(ids, [9, 4, 3, 10, 11]);
    assert_eq!(v.decode(&ids), " Hi!\né".as_bytes());
    assert!(!v.tokenize("</s>").unwrap().contains(&2));
    assert_eq!(v.tokenize("Hi<tool>").unwrap(), [9, 12]);
}

#[test]
fn holes_and_renumbered_added_tokens() {
    // Id 1 is a hole: special, no bytes.
    let v = Vocab::from_tokenizer_json_str(
        r#"{"model": {"type": "BPE", "dropout": null, "unk_token": null,
            "continuing_subword_prefix": null, "end_of_word_suffix": null, "fuse_unk": false,
            "byte_fallback": false, "vocab": {"a": 0, "b": 2}, "merges": []},
            "decoder": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}}"#,
    )
    .unwrap();
    assert_eq!(v.len(), 3);
    assert!(v.is_special(1));
    assert_eq!(v.token_bytes(1), Some(&b""[..]));
    assert_eq!(v.tokenize("ab").unwrap(), [0, 2]);
    // An added token declared at id 20 in a 2-token model: the tokenizers crate puts it at 2,
    // and so does the vocabulary, so that ids agree with `tokenize`.
    let v = Vocab::from_tokenizer_json_str(
        r#"{"added_tokens": [{"id": 20, "content": "<x>", "single_word": false, "lstrip": false,
            "rstrip": false, "normalized": false, "special": false}],
            "model": {"type": "BPE", "dropout": null, "unk_token": null,
            "continuing_subword_prefix": null, "end_of_word_suffix": null, "fuse_unk": false,
            "byte_fallback": false, "vocab": {"a": 0, "b": 1}, "merges": []}}"#,
    )
    .unwrap();
    assert_eq!(v.len(), 3);
    assert_eq!(v.tokenize("a<x>").unwrap(), [0, 2]);
    assert_eq!(v.token_bytes(2), Some(&b"<x>"[..]));
}

/// A `tokenizer.json` with 128,000 plain tokens and 256 added special tokens named as given.
fn llama_like_json(names: &dyn Fn(u32) -> String) -> String {
    let mut s = String::from(r#"{"added_tokens": ["#);
    for id in 128_000..128_256u32 {
        if id > 128_000 {
            s.push(',');
        }
        s.push_str(&format!(
            r#"{{"id": {id}, "content": "{}", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}}"#,
            names(id)
        ));
    }
    s.push_str(r#"], "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},"#);
    s.push_str(r#""model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null, "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "vocab": {"#);
    for id in 0..128_000u32 {
        if id > 0 {
            s.push(',');
        }
        s.push_str(&format!(r#""t{id}": {id}"#));
    }
    s.push_str(r#"}, "merges": []}}"#);
    s
}

/// Llama 3.0 names of the special tokens.
fn llama30_name(id: u32) -> String {
    match id {
        128_000 => "<|begin_of_text|>".into(),
        128_001 => "<|end_of_text|>".into(),
        128_006 => "<|start_header_id|>".into(),
        128_007 => "<|end_header_id|>".into(),
        128_009 => "<|eot_id|>".into(),
        128_002..=128_005 => format!("<|reserved_special_token_{}|>", id - 128_002),
        128_008 => "<|reserved_special_token_4|>".into(),
        _ => format!("<|reserved_special_token_{}|>", id - 128_005),
    }
}

#[test]
fn llama31_renaming_rule() {
    // A Llama 3.0 style file is renamed; a repurposed reserved token keeps its custom name.
    let v = Vocab::from_tokenizer_json_str(&llama_like_json(&|id| match id {
        128_100 => "<|my_tool|>".into(),
        _ => llama30_name(id),
    }))
    .unwrap();
    assert_eq!(v.special_token("<|python_tag|>"), Some(128_010));
    assert_eq!(v.special_token("<|eom_id|>"), Some(128_008));
    assert_eq!(v.special_token("<|finetune_right_pad_id|>"), Some(128_004));
    assert_eq!(text(&v, 128_005), "<|reserved_special_token_2|>");
    assert_eq!(text(&v, 128_100), "<|my_tool|>");
    assert_eq!(v.eos_tokens(), &[128_001, 128_008, 128_009]);
    // Same size, but not a Llama 3 vocabulary (no <|begin_of_text|> at 128000): untouched.
    let v = Vocab::from_tokenizer_json_str(&llama_like_json(&|id| match id {
        128_000 => "<|startoftext|>".into(),
        _ => llama30_name(id),
    }))
    .unwrap();
    assert_eq!(v.special_token("<|python_tag|>"), None);
    assert_eq!(text(&v, 128_010), "<|reserved_special_token_5|>");
    assert_eq!(text(&v, 128_008), "<|reserved_special_token_4|>");
    assert_eq!(v.eos_tokens(), &[128_001, 128_009]);
}
