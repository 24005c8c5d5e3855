//! Finding entries by path: exact names, symbolic links followed, directory listings.
//!
//! Every lookup is a linear scan of the archive (a few hundred entries in Reef's image), and
//! nothing is allocated: a directory being walked is named by a slice of an entry's name.
//! When a name appears more than once, the last entry counts, as when Linux unpacks an
//! initramfs over itself. Relative paths are taken from the root.

use crate::archive::{Archive, Entry, Names};
use crate::path;
use core::fmt;

/// The most symbolic links one lookup follows, as a chain or nested in components, before it
/// gives up with [`LookupError::TooManyLinks`].
pub const MAX_SYMLINK_HOPS: usize = 8;

/// Why a path names no entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LookupError {
    /// No entry has this path, and no entry's path starts with it.
    NotFound,
    /// A component before the last, or the path given to `read_dir`, is neither a directory
    /// nor a symbolic link to one.
    NotADirectory,
    /// Following the path took more than [`MAX_SYMLINK_HOPS`] symbolic links: a loop, or a
    /// chain too long.
    TooManyLinks,
}

impl fmt::Display for LookupError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            Self::NotFound => "no such file or directory",
            Self::NotADirectory => "not a directory",
            Self::TooManyLinks => "too many levels of symbolic links",
        })
    }
}

impl core::error::Error for LookupError {}

impl<'a> Archive<'a> {
    /// The entry whose path is exactly `path`, symbolic links not followed. `path` may start
    /// with `/`, repeat separators and hold `.` and `..` components; `..` is applied to the
    /// text of the path (`a/b/../c` is `a/c`, whatever `a/b` is), and at the root it stays
    /// there. A directory that only exists as a prefix of other names is found too.
    pub fn find(&self, path: &str) -> Option<Entry<'a>> {
        let wanted = path::lexical_components_reversed(path);
        let wanted_count = wanted.clone().count();
        let mut explicit = None;
        let mut implicit = None;
        for (name, offset) in self.names() {
            let count = path::components(name).count();
            // Compared from the last component: an entry deeper than the path matches when
            // the path is a prefix of its name, which makes it an implicit directory.
            let Some(deeper_by) = count.checked_sub(wanted_count) else { continue };
            if !path::components(name).rev().skip(deeper_by).eq(wanted.clone()) {
                continue;
            }
            if deeper_by == 0 {
                explicit = Some(offset);
            } else if implicit.is_none() {
                implicit = Some(path::leading_components(name, wanted_count));
            }
        }
        self.explicit_or_implicit(explicit, implicit).or_else(|| {
            // The root exists even in an archive with no entry for it, or none at all.
            (wanted_count == 0).then(|| Entry::implicit_directory(""))
        })
    }

    /// The entry `path` leads to, following symbolic links: relative targets from the link's
    /// directory, absolute ones from the root, in every component and, when `follow_last`, in
    /// the last one too (without it, a link there is returned itself, as `lstat` does). `..`
    /// goes to the parent of the directory actually reached, as in a real file system.
    pub fn resolve(&self, path: &str, follow_last: bool) -> Result<Entry<'a>, LookupError> {
        // Paths still to walk, the latest link target on top: components are taken from the
        // top one, a used-up one is dropped. Each link followed adds one, so the hop limit
        // bounds the stack.
        let mut pending: [&str; MAX_SYMLINK_HOPS + 1] = [""; MAX_SYMLINK_HOPS + 1];
        pending[0] = path;
        let mut depth = 1usize;
        let mut hops = 0;
        let mut current = self.root();
        while let Some(top) = depth.checked_sub(1) {
            let Some((component, rest)) = path::split_first(pending[top]) else {
                depth = top;
                continue;
            };
            pending[top] = rest;
            if !current.is_directory() {
                return Err(LookupError::NotADirectory);
            }
            if component == ".." {
                current = self.find(path::parent(current.name)).ok_or(LookupError::NotFound)?;
                continue;
            }
            let child = self.child(current.name, component).ok_or(LookupError::NotFound)?;
            let is_last = pending[..depth].iter().all(|rest| path::split_first(rest).is_none());
            match child.symlink_target() {
                Some(target) if follow_last || !is_last => {
                    hops += 1;
                    if hops > MAX_SYMLINK_HOPS {
                        return Err(LookupError::TooManyLinks);
                    }
                    if target.is_empty() {
                        return Err(LookupError::NotFound);
                    }
                    if target.starts_with('/') {
                        current = self.root();
                    }
                    *pending.get_mut(depth).ok_or(LookupError::TooManyLinks)? = target;
                    depth += 1;
                }
                _ => current = child,
            }
        }
        Ok(current)
    }

    /// The immediate children of the directory `path` leads to (links followed, the last one
    /// too), each once, in the order their first entry appears, directories that only exist
    /// as a prefix of other names included.
    pub fn read_dir(&self, path: &str) -> Result<ReadDirectory<'a>, LookupError> {
        let directory = self.resolve(path, true)?;
        if !directory.is_directory() {
            return Err(LookupError::NotADirectory);
        }
        Ok(ReadDirectory { archive: *self, directory: directory.name, names: self.names(), position: 0 })
    }

    /// The root directory: the last entry named `.` or `/` if any, else an implicit one.
    fn root(&self) -> Entry<'a> {
        let root = self.names().filter(|(name, _)| path::split_first(name).is_none()).last();
        self.explicit_or_implicit(root.map(|(_, offset)| offset), None).unwrap_or(Entry::implicit_directory(""))
    }

    /// The entry at `explicit`, a header offset, if there is one, else the implicit directory
    /// named `implicit`.
    fn explicit_or_implicit(&self, explicit: Option<usize>, implicit: Option<&'a str>) -> Option<Entry<'a>> {
        match explicit {
            Some(offset) => self.entry_at(offset),
            None => implicit.map(Entry::implicit_directory),
        }
    }

    /// The entry named `name` in `directory` (given by its entry's name), or the implicit
    /// directory of that path if only deeper names start with it.
    fn child(&self, directory: &str, name: &str) -> Option<Entry<'a>> {
        self.child_among(self.names(), directory, name)
    }

    /// [`Archive::child`] among the entries `names` lists.
    fn child_among(&self, names: Names<'a>, directory: &str, name: &str) -> Option<Entry<'a>> {
        let mut explicit = None;
        let mut implicit = None;
        for (entry_name, offset) in names {
            let Some((component, after)) = child_component(entry_name, directory) else { continue };
            if component != name {
                continue;
            }
            if path::split_first(after).is_none() {
                explicit = Some(offset);
            } else if implicit.is_none() {
                implicit = Some(&entry_name[..entry_name.len() - after.len()]);
            }
        }
        self.explicit_or_implicit(explicit, implicit)
    }
}

