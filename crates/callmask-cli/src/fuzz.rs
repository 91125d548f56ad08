//! `callmask fuzz`: random complete outputs drawn from the masks, each validated; `--accept`
//! checks known-good call sets.

use crate::*;

/// Arguments of `callmask fuzz`.
#[derive(Debug, Args)]
pub(crate) struct FuzzArgs {
    /// The grammar.
    #[command(flatten)]
    pub(crate) grammar: GrammarArgs,
    /// The vocabulary.
    #[command(flatten)]
    pub(crate) vocab: VocabArgs,
    /// Number of outputs to draw.
    #[arg(short = 'n', long = "count", value_name = "N", default_value_t = 100)]
    pub(crate) count: u64,
    /// Seed of the random walk; the same seed gives the same outputs.
    #[arg(long, default_value_t = 0)]
    pub(crate) seed: u64,
    /// Worker threads (0: one per core). The outputs do not depend on it.
    #[arg(long, value_name = "J", default_value_t = 0)]
    pub(crate) jobs: usize,
    /// Write one JSON object per output to this file: `{"text", "tokens", "finished", "valid"}`.
    #[arg(long, value_name = "FILE")]
    pub(crate) out: Option<PathBuf>,
    /// Give up on an output after this many tokens (it then counts as unfinished, not invalid).
    #[arg(long, value_name = "M", default_value_t = 512)]
    pub(crate) max_tokens: usize,
    /// Mean number of random tokens before the output is finished along a shortest completion
    /// (each output walks 0..=2W tokens). 0: walk until an end-of-generation token or
    /// --max-tokens.
    #[arg(long, value_name = "W", default_value_t = 32)]
    pub(crate) walk: usize,
    /// Where the output may end, end it with this probability (0: only when the uniform pick
    /// lands on an end-of-generation token).
    #[arg(long, value_name = "P", default_value_t = 0.0)]
    pub(crate) end_bias: f64,
    /// Start every output with this text (forced, like a prefill), then walk at random: e.g.
    /// `functools[` to fuzz the calls of a dialect that starts with free text.
    #[arg(long, value_name = "TEXT")]
    pub(crate) prefix: Option<String>,
    /// With a dialect: the probability that an output steers into a call of a random function
    /// after its first few random tokens (free text seldom writes a call marker by chance).
    #[arg(long, value_name = "P", default_value_t = 0.5)]
    pub(crate) dive: f64,
    /// `uniform`: any allowed token, uniformly. `coverage`: among a few random allowed tokens
    /// (and single-byte ones), prefer one leading to a grammar position not visited before
    /// (reaches rare branches and markers sooner).
    #[arg(long, value_name = "S", default_value = "uniform")]
    pub(crate) strategy: StrategyArg,
    /// On a violation, write the reproducer (grammar source, tokens, text, error, shrunk
    /// tokens) to this file.
    #[arg(long, value_name = "FILE", default_value = "fuzz-repro.json")]
    pub(crate) repro: PathBuf,
    /// Instead of fuzzing: write each known-good call set of this JSON Lines file in the dialect,
    /// tokenize it, and report every one the grammar rejects, with the offset. A line is a list
    /// of calls, or an object with `tool_calls` (and optional `content`); a call is
    /// `{"name", "arguments"}` or OpenAI's `{"function": {"name", "arguments"}}`.
    #[arg(long, value_name = "FILE", conflicts_with = "schema")]
    pub(crate) accept: Option<PathBuf>,
    /// With --accept: the template that writes calls in the dialect (minijinja; `text` and
    /// `tool_calls` as in `grammars/*.write.jinja`), for a dialect of your own.
    #[arg(long, value_name = "FILE", requires = "accept")]
    pub(crate) writer: Option<PathBuf>,
}

/// How `fuzz` picks the next token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum StrategyArg {
    Uniform,
    Coverage,
}

/// `callmask fuzz`.
pub(crate) fn fuzz(args: &FuzzArgs) -> Result<ExitCode, BadInput> {
    let vocab = load_vocab(&args.vocab)?;
    let loaded = load_grammar(&args.grammar, Some(&vocab))?;
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
pub(crate) fn reproducer(
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
        "structural_tag": g.structural_tag,
        "tools": loaded.tools.as_ref().map(|t| t.as_slice().iter().map(|t| serde_json::json!({
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        })).collect::<Vec<_>>()),
        "options": match &loaded.source {
            Source::Schema(o) => serde_json::to_value(o),
            Source::Dialect(_, o) => serde_json::to_value(o),
            Source::StructuralTag(_, o) => serde_json::to_value(&o.compile),
        }
        .unwrap_or_default(),
        "tokens": sample.tokens,
        "eos": sample.eos,
        "text": String::from_utf8_lossy(&sample.text),
        "shrunk_tokens": shrunk,
        "shrunk_text": String::from_utf8_lossy(&vocab.decode(&shrunk)),
    })
}

pub(crate) fn fuzzer_vocab(fuzzer: &Fuzzer) -> Arc<Vocab> {
    fuzzer.automaton().vocab().clone()
}

/// Percentile `p` (0..=100) of sorted `xs`.
pub(crate) fn percentile(xs: &[usize], p: usize) -> usize {
    if xs.is_empty() {
        return 0;
    }
    xs[((xs.len() - 1) * p).div_ceil(100)]
}

/// Draws the outputs, checks them, prints the summary.
pub(crate) fn fuzz_run(
    args: &FuzzArgs,
    loaded: &Loaded,
    automaton: &TokenAutomaton,
) -> Result<ExitCode, BadInput> {
    let grammar = &loaded.grammar;
    let (checker, mut coverage) = match (&loaded.schema, &loaded.tools) {
        _ if loaded.calls.is_some() => {
            let calls = loaded.calls.as_deref().unwrap_or_default();
            (
                Checker::for_calls(calls)?,
                Coverage::for_calls(grammar, calls),
            )
        }
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
    let options = FuzzOptions::default()
        .seed(args.seed)
        .max_tokens(args.max_tokens)
        .walk_tokens(args.walk)
        .end_bias(args.end_bias)
        .strategy(match args.strategy {
            StrategyArg::Uniform => Strategy::Uniform,
            StrategyArg::Coverage => Strategy::Coverage,
        })
        .prefix(prefix)
        .dive(args.dive);
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
pub(crate) fn call_set(line: &Value) -> Result<(String, Vec<(String, Value)>), String> {
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
pub(crate) fn accept(
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
