//! The crate's layering, checked: no module imports one above it, and the sub-modules of
//! `graph` and `kernels` do not import each other in a cycle.
//!
//! [`LAYERS`] is the picture of `docs/ARCHITECTURE.md` and `src/lib.rs` as a table: each unit
//! (a top-level module of `src/`, or one of the two halves of `dist`) and the units it sits on;
//! a unit may import those and, through them, everything below ([`may_import`]). The test reads
//! every `.rs` file under `src/` (std only), drops comments, string and char literals and
//! `#[cfg(test)]` items, skips the files that are test modules (`tests.rs`, `*/tests/*.rs`,
//! `*_tests.rs`), and resolves every `crate::…`, `super::…` and `self::…` path
//! and every path relative to a child module (each leaf of a `use` tree, and every `crate::`
//! or `super::` path written inline) to the module that defines what it names, following
//! `pub use` re-exports (`crate::Scalar` is `scalar`, `crate::graph::Unsupported` is `error`).
//! A failure names the file, the line, the import as written and the rule it breaks.
//!
//! [`ACYCLIC`] lists the modules whose sub-modules must not import each other in a cycle:
//! `graph::propagate ⇄ graph::reduce` and `kernels::spmm ⇄ kernels::raw` stay broken, and so
//! does any other cycle there. (`scalar ⇄ kernels::exact` is a cycle between units: `scalar`
//! is a leaf of the table.)

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The picture as a table: each unit and the units it sits on. A unit is a top-level module of
/// the crate, or one of the two halves of `dist`. A unit may import the units it sits on and,
/// through them, everything below ([`may_import`]: the transitive closure), and nothing else.
/// Read top to bottom, lowest first:
///
/// ```text
/// error, scalar, id            leaves: import nothing from the crate
/// par                          a leaf but for the error of a thread pool
/// kernels                      SpMM, GEMM, element-wise, rows; knows slices, CSR views, Par
/// input                        Features, SparseFeatures, Mask (with their DataId)
/// graph                        Graph, NormAdj, Propagate (Caps), Sums, Collective, DropEdge,
///                              permutations, the row partition on the reduction grid
/// data                         datasets of graphs and inputs: loaders, generator, writer
/// order                        node orderings of a graph, applied to a dataset
/// sample                       mini-batch samplers and a batch's subgraph, Â and rows
/// dist::backend                the graph-level MPI backend: DistAdj, halo exchange, samples
/// metrics                      aside: accuracy and smoothing sums over a graph's nodes
/// diag                         aside: the kernels against this machine's bounds
/// nn → optim → train           layers and the stack; optimisers; the epoch loop and the run
/// dist::run                    the run level across ranks: a rank's data, the communication
///                              model, the planner, training across ranks
/// testing                      gradient-check helpers (feature `testing`): nn and below
/// cli, main                    the binary: anything
/// ```
const LAYERS: &[(&str, &[&str])] = &[
    ("error", &[]),
    ("scalar", &[]),
    ("id", &[]),
    ("par", &["error"]),
    ("kernels", &["scalar", "par", "error"]),
    ("input", &["kernels", "id"]),
    ("graph", &["input"]),
    ("data", &["graph"]),
    ("order", &["data"]),
    ("sample", &["order"]),
    ("dist::backend", &["graph"]),
    ("metrics", &["graph"]),
    ("diag", &["order"]),
    ("nn", &["graph"]),
    ("optim", &["nn"]),
    ("train", &["optim", "sample", "metrics", "diag"]),
    ("dist::run", &["train", "dist::backend"]),
    // `dist` itself (src/dist/mod.rs) declares its two halves and re-exports from them.
    ("dist", &["dist::run"]),
    ("testing", &["nn", "data"]),
    ("cli", &["*"]),
    ("main", &["*"]),
];

