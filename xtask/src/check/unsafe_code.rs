//! Where `unsafe` may be: the base, the raw-memory cores of `channel` and `syspage`, `rt`;
//! every other crate forbids or denies it at its root.

use super::kernel_layers::{relative_name, room_of_file, rust_files};
use super::layers::{Room, BASE_RANKS_BELOW};
use super::source::{blank_comments_and_literals, tokens};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crates that may hold `unsafe` anywhere, and why.
pub const ALLOWED_CRATES: [(&str, &str); 4] = [
    ("kernel/base", "the kernel's base: hardware, memory, per-core state, the scheduler's mechanism"),
    ("crates/channel", "the raw-memory core of the channels in the shared region"),
    ("crates/syspage", "the raw-memory core of the syspages"),
    ("crates/rt", "the user-space runtime: system calls and the syspage rings of a process"),
];

/// Files outside the allowed places that still hold `unsafe`, with a count.
pub const ALLOW_LIST: &str = "xtask/unsafe-allowed.txt";

/// Crates that need not forbid `unsafe` at their root (`attribute`) or may hold it (`unsafe`).
pub const EXEMPTIONS: &str = "xtask/unsafe-exempt-crates.txt";

/// The words that make a line unsafe: what rustc's `unsafe_code` lint reports (an `unsafe`
/// block, fn, impl, trait or attribute; `no_mangle`, `export_name`, `link_section`;
/// `global_asm!`, which needs no `unsafe` block but is as unchecked).
const UNSAFE_WORDS: [&str; 5] = ["unsafe", "no_mangle", "export_name", "link_section", "global_asm"];

/// A workspace crate: its directory and root files (from the workspace root, with `/`).
#[derive(Debug, Clone)]
pub struct Package {
    pub dir: String,
    pub roots: Vec<String>,
}

/// The lines of `text` that hold `unsafe` code (comments and strings do not count).
pub fn unsafe_lines(text: &str) -> Vec<usize> {
    let lines: BTreeSet<usize> = tokens(&blank_comments_and_literals(text))
        .into_iter()
        .filter(|token| UNSAFE_WORDS.contains(&token.text.as_str()))
        .map(|token| token.line)
        .collect();
    lines.into_iter().collect()
}

/// Whether a crate root says `#![forbid(unsafe_code)]` or `#![deny(unsafe_code)]`.
pub fn refuses_unsafe(text: &str) -> bool {
    let tokens = tokens(&blank_comments_and_literals(text));
    tokens.windows(5).enumerate().any(|(index, window)| {
        let texts: Vec<&str> = window.iter().map(|token| token.text.as_str()).collect();
        matches!(texts.as_slice(), ["#", "!", "[", "forbid" | "deny", "("])
            && tokens[index + 5..].iter().take_while(|token| token.text != ")").any(|token| token.text == "unsafe_code")
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exemption {
    /// The crate root need not forbid `unsafe`; its files are still checked.
    Attribute,
    /// The crate may hold `unsafe` (a user program's raw system calls).
    Unsafe,
}

fn parse_exemptions(text: &str, errors: &mut Vec<String>) -> BTreeMap<String, (Exemption, usize)> {
    let mut exemptions = BTreeMap::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or_default().trim();
        let words: Vec<&str> = line.split_whitespace().collect();
        let kind = match words.as_slice() {
            [] => continue,
            ["attribute", _] => Exemption::Attribute,
            ["unsafe", _] => Exemption::Unsafe,
            _ => {
                errors.push(format!("{EXEMPTIONS}:{}: not `attribute DIR` or `unsafe DIR`: `{line}`", number + 1));
                continue;
            }
        };
        exemptions.insert(words[1].trim_end_matches('/').to_string(), (kind, number + 1));
    }
    exemptions
}

fn parse_allow_list(text: &str, errors: &mut Vec<String>) -> BTreeMap<String, (usize, usize)> {
    let mut entries = BTreeMap::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or_default().trim();
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            [] => {}
            [file, count] if count.parse::<usize>().is_ok() => {
                entries.insert(file.to_string(), (count.parse().unwrap_or_default(), number + 1));
            }
            _ => errors.push(format!("{ALLOW_LIST}:{}: not `FILE COUNT`: `{line}`", number + 1)),
        }
    }
    entries
}

