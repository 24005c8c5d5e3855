//! Random sequences of namespace and content calls on tmpfs, against a model of paths and files.

mod common;

use common::{fixture, Fixture};
use linux_raw_sys::errno::*;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use vfs::{Errno, NodeId, NodeKind, PAGE_SIZE, RENAME_EXCHANGE, RENAME_NOREPLACE};

/// Pages tmpfs may hold in these runs: few, so that writes meet `ENOSPC`.
const PAGE_LIMIT: usize = 12;

/// A path below `/tmp`, as components.
type Path = Vec<&'static str>;

#[derive(Clone, Debug)]
enum Operation {
    Create(Path),
    MakeDirectory(Path),
    Write {
        path: Path,
        offset: u64,
        length: usize,
        seed: u8,
    },
    Truncate {
        path: Path,
        size: u64,
    },
    Unlink(Path),
    RemoveDirectory(Path),
    Rename {
        from: Path,
        to: Path,
        flags: u32,
    },
    Link {
        from: Path,
        to: Path,
    },
    /// Opens the file at the path (directories are left alone).
    Open(Path),
    /// Closes the open file at this index, modulo how many there are.
    Close(usize),
    /// Writes through the open file at this index, linked or not.
    WriteOpen {
        handle: usize,
        offset: u64,
        length: usize,
        seed: u8,
    },
}

/// Two names and three levels: few enough paths that operations meet each other's results.
fn path() -> impl Strategy<Value = Path> {
    prop::collection::vec(prop_oneof![Just("a"), Just("b")], 1..=3)
}

fn operation() -> impl Strategy<Value = Operation> {
    let flags = prop_oneof![4 => Just(0), 1 => Just(RENAME_NOREPLACE), 1 => Just(RENAME_EXCHANGE)];
    prop_oneof![
        3 => path().prop_map(Operation::Create),
        3 => path().prop_map(Operation::MakeDirectory),
        4 => (path(), 0..5 * PAGE_SIZE as u64, 0..6000usize, any::<u8>())
            .prop_map(|(path, offset, length, seed)| Operation::Write { path, offset, length, seed }),
        2 => (path(), 0..5 * PAGE_SIZE as u64).prop_map(|(path, size)| Operation::Truncate { path, size }),
        2 => path().prop_map(Operation::Unlink),
        2 => path().prop_map(Operation::RemoveDirectory),
        3 => (path(), path(), flags).prop_map(|(from, to, flags)| Operation::Rename { from, to, flags }),
        1 => (path(), path()).prop_map(|(from, to)| Operation::Link { from, to }),
        1 => path().prop_map(Operation::Open),
        1 => any::<usize>().prop_map(Operation::Close),
        1 => (any::<usize>(), 0..3 * PAGE_SIZE as u64, 0..6000usize, any::<u8>())
            .prop_map(|(handle, offset, length, seed)| Operation::WriteOpen { handle, offset, length, seed }),
    ]
}

