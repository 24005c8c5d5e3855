//! A process's user and group ids, and how Linux's `set*id` calls change them.
//!
//! Linux's rules (credentials(7), setresuid(2), kernel/sys.c), with one model of privilege:
//! what Linux asks `CAP_SETUID` or `CAP_SETGID` for, Reef grants to a process whose effective
//! user id is 0, and nothing else is a capability. Each call is a pure function from the ids
//! before to the ids after (or the errno), so the kernel applies it under one lock and the
//! host tests every rule. Supplementary groups are the kernel's (they need a heap); who may
//! set them is [`Ids::may_set_groups`].

use crate::Errno;

/// `EPERM`: the caller may not take that id.
pub const EPERM: Errno = 1;

/// `(uid_t)-1`: "leave this id as it is" in `setreuid`, `setresuid` and their group forms;
/// never a valid id (Linux's `uid_valid` refuses it).
pub const UNCHANGED: u32 = u32::MAX;

/// The most supplementary groups a process may have (`NGROUPS_MAX`).
pub const MAX_GROUPS: usize = 65536;

/// The user id of root, the one privileged user.
pub const ROOT: u32 = 0;

/// Real, effective, saved and file-system ids, of users and of groups (the default: root's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ids {
    pub real_uid: u32,
    pub effective_uid: u32,
    pub saved_uid: u32,
    /// The user id files are checked and made as (`setfsuid`); follows the effective one.
    pub filesystem_uid: u32,
    pub real_gid: u32,
    pub effective_gid: u32,
    pub saved_gid: u32,
    pub filesystem_gid: u32,
}

/// Which of the two id families a call changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    User,
    Group,
}

impl Ids {
    /// Every id of both families `uid` and `gid`: what the kernel's first process gets (root's).
    pub const fn of(uid: u32, gid: u32) -> Self {
        Self {
            real_uid: uid,
            effective_uid: uid,
            saved_uid: uid,
            filesystem_uid: uid,
            real_gid: gid,
            effective_gid: gid,
            saved_gid: gid,
            filesystem_gid: gid,
        }
    }

    /// Root's: every id 0.
    pub const ROOT: Self = Self::of(ROOT, 0);

    /// Whether the process may do what Linux asks `CAP_SETUID`, `CAP_SETGID` (and, in Reef,
    /// every other capability but the file-system ones) for: its effective user id is 0.
    pub fn is_privileged(&self) -> bool {
        self.effective_uid == ROOT
    }

    /// Whether its file accesses bypass the mode bits as Linux's `CAP_DAC_OVERRIDE`,
    /// `CAP_FOWNER` and `CAP_CHOWN` do: its file-system user id is 0 (Linux keeps those
    /// capabilities in the effective set exactly while the fsuid is 0, `cap_emulate_setxuid`).
    pub fn is_file_privileged(&self) -> bool {
        self.filesystem_uid == ROOT
    }

    /// Whether `setgroups` is allowed (`CAP_SETGID`).
    pub fn may_set_groups(&self) -> bool {
        self.is_privileged()
    }

    /// The real, effective, saved and file-system ids of `family`.
    fn family(&self, family: Family) -> [u32; 4] {
        match family {
            Family::User => [self.real_uid, self.effective_uid, self.saved_uid, self.filesystem_uid],
            Family::Group => [self.real_gid, self.effective_gid, self.saved_gid, self.filesystem_gid],
        }
    }

    /// `self` with `family`'s four ids replaced.
    fn with_family(mut self, family: Family, [real, effective, saved, filesystem]: [u32; 4]) -> Self {
        match family {
            Family::User => {
                (self.real_uid, self.effective_uid, self.saved_uid, self.filesystem_uid) =
                    (real, effective, saved, filesystem)
            }
            Family::Group => {
                (self.real_gid, self.effective_gid, self.saved_gid, self.filesystem_gid) =
                    (real, effective, saved, filesystem)
            }
        }
        self
    }

    /// `setuid(id)` / `setgid(id)`: a privileged caller sets the real, effective, saved and
    /// file-system ids; another may set the effective (and file-system) id to its real or
    /// saved one. `EINVAL` for `-1`, `EPERM` otherwise.
    pub fn set_id(&self, family: Family, id: u32) -> Result<Self, Errno> {
        if id == UNCHANGED {
            return Err(EINVAL);
        }
        let [real, _, saved, _] = self.family(family);
        if self.is_privileged() {
            Ok(self.with_family(family, [id, id, id, id]))
        } else if id == real || id == saved {
            Ok(self.with_family(family, [real, id, saved, id]))
        } else {
            Err(EPERM)
        }
    }

