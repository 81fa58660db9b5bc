//! The import picture: within each crate, no circle of `use`s across its files.
//!
//! A file's module imports another when its code (comments and its trailing `#[cfg(test)]`
//! module left out) names that module by path: `crate::a::b`, `super::x`, `self::x`, a child
//! module's name, or an item inside one of them (`crate::a::Item` counts as `a`). The crate
//! root (lib.rs, main.rs) is its table of contents: its `mod`s and re-exports are not imports,
//! and an item named from the root (`crate::Config`) counts as no module's. Paths a module
//! takes through `use crate::{a, b::c}` count too, one brace level deep.
//!
//! One type's inherent `impl` split across files is not a circle of concerns: a module that
//! holds an `impl T { .. }` block of a type `T` defined in another module does not count as
//! importing that module (the engine's `impl Inner` in keys.rs, run.rs and read_ahead.rs).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the repo root")
        .to_path_buf()
}

/// Every crate's `src` folder.
fn crate_sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    if dir.join("Cargo.toml").is_file() && dir.join("src").is_dir() {
        out.push(dir.join("src"));
    }
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if e.path().is_dir()
            && !name.starts_with('.')
            && !["target", "node_modules"].contains(&name.as_str())
        {
            crate_sources(&e.path(), out);
        }
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `a/b.rs` and `a/b/mod.rs` are `a::b`; lib.rs and main.rs the root (empty).
fn module_of(src: &Path, file: &Path) -> Module {
    let rel = file
        .strip_prefix(src)
        .expect("inside src")
        .with_extension("");
    let mut m: Module = rel
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    if m.len() == 1 && ["lib", "main"].contains(&m[0].as_str())
        || m.last().is_some_and(|l| l == "mod")
    {
        m.pop();
    }
    m
}

/// The code a module's imports are read from: no comments, no trailing test module.
fn code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let line = match line.find("//") {
            Some(k) => &line[..k],
            None => line,
        };
        out.push_str(line);
        out.push('\n');
    }
    let mut cut = out.len();
    let mut from = 0;
    while let Some(k) = out[from..].find("#[cfg(test)]") {
        let at = from + k;
        let rest = out[at + "#[cfg(test)]".len()..].trim_start();
        if rest.starts_with("mod ") && rest.split('\n').next().is_some_and(|l| l.contains('{')) {
            cut = at;
            break;
        }
        from = at + 1;
    }
    out.truncate(cut);
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The identifiers of a path that starts at byte `at` of `s` (`a::b::C` → [a, b, C]).
fn path_at(s: &str, at: usize) -> Vec<String> {
    let mut parts = Vec::new();
    let mut rest = &s[at..];
    loop {
        let end = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
        if end == 0 {
            break;
        }
        parts.push(rest[..end].to_string());
        rest = &rest[end..];
        match rest.strip_prefix("::") {
            Some(r) => rest = r,
            None => break,
        }
    }
    parts
}

/// Where a path written in module `m` starts: `crate`, `self`, any number of `super`s, or (in
/// a module with children) a child's name. Returns the base module and the path after it.
fn resolve(m: &Module, parts: &[String], modules: &BTreeSet<Module>) -> Option<(Module, usize)> {
    match parts.first()?.as_str() {
        "crate" => Some((Vec::new(), 1)),
        "self" => Some((m.clone(), 1)),
        "super" => {
            let supers = parts.iter().take_while(|p| *p == "super").count();
            (supers <= m.len()).then(|| (m[..m.len() - supers].to_vec(), supers))
        }
        name if !m.is_empty() => {
            let mut child = m.clone();
            child.push(name.to_string());
            modules.contains(&child).then(|| (m.clone(), 0))
        }
        _ => None,
    }
}

/// The deepest module a path names, from `base` on.
fn target(base: &Module, rest: &[String], modules: &BTreeSet<Module>) -> Module {
    let mut found = base.clone();
    let mut cur = base.clone();
    for p in rest {
        cur.push(p.clone());
        if modules.contains(&cur) {
            found = cur.clone();
        } else {
            break;
        }
    }
    found
}

fn imports(m: &Module, code: &str, modules: &BTreeSet<Module>) -> BTreeSet<Module> {
    let mut out = BTreeSet::new();
    let bytes = code.as_bytes();
    let mut add = |path: Vec<String>| {
        let t = target(&Vec::new(), &path, modules);
        if !t.is_empty() && t != *m {
            out.insert(t);
        }
    };
    for (at, c) in code.char_indices() {
        let follows_path = at > 0 && (is_ident(bytes[at - 1] as char) || bytes[at - 1] == b':');
        if !is_ident(c) || follows_path {
            continue;
        }
        let parts = path_at(code, at);
        let end = at + parts.join("::").len();
        let group = code[end..].starts_with("::{");
        if parts.len() < 2 && !group {
            continue;
        }
        let Some((base, skip)) = resolve(m, &parts, modules) else {
            continue;
        };
        let mut path = base;
        path.extend(parts[skip..].iter().cloned());
        add(path.clone());
        if group {
            // `use crate::{a, b::c}`: each item of the group, one brace level deep.
            let body = &code[end + 3..];
            let close = body.find('}').unwrap_or(body.len());
            for item in body[..close].split(',') {
                let item = item.trim();
                if !item.is_empty() {
                    let mut full = path.clone();
                    full.extend(path_at(item, 0));
                    add(full);
                }
            }
        }
    }
    out
}

/// The names of the structs and enums `code` defines.
fn defined_types(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for kw in ["struct ", "enum "] {
        for (at, _) in code.match_indices(kw) {
            let before = code[..at].chars().next_back();
            if before.is_some_and(is_ident) {
                continue;
            }
            let name = path_at(code, at + kw.len());
            if let Some(n) = name.first() {
                out.insert(n.clone());
            }
        }
    }
    out
}

