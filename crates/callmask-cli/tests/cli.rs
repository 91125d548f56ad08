//! The `callmask` binary as scripts use it: exit codes 0 (accepted / all valid), 1 (rejected /
//! violation), 2 (bad input or usage), the reported byte offsets, and reproducible fuzzing.

use callmask_testkit as testkit;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");

/// A scratch folder for one test.
fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("callmask-cli-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(dir: &Path, name: &str, content: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, content).unwrap();
    path
}

/// Runs `callmask args...` with `stdin` as its input.
fn run(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_callmask"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning callmask");
    // The binary may exit before reading (bad arguments): ignore a broken pipe.
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    child.wait_with_output().unwrap()
}

fn code(out: &Output) -> i32 {
    out.status.code().expect("exited normally")
}

fn show(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn tokenizer() -> String {
    testkit::llama_tokenizer().to_string_lossy().into_owned()
}

/// `check --schema S --tokenizer llama` on `text`.
fn check(schema: &Path, text: &str) -> Output {
    run(
        &[
            "check",
            "--schema",
            schema.to_str().unwrap(),
            "--tokenizer",
            &tokenizer(),
        ],
        text,
    )
}

const OBJ: &str = r#"{"type": "object", "properties": {"a": {"type": "integer"}, "b": {"enum": ["x", "yz"]}}, "required": ["a"], "additionalProperties": false}"#;

#[test]
fn check_accepts_the_bundled_example() {
    let schema = Path::new(EXAMPLES).join("weather.schema.json");
    let text = std::fs::read_to_string(Path::new(EXAMPLES).join("weather.json")).unwrap();
    let out = check(&schema, &text);
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("accepted"));

    let bad = std::fs::read_to_string(Path::new(EXAMPLES).join("weather-bad.json")).unwrap();
    let out = check(&schema, &bad);
    assert_eq!(code(&out), 1, "{}", show(&out));
    let offset = bad.find("kelvin").unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!("rejected at byte {offset}:")),
        "want the offset of `kelvin`, {offset}: {}",
        show(&out)
    );
}

