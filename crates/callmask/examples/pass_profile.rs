//! Per-step mask times of repeated passes over one output (a profiling driver; the comparison
//! with the peers is `cargo bench --bench suite`).
//!
//! ```text
//! CALLMASK_CACHE=.cache cargo run --release --example pass_profile -- hermes required 100 OUTPUT.txt 20
//! ```
//!
//! Arguments: dialect, tool choice, number of tools (`benches/tools/tools_N.json`) or a tools
//! file, a file with the output text, passes (default 20). Prints each step's fill in the first
//! pass (µs), its fastest fill over the passes, the second fill of the same state right after
//! it, and the token.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use callmask::{Dialect, DialectOptions, TokenAutomaton, TokenMask, Tools, Vocab};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dialect = Dialect::by_name(&args[0]).expect("dialect");
    let choice = args[1].parse().expect("tool choice");
    // A number of tools (`benches/tools/tools_N.json`) or a tools file's path (`*.json`).
    let tools_arg = &args[2];
    let output = std::fs::read_to_string(&args[3]).expect("output file");
    let passes: usize = args.get(4).map_or(20, |p| p.parse().expect("passes"));
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let tools_path = if tools_arg.ends_with(".json") {
        PathBuf::from(tools_arg)
    } else {
        root.join(format!("benches/tools/tools_{tools_arg}.json"))
    };
    let text = std::fs::read_to_string(tools_path).expect("the tools file");
    let cache = std::env::var_os("CALLMASK_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("../../.cache"));
    let vocab = Arc::new(
        Vocab::from_tokenizer_json(cache.join("tokenizers/llama3_1-3.7.2/tokenizer.json"))
            .expect("Llama 3.1 tokenizer.json"),
    );
    let mut opts = DialectOptions::default().tool_choice(choice);
    opts.compile.caches = Some(vocab.caches().clone());
    let tools = Tools::from_json_str(&text).expect("tools");
    let g = dialect.compile(&tools, &opts).expect("compile");
    let a = TokenAutomaton::new(&g, vocab.clone()).expect("automaton");
    let tokens = a.tokenize(&output).expect("tokenize");
    let mut mask = TokenMask::new(vocab.len());
    let mut cold = vec![0f64; tokens.len()];
    let mut first = vec![f64::MAX; tokens.len()];
    let mut second = vec![f64::MAX; tokens.len()];
    for pass in 0..passes {
        let mut m = a.matcher();
        for (i, &t) in tokens.iter().enumerate() {
            let t0 = Instant::now();
            m.fill_mask(&mut mask);
            let t1 = Instant::now();
            m.fill_mask(&mut mask);
            let t2 = Instant::now();
            if pass == 0 {
                cold[i] = (t1 - t0).as_secs_f64() * 1e6;
            }
            first[i] = first[i].min((t1 - t0).as_secs_f64() * 1e6);
            second[i] = second[i].min((t2 - t1).as_secs_f64() * 1e6);
            assert!(mask.is_allowed(t), "token #{i} not allowed");
            m.accept(t).expect("accept");
        }
    }
    for (i, &t) in tokens.iter().enumerate() {
        let s = String::from_utf8_lossy(&vocab.decode(&[t])).into_owned();
        println!(
            "{i:4} {:9.2} {:9.2} {:9.2} {s:?}",
            cold[i], first[i], second[i]
        );
    }
    let med = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "p50 first pass {:.2} µs, first {:.2} µs, second {:.2} µs",
        med(&cold),
        med(&first),
        med(&second)
    );
}
