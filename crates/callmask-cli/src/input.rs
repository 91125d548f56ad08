//! What every subcommand reads: the grammar (a JSON Schema, or a dialect and tools) and the
//! vocabulary, and how a rejection is shown.

use crate::*;

/// Where the grammar comes from: a JSON Schema, or a dialect and a tool set.
#[derive(Debug, Clone, Args)]
pub(crate) struct GrammarArgs {
    /// JSON Schema file the output must satisfy (instead of --dialect/--tools).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["dialect", "tools", "structural_tag"], required_unless_present_any = ["dialect", "structural_tag"])]
    pub(crate) schema: Option<PathBuf>,
    /// XGrammar structural tag file (`{"type": "structural_tag", "format": {...}}`, or the
    /// older `structures`/`triggers` form) the output must follow, as vLLM and SGLang send it
    /// (instead of --schema or --dialect; --tools then only feeds the prompt of `generate`).
    #[arg(long, value_name = "FILE", conflicts_with = "dialect")]
    pub(crate) structural_tag: Option<PathBuf>,
    /// Tool-call dialect: a built-in name (`callmask dialects`) or the path of a grammar file.
    #[arg(long, value_name = "D", requires = "tools", help = crate::dialects::dialect_help())]
    pub(crate) dialect: Option<String>,
    /// Tools file: a list of tools, or an object with a `tools` list (OpenAI shape).
    #[arg(long, value_name = "FILE")]
    pub(crate) tools: Option<PathBuf>,
    /// Options by their names in callmask's options types (DialectOptions with --dialect,
    /// CompileOptions otherwise; docs/cli.md lists them): a JSON object, or @FILE. The flags
    /// below are shorthands for some of them; an option given both ways is an error.
    #[arg(long, value_name = "JSON|@FILE")]
    pub(crate) options: Option<String>,
    /// auto (the default), required, none, or a function name.
    #[arg(long, value_name = "C")]
    pub(crate) tool_choice: Option<String>,
    /// Allow at most one call (OpenAI's `parallel_tool_calls: false`).
    #[arg(long)]
    pub(crate) no_parallel_calls: bool,
    /// What a call that repeats an earlier call of the output (same function, equal
    /// arguments) does: `end` (the default) ends the calls there, and the reply leaves it out;
    /// `bend` steers it to a different call; `allow` lets it be.
    #[arg(long, value_enum, value_name = "RULE")]
    pub(crate) repeated_calls: Option<RepeatedCallsArg>,
    /// `--repeated-calls allow`.
    #[arg(long, conflicts_with = "repeated_calls")]
    pub(crate) allow_repeated_calls: bool,
    /// Let the model reason first between these markers (`<think>,</think>` by default).
    #[arg(long, value_name = "START,END", num_args = 0..=1, default_missing_value = "<think>,</think>")]
    pub(crate) reasoning: Option<String>,
    /// At most this many characters in each stretch of free text around the calls.
    #[arg(long, value_name = "N")]
    pub(crate) max_text: Option<u32>,
    /// Drop keywords callmask cannot enforce exactly (listed on stderr) instead of refusing the
    /// schema.
    #[arg(long)]
    pub(crate) lenient: bool,
    /// Treat `format` as an annotation (JSON Schema 2020-12's default): not enforced, never
    /// refused. By default callmask enforces the formats it knows and refuses the others.
    #[arg(long)]
    pub(crate) format_annotation: bool,
    /// Allow every number JSON spells (integers of up to 19 digits, numbers of up to 19 integer
    /// and 20 fraction digits) instead of only those every JSON parser reads exactly (I-JSON:
    /// integers within ±(2^53 − 1), at most 15 significant digits), the default.
    #[arg(long)]
    pub(crate) json_numbers: bool,
    /// Most whitespace bytes in one gap between JSON tokens (with the tidy policy: spaces and
    /// tabs on the gap's first line; default 20).
    #[arg(long, value_name = "N")]
    pub(crate) max_whitespace: Option<u16>,
    /// Whitespace policy: `tidy` (compact, `", "`-style or pretty-printed; at most one line
    /// break per gap, indentation bounded by the nesting) or `any` (any whitespace up to
    /// --max-whitespace bytes); default tidy.
    #[arg(long, value_name = "P")]
    pub(crate) whitespace: Option<WhitespaceArg>,
    /// The tidy policy's most indentation bytes per nesting level (default 4).
    #[arg(long, value_name = "N")]
    pub(crate) indent: Option<u16>,
    /// Most memory of the compiled grammar, in MiB (default 256).
    #[arg(long, value_name = "MIB")]
    pub(crate) max_memory_mib: Option<usize>,
    /// Longest grammar compile, in seconds (default 10).
    #[arg(long, value_name = "SECS")]
    pub(crate) max_compile_secs: Option<f64>,
    /// Resolve remote `$ref`s under BASE_URI (ending in `/`) from the files under DIR
    /// (repeatable); nothing is fetched over the network.
    #[arg(long, value_name = "DIR=BASE_URI")]
    pub(crate) schema_registry: Vec<String>,
}

