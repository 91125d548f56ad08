//! Hugging Face `tokenizer.json` loading.

use super::{eos_by_name, normalize_loaded, Backend, TokenId, Vocab, MAX_VOCAB};
use crate::error::{Error, Result};
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The parts of a `tokenizer.json` the vocabulary needs.
#[derive(Deserialize)]
struct TokenizerFile {
    #[serde(default)]
    normalizer: Option<Value>,
    #[serde(default)]
    pre_tokenizer: Option<Value>,
    #[serde(default)]
    decoder: Option<Value>,
    model: Model,
}

/// The `model` object.
#[derive(Deserialize)]
struct Model {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    vocab: Option<VocabEntries>,
    #[serde(default)]
    byte_fallback: bool,
    #[serde(default)]
    unk_token: Option<String>,
    #[serde(default)]
    unk_id: Option<u64>,
}

/// `model.vocab`: an object `{token: id}` (BPE, WordPiece, WordLevel) or a list of
/// `[token, score]` whose position is the id (Unigram).
struct VocabEntries {
    entries: Vec<(String, u64)>,
    is_list: bool,
}

impl<'de> Deserialize<'de> for VocabEntries {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = VocabEntries;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of token to id, or a list of [token, score]")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<Self::Value, A::Error> {
                let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0).min(1 << 20));
                while let Some((k, v)) = map.next_entry::<String, u64>()? {
                    entries.push((k, v));
                }
                Ok(VocabEntries {
                    entries,
                    is_list: false,
                })
            }
            fn visit_seq<A: SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> std::result::Result<Self::Value, A::Error> {
                let mut entries = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 20));
                while let Some((k, _score)) = seq.next_element::<(String, IgnoredAny)>()? {
                    let id = entries.len() as u64;
                    entries.push((k, id));
                }
                Ok(VocabEntries {
                    entries,
                    is_list: true,
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// How normal tokens' strings become bytes.
#[derive(Debug, Clone, PartialEq)]
enum Decoding {
    /// GPT-2 byte-to-unicode mapping.
    ByteLevel,
    /// SentencePiece: `replacement` is a space; `<0xNN>` is a byte when `byte_fallback`.
    SentencePiece {
        replacement: char,
        byte_fallback: bool,
    },
    /// The string's UTF-8 bytes.
    Raw,
}

/// Loads a `tokenizer.json` from its text.
pub(super) fn load(json: &str) -> Result<Vocab> {
    // Building the `tokenizers` tokenizer dominates the load time: parse our part alongside.
    let (file, tokenizer) = rayon::join(|| parse_file(json), || build_tokenizer(json));
    let file = file?;
    let tokenizer = tokenizer?;
    let (mut tokens, mut special) = token_table(&file, &tokenizer)?;
    normalize_loaded(&mut tokens, &mut special);
    let eos = eos_by_name(&tokens, &special);
    Vocab::assemble(tokens, special, eos, Backend::Hf(Box::new(tokenizer)))
}

/// Parses the parts of the file the token table needs.
fn parse_file(json: &str) -> Result<TokenizerFile> {
    serde_json::from_str(json).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => {
            Error::Vocab(format!("not a tokenizer.json this crate understands: {e}"))
        }
        _ => Error::Json(e),
    })
}

