//! The direction inside the kernel: no room names a room of a higher rank ([`super::layers`]).

use super::layers::Room;
use super::source::{blank_comments_and_literals, named_paths, tokens, Start};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// Where the upward references still allowed are listed (from the workspace root).
pub const ALLOW_LIST: &str = "xtask/kernel-upward-allowed.txt";

/// One path a file of a kernel crate names in another room.
#[derive(Debug, Clone)]
pub struct Reference {
    /// From the workspace root.
    pub file: String,
    pub line: usize,
    pub from: Room,
    /// As written after `crate::` (or with the other crate's name first).
    pub name: String,
    pub to: Room,
}

impl Reference {
    pub fn is_upward(&self) -> bool {
        self.to.rank > self.from.rank
    }

    /// `kernel/src/sched/mod.rs:363: sched (4) names msg::drain (10)`.
    pub fn describe(&self) -> String {
        let room = self.to.room.replace('/', "::");
        let target = if self.name == room || self.name.starts_with(&format!("{room}::")) {
            self.to.rank.to_string()
        } else {
            format!("{} {}", self.to.room, self.to.rank)
        };
        format!("{}:{}: {} ({}) names {} ({target})", self.file, self.line, self.from.room, self.from.rank, self.name)
    }
}

/// What the kernel crates name across rooms.
#[derive(Debug, Default)]
pub struct Reading {
    /// Rows of the table whose crate exists.
    pub rooms: usize,
    /// Every reference from one room to another, upward or not, in file order.
    pub references: Vec<Reference>,
    /// Files no row covers, rows that cover no file.
    pub problems: Vec<String>,
}

/// The rows of one existing kernel crate, and what its root and macros make of `crate::x`.
struct KernelCrate<'a> {
    dir: &'a str,
    name: &'a str,
    rows: Vec<&'a Room>,
    /// `macro_rules!` names (exported ones live at the crate root) and the room defining them.
    macros: HashMap<String, &'a Room>,
    /// What the crate root imports, by last segment: `pub use boot::instance_entry`.
    root_imports: HashMap<String, Vec<String>>,
    /// Names a module of this crate takes from another kernel crate (`use base::sched;` at the
    /// root, `pub use base::percore::shared;` in `core`): the module path of the name here,
    /// the other crate's name, and the path there.
    aliases: Vec<(Vec<String>, String, Vec<String>)>,
}

impl<'a> KernelCrate<'a> {
    /// The row whose room is the longest prefix of `segments`.
    fn row(&self, segments: &[String]) -> Option<&'a Room> {
        self.rows
            .iter()
            .filter(|row| {
                let parts: Vec<&str> = row.room.split('/').collect();
                parts.len() <= segments.len() && parts.iter().zip(segments).all(|(part, segment)| part == segment)
            })
            .max_by_key(|row| row.room.len())
            .copied()
    }

    fn root_row(&self) -> Option<&'a Room> {
        self.rows.iter().find(|row| row.room == "main" || row.room == "lib").copied()
    }

    /// The room `crate::segments` lands in: a room's row, else an item of the crate root (a
    /// macro it exports, a name it imports, or its own).
    fn resolve(&self, segments: &[String]) -> Option<&'a Room> {
        if let Some(row) = self.row(segments) {
            return Some(row);
        }
        let first = segments.first()?;
        if let Some(row) = self.macros.get(first) {
            return Some(row);
        }
        if let Some(imported) = self.root_imports.get(first) {
            if let Some(row) = self.row(imported) {
                return Some(row);
            }
        }
        self.root_row()
    }
}

