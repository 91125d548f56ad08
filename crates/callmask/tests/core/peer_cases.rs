//! The peers' own tool-parser test cases (`tests/peer_cases/DIALECT.json`: real model outputs
//! and the calls vLLM's, SGLang's and llama.cpp's tests expect of them, transcribed from those
//! tests) read by [`Grammar::parse_recovering`], the way callmask reads an unconstrained output.
//!
//! A case agrees when the recovering parse returns the same calls (names, and arguments equal as
//! JSON values), in order. Every case that disagrees is listed, with the reason, in
//! `tests/peer_cases/disagreements.txt`; the test fails on a disagreement that is not listed and
//! on a listed one that now agrees (so the list is the truth), and prints the agreement per
//! dialect (`cargo test --release -p callmask --test core peer_cases -- --nocapture`).
//!
//! The outputs are unconstrained, so the calls are read with their keys in any order
//! (`name_first` off), as the peers' JSON parsers read them, and repeated calls kept
//! (`distinct_calls` `allow`), as the peers keep them.

use std::collections::BTreeMap;

use callmask::{Dialect, DialectOptions, DistinctCalls, Grammar, Tools};
use serde_json::Value;

/// The folder of the case files.
const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/peer_cases");

/// The least share of cases that must agree: the level reached (587 of 616, above the aim of
/// 0.95), a floor that only rises.
const MIN_AGREEMENT: f64 = 0.952;

/// One case's outcome: `None` when it agrees, else what callmask returned.
fn outcome(g: &Grammar, case: &Value) -> Option<String> {
    let text = case["text"].as_str().expect("text");
    let want: Vec<(String, Value)> = case["calls"]
        .as_array()
        .expect("calls")
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_owned(),
                c["arguments"].clone(),
            )
        })
        .collect();
    let got: Result<Vec<(String, Value)>, String> = g
        .parse_recovering(text)
        .map_err(|e| e.to_string())
        .and_then(|p| {
            p.tool_calls
                .iter()
                .map(|c| {
                    c.arguments_json()
                        .map(|a| (c.function.name.clone(), a))
                        .map_err(|e| e.to_string())
                })
                .collect()
        });
    match got {
        Ok(got) if same_calls(&got, &want) => None,
        Ok(got) => Some(format!("calls {got:?}")),
        Err(e) => Some(format!("error: {e}")),
    }
}

/// Whether two lists of calls are the same: the names, and the arguments equal as JSON values
/// (numbers by value, as JSON Schema compares them: `5.0` is `5`).
fn same_calls(a: &[(String, Value)], b: &[(String, Value)]) -> bool {
    fn same(a: &Value, b: &Value) -> bool {
        match (a, b) {
            (Value::Number(x), Value::Number(y)) => x == y || x.as_f64() == y.as_f64(),
            (Value::Array(x), Value::Array(y)) => {
                x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q))
            }
            (Value::Object(x), Value::Object(y)) => {
                x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
            }
            _ => a == b,
        }
    }
    a.len() == b.len() && a.iter().zip(b).all(|((n, x), (m, y))| n == m && same(x, y))
}

/// `dialect#index` of every listed disagreement, with its reason.
fn listed() -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(format!("{DIR}/disagreements.txt")).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (key, reason) = l.split_once(' ').unwrap_or((l, ""));
            (key.to_owned(), reason.trim().to_owned())
        })
        .collect()
}

#[test]
fn peer_parser_cases_agree() {
    let mut files: Vec<_> = std::fs::read_dir(DIR)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(files.len() >= 25, "only {} case files", files.len());
    let mut total = 0;
    let mut disagree: BTreeMap<String, String> = BTreeMap::new();
    let mut report = String::new();
    for f in &files {
        let file: Value = serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
        let d = file["dialect"].as_str().unwrap();
        let tools = Tools::from_json_str(&file["tools"].to_string()).unwrap();
        let g = Dialect::by_name(d)
            .unwrap_or_else(|e| panic!("{d}: {e}"))
            // The peers keep a repeated call (granite4#0 expects one): compared with the rule off.
            .compile(
                &tools,
                &DialectOptions::default()
                    .name_first(false)
                    .distinct_calls(DistinctCalls::Allow),
            )
            .unwrap_or_else(|e| panic!("{d}: {e}"));
        let cases = file["cases"].as_array().unwrap();
        let mut bad = 0;
        for (i, case) in cases.iter().enumerate() {
            total += 1;
            if let Some(got) = outcome(&g, case) {
                bad += 1;
                disagree.insert(
                    format!("{d}#{i}"),
                    format!("{} -> {got}", case["source"].as_str().unwrap_or("")),
                );
            }
        }
        report.push_str(&format!(
            "{d:<18} {:>3}/{:<3}\n",
            cases.len() - bad,
            cases.len()
        ));
    }
    let agreed = total - disagree.len();
    println!("{report}all: {agreed}/{total}");
    let listed = listed();
    let unlisted: Vec<String> = disagree
        .iter()
        .filter(|(k, _)| !listed.contains_key(*k))
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    let stale: Vec<&String> = listed
        .keys()
        .filter(|k| !disagree.contains_key(*k))
        .collect();
    assert!(
        unlisted.is_empty() && stale.is_empty(),
        "disagreements not in disagreements.txt:\n{}\nlisted but now agreeing: {stale:?}",
        unlisted.join("\n")
    );
    let share = agreed as f64 / total as f64;
    assert!(
        share >= MIN_AGREEMENT,
        "{agreed}/{total} agree ({:.1}%), fewer than {:.0}%",
        share * 100.0,
        MIN_AGREEMENT * 100.0
    );
}
