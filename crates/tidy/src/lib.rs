//! The repository's invariants as tests, in the manner of rust-analyzer's tidy tests.
//!
//! Each rule (`rules/`) is a pure function over a [`Tree`] — the repository's files as
//! `(path, text)` — returning the [`Violation`]s it finds, each naming file and line. The crate's
//! tests run every rule on the real tree (`tests/suite/real.rs`, through the allowlist of
//! `allow.rs`) and show each one failing on a planted violation in a temporary tree
//! (`tests/suite/planted.rs`). The layering rule also reads `cargo metadata`
//! ([`Package::from_metadata`]).
//!
//! How to add a rule: a module in `rules/` with `pub const RULE: &str` and
//! `pub fn check(tree: &Tree) -> Vec<Violation>`, its entry in [`rules::ALL`], a planted test,
//! and the text of the invariant in ARCHITECTURE.md ("Invariants enforced by tidy").

pub mod allow;
pub mod lex;
pub mod rules;

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::Value;

pub use lex::{Line, Lit};

/// One file of the tree: its path relative to the root (with `/`), and its text.
#[derive(Debug, Clone)]
pub struct SourceFile {
    pub path: String,
    pub text: String,
}

impl SourceFile {
    /// The file's lines as the rules see them.
    pub fn lines(&self) -> Vec<Line> {
        lex::lines(&self.text)
    }

    /// A Rust file under `crates/`.
    pub fn is_rust(&self) -> bool {
        self.path.ends_with(".rs")
    }

    /// The crate directory the file lies in (`crates/<name>`), if any.
    pub fn crate_dir(&self) -> Option<&str> {
        let rest = self.path.strip_prefix("crates/")?;
        let end = rest.find('/')?;
        Some(&self.path[..7 + end])
    }

    /// Test code as a whole file: under a `tests/`, `benches/` or `examples/` directory, or a `tests.rs`
    /// (a `#[cfg(test)] mod tests;` of its parent).
    pub fn is_test_file(&self) -> bool {
        self.path.contains("/tests/")
            || self.path.contains("/benches/")
            || self.path.contains("/examples/")
            || self.path.ends_with("/tests.rs")
    }
}

/// The files the rules look at.
#[derive(Debug, Clone, Default)]
pub struct Tree {
    pub files: Vec<SourceFile>,
}

impl Tree {
    /// A tree of the given files (for planted violations).
    pub fn of(files: &[(&str, &str)]) -> Tree {
        Tree {
            files: files
                .iter()
                .map(|(path, text)| SourceFile {
                    path: (*path).to_owned(),
                    text: (*text).to_owned(),
                })
                .collect(),
        }
    }

    /// The repository at `root`: every `.rs` file and `Cargo.toml` under `crates/` (build
    /// output under `target/` skipped), the manifests under `runtime/protocol/`, and
    /// `ARCHITECTURE.md`.
    pub fn load(root: &Path) -> std::io::Result<Tree> {
        let mut files = Vec::new();
        walk(root, &root.join("crates"), &mut files)?;
        for extra in [
            "runtime/protocol/openphone-commands.json",
            "ARCHITECTURE.md",
            "Cargo.toml",
        ] {
            let path = root.join(extra);
            if path.is_file() {
                files.push(SourceFile {
                    path: extra.to_owned(),
                    text: std::fs::read_to_string(path)?,
                });
            }
        }
        files.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(Tree { files })
    }

    /// The file at `path`, if the tree holds it.
    pub fn file(&self, path: &str) -> Option<&SourceFile> {
        self.files.iter().find(|f| f.path == path)
    }

    /// The Rust files.
    pub fn rust(&self) -> impl Iterator<Item = &SourceFile> {
        self.files.iter().filter(|f| f.is_rust())
    }
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<SourceFile>) -> std::io::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    entries.sort();
    for path in entries {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') && name != "node_modules" {
                walk(root, &path, out)?;
            }
        } else if name.ends_with(".rs") || name == "Cargo.toml" {
            let rel = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/");
            out.push(SourceFile {
                path: rel,
                text: std::fs::read_to_string(&path)?,
            });
        }
    }
    Ok(())
}

/// A broken invariant: the rule, where, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub rule: &'static str,
    pub path: String,
    pub line: usize,
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: [{}] {}",
            self.path, self.line, self.rule, self.message
        )
    }
}

/// The kind of a dependency, as `cargo metadata` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DepKind {
    Normal,
    Dev,
    Build,
}

/// One dependency of a workspace package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dep {
    /// The package depended on (not its rename).
    pub name: String,
    pub kind: DepKind,
}

/// A workspace package: its name, its `Cargo.toml` relative to the root, its dependencies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Package {
    pub name: String,
    pub manifest: String,
    pub deps: Vec<Dep>,
}

impl Package {
    /// The workspace packages of `cargo metadata --format-version 1 --no-deps` output, with
    /// manifest paths made relative to `root`.
    pub fn from_metadata(metadata: &Value, root: &str) -> Vec<Package> {
        let root = root.trim_end_matches('/');
        let Some(packages) = metadata.get("packages").and_then(Value::as_array) else {
            return Vec::new();
        };
        packages
            .iter()
            .map(|p| {
                let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("").to_owned();
                let manifest = text(p.get("manifest_path"));
                let manifest = manifest
                    .strip_prefix(root)
                    .map_or(manifest.clone(), |m| m.trim_start_matches('/').to_owned());
                let deps = p
                    .get("dependencies")
                    .and_then(Value::as_array)
                    .map(|deps| {
                        deps.iter()
                            .map(|d| Dep {
                                name: text(d.get("name")),
                                kind: match d.get("kind").and_then(Value::as_str) {
                                    Some("dev") => DepKind::Dev,
                                    Some("build") => DepKind::Build,
                                    Some(_) | None => DepKind::Normal,
                                },
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                Package {
                    name: text(p.get("name")),
                    manifest,
                    deps,
                }
            })
            .collect()
    }
}

/// The 1-based line of `Cargo.toml` text where dependency `name` is declared (the first line
/// starting with the name, or naming it as `package = "…"`), else 1.
pub fn dep_line(manifest: &str, name: &str) -> usize {
    manifest
        .lines()
        .position(|l| {
            let l = l.trim_start();
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with([' ', '=', '.']))
                || l.contains(&format!("package = \"{name}\""))
        })
        .map_or(1, |i| i + 1)
}

/// Whether `word` occurs in `text` as a whole identifier.
pub fn has_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
            && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}