/// What the scan found: files outside the allowed places with their unsafe lines.
#[derive(Debug, Default)]
pub struct Scan {
    pub outside: BTreeMap<String, Vec<usize>>,
    pub roots_refusing: usize,
    pub exempt: usize,
    pub problems: Vec<String>,
}

/// Scans every package: root attributes against the exemptions, and the files' `unsafe`.
pub fn scan(root: &Path, packages: &[Package], table: &[Room], exemptions: &str) -> Scan {
    let mut scan = Scan::default();
    let exemptions = parse_exemptions(exemptions, &mut scan.problems);
    let mut seen = BTreeSet::new();
    let package_paths: Vec<PathBuf> = packages.iter().map(|package| root.join(&package.dir)).collect();
    for package in packages {
        seen.insert(package.dir.clone());
        if ALLOWED_CRATES.iter().any(|(dir, _)| *dir == package.dir) {
            continue;
        }
        let path = root.join(&package.dir);
        // A crate's files, without those of crates inside its directory (kernel/base).
        let inner: Vec<PathBuf> =
            package_paths.iter().filter(|other| other.starts_with(&path) && **other != path).cloned().collect();
        let files = rust_files(&path, &inner);
        let refuses = !package.roots.is_empty()
            && package
                .roots
                .iter()
                .all(|file| refuses_unsafe(&std::fs::read_to_string(root.join(file)).unwrap_or_default()));
        let exemption = exemptions.get(&package.dir).copied();
        if refuses {
            scan.roots_refusing += 1;
        }
        match exemption {
            None if !refuses => {
                for file in package
                    .roots
                    .iter()
                    .filter(|file| !refuses_unsafe(&std::fs::read_to_string(root.join(file)).unwrap_or_default()))
                {
                    scan.problems.push(format!(
                        "{file}: crate {} may not hold unsafe: add #![forbid(unsafe_code)] at its root",
                        package.dir
                    ));
                }
            }
            Some((Exemption::Attribute, line)) if refuses => scan.problems.push(format!(
                "{EXEMPTIONS}:{line}: exemption no longer needed: {} forbids unsafe at its root: remove it",
                package.dir
            )),
            _ => {}
        }
        if let Some((Exemption::Unsafe, line)) = exemption {
            scan.exempt += 1;
            let any =
                files.iter().any(|file| !unsafe_lines(&std::fs::read_to_string(file).unwrap_or_default()).is_empty());
            if !any {
                scan.problems.push(format!(
                    "{EXEMPTIONS}:{line}: exemption no longer needed: {} holds no unsafe: remove it and forbid unsafe_code at its root",
                    package.dir
                ));
            }
            continue;
        }
        for file in files {
            let in_base =
                room_of_file(table, &package.dir, &path, &file).is_some_and(|row| row.rank < BASE_RANKS_BELOW);
            if in_base {
                continue;
            }
            let lines = unsafe_lines(&std::fs::read_to_string(&file).unwrap_or_default());
            if !lines.is_empty() {
                scan.outside.insert(relative_name(root, &file), lines);
            }
        }
    }
    for (dir, (_, line)) in &exemptions {
        if !seen.contains(dir) {
            scan.problems.push(format!("{EXEMPTIONS}:{line}: {dir} is no workspace crate: remove it"));
        }
    }
    scan
}

