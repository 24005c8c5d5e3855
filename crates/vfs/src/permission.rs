//! Who may do what to a node: Linux's mode, owner and sticky-bit rules, decided from the
//! caller's file-system ids and the node's metadata alone (path_resolution(7), chmod(2),
//! chown(2), utimensat(2), unlink(2)).
//!
//! A caller whose file-system user id is 0 is root: it passes every read and write check and
//! every owner check, as Linux's `CAP_DAC_OVERRIDE`, `CAP_FOWNER`, `CAP_CHOWN` and
//! `CAP_FSETID` give; it still needs one execute bit to run a regular file.

use crate::node::Metadata;
use crate::Errno;
use alloc::vec::Vec;
use initramfs::mode;
use linux_raw_sys::errno::{EACCES, EPERM};

/// Read permission (`R_OK`, `MAY_READ`).
pub const READ: u32 = 4;
/// Write permission (`W_OK`, `MAY_WRITE`).
pub const WRITE: u32 = 2;
/// Execute permission, or search for a directory (`X_OK`, `MAY_EXEC`).
pub const EXECUTE: u32 = 1;

/// The set-user-id bit.
const SET_USER_ID: u32 = 0o4000;
/// The set-group-id bit.
const SET_GROUP_ID: u32 = 0o2000;
/// The sticky bit: in a directory, only a name's owner (or the directory's) removes it.
const STICKY: u32 = 0o1000;

/// The ids a request is checked with: the caller's file-system user and group ids and its
/// supplementary groups.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Credentials {
    /// The file-system user id (`setfsuid`; the effective one unless changed).
    pub uid: u32,
    /// The file-system group id.
    pub gid: u32,
    /// The supplementary groups (`setgroups`).
    pub groups: Vec<u32>,
}

impl Credentials {
    /// Root, with no supplementary groups: the kernel's own requests.
    pub const fn root() -> Self {
        Self { uid: 0, gid: 0, groups: Vec::new() }
    }

    /// Whether the caller bypasses the mode bits (file-system user id 0).
    pub fn is_root(&self) -> bool {
        self.uid == 0
    }

    /// Whether `gid` is the caller's file-system group or one of its supplementary groups
    /// (Linux's `in_group_p`).
    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.contains(&gid)
    }

    /// Whether the caller owns `node`, or is root (Linux's `inode_owner_or_capable`).
    pub fn owns(&self, node: &Metadata) -> bool {
        self.is_root() || self.uid == node.uid
    }

    /// Whether the caller may `want` (a mask of [`READ`], [`WRITE`], [`EXECUTE`]) on `node`:
    /// the owner's bits if it owns it, else the group's if it is in the node's group, else the
    /// others' (only one class applies, as Linux's `acl_permission_check`). Root may read and
    /// write anything and search any directory, and execute a file with any execute bit.
    pub fn may(&self, node: &Metadata, want: u32) -> bool {
        let want = want & 0o7;
        if self.is_root() {
            let is_directory = node.mode & mode::TYPE_MASK == mode::DIRECTORY;
            return want & EXECUTE == 0 || is_directory || node.mode & 0o111 != 0;
        }
        let shift = if self.uid == node.uid {
            6
        } else if self.in_group(node.gid) {
            3
        } else {
            0
        };
        (node.mode >> shift) & want == want
    }

    /// [`Credentials::may`] as a result: `EACCES` when refused.
    pub fn check(&self, node: &Metadata, want: u32) -> Result<(), Errno> {
        if self.may(node, want) {
            Ok(())
        } else {
            Err(EACCES)
        }
    }

    /// Whether the caller may add a name to `directory` (`creat`, `mkdir`, `link`, `symlink`,
    /// `mknod`, the target of a `rename`): write and search permission there (`EACCES`).
    pub fn may_create_in(&self, directory: &Metadata) -> Result<(), Errno> {
        self.check(directory, WRITE | EXECUTE)
    }

    /// Whether the caller may remove the name of `victim` from `directory` (`unlink`, `rmdir`,
    /// the source of a `rename`, or a name it replaces): write and search permission there
    /// (`EACCES`), and in a sticky directory (`/tmp`) the caller must own the victim or the
    /// directory (`EPERM`, Linux's `check_sticky`).
    pub fn may_delete(&self, directory: &Metadata, victim: &Metadata) -> Result<(), Errno> {
        self.may_create_in(directory)?;
        let sticky = directory.mode & STICKY != 0;
        if sticky && !self.is_root() && self.uid != victim.uid && self.uid != directory.uid {
            return Err(EPERM);
        }
        Ok(())
    }

    /// The permission bits `chmod(node, permissions)` sets: only the owner or root may
    /// (`EPERM`), and the set-group-id bit is dropped when a non-root caller is not in the
    /// node's group (Linux's `setattr_prepare`).
    pub fn change_mode(&self, node: &Metadata, permissions: u32) -> Result<u32, Errno> {
        if !self.owns(node) {
            return Err(EPERM);
        }
        let mut permissions = permissions & 0o7777;
        if !self.is_root() && !self.in_group(node.gid) {
            permissions &= !SET_GROUP_ID;
        }
        Ok(permissions)
    }

    /// Whether `chown(node, uid, gid)` is allowed (`None`: left as it is): root may give any
    /// owner and group; another caller may only, on a node it owns, leave the owner as it is
    /// and set the group to the node's own or to one of its groups (Linux's `chown_ok`,
    /// `chgrp_ok`). `EPERM` otherwise.
    pub fn may_change_owner(&self, node: &Metadata, uid: Option<u32>, gid: Option<u32>) -> Result<(), Errno> {
        if self.is_root() {
            return Ok(());
        }
        let owner_ok = uid.is_none_or(|uid| self.uid == node.uid && uid == node.uid);
        let group_ok = gid.is_none_or(|gid| self.uid == node.uid && (gid == node.gid || self.in_group(gid)));
        if owner_ok && group_ok {
            Ok(())
        } else {
            Err(EPERM)
        }
    }

    /// Whether the caller may set `node`'s times: to explicit values only as its owner or
    /// root (`EPERM`); both to now also with write permission (`EACCES`), as `utimensat`.
    pub fn may_set_times(&self, node: &Metadata, explicit: bool) -> Result<(), Errno> {
        if self.owns(node) {
            Ok(())
        } else if explicit {
            Err(EPERM)
        } else {
            self.check(node, WRITE)
        }
    }

    /// The owner and group of a node the caller makes in `directory`: its file-system ids, the
    /// directory's group when the directory is set-group-id (and then a new directory is
    /// set-group-id too: the second value).
    pub fn new_owner(&self, directory: &Metadata) -> (u32, u32, bool) {
        if directory.mode & SET_GROUP_ID != 0 {
            (self.uid, directory.gid, true)
        } else {
            (self.uid, self.gid, false)
        }
    }
}

