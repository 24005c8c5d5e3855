//! Debian's own dynamically linked programs: `ld.so` and glibc from the Debian tree, read
//! through the share, on core 0 and on core 1, with the host's run of the same binaries as
//! the expected output; and interpreters that are missing or not an ELF.

use super::exec;
use crate::qemu::{Machine, Share};
use crate::test::runner::Integration;
use crate::test::serial::printed_in_order;
use std::path::Path;

/// The runs' names (the tree is made only when one of them is selected).
const NAMES: [&str; 2] = ["dynamic-debian-2-cores", "dynamic-bad-interpreter"];

/// The loader and its library path inside the tree, relative to its root.
const LOADER: &str = "lib/x86_64-linux-gnu/ld-linux-x86-64.so.2";
const LIBRARY_PATH: &str = "lib/x86_64-linux-gnu:usr/lib/x86_64-linux-gnu";

/// What the programs are run on: `ls -l`, `cat` and `sha256sum` of files of the tree.
const COMMANDS: [&str; 3] = ["bin/ls -l bin/true bin/cat", "bin/cat etc/debian_version", "usr/bin/sha256sum bin/true"];

pub(super) fn integrations(list: &mut Vec<Integration>, machine: &dyn Fn(usize, &str) -> Machine) {
    if !NAMES.iter().any(|name| super::is_selected(name)) {
        return;
    }
    let tree = match crate::rootfs::build() {
        Ok(tree) => tree,
        Err(why) => {
            list.extend(NAMES.iter().map(|name| super::unprepared(name.to_string(), &why, machine)));
            return;
        }
    };
    debian_programs(list, machine, &tree);
    bad_interpreter(list, machine, &tree);
}

/// A command of [`COMMANDS`] run by the tree's loader from the tree's root: `root` is `/debian`
/// in Reef, the tree's path on the host.
fn loaded(root: &str, command: &str) -> String {
    let library_path: Vec<String> = LIBRARY_PATH.split(':').map(|p| format!("{root}/{p}")).collect();
    format!("{root}/{LOADER} --library-path {} {command}", library_path.join(":"))
}

/// The host's output of every command of [`COMMANDS`], run in `tree`.
fn host_output(tree: &Path) -> Result<Vec<String>, String> {
    let root = tree.display().to_string();
    COMMANDS
        .iter()
        .map(|command| {
            let output = std::process::Command::new("sh")
                .arg("-c")
                .arg(loaded(&root, command))
                .current_dir(tree)
                .output()
                .map_err(|e| format!("running {command} on the host: {e}"))?;
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        })
        .collect()
}

/// `ls -l`, `cat` and `sha256sum` of the tree run on core 0, then on core 1, print what they
/// print on the host, and ask for no system call Reef lacks.
fn debian_programs(list: &mut Vec<Integration>, machine: &dyn Fn(usize, &str) -> Machine, tree: &Path) {
    let commands: Vec<String> = COMMANDS.iter().map(|c| loaded("/debian", c)).collect();
    let all = commands.join("; ");
    let script = format!("cd /debian; {all}; echo core 1; on 1 sh -c 'cd /debian; {all}'; cat /proc/reef/syscalls");
    let mut m = machine(2, &exec(&script));
    m.shares = vec![Share { directory: tree.to_path_buf(), mount_point: "/debian".into() }];
    let tree = tree.to_path_buf();
    list.push(Integration {
        name: NAMES[0].into(),
        machine: m,
        expected_status: 0,
        check: Box::new(move |serial| {
            let host = host_output(&tree)?;
            let mut expected: Vec<&str> = host.iter().map(String::as_str).collect();
            expected.push("core 1\n");
            expected.extend(host.iter().map(String::as_str));
            expected.extend(["core 0:", "0 unimplemented (ENOSYS)", "core 1:", "0 unimplemented (ENOSYS)"]);
            printed_in_order(serial, &expected)
        }),
    });
}

/// A program whose interpreter is missing (Debian's `true` names `/lib64/ld-linux-x86-64.so.2`,
/// absent outside a chroot) fails with `ENOENT`; one whose interpreter is a text file with
/// `ENOEXEC`; the kernel lives on to say `alive`.
fn bad_interpreter(list: &mut Vec<Integration>, machine: &dyn Fn(usize, &str) -> Machine, tree: &Path) {
    let directory = crate::tools::root().join("target/test-bad-interpreter");
    let _ = std::fs::remove_dir_all(&directory);
    let _ = std::fs::create_dir_all(&directory);
    let program = std::fs::read(tree.join("bin/true")).unwrap_or_default();
    let named = b"/lib64/ld-linux-x86-64.so.2\0";
    let text = b"/host/text-interpreter.txt\0\0";
    let mut patched = program.clone();
    if let Some(at) = program.windows(named.len()).position(|w| w == named) {
        patched[at..at + text.len()].copy_from_slice(text);
    }
    let _ = std::fs::write(directory.join("bad-interpreter"), patched);
    let _ = std::fs::write(directory.join("text-interpreter.txt"), b"not an ELF\n");
    let _ = std::fs::copy(tree.join("bin/true"), directory.join("missing-interpreter"));
    #[cfg(unix)]
    for name in ["bad-interpreter", "missing-interpreter"] {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(directory.join(name), std::fs::Permissions::from_mode(0o755));
    }
    let script = "/host/missing-interpreter; echo missing $?; /host/bad-interpreter; echo bad $?; \
                  on 1 sh -c '/host/missing-interpreter; echo missing $?'; echo alive";
    let mut m = machine(2, &exec(script));
    m.shares = vec![Share { directory, mount_point: "/host".into() }];
    list.push(Integration {
        name: NAMES[1].into(),
        machine: m,
        expected_status: 0,
        check: Box::new(|serial| {
            printed_in_order(
                serial,
                &["not found", "missing 127", "Permission denied", "bad 126", "missing 127", "alive"],
            )
        }),
    });
}