    /// `setreuid(real, effective)` / `setregid`: `-1` leaves an id. Unprivileged, the real id
    /// may become the real or effective one, the effective id the real, effective or saved
    /// one. The saved id becomes the new effective one when the real id is set, or the
    /// effective one is set to other than the old real id; the file-system id follows the
    /// effective one.
    pub fn set_real_effective(&self, family: Family, real: u32, effective: u32) -> Result<Self, Errno> {
        let [old_real, old_effective, old_saved, _] = self.family(family);
        let privileged = self.is_privileged();
        let mut new_real = old_real;
        let mut new_effective = old_effective;
        if real != UNCHANGED {
            if !privileged && real != old_real && real != old_effective {
                return Err(EPERM);
            }
            new_real = real;
        }
        if effective != UNCHANGED {
            if !privileged && effective != old_real && effective != old_effective && effective != old_saved {
                return Err(EPERM);
            }
            new_effective = effective;
        }
        let new_saved = if real != UNCHANGED || (effective != UNCHANGED && effective != old_real) {
            new_effective
        } else {
            old_saved
        };
        Ok(self.with_family(family, [new_real, new_effective, new_saved, new_effective]))
    }

    /// `setresuid(real, effective, saved)` / `setresgid`: `-1` leaves an id; unprivileged,
    /// each id given must be one of the old real, effective or saved ones. The file-system id
    /// follows the effective one.
    pub fn set_real_effective_saved(
        &self,
        family: Family,
        real: u32,
        effective: u32,
        saved: u32,
    ) -> Result<Self, Errno> {
        let old = self.family(family);
        let allowed = |id: u32| id == UNCHANGED || old[..3].contains(&id);
        if !(self.is_privileged() || allowed(real) && allowed(effective) && allowed(saved)) {
            return Err(EPERM);
        }
        let pick = |id: u32, old: u32| if id == UNCHANGED { old } else { id };
        let effective = pick(effective, old[1]);
        Ok(self.with_family(family, [pick(real, old[0]), effective, pick(saved, old[2]), effective]))
    }

    /// `setfsuid(id)` / `setfsgid`: the ids after, and the old file-system id, which the call
    /// returns whether it changed anything or not (it never fails). A privileged caller may
    /// take any id but `-1`, another its real, effective, saved or current file-system id.
    pub fn set_filesystem_id(&self, family: Family, id: u32) -> (Self, u32) {
        let [real, effective, saved, filesystem] = self.family(family);
        let allowed = id != UNCHANGED && (self.is_privileged() || [real, effective, saved, filesystem].contains(&id));
        let after = if allowed { self.with_family(family, [real, effective, saved, id]) } else { *self };
        (after, filesystem)
    }

    /// `execve` of a program whose mode has the set-user-id (`0o4000`) or set-group-id
    /// (`0o2000`) bit: the effective (and file-system) id becomes the file's owner or group;
    /// then, always, the saved ids become the effective ones (Linux's `bprm_fill_uid` and
    /// `cap_bprm_creds_from_file`). `no_new_privileges` (`PR_SET_NO_NEW_PRIVS`) ignores the
    /// bits, as does a program on a file system mounted `nosuid`.
    pub fn after_exec(&self, mode: u32, owner: u32, group: u32, honour_set_id_bits: bool) -> Self {
        let mut ids = *self;
        if honour_set_id_bits && mode & SET_USER_ID != 0 {
            ids.effective_uid = owner;
        }
        // Without group execute the bit means mandatory locking, not set-group-id.
        if honour_set_id_bits && mode & SET_GROUP_ID != 0 && mode & 0o010 != 0 {
            ids.effective_gid = group;
        }
        ids.saved_uid = ids.effective_uid;
        ids.filesystem_uid = ids.effective_uid;
        ids.saved_gid = ids.effective_gid;
        ids.filesystem_gid = ids.effective_gid;
        ids
    }

    /// The four ids of `family` as `/proc/<pid>/status` lists them: real, effective, saved,
    /// file-system.
    pub fn status_line(&self, family: Family) -> [u32; 4] {
        self.family(family)
    }

    /// Bytes [`encode`](Self::encode) writes.
    pub const SIZE: usize = 8 * 4;