/// The options of `args` as one JSON object: `--options`, with the shorthand flags that were
/// given added under their options' names (an option given both ways is an error).
fn options_json(args: &GrammarArgs) -> Result<Value, BadInput> {
    let mut options = match args.options.as_deref() {
        None => serde_json::Map::new(),
        Some(text) => {
            let value = match text.strip_prefix('@') {
                Some(path) => read_json(Path::new(path))?,
                None => {
                    callmask::parse_json(text).map_err(|e| BadInput(format!("--options: {e}")))?
                }
            };
            match value {
                Value::Object(map) => map,
                other => {
                    return Err(BadInput(format!(
                        "--options: expected a JSON object, not {other}"
                    )))
                }
            }
        }
    };
    let reasoning = match &args.reasoning {
        None => None,
        Some(m) => match m.split_once(',') {
            Some((a, b)) if !a.is_empty() && !b.is_empty() => Some(serde_json::json!([a, b])),
            _ => return Err(BadInput(format!("--reasoning {m:?}: expected START,END"))),
        },
    };
    let flags: [(&str, &str, Option<Value>); 14] = [
        (
            "--tool-choice",
            "tool_choice",
            args.tool_choice.clone().map(Value::from),
        ),
        (
            "--no-parallel-calls",
            "parallel_calls",
            args.no_parallel_calls.then_some(false.into()),
        ),
        (
            "--repeated-calls",
            "distinct_calls",
            args.repeated_calls.map(|r| match r {
                RepeatedCallsArg::End => "end".into(),
                RepeatedCallsArg::Bend => "bend".into(),
                RepeatedCallsArg::Allow => "allow".into(),
            }),
        ),
        (
            "--allow-repeated-calls",
            "distinct_calls",
            args.allow_repeated_calls.then_some("allow".into()),
        ),
        ("--reasoning", "reasoning", reasoning),
        (
            "--max-text",
            "max_text_chars",
            args.max_text.map(Value::from),
        ),
        ("--lenient", "lenient", args.lenient.then_some(true.into())),
        (
            "--format-annotation",
            "format_annotation",
            args.format_annotation.then_some(true.into()),
        ),
        (
            "--json-numbers",
            "ijson_numbers",
            args.json_numbers.then_some(false.into()),
        ),
        (
            "--max-whitespace",
            "max_whitespace",
            args.max_whitespace.map(Value::from),
        ),
        (
            "--whitespace",
            "whitespace",
            args.whitespace.map(|w| match w {
                WhitespaceArg::Tidy => "tidy".into(),
                WhitespaceArg::Any => "any".into(),
            }),
        ),
        ("--indent", "indent", args.indent.map(Value::from)),
        (
            "--max-memory-mib",
            "max_memory",
            args.max_memory_mib
                .map(|m| m.saturating_mul(1 << 20).into()),
        ),
        (
            "--max-compile-secs",
            "max_compile_time",
            args.max_compile_secs.map(Value::from),
        ),
    ];
    for (flag, name, value) in flags {
        let Some(value) = value else { continue };
        if options.contains_key(name) {
            return Err(BadInput(format!(
                "{flag} and --options' {name:?} give the same option: give it once"
            )));
        }
        options.insert(name.into(), value);
    }
    Ok(Value::Object(options))
}

