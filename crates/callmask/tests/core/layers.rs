//! The core's modules form layers, and no module imports one above it (the table in the crate
//! docs). This test reads the sources and fails on any `crate::` path that reaches up or sideways
//! into a layer that is not below, so the graph stays acyclic as code moves.

use std::path::Path;

/// Each module's layer; a module may use only modules of a lower layer (and itself).
/// Keep in step with the table in `src/lib.rs`.
const LAYERS: &[(&str, u8)] = &[
    ("error", 0),
    ("json_text", 1),
    ("python", 0),
    ("cache", 0),
    ("setters", 0),
    ("tools", 2),
    ("formats", 2),
    ("vocab", 2),
    ("grammar", 3),
    ("schema", 4),
    ("automaton", 4),
    ("dialect", 5),
    ("parse", 5),
    ("prompt", 5),
    ("mask", 6),
    ("derive", 6),
    ("fuzz", 7),
];

fn layer(module: &str) -> Option<u8> {
    LAYERS.iter().find(|(m, _)| *m == module).map(|(_, l)| *l)
}

/// The code of each line of a source file, comments cut off.
fn code_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .map(str::trim_start)
        .filter(|code| !code.starts_with("//"))
        .map(|code| code.split("//").next().unwrap_or(""))
}

/// The `crate::` paths a source file uses (comments skipped), by first segment; `"<root>"` for
/// root re-exports (`crate::{..}`, `crate::Name`, `crate::some_macro!`).
fn crate_paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for code in code_lines(text) {
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            let after = &rest[i + "crate::".len()..];
            let seg: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            // `crate::some_macro!`: a macro exported at the root, which hides its module.
            let root_macro = after[seg.len()..].starts_with('!');
            if root_macro || seg.is_empty() || seg.chars().next().unwrap().is_ascii_uppercase() {
                out.push("<root>".to_string());
            } else {
                out.push(seg);
            }
            rest = after;
        }
    }
    out
}

fn visit(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            visit(&p, files);
        } else if p.extension().is_some_and(|x| x == "rs") {
            files.push(p);
        }
    }
}

#[test]
fn no_module_imports_one_above_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    visit(&src, &mut files);
    assert!(files.len() > 20, "found only {} source files", files.len());
    let mut violations = Vec::new();
    let mut edges = 0;
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let module = first.trim_end_matches(".rs").to_string();
        if module == "lib" {
            continue;
        }
        let Some(own) = layer(&module) else {
            violations.push(format!("{}: module {module} has no layer", rel.display()));
            continue;
        };
        let text = std::fs::read_to_string(f).unwrap();
        for used in crate_paths(&text) {
            edges += 1;
            if used == module {
                continue;
            }
            let ok = match used.as_str() {
                // Root re-exports hide which module they come from: only the top layer uses them.
                "<root>" => own == LAYERS.iter().map(|(_, l)| *l).max().unwrap(),
                m => layer(m).is_some_and(|l| l < own),
            };
            if !ok {
                violations.push(format!(
                    "{}: {module} (layer {own}) uses crate::{used}",
                    rel.display()
                ));
            }
        }
    }
    assert!(
        edges > 30,
        "found only {edges} crate:: paths: is the scan broken?"
    );
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

#[test]
fn the_scan_sees_an_upward_import() {
    let paths = crate_paths(
        "use crate::mask::Matcher; // crate::fuzz\nlet x = crate::Grammar::x;\ncrate::m!(x);",
    );
    assert_eq!(paths, ["mask", "<root>", "<root>"]);
}

/// The sibling modules (files of one folder) that `text` imports: `super::NAME` and
/// `crate::<folder>::NAME` paths whose `NAME` is one of `siblings` (comments skipped).
fn sibling_imports(text: &str, folder: &str, siblings: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for code in code_lines(text) {
        for prefix in ["super::".to_string(), format!("crate::{folder}::")] {
            for (i, _) in code.match_indices(&prefix) {
                let rest = &code[i + prefix.len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if siblings.contains(&name) && !out.contains(&name) {
                    out.push(name);
                }
            }
        }
    }
    out
}

/// Sibling modules that import each other, directly or through others, in one folder.
fn sibling_circles(dir: &Path) -> Vec<String> {
    let mut stems: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let p = e.ok()?.path();
            (p.extension()? == "rs").then(|| p.file_stem()?.to_str().map(str::to_owned))?
        })
        .collect();
    stems.sort();
    let folder = dir.file_name().unwrap().to_str().unwrap().to_owned();
    let edges: Vec<Vec<usize>> = stems
        .iter()
        .map(|s| {
            let text = std::fs::read_to_string(dir.join(format!("{s}.rs"))).unwrap();
            sibling_imports(&text, &folder, &stems)
                .iter()
                .filter(|n| *n != s)
                .filter_map(|n| stems.iter().position(|x| x == n))
                .collect()
        })
        .collect();
    // Each module that reaches itself again.
    let mut circles = Vec::new();
    for start in 0..stems.len() {
        let mut seen = vec![false; stems.len()];
        let mut todo = edges[start].clone();
        while let Some(m) = todo.pop() {
            if m == start {
                circles.push(format!("{folder}/{}.rs", stems[start]));
                break;
            }
            if !std::mem::replace(&mut seen[m], true) {
                todo.extend(&edges[m]);
            }
        }
    }
    circles
}

#[test]
fn no_two_sibling_modules_import_each_other() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut dirs = vec![src.clone()];
    let mut circles = Vec::new();
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            }
        }
        if dir != src {
            circles.extend(sibling_circles(&dir));
        }
    }
    assert!(circles.is_empty(), "in an import circle: {circles:?}");
    // The scan sees a circle.
    let tmp = std::env::temp_dir().join(format!("callmask-circle-{}", std::process::id()));
    let dir = tmp.join("m");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.rs"), "use super::b::B;\n").unwrap();
    std::fs::write(dir.join("b.rs"), "use crate::m::a::A;\n").unwrap();
    std::fs::write(dir.join("c.rs"), "// use super::a::A;\n").unwrap();
    let found = sibling_circles(&dir);
    std::fs::remove_dir_all(&tmp).ok();
    assert_eq!(found, ["m/a.rs", "m/b.rs"]);
}