#[test]
fn check_reports_the_first_rejected_byte() {
    let dir = scratch("offset");
    let schema = write(&dir, "s.json", OBJ);
    for (text, offset) in [
        (r#"{"a":x}"#, 5),
        (r#"{"a":12,"b":"yy"}"#, 14),
        (r#"{"a":1,"c":2}"#, 8),
        (r#"{"b":"x"}"#, 8), // `a` is required: `}` is the first impossible byte
        (r#"{"a":1"#, 6),    // complete so far, but cannot end
        (r#"{"a":1}}"#, 7),
        ("", 0),
    ] {
        let out = check(&schema, text);
        assert_eq!(code(&out), 1, "{text}: {}", show(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains(&format!("rejected at byte {offset}:")),
            "{text}: want offset {offset}: {}",
            show(&out)
        );
    }
    for text in [
        r#"{"a":1}"#,
        r#"{"b":"yz","a":-7}"#,
        r#"{"a": 1, "b": "x"}"#,
    ] {
        let out = check(&schema, text);
        assert_eq!(code(&out), 0, "{text}: {}", show(&out));
    }
}

#[test]
fn check_bad_input_exits_2() {
    let dir = scratch("bad");
    let tok = tokenizer();
    let missing = dir.join("does-not-exist.json");
    let not_json = write(&dir, "not-json.json", r#"{"type": "object",,}"#);
    let unsupported = write(
        &dir,
        "unsupported.json",
        r#"{"type": "array", "uniqueItems": true}"#,
    );
    let unknown_type = write(&dir, "strin.json", r#"{"type": "strin"}"#);
    let dangling = write(&dir, "dangling.json", r##"{"$ref": "#/$defs/nope"}"##);
    let deep = write(
        &dir,
        "deep.json",
        &format!("{}{{}}{}", "{\"items\":".repeat(10_000), "}".repeat(10_000)),
    );
    let good = write(&dir, "good.json", OBJ);
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "check",
                "--schema",
                missing.to_str().unwrap(),
                "--tokenizer",
                &tok,
            ],
            "does-not-exist.json",
        ),
        (
            vec![
                "check",
                "--schema",
                not_json.to_str().unwrap(),
                "--tokenizer",
                &tok,
            ],
            "invalid JSON",
        ),
        (
            vec![
                "check",
                "--schema",
                unsupported.to_str().unwrap(),
                "--tokenizer",
                &tok,
            ],
            "uniqueItems",
        ),
        (
            vec![
                "check",
                "--schema",
                unknown_type.to_str().unwrap(),
                "--tokenizer",
                &tok,
            ],
            "strin",
        ),
        (
            vec![
                "check",
                "--schema",
                dangling.to_str().unwrap(),
                "--tokenizer",
                &tok,
            ],
            "#/$defs/nope",
        ),
        (
            vec![
                "check",
                "--schema",
                deep.to_str().unwrap(),
                "--tokenizer",
                &tok,
            ],
            "JSON nesting depth",
        ),
        (
            vec![
                "check",
                "--schema",
                good.to_str().unwrap(),
                "--tokenizer",
                missing.to_str().unwrap(),
            ],
            "does-not-exist.json",
        ),
        (
            vec![
                "fuzz",
                "--schema",
                unsupported.to_str().unwrap(),
                "--tokenizer",
                &tok,
                "-n",
                "1",
            ],
            "uniqueItems",
        ),
    ];
    for (args, needle) in cases {
        let out = run(&args, r#"{"a":1}"#);
        assert_eq!(code(&out), 2, "{args:?}: {}", show(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.starts_with("error: ") && stderr.contains(needle),
            "{args:?}: want `error: ...{needle}...`: {}",
            show(&out)
        );
    }
    // Usage errors: no vocabulary, two vocabularies, unknown flag.
    let schema = good.to_str().unwrap();
    for args in [
        vec!["check", "--schema", schema],
        vec![
            "check",
            "--schema",
            schema,
            "--tokenizer",
            &tok,
            "--model",
            "m.gguf",
        ],
        vec!["check", "--schema", schema, "--tokenizer", &tok, "--nope"],
        vec!["frobnicate"],
    ] {
        let out = run(&args, "");
        assert_eq!(code(&out), 2, "{args:?}: {}", show(&out));
    }
}

/// Internal state never lives in the user's keyword space: a schema that spells what used to be
/// an internal marker keyword compiles like any unknown keyword (it used to panic, exit 101),
/// and both patterns of the `allOf` still hold.
#[test]
fn a_user_keyword_named_like_an_internal_one_is_just_a_keyword() {
    let dir = scratch("marker");
    let schema = write(
        &dir,
        "s.json",
        r#"{"type":"string","allOf":[{"x-callmask-allOf-strings":1,"pattern":"a"},{"pattern":"b"}]}"#,
    );
    let both = check(&schema, r#""ab""#);
    assert_eq!(code(&both), 0, "{}", show(&both));
    for text in [r#""a""#, r#""b""#] {
        let one = check(&schema, text);
        assert_eq!(code(&one), 1, "{text}: {}", show(&one));
    }
}

#[test]
fn lenient_mode_lists_what_it_drops() {
    let dir = scratch("lenient");
    let schema = write(
        &dir,
        "s.json",
        r#"{"type": "array", "items": {"type": "integer"}, "uniqueItems": true}"#,
    );
    let out = run(
        &[
            "check",
            "--schema",
            schema.to_str().unwrap(),
            "--tokenizer",
            &tokenizer(),
            "--lenient",
        ],
        "[1,1]",
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("uniqueItems"),
        "{}",
        show(&out)
    );
}

/// `--options` takes the options types' JSON (the same names as every binding), in line or from a
/// file; the flags are shorthands, and an option given both ways, or unknown, is refused.
#[test]
fn options_json_is_the_options_types_own() {
    let dir = scratch("options");
    let schema = write(&dir, "s.json", OBJ);
    let tools = PathBuf::from(format!("{EXAMPLES}/tools/weather.json"));
    let base = |extra: &[&str]| {
        let mut a = vec![
            "check".to_string(),
            "--schema".into(),
            schema.to_string_lossy().into_owned(),
            "--tokenizer".into(),
            tokenizer(),
        ];
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let go = |args: Vec<String>, text: &str| {
        run(&args.iter().map(String::as_str).collect::<Vec<_>>(), text)
    };
    let spaced = r#"{"a": 1}"#;
    assert_eq!(code(&go(base(&[]), spaced)), 0);
    let compact = go(base(&["--options", r#"{"max_whitespace": 0}"#]), spaced);
    assert_eq!(code(&compact), 1, "{}", show(&compact));
    let file = write(
        &dir,
        "o.json",
        r#"{"whitespace": "any", "max_whitespace": 0}"#,
    );
    let from_file = go(
        base(&["--options", &format!("@{}", file.display())]),
        spaced,
    );
    assert_eq!(code(&from_file), 1, "{}", show(&from_file));
    for (extra, needle) in [
        (
            vec![
                "--options",
                r#"{"max_whitespace": 0}"#,
                "--max-whitespace",
                "2",
            ],
            "give it once",
        ),
        (vec!["--options", r#"{"max_dept": 3}"#], "max_dept"),
        (vec!["--options", "[1]"], "JSON object"),
        (
            vec!["--options", r#"{"tool_choice": "auto"}"#],
            "tool_choice",
        ),
    ] {
        let out = go(base(&extra), spaced);
        assert_eq!(code(&out), 2, "{extra:?}: {}", show(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(needle),
            "{}",
            show(&out)
        );
    }
    // A dialect's options, with compile options beside them.
    let dialect = |options: &str| {
        vec![
            "check".to_string(),
            "--dialect".into(),
            "hermes".into(),
            "--tools".into(),
            tools.to_string_lossy().into_owned(),
            "--tokenizer".into(),
            tokenizer(),
            "--options".into(),
            options.into(),
        ]
    };
    let call = "<tool_call>\n{\"name\": \"get_current_weather\", \"arguments\": {\"location\": \"Oslo\"}}\n</tool_call>";
    assert_eq!(
        code(&go(dialect(r#"{"tool_choice": "required"}"#), call)),
        0
    );
    let none = go(
        dialect(r#"{"tool_choice": "none", "max_whitespace": 0}"#),
        call,
    );
    assert_eq!(code(&none), 1, "{}", show(&none));
}

/// Runs `fuzz` on `schema` and returns the `--out` lines.
fn fuzz(schema: &Path, n: usize, seed: u64, out_file: &Path) -> (Output, Vec<Value>) {
    let out = run(
        &[
            "fuzz",
            "--schema",
            schema.to_str().unwrap(),
            "--tokenizer",
            &tokenizer(),
            "-n",
            &n.to_string(),
            "--seed",
            &seed.to_string(),
            "--max-tokens",
            "256",
            "--out",
            out_file.to_str().unwrap(),
        ],
        "",
    );
    let lines = std::fs::read_to_string(out_file)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("each --out line is JSON"))
        .collect();
    (out, lines)
}

#[test]
fn fuzz_outputs_are_valid_and_reproducible() {
    let dir = scratch("fuzz");
    let schema_path = Path::new(EXAMPLES).join("weather.schema.json");
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(&schema_path).unwrap()).unwrap();
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap();

    let (out1, lines1) = fuzz(&schema_path, 40, 7, &dir.join("a.jsonl"));
    assert_eq!(code(&out1), 0, "{}", show(&out1));
    assert_eq!(lines1.len(), 40);
    let stderr = String::from_utf8_lossy(&out1.stderr);
    assert!(stderr.contains("40 outputs"), "summary: {stderr}");

    let mut finished = 0;
    for line in &lines1 {
        let text = line["text"].as_str().expect("text");
        assert!(line["tokens"].is_array());
        if line["finished"] == json!(true) {
            finished += 1;
            assert_eq!(line["valid"], json!(true), "{line}");
            let value: Value = serde_json::from_str(text).expect("finished output is JSON");
            assert!(validator.is_valid(&value), "invalid output: {text}");
        }
    }
    assert!(finished > 0, "no output finished: {stderr}");

    // Same seed, same outputs; another seed, other outputs.
    let (out2, lines2) = fuzz(&schema_path, 40, 7, &dir.join("b.jsonl"));
    assert_eq!(code(&out2), 0, "{}", show(&out2));
    assert_eq!(lines1, lines2, "same seed, different outputs");
    let (out3, lines3) = fuzz(&schema_path, 40, 8, &dir.join("c.jsonl"));
    assert_eq!(code(&out3), 0, "{}", show(&out3));
    assert_ne!(lines1, lines3, "another seed, same outputs");
}

#[test]
fn fuzz_tokens_replay_through_check() {
    // What fuzz draws, check accepts (when it finished).
    let dir = scratch("replay");
    let schema = write(&dir, "s.json", OBJ);
    let (out, lines) = fuzz(&schema, 10, 3, &dir.join("o.jsonl"));
    assert_eq!(code(&out), 0, "{}", show(&out));
    for line in lines.iter().filter(|l| l["finished"] == json!(true)) {
        let text = line["text"].as_str().unwrap();
        let out = check(&schema, text);
        assert_eq!(code(&out), 0, "fuzz drew {text:?}: {}", show(&out));
    }
}

#[cfg(feature = "llama")]
#[test]
fn check_with_a_gguf_vocabulary() {
    let gguf = testkit::require(
        testkit::cache_dir()
            .join("gemma-1.0.0")
            .join("gemma-3-270m-q4_k_m.gguf"),
        "the Gemma 3 270M GGUF",
        "gemma",
    );
    let dir = scratch("gguf");
    let schema = write(&dir, "s.json", OBJ);
    let model = gguf.to_str().unwrap();
    let args = [
        "check",
        "--schema",
        schema.to_str().unwrap(),
        "--model",
        model,
    ];
    let out = run(&args, r#"{"a": 42, "b": "yz"}"#);
    assert_eq!(code(&out), 0, "{}", show(&out));
    let out = run(&args, r#"{"a": "42"}"#);
    assert_eq!(code(&out), 1, "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("rejected at byte 6:"),
        "{}",
        show(&out)
    );
}

/// SmolLM2-Instruct's own vocabulary (its GGUF, `scripts/fetch-data.sh smollm2`) with the
/// `smollm2` dialect: the trained answer is accepted, prose and Hermes' form refused, `--model
/// smollm2` names the cached file, and fuzzed calls validate.
#[cfg(feature = "llama")]
#[test]
fn smollm2_on_its_own_vocabulary() {
    let gguf = testkit::smollm2_gguf().to_string_lossy().into_owned();
    let mut args: Vec<String> = vec!["check".into()];
    args.extend(dialect_args("smollm2"));
    args.extend(["--model".into(), gguf.clone()]);
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    for (text, want) in [
        (
            "<tool_call>[{\"name\": \"get_stock_price\", \"arguments\": {\"ticker\": \"NVDA\"}}]</tool_call>",
            0,
        ),
        ("<tool_call>[]</tool_call>", 0),
        ("To call a function, you would need to provide the ticker.", 1),
        (
            "<tool_call>\n{\"name\": \"get_time_utc\", \"arguments\": {}}\n</tool_call>",
            1,
        ),
    ] {
        let out = run(&argv, text);
        assert_eq!(code(&out), want, "{text}: {}", show(&out));
    }
    // The name instead of the path: the cached file (no download where it is cached).
    let mut named = args.clone();
    let at = named.len() - 1;
    named[at] = "smollm2".into();
    let out = Command::new(env!("CARGO_BIN_EXE_callmask"))
        .args(&named)
        .env("CALLMASK_CACHE", testkit::cache_dir())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    // Empty input: rejected (exit 1), not a usage error (2): the vocabulary loaded.
    assert_eq!(code(&out), 1, "{}", show(&out));
    let mut args: Vec<String> = vec!["fuzz".into()];
    args.extend(dialect_args("smollm2"));
    args.extend(
        [
            "--model",
            &gguf,
            "-n",
            "100",
            "--seed",
            "5",
            "--tool-choice",
            "required",
        ]
        .map(String::from),
    );
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run(&argv, "");
    assert_eq!(code(&out), 0, "{}", show(&out));
}

/// `--dialect D --tools mixed.json` flags.
fn dialect_args(d: &str) -> Vec<String> {
    vec![
        "--dialect".into(),
        d.into(),
        "--tools".into(),
        format!("{EXAMPLES}/tools/mixed.json"),
    ]
}

/// Fuzzes every dialect on Llama 3.1 (thousands of outputs each) and on Gemma 3, each output
/// parsed and its arguments validated with the jsonschema crate by the binary; zero violations.
#[test]
fn fuzz_every_dialect_with_validation() {
    let gemma = testkit::gemma_gguf().to_string_lossy().into_owned();
    // How each dialect gets to its calls: forced by tool_choice, or by a prefix when free text
    // comes first (a uniform walk over 128k tokens rarely writes a marker by chance).
    let plans: [(&str, &[&str]); 6] = [
        ("empower", &["--tool-choice", "required"]),
        ("functools", &["--prefix", "functools["]),
        ("pythonic", &["--tool-choice", "required"]),
        ("inline", &["--prefix", "Sure. <FUNCTION_CALL>"]),
        ("hermes", &["--prefix", "<tool_call>"]),
        ("llama31_json", &["--tool-choice", "required"]),
    ];
    for (d, extra) in plans {
        for (vocab_flag, vocab, n) in [
            ("--tokenizer", tokenizer(), "2000"),
            ("--model", gemma.clone(), "300"),
        ] {
            let mut args: Vec<String> = vec!["fuzz".into()];
            args.extend(dialect_args(d));
            args.extend([vocab_flag.into(), vocab, "-n".into(), n.into()]);
            args.extend(
                [
                    "--seed",
                    "7",
                    "--max-tokens",
                    "600",
                    "--max-whitespace",
                    "1",
                    "--end-bias",
                    "0.3",
                ]
                .map(String::from),
            );
            args.extend(extra.iter().map(|s| s.to_string()));
            let argv: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = run(&argv, "");
            assert_eq!(code(&out), 0, "{d}: {}", show(&out));
            let err = String::from_utf8_lossy(&out.stderr);
            // "fuzz: N outputs, D distinct, U unfinished, ..."
            let nums: Vec<usize> = err
                .split(|c: char| !c.is_ascii_digit())
                .filter_map(|w| w.parse().ok())
                .collect();
            let (outputs, unfinished) = (nums[0], nums[2]);
            assert_eq!(outputs.to_string(), n);
            assert!(
                unfinished * 2 < outputs,
                "{d}: too few complete outputs to mean anything: {err}"
            );
        }
    }
}

#[test]
fn dialect_check_parse_and_prompt() {
    let tok = tokenizer();
    let mut args = vec!["check".to_string()];
    args.extend(dialect_args("pythonic"));
    args.extend(["--tokenizer".into(), tok.clone()]);
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run(
        &argv,
        "<|python_tag|>[get_user_info(user_id=7890, special='black')]",
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
    let out = run(&argv, "[get_user_info(user_id='7890')]");
    assert_eq!(code(&out), 1, "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("rejected at byte 23"),
        "{}",
        show(&out)
    );

    let mut args = vec!["parse".to_string()];
    args.extend(dialect_args("empower"));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run(
        &argv,
        r#"<f>[{"name": "get_current_weather", "arguments": "{\"location\": \"Paris\"}"}]"#,
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["tool_calls"][0]["function"]["name"],
        "get_current_weather"
    );
    assert_eq!(
        v["tool_calls"][0]["function"]["arguments"],
        r#"{"location":"Paris"}"#
    );
    assert_eq!(v["tool_calls"][0]["type"], "function");
    let out = run(&argv, r#"<f>[{"name": "nope", "arguments": "{}"}]"#);
    assert_eq!(code(&out), 1, "{}", show(&out));

    // --recover: an output whose list the model left open is read, and the liberty reported.
    let open = r#"<f>[{"name": "get_current_weather", "arguments": "{\"location\": \"Paris\"}"}"#;
    assert_eq!(code(&run(&argv, open)), 1);
    let mut args = argv.clone();
    args.push("--recover");
    let out = run(&args, open);
    assert_eq!(code(&out), 0, "{}", show(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["tool_calls"][0]["function"]["arguments"],
        r#"{"location":"Paris"}"#
    );
    assert_eq!(v["recovered"][0]["kind"], "closed", "{v}");
    assert_eq!(v["recovered"][0]["appended"], "]", "{v}");

    // Bad input: unknown dialect, malformed tools.
    let dir = scratch("dialect_bad");
    let bad_tools = write(&dir, "tools.json", r#"[{"description": "no name"}]"#);
    let out = run(
        &[
            "parse",
            "--dialect",
            "nope",
            "--tools",
            &format!("{EXAMPLES}/tools/mixed.json"),
        ],
        "",
    );
    assert_eq!(code(&out), 2, "{}", show(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown dialect"));
    let out = run(
        &[
            "parse",
            "--dialect",
            "pythonic",
            "--tools",
            bad_tools.to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(code(&out), 2, "{}", show(&out));

    // The prompt of each built-in dialect.
    let messages = write(
        &dir,
        "messages.json",
        &json!([{"role": "user", "content": "How's the weather in San Francisco?"}]).to_string(),
    );
    for (d, marker) in [
        ("empower", "<u>How's the weather in San Francisco?"),
        ("functools", "functools["),
        ("pythonic", "[func_name1(params_name1=params_value1"),
        ("inline", "<FUNCTION_CALL>"),
    ] {
        let out = run(
            &[
                "prompt",
                "--dialect",
                d,
                "--tools",
                &format!("{EXAMPLES}/tools/mixed.json"),
                "--messages",
                messages.to_str().unwrap(),
                "--datetime",
                "2024-09-24",
            ],
            "",
        );
        assert_eq!(code(&out), 0, "{d}: {}", show(&out));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(marker), "{d}: {text}");
        assert!(text.contains("get_stock_price"), "{d}: {text}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// `fuzz --accept`: known-good call sets are written in each dialect and accepted; the bad ones
/// are reported with the byte offset of the first refused byte.
#[test]
fn fuzz_accept_reports_what_the_grammar_rejects() {
    let calls = format!("{EXAMPLES}/calls/mixed.jsonl");
    let before_the_table = testkit::DIALECTS_BEFORE_THE_TABLE;
    for &d in callmask::prompt::BUILTIN_DIALECTS
        .iter()
        .filter(|d| before_the_table.contains(d))
    {
        // Llama 4's writer writes <|python_start|>, a special token Llama 3.1 lacks: there its
        // spelling is text, a plain reply, which the dialect allows.
        if d == "llama4" {
            continue;
        }
        let mut args = vec!["fuzz".to_string()];
        args.extend(dialect_args(d));
        // gpt-oss needs its own special tokens (<|channel|>, ...).
        let vocab = if d == "gpt_oss" {
            testkit::require(
                testkit::cache_dir().join(format!(
                    "tokenizers/gptoss-{}/tokenizer.json",
                    testkit::LLAMA_VERSION
                )),
                "the gpt-oss tokenizer",
                "tokenizers",
            )
            .to_string_lossy()
            .into_owned()
        } else {
            tokenizer()
        };
        args.extend([
            "--tokenizer".into(),
            vocab,
            "--accept".into(),
            calls.clone(),
        ]);
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run(&argv, "");
        assert_eq!(code(&out), 1, "{d}: {}", show(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let rejected: Vec<&str> = stdout
            .lines()
            .filter(|l| l.contains("mixed.jsonl:"))
            .collect();
        // Lines 5-7: lowercase ticker (pattern), unknown enum value, unknown function; line 3
        // has two calls, which llama31_json (one call) refuses.
        let mut expected = vec![5, 6, 7];
        // Line 3 has two calls: dialects whose model makes one call per turn refuse it.
        if d == "llama31_json" || d == "gpt_oss" {
            expected.insert(0, 3);
        }
        let lines: Vec<usize> = rejected
            .iter()
            .map(|l| l.split(':').nth(1).unwrap().parse().unwrap())
            .collect();
        assert_eq!(lines, expected, "{d}: {stdout}");
        for (line, culprit) in [(5, "nvda"), (6, "kelvin"), (7, "send_email")] {
            let report = rejected
                .iter()
                .find(|l| l.contains(&format!("mixed.jsonl:{line}:")))
                .unwrap();
            // The refused token, without the punctuation it may carry before the culprit
            // (Kimi's `functions.` + name is tokenized `.send`).
            let token = report
                .split('"')
                .nth(1)
                .unwrap_or_default()
                .trim_start_matches(|c: char| !c.is_alphanumeric());
            assert!(
                !token.is_empty() && culprit.starts_with(token),
                "{d}: line {line} should be refused at {culprit:?}: {report}"
            );
        }
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!(
                "accept: 7 call sets, {} accepted",
                7 - expected.len()
            )),
            "{d}: {err}"
        );
    }
}

/// `callmask bench` measures a user's grammar and prints the table.
#[test]
fn bench_reports_every_measure() {
    let mut args = vec!["bench".to_string()];
    args.extend(dialect_args("functools"));
    args.extend(
        [
            "--tokenizer",
            &tokenizer(),
            "--compiles",
            "2",
            "--outputs",
            "3",
            "--passes",
            "2",
        ]
        .map(String::from),
    );
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run(&argv, "");
    assert_eq!(code(&out), 0, "{}", show(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    for row in [
        "| vocabulary | 128256 tokens",
        "| compile, cold caches (ms) | p50 ",
        "| compile, warm caches (ms) | p50 ",
        "| mask per token, warm (µs) | p50 ",
        "| memory | grammar ",
        "| fuzz (1 thread) | ",
    ] {
        assert!(stdout.contains(row), "missing {row:?}: {stdout}");
    }
    assert!(stdout.contains("of 3 outputs"), "{stdout}");
}

/// `--structural-tag`: check, parse and fuzz a vLLM Hermes tag on Llama 3.1; a format callmask
/// does not compile and a malformed tag are bad input (exit 2) naming the cause.
#[test]
fn structural_tag_check_parse_fuzz() {
    let tag = format!("{EXAMPLES}/structural_tags/hermes_required.json");
    let tok = tokenizer();
    let call = "<tool_call>\n{\"name\": \"get_current_weather\", \"arguments\": {\"location\": \"Oslo\"}}\n</tool_call>";
    let base = [
        "--structural-tag",
        tag.as_str(),
        "--tokenizer",
        tok.as_str(),
    ];
    let out = run(&[&["check"][..], &base].concat(), call);
    assert_eq!(code(&out), 0, "{}", show(&out));
    let out = run(
        &[&["check"][..], &base].concat(),
        &call.replace("Oslo\"", "Oslo\", \"x\": 1"),
    );
    assert_eq!(code(&out), 1, "{}", show(&out));
    let out = run(&["parse", "--structural-tag", &tag], call);
    assert_eq!(code(&out), 0, "{}", show(&out));
    let parsed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        parsed["tool_calls"][0]["function"]["name"],
        "get_current_weather"
    );
    let out = run(
        &[
            &["fuzz"][..],
            &base,
            &["-n", "60", "--seed", "2", "--jobs", "1"],
        ]
        .concat(),
        "",
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("valid outputs: 60"), "{err}");

    let dir = scratch("stag");
    let grammar = write(
        &dir,
        "grammar.json",
        r#"{"type": "structural_tag", "format": {"type": "grammar", "grammar": "root ::= \"a\""}}"#,
    );
    let out = run(
        &[
            "check",
            "--structural-tag",
            grammar.to_str().unwrap(),
            "--tokenizer",
            &tok,
        ],
        "a",
    );
    assert_eq!(code(&out), 2, "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("`grammar` is not supported"),
        "{}",
        show(&out)
    );
    let bad = write(
        &dir,
        "bad.json",
        r#"{"type": "structural_tag", "format": {"type": "tag", "begin": "<a>"}}"#,
    );
    let out = run(&["parse", "--structural-tag", bad.to_str().unwrap()], "");
    assert_eq!(code(&out), 2, "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("missing `end`"),
        "{}",
        show(&out)
    );
}

/// `--whitespace any` restores the old policy, under which a blank line inside JSON passes.
#[test]
fn whitespace_policy_flag() {
    let dir = scratch("ws");
    let schema = write(&dir, "s.json", OBJ);
    let text = "{\n\n  \"a\": 1\n}";
    let out = check(&schema, text);
    assert_eq!(code(&out), 1, "{}", show(&out));
    let out = run(
        &[
            "check",
            "--schema",
            schema.to_str().unwrap(),
            "--tokenizer",
            &tokenizer(),
            "--whitespace",
            "any",
        ],
        text,
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
}

/// The table of dialects in `docs/dialects.md` is `callmask dialects --markdown`: it cannot
/// drift from the dialect table.
#[test]
fn docs_list_the_dialect_table() {
    let out = run(&["dialects", "--markdown"], "");
    assert_eq!(code(&out), 0, "{}", show(&out));
    let table = String::from_utf8_lossy(&out.stdout);
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/dialects.md"
    ))
    .unwrap();
    assert!(
        page.contains(table.as_ref()),
        "docs/dialects.md's dialect table differs from `callmask dialects --markdown`:\n{table}"
    );
}

/// The `--dialect` help of every subcommand that takes it points at `callmask dialects` (which
/// lists the built-in dialects from the dialect table) instead of listing the names, and
/// `callmask dialects --names` lists them all.
#[test]
fn every_dialect_flag_points_at_callmask_dialects() {
    let names = run(&["dialects", "--names"], "");
    let names = String::from_utf8_lossy(&names.stdout).into_owned();
    assert!(names.lines().count() > 20, "too few dialects:\n{names}");
    for n in ["hermes", "pythonic", "qwen3", "gpt_oss"] {
        assert!(
            names.lines().any(|l| l == n),
            "`dialects --names` misses {n}"
        );
    }
    for sub in ["check", "parse", "fuzz", "generate", "bench", "prompt"] {
        let help = run(&[sub, "--help"], "");
        assert!(help.status.success(), "{sub} --help failed");
        let help = String::from_utf8_lossy(&help.stdout);
        assert!(
            help.contains("callmask dialects"),
            "`callmask {sub} --help` does not name `callmask dialects`:\n{help}"
        );
        assert!(
            !help.contains("qwen3_coder"),
            "`callmask {sub} --help` lists the dialects' names again"
        );
    }
}

/// A reader that stops early (`callmask parse < reply.txt | head -c 16`) ends the command
/// quietly with the shell's broken-pipe status, never a panic report. The reply is far larger
/// than a pipe's buffer, so the write is still under way when the reader goes.
#[test]
fn a_closed_stdout_ends_quietly() {
    use std::io::Read;
    let mut child = Command::new(env!("CARGO_BIN_EXE_callmask"))
        .args([
            "parse",
            "--dialect",
            "hermes",
            "--tools",
            &format!("{EXAMPLES}/tools/mixed.json"),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning callmask");
    let reply = "Plain words and nothing else. ".repeat(40_000);
    child
        .stdin
        .take()
        .unwrap()
        .write_all(reply.as_bytes())
        .unwrap();
    let mut first = [0u8; 16];
    child
        .stdout
        .as_mut()
        .unwrap()
        .read_exact(&mut first)
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(141), "{stderr}");
}

/// The same for standard error (`callmask fuzz ... 2>&1 | head -c 10`): a reader of stderr that
/// goes before the summary is written ends the command quietly, never with a panic report.
#[test]
fn a_closed_stderr_ends_quietly() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_callmask"))
        .args([
            "fuzz",
            "--schema",
            &format!("{EXAMPLES}/weather.schema.json"),
        ])
        .arg("--tokenizer")
        .arg(testkit::llama_tokenizer())
        .args(["-n", "3000", "--seed", "1"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning callmask");
    drop(child.stderr.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(141));
}

/// `dialects --from-template` prints a dialect file derived from a chat template that no
/// built-in dialect matches; the file, used as `--dialect`, reads the template's calls; a
/// template in no layout callmask knows is refused (exit 2) saying what it writes.
#[test]
fn dialects_from_template_derives_a_file_that_parses_the_calls() {
    let template = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../callmask-py/tests/data/fn_call_template.jinja"
    );
    let out = run(&["dialects", "--from-template", template], "");
    assert_eq!(code(&out), 0, "{}", show(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains("@call(") && text.contains("<fn_call>"),
        "{text}"
    );
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("derived: the name, then the arguments as a JSON object"));
    let dir = std::env::temp_dir().join(format!("callmask-derived-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("derived.gbnf");
    std::fs::write(&file, &text).unwrap();
    let call = "Let me look.\n<fn_call>get_current_weather\n{\"location\": \"Paris\"}</fn_call>";
    let out = run(
        &[
            "parse",
            "--dialect",
            file.to_str().unwrap(),
            "--tools",
            &format!("{EXAMPLES}/tools/weather.json"),
        ],
        call,
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
    let parsed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        parsed["tool_calls"][0]["function"]["name"],
        "get_current_weather"
    );
    assert_eq!(parsed["text"], "Let me look.");
    // Arguments as `key IS value` text: no builtin writes them.
    let odd = dir.join("odd.jinja");
    std::fs::write(
        &odd,
        "{% for m in messages %}{% for c in m.tool_calls %}CALL {{ c.function.name }} WITH \
         {% for k, v in c.function.arguments.items() %}{{ k }} IS {{ v }}; {% endfor %}\
         {% endfor %}{{ m.content }}{% endfor %}",
    )
    .unwrap();
    let out = run(&["dialects", "--from-template", odd.to_str().unwrap()], "");
    assert_eq!(code(&out), 2, "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no layout callmask knows"),
        "{}",
        show(&out)
    );
    std::fs::remove_dir_all(&dir).ok();
}
