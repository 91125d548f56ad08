//! Conformance against the official JSON-Schema-Test-Suite (draft 2020-12 and draft 7, the
//! top-level files; `optional/` is not run).
//!
//! For every case, the schema is compiled with the strict (default) options. A compile error puts
//! the case out of scope (counted per keyword or reason: unsupported keywords, remote `$ref`s to
//! `http://localhost:1234/...` which never resolve, ...). For every in-scope case, each test
//! instance is serialized canonically (`serde_json::to_string`, compact) and run through
//! `Grammar::check_bytes`:
//!
//! - an invalid instance that is accepted is a **false accept**: always a hard failure, listed in
//!   full;
//! - a valid instance that is rejected is a **difference**; every difference must be listed,
//!   with its reason, in `tests/known-differences.txt` (`file :: case :: test :: reason`), and
//!   they may not exceed 1% of the in-scope valid instances.
//!
//! Invalid instances are also checked pretty-printed (`serde_json::to_string_pretty`): accepting
//! that form is a false accept too. Valid instances accepted compact but rejected pretty are
//! reported (the whitespace policy is bounded), not failed. Every instance is also checked
//! ASCII-escaped, as Python's `json.dumps` writes it by default (each character past ASCII as
//! `\uxxxx`, a surrogate pair past U+FFFF): it must get the compact form's verdict exactly (an
//! invalid one accepted is a false accept, a valid one rejected a hard failure). The `format.json` files test the
//! drafts' default, where `format` is an annotation ("invalid date string is only an annotation
//! by default"): their cases are compiled with `CompileOptions::format_annotation`, the option a
//! user wanting that default sets. Every other file runs with the defaults, which assert formats
//! (as the format-assertion vocabulary allows).
//!
//! `CALLMASK_BLESS=1 cargo test --release --test core conformance::` rewrites the known-differences file
//! from the current results; it never excuses false accepts, panics or the 1% limit.
//!
//! A second test runs the token-level path on the Llama 3.1 vocabulary: each instance (valid or
//! not, compact, pretty and ASCII-escaped) of a sample of in-scope cases is tokenized as the model would and fed
//! to a matcher; it must be accepted exactly when `check_bytes` accepts it. `CALLMASK_TOKEN_SAMPLE_EVERY=K` takes
//! every K-th in-scope case (default 1: all of them).
//!
//! Draft-7 files carry no `$schema`; the test adds `"$schema": "http://json-schema.org/draft-07/schema#"`
//! to their (object) root schemas so that draft-specific keywords (array-form `items`,
//! `additionalItems`, `definitions`, `dependencies`, `$ref` overriding its siblings) get their
//! draft-7 meaning.

use callmask_testkit as testkit;

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use callmask::{CompileOptions, Error, Grammar, SchemaRegistry, TokenAutomaton};
use serde_json::Value;

/// The drafts run, as (folder, `$schema` to add when a root schema has none).
const DRAFTS: [(&str, Option<&str>); 2] = [
    ("draft2020-12", None),
    ("draft7", Some("http://json-schema.org/draft-07/schema#")),
];

/// Largest share of in-scope valid instances that may be rejected.
const MAX_DIFFERENCE_RATE: f64 = 0.01;

/// One test instance of a case.
struct Instance {
    description: String,
    data: Value,
    valid: bool,
}

/// One case of the suite: a schema and its instances.
struct Case {
    /// `draft7/type.json`.
    file: String,
    description: String,
    schema: Value,
    tests: Vec<Instance>,
}

impl Case {
    /// The `file :: case :: test` key of one of its instances.
    fn key(&self, test: &Instance) -> String {
        format!(
            "{} :: {} :: {}",
            one_line(&self.file),
            one_line(&self.description),
            one_line(&test.description)
        )
    }
}