/// The room `crate::segments` of `kernel_crate` lands in, following names the crate takes
/// from another kernel crate (`crate::sched` is `base::sched` when the root says `use
/// base::sched;`); the longest alias that starts the path wins.
fn resolve_across<'a>(
    crates: &[KernelCrate<'a>],
    kernel_crate: &KernelCrate<'a>,
    segments: &[String],
) -> Option<&'a Room> {
    let mut current = kernel_crate;
    let mut path: Vec<String> = segments.to_vec();
    // Aliases lead to another crate and never back (Cargo forbids the cycle): a few hops at most.
    for _ in 0..4 {
        let alias = current
            .aliases
            .iter()
            .filter(|(here, _, _)| here.len() <= path.len() && here.iter().zip(&path).all(|(a, b)| a == b))
            .max_by_key(|(here, _, _)| here.len());
        let Some((here, other, there)) = alias else {
            return current.resolve(&path);
        };
        let Some(next) = crates.iter().find(|candidate| candidate.name == other.as_str()) else {
            return current.resolve(&path);
        };
        let mut rest = there.clone();
        rest.extend_from_slice(&path[here.len()..]);
        path = rest;
        current = next;
    }
    current.resolve(&path)
}

/// A file's path under `src/` as segments: `proc/migrate.rs` is `[proc, migrate]`, `sched/mod.rs`
/// `[sched]`, `main.rs` `[main]`.
fn room_path(relative: &Path) -> Vec<String> {
    let mut segments: Vec<String> =
        relative.with_extension("").components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    if segments.len() > 1 && segments.last().is_some_and(|last| last == "mod") {
        segments.pop();
    }
    segments
}

/// Every `.rs` file under `directory`, sorted, skipping `target` and the directories in `skip`.
pub fn rust_files(directory: &Path, skip: &[PathBuf]) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![directory.to_path_buf()];
    while let Some(current) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&current) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|name| name != "target" && !name.to_string_lossy().starts_with('.'))
                    && !skip.contains(&path)
                {
                    pending.push(path);
                }
            } else if path.extension().is_some_and(|extension| extension == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// From the workspace root, with `/`.
pub fn relative_name(root: &Path, path: &Path) -> String {
    path.strip_prefix(root).unwrap_or(path).to_string_lossy().replace('\\', "/")
}

/// The row of `table` a file of a kernel crate falls in (`None` outside `src/` or in no row).
pub fn room_of_file<'a>(table: &'a [Room], crate_dir: &str, crate_path: &Path, file: &Path) -> Option<&'a Room> {
    let relative = file.strip_prefix(crate_path.join("src")).ok()?;
    let segments = room_path(relative);
    table
        .iter()
        .filter(|row| row.crate_dir == crate_dir)
        .filter(|row| {
            let parts: Vec<&str> = row.room.split('/').collect();
            parts.len() <= segments.len() && parts.iter().zip(&segments).all(|(part, segment)| part == segment)
        })
        .max_by_key(|row| row.room.len())
}