/// The permission bits a `chown` leaves: it clears set-user-id, and set-group-id with group
/// execute, of anything but a directory (Linux's `ATTR_KILL_SUID`, `ATTR_KILL_SGID`).
pub fn mode_after_chown(node_mode: u32) -> u32 {
    if node_mode & mode::TYPE_MASK == mode::DIRECTORY {
        return node_mode & 0o7777;
    }
    let mut permissions = node_mode & 0o7777 & !SET_USER_ID;
    if permissions & 0o010 != 0 {
        permissions &= !SET_GROUP_ID;
    }
    permissions
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn node(kind: u32, permissions: u32, uid: u32, gid: u32) -> Metadata {
        Metadata {
            device: 1,
            inode: 2,
            mode: kind | permissions,
            links: 1,
            uid,
            gid,
            rdev: 0,
            size: 0,
            block_size: 4096,
            blocks: 0,
            accessed: 0,
            modified: 0,
            changed: 0,
        }
    }

    fn user(uid: u32, gid: u32, groups: &[u32]) -> Credentials {
        Credentials { uid, gid, groups: groups.to_vec() }
    }

    #[test]
    fn one_class_applies_owner_then_group_then_others() {
        let file = node(mode::REGULAR, 0o064, 1000, 100);
        let owner = user(1000, 100, &[]);
        assert!(!owner.may(&file, READ), "the owner's bits (0) apply to the owner, not the group's");
        assert!(user(2000, 100, &[]).may(&file, READ | WRITE));
        assert!(user(2000, 5, &[100]).may(&file, READ | WRITE), "a supplementary group counts");
        assert!(user(2000, 5, &[]).may(&file, READ));
        assert!(!user(2000, 5, &[]).may(&file, WRITE));
    }

    #[test]
    fn root_needs_an_execute_bit_to_run_a_file_only() {
        let root = Credentials::root();
        assert!(root.may(&node(mode::REGULAR, 0, 5, 5), READ | WRITE));
        assert!(!root.may(&node(mode::REGULAR, 0o644, 5, 5), EXECUTE));
        assert!(root.may(&node(mode::REGULAR, 0o001, 5, 5), EXECUTE));
        assert!(root.may(&node(mode::DIRECTORY, 0, 5, 5), EXECUTE));
    }

    #[test]
    fn the_sticky_bit_keeps_others_files() {
        let tmp = node(mode::DIRECTORY, 0o1777, 0, 0);
        let theirs = node(mode::REGULAR, 0o666, 1001, 1001);
        let mine = node(mode::REGULAR, 0o600, 1000, 1000);
        let me = user(1000, 1000, &[]);
        assert_eq!(me.may_delete(&tmp, &theirs), Err(EPERM));
        assert_eq!(me.may_delete(&tmp, &mine), Ok(()));
        assert_eq!(Credentials::root().may_delete(&tmp, &theirs), Ok(()));
        let my_sticky = node(mode::DIRECTORY, 0o1777, 1000, 1000);
        assert_eq!(me.may_delete(&my_sticky, &theirs), Ok(()), "the directory's owner may");
        let not_sticky = node(mode::DIRECTORY, 0o777, 0, 0);
        assert_eq!(me.may_delete(&not_sticky, &theirs), Ok(()));
        let read_only = node(mode::DIRECTORY, 0o755, 0, 0);
        assert_eq!(me.may_delete(&read_only, &mine), Err(EACCES));
    }

    #[test]
    fn chown_by_a_user_only_keeps_its_owner_and_picks_its_groups() {
        let mine = node(mode::REGULAR, 0o644, 1000, 1000);
        let me = user(1000, 1000, &[27]);
        assert_eq!(me.may_change_owner(&mine, None, None), Ok(()));
        assert_eq!(me.may_change_owner(&mine, Some(1000), Some(1000)), Ok(()), "the no-op");
        assert_eq!(me.may_change_owner(&mine, None, Some(27)), Ok(()), "a group of its own");
        assert_eq!(me.may_change_owner(&mine, None, Some(28)), Err(EPERM));
        assert_eq!(me.may_change_owner(&mine, Some(0), None), Err(EPERM));
        let theirs = node(mode::REGULAR, 0o644, 1001, 1000);
        assert_eq!(me.may_change_owner(&theirs, Some(1001), None), Err(EPERM), "not its file");
        assert_eq!(Credentials::root().may_change_owner(&theirs, Some(7), Some(7)), Ok(()));
    }

    #[test]
    fn chmod_is_the_owners_and_drops_a_foreign_setgid() {
        let mine = node(mode::REGULAR, 0o644, 1000, 50);
        let me = user(1000, 1000, &[]);
        assert_eq!(me.change_mode(&mine, 0o2755), Ok(0o755));
        assert_eq!(user(1000, 50, &[]).change_mode(&mine, 0o2755), Ok(0o2755));
        assert_eq!(user(1001, 50, &[]).change_mode(&mine, 0o600), Err(EPERM));
        assert_eq!(Credentials::root().change_mode(&mine, 0o12755), Ok(0o2755));
        assert_eq!(mode_after_chown(mode::REGULAR | 0o6755), 0o755);
        assert_eq!(mode_after_chown(mode::REGULAR | 0o2745), 0o2745, "setgid without group x stays");
        assert_eq!(mode_after_chown(mode::DIRECTORY | 0o2775), 0o2775);
    }

    #[test]
    fn times_to_now_need_write_explicit_ones_need_ownership() {
        let shared = node(mode::REGULAR, 0o666, 0, 0);
        let me = user(1000, 1000, &[]);
        assert_eq!(me.may_set_times(&shared, false), Ok(()));
        assert_eq!(me.may_set_times(&shared, true), Err(EPERM));
        assert_eq!(me.may_set_times(&node(mode::REGULAR, 0o644, 0, 0), false), Err(EACCES));
    }

    #[test]
    fn new_nodes_are_the_callers_or_the_setgid_directorys_group() {
        let me = user(1000, 1000, &[]);
        assert_eq!(me.new_owner(&node(mode::DIRECTORY, 0o1777, 0, 0)), (1000, 1000, false));
        assert_eq!(me.new_owner(&node(mode::DIRECTORY, 0o2777, 0, 50)), (1000, 50, true));
    }

    proptest! {
        /// A non-root caller gets exactly the bits of the one class it falls in, and root gets
        /// at least what anyone gets.
        #[test]
        fn permission_is_the_classes_bits(permissions in 0u32..0o10000, want in 0u32..8, uid in 0u32..4,
                                           gid in 0u32..4, owner in 0u32..4, group in 0u32..4,
                                           groups in proptest::collection::vec(0u32..4, 0..3), directory: bool) {
            let kind = if directory { mode::DIRECTORY } else { mode::REGULAR };
            let target = node(kind, permissions, owner, group);
            let caller = Credentials { uid: uid + 1, gid, groups };
            let target = Metadata { uid: target.uid + 1, ..target };
            let class = if caller.uid == target.uid { 6 } else if caller.in_group(target.gid) { 3 } else { 0 };
            prop_assert_eq!(caller.may(&target, want), (permissions >> class) & 7 & want == want);
            if caller.may(&target, want) {
                prop_assert!(Credentials::root().may(&target, want));
            }
        }

        /// Whatever the modes, a non-root caller never removes another's name from a sticky
        /// directory it does not own, and never chowns a node to someone else.
        #[test]
        fn users_keep_out_of_each_others_files(directory_permissions in 0u32..0o10000, victim_owner in 1u32..4,
                                               directory_owner in 1u32..4, uid in 1u32..4, new_owner in 0u32..4) {
            let directory = node(mode::DIRECTORY, directory_permissions | STICKY, directory_owner, 0);
            let victim = node(mode::REGULAR, 0o777, victim_owner, 0);
            let caller = user(uid, 9, &[]);
            if uid != victim_owner && uid != directory_owner {
                prop_assert!(caller.may_delete(&directory, &victim).is_err());
            }
            if new_owner != victim_owner {
                prop_assert_eq!(caller.may_change_owner(&victim, Some(new_owner), None), Err(EPERM));
            }
        }
    }
}
