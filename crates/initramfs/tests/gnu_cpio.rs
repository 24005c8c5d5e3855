//! Archives GNU cpio 2.13 wrote (`find . | sort | cpio -o -H newc`, and `-H crc`) read back.
//!
//! They hold what the writer never produces: a `.` entry, `./`-prefixed names, upper-case
//! hex, real inode and device numbers, checksums, and zero padding to 512-byte blocks.

use initramfs::{Archive, Entry};

fn check(bytes: &[u8]) {
    let archive = Archive::parse(bytes).expect("GNU cpio output parses");
    let names: Vec<&str> = archive.entries().map(|entry| entry.name).collect();
    assert_eq!(names, ["", "bin", "bin/hello", "bin/link", "etc", "etc/absolute", "etc/empty"]);
    let hello = archive.find("/bin/hello").unwrap();
    assert!(hello.is_file());
    assert_eq!((hello.data, hello.permissions()), (&b"hello from GNU cpio\n"[..], 0o755));
    assert_eq!(hello.mtime, 1_704_067_200, "2024-01-01, as touched");
    assert_eq!(archive.find("bin/link").unwrap().symlink_target(), Some("hello"));
    for path in ["bin/link", "/etc/absolute"] {
        assert_eq!(archive.resolve(path, true).unwrap().name, "bin/hello", "{path}");
    }
    let root = archive.find("/").unwrap();
    assert!(root.is_directory() && root.inode != 0, "the archive's own `.` entry is the root");
    let etc: Vec<&str> = archive.read_dir("/etc").unwrap().map(|entry: Entry| entry.file_name()).collect();
    assert_eq!(etc, ["absolute", "empty"]);
    assert!(archive.as_bytes().len() < bytes.len(), "the 512-byte block padding is not part of the archive");
}

#[test]
fn newc() {
    check(include_bytes!("fixtures/gnu-newc.cpio"));
}

#[test]
fn newc_with_checksums() {
    let bytes = include_bytes!("fixtures/gnu-crc.cpio");
    assert_eq!(&bytes[..6], b"070702");
    check(bytes);
}