/// Reads every kernel crate of `table` that exists under `root`.
pub fn read(root: &Path, table: &[Room], kernel_crates: &[(&str, &str)]) -> Reading {
    let mut reading = Reading::default();
    let existing: Vec<(&str, &str)> =
        kernel_crates.iter().copied().filter(|(dir, _)| root.join(dir).join("src").is_dir()).collect();
    // First pass: every file's paths, and each crate's macros and root imports.
    let mut crates: Vec<KernelCrate> = Vec::new();
    let mut files = Vec::new();
    for &(dir, name) in &existing {
        let rows: Vec<&Room> = table.iter().filter(|row| row.crate_dir == dir).collect();
        reading.rooms += rows.len();
        let mut kernel_crate =
            KernelCrate { dir, name, rows, macros: HashMap::new(), root_imports: HashMap::new(), aliases: Vec::new() };
        let source = root.join(dir).join("src");
        let mut covered = BTreeSet::new();
        for file in rust_files(&source, &[]) {
            let relative = file.strip_prefix(&source).unwrap_or(&file).to_path_buf();
            let segments = room_path(&relative);
            let file_name = relative_name(root, &file);
            let Some(row) = kernel_crate.row(&segments) else {
                reading.problems.push(format!(
                    "{file_name}: room `{}` of crate {dir} is not in the layer table (xtask/src/check/layers.rs): add a row with its rank",
                    segments[0]
                ));
                continue;
            };
            covered.insert(row.room);
            let is_root = segments.len() == 1 && (segments[0] == "main" || segments[0] == "lib");
            let module: Vec<String> = if is_root { Vec::new() } else { segments.clone() };
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            let mut words: Vec<&str> =
                existing.iter().map(|&(_, other)| other).filter(|&other| other != name).collect();
            let room_words: Vec<String> =
                kernel_crate.rows.iter().filter_map(|row| row.room.split('/').next()).map(String::from).collect();
            if is_root {
                words.extend(room_words.iter().map(String::as_str));
            }
            let mut file_reading = named_paths(&tokens(&blank_comments_and_literals(&text)), &module, &words);
            for path in &mut file_reading.paths {
                // From the crate root, `boot::x` is `crate::boot::x`.
                if let Start::Word(word) = &path.start {
                    if is_root && room_words.contains(word) {
                        path.segments.insert(0, word.clone());
                        path.start = Start::ThisCrate;
                    }
                }
                if is_root && path.start == Start::ThisCrate {
                    if let Some(last) = path.segments.last() {
                        kernel_crate.root_imports.insert(last.clone(), path.segments.clone());
                    }
                }
                if let Start::Word(word) = &path.start {
                    let from_other_crate = existing.iter().any(|&(_, other)| other == word && other != name);
                    if let (true, Some(last)) = (from_other_crate, path.segments.last()) {
                        let mut here = module.clone();
                        here.push(last.clone());
                        kernel_crate.aliases.push((here, word.clone(), path.segments.clone()));
                    }
                }
            }
            for macro_name in &file_reading.macros {
                kernel_crate.macros.insert(macro_name.clone(), row);
            }
            files.push((crates.len(), file_name, row, file_reading));
        }
        for row in &kernel_crate.rows {
            if !covered.contains(row.room) {
                reading.problems.push(format!(
                    "xtask/src/check/layers.rs: room `{}` of crate {dir} holds no file: remove its row",
                    row.room
                ));
            }
        }
        crates.push(kernel_crate);
    }
    // Second pass: where each path lands.
    for (crate_index, file, from, file_reading) in files {
        for path in file_reading.paths {
            let (target_crate, name) = match &path.start {
                Start::ThisCrate => (&crates[crate_index], path.segments.join("::")),
                Start::Word(word) => match crates.iter().find(|other| other.name == word) {
                    Some(other) => (other, format!("{word}::{}", path.segments.join("::"))),
                    None => continue,
                },
            };
            let Some(to) = resolve_across(&crates, target_crate, &path.segments) else {
                continue;
            };
            let same_room = target_crate.dir == crates[crate_index].dir && to.room == from.room;
            if !same_room {
                reading.references.push(Reference { file: file.clone(), line: path.line, from: *from, name, to: *to });
            }
        }
    }
    reading
}

/// The allow-list: `file -> name` a line, `#` starts a comment. Each entry with its line.
fn parse_allow_list(text: &str) -> Result<BTreeMap<(String, String), usize>, Vec<String>> {
    let mut entries = BTreeMap::new();
    let mut errors = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        match line.split_once("->") {
            Some((file, name)) if !file.trim().is_empty() && !name.trim().is_empty() => {
                let key = (file.trim().to_string(), name.trim().to_string());
                if entries.insert(key, number + 1).is_some() {
                    errors.push(format!("{ALLOW_LIST}:{}: the same entry twice: remove one", number + 1));
                }
            }
            _ => errors.push(format!("{ALLOW_LIST}:{}: not `file -> name`: `{line}`", number + 1)),
        }
    }
    if errors.is_empty() {
        Ok(entries)
    } else {
        Err(errors)
    }
}

