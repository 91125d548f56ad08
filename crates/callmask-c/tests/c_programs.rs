//! The C programs in `tests/c/`, compiled with the system C compiler (`cc`, or `$CC`) against
//! `include/callmask.h` and the static library `libcallmask_c.a` that this build made:
//!
//! - `capi_test.c` walks a valid pythonic output (Llama 3.1 tokenizer) token by token and must
//!   agree with the Rust API at every step (the expected numbers are computed here, with
//!   `callmask` itself, and handed to the C program in a file); it also covers clone, rollback,
//!   validate, reset, batch masks, parsing and every error path. It runs under valgrind
//!   (memcheck, full leak check): any memory error or definite/indirect leak fails the test.
//!   Without valgrind installed the test fails, unless `CALLMASK_NO_VALGRIND=1`.
//! - `llama_generate.c` links the llama.cpp bundled in the static library and generates
//!   constrained tool calls from the default Gemma 3 270M GGUF with callmask's sampler in a
//!   llama.cpp chain with top-p, temperature and dist.
//!
//! Data: `$CALLMASK_CACHE` (see `scripts/fetch-data.sh`).

use callmask::parse::{Event, StreamParser};
use callmask::{Dialect, DialectOptions, TokenAutomaton, TokenMask, Tools, Vocab};
use serde_json::json;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn cache_dir() -> PathBuf {
    match std::env::var_os("CALLMASK_CACHE") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => repo().join(".cache"),
    }
}

fn require(path: PathBuf, dataset: &str) -> PathBuf {
    assert!(
        path.exists(),
        "{} not found: run `scripts/fetch-data.sh {dataset}` (or set CALLMASK_CACHE)",
        path.display()
    );
    path
}

/// The directory holding the `libcallmask_c.a` this test was built with: `target/<profile>/deps`
/// (cargo builds every crate type of the library there for its tests; `cargo build` then links
/// them to `target/<profile>`).
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe.parent().expect("target/<profile>/deps").to_path_buf();
    assert!(
        dir.join("libcallmask_c.a").exists(),
        "{} has no libcallmask_c.a",
        dir.display()
    );
    dir
}

/// Where the compiled C programs go (`target/<profile>/c-tests`).
fn out_dir() -> PathBuf {
    let d = lib_dir().join("../c-tests");
    std::fs::create_dir_all(&d).expect("create the C test output folder");
    d
}