/// Each token's bytes and special flag, from `model.vocab` and the tokenizer's added tokens.
///
/// Added tokens are taken from the built tokenizer, not from the file's `added_tokens` ids: the
/// `tokenizers` crate re-numbers added tokens whose declared id disagrees with its own
/// assignment (it only warns), and `tokenize` returns its ids.
fn token_table(
    file: &TokenizerFile,
    tokenizer: &tokenizers::Tokenizer,
) -> Result<(Vec<Vec<u8>>, Vec<bool>)> {
    let model = &file.model;
    let empty = Vec::new();
    let (entries, is_list) = match &model.vocab {
        Some(v) => (&v.entries, v.is_list),
        None => (&empty, false),
    };
    let added = tokenizer.get_added_tokens_decoder();
    let max_id = entries
        .iter()
        .map(|(_, id)| *id)
        .chain(added.keys().map(|&id| u64::from(id)))
        .max()
        .ok_or_else(|| Error::Vocab("tokenizer.json has no tokens".into()))?;
    if max_id >= MAX_VOCAB as u64 {
        return Err(Error::Vocab(format!(
            "token id {max_id} is too large (at most {} supported)",
            MAX_VOCAB - 1
        )));
    }
    let n = max_id as usize + 1;
    let decoding = detect_decoding(file, is_list);
    let mut tokens: Vec<Vec<u8>> = vec![Vec::new(); n];
    // Holes stay special with no bytes.
    let mut special = vec![true; n];
    let mut seen = vec![false; n];
    for (text, id) in entries {
        let i = *id as usize;
        if seen[i] {
            continue; // two strings with one id: the first wins
        }
        seen[i] = true;
        tokens[i] = decode_token(text, &decoding);
        special[i] = false;
    }
    for (&id, a) in &added {
        let i = id as usize;
        tokens[i] = a.content.as_bytes().to_vec();
        special[i] = a.special;
    }
    // The unknown token never stands for text.
    let unk = match (&model.unk_token, model.unk_id) {
        (_, Some(id)) => Some(id),
        (Some(t), None) => entries.iter().find(|(s, _)| s == t).map(|(_, id)| *id),
        (None, None) => None,
    };
    if let Some(u) = unk.filter(|&u| (u as usize) < n) {
        special[u as usize] = true;
    }
    Ok((tokens, special))
}

/// Collects the `type` of every object nested in `v`.
fn collect_types<'a>(v: &'a Value, out: &mut Vec<&'a serde_json::Map<String, Value>>) {
    match v {
        Value::Object(m) => {
            if m.get("type").is_some_and(Value::is_string) {
                out.push(m);
            }
            for x in m.values() {
                collect_types(x, out);
            }
        }
        Value::Array(a) => {
            for x in a {
                collect_types(x, out);
            }
        }
        _ => {}
    }
}

