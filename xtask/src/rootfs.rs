//! `cargo xtask rootfs`: a Debian tree in `target/debian-root`, made from Debian's packages
//! with `apt-get download` and `dpkg-deb -x` (nothing installed, no network but the package
//! registry), for `cargo xtask run --debian` to share with Reef at `/debian`.
//!
//! The tree holds [`PACKAGES`] and everything they depend on (`apt-cache depends --recurse`,
//! without recommends or suggests), as the packages lay it out (`/bin` and `/usr/bin` both
//! real directories: `dpkg-deb -x` would replace usr-merge links with directories), and
//! `/etc/ld.so.cache` made by the host's `ldconfig -r`, and `/etc/passwd` and `/etc/group` from
//! `base-passwd`. It is made once and reused while its
//! list of package versions (`.reef-packages`) is what apt names now.

use crate::tools;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What the tree is for: Debian's own dynamically linked programs (issue 29).
/// `libpython3.11-testsuite` is CPython's own regression tests; `base-passwd` the users and
/// groups every Debian system has (root among them); `dash` Debian's `/bin/sh`, which
/// `system()` and `subprocess` with `shell=True` run.
pub const PACKAGES: [&str; 10] = [
    "libc6",
    "bash",
    "dash",
    "coreutils",
    "grep",
    "sed",
    "findutils",
    "python3",
    "libpython3.11-testsuite",
    "base-passwd",
];

/// Where the tree is made.
pub fn directory() -> PathBuf {
    tools::root().join("target/debian-root")
}

/// The list the tree records of what it holds: `package=version` a line, sorted.
const STAMP: &str = ".reef-packages";

