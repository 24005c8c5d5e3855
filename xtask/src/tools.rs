//! Making sure the tools exist (QEMU), and building the kernel image.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the workspace").to_path_buf()
}

/// `cargo`, as the one running us (so the pinned toolchain is used).
pub fn cargo() -> Command {
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command.current_dir(root());
    command
}

/// Runs a command, failing with its description if it does not succeed.
pub fn run_checked(command: &mut Command, what: &str) -> Result<(), String> {
    let status = command.status().map_err(|e| format!("{what}: cannot start: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{what} failed ({status})"))
    }
}

fn have(program: &str) -> bool {
    Command::new(program).arg("--version").output().map(|o| o.status.success()).unwrap_or(false)
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0").unwrap_or(false)
}

/// Installs a Debian package when missing and we are root; else explains what to install.
pub fn ensure_program(program: &str, package: &str) -> Result<(), String> {
    if have(program) {
        return Ok(());
    }
    if !is_root() {
        return Err(format!("`{program}` is missing: install it with `sudo apt-get install {package}` and run again"));
    }
    eprintln!("xtask: installing {package} with apt-get");
    run_checked(Command::new("apt-get").args(["update", "-qq"]), "apt-get update")?;
    run_checked(
        Command::new("apt-get")
            .args(["install", "-y", "-qq", "--no-install-recommends", package])
            .env("DEBIAN_FRONTEND", "noninteractive"),
        &format!("apt-get install {package}"),
    )?;
    if have(program) {
        Ok(())
    } else {
        Err(format!("`{program}` still missing after installing {package}"))
    }
}

/// QEMU for x86-64.
pub fn ensure_qemu() -> Result<(), String> {
    ensure_program("qemu-system-x86_64", "qemu-system-x86")
}

/// Builds the kernel (release, with symbols) and returns the ELF path.
pub fn build_kernel() -> Result<PathBuf, String> {
    run_checked(
        cargo().args(["build", "--quiet", "--release", "-p", "kernel", "--target", "x86_64-unknown-none"]),
        "building the kernel",
    )?;
    Ok(root().join("target/x86_64-unknown-none/release/kernel"))
}
