//! What a case says when a step goes wrong: the step, what was expected, what came, errno by name.

use std::fmt::{Debug, Display};
use std::io;

/// What one case found: the detail of its `ok` line, or of its `fail` line.
pub type Outcome = Result<String, String>;

/// A step's failure, said with the step's name: `open /tmp/x: ENOENT`.
pub trait Step<T> {
    fn step(self, what: impl Display) -> Result<T, String>;
}

impl<T> Step<T> for io::Result<T> {
    fn step(self, what: impl Display) -> Result<T, String> {
        self.map_err(|error| format!("{what}: {}", describe(&error)))
    }
}

/// The errno names the cases meet, Linux x86-64's numbers.
const ERRNO_NAMES: [(i32, &str); 38] = [
    (libc::EPERM, "EPERM"),
    (libc::ENOENT, "ENOENT"),
    (libc::ESRCH, "ESRCH"),
    (libc::EINTR, "EINTR"),
    (libc::EIO, "EIO"),
    (libc::ENXIO, "ENXIO"),
    (libc::E2BIG, "E2BIG"),
    (libc::ENOEXEC, "ENOEXEC"),
    (libc::EBADF, "EBADF"),
    (libc::ECHILD, "ECHILD"),
    (libc::EAGAIN, "EAGAIN"),
    (libc::ENOMEM, "ENOMEM"),
    (libc::EACCES, "EACCES"),
    (libc::EFAULT, "EFAULT"),
    (libc::EBUSY, "EBUSY"),
    (libc::EEXIST, "EEXIST"),
    (libc::EXDEV, "EXDEV"),
    (libc::ENODEV, "ENODEV"),
    (libc::ENOTDIR, "ENOTDIR"),
    (libc::EISDIR, "EISDIR"),
    (libc::EINVAL, "EINVAL"),
    (libc::ENFILE, "ENFILE"),
    (libc::EMFILE, "EMFILE"),
    (libc::ENOTTY, "ENOTTY"),
    (libc::EFBIG, "EFBIG"),
    (libc::ENOSPC, "ENOSPC"),
    (libc::ESPIPE, "ESPIPE"),
    (libc::EROFS, "EROFS"),
    (libc::EMLINK, "EMLINK"),
    (libc::EPIPE, "EPIPE"),
    (libc::ERANGE, "ERANGE"),
    (libc::ENAMETOOLONG, "ENAMETOOLONG"),
    (libc::ENOSYS, "ENOSYS"),
    (libc::ENOTEMPTY, "ENOTEMPTY"),
    (libc::ELOOP, "ELOOP"),
    (libc::EOPNOTSUPP, "EOPNOTSUPP"),
    (libc::ETIMEDOUT, "ETIMEDOUT"),
    (libc::EDQUOT, "EDQUOT"),
];

/// `ENOENT` for 2; `errno 200` for a number without a name here.
pub fn errno_name(code: i32) -> String {
    match ERRNO_NAMES.iter().find(|(number, _)| *number == code) {
        Some((_, name)) => name.to_string(),
        None => format!("errno {code}"),
    }
}

/// An error as the lines show it: its errno's name, else its text.
pub fn describe(error: &io::Error) -> String {
    match error.raw_os_error() {
        Some(code) => errno_name(code),
        None => error.to_string(),
    }
}

/// `result` must be the error `wanted` (an errno).
pub fn expect_error<T>(what: impl Display, result: io::Result<T>, wanted: i32) -> Result<(), String> {
    match result {
        Err(error) if error.raw_os_error() == Some(wanted) => Ok(()),
        Err(error) => Err(format!("{what}: expected {}, got {}", errno_name(wanted), describe(&error))),
        Ok(_) => Err(format!("{what}: expected {}, got success", errno_name(wanted))),
    }
}

