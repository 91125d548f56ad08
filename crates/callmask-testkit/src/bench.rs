//! Helpers shared by the benchmarks: where the data and the target folder are, environment knobs, model-style JSON text, statistics, and the realistic
//! tool sets (also stored as `benches/tools/tools_N.json`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use callmask::Tools;

use crate::data::{core_dir, workspace_root};
use serde_json::{json, Value};

// ---------------------------------------------------------------------------------------------
// Paths and environment

pub use crate::data::cache_dir;

/// The cargo target folder (`$CARGO_TARGET_DIR`, else found from the bench binary's path).
pub fn target_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(d);
    }
    // The bench binary lives in <target>/<profile>/deps/.
    if let Ok(exe) = std::env::current_exe() {
        if let Some(t) = exe.parent().and_then(Path::parent).and_then(Path::parent) {
            if t.join("CACHEDIR.TAG").exists() || t.ends_with("target") {
                return t.to_path_buf();
            }
        }
    }
    workspace_root().join("target")
}

/// A comma-separated list from the environment (`None` when unset or empty).
pub fn env_list(var: &str) -> Option<Vec<String>> {
    let v = std::env::var(var).ok()?;
    let v: Vec<String> = v
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    (!v.is_empty()).then_some(v)
}

/// A number from the environment, `default` when unset; panics on a non-number.
pub fn env_usize(var: &str, default: usize) -> usize {
    match std::env::var(var) {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{var} must be a number, got {v:?}")),
        _ => default,
    }
}

/// A float from the environment, `default` when unset; panics on a non-number.
pub fn env_f64(var: &str, default: f64) -> f64 {
    match std::env::var(var) {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{var} must be a number, got {v:?}")),
        _ => default,
    }
}

/// Reads a JSON file, panicking with the path on failure (bench inputs are ours).
pub fn read_json(path: &Path) -> Value {
    let s = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&s).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

// ---------------------------------------------------------------------------------------------
// Model-style JSON text

/// `json.dumps` layout: `", "` between items, `": "` after keys.
pub struct SpacedFormatter;

impl serde_json::ser::Formatter for SpacedFormatter {
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }
}

/// `v` as Llama-family models write JSON (Python `json.dumps` style, UTF-8 kept).
pub fn to_model_text(v: &Value) -> String {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, SpacedFormatter);
    serde::Serialize::serialize(v, &mut ser).expect("serialize instance");
    String::from_utf8(out).expect("utf-8")
}

// ---------------------------------------------------------------------------------------------
// Statistics

/// A duration in microseconds.
pub fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Median, p99, max and mean of a sample.
#[derive(Clone, Copy, Debug)]
pub struct Summary {
    /// median (nearest rank)
    pub p50: f64,
    /// 99th percentile (nearest rank)
    pub p99: f64,
    /// maximum
    pub max: f64,
    /// mean
    pub mean: f64,
    /// sample size
    pub n: usize,
}

/// Nearest-rank percentiles of `xs` (NaN when empty).
pub fn summarize(xs: &[f64]) -> Summary {
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let q = |p: f64| -> f64 {
        if v.is_empty() {
            return f64::NAN;
        }
        let k = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len());
        v[k - 1]
    };
    Summary {
        p50: q(0.5),
        p99: q(0.99),
        max: v.last().copied().unwrap_or(f64::NAN),
        mean: if v.is_empty() {
            f64::NAN
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        },
        n: v.len(),
    }
}

/// A number rounded to 3 decimals, `null` when not finite.
pub fn num3(x: f64) -> Value {
    if x.is_finite() {
        json!((x * 1000.0).round() / 1000.0)
    } else {
        Value::Null
    }
}

/// A summary as JSON.
pub fn summary_json(s: Summary) -> Value {
    json!({"p50": num3(s.p50), "p99": num3(s.p99), "max": num3(s.max), "mean": num3(s.mean), "n": s.n})
}

