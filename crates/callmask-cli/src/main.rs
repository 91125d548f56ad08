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

mod bench;
mod check;
mod dialects;
#[cfg(feature = "llama")]
mod fetch;
mod fuzz;
#[cfg(feature = "llama")]
mod generate;
mod input;
mod parse;
mod prompt;

use bench::{bench, BenchArgs};
use check::{check, CheckArgs};
use dialects::{dialects, DialectsArgs};
use fuzz::{fuzz, FuzzArgs};
#[cfg(feature = "llama")]
use generate::{generate, GenerateArgs};
use input::*;
use parse::{parse, ParseArgs};
use prompt::{prompt, PromptArgs};

use callmask::fuzz::{Checked, Checker, Coverage, FuzzOptions, Fuzzer, Outcome, Sample, Strategy};
use callmask::{
    CompileOptions, Dialect, DialectOptions, Error, Grammar, Message, PromptOptions,
    SchemaRegistry, StructuralTag, StructuralTagOptions, TokenAutomaton, TokenId, Tools, Vocab,
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
    /// List the built-in dialects: model families, output shapes, detection markers, sources
    /// (`--names`, `--markdown`).
    Dialects(DialectsArgs),
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

/// Exit status of a command whose reader closed its standard output or error early (`| head`,
/// `2>&1 | head`): the
/// shell's 128 + SIGPIPE, as a process killed by the signal reports it.
const BROKEN_PIPE_EXIT: i32 = 141;

/// Ends the process quietly (status [`BROKEN_PIPE_EXIT`]) when printing to stdout or stderr fails
/// because
/// the reader went away, as Unix tools do; any other panic keeps the default report.
fn exit_quietly_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        let printing = payload.starts_with("failed printing to stdout")
            || payload.starts_with("failed printing to stderr");
        if printing && payload.contains("Broken pipe") {
            std::process::exit(BROKEN_PIPE_EXIT);
        }
        default(info);
    }));
}

fn main() -> ExitCode {
    exit_quietly_on_broken_pipe();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check(args) => check(&args),
        Command::Fuzz(args) => fuzz(&args),
        Command::Parse(args) => parse(&args),
        Command::Prompt(args) => prompt(&args),
        Command::Bench(args) => bench(&args),
        Command::Dialects(args) => dialects(&args),
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