/// Compiles `tests/c/NAME.c` against the header and the static library; returns the program.
fn compile(name: &str, extra_includes: &[PathBuf]) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let exe = out_dir().join(name);
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let mut cmd = Command::new(&cc);
    cmd.args([
        "-std=c11",
        "-D_POSIX_C_SOURCE=200809L",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-g",
        "-O1",
    ])
    .arg("-I")
    .arg(dir.join("include"));
    for inc in extra_includes {
        cmd.arg("-I").arg(inc);
    }
    cmd.arg(dir.join("tests/c").join(format!("{name}.c")))
        .arg(lib_dir().join("libcallmask_c.a"))
        // The native libraries the static library needs (`cargo rustc -p callmask-c
        // --crate-type staticlib -- --print native-static-libs`).
        .args([
            "-lstdc++",
            "-lgcc_s",
            "-lutil",
            "-lrt",
            "-lpthread",
            "-lm",
            "-ldl",
            "-lc",
        ])
        .arg("-o")
        .arg(&exe);
    let out = cmd.output().unwrap_or_else(|e| panic!("running {cc}: {e}"));
    assert!(
        out.status.success(),
        "{cc} failed on {name}.c:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// What the Rust API says along the output: per step the next token, the number of allowed
/// tokens, can_end and is_finished; the parse; the stream events after each token.
fn expected(vocab: &Arc<Vocab>, tools_path: &Path, text: &str) -> String {
    let tools = Tools::from_json_str(&std::fs::read_to_string(tools_path).unwrap()).unwrap();
    let options = DialectOptions::from_json(&json!({"tool_choice": "auto"})).unwrap();
    let grammar = Dialect::by_name("pythonic")
        .unwrap()
        .compile(&tools, &options)
        .unwrap();
    let automaton = TokenAutomaton::new(&grammar, vocab.clone()).unwrap();
    let mut tokens = automaton.tokenize(text).unwrap();
    let eot = vocab
        .special_token("<|eot_id|>")
        .expect("Llama 3.1 <|eot_id|>");
    tokens.push(eot);
    let mut m = automaton.matcher();
    let mut mask = TokenMask::new(vocab.len());
    let mut out = format!("tokens {}\n", tokens.len());
    for i in 0..=tokens.len() {
        m.fill_mask(&mut mask);
        let next = tokens.get(i).copied().unwrap_or(u32::MAX);
        writeln!(
            out,
            "step {next} {} {} {}",
            mask.count(),
            u8::from(m.can_end()),
            u8::from(m.is_finished())
        )
        .unwrap();
        if i < tokens.len() {
            m.accept(tokens[i]).unwrap();
        }
    }
    let parsed = grammar.parse(text).unwrap();
    writeln!(out, "parse {}", serde_json::to_string(&parsed).unwrap()).unwrap();
    // The documented event shapes of callmask_stream_parser_*.
    let ev = |events: Vec<Event>| {
        serde_json::Value::Array(
            events
                .into_iter()
                .map(|e| match e {
                    Event::Text(t) => json!({"type": "text", "text": t}),
                    Event::Reasoning(t) => json!({"type": "reasoning", "text": t}),
                    Event::CallStart { index, id, name } => {
                        json!({"type": "call_start", "index": index, "id": id, "name": name})
                    }
                    Event::Arguments { index, delta } => {
                        json!({"type": "arguments", "index": index, "delta": delta})
                    }
                    Event::CallId { index, id } => {
                        json!({"type": "call_id", "index": index, "id": id})
                    }
                    Event::CallEnd { index } => json!({"type": "call_end", "index": index}),
                })
                .collect(),
        )
        .to_string()
    };
    let mut sp = StreamParser::new(&grammar);
    for &t in &tokens[..tokens.len() - 1] {
        writeln!(out, "events {}", ev(sp.push_token(vocab, t).unwrap())).unwrap();
    }
    writeln!(out, "finish {}", ev(sp.finish().unwrap())).unwrap();
    out
}

#[test]
fn c_api_agrees_with_rust_under_valgrind() {
    let tokenizer = require(
        cache_dir().join("tokenizers/llama3_1-3.7.2/tokenizer.json"),
        "tokenizers",
    );
    let tools = repo().join("examples/tools/weather.json");
    let output = repo().join("examples/outputs/pythonic.txt");
    let text = std::fs::read_to_string(&output).unwrap();
    let vocab = Arc::new(Vocab::from_tokenizer_json(&tokenizer).unwrap());
    let expected_path = out_dir().join("capi_test.expected");
    std::fs::write(&expected_path, expected(&vocab, &tools, &text)).unwrap();

    let exe = compile("capi_test", &[]);
    let args = [&tokenizer, &tools, &output, &expected_path];
    let valgrind = Command::new("valgrind").arg("--version").output().is_ok();
    let skip_valgrind = std::env::var_os("CALLMASK_NO_VALGRIND").is_some();
    assert!(
        valgrind || skip_valgrind,
        "valgrind is not installed (scripts/setup.sh installs it; CALLMASK_NO_VALGRIND=1 runs \
         the C program without it)"
    );
    let mut cmd;
    if valgrind && !skip_valgrind {
        cmd = Command::new("valgrind");
        cmd.args([
            "--error-exitcode=99",
            "--leak-check=full",
            "--show-leak-kinds=definite,indirect",
            "--errors-for-leak-kinds=definite,indirect",
        ])
        .arg(&exe);
    } else {
        cmd = Command::new(&exe);
    }
    let out = cmd.args(args).output().expect("run capi_test");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    // valgrind's summary (its last lines).
    let tail: Vec<&str> = stderr.lines().rev().take(16).collect();
    for l in tail.iter().rev() {
        println!("{l}");
    }
    assert!(
        out.status.success(),
        "capi_test failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(stdout.contains("all C API checks passed"), "{stdout}");
    if valgrind && !skip_valgrind {
        assert!(
            stderr.contains("ERROR SUMMARY: 0 errors"),
            "valgrind reported errors:\n{stderr}"
        );
        assert!(
            stderr.contains("definitely lost: 0 bytes") || stderr.contains("no leaks are possible"),
            "valgrind reported leaks:\n{stderr}"
        );
    }
}

#[test]
fn c_program_generates_tool_calls_with_llama_cpp() {
    let model = require(
        cache_dir().join("gemma-1.0.0/gemma-3-270m-q4_k_m.gguf"),
        "gemma",
    );
    let llama_include = PathBuf::from(env!("CALLMASK_LLAMA_INCLUDE"));
    assert!(
        llama_include.join("llama.h").exists(),
        "no llama.h in {}",
        llama_include.display()
    );
    let exe = compile("llama_generate", &[llama_include]);
    let tools = repo().join("examples/tools/weather.json");
    let out = Command::new(&exe)
        .arg(&model)
        .arg(&tools)
        .output()
        .expect("run llama_generate");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "llama_generate failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("all generations finished, parsed and called"));
    assert_eq!(stdout.matches("\"tool_calls\":[{").count(), 3, "{stdout}");
}