    /// The ids as eight little-endian words (a process's move to another core carries them).
    pub fn encode(&self) -> [u8; Self::SIZE] {
        let mut out = [0u8; Self::SIZE];
        let words = [
            self.real_uid,
            self.effective_uid,
            self.saved_uid,
            self.filesystem_uid,
            self.real_gid,
            self.effective_gid,
            self.saved_gid,
            self.filesystem_gid,
        ];
        for (index, word) in words.iter().enumerate() {
            out[4 * index..4 * index + 4].copy_from_slice(&word.to_le_bytes());
        }
        out
    }

    /// The ids [`encode`](Self::encode) wrote; `None` for a length other than [`Ids::SIZE`].
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        if bytes.len() != Self::SIZE {
            return None;
        }
        let word = |index: usize| {
            u32::from_le_bytes([bytes[4 * index], bytes[4 * index + 1], bytes[4 * index + 2], bytes[4 * index + 3]])
        };
        Some(Self {
            real_uid: word(0),
            effective_uid: word(1),
            saved_uid: word(2),
            filesystem_uid: word(3),
            real_gid: word(4),
            effective_gid: word(5),
            saved_gid: word(6),
            filesystem_gid: word(7),
        })
    }
}

/// `EINVAL`: `-1` given where an id is needed.
pub const EINVAL: Errno = 22;