/// All cases of the top-level files of the drafts run, in a stable order.
fn load_suite() -> Vec<Case> {
    let root = testkit::suite_dir();
    let mut cases = Vec::new();
    for (draft, add_schema) in DRAFTS {
        let dir = root.join(draft);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("directory entry").path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        assert!(!files.is_empty(), "no test files in {}", dir.display());
        for path in files {
            let name = format!("{draft}/{}", path.file_name().unwrap().to_string_lossy());
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let parsed: Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            for case in parsed.as_array().expect("a test file is a list of cases") {
                let mut schema = case["schema"].clone();
                if let (Some(uri), Value::Object(map)) = (add_schema, &mut schema) {
                    map.entry("$schema")
                        .or_insert_with(|| Value::String(uri.to_string()));
                }
                let tests = case["tests"]
                    .as_array()
                    .expect("a case has a list of tests")
                    .iter()
                    .map(|t| Instance {
                        description: t["description"].as_str().unwrap_or("").to_string(),
                        data: t["data"].clone(),
                        valid: t["valid"]
                            .as_bool()
                            .expect("a test says whether it is valid"),
                    })
                    .collect();
                cases.push(Case {
                    file: name.clone(),
                    description: case["description"].as_str().unwrap_or("").to_string(),
                    schema,
                    tests,
                });
            }
        }
    }
    cases
}

/// Why a case is out of scope, grouped for the report.
fn out_of_scope_reason(e: &Error) -> String {
    match e {
        Error::UnsupportedKeyword { keyword, .. } => format!("unsupported keyword `{keyword}`"),
        Error::UnresolvedRef { reference, .. } if reference.contains("://") => {
            "remote $ref (not in the registry)".to_string()
        }
        Error::UnresolvedRef { .. } => "unresolved local $ref".to_string(),
        Error::InvalidPattern { .. } => "pattern not supported by regex-automata".to_string(),
        Error::LimitExceeded { what, .. } => format!("limit exceeded: {what}"),
        Error::InvalidSchema { .. } => "judged an invalid schema (suspicious)".to_string(),
        other => format!("other error: {other}"),
    }
}

/// The compile options: strict, with the suite's `remotes/` folder as `http://localhost:1234/`
/// (as the suite's README asks), so that remote `$ref`s resolve without a network; `format` as
/// an annotation in the `format.json` files (see the module doc).
fn options(case: &Case) -> CompileOptions {
    let remotes = testkit::suite_dir().parent().unwrap().join("remotes");
    let registry = SchemaRegistry::new()
        .with_folder("http://localhost:1234/", remotes)
        .expect("a valid base URI");
    CompileOptions::default()
        .registry(registry)
        .format_annotation(format_as_annotation(case))
}

/// True for the files that test `format` as the drafts' default annotation.
fn format_as_annotation(case: &Case) -> bool {
    case.file.ends_with("/format.json")
}

/// A compiled case, or why not.
enum Compiled {
    InScope(Grammar),
    OutOfScope(String, String),
    Panicked(String),
}

/// Compiles a case's schema with the strict options, catching panics.
fn compile(case: &Case) -> (Compiled, Duration) {
    let started = Instant::now();
    let result = catch_unwind(AssertUnwindSafe(|| {
        Grammar::from_json_schema(&case.schema, &options(case))
    }));
    let elapsed = started.elapsed();
    let compiled = match result {
        Ok(Ok(g)) => Compiled::InScope(g),
        Ok(Err(e)) => Compiled::OutOfScope(out_of_scope_reason(&e), e.to_string()),
        Err(p) => Compiled::Panicked(panic_message(p)),
    };
    (compiled, elapsed)
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(non-string panic)".to_string())
}

/// The checked-in known-differences file.
fn known_differences_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("known-differences.txt")
}

/// The entries of the known-differences file, `file :: case :: test` → reason; a missing file
/// lists none.
fn load_known_differences() -> BTreeMap<String, String> {
    let Ok(text) = std::fs::read_to_string(known_differences_path()) else {
        return BTreeMap::new();
    };
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let parts: Vec<&str> = l.splitn(4, " :: ").collect();
            assert!(
                parts.len() == 4,
                "malformed line in {} (want `file :: case :: test :: reason`): {l}",
                known_differences_path().display()
            );
            (parts[..3].join(" :: "), parts[3].to_string())
        })
        .collect()
}