/// Checks where `unsafe` is against the allow-list's and the exemptions' text: a summary line,
/// or every problem, one a line.
pub fn check(
    root: &Path,
    packages: &[Package],
    table: &[Room],
    allow_list: &str,
    exemptions: &str,
) -> Result<String, String> {
    let scan = scan(root, packages, table, exemptions);
    let mut errors = scan.problems.clone();
    let mut allowed = parse_allow_list(allow_list, &mut errors);
    let mut lines_outside = 0;
    for (file, lines) in &scan.outside {
        lines_outside += lines.len();
        match allowed.remove(file) {
            None => {
                for line in lines {
                    errors.push(format!("{file}:{line}: unsafe outside the base and the crates allowed it"));
                }
            }
            Some((count, _)) if lines.len() > count => {
                let list: Vec<String> = lines.iter().map(usize::to_string).collect();
                errors.push(format!(
                    "{file}: {} lines with unsafe, {ALLOW_LIST} allows {count}: unsafe belongs in the base (lines {})",
                    lines.len(),
                    list.join(", ")
                ));
            }
            Some((count, line)) if lines.len() < count => errors.push(format!(
                "{ALLOW_LIST}:{line}: {file} now has {} lines with unsafe, not {count}: lower the count",
                lines.len()
            )),
            Some(_) => {}
        }
    }
    for (file, (_, line)) in allowed {
        errors.push(format!("{ALLOW_LIST}:{line}: allow-list entry no longer needed: remove it ({file})"));
    }
    if errors.is_empty() {
        Ok(format!(
            "unsafe: {lines_outside} lines in {} files outside the base (all allowed), {} crate roots forbid or deny it, {} crates exempt",
            scan.outside.len(),
            scan.roots_refusing,
            scan.exempt
        ))
    } else {
        Err(format!(
            "unsafe where it may not be, or {ALLOW_LIST} or {EXEMPTIONS} out of date \
             (unsafe belongs in the base: kernel ranks below {BASE_RANKS_BELOW}, {}):\n  {}",
            ALLOWED_CRATES.map(|(dir, _)| dir).join(", "),
            errors.join("\n  ")
        ))
    }
}