/// Bytes that show where they were meant to go.
fn data(length: usize, seed: u8) -> Vec<u8> {
    (0..length).map(|index| seed.wrapping_add(index as u8) | 1).collect()
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Entry {
    Directory,
    File(u64),
}

#[derive(Debug, Default)]
struct File {
    data: Vec<u8>,
    /// Indices of the pages tmpfs holds for it.
    pages: BTreeSet<u64>,
    links: u64,
    open: usize,
}

/// What tmpfs should hold: names, and files by a model inode number.
#[derive(Debug, Default)]
struct Model {
    entries: BTreeMap<Path, Entry>,
    files: BTreeMap<u64, File>,
    next_file: u64,
    pages_used: usize,
    /// The VFS's node of each model file.
    nodes: BTreeMap<u64, NodeId>,
    /// Open files: the VFS's node and the model's file.
    handles: Vec<(NodeId, u64)>,
}

impl Model {
    /// `ENOENT` or `ENOTDIR` if a directory on the way to `path` is missing or a file.
    fn check_parent(&self, path: &[&'static str]) -> Result<(), Errno> {
        for end in 1..path.len() {
            match self.entries.get(&path[..end]) {
                None => return Err(ENOENT),
                Some(Entry::File(_)) => return Err(ENOTDIR),
                Some(Entry::Directory) => {}
            }
        }
        Ok(())
    }

    fn resolve(&self, path: &[&'static str]) -> Result<Entry, Errno> {
        self.check_parent(path)?;
        self.entries.get(path).copied().ok_or(ENOENT)
    }

    fn has_children(&self, path: &[&'static str]) -> bool {
        self.entries.keys().any(|other| other.len() > path.len() && other.starts_with(path))
    }

    /// What a write of `data` at `offset` into file `file` does, the page limit applied.
    fn write(&mut self, file: u64, offset: u64, data: &[u8]) -> Result<usize, Errno> {
        if data.is_empty() {
            return Ok(0);
        }
        let page = PAGE_SIZE as u64;
        let file = self.files.get_mut(&file).unwrap();
        let mut done = 0;
        while done < data.len() {
            let position = offset + done as u64;
            if !file.pages.contains(&(position / page)) {
                if self.pages_used == PAGE_LIMIT {
                    break;
                }
                self.pages_used += 1;
                file.pages.insert(position / page);
            }
            done += (PAGE_SIZE - (position % page) as usize).min(data.len() - done);
        }
        if done == 0 {
            return Err(ENOSPC);
        }
        let end = offset as usize + done;
        if file.data.len() < end {
            file.data.resize(end, 0);
        }
        file.data[offset as usize..end].copy_from_slice(&data[..done]);
        Ok(done)
    }

    fn truncate(&mut self, file: u64, size: u64) {
        let file = self.files.get_mut(&file).unwrap();
        let dropped = file.pages.split_off(&size.div_ceil(PAGE_SIZE as u64));
        self.pages_used -= dropped.len();
        file.data.resize(size as usize, 0);
    }

    /// Drops a name of `file`, freeing it when no name and no handle is left.
    fn drop_link(&mut self, file: u64) {
        self.files.get_mut(&file).unwrap().links -= 1;
        self.free_if_unused(file);
    }

    fn free_if_unused(&mut self, file: u64) {
        let model = &self.files[&file];
        if model.links == 0 && model.open == 0 {
            self.pages_used -= model.pages.len();
            self.files.remove(&file);
            self.nodes.remove(&file);
        }
    }

    /// The entries of the subtree at `path`, taken out, with paths relative to it.
    fn take_subtree(&mut self, path: &[&'static str]) -> Vec<(Path, Entry)> {
        let keys: Vec<Path> = self.entries.keys().filter(|key| key.starts_with(path)).cloned().collect();
        keys.into_iter().map(|key| (key[path.len()..].to_vec(), self.entries.remove(&key).unwrap())).collect()
    }

    fn put_subtree(&mut self, path: &[&'static str], subtree: Vec<(Path, Entry)>) {
        for (relative, entry) in subtree {
            let mut key = path.to_vec();
            key.extend(relative);
            self.entries.insert(key, entry);
        }
    }

    fn rename(&mut self, from: &Path, to: &Path, flags: u32) -> Result<(), Errno> {
        self.check_parent(from)?;
        self.check_parent(to)?;
        let source = *self.entries.get(from).ok_or(ENOENT)?;
        let target = self.entries.get(to).copied();
        let exchange = flags & RENAME_EXCHANGE != 0;
        if flags & RENAME_NOREPLACE != 0 && target.is_some() {
            return Err(EEXIST);
        }
        if exchange && target.is_none() {
            return Err(ENOENT);
        }
        let (from_parent, to_parent) = (&from[..from.len() - 1], &to[..to.len() - 1]);
        if source == Entry::Directory && to_parent.starts_with(from) {
            return Err(EINVAL);
        }
        if target.is_some() && from_parent.starts_with(to) {
            return Err(if exchange { EINVAL } else { ENOTEMPTY });
        }
        if from == to || matches!((source, target), (Entry::File(a), Some(Entry::File(b))) if a == b) {
            return Ok(());
        }
        if exchange {
            let source_tree = self.take_subtree(from);
            let target_tree = self.take_subtree(to);
            self.put_subtree(to, source_tree);
            self.put_subtree(from, target_tree);
            return Ok(());
        }
        match (source, target) {
            (Entry::File(_), Some(Entry::Directory)) => return Err(EISDIR),
            (Entry::Directory, Some(Entry::File(_))) => return Err(ENOTDIR),
            (_, Some(Entry::Directory)) if self.has_children(to) => return Err(ENOTEMPTY),
            _ => {}
        }
        if let Some(target) = target {
            self.entries.remove(to);
            if let Entry::File(file) = target {
                self.drop_link(file);
            }
        }
        let subtree = self.take_subtree(from);
        self.put_subtree(to, subtree);
        Ok(())
    }
}

/// An errno where the model expects success, as a test failure saying what failed.
trait OrFail<T> {
    fn or_fail(self, what: impl std::fmt::Debug) -> Result<T, TestCaseError>;
}

impl<T> OrFail<T> for Result<T, Errno> {
    fn or_fail(self, what: impl std::fmt::Debug) -> Result<T, TestCaseError> {
        self.map_err(|error| TestCaseError::fail(format!("{what:?}: errno {error}")))
    }
}

/// `/tmp/<path>`.
fn absolute(path: &[&str]) -> String {
    format!("/tmp/{}", path.join("/"))
}

/// Runs `operation` on both and compares the results.
fn apply(fixture: &mut Fixture, model: &mut Model, operation: &Operation) -> Result<(), TestCaseError> {
    match operation {
        Operation::Create(path) => {
            let expected = model.resolve(path).map(Some).or_else(|error| match error {
                ENOENT if model.check_parent(path).is_ok() => Ok(None),
                error => Err(error),
            });
            let got = fixture.create(&absolute(path));
            match expected {
                Ok(Some(Entry::Directory)) => prop_assert_eq!(got, Err(EISDIR)),
                Ok(Some(Entry::File(file))) => prop_assert_eq!(got, Ok(model.nodes[&file])),
                Ok(None) => {
                    let node = got.or_fail(path)?;
                    let file = model.next_file;
                    model.next_file += 1;
                    model.files.insert(file, File { links: 1, ..File::default() });
                    model.nodes.insert(file, node);
                    model.entries.insert(path.clone(), Entry::File(file));
                }
                Err(error) => prop_assert_eq!(got, Err(error)),
            }
        }
        Operation::MakeDirectory(path) => {
            let expected = match model.resolve(path) {
                Ok(_) => Err(EEXIST),
                Err(ENOENT) if model.check_parent(path).is_ok() => Ok(()),
                Err(error) => Err(error),
            };
            prop_assert_eq!(fixture.make_directory(&absolute(path)).map(|_| ()), expected);
            if expected.is_ok() {
                model.entries.insert(path.clone(), Entry::Directory);
            }
        }
        Operation::Write { path, offset, length, seed } => {
            let bytes = data(*length, *seed);
            let got = fixture.resolve(&absolute(path)).and_then(|node| fixture.vfs.write(node, *offset, &bytes));
            let expected = match model.resolve(path) {
                Ok(Entry::File(file)) => model.write(file, *offset, &bytes),
                Ok(Entry::Directory) => Err(EISDIR),
                Err(error) => Err(error),
            };
            prop_assert_eq!(got, expected, "write {:?} at {}", path, offset);
        }
        Operation::Truncate { path, size } => {
            let got = fixture.resolve(&absolute(path)).and_then(|node| fixture.vfs.truncate(node, *size));
            let expected = match model.resolve(path) {
                Ok(Entry::File(file)) => {
                    model.truncate(file, *size);
                    Ok(())
                }
                Ok(Entry::Directory) => Err(EISDIR),
                Err(error) => Err(error),
            };
            prop_assert_eq!(got, expected);
        }
        Operation::Unlink(path) => {
            let expected = match model.resolve(path) {
                Ok(Entry::File(file)) => {
                    model.entries.remove(path);
                    model.drop_link(file);
                    Ok(())
                }
                Ok(Entry::Directory) => Err(EISDIR),
                Err(error) => Err(error),
            };
            prop_assert_eq!(fixture.unlink(&absolute(path)), expected);
        }
        Operation::RemoveDirectory(path) => {
            let expected = match model.resolve(path) {
                Ok(Entry::Directory) if model.has_children(path) => Err(ENOTEMPTY),
                Ok(Entry::Directory) => {
                    model.entries.remove(path);
                    Ok(())
                }
                Ok(Entry::File(_)) => Err(ENOTDIR),
                Err(error) => Err(error),
            };
            prop_assert_eq!(fixture.remove_directory(&absolute(path)), expected);
        }
        Operation::Rename { from, to, flags } => {
            let expected = model.rename(from, to, *flags);
            prop_assert_eq!(
                fixture.rename(&absolute(from), &absolute(to), *flags),
                expected,
                "rename {:?} {:?}",
                from,
                to
            );
        }
        Operation::Link { from, to } => {
            let expected = model.resolve(from).and_then(|source| {
                model.check_parent(to)?;
                if model.entries.contains_key(to) {
                    return Err(EEXIST);
                }
                match source {
                    Entry::Directory => Err(EPERM),
                    Entry::File(file) => Ok(file),
                }
            });
            prop_assert_eq!(fixture.link(&absolute(from), &absolute(to)), expected.map(|_| ()));
            if let Ok(file) = expected {
                model.entries.insert(to.clone(), Entry::File(file));
                model.files.get_mut(&file).unwrap().links += 1;
            }
        }
        Operation::Open(path) => {
            if let Ok(Entry::File(file)) = model.resolve(path) {
                let node = fixture.resolve(&absolute(path)).or_fail(path)?;
                fixture.vfs.open_node(node).unwrap();
                model.files.get_mut(&file).unwrap().open += 1;
                model.handles.push((node, file));
            }
        }
        Operation::Close(index) => {
            if !model.handles.is_empty() {
                let (node, file) = model.handles.remove(index % model.handles.len());
                prop_assert_eq!(fixture.vfs.close_node(node), Ok(()));
                model.files.get_mut(&file).unwrap().open -= 1;
                model.free_if_unused(file);
            }
        }
        Operation::WriteOpen { handle, offset, length, seed } => {
            if !model.handles.is_empty() {
                let (node, file) = model.handles[handle % model.handles.len()];
                let bytes = data(*length, *seed);
                let expected = model.write(file, *offset, &bytes);
                prop_assert_eq!(fixture.vfs.write(node, *offset, &bytes), expected);
            }
        }
    }
    Ok(())
}

/// Everything the model says is there, is, with the same contents, and nothing else is.
fn check(fixture: &Fixture, model: &Model) -> Result<(), TestCaseError> {
    let counts = fixture.vfs.counts();
    prop_assert_eq!(counts.tmpfs_pages, model.pages_used);
    prop_assert_eq!(
        counts.tmpfs_nodes,
        model.files.len() + model.entries.values().filter(|e| **e == Entry::Directory).count()
    );
    let open: BTreeSet<NodeId> = model.handles.iter().map(|(node, _)| *node).collect();
    prop_assert_eq!(counts.open_nodes, open.len());
    let mut directories: Vec<Path> = vec![vec![]];
    for (path, entry) in &model.entries {
        let node = fixture.resolve(&absolute(path)).or_fail(path)?;
        match entry {
            Entry::Directory => {
                prop_assert_eq!(fixture.vfs.kind(node), Ok(NodeKind::Directory));
                let subdirectories = model
                    .entries
                    .iter()
                    .filter(|(other, entry)| {
                        **entry == Entry::Directory && other.len() == path.len() + 1 && other.starts_with(path)
                    })
                    .count() as u64;
                prop_assert_eq!(fixture.vfs.stat(node).or_fail(path)?.links, 2 + subdirectories, "links of {:?}", path);
                directories.push(path.clone());
            }
            Entry::File(file) => {
                prop_assert_eq!(node, model.nodes[file]);
                let links = fixture.vfs.stat(node).or_fail(path)?.links;
                prop_assert_eq!(links, model.files[file].links);
            }
        }
    }
    for (node, file) in &model.handles {
        let contents = fixture.contents(*node).or_fail(file)?;
        prop_assert!(contents == model.files[file].data, "contents of open file {}", file);
    }
    for (file, node) in &model.nodes {
        prop_assert!(fixture.contents(*node).or_fail(file)? == model.files[file].data, "contents of file {}", file);
    }
    for directory in directories {
        let node = fixture.resolve(&absolute(&directory)).or_fail(&directory)?;
        let listed: BTreeSet<String> = fixture.listing(node).or_fail(&directory)?.into_iter().collect();
        let mut expected: BTreeSet<String> = [".", ".."].map(String::from).into();
        for path in model.entries.keys() {
            if path.len() == directory.len() + 1 && path.starts_with(&directory) {
                expected.insert(path[directory.len()].to_string());
            }
        }
        prop_assert_eq!(listed, expected, "listing of {:?}", directory);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn tmpfs_matches_the_model(operations in prop::collection::vec(operation(), 1..80)) {
        let mut fixture = fixture(PAGE_LIMIT);
        let mut model = Model::default();
        for operation in &operations {
            apply(&mut fixture, &mut model, operation)?;
            check(&fixture, &model)?;
        }
        // Close everything and remove everything, deepest first: every page comes back.
        for (node, _) in std::mem::take(&mut model.handles) {
            fixture.vfs.close_node(node).unwrap();
        }
        let mut paths: Vec<(Path, Entry)> = model.entries.iter().map(|(path, entry)| (path.clone(), *entry)).collect();
        paths.sort_by_key(|(path, _)| std::cmp::Reverse(path.len()));
        for (path, entry) in paths {
            match entry {
                Entry::Directory => fixture.remove_directory(&absolute(&path)).unwrap(),
                Entry::File(_) => fixture.unlink(&absolute(&path)).unwrap(),
            }
        }
        let counts = fixture.vfs.counts();
        prop_assert_eq!((counts.tmpfs_pages, counts.tmpfs_nodes, counts.open_nodes), (0, 0, 0));
        prop_assert_eq!(fixture.listing(fixture.resolve("/tmp").unwrap()).unwrap(), [".", ".."]);
    }
}