/// Checks the kernel crates of `table` under `root` against the allow-list's text: the
/// summary line when every upward reference is allowed and every entry still used, else
/// every problem, one a line.
pub fn check(root: &Path, table: &[Room], kernel_crates: &[(&str, &str)], allow_list: &str) -> Result<String, String> {
    let reading = read(root, table, kernel_crates);
    let mut errors = reading.problems.clone();
    let mut allowed = parse_allow_list(allow_list).unwrap_or_else(|problems| {
        errors.extend(problems);
        BTreeMap::new()
    });
    let mut used = BTreeSet::new();
    let mut upward = 0;
    for reference in reading.references.iter().filter(|reference| reference.is_upward()) {
        upward += 1;
        let key = (reference.file.clone(), reference.name.clone());
        if allowed.contains_key(&key) {
            used.insert(key);
        } else {
            errors.push(format!("{}: upward", reference.describe()));
        }
    }
    allowed.retain(|key, _| !used.contains(key));
    for ((file, name), line) in allowed {
        errors.push(format!("{ALLOW_LIST}:{line}: allow-list entry no longer needed: remove it ({file} -> {name})"));
    }
    if errors.is_empty() {
        Ok(format!(
            "kernel layers: {} rooms, {} references, {upward} upward (all allowed)",
            reading.rooms,
            reading.references.len()
        ))
    } else {
        Err(format!(
            "kernel layers: a room names a higher one, or the table or {ALLOW_LIST} is out of date \
             (a lower room offers a registration the higher one fills at boot; see xtask/src/check/layers.rs):\n  {}",
            errors.join("\n  ")
        ))
    }
}

