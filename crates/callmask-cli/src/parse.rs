//! `callmask parse`: an output into its text, reasoning and `tool_calls`.

use crate::*;

/// Arguments of `callmask parse`.
#[derive(Debug, Args)]
pub(crate) struct ParseArgs {
    /// The grammar.
    #[command(flatten)]
    pub(crate) grammar: GrammarArgs,
}

/// `callmask parse`.
pub(crate) fn parse(args: &ParseArgs) -> Result<ExitCode, BadInput> {
    let grammar = load_grammar(&args.grammar, None)?.grammar;
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
