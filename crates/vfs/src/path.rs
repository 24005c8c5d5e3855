//! Path lookup: components, `.` and `..`, mounts, symbolic links, Linux's errors.

use crate::node::{NodeId, NodeKind};
use crate::permission;
use crate::vfs::{Context, Vfs};
use crate::{Errno, MAX_SYMLINK_HOPS, NAME_MAX, PATH_MAX};
use alloc::vec::Vec;
use linux_raw_sys::errno::{EINVAL, ELOOP, ENAMETOOLONG, ENOENT, ENOTDIR};

/// The checks every path gets before its first lookup, in Linux's order of `getname`.
pub(crate) fn check_path(path: &[u8]) -> Result<(), Errno> {
    // Callers pass the bytes before the NUL of a C string; one inside means they did not.
    if path.contains(&0) {
        return Err(EINVAL);
    }
    if path.is_empty() {
        return Err(ENOENT);
    }
    if path.len() >= PATH_MAX {
        return Err(ENAMETOOLONG);
    }
    Ok(())
}

/// One component of a path being walked.
pub(crate) struct Component {
    /// Which of [`Walk::levels`] holds it, and where.
    level: usize,
    start: usize,
    end: usize,
    /// Nothing but slashes follows it, in any level: it names what the walk ends at.
    pub last: bool,
    /// It is the last, and a `/` follows it: it must be a directory, links followed.
    pub trailing_slash: bool,
}

/// The components still to walk: the path, then the target of each link being followed on
/// top of the rest of the path that led to it. A level whose components are used up is
/// dropped before a link's target goes on top, so every level below the top still has a
/// component: the top's last component is the walk's last.
pub(crate) struct Walk {
    levels: Vec<(Vec<u8>, usize)>,
    /// A level dropped under the top ended in `/`: the walk's last component must be a
    /// directory.
    slash_below: bool,
}

impl Walk {
    pub fn new(path: &[u8]) -> Self {
        Self { levels: alloc::vec![(path.to_vec(), 0)], slash_below: false }
    }

    fn next(&mut self) -> Option<Component> {
        loop {
            let level = self.levels.len().checked_sub(1)?;
            let (bytes, position) = self.levels.last_mut()?;
            while bytes.get(*position) == Some(&b'/') {
                *position += 1;
            }
            if *position == bytes.len() {
                self.levels.pop();
                continue;
            }
            let start = *position;
            let end = bytes[start..].iter().position(|&byte| byte == b'/').map_or(bytes.len(), |length| start + length);
            *position = end;
            // Stops at the first byte after the slashes: the walk stays linear in the path.
            let only_slashes_follow = bytes[end..].iter().all(|&byte| byte == b'/');
            let last = only_slashes_follow && level == 0;
            let trailing_slash = last && (end < bytes.len() || self.slash_below);
            return Some(Component { level, start, end, last, trailing_slash });
        }
    }

    /// The next component, `ENAMETOOLONG` if it is longer than [`NAME_MAX`].
    pub fn next_name(&mut self) -> Result<Option<Component>, Errno> {
        match self.next() {
            Some(component) if component.end - component.start > NAME_MAX => Err(ENAMETOOLONG),
            next => Ok(next),
        }
    }

    pub fn name(&self, component: &Component) -> &[u8] {
        &self.levels[component.level].0[component.start..component.end]
    }

    /// Follows one more link (its target read by `read_target`), counted in `hops`: `ELOOP`
    /// past [`MAX_SYMLINK_HOPS`], `ENOENT` for an empty target; whether the target is absolute,
    /// so the walk goes on from the root.
    pub fn follow_link(
        &mut self,
        hops: &mut usize,
        read_target: impl FnOnce() -> Result<Vec<u8>, Errno>,
    ) -> Result<bool, Errno> {
        *hops += 1;
        if *hops > MAX_SYMLINK_HOPS {
            return Err(ELOOP);
        }
        let target = read_target()?;
        if target.is_empty() {
            return Err(ENOENT);
        }
        let absolute = target[0] == b'/';
        self.follow(target);
        Ok(absolute)
    }

    /// Walks `target` next, then what is left of the path.
    fn follow(&mut self, target: Vec<u8>) {
        if let Some((bytes, position)) = self.levels.last() {
            if bytes[*position..].iter().all(|&byte| byte == b'/') {
                self.slash_below |= *position < bytes.len();
                self.levels.pop();
            }
        }
        self.levels.push((target, 0));
    }
}

/// Where a walk found its last node: the directory and the name there.
type FoundUnder = (NodeId, Vec<u8>);