/// Writes the known-differences file from `differences` (key → reason), keeping the reason
/// already written for an entry that stays (so hand-written explanations survive a re-bless).
fn bless(
    differences: &BTreeMap<String, String>,
    known: &BTreeMap<String, String>,
    valid_in_scope: usize,
) {
    let mut text = String::from(
        "# Valid JSON-Schema-Test-Suite instances (draft 2020-12 and draft 7, compact serialization)\n\
         # that callmask's grammar rejects, with the reason. Checked by tests/core/conformance.rs; at most\n\
         # 1% of the in-scope valid instances may be listed. Regenerate with\n\
         #   CALLMASK_BLESS=1 cargo test --release --test core conformance::\n\
         # (a re-bless keeps the reasons written here for entries that stay).\n\
         # Format: file :: case description :: test description :: reason\n",
    );
    text.push_str(&format!(
        "# {} of {valid_in_scope} in-scope valid instances.\n",
        differences.len()
    ));
    for (key, reason) in differences {
        let reason = known.get(key).unwrap_or(reason);
        text.push_str(&format!("{key} :: {reason}\n"));
    }
    std::fs::write(known_differences_path(), text).expect("writing the known-differences file");
    eprintln!(
        "blessed: wrote {} differences to {}",
        differences.len(),
        known_differences_path().display()
    );
}

/// One line: newlines and ` :: ` would break the file format.
fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ").replace(" :: ", " : ")
}

fn show(v: &Value) -> String {
    let s = serde_json::to_string(v).unwrap();
    if s.chars().count() > 200 {
        format!("{}...", s.chars().take(200).collect::<String>())
    } else {
        s
    }
}

