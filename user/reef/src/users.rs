//! `setuidgid`: run a program as another user, as daemontools' command of that name does.
//! busybox has no `su` without a set-user-id binary; this is the step a root shell takes to
//! drop to a user for a test or a server.

use crate::{FAILED_STATUS, NOT_FOUND_STATUS, USAGE_STATUS};
use std::os::unix::process::CommandExt;

const USAGE: &str = "setuidgid <user|uid[:gid]> <program> [args]";

/// The user and group ids `account` names: `uid[:gid]` (the group defaults to the uid), or a
/// name of `/etc/passwd` (its uid and primary group).
fn ids_of(account: &str, passwd: &str) -> Option<(u32, u32)> {
    if let Some((uid, gid)) = account.split_once(':') {
        return Some((uid.parse().ok()?, gid.parse().ok()?));
    }
    if let Ok(uid) = account.parse() {
        return Some((uid, uid));
    }
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        (fields.len() >= 4 && fields[0] == account).then(|| Some((fields[2].parse().ok()?, fields[3].parse().ok()?)))?
    })
}

/// Sets the group, drops the supplementary groups (Rust's `Command` does, dropping from root),
/// sets the user, then runs the program in this process: it returns only if something failed.
pub fn setuidgid(arguments: &[&str]) -> u8 {
    let [account, program, rest @ ..] = arguments else {
        eprintln!("setuidgid: usage: {USAGE}");
        return USAGE_STATUS;
    };
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let Some((uid, gid)) = ids_of(account, &passwd) else {
        eprintln!("setuidgid: no user `{account}` in /etc/passwd (or give uid[:gid])");
        return FAILED_STATUS;
    };
    let error = std::process::Command::new(program).args(rest).uid(uid).gid(gid).exec();
    eprintln!("setuidgid: {program} as {uid}:{gid}: {error}");
    if error.kind() == std::io::ErrorKind::NotFound {
        NOT_FOUND_STATUS
    } else {
        FAILED_STATUS
    }
}

#[cfg(test)]
mod tests {
    use super::ids_of;

    #[test]
    fn accounts_are_names_or_numbers() {
        let passwd = "root:x:0:0:root:/root:/bin/sh\nreef:x:1000:1000:Reef user:/home/reef:/bin/sh\n";
        assert_eq!(ids_of("reef", passwd), Some((1000, 1000)));
        assert_eq!(ids_of("1001", passwd), Some((1001, 1001)));
        assert_eq!(ids_of("1001:100", passwd), Some((1001, 100)));
        assert_eq!(ids_of("nobody", passwd), None);
        assert_eq!(ids_of("1:x", passwd), None);
    }
}