impl Vfs {
    /// The node `path` names (`openat`, `stat`, `chdir`...): absolute paths start at the
    /// root, relative ones at `base` (a directory descriptor's node) or else at the caller's
    /// working directory. Symbolic links are followed in every component, and in the last
    /// one when `follow_last` (else a link there is returned itself, as `lstat` does) or when
    /// a `/` follows it; relative targets start at the link's directory. `..` at the root
    /// stays there and from a mount's root goes to the directory holding the mount point.
    ///
    /// Errors, as Linux's: `ENOENT` for an empty path or a missing component, `ENAMETOOLONG`
    /// for a path of [`PATH_MAX`] bytes or more or a component over [`NAME_MAX`], `EINVAL` for
    /// a NUL inside, `ENOTDIR` when a component before the last, or the last followed by
    /// `/`, is no directory, `ELOOP` past [`MAX_SYMLINK_HOPS`] links.
    pub fn resolve(
        &self,
        context: &Context,
        base: Option<NodeId>,
        path: &[u8],
        follow_last: bool,
    ) -> Result<NodeId, Errno> {
        check_path(path)?;
        let start = if path[0] == b'/' { context.root } else { base.unwrap_or(context.cwd) };
        Ok(self.walk(context, start, path, follow_last, false)?.0)
    }

    /// As [`Vfs::resolve`], with the absolute path of what it found, as Linux's
    /// `/proc/<pid>/fd` links name an open file: a directory's own path, anything else's
    /// directory's path and the name it was found under, links followed (`/bin/ls` that
    /// links to `busybox` is `/bin/busybox`).
    pub fn resolve_with_path(
        &self,
        context: &Context,
        base: Option<NodeId>,
        path: &[u8],
        follow_last: bool,
    ) -> Result<(NodeId, Vec<u8>), Errno> {
        check_path(path)?;
        let start = if path[0] == b'/' { context.root } else { base.unwrap_or(context.cwd) };
        let (node, last) = self.walk(context, start, path, follow_last, true)?;
        let path = match last {
            Some((directory, name)) if !self.is_directory(node)? => self.path_in(directory, &name)?,
            _ => self.path_of(node)?,
        };
        Ok((node, self.seen_from(context.root, path)?))
    }

    /// An absolute `path` as a process whose root is the directory `root` names it: with the
    /// root's own path taken off its front (`/debian/usr` is `/usr` after `chroot /debian`).
    /// A path outside the root stays whole, as Linux's `d_path` gives one it cannot reach.
    pub fn seen_from(&self, root: NodeId, path: Vec<u8>) -> Result<Vec<u8>, Errno> {
        if root == self.root() {
            return Ok(path);
        }
        let root_path = self.path_of(root)?;
        match path.strip_prefix(root_path.as_slice()) {
            Some([]) => Ok(b"/".to_vec()),
            Some(rest) if rest[0] == b'/' => Ok(rest.to_vec()),
            _ => Ok(path),
        }
    }

    /// The absolute path of `name` in the directory `directory`.
    pub fn path_in(&self, directory: NodeId, name: &[u8]) -> Result<Vec<u8>, Errno> {
        let mut path = self.path_of(directory)?;
        if path.last() != Some(&b'/') {
            path.push(b'/');
        }
        path.extend_from_slice(name);
        Ok(path)
    }

    /// Walks `path` from `start`: the node, and when `want_name`, the directory and the name
    /// the last component was found under (links followed; `None` if the walk ended at
    /// `start` or at `.` or `..`, which are directories).
    fn walk(
        &self,
        context: &Context,
        start: NodeId,
        path: &[u8],
        follow_last: bool,
        want_name: bool,
    ) -> Result<(NodeId, Option<FoundUnder>), Errno> {
        let mut current = start;
        let mut last_step = None;
        // The start must exist even for a path of slashes alone.
        self.kind(current)?;
        let mut walk = Walk::new(path);
        let mut hops = 0;
        while let Some(component) = walk.next_name()? {
            let name = walk.name(&component);
            if !self.is_directory(current)? {
                return Err(ENOTDIR);
            }
            // Every lookup needs search permission on the directory it looks in (Linux's
            // `may_lookup`); root may search any, so its walks stat nothing more.
            if !context.credentials.is_root() {
                context.credentials.check(&self.stat(current)?, permission::EXECUTE)?;
            }
            let child = match name {
                b"." => current,
                b".." if current == context.root => current,
                // From `/dev` (or `/proc`, `/sys`, `/tmp`) of a changed root, back to it.
                b".." if context.root != self.root() && self.kernel_mount(current) => context.root,
                b".." => self.parent(current)?,
                // A changed root sees the kernel's own file systems under their names.
                _ if current == context.root && context.root != self.root() => match self.kernel_mount_named(name) {
                    Some(mount_root) => mount_root,
                    None => self.find(context.pid, current, name)?.ok_or(ENOENT)?,
                },
                _ => self.find(context.pid, current, name)?.ok_or(ENOENT)?,
            };
            let kind = self.kind(child)?;
            if kind == NodeKind::Symlink && (!component.last || follow_last || component.trailing_slash) {
                if walk.follow_link(&mut hops, || self.read_link(child))? {
                    current = context.root;
                }
                continue;
            }
            if component.trailing_slash && kind != NodeKind::Directory {
                return Err(ENOTDIR);
            }
            if want_name && component.last {
                last_step = (name != b"." && name != b"..").then(|| (current, name.to_vec()));
            }
            current = child;
        }
        Ok((current, last_step))
    }

