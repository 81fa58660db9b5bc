//! Tidy checks over the whole tree (rust-analyzer keeps its own in xtask too).

use std::path::{Path, PathBuf};

/// Top-level folders whose paths docs and comments name.
const ROOTS: [&str; 9] = [
    "crates/",
    "kernels/",
    "tests/",
    "xtask/",
    "fuzz/",
    "benches/",
    "deploy/",
    "reliability/",
    ".ci/",
];

/// Files that record history (they name paths as they were when measured), and this one (its
/// examples).
const SKIPPED: [&str; 3] = ["BENCHMARKS.md", "PERF-NOTES.md", "tidy.rs"];

/// Build and release output, npm's packages and the fuzz corpora.
const SKIPPED_DIRS: [&str; 6] = [
    "target",
    "corpus",
    "regressions",
    "bundle",
    "dist",
    "node_modules",
];

const EXTENSIONS: [&str; 10] = [
    ".rs", ".md", ".cu", ".cuh", ".h", ".cpp", ".sh", ".py", ".toml", ".proto",
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the repo root")
        .to_path_buf()
}

/// Every source, script, configuration and doc file outside hidden folders (but `.ci`) and
/// [`SKIPPED_DIRS`].
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if p.is_dir() {
            let hidden = name.starts_with('.') && name != ".ci";
            if !hidden && !SKIPPED_DIRS.contains(&name.as_str()) {
                files(&p, out);
            }
        } else {
            let text =
                EXTENSIONS.iter().any(|x| name.ends_with(x)) && !SKIPPED.contains(&name.as_str());
            let ci_script = name == "run" && dir.file_name().is_some_and(|d| d == ".ci");
            if text || ci_script {
                out.push(p);
            }
        }
    }
}

/// Candidate paths in `text`: a root folder followed by path characters, not part of a longer
/// path or URL, with no placeholder in it.
fn named_paths(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let mut v = Vec::new();
    for root in ROOTS {
        let mut from = 0;
        while let Some(k) = text[from..].find(root) {
            let at = from + k;
            from = at + root.len();
            let before = at.checked_sub(1).map(|i| bytes[i]);
            if before.is_some_and(|b| b.is_ascii_alphanumeric() || b"/_.-:~$".contains(&b)) {
                continue;
            }
            let end = text[at..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || "/_.-".contains(c)))
                .map_or(text.len(), |e| at + e);
            let after = text[end..].chars().next();
            if after.is_some_and(|c| "<*{$".contains(c)) {
                continue;
            }
            let p = text[at..end].trim_end_matches(['.', '-']);
            if p.len() > root.len() {
                v.push(p.to_string());
            }
        }
    }
    v
}

/// `p` names an existing file or folder from the repo root, the naming file's crate (the
/// nearest folder with a Cargo.toml) or the naming file's own folder.
fn exists(repo: &Path, file: &Path, p: &str) -> bool {
    let dir = file.parent().unwrap_or(repo);
    let krate = dir
        .ancestors()
        .find(|d| d.join("Cargo.toml").is_file())
        .unwrap_or(repo);
    [repo, krate, dir].iter().any(|base| base.join(p).exists())
}

#[test]
fn every_path_named_in_docs_and_comments_exists() {
    let repo = repo();
    let mut all = Vec::new();
    files(&repo, &mut all);
    assert!(
        all.len() > 100,
        "found only {} files under {}",
        all.len(),
        repo.display()
    );
    let mut missing = Vec::new();
    for f in &all {
        let Ok(text) = std::fs::read_to_string(f) else {
            continue;
        };
        for p in named_paths(&text) {
            if !exists(&repo, f, &p) {
                missing.push(format!(
                    "{}: {p}",
                    f.strip_prefix(&repo).unwrap_or(f).display()
                ));
            }
        }
    }
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "paths named but not there (fix the text, or the path):\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_path_finder_finds_what_it_should() {
    let t = "see `crates/gpu/src/report.rs`, kernels/msm/check.cu. Not https://x.io/crates/a.rs, \
             /work/crates/b.rs, kernels/<domain>/*.cu or my-tests/c.rs; tests/queue.rs";
    assert_eq!(
        named_paths(t),
        [
            "crates/gpu/src/report.rs",
            "kernels/msm/check.cu",
            "tests/queue.rs"
        ]
    );
}
