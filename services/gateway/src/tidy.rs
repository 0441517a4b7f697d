//! Checks on the crate's own source, run as unit tests (rust-analyzer's "tidy" tests).
//!
//! No new cycle between the crate's top-level modules: a module's references are the
//! `crate::<module>` paths in its production code (test files and `mod tests` blocks, and
//! comments, left out). [`KNOWN_BACK_EDGES`] lists the references that close the cycles left
//! today; with them taken out the graph must be acyclic, and each of them must still exist, so
//! the list only shrinks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The wrong-way references that close today's cycles, `(from, to)`, each with its way out
/// (the house review of 2026-11, §1.2). None is left: the graph is acyclic, and stays so.
const KNOWN_BACK_EDGES: &[(&str, &str)] = &[];

type Graph = BTreeMap<String, BTreeSet<String>>;

#[test]
fn no_new_cycle_between_top_level_modules() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = module_graph(&src);
    for (from, to) in KNOWN_BACK_EDGES {
        assert!(
            graph.get(*from).is_some_and(|t| t.contains(*to)),
            "{from} no longer refers to {to}: remove ({from:?}, {to:?}) from KNOWN_BACK_EDGES"
        );
    }
    let mut rest = graph.clone();
    for (from, to) in KNOWN_BACK_EDGES {
        if let Some(t) = rest.get_mut(*from) {
            t.remove(*to);
        }
    }
    if let Some(cycle) = find_cycle(&rest) {
        panic!(
            "a new cycle between top-level modules: {}\n(references: {:?})",
            cycle.join(" -> "),
            graph
        );
    }
}

#[test]
fn references_are_read_from_paths_and_groups() {
    let text = "use crate::a::B;\nuse crate::{b, c::D};\n// crate::e\nfn f() { crate::f::g(); }\n\
                #[cfg(test)]\nmod tests { use crate::h; }";
    let refs = references(&production(text));
    assert_eq!(
        refs.into_iter().collect::<Vec<_>>(),
        ["a", "b", "c", "f"],
        "comments and the test module are not references"
    );
    let mut g = Graph::new();
    g.entry("x".into()).or_default().insert("y".into());
    g.entry("y".into()).or_default().insert("z".into());
    assert_eq!(find_cycle(&g), None);
    g.entry("z".into()).or_default().insert("x".into());
    assert_eq!(find_cycle(&g).map(|c| c.len()), Some(4));
}

/// Every top-level module (a `src/<m>.rs` file and its `src/<m>/` directory) and the others its
/// production code names.
fn module_graph(src: &Path) -> Graph {
    let mut files: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for entry in std::fs::read_dir(src).expect("src/").flatten() {
        let path = entry.path();
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_owned();
        if name == "lib" || name == "main" {
            continue;
        }
        let list = files.entry(name).or_default();
        if path.is_dir() {
            rust_files(&path, list);
        } else if path.extension().is_some_and(|e| e == "rs") {
            list.push(path);
        }
    }
    let modules: BTreeSet<String> = files.keys().cloned().collect();
    let mut graph = Graph::new();
    for (module, paths) in &files {
        let out = graph.entry(module.clone()).or_default();
        for path in paths.iter().filter(|p| !is_test_file(p)) {
            let text = std::fs::read_to_string(path).expect("a source file");
            out.extend(
                references(&production(&text))
                    .into_iter()
                    .filter(|r| r != module && modules.contains(r)),
            );
        }
    }
    graph
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir)
        .expect("a module directory")
        .flatten()
    {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `tests.rs`, `*_tests.rs` and anything under a `tests/` directory.
fn is_test_file(path: &Path) -> bool {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    name == "tests.rs"
        || name.ends_with("_tests.rs")
        || path.components().any(|c| c.as_os_str() == "tests")
}

/// The text before the file's `#[cfg(test)] mod tests`, without `//` comments.
fn production(text: &str) -> String {
    let end = text.find("#[cfg(test)]\nmod tests").unwrap_or(text.len());
    text[..end]
        .lines()
        .map(|l| l.split_once("//").map_or(l, |(code, _)| code))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level module names after each `crate::` (and inside `crate::{...}` groups).
fn references(text: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = BTreeSet::new();
    for (i, _) in text.match_indices("crate::") {
        let rest = &text[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level items of the group: split at commas outside nested braces.
            let mut depth = 0usize;
            let mut start = 0;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        out.insert(ident(&group[start..j]));
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.insert(ident(&group[start..j]));
                        start = j + 1;
                    }
                    _ => {}
                }
            }
        } else {
            out.insert(ident(rest));
        }
    }
    out.remove("");
    out
}

/// A cycle as `a -> b -> ... -> a`, if the graph has one (depth-first, three colours).
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    fn visit<'a>(
        node: &'a str,
        graph: &'a Graph,
        done: &mut BTreeSet<&'a str>,
        path: &mut Vec<&'a str>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| *n == node) {
            let mut cycle: Vec<String> = path[at..].iter().map(|n| n.to_string()).collect();
            cycle.push(node.to_owned());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node);
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, done, path) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node);
        None
    }
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        if let Some(cycle) = visit(node, graph, &mut done, &mut Vec::new()) {
            return Some(cycle);
        }
    }
    None
}