/// Whether unit `from` may import unit `to`: `to` is `from`, or below it in [`LAYERS`].
fn may_import(from: &str, to: &str) -> bool {
    let mut seen = BTreeSet::new();
    let mut todo = vec![from];
    while let Some(u) = todo.pop() {
        if u == to || u == "*" {
            return true;
        }
        if seen.insert(u) {
            if let Some((_, below)) = LAYERS.iter().find(|(x, _)| *x == u) {
                todo.extend(below.iter().copied());
            }
        }
    }
    false
}

/// Modules whose sub-modules must not import each other in a cycle.
const ACYCLIC: &[&str] = &["graph", "kernels"];

/// One dependency: where it is written and what it names.
struct Import {
    file: PathBuf,
    line: usize,
    /// The path as written (`crate::train::fit`).
    written: String,
    /// The module path of the file it is written in (`["kernels", "spmm"]`).
    from: Vec<String>,
    /// The absolute path it names, re-exports followed (`["train", "fit"]`).
    to: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    /// `::`
    Path,
    Punct(char),
}

/// Tokens of Rust source with their line numbers, without comments, literals or lifetimes.
fn tokenize(src: &str) -> Vec<(Tok, usize)> {
    let b: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0usize, 1usize);
    let n = b.len();
    while i < n {
        let c = b[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && i + 1 < n && b[i + 1] == '/' {
            while i < n && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && i + 1 < n && b[i + 1] == '*' {
            let mut depth = 0usize;
            while i < n {
                if b[i] == '/' && i + 1 < n && b[i + 1] == '*' {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && i + 1 < n && b[i + 1] == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if b[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if c == '"' {
            i += 1;
            while i < n && b[i] != '"' {
                if b[i] == '\\' {
                    i += 1;
                }
                if i < n && b[i] == '\n' {
                    line += 1;
                }
                i += 1;
            }
            i += 1;
        } else if (c == 'r' || c == 'b') && raw_string_start(&b[i..]).is_some() {
            let (skip, hashes) = raw_string_start(&b[i..]).unwrap_or((0, 0));
            i += skip;
            // Find `"` followed by `hashes` `#`.
            loop {
                if i >= n {
                    break;
                }
                if b[i] == '\n' {
                    line += 1;
                }
                if b[i] == '"' && (0..hashes).all(|h| i + 1 + h < n && b[i + 1 + h] == '#') {
                    i += 1 + hashes;
                    break;
                }
                i += 1;
            }
        } else if c == '\'' {
            // A char literal ('a', '\n', '\u{..}') or a lifetime ('a).
            if i + 1 < n && b[i + 1] == '\\' {
                // Past the quote, the backslash and the escaped character.
                i += 3;
                while i < n && b[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if i + 2 < n && b[i + 2] == '\'' {
                i += 3;
            } else {
                i += 1;
                while i < n && (b[i].is_alphanumeric() || b[i] == '_') {
                    i += 1;
                }
            }
        } else if c.is_alphabetic() || c == '_' || c == '$' {
            let start = i;
            i += 1;
            while i < n && (b[i].is_alphanumeric() || b[i] == '_') {
                i += 1;
            }
            let mut id: String = b[start..i].iter().collect();
            if id == "$crate" {
                id = "crate".into();
            }
            if id == "r" && i < n && b[i] == '#' {
                // A raw identifier r#name.
                let s = i + 1;
                i += 1;
                while i < n && (b[i].is_alphanumeric() || b[i] == '_') {
                    i += 1;
                }
                id = b[s..i].iter().collect();
            }
            out.push((Tok::Ident(id), line));
        } else if c.is_ascii_digit() {
            while i < n && (b[i].is_alphanumeric() || b[i] == '_' || b[i] == '.') {
                // `1..n`: stop before a range.
                if b[i] == '.' && i + 1 < n && b[i + 1] == '.' {
                    break;
                }
                i += 1;
            }
        } else if c == ':' && i + 1 < n && b[i + 1] == ':' {
            out.push((Tok::Path, line));
            i += 2;
        } else {
            out.push((Tok::Punct(c), line));
            i += 1;
        }
    }
    out
}

/// If `s` starts a raw or byte string (`r"`, `r#"`, `b"`, `br#"`), the characters up to and
/// including its opening quote, and its number of `#`.
fn raw_string_start(s: &[char]) -> Option<(usize, usize)> {
    let mut i = 0;
    if s.first() == Some(&'b') {
        i += 1;
    }
    let raw = s.get(i) == Some(&'r');
    if raw {
        i += 1;
    }
    if !raw {
        // b"…" is an ordinary string with escapes: the `b` is read as an identifier.
        return None;
    }
    let mut hashes = 0;
    while raw && s.get(i) == Some(&'#') {
        hashes += 1;
        i += 1;
    }
    if s.get(i) == Some(&'"') {
        Some((i + 1, hashes))
    } else {
        None
    }
}

/// Index just past the item starting at `i` (up to its `;` or its closing `}` at depth 0).
fn skip_item(toks: &[(Tok, usize)], mut i: usize) -> usize {
    // Attributes of the item.
    while i + 1 < toks.len() && toks[i].0 == Tok::Punct('#') && toks[i + 1].0 == Tok::Punct('[') {
        i = skip_group(toks, i + 1);
    }
    let mut depth = 0i64;
    while i < toks.len() {
        match toks[i].0 {
            Tok::Punct('{') | Tok::Punct('(') | Tok::Punct('[') => depth += 1,
            Tok::Punct('}') | Tok::Punct(')') | Tok::Punct(']') => {
                depth -= 1;
                if depth == 0 && toks[i].0 == Tok::Punct('}') {
                    return i + 1;
                }
            }
            Tok::Punct(';') if depth == 0 => return i + 1,
            _ => {}
        }
        i += 1;
    }
    i
}

/// Index just past the bracketed group opening at `i`.
fn skip_group(toks: &[(Tok, usize)], mut i: usize) -> usize {
    let mut depth = 0i64;
    while i < toks.len() {
        match toks[i].0 {
            Tok::Punct('{') | Tok::Punct('(') | Tok::Punct('[') => depth += 1,
            Tok::Punct('}') | Tok::Punct(')') | Tok::Punct(']') => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    i
}

/// Whether the attribute at `i` (`#` `[` …) is exactly `#[cfg(test)]`.
fn is_cfg_test(toks: &[(Tok, usize)], i: usize) -> bool {
    let want = [
        Tok::Punct('#'),
        Tok::Punct('['),
        Tok::Ident("cfg".into()),
        Tok::Punct('('),
        Tok::Ident("test".into()),
        Tok::Punct(')'),
        Tok::Punct(']'),
    ];
    toks.len() >= i + want.len() && toks[i..i + want.len()].iter().map(|t| &t.0).eq(want.iter())
}

/// A path found in the source: its segments (with `{`…`}` use trees expanded) and its line.
struct Found {
    segs: Vec<String>,
    line: usize,
    /// Inside a `pub use`: a re-export.
    reexport: bool,
    /// The module path the path is written in (the file's, plus inline `mod` blocks).
    module: Vec<String>,
}

/// Expands a use tree starting at `i` (after `use`): each leaf path, and the index past it.
fn use_tree(
    toks: &[(Tok, usize)],
    mut i: usize,
    prefix: &[String],
    out: &mut Vec<Vec<String>>,
) -> usize {
    let mut segs = prefix.to_vec();
    loop {
        match toks.get(i).map(|t| &t.0) {
            Some(Tok::Ident(s)) if s == "as" => {
                // `as name`: the path is complete.
                i += 2;
                out.push(segs);
                return i;
            }
            Some(Tok::Ident(s)) => {
                segs.push(s.clone());
                i += 1;
            }
            Some(Tok::Path) => i += 1,
            Some(Tok::Punct('{')) => {
                i += 1;
                loop {
                    match toks.get(i).map(|t| &t.0) {
                        Some(Tok::Punct('}')) => return i + 1,
                        Some(Tok::Punct(',')) => i += 1,
                        None => return i,
                        _ => i = use_tree(toks, i, &segs, out),
                    }
                }
            }
            Some(Tok::Punct('*')) => {
                segs.push("*".into());
                out.push(segs);
                return i + 1;
            }
            _ => {
                out.push(segs);
                return i;
            }
        }
    }
}

/// Every `use` leaf and every inline `crate::`/`super::` path of a file's non-test code.
fn paths(toks: &[(Tok, usize)], file_module: &[String]) -> Vec<Found> {
    let mut found = Vec::new();
    // Inline `mod name {` blocks: (name, brace depth at which it closes).
    let mut mods: Vec<(String, i64)> = Vec::new();
    let mut depth = 0i64;
    let mut i = 0;
    while i < toks.len() {
        if is_cfg_test(toks, i) {
            i = skip_item(toks, i + 7);
            continue;
        }
        let module = || {
            let mut m = file_module.to_vec();
            m.extend(mods.iter().map(|(n, _)| n.clone()));
            m
        };
        match &toks[i].0 {
            Tok::Punct('{') => {
                depth += 1;
                i += 1;
            }
            Tok::Punct('}') => {
                if mods.last().is_some_and(|(_, d)| *d == depth) {
                    mods.pop();
                }
                depth -= 1;
                i += 1;
            }
            Tok::Ident(k) if k == "mod" => {
                if let (Some((Tok::Ident(name), _)), Some((Tok::Punct('{'), _))) =
                    (toks.get(i + 1), toks.get(i + 2))
                {
                    depth += 1;
                    mods.push((name.clone(), depth));
                    i += 3;
                } else {
                    i += 1;
                }
            }
            Tok::Ident(k) if k == "use" => {
                let reexport = i >= 1 && matches!(&toks[i - 1].0, Tok::Ident(p) if p == "pub")
                    || i >= 4
                        && matches!(&toks[i - 1].0, Tok::Punct(')'))
                        && matches!(&toks[i - 4].0, Tok::Ident(p) if p == "pub");
                let line = toks[i].1;
                let mut leaves = Vec::new();
                let end = use_tree(toks, i + 1, &[], &mut leaves);
                for segs in leaves {
                    found.push(Found {
                        segs,
                        line,
                        reexport,
                        module: module(),
                    });
                }
                i = end.max(i + 1);
            }
            Tok::Ident(k)
                if (k == "crate" || k == "super")
                    && toks.get(i + 1).map(|t| &t.0) == Some(&Tok::Path) =>
            {
                // An inline path: crate::a::b, super::super::x.
                let line = toks[i].1;
                let mut segs = vec![k.clone()];
                let mut j = i + 1;
                while toks.get(j).map(|t| &t.0) == Some(&Tok::Path) {
                    match toks.get(j + 1).map(|t| &t.0) {
                        Some(Tok::Ident(s)) => {
                            segs.push(s.clone());
                            j += 2;
                        }
                        _ => break,
                    }
                }
                found.push(Found {
                    segs,
                    line,
                    reexport: false,
                    module: module(),
                });
                i = j;
            }
            _ => i += 1,
        }
    }
    found
}

/// The module path of a file under `src/` (`src/kernels/spmm.rs` → `["kernels", "spmm"]`).
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if let Some(last) = parts.pop() {
        let stem = last.trim_end_matches(".rs").to_string();
        if stem != "mod" && stem != "lib" {
            parts.push(stem);
        }
    }
    parts
}

/// Whether a file is a test module (skipped whole).
fn is_test_file(rel: &Path) -> bool {
    let name = rel
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    name == "tests.rs"
        || name.ends_with("_tests.rs")
        || rel.parent().is_some_and(|p| p.iter().any(|c| c == "tests"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The crate's sources as parsed: for each module path, the `pub use` re-exports it declares
/// (name → absolute path), the modules that exist, and every import of non-test code.
struct Crate {
    modules: BTreeSet<Vec<String>>,
    reexports: BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>>,
    imports: Vec<Import>,
}

/// Makes a written path absolute (`super`, `self`, `crate` resolved against `module`).
fn absolute(segs: &[String], module: &[String]) -> Vec<String> {
    let mut base: Vec<String>;
    let mut rest = segs;
    match segs.first().map(String::as_str) {
        Some("crate") => {
            base = Vec::new();
            rest = &segs[1..];
        }
        Some("self") => {
            base = module.to_vec();
            rest = &segs[1..];
        }
        Some("super") => {
            base = module.to_vec();
            while rest.first().map(String::as_str) == Some("super") {
                base.pop();
                rest = &rest[1..];
            }
        }
        _ => base = module.to_vec(),
    }
    base.extend(rest.iter().filter(|s| *s != "self").cloned());
    base
}

fn parse_crate() -> Crate {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let modules: BTreeSet<Vec<String>> = files
        .iter()
        .map(|f| module_of(f.strip_prefix(&root).unwrap_or(f)))
        .collect();
    let mut reexports: BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    let mut imports = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&root).unwrap_or(f).to_path_buf();
        let module = module_of(&rel);
        if is_test_file(&rel) {
            continue;
        }
        let src = std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let toks = tokenize(&src);
        for p in paths(&toks, &module) {
            let first = p.segs.first().map(String::as_str).unwrap_or_default();
            let relative = !matches!(first, "crate" | "super" | "self");
            let mut child = p.module.clone();
            child.push(first.to_string());
            if relative && !modules.contains(&child) {
                // Another crate (std, ndarray, …), or a local item.
                continue;
            }
            let abs = absolute(&p.segs, &p.module);
            if p.reexport {
                if let Some(name) = abs.last() {
                    if name != "*" {
                        reexports
                            .entry(p.module.clone())
                            .or_default()
                            .insert(name.clone(), abs.clone());
                    }
                }
            }
            imports.push(Import {
                file: Path::new("src").join(&rel),
                line: p.line,
                written: p.segs.join("::"),
                from: p.module.clone(),
                to: abs,
            });
        }
    }
    Crate {
        modules,
        reexports,
        imports,
    }
}

impl Crate {
    /// Follows re-exports: the module path where what `path` names is defined (as deep as the
    /// modules go).
    fn resolve(&self, path: &[String]) -> Vec<String> {
        let mut path = path.to_vec();
        for _ in 0..16 {
            // The longest prefix that is a module.
            let k = (0..=path.len())
                .rev()
                .find(|&k| self.modules.contains(&path[..k]))
                .unwrap_or(0);
            let next = path
                .get(k)
                .and_then(|name| self.reexports.get(&path[..k]).and_then(|m| m.get(name)));
            match next {
                Some(target) if target.as_slice() != &path[..=k] => {
                    let mut p = target.clone();
                    p.extend(path[k + 1..].iter().cloned());
                    path = p;
                }
                _ => return path[..k].to_vec(),
            }
        }
        path
    }
}

/// The unit of a module path: the longest key of [`LAYERS`] it starts with.
fn unit_of(module: &[String]) -> Option<&'static str> {
    LAYERS
        .iter()
        .map(|(u, _)| *u)
        .filter(|u| {
            let parts: Vec<&str> = u.split("::").collect();
            parts.len() <= module.len() && parts.iter().zip(module).all(|(a, b)| *a == b)
        })
        .max_by_key(|u| u.len())
}

#[test]
fn the_table_is_a_partial_order() {
    // Every unit the table names exists as a row, and following the table never comes back.
    let rows: BTreeSet<&str> = LAYERS.iter().map(|(u, _)| *u).collect();
    for (u, deps) in LAYERS {
        for d in *deps {
            assert!(
                *d == "*" || rows.contains(d),
                "{u} may import {d}, which has no row"
            );
        }
    }
    fn visit<'a>(u: &'a str, stack: &mut Vec<&'a str>, done: &mut BTreeSet<&'a str>) {
        if done.contains(u) {
            return;
        }
        assert!(
            !stack.contains(&u),
            "the table has a cycle: {stack:?} → {u}"
        );
        stack.push(u);
        if let Some((_, deps)) = LAYERS.iter().find(|(x, _)| *x == u) {
            for d in deps.iter().filter(|d| **d != "*") {
                visit(d, stack, done);
            }
        }
        stack.pop();
        done.insert(u);
    }
    let mut done = BTreeSet::new();
    for (u, _) in LAYERS {
        visit(u, &mut Vec::new(), &mut done);
    }
}

#[test]
fn every_import_is_allowed_by_the_table() {
    let krate = parse_crate();
    // Every top-level module of the crate has a row.
    for m in &krate.modules {
        if let Some(first) = m.first() {
            assert!(
                unit_of(std::slice::from_ref(first)).is_some() || first == "lib",
                "src/{first}: a module the layering table does not place; add it to LAYERS"
            );
        }
    }
    let mut bad = String::new();
    let mut checked = 0usize;
    for imp in &krate.imports {
        if imp.from.is_empty() {
            // src/lib.rs: declares the modules and curates the crate's `pub use`.
            continue;
        }
        let Some(from_u) = unit_of(&imp.from) else {
            let _ = writeln!(
                bad,
                "{}:{}: in no unit of the table",
                imp.file.display(),
                imp.line
            );
            continue;
        };
        if LAYERS
            .iter()
            .any(|(u, below)| *u == from_u && below.contains(&"*"))
        {
            continue;
        }
        let to = krate.resolve(&imp.to);
        let to_u = unit_of(&to);
        let Some(to_u) = to_u else {
            if !to.is_empty() {
                let _ = writeln!(
                    bad,
                    "{}:{}: `{}` names {} which is in no unit of the table",
                    imp.file.display(),
                    imp.line,
                    imp.written,
                    to.join("::")
                );
            }
            continue;
        };
        checked += 1;
        if !may_import(from_u, to_u) {
            let _ = writeln!(
                bad,
                "{}:{}: `{}` — {from_u} may not import {to_u} ({})",
                imp.file.display(),
                imp.line,
                imp.written,
                to.join("::"),
            );
        }
    }
    assert!(
        checked > 500,
        "only {checked} imports found: is the parser broken?"
    );
    assert!(
        bad.is_empty(),
        "imports the layering (tests/layering.rs, LAYERS) forbids:\n{bad}"
    );
}

#[test]
fn no_cycles_between_sub_modules() {
    let krate = parse_crate();
    for top in ACYCLIC {
        // Sub-module → sub-modules it imports (re-exports of the module root do not count: they
        // name, they do not use).
        let mut edges: BTreeMap<String, BTreeMap<String, (PathBuf, usize, String)>> =
            BTreeMap::new();
        for imp in &krate.imports {
            if imp.from.first().map(String::as_str) != Some(top) || imp.from.len() < 2 {
                continue;
            }
            let to = krate.resolve(&imp.to);
            if to.first().map(String::as_str) != Some(top) || to.len() < 2 || to[1] == imp.from[1] {
                continue;
            }
            edges
                .entry(imp.from[1].clone())
                .or_default()
                .entry(to[1].clone())
                .or_insert((imp.file.clone(), imp.line, imp.written.clone()));
        }
        // Any cycle, with where each step is written.
        let mut report = String::new();
        for (a, outs) in &edges {
            for (b, (file, line, written)) in outs {
                if let Some((file2, line2, written2)) = edges.get(b).and_then(|o| o.get(a)) {
                    if a < b {
                        let _ = writeln!(
                            report,
                            "{top}::{a} ⇄ {top}::{b}: {}:{line} `{written}` and {}:{line2} `{written2}`",
                            file.display(),
                            file2.display()
                        );
                    }
                }
            }
        }
        if let Some(cycle) = find_cycle(&edges) {
            let _ = writeln!(report, "{top}: cycle {}", cycle.join(" → "));
        }
        assert!(
            report.is_empty(),
            "sub-modules that import each other:\n{report}"
        );
    }
}

/// A cycle of the graph, if it has one.
fn find_cycle(
    edges: &BTreeMap<String, BTreeMap<String, (PathBuf, usize, String)>>,
) -> Option<Vec<String>> {
    fn dfs(
        u: &str,
        edges: &BTreeMap<String, BTreeMap<String, (PathBuf, usize, String)>>,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(pos) = stack.iter().position(|s| s == u) {
            let mut c = stack[pos..].to_vec();
            c.push(u.to_string());
            return Some(c);
        }
        if done.contains(u) {
            return None;
        }
        stack.push(u.to_string());
        for v in edges.get(u).into_iter().flat_map(|o| o.keys()) {
            if let Some(c) = dfs(v, edges, stack, done) {
                return Some(c);
            }
        }
        stack.pop();
        done.insert(u.to_string());
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|u| dfs(u, edges, &mut Vec::new(), &mut done))
}

#[test]
fn the_architecture_doc_has_the_same_table() {
    // docs/ARCHITECTURE.md's module table: `| `module` | `below`, `below` | what it holds |`.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/ARCHITECTURE.md");
    let doc = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut rows = BTreeMap::new();
    for line in doc.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 4 || !cells[1].starts_with('`') {
            continue;
        }
        let unit = cells[1].trim_matches('`');
        let below: BTreeSet<&str> = cells[2]
            .split(',')
            .map(|c| c.trim().trim_matches('`'))
            .filter(|c| !c.is_empty() && *c != "—")
            .collect();
        rows.insert(unit, below);
    }
    for (unit, below) in LAYERS {
        if matches!(*unit, "cli" | "main" | "testing" | "dist") {
            continue;
        }
        let want: BTreeSet<&str> = below.iter().copied().collect();
        assert_eq!(
            rows.get(unit),
            Some(&want),
            "docs/ARCHITECTURE.md's row of `{unit}` does not say what LAYERS says it sits on"
        );
    }
    assert!(
        rows.keys().all(|u| LAYERS.iter().any(|(x, _)| x == u)),
        "docs/ARCHITECTURE.md has a row LAYERS does not: {:?}",
        rows.keys().collect::<Vec<_>>()
    );
}

#[test]
fn the_parser_sees_what_it_should() {
    // A use tree, a re-export, an inline path, comments, strings and a #[cfg(test)] module.
    let src = r#"
        //! [`crate::train::fit`] in a doc comment is not an import
        use crate::{kernels::{spmm, raw::x as y}, Scalar};
        pub use super::sums::Sums;
        fn f() { let s = "crate::train::fit"; let c = '"'; crate::nn::Model::new(); }
        /* crate::optim */
        #[cfg(test)]
        mod tests { use crate::data::Dataset; }
        mod inner { use super::other; }
    "#;
    let toks = tokenize(src);
    let module = vec!["graph".to_string(), "propagate".to_string()];
    let found: Vec<(String, bool)> = paths(&toks, &module)
        .iter()
        .map(|f| (absolute(&f.segs, &f.module).join("::"), f.reexport))
        .collect();
    assert_eq!(
        found,
        [
            ("kernels::spmm".to_string(), false),
            ("kernels::raw::x".to_string(), false),
            ("Scalar".to_string(), false),
            ("graph::sums::Sums".to_string(), true),
            ("nn::Model::new".to_string(), false),
            ("graph::propagate::other".to_string(), false),
        ]
    );
    assert!(is_test_file(Path::new("kernels/raw/tests.rs")));
    assert!(is_test_file(Path::new("order/tests/community.rs")));
    assert!(is_test_file(Path::new("nn/gcn_conv/lean_tests.rs")));
    assert!(!is_test_file(Path::new("graph/reduce.rs")));
    assert_eq!(module_of(Path::new("kernels/mod.rs")), ["kernels"]);
    assert_eq!(
        module_of(Path::new("dist/run/plan.rs")),
        ["dist", "run", "plan"]
    );
    assert_eq!(
        unit_of(&["dist".into(), "run".into(), "plan".into()]),
        Some("dist::run")
    );
}