/// Runs `command`, its stdout on success, its last error line otherwise.
fn output_of(command: &mut Command, what: &str) -> Result<String, String> {
    let output = command.output().map_err(|e| format!("{what}: cannot start: {e} (is it installed?)"))?;
    if !output.status.success() {
        let errors = String::from_utf8_lossy(&output.stderr);
        let reason = errors.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no message");
        return Err(format!("{what} failed ({}): {}", output.status, reason.trim()));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The real packages `apt-cache depends --recurse` names for `roots` (virtual ones, in
/// angle brackets, left out): its lines that are not indented.
fn closure_of(depends_output: &str) -> Vec<String> {
    let mut names: Vec<String> = depends_output
        .lines()
        .filter(|line| !line.starts_with(' ') && !line.starts_with('<') && !line.trim().is_empty())
        .map(|line| line.trim().to_string())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The packages to unpack, with their versions as apt knows them now.
fn resolve() -> Result<Vec<(String, String)>, String> {
    let depends = || {
        output_of(
            Command::new("apt-cache")
                .args(["depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts", "--no-breaks"])
                .args(["--no-replaces", "--no-enhances"])
                .args(PACKAGES),
            "apt-cache depends",
        )
    };
    let output = match depends() {
        Ok(output) if !closure_of(&output).is_empty() => output,
        _ => {
            eprintln!("xtask: apt knows no packages yet; running apt-get update");
            output_of(Command::new("apt-get").args(["update", "-q"]), "apt-get update")?;
            depends()?
        }
    };
    let names = closure_of(&output);
    let policy = output_of(Command::new("apt-cache").arg("policy").args(&names), "apt-cache policy")?;
    Ok(candidates(&policy, &names))
}

/// Each package of `names` with its candidate version from `apt-cache policy` output
/// (`name:\n  Installed: ...\n  Candidate: 1.2-3\n`); a package without one is left out.
fn candidates(policy: &str, names: &[String]) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut current: Option<&str> = None;
    for line in policy.lines() {
        if !line.starts_with(' ') {
            current = line.strip_suffix(':');
        } else if let (Some(name), Some(version)) = (current, line.trim().strip_prefix("Candidate: ")) {
            if version != "(none)" && names.iter().any(|n| n == name) {
                found.push((name.to_string(), version.to_string()));
            }
        }
    }
    found.sort();
    found
}

/// The stamp's text for `packages`.
fn stamp_text(packages: &[(String, String)]) -> String {
    packages.iter().map(|(name, version)| format!("{name}={version}\n")).collect()
}

/// Makes the tree if it is missing or holds other versions; returns its path.
pub fn build() -> Result<PathBuf, String> {
    let root = directory();
    let packages = resolve()?;
    let wanted = stamp_text(&packages);
    if std::fs::read_to_string(root.join(STAMP)).is_ok_and(|held| held == wanted) {
        eprintln!("xtask: {} is up to date ({} packages)", root.display(), packages.len());
        return Ok(root);
    }
    let debs = tools::root().join("target/debian-debs");
    let _ = std::fs::remove_dir_all(&root);
    let _ = std::fs::remove_dir_all(&debs);
    std::fs::create_dir_all(&debs).map_err(|e| format!("creating {}: {e}", debs.display()))?;
    std::fs::create_dir_all(&root).map_err(|e| format!("creating {}: {e}", root.display()))?;
    eprintln!("xtask: apt-get download of {} packages ({})", packages.len(), PACKAGES.join(" "));
    let specs: Vec<String> = packages.iter().map(|(name, version)| format!("{name}={version}")).collect();
    output_of(Command::new("apt-get").args(["download", "-q"]).args(&specs).current_dir(&debs), "apt-get download")?;
    let mut unpacked = 0;
    for entry in std::fs::read_dir(&debs).map_err(|e| format!("reading {}: {e}", debs.display()))? {
        let deb = entry.map_err(|e| e.to_string())?.path();
        if deb.extension().is_some_and(|extension| extension == "deb") {
            output_of(
                Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root),
                &format!("dpkg-deb -x {}", deb.display()),
            )?;
            unpacked += 1;
        }
    }
    loader_cache(&root)?;
    users_and_groups(&root)?;
    std::fs::write(root.join(STAMP), wanted).map_err(|e| format!("writing the stamp: {e}"))?;
    eprintln!("xtask: {} holds {unpacked} packages", root.display());
    Ok(root)
}

/// `/etc/ld.so.cache` of the tree, by the host's `ldconfig -r` (the tree's own
/// `/etc/ld.so.conf`, made if no package brought one).
fn loader_cache(root: &Path) -> Result<(), String> {
    let configuration = root.join("etc/ld.so.conf");
    if !configuration.exists() {
        std::fs::create_dir_all(root.join("etc/ld.so.conf.d"))
            .map_err(|e| format!("creating etc/ld.so.conf.d: {e}"))?;
        std::fs::write(&configuration, "include /etc/ld.so.conf.d/*.conf\n")
            .map_err(|e| format!("writing etc/ld.so.conf: {e}"))?;
    }
    let ldconfig = ["/sbin/ldconfig", "/usr/sbin/ldconfig"].into_iter().find(|path| Path::new(path).exists());
    let ldconfig = ldconfig.ok_or("ldconfig is missing on the host (Debian's libc-bin has it)")?;
    output_of(Command::new(ldconfig).arg("-r").arg(root), "ldconfig -r")?;
    Ok(())
}

/// `/etc/passwd` and `/etc/group` from `base-passwd`'s master files, as its installation
/// (which `dpkg-deb -x` does not run) would make them: `getpwuid(0)` finds root.
fn users_and_groups(root: &Path) -> Result<(), String> {
    for (master, file) in [("passwd.master", "etc/passwd"), ("group.master", "etc/group")] {
        let from = root.join("usr/share/base-passwd").join(master);
        std::fs::copy(&from, root.join(file)).map_err(|e| format!("copying {}: {e}", from.display()))?;
    }
    Ok(())
}

/// `cargo xtask rootfs`.
/// The packages `tree` (a [`build`]) was made from, `name=version` a line.
pub fn package_versions(tree: &Path) -> Result<String, String> {
    std::fs::read_to_string(tree.join(STAMP)).map_err(|e| format!("reading {}: {e}", tree.join(STAMP).display()))
}

pub fn run(arguments: &[String]) -> Result<u8, String> {
    if let Some(other) = arguments.first() {
        return Err(format!("rootfs takes no argument (got `{other}`): see `cargo xtask help`"));
    }
    let root = build()?;
    println!("{}", root.display());
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_closure_keeps_real_packages_once() {
        let output = "bash\n  PreDepends: libc6\n  Depends: base-files\nlibc6\n  Depends: libgcc-s1\n<awk>\nbash\n";
        assert_eq!(closure_of(output), ["bash", "libc6"]);
    }

    #[test]
    fn candidates_come_from_apt_policy() {
        let policy = "bash:\n  Installed: 5.2.15-2+b2\n  Candidate: 5.2.15-2+b7\n  Version table:\n     \
                      5.2.15-2+b7 500\nlibc6:\n  Installed: (none)\n  Candidate: 2.36-9+deb12u10\n\
                      ghost:\n  Installed: (none)\n  Candidate: (none)\n";
        let names: Vec<String> = ["bash", "libc6", "ghost"].iter().map(|n| n.to_string()).collect();
        assert_eq!(
            candidates(policy, &names),
            [("bash".to_string(), "5.2.15-2+b7".to_string()), ("libc6".to_string(), "2.36-9+deb12u10".to_string())]
        );
        assert_eq!(stamp_text(&candidates(policy, &names)), "bash=5.2.15-2+b7\nlibc6=2.36-9+deb12u10\n");
    }
}