/// Decides how token strings map to bytes from the decoder, then the pre-tokenizer, then the
/// normalizer and model.
fn detect_decoding(file: &TokenizerFile, is_unigram_list: bool) -> Decoding {
    let model_unigram = file.model.kind.as_deref() == Some("Unigram")
        || (file.model.kind.is_none() && is_unigram_list);
    let mut byte_fallback = file.model.byte_fallback;
    let mut replacement: Option<char> = None;
    let mut byte_level = false;
    let mut sentencepiece = model_unigram;
    // The decoder is the authority on ids -> text; the others are hints when it is missing.
    for part in [&file.decoder, &file.pre_tokenizer, &file.normalizer]
        .into_iter()
        .flatten()
    {
        let mut objs = Vec::new();
        collect_types(part, &mut objs);
        for o in objs {
            match o.get("type").and_then(Value::as_str).unwrap_or("") {
                "ByteLevel" => byte_level = true,
                "ByteFallback" => {
                    byte_fallback = true;
                    sentencepiece = true;
                }
                "Metaspace" => {
                    sentencepiece = true;
                    if let Some(c) = o
                        .get("replacement")
                        .and_then(Value::as_str)
                        .and_then(single_char)
                    {
                        replacement.get_or_insert(c);
                    }
                }
                "Replace" => {
                    // decoder: Replace "▁" -> " "; normalizer: Replace " " -> "▁"
                    let pat = o
                        .get("pattern")
                        .and_then(|p| p.get("String"))
                        .and_then(Value::as_str);
                    let content = o.get("content").and_then(Value::as_str);
                    match (pat, content) {
                        (Some(p), Some(" ")) => {
                            if let Some(c) = single_char(p) {
                                sentencepiece = true;
                                replacement.get_or_insert(c);
                            }
                        }
                        (Some(" "), Some(c)) => {
                            if let Some(c) = single_char(c) {
                                sentencepiece = true;
                                replacement.get_or_insert(c);
                            }
                        }
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        if byte_level || sentencepiece {
            break;
        }
    }
    if byte_level {
        Decoding::ByteLevel
    } else if sentencepiece {
        Decoding::SentencePiece {
            replacement: replacement.unwrap_or('\u{2581}'),
            byte_fallback,
        }
    } else {
        Decoding::Raw
    }
}

/// The only char of `s`, if it has exactly one.
fn single_char(s: &str) -> Option<char> {
    let mut it = s.chars();
    let c = it.next()?;
    it.next().is_none().then_some(c)
}

/// Inverse of GPT-2's byte-to-unicode table: `CHAR_TO_BYTE[c]` is the byte for char `c`, or -1.
fn char_to_byte_table() -> &'static [i16; 324] {
    static TABLE: std::sync::OnceLock<[i16; 324]> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = [-1i16; 324];
        let mut n = 0u32;
        for b in 0..=255u32 {
            let printable = (0x21..=0x7E).contains(&b)
                || (0xA1..=0xAC).contains(&b)
                || (0xAE..=0xFF).contains(&b);
            let c = if printable {
                b
            } else {
                n += 1;
                255 + n
            };
            t[c as usize] = b as i16;
        }
        t
    })
}

/// A model-vocabulary token's bytes.
fn decode_token(text: &str, decoding: &Decoding) -> Vec<u8> {
    match decoding {
        Decoding::ByteLevel => {
            // As the `tokenizers` ByteLevel decoder: if a char is outside the table, the whole
            // token is taken as UTF-8.
            let table = char_to_byte_table();
            let mut out = Vec::with_capacity(text.len());
            for c in text.chars() {
                match table.get(c as usize) {
                    Some(&b) if b >= 0 => out.push(b as u8),
                    _ => return text.as_bytes().to_vec(),
                }
            }
            out
        }
        Decoding::SentencePiece {
            replacement,
            byte_fallback,
        } => {
            if *byte_fallback {
                if let Some(b) = parse_byte_token(text) {
                    return vec![b];
                }
            }
            let mut out = Vec::with_capacity(text.len());
            let mut buf = [0u8; 4];
            for c in text.chars() {
                if c == *replacement {
                    out.push(b' ');
                } else {
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
            }
            out
        }
        Decoding::Raw => text.as_bytes().to_vec(),
    }
}

/// `<0xNN>` (two hex digits) -> the byte.
fn parse_byte_token(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

/// The `tokenizers` tokenizer, set to treat special-token spellings in text as plain text.
fn build_tokenizer(json: &str) -> Result<tokenizers::Tokenizer> {
    let built = catch_unwind(|| json.parse::<tokenizers::Tokenizer>())
        .map_err(|_| Error::Vocab("the tokenizers crate panicked on this tokenizer.json".into()))?;
    let mut tokenizer = built.map_err(|e| {
        Error::Vocab(format!(
            "the tokenizers crate cannot load this tokenizer.json: {e}"
        ))
    })?;
    tokenizer.set_encode_special_tokens(true);
    Ok(tokenizer)
}

/// Tokenizes without special tokens.
pub(super) fn tokenize(tokenizer: &tokenizers::Tokenizer, text: &str) -> Result<Vec<TokenId>> {
    let enc = catch_unwind(AssertUnwindSafe(|| tokenizer.encode_fast(text, false)))
        .map_err(|_| Error::Vocab("the tokenizers crate panicked while tokenizing".into()))?
        .map_err(|e| Error::Vocab(format!("tokenizing: {e}")))?;
    Ok(enc.get_ids().to_vec())
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn byte_level_table() {
        assert_eq!(decode_token("Ġthe", &Decoding::ByteLevel), b" the");
        assert_eq!(decode_token("Ċ", &Decoding::ByteLevel), b"\n");
        assert_eq!(decode_token("ĉ", &Decoding::ByteLevel), b"\t");
        assert_eq!(decode_token("ÃŃ", &Decoding::ByteLevel), "í".as_bytes());
        // all 256 bytes are reachable
        let t = char_to_byte_table();
        let mut seen = [false; 256];
        for &b in t.iter().filter(|b| **b >= 0) {
            seen[b as usize] = true;
        }
        assert!(seen.iter().all(|s| *s));
    }

    #[test]
    fn sentencepiece_tokens() {
        let d = Decoding::SentencePiece {
            replacement: '▁',
            byte_fallback: true,
        };
        assert_eq!(decode_token("▁Hello", &d), b" Hello");
        assert_eq!(decode_token("<0x0A>", &d), b"\n");
        assert_eq!(decode_token("<0xFF>", &d), [0xFF]);
        assert_eq!(decode_token("<0x0>", &d), b"<0x0>");
    }
}
