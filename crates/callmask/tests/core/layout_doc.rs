//! The `## Layout` section of `docs/architecture.md` matches the tree: every crate, every `src/**/*.rs` file of
//! every crate and every entry of `scripts/` has a line, and every line names something that
//! exists. A file added or moved without its line fails here, naming it.
//!
//! The section is a code block of entries, one a line: a top-level entry starts in column 0
//! (`crates/callmask/`, `scripts/`, `.ci/run`), an entry inside the last top-level folder is
//! indented by two spaces (`  src/mask.rs`, `  fuzz.sh`); each entry's first word is its path,
//! the rest of the line its purpose. Lines indented further continue the purpose.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The workspace root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The code block of the `## Layout` section of `readme`.
fn layout_block(readme: &str) -> &str {
    let section = readme
        .split("\n## Layout\n")
        .nth(1)
        .expect("docs/architecture.md has a `## Layout` section");
    let section = section.split("\n## ").next().unwrap_or(section);
    let start = section
        .find("\n```text\n")
        .expect("a text block in the Layout section")
        + 9;
    let len = section[start..]
        .find("\n```")
        .expect("the Layout code block ends");
    &section[start..start + len]
}

/// The paths the layout block lists, relative to the workspace root (folders end in `/`).
fn listed(block: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut folder = String::new();
    for line in block.lines() {
        let Some(word) = line.split_whitespace().next() else {
            continue;
        };
        if !line.starts_with(' ') {
            folder = if word.ends_with('/') {
                word.to_string()
            } else {
                String::new()
            };
            out.push(word.to_string());
        } else if line.starts_with("  ") && !line.starts_with("   ") {
            out.push(format!("{folder}{word}"));
        }
    }
    out
}

/// Every `.rs` file below `dir`, relative to `base`.
fn rust_files(dir: &Path, base: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, base, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(
                p.strip_prefix(base)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/"),
            );
        }
    }
}

/// What the layout must list: each crate folder, each `src/**/*.rs` of each crate, each entry
/// of `scripts/` (folders with a `/`).
fn required(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(root.join("crates")).unwrap() {
        let p = e.unwrap().path();
        if p.join("Cargo.toml").exists() {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            out.push(format!("crates/{name}/"));
            rust_files(&p.join("src"), root, &mut out);
        }
    }
    for e in std::fs::read_dir(root.join("scripts")).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        out.push(format!(
            "scripts/{name}{}",
            if p.is_dir() { "/" } else { "" }
        ));
    }
    out.sort();
    out
}

/// The required paths the layout misses, and the listed paths that do not exist.
fn compare(
    listed: &[String],
    required: &[String],
    exists: impl Fn(&str) -> bool,
) -> (Vec<String>, Vec<String>) {
    let have: BTreeSet<&str> = listed.iter().map(|s| s.as_str()).collect();
    let missing = required
        .iter()
        .filter(|r| !have.contains(r.as_str()))
        .cloned()
        .collect();
    let extra = listed.iter().filter(|l| !exists(l)).cloned().collect();
    (missing, extra)
}

#[test]
fn layout_doc_matches_the_tree() {
    let root = root();
    let readme = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let listed = listed(layout_block(&readme));
    let required = required(&root);
    assert!(
        required.len() > 60,
        "found only {} files: is the scan broken?",
        required.len()
    );
    let (missing, extra) = compare(&listed, &required, |p| root.join(p).exists());
    let mut problems = Vec::new();
    if !missing.is_empty() {
        problems.push(format!(
            "docs/architecture.md's Layout section misses (add a line each):\n  {}",
            missing.join("\n  ")
        ));
    }
    if !extra.is_empty() {
        problems.push(format!(
            "docs/architecture.md's Layout section lists what is not in the tree:\n  {}",
            extra.join("\n  ")
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_layout_check_sees_a_missing_and_an_extra_file() {
    let readme = "x\n## Layout\n\ntext\n\n```text\ncrates/a/      the crate\n  src/lib.rs   root\n               more words\n  src/gone.rs  moved\nscripts/\n  t.sh         tests\n```\n\n## Next\n";
    let listed = listed(layout_block(readme));
    assert_eq!(
        listed,
        [
            "crates/a/",
            "crates/a/src/lib.rs",
            "crates/a/src/gone.rs",
            "scripts/",
            "scripts/t.sh"
        ]
    );
    let required: Vec<String> = ["crates/a/", "crates/a/src/lib.rs", "crates/a/src/new.rs"]
        .map(String::from)
        .to_vec();
    let (missing, extra) = compare(&listed, &required, |p| !p.ends_with("gone.rs"));
    assert_eq!(missing, ["crates/a/src/new.rs"]);
    assert_eq!(extra, ["crates/a/src/gone.rs"]);
}
