//! Replays every input under `fuzz/regressions/<target>/` (crashes the fuzzers found, and seeds)
//! through the same code as the cargo-fuzz targets (`fuzz/fuzz_targets/common.rs`).

// The one `#[path]` include left: `fuzz/` is a workspace of its own (cargo-fuzz, nightly), whose
// targets cannot depend on the testkit (it pulls in llama.cpp), so the bodies are included here.
#[allow(dead_code)]
#[path = "../../../../fuzz/fuzz_targets/common.rs"]
mod common;

use std::path::Path;

fn replay(target: &str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/regressions")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(
        !files.is_empty(),
        "no regression inputs in {}",
        dir.display()
    );
    for f in &files {
        let data = std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        eprintln!("{target}: {}", f.display());
        common::run(target, &data);
    }
}

#[test]
fn every_target_has_a_regression_folder() {
    for t in common::TARGETS {
        assert!(Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fuzz/regressions")
            .join(t)
            .is_dir());
    }
}

#[test]
fn schema_compile() {
    replay("schema_compile");
}

#[test]
fn dialect_file() {
    replay("dialect_file");
}

#[test]
fn matcher_tokens() {
    replay("matcher_tokens");
}

#[test]
fn output_parser() {
    replay("output_parser");
}
