//! The suite's steps on the host before the QEMU runs: the initramfs read back, and
//! `cargo xtask run -- <command>` against a stand-in emulator.

use crate::tools::{self, run_checked};
use std::path::Path;

/// The initramfs the QEMU runs boot, read back with the kernel's reader: `/etc/hello.txt`
/// holds [`tools::HELLO_TEXT`], every user program of this tree is in place, busybox is static
/// and every link in `/bin` leads to it or to a program.
pub(crate) fn initramfs_image_checks(initrd: &Path) -> Result<(), String> {
    let bytes = std::fs::read(initrd).map_err(|e| format!("reading {}: {e}", initrd.display()))?;
    let archive = initramfs::Archive::parse(&bytes).map_err(|e| format!("{}: {e}", initrd.display()))?;
    let file = |path: &str| -> Result<&[u8], String> {
        let entry = archive.resolve(path, true).map_err(|e| format!("{path}: {e}"))?;
        entry.is_file().then_some(entry.data).ok_or_else(|| format!("{path} is not a regular file"))
    };
    if file("/etc/hello.txt")? != tools::HELLO_TEXT.as_bytes() {
        return Err("/etc/hello.txt does not hold the known text".into());
    }
    for name in tools::USER_PROGRAMS {
        if tools::root().join("user").join(name).join("Cargo.toml").is_file() {
            let path = if name == "init" { "/sbin/init".to_string() } else { format!("/bin/{name}") };
            if tools::has_program_interpreter(file(&path)?) {
                return Err(format!("{path} needs a dynamic loader"));
            }
        }
    }
    if tools::has_program_interpreter(file("/bin/busybox")?) {
        return Err("/bin/busybox needs a dynamic loader".into());
    }
    let mut applets = 0;
    for entry in archive.read_dir("/bin").map_err(|e| format!("/bin: {e}"))? {
        if entry.is_symlink() {
            applets += 1;
            let target = archive.resolve(entry.name, true).map_err(|e| format!("{}: {e}", entry.name))?;
            if !target.is_file() {
                return Err(format!("/{} leads to no program", entry.name));
            }
        }
    }
    // Debian's busybox-static has some 270 applets; a handful means `--list` went wrong.
    if applets < 100 {
        return Err(format!("only {applets} busybox applet links in /bin"));
    }
    Ok(())
}

/// `cargo xtask run -- <command>` as a user meets it, against a stand-in emulator (a script
/// named by `REEF_QEMU` that prints its arguments and then never exits): what the guest prints
/// must reach the terminal as it comes, even when the run is killed at its timeout, and
/// `--gdb` must reach the emulator.
pub(crate) fn run_command_checks() -> Result<(), String> {
    let script = tools::root().join("target/stand-in-qemu.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\n[ \"$1\" = --version ] && { echo stand-in; exit 0; }\necho \"stand-in serial: $*\"\nexec sleep 60\n",
    )
    .map_err(|e| format!("cannot write {}: {e}", script.display()))?;
    run_checked(std::process::Command::new("chmod").arg("+x").arg(&script), "chmod the stand-in emulator")?;
    let xtask = std::env::current_exe().map_err(|e| format!("cannot find the xtask binary: {e}"))?;
    let run = |extra: &[&str]| -> Result<(String, String), String> {
        let output = std::process::Command::new(&xtask)
            .args(["run", "--cores", "1", "--timeout", "2"])
            .args(extra)
            .args(["--", "help"])
            .env("REEF_QEMU", &script)
            // The images this suite built already (test kind): building production ones as
            // well would cost a kernel build for a check of the command's handling.
            .env("REEF_XTASK_IMAGES", "test")
            .output()
            .map_err(|e| format!("cannot run xtask: {e}"))?;
        if output.status.success() {
            return Err("`run` succeeded although the emulator never finished".into());
        }
        Ok((String::from_utf8_lossy(&output.stdout).into_owned(), String::from_utf8_lossy(&output.stderr).into_owned()))
    };
    let (stdout, stderr) = run(&[])?;
    if !stdout.contains("stand-in serial:") {
        return Err(format!("the serial output of a run killed at its timeout was not printed: stdout {stdout:?}"));
    }
    if !stderr.contains("did not finish") {
        return Err(format!("no timeout message: stderr {stderr:?}"));
    }
    let (stdout, stderr) = run(&["--gdb"])?;
    if !stdout.contains("-s -S") || !stderr.contains("waits for gdb") {
        return Err(format!("--gdb with a command did not reach the emulator: {stdout:?} {stderr:?}"));
    }
    Ok(())
}
