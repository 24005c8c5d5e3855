//! The initramfs as a tree, indexed once: lookups and listings without scanning the archive.

use crate::node::{device_number, Filesystem, Metadata};
use alloc::collections::BTreeMap;
use alloc::vec;
use alloc::vec::Vec;
use initramfs::{mode, Archive, Entry};

/// Index of the root in [`ArchiveIndex::nodes`].
pub(crate) const ROOT: u32 = 0;

/// One path of the archive.
#[derive(Debug)]
pub(crate) struct IndexNode {
    /// The last component (`sh` for `bin/sh`); empty for the root.
    pub name: &'static [u8],
    /// The directory holding it (the root's is the root).
    pub parent: u32,
    /// Its entry; `None` for a directory no header names, only other names' prefixes.
    pub entry: Option<Entry<'static>>,
    /// The children, sorted by name, for lookups by binary search and listings by position.
    pub children: Vec<u32>,
    /// How many of the children are directories, for the directory's link count.
    pub subdirectories: u32,
}

impl IndexNode {
    /// `st_mode`: the entry's, or that of a directory `0755` for an implicit one.
    pub fn mode(&self) -> u32 {
        self.entry.map_or(mode::DIRECTORY | 0o755, |entry| entry.mode)
    }

    pub fn is_directory(&self) -> bool {
        self.mode() & mode::TYPE_MASK == mode::DIRECTORY
    }

    /// What `stat` says of the node at `index` of the archive, mounts aside (the root's link
    /// count also counts the mount points: [`Vfs::stat`](crate::Vfs::stat) adds them).
    pub fn metadata(&self, index: u32) -> Metadata {
        let mut metadata = Metadata::blank(Filesystem::Archive.device(), u64::from(index) + 1, 0);
        metadata.mode = self.mode();
        if let Some(entry) = self.entry {
            metadata.uid = entry.uid;
            metadata.gid = entry.gid;
            metadata.links = u64::from(entry.nlink.max(1));
            metadata.rdev = device_number(entry.node_major, entry.node_minor);
            metadata.size = entry.data.len() as u64;
            metadata.blocks = metadata.size.div_ceil(512);
            let time = u64::from(entry.mtime) * 1_000_000_000;
            (metadata.accessed, metadata.modified, metadata.changed) = (time, time, time);
        }
        if self.is_directory() {
            // Counted, not taken from the archive: programs like GNU find trust a directory's
            // link count to know how many subdirectories it has.
            metadata.links = 2 + u64::from(self.subdirectories);
        }
        metadata
    }
}

/// Every path of an archive with its parent and children, built once when the [`Vfs`] is
/// made (the archive's own lookups scan it whole, and its listings are quadratic).
///
/// [`Vfs`]: crate::Vfs
#[derive(Debug)]
pub(crate) struct ArchiveIndex {
    pub nodes: Vec<IndexNode>,
}

impl ArchiveIndex {
    /// Indexes `archive`; without one, the root alone. When a name appears twice the last
    /// entry counts, as when Linux unpacks an initramfs; `..` in a name is applied to the
    /// components before it, and never climbs above the root.
    pub fn new(archive: Option<Archive<'static>>) -> Self {
        let root = IndexNode { name: b"", parent: ROOT, entry: None, children: Vec::new(), subdirectories: 0 };
        let mut nodes = vec![root];
        // (parent, name) → index, only while building: afterwards each directory's sorted
        // children answer lookups.
        let mut by_name: BTreeMap<(u32, &'static [u8]), u32> = BTreeMap::new();
        for entry in archive.iter().flat_map(Archive::entries) {
            let mut current = ROOT;
            let components: Vec<&'static str> =
                entry.name.split('/').filter(|component| !component.is_empty() && *component != ".").collect();
            for component in components {
                if component == ".." {
                    current = nodes[current as usize].parent;
                    continue;
                }
                let name = component.as_bytes();
                current = *by_name.entry((current, name)).or_insert_with(|| {
                    let index = nodes.len() as u32;
                    nodes.push(IndexNode {
                        name,
                        parent: current,
                        entry: None,
                        children: Vec::new(),
                        subdirectories: 0,
                    });
                    index
                });
            }
            let node = &mut nodes[current as usize];
            // The root stays a directory whatever an odd archive says of `.`.
            if current != ROOT || entry.is_directory() {
                node.entry = Some(entry);
            }
        }
        // `by_name` is sorted by parent, then name: each directory's children come in order.
        for (&(parent, _), &child) in &by_name {
            let is_directory = nodes[child as usize].is_directory();
            let parent = &mut nodes[parent as usize];
            parent.children.push(child);
            parent.subdirectories += u32::from(is_directory);
        }
        Self { nodes }
    }

    pub fn node(&self, index: u32) -> Option<&IndexNode> {
        self.nodes.get(index as usize)
    }

    /// The child of `directory` named `name`.
    pub fn lookup(&self, directory: u32, name: &[u8]) -> Option<u32> {
        let children = &self.node(directory)?.children;
        let position = children.binary_search_by(|&child| self.nodes[child as usize].name.cmp(name)).ok()?;
        Some(children[position])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use initramfs::Writer;

    fn index(build: impl FnOnce(&mut Writer)) -> ArchiveIndex {
        let mut writer = Writer::new();
        build(&mut writer);
        let bytes: &'static [u8] = alloc::boxed::Box::leak(writer.finish().into_boxed_slice());
        ArchiveIndex::new(Some(Archive::parse(bytes).unwrap()))
    }

    fn find(index: &ArchiveIndex, path: &str) -> Option<u32> {
        path.split('/').try_fold(ROOT, |directory, name| index.lookup(directory, name.as_bytes()))
    }

    #[test]
    fn implicit_directories_and_sorted_children() {
        let index = index(|writer| {
            writer.file("usr/bin/env", 0o755, b"#!");
            writer.directory("bin", 0o700);
            writer.symlink("bin/sh", "busybox");
            writer.file("bin/busybox", 0o755, b"\x7fELF");
        });
        let usr = find(&index, "usr").unwrap();
        assert!(index.nodes[usr as usize].entry.is_none());
        assert_eq!(index.nodes[usr as usize].mode(), mode::DIRECTORY | 0o755);
        let bin = find(&index, "bin").unwrap();
        assert_eq!(index.nodes[bin as usize].mode(), mode::DIRECTORY | 0o700);
        let names: Vec<&[u8]> =
            index.nodes[bin as usize].children.iter().map(|&c| index.nodes[c as usize].name).collect();
        assert_eq!(names, [&b"busybox"[..], b"sh"]);
        assert_eq!(index.nodes[ROOT as usize].subdirectories, 2);
        assert_eq!(find(&index, "usr/bin/env").map(|n| index.nodes[n as usize].parent), find(&index, "usr/bin"));
        assert_eq!(find(&index, "usr/sbin"), None);
    }

    #[test]
    fn the_last_entry_of_a_name_counts_and_dot_dot_stays_inside() {
        let index = index(|writer| {
            writer.file("./etc/motd", 0o644, b"old");
            writer.file("/etc//motd", 0o600, b"new");
            writer.file("../../x", 0o644, b"x");
        });
        let motd = find(&index, "etc/motd").unwrap();
        assert_eq!(index.nodes[motd as usize].entry.unwrap().data, b"new");
        assert_eq!(index.nodes[ROOT as usize].children.len(), 2, "etc and x, once each");
        assert!(find(&index, "x").is_some());
    }
}