/// `--repeated-calls`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum RepeatedCallsArg {
    End,
    Bend,
    Allow,
}

/// `--whitespace`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum WhitespaceArg {
    Tidy,
    Any,
}

/// How to compile the grammar again.
pub(crate) enum Source {
    Schema(CompileOptions),
    Dialect(Dialect, DialectOptions),
    StructuralTag(StructuralTag, StructuralTagOptions),
}

/// A compiled grammar and what it was compiled from.
pub(crate) struct Loaded {
    pub(crate) grammar: Grammar,
    /// How it was compiled.
    pub(crate) source: Source,
    /// The schema (with --schema).
    pub(crate) schema: Option<Value>,
    /// The tools (with --dialect; with --structural-tag, for the prompt only).
    pub(crate) tools: Option<Tools>,
    /// The calls a structural tag's outputs hold (name, arguments schema).
    pub(crate) calls: Option<Vec<(String, Value)>>,
}

/// Where the vocabulary comes from: exactly one of a tokenizer file or a model file.
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub(crate) struct VocabArgs {
    /// Hugging Face `tokenizer.json`.
    #[arg(long, value_name = "FILE")]
    pub(crate) tokenizer: Option<PathBuf>,
    /// GGUF model file (only its vocabulary is loaded), or the name of a model `generate`
    /// knows (`gemma`, `smollm2`), fetched once into the cache.
    #[arg(long, value_name = "FILE|NAME")]
    pub(crate) model: Option<PathBuf>,
}

/// Reads and parses a JSON file, naming the file in any error.
pub(crate) fn read_json(path: &Path) -> Result<Value, BadInput> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| BadInput(format!("cannot read {}: {e}", path.display())))?;
    callmask::parse_json(&text).map_err(|e| BadInput(format!("{}: {e}", path.display())))
}

/// Reads a tools file.
fn read_tools(path: &Path) -> Result<Tools, BadInput> {
    Tools::from_openai_value(read_json(path)?)
        .map_err(|e| BadInput(format!("{}: {e}", path.display())))
}

