//! The module order docs/DESIGN.md lists ("Modules, bottom to top") is the order the
//! source keeps: every module names (in `use` lines and paths) only modules listed
//! below it, inside `driver/` too, and the `impl Shared` blocks spread over `driver/`'s
//! files call only methods defined in files below them (or in their own).
//!
//! The source is read as text, as a reviewer would: comments, `#[cfg(test)] mod tests`
//! (in a file or a folder's `tests.rs`) and the test-only folder `src/tests/` are left
//! out (tests may use anything).
//! `MODULE_ORDER_ROOT` points the check at another checkout.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    std::env::var_os("MODULE_ORDER_ROOT")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
}

/// Module files (`wheel.rs`, `driver/turn.rs`) by rank, bottom first: the rows of
/// DESIGN.md's table; modules on one row share a rank.
fn ranks(root: &Path) -> BTreeMap<String, usize> {
    let design = std::fs::read_to_string(root.join("docs/DESIGN.md")).expect("docs/DESIGN.md");
    let table = design
        .split("## Modules, bottom to top")
        .nth(1)
        .expect("a \"Modules, bottom to top\" section");
    let mut ranks = BTreeMap::new();
    let rows = table
        .lines()
        .skip_while(|line| !line.starts_with('|'))
        .take_while(|line| line.starts_with('|'))
        .skip(2); // header and its rule
    for (rank, row) in rows.enumerate() {
        let cell = row.split('|').nth(2).expect("a module cell");
        for name in cell.split('`').skip(1).step_by(2) {
            assert!(name.ends_with(".rs"), "{name:?} in {row:?}");
            assert!(
                ranks.insert(name.to_string(), rank).is_none(),
                "{name} listed twice"
            );
        }
    }
    ranks
}

/// The source without comments and without a trailing `#[cfg(test)] mod tests`.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => &text[..],
    };
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) if !line[..at].ends_with(':') => &line[..at],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first path segment after every `prefix` (`crate::` or `super::`), with the
/// segments of a braced group (`crate::{a, b::c}`) each.
fn first_segments(code: &str, prefix: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (at, _) in code.match_indices(prefix) {
        if !starts_word(code, at) {
            continue; // `my_crate::`, not `crate::`
        }
        let rest = &code[at + prefix.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let end = group
                .char_indices()
                .find(|&(_, c)| {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => return true,
                        '}' => depth -= 1,
                        _ => {}
                    }
                    false
                })
                .map_or(group.len(), |(i, _)| i);
            let mut depth = 0;
            let mut start = 0;
            for (i, c) in group[..end].char_indices().chain([(end, ',')]) {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        let item = group[start..i].trim();
                        if let Some(name) = ident(item) {
                            found.insert(name);
                        }
                        start = i + 1;
                    }
                    _ => {}
                }
            }
        } else if let Some(name) = ident(rest) {
            found.insert(name);
        }
    }
    found
}

fn ident(text: &str) -> Option<String> {
    let name: String = text
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty() && name != "self").then_some(name)
}

/// What `pub use module::{Name, ..}` / `pub(crate) use module::Name` lines of `lib`
/// re-export: name → module (`None` for another crate's).
fn reexports(lib: &str) -> BTreeMap<String, Option<String>> {
    let mut names = BTreeMap::new();
    for statement in lib.split(';') {
        let Some(at) = statement.find("use ") else {
            continue;
        };
        let head = statement[..at].trim_end();
        if !head.ends_with("pub") && !head.ends_with(')') {
            continue;
        }
        let path = statement[at + 4..].trim();
        let module = path.split("::").next().unwrap_or_default();
        let local = !["std", "tokio", "core", "alloc"].contains(&module);
        let items = match path.find('{') {
            Some(open) => path[open + 1..path.rfind('}').unwrap_or(path.len())].to_string(),
            None => path.rsplit("::").next().unwrap_or_default().to_string(),
        };
        for item in items.split(',') {
            let item = item.trim();
            let name = item.rsplit(" as ").next().unwrap_or(item);
            let name = name.rsplit("::").next().unwrap_or(name).trim();
            if !name.is_empty() {
                names.insert(name.to_string(), local.then(|| module.to_string()));
            }
        }
    }
    names
}