/// The component of `name` right below `directory`, and the rest of `name` after it.
fn child_component<'n>(name: &'n str, directory: &str) -> Option<(&'n str, &'n str)> {
    path::split_first(path::strip_directory(name, directory)?)
}

/// The children of a directory: see [`Archive::read_dir`].
#[derive(Clone, Debug)]
pub struct ReadDirectory<'a> {
    archive: Archive<'a>,
    /// The directory's name, as its entry (or a deeper entry, if it is implicit) spells it.
    directory: &'a str,
    /// The entries not yet looked at.
    names: Names<'a>,
    /// How many entries `names` has passed.
    position: usize,
}

impl<'a> Iterator for ReadDirectory<'a> {
    type Item = Entry<'a>;

    fn next(&mut self) -> Option<Entry<'a>> {
        loop {
            // The entries from this one on: where to look for the child's last entry.
            let from_here = self.names.clone();
            let (entry_name, _) = self.names.next()?;
            let earlier = self.position;
            self.position += 1;
            let Some((name, _)) = child_component(entry_name, self.directory) else { continue };
            // A child is listed at the first entry that names it or a path below it, so no
            // entry before this one names it, and its last entry, if any, is still ahead.
            let seen_before = self
                .archive
                .names()
                .take(earlier)
                .any(|(before, _)| child_component(before, self.directory).is_some_and(|(other, _)| other == name));
            if !seen_before {
                return self.archive.child_among(from_here, self.directory, name);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Writer;
    use alloc::vec::Vec;

    fn archive_bytes(build: impl FnOnce(&mut Writer)) -> Vec<u8> {
        let mut writer = Writer::new();
        build(&mut writer);
        writer.finish()
    }

    fn names<'a>(entries: impl Iterator<Item = Entry<'a>>) -> Vec<&'a str> {
        entries.map(|entry| entry.name).collect()
    }

    #[test]
    fn find_is_exact_and_lexical() {
        let bytes = archive_bytes(|w| {
            w.directory("bin", 0o755);
            w.file("bin/busybox", 0o755, b"BB");
            w.symlink("bin/sh", "busybox");
            w.file("etc/motd", 0o644, b"hi");
        });
        let archive = Archive::parse(&bytes).unwrap();
        assert_eq!(archive.find("/bin//busybox").unwrap().data, b"BB");
        assert_eq!(archive.find("./bin/./busybox").unwrap().data, b"BB");
        assert_eq!(archive.find("/etc/../bin/x/../busybox").unwrap().data, b"BB");
        assert_eq!(archive.find("/../../bin/busybox").unwrap().data, b"BB");
        assert!(archive.find("bin/sh").unwrap().is_symlink(), "find does not follow links");
        assert!(archive.find("bin/bus").is_none());
        assert!(archive.find("bin/busybox/x").is_none());
        let etc = archive.find("/etc/").unwrap();
        assert!(etc.is_directory(), "etc exists as a prefix only");
        assert_eq!((etc.name, etc.inode), ("etc", 0));
        let root = archive.find("/").unwrap();
        assert!(root.is_directory() && root.name.is_empty());
        assert!(Archive::parse(&archive_bytes(|_| {})).unwrap().find("").unwrap().is_directory());
    }