/// Today's upward references in the allow-list's format, grouped by the room naming them.
pub fn allow_list(reading: &Reading) -> String {
    // Keyed by the naming room's rank, crate and name; the entries are (file, name).
    type Entries = BTreeSet<(String, String)>;
    let mut by_room: BTreeMap<(u8, &str, &str), Entries> = BTreeMap::new();
    for reference in reading.references.iter().filter(|reference| reference.is_upward()) {
        by_room
            .entry((reference.from.rank, reference.from.crate_dir, reference.from.room))
            .or_default()
            .insert((reference.file.clone(), reference.name.clone()));
    }
    let mut text = String::from(
        "# Upward references between kernel rooms that `cargo xtask check` still lets pass: the\n\
         # list only shrinks. One a line, `file -> name` (the path as the file writes it after\n\
         # `crate::`), grouped by the room naming it. An entry no file needs any more fails the\n\
         # check: remove it. Ranks: xtask/src/check/layers.rs.\n",
    );
    for ((rank, crate_dir, room), entries) in by_room {
        text.push_str(&format!("\n# {room} ({rank}) in {crate_dir}\n"));
        for (file, name) in entries {
            text.push_str(&format!("{file} -> {name}\n"));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::layers::room;
    use crate::check::tests::FakeTree;

    const TABLE: &[Room] = &[
        room("kernel/base", "arch", 0, "hardware"),
        room("kernel/base", "sched", 4, "scheduler"),
        room("kernel/base", "lib", 9, "root"),
        room("kernel", "low", 2, "a base room still in the kernel"),
        room("kernel", "service/page", 10, "a path prefix with its own rank"),
        room("kernel", "service", 11, "a service"),
        room("kernel", "high", 12, "a higher service"),
        room("kernel", "main", 20, "root"),
    ];
    const CRATES: [(&str, &str); 2] = [("kernel/base", "base"), ("kernel", "kernel")];

    fn tree(extra: &[(&str, &str)]) -> FakeTree {
        let mut files = vec![
            ("kernel/src/main.rs", "mod high;\nmod low;\nmod service;\npub use high::entry;\n"),
            ("kernel/src/high.rs", "//! High.\npub fn entry() {}\n"),
            ("kernel/src/low.rs", "//! Low.\npub fn helper() {}\n"),
            ("kernel/src/service/mod.rs", "//! Service.\npub mod page;\npub struct Answer;\n"),
            ("kernel/src/service/page.rs", "//! Page.\n"),
        ];
        files.extend_from_slice(extra);
        FakeTree::new(&files)
    }

    #[test]
    fn an_upward_reference_fails_with_its_file_line_and_name() {
        let tree = tree(&[(
            "kernel/src/low.rs",
            "//! Low: names crate::high::entry only in comments and \"crate::high::entry\" strings.\nuse crate::{\n    service::Answer,\n    high::entry as go,\n};\n",
        )]);
        let error = check(&tree.root, TABLE, &CRATES, "").unwrap_err();
        assert!(error.contains("kernel/src/low.rs:3: low (2) names service::Answer (11): upward"), "{error}");
        assert!(error.contains("kernel/src/low.rs:4: low (2) names high::entry (12): upward"), "{error}");
        assert_eq!(error.matches("upward\n").count() + error.ends_with("upward") as usize, 2, "{error}");
    }

    #[test]
    fn a_downward_reference_passes() {
        let tree = tree(&[(
            "kernel/src/high.rs",
            "//! High.\npub fn entry() { crate::low::helper(); crate::service::page::x(); }\n",
        )]);
        let summary = check(&tree.root, TABLE, &CRATES, "").unwrap();
        assert!(summary.ends_with("3 references, 0 upward (all allowed)"), "{summary}");
    }

    #[test]
    fn an_allowed_upward_reference_passes_and_a_stale_entry_fails() {
        let tree = tree(&[("kernel/src/low.rs", "//! Low.\npub fn helper() { crate::high::entry() }\n")]);
        let allowed = "# low\nkernel/src/low.rs -> high::entry  # until high registers a hook\n";
        let summary = check(&tree.root, TABLE, &CRATES, allowed).unwrap();
        assert!(summary.ends_with("2 references, 1 upward (all allowed)"), "{summary}");
        let stale = format!("{allowed}kernel/src/low.rs -> service::Answer\n");
        let error = check(&tree.root, TABLE, &CRATES, &stale).unwrap_err();
        assert!(
            error.contains(&format!(
                "{ALLOW_LIST}:3: allow-list entry no longer needed: remove it (kernel/src/low.rs -> service::Answer)"
            )),
            "{error}"
        );
    }

    #[test]
    fn super_a_prefix_room_and_a_root_import_resolve_to_their_rooms() {
        let tree = tree(&[
            ("kernel/src/service/page.rs", "//! Page.\nuse super::Answer;\nmod tests { use super::*; }\n"),
            ("kernel/src/low.rs", "//! Low.\nfn f() { let _ = crate::entry as fn(); }\n"),
        ]);
        let error = check(&tree.root, TABLE, &CRATES, "").unwrap_err();
        assert!(
            error.contains("kernel/src/service/page.rs:2: service/page (10) names service::Answer (11)"),
            "{error}"
        );
        assert!(error.contains("kernel/src/low.rs:2: low (2) names entry (high 12)"), "{error}");
        assert!(!error.contains("page.rs:3"), "super::* in its own inline module stays in the room: {error}");
    }

    #[test]
    fn a_file_outside_the_table_and_a_row_without_files_fail() {
        let tree = tree(&[("kernel/src/stray.rs", "//! Stray.\n")]);
        let error = check(&tree.root, TABLE, &CRATES, "").unwrap_err();
        assert!(
            error.contains("kernel/src/stray.rs: room `stray` of crate kernel is not in the layer table"),
            "{error}"
        );
        let mut table = TABLE.to_vec();
        table.push(room("kernel", "gone", 13, "moved away"));
        let error = check(&tree.root, &table, &CRATES, "").unwrap_err();
        assert!(error.contains("room `gone` of crate kernel holds no file: remove its row"), "{error}");
    }

    #[test]
    fn the_base_crate_has_its_own_rooms_and_the_kernel_names_it_downward() {
        let tree = tree(&[
            ("kernel/base/src/lib.rs", "//! Base.\npub mod arch;\npub mod sched;\n"),
            ("kernel/base/src/arch.rs", "//! Arch.\npub fn halt() { crate::sched::yield_now() }\n"),
            ("kernel/base/src/sched.rs", "//! Sched.\npub fn yield_now() { crate::arch::halt() }\n"),
            ("kernel/src/high.rs", "//! High.\nuse base::{arch::halt, sched};\n"),
        ]);
        let error = check(&tree.root, TABLE, &CRATES, "").unwrap_err();
        assert!(error.contains("kernel/base/src/arch.rs:2: arch (0) names sched::yield_now (4): upward"), "{error}");
        assert!(!error.contains("kernel/src/high.rs"), "{error}");
        let summary = check(&tree.root, TABLE, &CRATES, "kernel/base/src/arch.rs -> sched::yield_now").unwrap();
        assert!(summary.starts_with("kernel layers: 8 rooms, 5 references, 1 upward"), "{summary}");
    }
}
