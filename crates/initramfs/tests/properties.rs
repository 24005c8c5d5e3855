//! Property tests: written trees read back, untrusted bytes never panic, link loops end.

use initramfs::{Archive, Entry, LookupError, Writer, MAX_SYMLINK_HOPS};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

/// What a path of a generated tree is.
#[derive(Clone, Debug, PartialEq)]
enum Node {
    Directory,
    File(Vec<u8>),
    Symlink(String),
}

/// A tree as the writer was told it, in writing order: (path, node).
type Tree = Vec<(String, Node)>;

/// Short names from a small alphabet, so that paths share prefixes and lookups meet
/// near-misses (`a` against `aa`).
fn component() -> impl Strategy<Value = String> {
    prop_oneof![Just("a"), Just("b"), Just("aa"), Just("bin"), Just("x.y")].prop_map(str::to_string)
}

fn relative_path() -> impl Strategy<Value = String> {
    prop::collection::vec(component(), 1..=4).prop_map(|components| components.join("/"))
}

fn node() -> impl Strategy<Value = Node> {
    prop_oneof![
        2 => Just(Node::Directory),
        3 => prop::collection::vec(any::<u8>(), 0..20).prop_map(Node::File),
        2 => (any::<bool>(), relative_path()).prop_map(|(absolute, target)| {
            Node::Symlink(if absolute { format!("/{target}") } else { target })
        }),
    ]
}

/// A tree: no path below a file or a link; some directories left implicit.
fn tree() -> impl Strategy<Value = Tree> {
    prop::collection::btree_map(relative_path(), node(), 0..24).prop_map(|nodes: BTreeMap<String, Node>| {
        let mut tree = Vec::new();
        for (path, node) in &nodes {
            let below_a_leaf =
                ancestors(path).any(|ancestor| nodes.get(ancestor).is_some_and(|n| *n != Node::Directory));
            if !below_a_leaf {
                tree.push((path.clone(), node.clone()));
            }
        }
        tree
    })
}

/// The proper prefixes of `path` that are paths: `a`, `a/b` for `a/b/c`.
fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    path.match_indices('/').map(move |(index, _)| &path[..index])
}

fn write(tree: &Tree) -> Vec<u8> {
    let mut writer = Writer::new();
    for (path, node) in tree {
        match node {
            Node::Directory => writer.directory(path, 0o755),
            Node::File(data) => writer.file(path, 0o644, data),
            Node::Symlink(target) => writer.symlink(path, target),
        }
    }
    writer.finish()
}

/// Every directory of the tree, implicit ones and the root (`""`) included, with the names
/// of its children.
fn directories(tree: &Tree) -> BTreeMap<String, BTreeSet<String>> {
    let mut directories: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    directories.insert(String::new(), BTreeSet::new());
    for (path, node) in tree {
        if *node == Node::Directory {
            directories.entry(path.clone()).or_default();
        }
        let mut parent = String::new();
        for component in path.split('/') {
            directories.entry(parent.clone()).or_default().insert(component.to_string());
            parent = if parent.is_empty() { component.to_string() } else { format!("{parent}/{component}") };
        }
    }
    directories
}

/// Calls every lookup on every name and a few odd paths; only panics matter here.
fn exercise(archive: &Archive) {
    for entry in archive.entries() {
        let _ = (entry.file_name(), entry.symlink_target(), entry.is_directory(), entry.is_file());
        for path in [entry.name, &format!("/{}/../{}", entry.name, entry.name), &format!("{}//./", entry.name)] {
            let _ = archive.find(path);
            let _ = archive.resolve(path, true);
            let _ = archive.resolve(path, false);
            if let Ok(children) = archive.read_dir(path) {
                for child in children {
                    let _ = archive.resolve(child.name, true);
                }
            }
        }
    }
    for path in ["", "/", "..", "/../..", "a/../b", "a/b/c/d"] {
        let _ = archive.find(path);
        let _ = archive.resolve(path, true);
        let _ = archive.read_dir(path).map(Iterator::count);
    }
}

/// A change to an archive's bytes: set a byte (often to a hex digit, NUL or `/`, which get
/// past more checks than random bytes), or cut the archive short.
#[derive(Clone, Debug)]
enum Mutation {
    Set(prop::sample::Index, u8),
    Truncate(prop::sample::Index),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let byte = prop_oneof![any::<u8>(), prop::sample::select(b"0123456789abcdefF\0/.".to_vec())];
    prop_oneof![
        6 => (any::<prop::sample::Index>(), byte).prop_map(|(index, value)| Mutation::Set(index, value)),
        1 => any::<prop::sample::Index>().prop_map(Mutation::Truncate),
    ]
}