/// The types `code` has inherent `impl` blocks for (`impl T {`, `impl<'a> T<'a> {`), not trait
/// impls.
fn inherent_impls(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (at, _) in code.match_indices("impl") {
        let before = code[..at].chars().next_back();
        let after = code[at + 4..].chars().next();
        if before.is_some_and(is_ident) || !after.is_some_and(|c| c == ' ' || c == '<') {
            continue;
        }
        let Some(open) = code[at..].find('{') else {
            continue;
        };
        let head = &code[at + 4..at + open];
        if head.contains(" for ") {
            continue;
        }
        // Past the impl's own generics, the type's name (its last path segment).
        let mut rest = head.trim_start();
        if rest.starts_with('<') {
            let mut depth = 0;
            let end = rest
                .char_indices()
                .find(|&(_, c)| {
                    depth += match c {
                        '<' => 1,
                        '>' => -1,
                        _ => 0,
                    };
                    depth == 0
                })
                .map_or(rest.len(), |(k, _)| k + 1);
            rest = rest[end..].trim_start();
        }
        if let Some(name) = path_at(rest, 0).last() {
            out.insert(name.clone());
        }
    }
    out
}

/// Strongly connected components with more than one module (Tarjan's algorithm).
fn circles(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct State<'a> {
        graph: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        on: BTreeSet<&'a Module>,
        out: Vec<Vec<Module>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a Module) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on.insert(v);
        for w in s.graph.get(v).into_iter().flatten() {
            let Some((w, _)) = s.graph.get_key_value(w) else {
                continue;
            };
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on.remove(w);
                comp.push(w.clone());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}

fn name(m: &Module) -> String {
    m.join("::")
}

/// Each crate's import graph, impl splits taken out.
fn graphs(repo: &Path) -> Vec<(String, BTreeMap<Module, BTreeSet<Module>>)> {
    let mut srcs = Vec::new();
    crate_sources(repo, &mut srcs);
    srcs.sort();
    let mut out = Vec::new();
    for src in srcs {
        let rel = src
            .strip_prefix(repo)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let mods: BTreeMap<Module, PathBuf> = files
            .into_iter()
            .map(|f| (module_of(&src, &f), f))
            .collect();
        let modules: BTreeSet<Module> = mods.keys().cloned().collect();
        let codes: BTreeMap<Module, String> = mods
            .iter()
            .map(|(m, f)| {
                (
                    m.clone(),
                    code(&std::fs::read_to_string(f).expect("readable source")),
                )
            })
            .collect();
        let defined: BTreeMap<Module, BTreeSet<String>> = codes
            .iter()
            .map(|(m, c)| (m.clone(), defined_types(c)))
            .collect();
        let mut graph = BTreeMap::new();
        for m in mods.keys() {
            if m.is_empty() {
                continue;
            }
            let mut to = imports(m, &codes[m], &modules);
            let split = inherent_impls(&codes[m]);
            to.retain(|t| defined[t].is_disjoint(&split));
            graph.insert(m.clone(), to);
        }
        out.push((rel, graph));
    }
    out
}

#[test]
fn no_crate_has_an_import_circle_across_its_files() {
    let mut report = String::new();
    for (krate, graph) in graphs(&repo()) {
        for comp in circles(&graph) {
            report.push_str(&format!(
                "{krate}: a circle among {}\n",
                comp.iter().map(name).collect::<Vec<_>>().join(", ")
            ));
            for m in &comp {
                let to: Vec<String> = graph[m]
                    .iter()
                    .filter(|t| comp.contains(t))
                    .map(name)
                    .collect();
                report.push_str(&format!("    {} imports {}\n", name(m), to.join(", ")));
            }
        }
    }
    assert!(report.is_empty(), "import circles (break them):\n{report}");
}

#[test]
fn the_import_reader_sees_every_form_of_path() {
    let modules: BTreeSet<Module> = [
        vec![],
        vec!["a".into()],
        vec!["b".into()],
        vec!["b".into(), "c".into()],
        vec!["d".into()],
        vec!["e".into()],
    ]
    .into_iter()
    .collect();
    let m: Module = vec!["b".into()];
    let text = "use crate::a::Thing;\nuse crate::{d, e::X};\nfn f() { super::Root; c::g(); self::c::h(); }\n// crate::nothing::here\n#[cfg(test)]\nmod tests {\n    use crate::gone;\n}\n";
    let got: Vec<String> = imports(&m, &code(text), &modules)
        .iter()
        .map(name)
        .collect();
    assert_eq!(got, ["a", "b::c", "d", "e"]);
    let mut g = BTreeMap::new();
    g.insert(
        vec!["x".to_string()],
        BTreeSet::from([vec!["y".to_string()]]),
    );
    g.insert(
        vec!["y".to_string()],
        BTreeSet::from([vec!["x".to_string()]]),
    );
    g.insert(
        vec!["z".to_string()],
        BTreeSet::from([vec!["x".to_string()]]),
    );
    assert_eq!(
        circles(&g),
        vec![vec![vec!["x".to_string()], vec!["y".to_string()]]]
    );
    let code = "impl<'a> Key<'a> {}\nimpl Dequeue for Inner {}\nimpl Inner { fn f() {} }\nstruct Local;\nenum E { A }\n";
    assert_eq!(
        inherent_impls(code),
        BTreeSet::from(["Key".to_string(), "Inner".to_string()])
    );
    assert_eq!(
        defined_types(code),
        BTreeSet::from(["Local".to_string(), "E".to_string()])
    );
}