/// `got` must equal `wanted`.
pub fn expect_equal<T: PartialEq + Debug>(what: impl Display, got: T, wanted: T) -> Result<(), String> {
    if got == wanted {
        Ok(())
    } else {
        Err(format!("{what}: expected {wanted:?}, got {got:?}"))
    }
}

/// `condition` must hold; else the failure is `what`.
pub fn expect(condition: bool, what: impl Display) -> Result<(), String> {
    if condition {
        Ok(())
    } else {
        Err(what.to_string())
    }
}

/// Where `got` first differs from `wanted`, or `None` when they are equal.
pub fn first_difference(wanted: &[u8], got: &[u8]) -> Option<String> {
    if let Some(index) = wanted.iter().zip(got).position(|(a, b)| a != b) {
        return Some(format!("byte {index} is {:#04x} instead of {:#04x}", got[index], wanted[index]));
    }
    (wanted.len() != got.len()).then(|| format!("{} bytes instead of {}", got.len(), wanted.len()))
}

/// `got` must be exactly the bytes `wanted`.
pub fn expect_bytes(what: impl Display, got: &[u8], wanted: &[u8]) -> Result<(), String> {
    match first_difference(wanted, got) {
        None => Ok(()),
        Some(difference) if got.len() <= 32 && wanted.len() <= 32 => Err(format!(
            "{what}: expected {:?}, got {:?} ({difference})",
            String::from_utf8_lossy(wanted),
            String::from_utf8_lossy(got)
        )),
        Some(difference) => Err(format!("{what}: {difference}")),
    }
}

/// `bytes` must all be zero (a hole, `/dev/zero`, a grown file).
pub fn expect_zeros(what: impl Display, bytes: &[u8]) -> Result<(), String> {
    match bytes.iter().position(|&byte| byte != 0) {
        None => Ok(()),
        Some(index) => Err(format!("{what}: byte {index} of {} is {:#04x}, not 0", bytes.len(), bytes[index])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_named() {
        assert_eq!(errno_name(libc::ENOENT), "ENOENT");
        assert_eq!(errno_name(4000), "errno 4000");
        assert_eq!(describe(&io::Error::from_raw_os_error(libc::EROFS)), "EROFS");
        let result: io::Result<()> = Err(io::Error::from_raw_os_error(libc::ENOENT));
        assert_eq!(result.step("open /x"), Err("open /x: ENOENT".to_string()));
    }

    #[test]
    fn expected_errors_say_expected_and_got() {
        assert_eq!(
            expect_error("mkdir", Err::<(), _>(io::Error::from_raw_os_error(libc::EEXIST)), libc::EEXIST),
            Ok(())
        );
        assert_eq!(
            expect_error("mkdir", Err::<(), _>(io::Error::from_raw_os_error(libc::EPERM)), libc::EEXIST),
            Err("mkdir: expected EEXIST, got EPERM".to_string())
        );
        assert_eq!(expect_error("mkdir", Ok(()), libc::EEXIST), Err("mkdir: expected EEXIST, got success".to_string()));
        assert_eq!(expect_equal("size", 3, 4), Err("size: expected 4, got 3".to_string()));
    }

    #[test]
    fn differences_are_located() {
        assert_eq!(first_difference(b"abc", b"abc"), None);
        assert_eq!(first_difference(b"abc", b"abd"), Some("byte 2 is 0x64 instead of 0x63".to_string()));
        assert_eq!(first_difference(b"abc", b"ab"), Some("2 bytes instead of 3".to_string()));
        assert_eq!(
            expect_bytes("file", b"ab", b"abc"),
            Err("file: expected \"abc\", got \"ab\" (2 bytes instead of 3)".to_string())
        );
        assert_eq!(expect_bytes("file", &[0; 100], &[1; 100]), Err("file: byte 0 is 0x00 instead of 0x01".to_string()));
        assert_eq!(expect_zeros("hole", &[0, 0, 7]), Err("hole: byte 2 of 3 is 0x07, not 0".to_string()));
    }
}
