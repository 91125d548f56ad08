//! `callmask check`: is a text, tokenized as the model would, accepted from start to end?

use crate::*;

/// Arguments of `callmask check`.
#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    /// The grammar.
    #[command(flatten)]
    pub(crate) grammar: GrammarArgs,
    /// The vocabulary.
    #[command(flatten)]
    pub(crate) vocab: VocabArgs,
}

/// `callmask check`.
pub(crate) fn check(args: &CheckArgs) -> Result<ExitCode, BadInput> {
    let vocab = load_vocab(&args.vocab)?;
    let grammar = load_grammar(&args.grammar, Some(&vocab))?.grammar;
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