/// The module file a reference names: `crate::wheel` -> `wheel.rs`, `crate::Sleep` ->
/// `sleep.rs` (through lib.rs's re-exports), `crate::driver` -> `driver/mod.rs`;
/// `super::turn` in `driver/` -> `driver/turn.rs`, `super::Shared` there -> the file
/// `driver/mod.rs` re-exports it from, or `driver/mod.rs` itself. `None` for another
/// crate's re-export.
fn target(
    name: &str,
    folder: Option<&str>,
    ranks: &BTreeMap<String, usize>,
    root_names: &BTreeMap<String, Option<String>>,
    folder_names: &BTreeMap<String, Option<String>>,
) -> Option<String> {
    let prefix = folder.map_or(String::new(), |folder| format!("{folder}/"));
    let file = |module: &str| -> String {
        let plain = format!("{prefix}{module}.rs");
        if ranks.contains_key(&plain) {
            plain
        } else {
            format!("{prefix}{module}/mod.rs")
        }
    };
    if ranks.contains_key(&file(name)) {
        return Some(file(name));
    }
    let names = if folder.is_some() {
        folder_names
    } else {
        root_names
    };
    match names.get(name) {
        Some(Some(module)) => Some(file(module)),
        Some(None) => None,
        None => match folder {
            // Defined in the folder's `mod.rs` itself.
            Some(folder) => Some(format!("{folder}/mod.rs")),
            None => panic!("cannot tell which module `{name}` is"),
        },
    }
}

/// Whether the source file `name` (relative to src/) holds tests only: the models'
/// folder `tests/`, or a folder's `tests.rs`, which its `mod.rs` must declare under
/// `#[cfg(test)]`.
fn is_test_only(name: &str) -> bool {
    if name.starts_with("tests/") {
        return true;
    }
    let Some(folder) = name.strip_suffix("/tests.rs") else {
        return false;
    };
    let declared =
        std::fs::read_to_string(root().join("src").join(folder).join("mod.rs")).unwrap_or_default();
    assert!(
        declared.contains("#[cfg(test)]\nmod tests;"),
        "src/{name} is skipped as tests, but src/{folder}/mod.rs does not declare it under #[cfg(test)]"
    );
    true
}

/// Whether `crate::{segment}` names an item through lib.rs's re-exports (which serve
/// users) rather than a module: inside the crate, items are imported by their
/// module's path, so that the imports draw the layers as they are.
fn through_reexport(
    segment: &str,
    ranks: &BTreeMap<String, usize>,
    root_names: &BTreeMap<String, Option<String>>,
) -> bool {
    let module = [format!("{segment}.rs"), format!("{segment}/mod.rs")];
    !module.iter().any(|file| ranks.contains_key(file)) && root_names.contains_key(segment)
}

/// The names of the methods each `impl Shared {` block of `code` defines.
fn shared_methods(code: &str) -> Vec<String> {
    let mut methods = Vec::new();
    for (at, _) in code.match_indices("impl Shared {") {
        let body = &code[at + "impl Shared {".len()..];
        let mut depth = 1;
        for (i, c) in body.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                'f' if depth == 1 && body[i..].starts_with("fn ") && starts_word(body, i) => {
                    methods.extend(ident(&body[i + 3..]));
                }
                _ => {}
            }
        }
    }
    methods
}

/// Whether a word starts at `at` in `text` (no identifier character before it).
fn starts_word(text: &str, at: usize) -> bool {
    text[..at]
        .chars()
        .next_back()
        .is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
}

/// Every `fn` name defined anywhere in `code`.
fn fn_names(code: &str) -> Vec<String> {
    code.match_indices("fn ")
        .filter(|&(i, _)| starts_word(code, i))
        .filter_map(|(i, _)| ident(&code[i + 3..]))
        .collect()
}
fn sources(dir: &Path, prefix: &str, out: &mut Vec<(String, PathBuf)>) {
    for entry in std::fs::read_dir(dir).expect("src/") {
        let path = entry.expect("an entry").path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            sources(&path, &format!("{prefix}{name}/"), out);
        } else if name.ends_with(".rs") {
            out.push((format!("{prefix}{name}"), path));
        }
    }
}

