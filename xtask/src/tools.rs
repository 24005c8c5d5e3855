//! Making sure the tools exist (the pinned toolchain's targets and components, QEMU), and
//! building the kernel image.

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

/// The targets and components `rust-toolchain.toml` pins: (channel, targets, components).
/// Only the lines `channel = "…"`, `targets = [ … ]` and `components = [ … ]` are read.
pub fn pinned_toolchain(text: &str) -> Result<(String, Vec<String>, Vec<String>), String> {
    let mut channel = None;
    let (mut targets, mut components) = (Vec::new(), Vec::new());
    for line in text.lines() {
        let Some((key, value)) = line.split_once('=') else { continue };
        let words = || -> Vec<String> {
            value
                .trim()
                .trim_start_matches('[')
                .trim_end_matches(']')
                .split(',')
                .map(|w| w.trim().trim_matches('"').to_string())
                .filter(|w| !w.is_empty())
                .collect()
        };
        match key.trim() {
            "channel" => channel = words().into_iter().next(),
            "targets" => targets = words(),
            "components" => components = words(),
            _ => {}
        }
    }
    let channel = channel.ok_or("rust-toolchain.toml names no channel")?;
    Ok((channel, targets, components))
}

/// Names in `wanted` that the `installed` listing (one per line, as rustup prints it) lacks.
/// Components are listed with their host suffix (`clippy-x86_64-unknown-linux-gnu`), targets
/// bare, so a listed name matches a wanted one equal to it or starting with it and a `-`.
pub fn missing(wanted: &[String], installed: &str) -> Vec<String> {
    wanted
        .iter()
        .filter(|name| {
            !installed.lines().map(str::trim).any(|line| {
                line == name.as_str() || line.strip_prefix(name.as_str()).is_some_and(|rest| rest.starts_with('-'))
            })
        })
        .cloned()
        .collect()
}

/// Adds the targets and components `rust-toolchain.toml` pins that the toolchain lacks.
/// rustup installs them with a toolchain it downloads, but not into a toolchain that is
/// already installed (a fresh machine here has 1.95.0 without `x86_64-unknown-none`).
pub fn ensure_toolchain() -> Result<(), String> {
    let pinned = std::fs::read_to_string(root().join("rust-toolchain.toml"))
        .map_err(|e| format!("cannot read rust-toolchain.toml: {e}"))?;
    let (channel, targets, components) = pinned_toolchain(&pinned)?;
    let listing = |what: &str| -> Result<String, String> {
        let output = Command::new("rustup")
            .args([what, "list", "--installed", "--toolchain", &channel])
            .output()
            .map_err(|e| format!("rustup is needed to add the pinned targets ({e}): install it from rustup.rs"))?;
        if !output.status.success() {
            return Err(format!(
                "`rustup {what} list --toolchain {channel}` failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    };
    for (what, wanted) in [("target", targets), ("component", components)] {
        let absent = missing(&wanted, &listing(what)?);
        if absent.is_empty() {
            continue;
        }
        eprintln!("xtask: adding {what} {} to toolchain {channel} with rustup", absent.join(" "));
        run_checked(
            Command::new("rustup").args([what, "add", "--toolchain", &channel]).args(&absent),
            &format!("rustup {what} add {}", absent.join(" ")),
        )?;
    }
    Ok(())
}

/// QEMU for x86-64.
pub fn ensure_qemu() -> Result<(), String> {
    let emulator = crate::qemu::emulator();
    if emulator != "qemu-system-x86_64" {
        return if have(&emulator) {
            Ok(())
        } else {
            Err(format!("REEF_QEMU={emulator} does not run (`{emulator} --version` failed): unset it or fix the path"))
        };
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_pinned_toolchain() {
        let text = "[toolchain]\nchannel = \"1.95.0\"\ntargets = [\"x86_64-unknown-none\", \"x86_64-unknown-linux-musl\"]\ncomponents = [\"rustfmt\", \"clippy\"]\nprofile = \"minimal\"\n";
        let (channel, targets, components) = pinned_toolchain(text).unwrap();
        assert_eq!(channel, "1.95.0");
        assert_eq!(targets, ["x86_64-unknown-none", "x86_64-unknown-linux-musl"]);
        assert_eq!(components, ["rustfmt", "clippy"]);
        assert!(pinned_toolchain("[toolchain]\n").is_err());
    }

    #[test]
    fn the_repository_pins_the_kernel_target() {
        let text = std::fs::read_to_string(root().join("rust-toolchain.toml")).unwrap();
        let (_, targets, _) = pinned_toolchain(&text).unwrap();
        assert!(targets.iter().any(|t| t == "x86_64-unknown-none"));
    }

    #[test]
    fn finds_what_is_missing() {
        let targets = "x86_64-unknown-linux-gnu\n";
        let wanted = vec!["x86_64-unknown-none".to_string()];
        assert_eq!(missing(&wanted, targets), wanted);
        assert!(missing(&wanted, "x86_64-unknown-linux-gnu\nx86_64-unknown-none\n").is_empty());
        let components =
            "cargo-x86_64-unknown-linux-gnu\nclippy-x86_64-unknown-linux-gnu\nrustfmt-x86_64-unknown-linux-gnu\n";
        assert!(missing(&["clippy".into(), "rustfmt".into()], components).is_empty());
        assert_eq!(missing(&["rust-src".into()], components), ["rust-src"]);
        // A prefix of another name is not a match.
        assert_eq!(missing(&["rust".into()], "rustfmt-x86_64-unknown-linux-gnu\n"), ["rust"]);
    }
}
