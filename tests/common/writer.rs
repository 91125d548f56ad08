//! Writes call sets the way each dialect's model writes them (for tests and benchmarks).

#![allow(dead_code)]

use callmask::parse::convert::python_kwargs;
use serde_json::{json, Value};

/// One call: name and arguments.
pub type Call = (&'static str, Value);

/// The calls as `dialect` writes them, with `text` before them where the dialect has text
/// beside calls.
pub fn write(dialect: &str, text: &str, calls: &[Call]) -> String {
    let json_list = |args_key: &str, as_string: bool| {
        let items: Vec<String> = calls
            .iter()
            .map(|(n, a)| {
                let a = if as_string {
                    Value::String(a.to_string())
                } else {
                    a.clone()
                };
                format!("{{\"name\": {}, \"{args_key}\": {a}}}", json!(n))
            })
            .collect();
        items
    };
    match dialect {
        "empower" => format!("<f>[{}]", json_list("arguments", true).join(", ")),
        "functools" => format!(
            "{text} functools[{}]",
            json_list("arguments", false).join(", ")
        ),
        "pythonic" => {
            let items: Vec<String> = calls
                .iter()
                .map(|(n, a)| format!("{n}({})", python_kwargs(a.as_object().unwrap())))
                .collect();
            format!("<|python_tag|>[{}]", items.join(", "))
        }
        "inline" => {
            let mut s = text.to_owned();
            for (n, a) in calls {
                let args = if a.as_object().unwrap().is_empty() {
                    String::new()
                } else {
                    a.to_string()
                };
                s += &format!("\n<FUNCTION_CALL>{n}({args})</FUNCTION_CALL>");
            }
            s
        }
        "hermes" => {
            let items: Vec<String> = json_list("arguments", false)
                .into_iter()
                .map(|c| format!("<tool_call>\n{c}\n</tool_call>"))
                .collect();
            format!("{text}{}", items.join("\n"))
        }
        "llama31_json" => json_list("parameters", false).join(""),
        _ => panic!("no writer for dialect {dialect}"),
    }
}