    #[test]
    fn resolve_follows_links_everywhere() {
        let bytes = archive_bytes(|w| {
            w.file("usr/lib/data", 0o644, b"D");
            w.symlink("lib", "usr/lib");
            w.symlink("usr/current", "lib");
            w.symlink("absolute", "/usr/lib/data");
            w.symlink("up", "usr/lib/../lib/data");
            w.symlink("bin/sh", "../usr/current/data");
            w.symlink("dangling", "nowhere");
            w.symlink("empty", "");
        });
        let archive = Archive::parse(&bytes).unwrap();
        let data = |path| archive.resolve(path, true).map(|entry| entry.data);
        assert_eq!(data("lib/data"), Ok(&b"D"[..]), "a link in the first component");
        assert_eq!(data("/usr/current/data"), Ok(&b"D"[..]), "a relative target from the link's directory");
        assert_eq!(data("absolute"), Ok(&b"D"[..]));
        assert_eq!(data("up"), Ok(&b"D"[..]));
        assert_eq!(data("bin/sh"), Ok(&b"D"[..]), "a chain of three links");
        assert_eq!(data("lib/../lib/data"), Ok(&b"D"[..]), "`..` after a link is the target's parent");
        assert_eq!(archive.resolve("lib/..", true).unwrap().name, "usr");
        assert!(archive.resolve("lib", false).unwrap().is_symlink());
        assert!(archive.resolve("lib", true).unwrap().is_directory());
        assert_eq!(archive.resolve("dangling", false).unwrap().symlink_target(), Some("nowhere"));
        assert_eq!(archive.resolve("dangling", true), Err(LookupError::NotFound));
        assert_eq!(archive.resolve("empty", true), Err(LookupError::NotFound));
        assert_eq!(archive.resolve("usr/lib/data/x", true), Err(LookupError::NotADirectory));
        assert_eq!(archive.resolve("usr/lib/data/..", true), Err(LookupError::NotADirectory));
        assert_eq!(archive.resolve("/", true).unwrap().name, "");
        assert_eq!(archive.resolve("..", true).unwrap().name, "");
    }

    #[test]
    fn link_loops_and_long_chains_stop() {
        let bytes = archive_bytes(|w| {
            w.symlink("self", "self");
            w.symlink("a", "b");
            w.symlink("b", "a/x");
            w.file("file", 0o644, b"F");
            // link0 -> link1 -> ... -> link8 -> file: 9 hops, one too many.
            for index in 0..9 {
                let target = if index == 8 { "file".into() } else { alloc::format!("link{}", index + 1) };
                w.symlink(&alloc::format!("link{index}"), &target);
            }
        });
        let archive = Archive::parse(&bytes).unwrap();
        assert_eq!(archive.resolve("self", true), Err(LookupError::TooManyLinks));
        assert_eq!(archive.resolve("self/x", false), Err(LookupError::TooManyLinks));
        assert_eq!(archive.resolve("a", true), Err(LookupError::TooManyLinks));
        assert_eq!(archive.resolve("link1", true).unwrap().data, b"F", "8 hops");
        assert_eq!(archive.resolve("link0", true), Err(LookupError::TooManyLinks), "9 hops");
        assert!(archive.resolve("self", false).unwrap().is_symlink());
    }

    #[test]
    fn read_dir_lists_children_once_including_implicit_directories() {
        let bytes = archive_bytes(|w| {
            w.directory("bin", 0o755);
            w.file("bin/a", 0o755, b"1");
            w.file("usr/share/x", 0o644, b"x");
            w.file("usr/bin/b", 0o755, b"2");
            w.file("bin/a", 0o700, b"second a");
            w.symlink("sbin", "bin");
            w.file("usr/share/y", 0o644, b"y");
        });
        let archive = Archive::parse(&bytes).unwrap();
        assert_eq!(names(archive.read_dir("/").unwrap()), ["bin", "usr", "sbin"]);
        assert_eq!(names(archive.read_dir("usr").unwrap()), ["usr/share", "usr/bin"]);
        let in_bin: Vec<Entry> = archive.read_dir("/sbin/").unwrap().collect();
        assert_eq!(in_bin.len(), 1);
        assert_eq!((in_bin[0].data, in_bin[0].permissions()), (&b"second a"[..], 0o700), "the last entry counts");
        assert_eq!(in_bin[0].file_name(), "a");
        assert_eq!(archive.read_dir("bin/a").err(), Some(LookupError::NotADirectory));
        assert_eq!(archive.read_dir("nope").err(), Some(LookupError::NotFound));
        assert_eq!(archive.read_dir("usr/share").unwrap().count(), 2);
    }
}