/// Every violation of the order in the checkout at `root`.
fn violations(root: &Path) -> Vec<String> {
    let ranks = ranks(root);
    let src = root.join("src");
    let crate_names = reexports(&code(&src.join("lib.rs")));
    let mut files = Vec::new();
    sources(&src, "", &mut files);
    files.sort();
    let mut found = Vec::new();
    // Which driver file defines each `Shared` method, for names defined once in the
    // crate (a name shared with another type's method cannot be told apart by text).
    let mut defined_in = BTreeMap::new();
    let mut defined = BTreeMap::<String, usize>::new();
    for (name, path) in &files {
        if is_test_only(name) {
            continue;
        }
        let code = code(path);
        for f in fn_names(&code) {
            *defined.entry(f).or_default() += 1;
        }
        if name.starts_with("driver/") {
            for method in shared_methods(&code) {
                defined_in.insert(method, name.clone());
            }
        }
    }
    defined_in.retain(|method, _| defined[method] == 1);
    for (name, path) in &files {
        if name == "lib.rs" || is_test_only(name) {
            continue; // the top, and tests (which may use anything)
        }
        let Some(&rank) = ranks.get(name) else {
            found.push(format!("{name} is not in DESIGN.md's module table"));
            continue;
        };
        let folder = name.rsplit_once('/').map(|(folder, _)| folder);
        let folder_names = folder.map_or_else(BTreeMap::new, |folder| {
            reexports(&code(&src.join(folder).join("mod.rs")))
        });
        let code = code(path);
        let mut targets = BTreeSet::new();
        for segment in first_segments(&code, "crate::") {
            if Some(segment.as_str()) == folder {
                continue; // a path into its own folder, as `super::` is
            }
            if through_reexport(&segment, &ranks, &crate_names) {
                found.push(format!(
                    "{name} names `crate::{segment}` through lib.rs's re-exports: import it by its module's path"
                ));
            }
            targets.extend(target(&segment, None, &ranks, &crate_names, &folder_names));
        }
        if folder.is_some() {
            for segment in first_segments(&code, "super::") {
                targets.extend(target(
                    &segment,
                    folder,
                    &ranks,
                    &crate_names,
                    &folder_names,
                ));
            }
        }
        for target in targets {
            if target != *name && ranks[&target] >= rank {
                found.push(format!("{name} uses {target}, which is not below it"));
            }
        }
        if folder == Some("driver") {
            for (method, home) in &defined_in {
                if home == name || ranks[home] < rank {
                    continue;
                }
                let calls = [format!(".{method}("), format!("Shared::{method}(")];
                if calls.iter().any(|call| code.contains(call.as_str())) {
                    found.push(format!(
                        "{name} calls Shared::{method}, defined in {home}, which is not below it"
                    ));
                }
            }
        }
    }
    found
}

#[test]
fn modules_use_only_modules_below_them_in_designs_list() {
    let found = violations(&root());
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_check_sees_a_use_a_path_and_a_call_upwards() {
    let code = "use crate::{wheel::Wheel, Sleep};\nlet x = crate::background::runtime();";
    assert_eq!(
        first_segments(code, "crate::"),
        ["Sleep", "background", "wheel"].map(String::from).into()
    );
    let methods =
        shared_methods("impl Shared {\n    fn turn(&self) {\n        fn inner() {}\n    }\n}");
    assert_eq!(methods, ["turn"]);
    assert_eq!(
        reexports("pub use sleep::Sleep;\npub use tokio::time::{Instant, MissedTickBehavior};")
            ["Sleep"],
        Some("sleep".to_string())
    );
}

#[test]
fn the_check_refuses_an_import_through_a_root_reexport() {
    let ranks: BTreeMap<String, usize> = [("sleep.rs".to_string(), 0)].into();
    let names = reexports("pub use sleep::Sleep;\npub use tokio::time::Instant;");
    assert!(through_reexport("Sleep", &ranks, &names));
    assert!(through_reexport("Instant", &ranks, &names));
    assert!(!through_reexport("sleep", &ranks, &names));
}
