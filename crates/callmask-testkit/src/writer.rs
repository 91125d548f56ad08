//! Writes call sets the way each dialect's model writes them (for tests and benchmarks), with the
//! library's call writer templates (`grammars/D.write.jinja`).

use serde_json::Value;

/// One call: name and arguments.
pub type Call = (&'static str, Value);

/// The calls as `dialect` writes them, with `text` before them where the dialect has text
/// beside calls.
pub fn write(dialect: &str, text: &str, calls: &[Call]) -> String {
    let template = callmask::prompt::builtin_writer(dialect)
        .unwrap_or_else(|| panic!("no writer for dialect {dialect}"));
    let calls: Vec<(String, Value)> = calls
        .iter()
        .map(|(n, a)| (n.to_string(), a.clone()))
        .collect();
    callmask::prompt::write_calls(template, text, &calls)
        .unwrap_or_else(|e| panic!("writing calls in {dialect}: {e}"))
}