/// `S_ISUID`: run with the file owner's user id.
pub const SET_USER_ID: u32 = 0o4000;
/// `S_ISGID`: run with the file's group id (with group execute); on a directory, new names
/// take the directory's group.
pub const SET_GROUP_ID: u32 = 0o2000;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const USER: Ids = Ids::of(1000, 1000);

    #[test]
    fn root_sets_every_id_and_cannot_come_back() {
        let dropped = Ids::ROOT.set_id(Family::User, 1000).unwrap();
        assert_eq!(dropped.status_line(Family::User), [1000; 4]);
        assert_eq!(dropped.set_id(Family::User, 0), Err(EPERM));
        // Groups first, while still privileged: the usual order of a daemon dropping root.
        let group = Ids::ROOT.set_id(Family::Group, 1000).unwrap().set_id(Family::User, 1000).unwrap();
        assert_eq!(group, USER);
        assert_eq!(dropped.set_id(Family::Group, 1000), Err(EPERM), "setgid after setuid is too late");
    }

    #[test]
    fn an_unprivileged_setuid_takes_the_real_or_saved_id_only() {
        let ids = Ids { saved_uid: 7, ..USER };
        assert_eq!(ids.set_id(Family::User, 7).unwrap().status_line(Family::User), [1000, 7, 7, 7]);
        assert_eq!(ids.set_id(Family::User, 8), Err(EPERM));
        assert_eq!(ids.set_id(Family::User, UNCHANGED), Err(EINVAL));
    }

    #[test]
    fn a_set_user_id_root_program_can_swap_and_swap_back() {
        // What a set-user-id root program run by user 1000 has: real 1000, effective 0.
        let ids = Ids { effective_uid: 0, saved_uid: 0, filesystem_uid: 0, ..USER };
        // Drops temporarily: setresuid(-1, 1000, -1) keeps the saved 0.
        let temporary = ids.set_real_effective_saved(Family::User, UNCHANGED, 1000, UNCHANGED).unwrap();
        assert_eq!(temporary.status_line(Family::User), [1000, 1000, 0, 1000]);
        assert!(!temporary.is_privileged());
        let back = temporary.set_real_effective_saved(Family::User, UNCHANGED, 0, UNCHANGED).unwrap();
        assert!(back.is_privileged());
        // setreuid(-1, 1000): the new effective id is the old real one, so the saved 0 stays.
        let swapped = ids.set_real_effective(Family::User, UNCHANGED, 1000).unwrap();
        assert_eq!(swapped.status_line(Family::User), [1000, 1000, 0, 1000], "effective = old real: saved kept");
        let permanent = ids.set_real_effective(Family::User, 1000, 1000).unwrap();
        assert_eq!(permanent.status_line(Family::User), [1000; 4], "real given: saved follows");
        assert_eq!(permanent.set_real_effective(Family::User, UNCHANGED, 0), Err(EPERM));
    }

    #[test]
    fn setfsuid_reports_the_old_id_and_may_fail_silently() {
        let (after, old) = USER.set_filesystem_id(Family::User, 0);
        assert_eq!((after, old), (USER, 1000));
        let (after, old) = Ids::ROOT.set_filesystem_id(Family::User, 1000);
        assert_eq!((after.filesystem_uid, after.effective_uid, old), (1000, 0, 0));
        assert!(!after.is_file_privileged() && after.is_privileged());
        assert_eq!(Ids::ROOT.set_filesystem_id(Family::Group, UNCHANGED), (Ids::ROOT, 0));
    }

    #[test]
    fn exec_honours_set_id_bits_and_saves_the_effective_ids() {
        let ran = USER.after_exec(0o104755, 0, 0, true);
        assert_eq!(ran.status_line(Family::User), [1000, 0, 0, 0]);
        assert_eq!(ran.status_line(Family::Group), [1000; 4]);
        assert_eq!(USER.after_exec(0o104755, 0, 0, false), USER, "no_new_privs ignores the bit");
        let group = USER.after_exec(0o102755, 0, 50, true);
        assert_eq!(group.status_line(Family::Group), [1000, 50, 50, 50]);
        assert_eq!(USER.after_exec(0o102745, 0, 50, true), USER, "setgid without group x is not set-group-id");
        let swapped = Ids { effective_uid: 5, ..USER }.after_exec(0o100755, 0, 0, true);
        assert_eq!(swapped.status_line(Family::User), [1000, 5, 5, 5]);
    }

    fn any_ids() -> impl Strategy<Value = Ids> {
        // Few distinct values, so the rules' equalities come up often.
        let id = prop_oneof![Just(0u32), Just(1u32), Just(1000u32), Just(65534u32)];
        proptest::array::uniform8(id).prop_map(|[a, b, c, d, e, f, g, h]| Ids {
            real_uid: a,
            effective_uid: b,
            saved_uid: c,
            filesystem_uid: d,
            real_gid: e,
            effective_gid: f,
            saved_gid: g,
            filesystem_gid: h,
        })
    }

    fn any_argument() -> impl Strategy<Value = u32> {
        prop_oneof![Just(0u32), Just(1u32), Just(1000u32), Just(65534u32), Just(UNCHANGED)]
    }

    fn any_family() -> impl Strategy<Value = Family> {
        prop_oneof![Just(Family::User), Just(Family::Group)]
    }

    proptest! {
        /// No call gives an unprivileged process an id it did not hold as real, effective or
        /// saved (or, for setfsuid, as file-system id), and no call changes the other family.
        #[test]
        fn unprivileged_calls_never_gain_an_id(
            ids in any_ids(), family in any_family(), a in any_argument(), b in any_argument(), c in any_argument(),
        ) {
            prop_assume!(!ids.is_privileged());
            let before = ids.family(family);
            let results = [
                ids.set_id(family, a),
                ids.set_real_effective(family, a, b),
                ids.set_real_effective_saved(family, a, b, c),
                Ok(ids.set_filesystem_id(family, a).0),
            ];
            for after in results.into_iter().flatten() {
                for id in after.family(family) {
                    prop_assert!(before.contains(&id), "{:?} → {:?}", ids, after);
                }
                let other = if family == Family::User { Family::Group } else { Family::User };
                prop_assert_eq!(after.family(other), ids.family(other));
            }
        }

        /// After any call but setfsuid, the file-system id is the effective one.
        #[test]
        fn the_filesystem_id_follows_the_effective_one(
            ids in any_ids(), family in any_family(), a in any_argument(), b in any_argument(), c in any_argument(),
        ) {
            for after in [ids.set_id(family, a), ids.set_real_effective(family, a, b),
                          ids.set_real_effective_saved(family, a, b, c)].into_iter().flatten() {
                let [_, effective, _, filesystem] = after.family(family);
                prop_assert_eq!(effective, filesystem);
            }
        }

        /// setresuid with every id -1 changes nothing but the file-system id, which comes back
        /// to the effective one; a privileged caller may take any triple.
        #[test]
        fn setresuid_keeps_and_privilege_allows(ids in any_ids(), family in any_family(),
                                                 a in any_argument(), b in any_argument(), c in any_argument()) {
            let kept = ids.set_real_effective_saved(family, UNCHANGED, UNCHANGED, UNCHANGED).unwrap();
            let [r, e, s, _] = ids.family(family);
            prop_assert_eq!(kept.family(family), [r, e, s, e]);
            if ids.is_privileged() {
                prop_assert!(ids.set_real_effective_saved(family, a, b, c).is_ok());
            }
        }

        #[test]
        fn ids_survive_the_trip(ids in any_ids()) {
            prop_assert_eq!(Ids::decode(&ids.encode()), Some(ids));
        }
    }
}