/// Compiles the grammar from a schema, from a dialect and tools, or from a structural tag
/// (whose literals may hold `vocab`'s special tokens).
pub(crate) fn load_grammar(args: &GrammarArgs, vocab: Option<&Vocab>) -> Result<Loaded, BadInput> {
    let options = options_json(args)?;
    let mut compile = if args.dialect.is_some() {
        CompileOptions::default()
    } else {
        CompileOptions::from_json(&options).map_err(|e| BadInput(format!("--options: {e}")))?
    };
    // Compiled lexemes go where the automata over the vocabulary keep their walks.
    compile.caches = vocab.map(|v| v.caches().clone());
    if !args.schema_registry.is_empty() {
        let mut registry = SchemaRegistry::new();
        for spec in &args.schema_registry {
            let Some((dir, base)) = spec.split_once('=') else {
                return Err(BadInput(format!(
                    "--schema-registry {spec:?}: expected DIR=BASE_URI"
                )));
            };
            registry = registry
                .with_folder(base, dir)
                .map_err(|e| BadInput(format!("--schema-registry {spec:?}: {e}")))?;
        }
        compile = compile.registry(registry);
    }
    let loaded = match (&args.schema, &args.dialect, &args.tools) {
        _ if args.structural_tag.is_some() => {
            let path = args.structural_tag.as_ref().expect("checked");
            let tag = StructuralTag::from_json(&read_json(path)?)
                .map_err(|e| BadInput(format!("{}: {e}", path.display())))?;
            let options = match vocab {
                Some(v) => StructuralTagOptions::for_vocab(v),
                None => StructuralTagOptions::default(),
            }
            .compile(compile);
            let grammar = tag
                .compile(&options)
                .map_err(|e| BadInput(format!("{}: {e}", path.display())))?;
            Loaded {
                grammar,
                schema: None,
                tools: args.tools.as_deref().map(read_tools).transpose()?,
                calls: Some(tag.calls()),
                source: Source::StructuralTag(tag, options),
            }
        }
        (Some(path), _, _) => {
            let schema = read_json(path)?;
            let grammar = Grammar::from_json_schema(&schema, &compile)
                .map_err(|e| BadInput(format!("{}: {e}", path.display())))?;
            Loaded {
                grammar,
                schema: Some(schema),
                tools: None,
                calls: None,
                source: Source::Schema(compile),
            }
        }
        (None, Some(dialect), Some(tools_path)) => {
            let tools = read_tools(tools_path)?;
            let mut options = DialectOptions::from_json(&options)
                .map_err(|e| BadInput(format!("--options: {e}")))?;
            options.compile.caches = compile.caches;
            options.compile.registry = compile.registry;
            let d = Dialect::load(dialect)?;
            let grammar = d.compile(&tools, &options)?;
            Loaded {
                grammar,
                schema: None,
                tools: Some(tools),
                calls: None,
                source: Source::Dialect(d, options),
            }
        }
        _ => {
            return Err(BadInput(
                "give --schema, --dialect and --tools, or --structural-tag".into(),
            ))
        }
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
pub(crate) fn locate(grammar: &Grammar, text: &str) -> Option<callmask::Rejection> {
    match grammar.parse(text) {
        Err(Error::Parse(r)) => Some(r),
        _ => None,
    }
}

/// Loads the vocabulary from whichever source was given.
pub(crate) fn load_vocab(args: &VocabArgs) -> Result<Arc<Vocab>, BadInput> {
    let vocab = match (&args.tokenizer, &args.model) {
        (Some(path), _) => Vocab::from_tokenizer_json(path)
            .map_err(|e| BadInput(format!("{}: {e}", path.display())))?,
        (None, Some(path)) => load_gguf(path)?,
        (None, None) => return Err(BadInput("give --tokenizer or --model".into())),
    };
    Ok(Arc::new(vocab))
}

#[cfg(feature = "llama")]
pub(crate) fn load_gguf(path: &Path) -> Result<Vocab, BadInput> {
    let path = crate::fetch::resolve_model(path, true)?;
    <Vocab as callmask_llama::GgufVocab>::from_gguf(&path)
        .map_err(|e| BadInput(format!("{}: {e}", path.display())))
}

#[cfg(not(feature = "llama"))]
pub(crate) fn load_gguf(_path: &Path) -> Result<Vocab, BadInput> {
    Err(BadInput(
        "--model needs callmask built with the `llama` feature".into(),
    ))
}

/// Bytes of a token as they appear in the text (empty if unknown).
pub(crate) fn token_len(vocab: &Vocab, t: TokenId) -> usize {
    vocab.token_bytes(t).map_or(0, <[u8]>::len)
}

/// A short, printable excerpt of `text` around byte `offset`, with a caret line under it.
pub(crate) fn context(text: &[u8], offset: usize) -> String {
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

impl Loaded {
    /// Compiles the grammar again from its sources.
    pub(crate) fn recompile(&self) -> Result<Grammar, Error> {
        match (&self.source, &self.schema, &self.tools) {
            (Source::Schema(o), Some(schema), _) => Grammar::from_json_schema(schema, o),
            (Source::Dialect(d, o), _, Some(tools)) => d.compile(tools, o),
            (Source::StructuralTag(t, o), _, _) => t.compile(o),
            _ => Ok(self.grammar.clone()),
        }
    }
}
