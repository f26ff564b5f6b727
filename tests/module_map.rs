//! The module map at the top of `src/lib.rs`'s documentation stays true: every file or
//! directory it names exists, and every module `lib.rs` declares is named in it.

use std::path::Path;

fn lib_rs() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/lib.rs")).unwrap()
}

/// The `src/...` paths named in the map's table.
fn mapped() -> Vec<String> {
    let text = lib_rs();
    let start = text.find("//! # Where things are").expect("lib.rs has a module map");
    let end = start + text[start..].find("//! # The papers").expect("the map ends before the papers");
    text[start..end].split('`').filter(|t| t.starts_with("src/")).map(str::to_owned).collect()
}

#[test]
fn every_path_the_map_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let named = mapped();
    assert!(named.len() > 10, "the map names the crate's modules: {named:?}");
    for path in &named {
        let full = root.join(path);
        if path.ends_with('/') {
            assert!(full.join("mod.rs").is_file(), "the map names `{path}`, which is no module directory");
        } else {
            assert!(full.is_file(), "the map names `{path}`, which does not exist");
        }
    }
}

#[test]
fn every_module_lib_rs_declares_is_in_the_map() {
    let named = mapped();
    let text = lib_rs();
    let modules: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod ").or_else(|| l.strip_prefix("mod ")))
        .map(|l| l.trim_end_matches(';'))
        .collect();
    assert!(modules.len() > 10, "lib.rs declares its modules: {modules:?}");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for module in modules {
        let path = if root.join(module).is_dir() { format!("src/{module}/") } else { format!("src/{module}.rs") };
        assert!(named.contains(&path), "`{path}` is missing from the module map in src/lib.rs");
    }
}
