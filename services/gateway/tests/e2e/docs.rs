//! The documentation's links: every relative link in README.md, ARCHITECTURE.md and docs/*.md
//! names a file that exists and, for a Markdown file, a heading it has; and the README links
//! every document of docs/. A section renamed or moved without its links fails here.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The documents whose links are checked, relative to the repository root.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("a docs/ folder")
        .map(|entry| PathBuf::from("docs").join(entry.expect("a readable docs/").file_name()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    docs.sort();
    let mut all = vec![PathBuf::from("README.md"), PathBuf::from("ARCHITECTURE.md")];
    all.extend(docs);
    all
}

/// The text outside fenced code blocks and inline code spans, where `[x](y)` is not a link.
fn prose(markdown: &str) -> String {
    let mut paragraphs = vec![String::new()];
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            paragraphs.push(String::new());
        } else if !fenced && !line.trim().is_empty() {
            let last = paragraphs.len() - 1;
            paragraphs[last].push_str(line);
            paragraphs[last].push('\n');
        } else {
            paragraphs.push(String::new());
        }
    }
    // A code span may be wrapped over lines, never over paragraphs: drop the text between
    // pairs of backticks paragraph by paragraph.
    let mut out = String::new();
    for paragraph in paragraphs {
        for (i, piece) in paragraph.split('`').enumerate() {
            if i % 2 == 0 {
                out.push_str(piece);
            }
        }
        out.push('\n');
    }
    out
}

/// GitHub's anchor for a heading: lower case, spaces to hyphens, punctuation dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown file's headings (outside code blocks), with GitHub's `-N`
/// suffixes for repeated headings.
fn anchors(markdown: &str) -> HashSet<String> {
    let mut seen = HashSet::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if fenced || hashes == 0 || hashes > 6 || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(&line[hashes..]);
        let mut anchor = base.clone();
        let mut n = 0;
        while seen.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        seen.insert(anchor);
    }
    seen
}

/// The targets of the inline links `[text](target)` of a document's prose.
fn link_targets(markdown: &str) -> Vec<String> {
    let text = prose(markdown);
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let end = after
            .find(|c: char| c == ')' || c.is_whitespace())
            .unwrap_or(after.len());
        out.push(after[..end].to_owned());
        rest = &after[end..];
    }
    out
}

fn is_external(target: &str) -> bool {
    target
        .split_once(':')
        .is_some_and(|(scheme, _)| scheme.chars().all(|c| c.is_ascii_alphabetic()))
}

#[test]
fn every_relative_link_in_the_docs_resolves() {
    let root = root();
    let mut broken = Vec::new();
    for doc in documents(&root) {
        let text = std::fs::read_to_string(root.join(&doc)).expect("a readable document");
        let dir = doc.parent().unwrap_or(Path::new(""));
        for target in link_targets(&text) {
            if target.is_empty() || is_external(&target) {
                continue;
            }
            let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let file = if path.is_empty() {
                root.join(&doc)
            } else {
                root.join(dir).join(path)
            };
            if !file.exists() {
                broken.push(format!("{}: {target} (no such file)", doc.display()));
                continue;
            }
            if anchor.is_empty() || file.extension().is_none_or(|ext| ext != "md") {
                continue;
            }
            let linked = std::fs::read_to_string(&file).expect("a readable linked document");
            if !anchors(&linked).contains(anchor) {
                broken.push(format!("{}: {target} (no such heading)", doc.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_readme_links_every_document() {
    let root = root();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("a README");
    let targets = link_targets(&readme);
    for doc in documents(&root).into_iter().skip(1) {
        let doc = doc.display().to_string();
        assert!(
            targets
                .iter()
                .any(|t| t.split('#').next() == Some(doc.as_str())),
            "the README's *Read more* does not link {doc}"
        );
    }
}

#[test]
fn the_link_check_sees_a_broken_link() {
    let text = "# Title\n\n## A `code` heading (x)\n\nSee [it](#a-code-heading-x), \
                [gone](#nowhere) and `[not](a-link)`.\n\n```sh\n# not a heading\n```\n";
    assert_eq!(link_targets(text), ["#a-code-heading-x", "#nowhere"]);
    let found = anchors(text);
    assert!(found.contains("a-code-heading-x"), "{found:?}");
    assert!(!found.contains("nowhere") && !found.contains("not-a-heading"));
    assert_eq!(slug("Helm (Kubernetes 1.30+)"), "helm-kubernetes-130");
    assert_eq!(
        slug("AI Catalog (`/.well-known/ai-catalog.json`)"),
        "ai-catalog-well-knownai-catalogjson"
    );
}

/// The keys a table of the configuration file accepts, read from the loader's own refusal of
/// an unknown key ("unknown field `__probe`, expected one of `a`, `b`, ..."), so the list is
/// the structs' and cannot fall behind them.
fn accepted_keys(table: &str) -> Vec<String> {
    let text = format!("{table}\n__probe = 1\n");
    let refusal = match a2a_gateway::config::FileConfig::parse(&text) {
        Ok(_) => panic!("an unknown key was accepted in {table:?}"),
        Err(e) => e,
    };
    let expected = refusal
        .split_once("expected")
        .unwrap_or_else(|| panic!("no key list in the refusal of {table:?}: {refusal}"))
        .1;
    expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_configuration_key_is_documented() {
    let root = root();
    // The file's reference, and the two documents that hold the sections of their features.
    let docs: String = [
        "docs/configuration.md",
        "docs/agents.md",
        "docs/security.md",
    ]
    .iter()
    .map(|doc| std::fs::read_to_string(root.join(doc)).expect("a readable document"))
    .collect();
    let tables = [
        "",
        "[card]",
        "[limits]",
        "[limits.quotas]",
        "[limits.rate]",
        "[limits.rate.ip]",
        "[[limits.rate.overrides]]",
        "[limits.edge]",
        "[limits.connections]",
        "[database]",
        "[push]",
        "[idempotency]",
        "[retention]",
        "[tls]",
        "[dispatch]",
        "[admin]",
        "[[extensions]]",
        "[extended_card]",
        "[[extended_card.skills]]",
        "[auth]",
        "[auth.schemes.key]",
        "[[auth.schemes.key.keys]]",
        "[[agents]]",
        "[[agents]]\n[agents.tls]",
        "[[agents]]\n[agents.credentials]",
    ];
    let mut missing = Vec::new();
    for table in tables {
        let keys = accepted_keys(table);
        assert!(!keys.is_empty(), "no keys found for {table:?}");
        for key in keys {
            // `key = ...` in a TOML example, `key` in prose, or a table's `[key]` header.
            let documented = [
                format!("{key} ="),
                format!("{key}="),
                format!("`{key}`"),
                format!("[{key}"),
                format!(".{key}]"),
                format!(".{key}."),
            ]
            .iter()
            .any(|form| docs.contains(form.as_str()));
            if !documented {
                missing.push(format!("{table} {key}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "configuration keys no document names:\n{}",
        missing.join("\n")
    );
}