/// Today's files with `unsafe` outside the allowed places, in the allow-list's format.
pub fn allow_list(scan: &Scan) -> String {
    let mut text = String::from(
        "# Files outside the base that still hold `unsafe`, with the number of lines that do: the\n\
         # list only shrinks (a count that is now lower, or a file with none, fails the check until\n\
         # it is updated). The places allowed: xtask/src/check/unsafe_code.rs.\n",
    );
    let mut group = String::new();
    for (file, lines) in &scan.outside {
        let parts: Vec<&str> = file.split('/').collect();
        let this_group = if parts.get(1) == Some(&"src") {
            parts[..3.min(parts.len())].join("/")
        } else {
            parts[..2.min(parts.len())].join("/")
        };
        let this_group = this_group.trim_end_matches(".rs").to_string();
        if this_group != group {
            text.push_str(&format!("\n# {this_group}\n"));
            group = this_group;
        }
        text.push_str(&format!("{file} {}\n", lines.len()));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::layers::room;
    use crate::check::tests::FakeTree;

    const TABLE: &[Room] = &[
        room("kernel", "mm", 2, "base: memory"),
        room("kernel", "fs", 12, "a service"),
        room("kernel", "main", 20, "root"),
    ];
    const EXEMPT: &str = "attribute kernel  # holds the future base\n";

    fn packages() -> Vec<Package> {
        vec![
            Package { dir: "kernel".into(), roots: vec!["kernel/src/main.rs".into()] },
            Package { dir: "kernel/base".into(), roots: vec!["kernel/base/src/lib.rs".into()] },
            Package { dir: "crates/abi".into(), roots: vec!["crates/abi/src/lib.rs".into()] },
        ]
    }

    fn tree(extra: &[(&str, &str)]) -> FakeTree {
        let mut files = vec![
            ("kernel/src/main.rs", "//! Kernel.\nmod fs;\nmod mm;\n"),
            ("kernel/src/mm.rs", "//! Memory.\n// SAFETY: the base may.\npub fn f() { unsafe { g() } }\n"),
            ("kernel/src/fs.rs", "//! Files: `unsafe` in a comment does not count.\nconst S: &str = \"unsafe\";\n"),
            ("kernel/base/src/lib.rs", "//! Base.\n#[unsafe(no_mangle)]\npub unsafe extern \"C\" fn entry() {}\n"),
            ("crates/abi/src/lib.rs", "//! Abi.\n#![forbid(unsafe_code)]\n"),
        ];
        files.extend_from_slice(extra);
        FakeTree::new(&files)
    }

    #[test]
    fn unsafe_in_the_base_and_the_allowed_crates_passes() {
        let tree = tree(&[]);
        let summary = check(&tree.root, &packages(), TABLE, "", EXEMPT).unwrap();
        assert_eq!(summary, "unsafe: 0 lines in 0 files outside the base (all allowed), 1 crate roots forbid or deny it, 0 crates exempt");
    }

    #[test]
    fn unsafe_in_a_service_room_fails_with_its_lines() {
        let tree = tree(&[(
            "kernel/src/fs.rs",
            "//! Files.\nfn f() {\n    let x = unsafe { g() };\n}\n#[no_mangle]\nextern \"C\" fn h() {}\n",
        )]);
        let error = check(&tree.root, &packages(), TABLE, "", EXEMPT).unwrap_err();
        assert!(error.contains("kernel/src/fs.rs:3: unsafe outside the base"), "{error}");
        assert!(error.contains("kernel/src/fs.rs:5: unsafe outside the base"), "{error}");
        // Allowed for now with its count; then it can only shrink.
        assert!(check(&tree.root, &packages(), TABLE, "kernel/src/fs.rs 2 # for now", EXEMPT).is_ok());
        let error = check(&tree.root, &packages(), TABLE, "kernel/src/fs.rs 1", EXEMPT).unwrap_err();
        assert!(error.contains("kernel/src/fs.rs: 2 lines with unsafe, xtask/unsafe-allowed.txt allows 1"), "{error}");
        let error = check(&tree.root, &packages(), TABLE, "kernel/src/fs.rs 3", EXEMPT).unwrap_err();
        assert!(error.contains("kernel/src/fs.rs now has 2 lines with unsafe, not 3: lower the count"), "{error}");
        let error =
            check(&tree.root, &packages(), TABLE, "kernel/src/fs.rs 2\nkernel/src/mm.rs 1", EXEMPT).unwrap_err();
        assert!(error.contains("allow-list entry no longer needed: remove it (kernel/src/mm.rs)"), "{error}");
    }

    #[test]
    fn a_crate_root_must_refuse_unsafe_unless_exempt_and_exemptions_only_shrink() {
        let tree = tree(&[("crates/abi/src/lib.rs", "//! Abi.\n")]);
        let error = check(&tree.root, &packages(), TABLE, "", EXEMPT).unwrap_err();
        assert!(
            error.contains("crates/abi/src/lib.rs: crate crates/abi may not hold unsafe: add #![forbid(unsafe_code)]"),
            "{error}"
        );
        assert!(!error.contains("kernel/src/main.rs"), "{error}");
        let error = check(&tree.root, &packages(), TABLE, "", "").unwrap_err();
        assert!(error.contains("kernel/src/main.rs: crate kernel may not hold unsafe"), "{error}");
        let exempt = format!("{EXEMPT}unsafe crates/abi # raw calls\n");
        let error = check(&tree.root, &packages(), TABLE, "", &exempt).unwrap_err();
        assert!(error.contains("exemption no longer needed: crates/abi holds no unsafe"), "{error}");
        let tree = tree_with_abi("//! Abi.\n#![deny(unsafe_code)]\n");
        let exempt = format!("{EXEMPT}attribute crates/abi\n");
        let error = check(&tree.root, &packages(), TABLE, "", &exempt).unwrap_err();
        assert!(error.contains("exemption no longer needed: crates/abi forbids unsafe at its root"), "{error}");
    }

    fn tree_with_abi(text: &str) -> FakeTree {
        tree(&[("crates/abi/src/lib.rs", text)])
    }

    #[test]
    fn unsafe_lines_count_what_the_lint_reports() {
        let text = "#![deny(unsafe_code)]\n// unsafe\nunsafe impl Send for X {}\n#[unsafe(no_mangle)] static A: u8 = 0;\nglobal_asm!(\"\");\nlet s = \"unsafe\";\n";
        assert_eq!(unsafe_lines(text), [3, 4, 5]);
        assert!(refuses_unsafe(text));
        assert!(!refuses_unsafe("#![deny(missing_docs)]\n// #![forbid(unsafe_code)]\n"));
    }
}
