//! The end-to-end scenarios shared by `callmask-llama`'s `tests/generate.rs`, `tests/budget.rs`
//! and `benches/generate.rs`: prompts, tool sets, dialect options, and an independent validation
//! of the calls.

use callmask::{
    CompileOptions, DialectOptions, Grammar, Message, PromptOptions, ToolChoice, Tools,
};
use serde_json::Value;

/// The tool set `examples/tools/FILE`.
pub use crate::data::example_tools as tools;

/// 20 prompts: 10 over the weather tool set, 10 over the mixed one.
pub const PROMPTS: [(&str, &str); 20] = [
    ("weather.json", "What's the weather like in San Francisco?"),
    (
        "weather.json",
        "Is it cold in Oslo right now? Answer in celsius.",
    ),
    (
        "weather.json",
        "Look up the user with id 7890; they asked for black.",
    ),
    ("weather.json", "What is NVIDIA's stock price?"),
    ("weather.json", "What time is it in UTC?"),
    ("weather.json", "Get me Apple's share price, ticker AAPL."),
    ("weather.json", "Fetch user 42."),
    ("weather.json", "How warm is it in Tokyo in fahrenheit?"),
    ("weather.json", "Tell me the temperature in Paris, France."),
    ("weather.json", "Who is user number 1001?"),
    (
        "mixed.json",
        "Book a flight from SFO to JFK for Ann, age 34.",
    ),
    (
        "mixed.json",
        "Book business class from LHR to CDG on 2025-03-01 for Bo and Cy.",
    ),
    ("mixed.json", "What's the weather in Berlin?"),
    ("mixed.json", "Price of MSFT please."),
    ("mixed.json", "Find user 555 with special note 'vip'."),
    (
        "mixed.json",
        "Fly me from BOS to SEA, economy, max 300 dollars, vegetarian meal.",
    ),
    ("mixed.json", "What time is it?"),
    ("mixed.json", "Weather in Madrid in celsius."),
    (
        "mixed.json",
        "I need three seats from ORD to MIA for Al, Bea and Cal.",
    ),
    ("mixed.json", "Get the stock price of GOOG."),
];

/// The seed dialects the scenarios run in.
pub const DIALECTS: [&str; 4] = ["empower", "functools", "pythonic", "inline"];

/// The dialect options of the scenarios: a call required, one call, text bounded.
pub fn options() -> DialectOptions {
    DialectOptions::default()
        .tool_choice(ToolChoice::Required)
        .parallel_calls(false)
        .max_text_chars(Some(100))
        .compile(CompileOptions::default().max_whitespace(2))
}

/// The calls' names and arguments checked against the tools, independently of the grammar.
pub fn validate(tools: &Tools, grammar: &Grammar, text: &str) -> Result<usize, String> {
    let parsed = grammar.parse(text).map_err(|e| e.to_string())?;
    for c in &parsed.tool_calls {
        let tool = tools
            .get(&c.function.name)
            .ok_or_else(|| format!("unknown function {}", c.function.name))?;
        let schema = tool.parameters.clone().unwrap_or_else(|| {
            serde_json::json!({"type": "object", "properties": {}, "additionalProperties": false})
        });
        let schema = callmask::normalize_type_aliases(&schema);
        let v = jsonschema::options()
            .should_validate_formats(true)
            .build(&schema)
            .map_err(|e| e.to_string())?;
        let args: Value = serde_json::from_str(&c.function.arguments).map_err(|e| e.to_string())?;
        v.validate(&args)
            .map_err(|e| format!("{}: {e} in {}", c.function.name, c.function.arguments))?;
    }
    Ok(parsed.tool_calls.len())
}

/// The dialect's prompt for one user message.
pub fn render(dialect: &str, tools: &Tools, message: &str, bos: &str) -> String {
    let template = callmask::prompt::builtin_template(dialect).expect("a built-in template");
    let opts = PromptOptions::default()
        .bos_token(bos.to_owned())
        .datetime(Some("2024-09-24".into()));
    callmask::render(template, &[Message::new("user", message)], tools, &opts).expect("rendering")
}