#[test]
fn json_schema_test_suite_byte_level() {
    let cases = load_suite();
    let known = load_known_differences();
    let blessing = std::env::var_os("CALLMASK_BLESS").is_some_and(|v| v != "0" && !v.is_empty());

    let mut out_of_scope: BTreeMap<String, (usize, Vec<String>)> = BTreeMap::new();
    let mut panics = Vec::new();
    let mut false_accepts = Vec::new();
    let mut differences: BTreeMap<String, String> = BTreeMap::new();
    let (mut cases_in, mut valid_in, mut invalid_in) = (0usize, 0usize, 0usize);
    let mut per_draft: BTreeMap<&str, [usize; 4]> = BTreeMap::new(); // cases, in scope, valid, invalid
    let mut per_file: BTreeMap<String, [usize; 4]> = BTreeMap::new(); // the same, per file
    let mut slowest: Vec<(Duration, String)> = Vec::new();
    let total_instances: usize = cases.iter().map(|c| c.tests.len()).sum();
    let mut pretty_rejected = Vec::new();
    let mut ascii_rejected = Vec::new();
    let mut ascii_escaped_instances = 0usize;

    for case in &cases {
        let draft = case.file.split('/').next().unwrap();
        let counts = per_draft
            .entry(if draft == "draft7" {
                "draft7"
            } else {
                "draft2020-12"
            })
            .or_default();
        counts[0] += 1;
        per_file.entry(case.file.clone()).or_default()[0] += 1;
        let (compiled, elapsed) = compile(case);
        slowest.push((elapsed, format!("{} :: {}", case.file, case.description)));
        let grammar = match compiled {
            Compiled::InScope(g) => g,
            Compiled::OutOfScope(reason, message) => {
                let entry = out_of_scope.entry(reason).or_default();
                entry.0 += 1;
                entry
                    .1
                    .push(format!("{} :: {}: {message}", case.file, case.description));
                continue;
            }
            Compiled::Panicked(message) => {
                panics.push(format!(
                    "compile panicked: {} :: {} (schema {}): {message}",
                    case.file,
                    case.description,
                    show(&case.schema)
                ));
                continue;
            }
        };
        cases_in += 1;
        counts[1] += 1;
        let file_counts = per_file.entry(case.file.clone()).or_default();
        file_counts[1] += 1;
        file_counts[2] += case.tests.iter().filter(|t| t.valid).count();
        file_counts[3] += case.tests.iter().filter(|t| !t.valid).count();
        for test in &case.tests {
            let text = serde_json::to_string(&test.data).unwrap();
            let pretty = serde_json::to_string_pretty(&test.data).unwrap();
            let check =
                |t: &str| catch_unwind(AssertUnwindSafe(|| grammar.check_bytes(t.as_bytes())));
            let ascii = callmask::python::ensure_ascii(&text);
            ascii_escaped_instances += usize::from(ascii != text);
            let (result, pretty_ok, ascii_ok) = match (check(&text), check(&pretty), check(&ascii))
            {
                (Ok(r), Ok(p), Ok(a)) => (r, p.is_ok(), a.is_ok()),
                (Err(p), _, _) | (_, Err(p), _) | (_, _, Err(p)) => {
                    panics.push(format!(
                        "check_bytes panicked: {} on {text}: {}",
                        case.key(test),
                        panic_message(p)
                    ));
                    continue;
                }
            };
            if test.valid {
                valid_in += 1;
                counts[2] += 1;
                match result {
                    Err(rej) => {
                        differences.insert(
                            case.key(test),
                            one_line(&format!(
                                "rejected at byte {}: {} (instance {})",
                                rej.offset,
                                rej.reason,
                                show(&test.data)
                            )),
                        );
                    }
                    Ok(()) if !ascii_ok => {
                        ascii_rejected.push(format!("{}: {ascii}", case.key(test)))
                    }
                    Ok(()) if !pretty_ok => {
                        pretty_rejected.push(format!("{}: {pretty:?}", case.key(test)))
                    }
                    Ok(()) => {}
                }
            } else {
                invalid_in += 1;
                counts[3] += 1;
                if result.is_ok() || pretty_ok || ascii_ok {
                    false_accepts.push(format!(
                        "{}\n    schema:   {}\n    instance: {}",
                        case.key(test),
                        show(&case.schema),
                        if result.is_ok() {
                            &text
                        } else if pretty_ok {
                            &pretty
                        } else {
                            &ascii
                        }
                    ));
                }
            }
        }
    }

    // The report.
    eprintln!(
        "JSON-Schema-Test-Suite {}: {} cases, {total_instances} instances",
        testkit::SUITE_VERSION,
        cases.len()
    );
    for (draft, [n, in_scope, valid, invalid]) in &per_draft {
        eprintln!(
            "  {draft}: {in_scope} of {n} cases in scope; {valid} valid, {invalid} invalid instances"
        );
    }
    eprintln!("per file (cases in scope of all; valid, invalid instances of the cases in scope):");
    for (file, [n, in_scope, valid, invalid]) in &per_file {
        eprintln!("  {file}: {in_scope}/{n}; {valid} valid, {invalid} invalid");
    }
    eprintln!(
        "in scope: {cases_in} cases, {valid_in} valid instances, {invalid_in} invalid instances; \
         false accepts: {}; differences (valid rejected): {} ({:.2}% of valid); panics: {}",
        false_accepts.len(),
        differences.len(),
        100.0 * differences.len() as f64 / valid_in.max(1) as f64,
        panics.len()
    );
    eprintln!(
        "pretty-printed (serde_json, 2-space indent): {} valid instances accepted compact but \
         rejected pretty (invalid ones are checked pretty too)",
        pretty_rejected.len()
    );
    for p in pretty_rejected.iter().take(10) {
        eprintln!("  {p}");
    }
    eprintln!(
        "ASCII-escaped (as json.dumps writes them; {ascii_escaped_instances} instances differ from \
         the compact form): {} valid instances accepted compact but rejected ASCII-escaped",
        ascii_rejected.len()
    );
    eprintln!(
        "out of scope: {} cases",
        out_of_scope.values().map(|v| v.0).sum::<usize>()
    );
    for (reason, (n, examples)) in &out_of_scope {
        eprintln!("  {n:4}  {reason}");
        // All examples of the suspicious kinds, a couple of the others.
        let shown = if reason.contains("suspicious") || reason.starts_with("other") {
            examples.len()
        } else {
            2
        };
        for e in examples.iter().take(shown) {
            eprintln!("          {e}");
        }
    }
    slowest.sort_by_key(|s| std::cmp::Reverse(s.0));
    eprintln!("slowest compiles:");
    for (t, what) in slowest.iter().take(5) {
        eprintln!("  {:>10.3} ms  {what}", t.as_secs_f64() * 1e3);
    }

    let unlisted: Vec<String> = differences
        .iter()
        .filter(|(k, _)| !known.contains_key(*k))
        .map(|(k, r)| format!("{k} :: {r}"))
        .collect();
    let stale: Vec<&String> = known
        .keys()
        .filter(|k| !differences.contains_key(*k))
        .collect();
    if !stale.is_empty() {
        eprintln!(
            "note: {} known differences are now accepted (re-bless to drop them):",
            stale.len()
        );
        for k in &stale {
            eprintln!("  {k}");
        }
    }
    if blessing {
        bless(&differences, &known, valid_in);
    }

    let mut failures = Vec::new();
    if !false_accepts.is_empty() {
        failures.push(format!(
            "{} FALSE ACCEPTS (invalid instances accepted):\n  {}",
            false_accepts.len(),
            false_accepts.join("\n  ")
        ));
    }
    if !ascii_rejected.is_empty() {
        failures.push(format!(
            "{} valid instances accepted compact but rejected ASCII-escaped:\n  {}",
            ascii_rejected.len(),
            ascii_rejected.join("\n  ")
        ));
    }
    if !panics.is_empty() {
        failures.push(format!(
            "{} panics:\n  {}",
            panics.len(),
            panics.join("\n  ")
        ));
    }
    if !blessing && !unlisted.is_empty() {
        failures.push(format!(
            "{} valid instances rejected that tests/known-differences.txt does not list \
             (fix them, or re-bless with CALLMASK_BLESS=1):\n  {}",
            unlisted.len(),
            unlisted.join("\n  ")
        ));
    }
    let limit = (valid_in as f64 * MAX_DIFFERENCE_RATE).floor() as usize;
    if differences.len() > limit {
        failures.push(format!(
            "{} differences exceed 1% of the {valid_in} in-scope valid instances (limit {limit})",
            differences.len()
        ));
    }
    if cases_in == 0 {
        failures.push("no case is in scope".to_string());
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn json_schema_test_suite_token_level_llama3() {
    let cases = load_suite();
    let vocab = testkit::llama_vocab();
    let every: usize = std::env::var("CALLMASK_TOKEN_SAMPLE_EVERY")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&k| k > 0)
        .unwrap_or(1);

    let mut mismatches = Vec::new();
    let (mut sampled, mut instances, mut accepted, mut tokens_fed) =
        (0usize, 0usize, 0usize, 0usize);
    let started = Instant::now();
    let mut in_scope = 0usize;
    for case in &cases {
        let Compiled::InScope(grammar) = compile(case).0 else {
            continue;
        };
        in_scope += 1;
        if (in_scope - 1) % every != 0 {
            continue;
        }
        sampled += 1;
        let automaton = TokenAutomaton::new(&grammar, vocab.clone()).unwrap();
        for test in &case.tests {
            let compact = serde_json::to_string(&test.data).unwrap();
            let pretty = serde_json::to_string_pretty(&test.data).unwrap();
            let ascii = callmask::python::ensure_ascii(&compact);
            for text in [compact, pretty, ascii] {
                let bytes_ok = grammar.check_bytes(text.as_bytes()).is_ok();
                let tokens = vocab
                    .tokenize(&text)
                    .unwrap_or_else(|e| panic!("tokenizing {text:?}: {e}"));
                let mut matcher = automaton.matcher();
                let mut failed_at = None;
                for (k, &t) in tokens.iter().enumerate() {
                    if let Err(e) = matcher.accept(t) {
                        failed_at = Some((k, e));
                        break;
                    }
                    tokens_fed += 1;
                }
                let tokens_ok = failed_at.is_none() && matcher.can_end();
                instances += 1;
                accepted += usize::from(tokens_ok);
                if tokens_ok != bytes_ok {
                    let how = match &failed_at {
                        Some((k, e)) => format!("token {k} of {tokens:?} refused: {e}"),
                        None if !tokens_ok => format!("all of {tokens:?} accepted but cannot end"),
                        None => format!("all of {tokens:?} accepted and can end"),
                    };
                    mismatches.push(format!(
                        "{} (valid: {}): check_bytes {}, tokens {}: {how}\n    text: {text:?}",
                        case.key(test),
                        test.valid,
                        if bytes_ok { "accepts" } else { "rejects" },
                        if tokens_ok { "accept" } else { "reject" },
                    ));
                }
            }
        }
    }
    eprintln!(
        "token level (Llama 3.1): {sampled} of {in_scope} in-scope cases (every {every}), \
         {instances} texts (compact, pretty and ASCII-escaped; {accepted} accepted), {tokens_fed} tokens fed, {} mismatches, {:.1} s",
        mismatches.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(sampled > 0, "no in-scope case was sampled");
    assert!(
        mismatches.is_empty(),
        "{} instances where the token-level matcher and check_bytes disagree:\n  {}",
        mismatches.len(),
        mismatches.join("\n  ")
    );
}