/// Microseconds with 2-3 significant digits, `-` when not finite.
pub fn fmt_us(x: f64) -> String {
    if !x.is_finite() {
        "-".into()
    } else if x >= 100.0 {
        format!("{:.0}", x)
    } else if x >= 10.0 {
        format!("{:.1}", x)
    } else {
        format!("{:.2}", x)
    }
}

/// `a / b` as `0.42×`, `-` when undefined.
pub fn fmt_ratio(a: f64, b: f64) -> String {
    if a.is_finite() && b.is_finite() && b > 0.0 {
        let r = a / b;
        if r < 0.095 {
            format!("{:.3}×", r)
        } else {
            format!("{:.2}×", r)
        }
    } else {
        "-".into()
    }
}

// ---------------------------------------------------------------------------------------------
// Tool sets

/// Thirteen realistic functions (the shapes of common assistant tools: strings with patterns and
/// lengths, enums, bounded numbers, formats, nested objects, arrays of objects, a type list, a
/// recursive `$ref`, a function without arguments); larger sets repeat them under other names.
pub fn base_functions() -> Vec<Value> {
    vec![
        json!({"name": "get_current_weather", "description": "Get the current weather in a given location",
            "parameters": {"type": "object", "additionalProperties": false, "required": ["location"],
                "properties": {"location": {"type": "string", "description": "City and state, e.g. San Francisco, CA"},
                               "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}}}),
        json!({"name": "get_stock_price", "description": "Current price of a stock",
            "parameters": {"type": "object", "additionalProperties": false, "required": ["ticker"],
                "properties": {"ticker": {"type": "string", "pattern": "^[A-Z]{1,5}$"},
                               "exchange": {"type": "string", "enum": ["NASDAQ", "NYSE", "LSE"]}}}}),
        json!({"name": "get_user_info", "description": "Details of a user",
            "parameters": {"type": "object", "additionalProperties": false, "required": ["user_id"],
                "properties": {"user_id": {"type": "integer", "minimum": 1},
                               "special": {"type": "string"}}}}),
        json!({"name": "search_web", "description": "Search the web",
            "parameters": {"type": "object", "additionalProperties": false, "required": ["query"],
                "properties": {"query": {"type": "string", "minLength": 1, "maxLength": 200},
                               "num_results": {"type": "integer", "minimum": 1, "maximum": 20},
                               "safe": {"type": "boolean"}}}}),
        json!({"name": "send_email", "description": "Send an email",
            "parameters": {"type": "object", "additionalProperties": false, "required": ["to", "subject", "body"],
                "properties": {"to": {"type": "array", "items": {"type": "string", "format": "email"}, "minItems": 1},
                               "cc": {"type": "array", "items": {"type": "string", "format": "email"}},
                               "subject": {"type": "string", "maxLength": 120},
                               "body": {"type": "string"}}}}),
        json!({"name": "create_event", "description": "Create a calendar event",
            "parameters": {"type": "object", "additionalProperties": false, "required": ["title", "start"],
                "properties": {"title": {"type": "string"},
                               "start": {"type": "string", "format": "date-time"},
                               "duration_minutes": {"type": "integer", "minimum": 5, "maximum": 1440},
                               "attendees": {"type": "array", "items": {"type": "object", "additionalProperties": false,
                                   "required": ["email"], "properties": {"email": {"type": "string", "format": "email"},
                                   "optional": {"type": "boolean"}}}}}}}),
        json!({"name": "get_directions", "description": "Directions between two places",
            "parameters": {"type": "object", "additionalProperties": false, "required": ["origin", "destination"],
                "properties": {"origin": {"type": "string"}, "destination": {"type": "string"},
                               "mode": {"type": "string", "enum": ["driving", "walking", "bicycling", "transit"]},
                               "avoid": {"type": "array", "items": {"enum": ["tolls", "highways", "ferries"]}}}}}),
        json!({"name": "translate", "description": "Translate text",
            "parameters": {"type": "object", "additionalProperties": false, "required": ["text", "target"],
                "properties": {"text": {"type": "string"}, "target": {"type": "string", "pattern": "^[a-z]{2}(-[A-Z]{2})?$"}}}}),
        json!({"name": "set_thermostat", "description": "Set the thermostat",
            "parameters": {"type": "object", "additionalProperties": false, "required": ["temperature"],
                "properties": {"temperature": {"type": "number", "minimum": 10, "maximum": 30},
                               "mode": {"type": "string", "enum": ["heat", "cool", "auto", "off"]},
                               "schedule": {"type": "object", "additionalProperties": false,
                                   "properties": {"days": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 6}},
                                                  "time": {"type": "string", "format": "time"}}}}}}),
        json!({"name": "create_folder_tree", "description": "Create a tree of folders",
            "parameters": {"type": "object", "additionalProperties": false, "required": ["root"],
                "properties": {"root": {"$ref": "#/$defs/folder"}},
                "$defs": {"folder": {"type": "object", "additionalProperties": false, "required": ["name"],
                    "properties": {"name": {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$"},
                                   "children": {"type": "array", "items": {"$ref": "#/$defs/folder"}}}}}}}),
        json!({"name": "update_order", "description": "Update an order's shipping and items",
            "parameters": {"type": "object", "additionalProperties": false, "required": ["order_id", "items"],
                "properties": {"order_id": {"type": "string", "pattern": "^ORD-[0-9]{6}$"},
                               "status": {"type": "string", "enum": ["pending", "shipped", "delivered", "cancelled"]},
                               "shipping": {"type": "object", "additionalProperties": false, "required": ["street", "city", "country"],
                                   "properties": {"street": {"type": "string"}, "city": {"type": "string"},
                                                  "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
                                                  "country": {"type": "string", "enum": ["US", "CA", "GB", "DE", "FR", "JP"]}}},
                               "items": {"type": "array", "minItems": 1, "maxItems": 50, "items": {"type": "object",
                                   "additionalProperties": false, "required": ["sku", "quantity"],
                                   "properties": {"sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
                                                  "quantity": {"type": "integer", "minimum": 1, "maximum": 999},
                                                  "gift": {"type": "boolean"}}}}}}}),
        json!({"name": "query_records", "description": "Filter records of a table",
            "parameters": {"type": "object", "additionalProperties": false, "required": ["table", "filters"],
                "properties": {"table": {"type": "string", "enum": ["users", "orders", "products", "events"]},
                               "filters": {"type": "array", "items": {"type": "object", "additionalProperties": false,
                                   "required": ["field", "op", "value"],
                                   "properties": {"field": {"type": "string", "pattern": "^[a-z_]{1,32}$"},
                                                  "op": {"type": "string", "enum": ["eq", "ne", "lt", "gt", "contains"]},
                                                  "value": {"type": ["string", "number", "boolean"]}}}},
                               "limit": {"type": "integer", "minimum": 1, "maximum": 1000}}}}),
        json!({"name": "get_time_utc", "description": "The current time in UTC"}),
    ]
}

/// The tool counts of the suite's workloads.
pub const TOOL_COUNTS: [usize; 6] = [1, 5, 20, 100, 400, 1000];

/// `n` functions (OpenAI bare-function JSON): the base functions, then again under the names
/// `NAME_k`.
pub fn tool_set_json(n: usize) -> Value {
    let base = base_functions();
    let mut list = Vec::new();
    for i in 0..n {
        let mut f = base[i % base.len()].clone();
        if i >= base.len() {
            let name = format!("{}_{}", f["name"].as_str().unwrap(), i / base.len());
            f["name"] = name.into();
        }
        list.push(f);
    }
    Value::Array(list)
}

/// `n` functions as [`Tools`].
pub fn tool_set(n: usize) -> Tools {
    Tools::from_openai_json(&tool_set_json(n)).unwrap()
}

/// Where the suite's tool sets are stored.
pub fn tools_file(n: usize) -> PathBuf {
    core_dir().join(format!("benches/tools/tools_{n}.json"))
}

/// Writes `benches/tools/tools_N.json` when missing or different from the generator's output;
/// returns the set as JSON.
pub fn store_tool_set(n: usize) -> Value {
    let v = tool_set_json(n);
    let path = tools_file(n);
    let text = serde_json::to_string_pretty(&v).unwrap() + "\n";
    if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        if let Err(e) = std::fs::write(&path, text) {
            eprintln!("warning: cannot write {}: {e}", path.display());
        }
    }
    v
}

/// Rewrites every `#/$defs/X` reference under `v` to `#/$defs/{prefix}X`.
fn prefix_refs(v: &mut Value, prefix: &str) {
    match v {
        Value::Object(o) => {
            for (k, x) in o.iter_mut() {
                if k == "$ref" {
                    if let Some(r) = x.as_str().and_then(|r| r.strip_prefix("#/$defs/")) {
                        *x = Value::String(format!("#/$defs/{prefix}{r}"));
                    }
                } else {
                    prefix_refs(x, prefix);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| prefix_refs(x, prefix)),
        _ => {}
    }
}

/// The JSON Schema of a functools-style call list for a tool set (the peers' equivalent of the
/// dialects): `{"type": "array", "minItems": 1, "items": {"anyOf": [{"type": "object",
/// "properties": {"name": {"const": F}, "arguments": PARAMS}, "required": ["name", "arguments"],
/// "additionalProperties": false}, ...]}}`. Each function's `$defs` move to the root (prefixed
/// `fI_`), since `$ref`s resolve against the root document.
pub fn call_list_schema(tools: &Value) -> Value {
    let mut defs = serde_json::Map::new();
    let mut alts = Vec::new();
    for (i, f) in tools.as_array().unwrap().iter().enumerate() {
        let mut params = f.get("parameters").cloned().unwrap_or_else(
            || json!({"type": "object", "properties": {}, "additionalProperties": false}),
        );
        let prefix = format!("f{i}_");
        prefix_refs(&mut params, &prefix);
        if let Some(Value::Object(d)) = params.as_object_mut().and_then(|o| o.remove("$defs")) {
            for (k, x) in d {
                defs.insert(format!("{prefix}{k}"), x);
            }
        }
        alts.push(json!({"type": "object",
            "properties": {"name": {"const": f["name"]}, "arguments": params},
            "required": ["name", "arguments"], "additionalProperties": false}));
    }
    let mut s = json!({"type": "array", "minItems": 1, "items": {"anyOf": alts}});
    if !defs.is_empty() {
        s["$defs"] = Value::Object(defs);
    }
    s
}

/// The calls the suite writes for a tool set of `n` functions (all in the set): one for `n = 1`,
/// two otherwise, the second with nested (`n = 5`: flat) arguments; with 100 functions the
/// calls name functions of the last copies, so that the name must be read to the end.
pub fn calls_for(n: usize) -> Vec<(String, Value)> {
    let weather = json!({"location": "San Francisco, CA", "unit": "celsius"});
    let tree = json!({"root": {"name": "projects", "children": [
        {"name": "callmask", "children": [{"name": "src"}, {"name": "benches"}]},
        {"name": "notes.d"}]}});
    match n {
        0 => vec![],
        1..=4 => vec![("get_current_weather".into(), weather)],
        5..=9 => vec![
            ("get_current_weather".into(), weather),
            (
                "get_stock_price".into(),
                json!({"ticker": "NVDA", "exchange": "NASDAQ"}),
            ),
        ],
        _ => {
            let b = base_functions().len();
            let k = (n - 1) / b; // the last copy holding each of the two functions
            let suffix = |base: &str, idx: usize| {
                let copy = if idx + b * k < n { k } else { k - 1 };
                if copy == 0 {
                    base.to_string()
                } else {
                    format!("{base}_{copy}")
                }
            };
            vec![
                (suffix("get_current_weather", 0), weather),
                (suffix("create_folder_tree", 9), tree),
            ]
        }
    }
}