proptest! {
    #[test]
    fn written_trees_read_back(tree in tree()) {
        let bytes = write(&tree);
        prop_assert_eq!(&bytes, &write(&tree), "the same tree gives the same bytes");
        let archive = Archive::parse(&bytes).unwrap();
        prop_assert_eq!(archive.len(), tree.len());
        for ((index, entry), (path, node)) in archive.entries().enumerate().zip(&tree) {
            prop_assert_eq!(entry.name, path.as_str());
            prop_assert_eq!(entry.inode as usize, index + 1, "inodes count up in writing order");
            let read_back = if entry.is_directory() {
                Node::Directory
            } else if entry.is_file() {
                Node::File(entry.data.to_vec())
            } else {
                Node::Symlink(entry.symlink_target().unwrap().to_string())
            };
            prop_assert_eq!(&read_back, node);
            for spelling in [path.clone(), format!("/{path}"), format!(".//{path}/."), format!("/zz/../{path}")] {
                prop_assert_eq!(archive.find(&spelling), Some(entry), "{}", spelling);
            }
            // With links only at the leaves, walking the path meets only directories, so the
            // walk and the exact lookup agree.
            prop_assert_eq!(archive.resolve(path, false), Ok(entry));
            if let Ok(target) = archive.resolve(path, true) {
                prop_assert!(!target.is_symlink());
            }
        }
        let explicit: BTreeSet<&str> = tree.iter().map(|(path, _)| path.as_str()).collect();
        for (directory, children) in directories(&tree) {
            let found = archive.find(&directory).unwrap();
            prop_assert!(found.is_directory());
            if !directory.is_empty() && !explicit.contains(directory.as_str()) {
                prop_assert_eq!(found.inode, 0, "{} is implicit", directory);
            }
            let listed: Vec<Entry> = archive.read_dir(&directory).unwrap().collect();
            let names: BTreeSet<String> = listed.iter().map(|entry| entry.file_name().to_string()).collect();
            prop_assert_eq!(listed.len(), names.len(), "each child once in {}", directory);
            prop_assert_eq!(&names, &children, "children of {}", directory);
        }
        exercise(&archive);
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..700)) {
        if let Ok(archive) = Archive::parse(&bytes) {
            exercise(&archive);
        }
    }

    #[test]
    fn changed_archives_never_panic(tree in tree(), mutations in prop::collection::vec(mutation(), 1..6)) {
        let mut bytes = write(&tree);
        for mutation in mutations {
            if bytes.is_empty() {
                break;
            }
            match mutation {
                Mutation::Set(index, value) => {
                    let position = index.index(bytes.len());
                    bytes[position] = value;
                }
                Mutation::Truncate(index) => bytes.truncate(index.index(bytes.len())),
            }
        }
        if let Ok(archive) = Archive::parse(&bytes) {
            exercise(&archive);
        }
    }

    #[test]
    fn link_loops_give_too_many_links(
        length in 1..=MAX_SYMLINK_HOPS + 1,
        spellings in prop::collection::vec(0..3usize, MAX_SYMLINK_HOPS + 1),
        start in 0..=MAX_SYMLINK_HOPS,
    ) {
        // loop/l0 -> l1 -> ... -> l(length-1) -> l0, each target spelt relative, absolute or
        // through `..`.
        let mut writer = Writer::new();
        writer.directory("loop", 0o755);
        for (index, spelling) in spellings.iter().take(length).enumerate() {
            let next = (index + 1) % length;
            let target = match spelling {
                0 => format!("l{next}"),
                1 => format!("/loop/l{next}"),
                _ => format!("../loop/./l{next}"),
            };
            writer.symlink(&format!("loop/l{index}"), &target);
        }
        let bytes = writer.finish();
        let archive = Archive::parse(&bytes).unwrap();
        let first = format!("/loop/l{}", start % length);
        prop_assert_eq!(archive.resolve(&first, true), Err(LookupError::TooManyLinks));
        prop_assert_eq!(archive.resolve(&format!("{first}/x"), false), Err(LookupError::TooManyLinks));
        prop_assert!(archive.resolve(&first, false).unwrap().is_symlink());
    }

    #[test]
    fn chains_of_links_end_at_the_limit(length in 1..=MAX_SYMLINK_HOPS + 3) {
        // c0 -> c1 -> ... -> c(length-1) -> file: `length` hops from c0.
        let mut writer = Writer::new();
        writer.file("file", 0o644, b"end");
        for index in 0..length {
            let target = if index + 1 == length { "file".to_string() } else { format!("c{}", index + 1) };
            writer.symlink(&format!("c{index}"), &target);
        }
        let bytes = writer.finish();
        let archive = Archive::parse(&bytes).unwrap();
        let resolved = archive.resolve("c0", true);
        if length <= MAX_SYMLINK_HOPS {
            prop_assert_eq!(resolved.map(|entry| entry.data), Ok(&b"end"[..]));
        } else {
            prop_assert_eq!(resolved, Err(LookupError::TooManyLinks));
        }
    }
}
