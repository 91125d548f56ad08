//! Reference masks from the Rust matcher, for the Python tests (`tests/test_masks.py`): reads a
//! JSON job `{"tokenizer": PATH, "spec": {"json_schema": ...} | {"dialect", "tools", ...},
//! "tokens": [...]}` and writes, for each prefix of `tokens` (the empty one first, the whole
//! sequence last), the allowed next tokens as `ceil(n_vocab / 32)` little-endian u32 words,
//! bit `t % 32` of word `t / 32` for token `t`, set from `TokenMask::iter` (not from the 32-bit
//! writer the Python package uses).
//!
//! ```sh
//! cargo run --release -p callmask-py --example dump_masks -- job.json masks.bin
//! ```

use std::sync::Arc;

use callmask::{
    CompileOptions, Dialect, DialectOptions, Grammar, TokenAutomaton, TokenMask, Tools, Vocab,
};
use serde_json::Value;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, job, out] = &args[..] else {
        return Err("usage: dump_masks JOB.json OUT.bin".into());
    };
    let job: Value = serde_json::from_str(&std::fs::read_to_string(job)?)?;
    let vocab = Arc::new(Vocab::from_tokenizer_json(
        job["tokenizer"].as_str().ok_or("tokenizer")?,
    )?);
    let spec = &job["spec"];
    let grammar = if let Some(schema) = spec.get("json_schema") {
        Grammar::from_json_schema(schema, &CompileOptions::default())?
    } else {
        let tools = Tools::from_openai_json(&spec["tools"])?;
        let mut o = DialectOptions::default();
        if let Some(tc) = spec.get("tool_choice").and_then(Value::as_str) {
            o.tool_choice = tc.parse()?;
        }
        if let Some(p) = spec.get("parallel_tool_calls").and_then(Value::as_bool) {
            o.parallel_calls = p;
        }
        Dialect::load(spec["dialect"].as_str().ok_or("dialect")?)?.compile(&tools, &o)?
    };
    let automaton = TokenAutomaton::new(&grammar, vocab.clone())?;
    let mut matcher = automaton.matcher();
    let words = vocab.len().div_ceil(32);
    let mut mask = TokenMask::new(vocab.len());
    let mut bytes = Vec::new();
    let tokens: Vec<u32> = serde_json::from_value(job["tokens"].clone())?;
    for i in 0..=tokens.len() {
        matcher.fill_mask(&mut mask);
        let mut row = vec![0u32; words];
        for t in mask.iter() {
            row[t as usize / 32] |= 1 << (t % 32);
        }
        bytes.extend(row.iter().flat_map(|w| w.to_le_bytes()));
        if let Some(&t) = tokens.get(i) {
            matcher.accept(t)?;
        }
    }
    std::fs::write(out, bytes)?;
    Ok(())
}