    /// The directory that holds what `path` names, and the last component's name, for the
    /// calls that make or remove a name (`mkdirat`, `unlinkat`, `renameat2`, `linkat`,
    /// `symlinkat`, `openat` with `O_CREAT`). Links are followed before the last component,
    /// never in it. The name is what the path says: `.` or `..` when it ends so, `.` with the
    /// root for a path of slashes alone, and with one `/` kept at its end when the path ends
    /// in `/`, which the namespace calls read as Linux does ("must be a directory":
    /// `mkdir("a/")` works, `unlink("file/")` is `ENOTDIR`). Errors as [`Vfs::resolve`].
    pub fn resolve_parent(
        &self,
        context: &Context,
        base: Option<NodeId>,
        path: &[u8],
    ) -> Result<(NodeId, Vec<u8>), Errno> {
        check_path(path)?;
        let trimmed = path.iter().rposition(|&byte| byte != b'/').map_or(0, |last| last + 1);
        if trimmed == 0 {
            return Ok((context.root, b".".to_vec()));
        }
        let name_start = path[..trimmed].iter().rposition(|&byte| byte == b'/').map_or(0, |slash| slash + 1);
        let name = &path[name_start..trimmed];
        if name.len() > NAME_MAX {
            return Err(ENAMETOOLONG);
        }
        let start = if path[0] == b'/' { context.root } else { base.unwrap_or(context.cwd) };
        let directory =
            if name_start == 0 { start } else { self.walk(context, start, &path[..name_start], true, false)?.0 };
        if !self.is_directory(directory)? {
            return Err(ENOTDIR);
        }
        let mut name = name.to_vec();
        if trimmed < path.len() {
            name.push(b'/');
        }
        Ok((directory, name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    /// Every component of `path` with its last and trailing-slash flags.
    fn components(path: &[u8]) -> Vec<(Vec<u8>, bool, bool)> {
        let mut walk = Walk::new(path);
        let mut seen = vec![];
        while let Some(component) = walk.next() {
            seen.push((walk.name(&component).to_vec(), component.last, component.trailing_slash));
        }
        seen
    }

    #[test]
    fn components_know_when_they_are_last() {
        assert_eq!(components(b"//a//b"), [(b"a".to_vec(), false, false), (b"b".to_vec(), true, false)]);
        assert_eq!(components(b"a/b//"), [(b"a".to_vec(), false, false), (b"b".to_vec(), true, true)]);
        assert!(components(b"///").is_empty());
    }

    #[test]
    fn a_link_target_inherits_the_trailing_slash() {
        let mut walk = Walk::new(b"link/");
        let first = walk.next().unwrap();
        assert!(first.last && first.trailing_slash);
        walk.follow(b"x/y".to_vec());
        let x = walk.next().unwrap();
        assert!(!x.last);
        let y = walk.next().unwrap();
        assert_eq!(walk.name(&y), b"y");
        assert!(y.last && y.trailing_slash, "the slash after the link applies to its target");
        assert!(walk.next().is_none());
    }

    #[test]
    fn a_link_in_the_middle_keeps_the_rest() {
        let mut walk = Walk::new(b"link/rest");
        walk.next().unwrap();
        walk.follow(b"target".to_vec());
        let target = walk.next().unwrap();
        assert!(!target.last, "`rest` still follows");
        let rest = walk.next().unwrap();
        assert_eq!(walk.name(&rest), b"rest");
        assert!(rest.last && !rest.trailing_slash);
    }

    #[test]
    fn paths_are_checked_in_linuxs_order() {
        assert_eq!(check_path(b""), Err(ENOENT));
        assert_eq!(check_path(b"a\0b"), Err(EINVAL));
        assert_eq!(check_path(&[b'a'; PATH_MAX - 1]), Ok(()));
        assert_eq!(check_path(&[b'a'; PATH_MAX]), Err(ENAMETOOLONG));
    }
}
