//! `callmask prompt`: the prompt a dialect's model expects.

use crate::*;

/// Arguments of `callmask prompt`.
#[derive(Debug, Args)]
pub(crate) struct PromptArgs {
    /// Dialect whose built-in prompt template to render (the help lists the built-in names).
    #[arg(long, value_name = "D", required_unless_present = "template", help = crate::dialects::prompt_dialect_help())]
    pub(crate) dialect: Option<String>,
    /// A minijinja template file to render instead of the dialect's.
    #[arg(long, value_name = "FILE")]
    pub(crate) template: Option<PathBuf>,
    /// Tools file (a list of tools, or an object with a `tools` list).
    #[arg(long, value_name = "FILE")]
    pub(crate) tools: PathBuf,
    /// Messages file: a list of `{role, content, tool_calls?, tool_call_id?}` (OpenAI shape).
    #[arg(long, value_name = "FILE")]
    pub(crate) messages: PathBuf,
    /// The date the prompt shows (templates that show one).
    #[arg(long, value_name = "TEXT")]
    pub(crate) datetime: Option<String>,
    /// Text of the beginning-of-sequence token, for templates that write it.
    #[arg(long, value_name = "TEXT", default_value = "")]
    pub(crate) bos_token: String,
}

/// `callmask prompt`.
pub(crate) fn prompt(args: &PromptArgs) -> Result<ExitCode, BadInput> {
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
    let tools = Tools::from_openai_value(read_json(&args.tools)?)
        .map_err(|e| BadInput(format!("{}: {e}", args.tools.display())))?;
    let messages = Message::list_from_json(&read_json(&args.messages)?)
        .map_err(|e| BadInput(format!("{}: {e}", args.messages.display())))?;
    let options = PromptOptions::default()
        .datetime(args.datetime.clone())
        .bos_token(args.bos_token.clone());
    let text = callmask::render(&template, &messages, &tools, &options)?;
    print!("{text}");
    Ok(ExitCode::SUCCESS)
}
