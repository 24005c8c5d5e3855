//! Debian packages the host tools use without installing them: fetched with
//! `apt-get download`, unpacked into a cache under `target/`, reused until deleted.
//!
//! The Linux peer boots Debian's kernel and busybox; Reef's initramfs carries the same
//! busybox, so both take it from one cache. The bash script suite runs Debian's static bash
//! on Reef and on the host from the same cache.

use crate::tools;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The metapackage that names Debian's current kernel for amd64.
const KERNEL_METAPACKAGE: &str = "linux-image-amd64";
/// Busybox linked statically: a whole userland in one file with no loader or libraries.
const BUSYBOX_PACKAGE: &str = "busybox-static";
/// GNU bash linked statically: the shell the bash script suite runs, on Reef and on the host.
const BASH_PACKAGE: &str = "bash-static";

/// The cache directory, created if missing. It is `target/peer` because the Linux peer
/// fetched the first packages; it also keeps the peer's own files.
pub fn cache() -> Result<PathBuf, String> {
    let cache = tools::root().join("target/peer");
    std::fs::create_dir_all(&cache).map_err(|e| format!("creating {}: {e}", cache.display()))?;
    Ok(cache)
}

/// One unpacked Debian package file in the cache.
pub struct Unpacked {
    pub package: String,
    pub version: String,
    /// The file of the package we need (the kernel image, the busybox binary).
    pub file: PathBuf,
}

/// Runs an apt or dpkg tool and returns its stdout; a missing tool or a failure is one line.
fn run_tool(command: &mut Command) -> Result<String, String> {
    let program = command.get_program().to_string_lossy().into_owned();
    let output = command.output().map_err(|error| {
        if error.kind() == std::io::ErrorKind::NotFound {
            format!(
                "`{program}` is missing: Debian packages (busybox, bash, the peer's kernel) need apt-get, apt-cache, dpkg-deb"
            )
        } else {
            format!("cannot start `{program}`: {error}")
        }
    })?;
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    let errors = String::from_utf8_lossy(&output.stderr);
    // apt's own one-line reason ("E: ...") when it gave one.
    let reason = errors
        .lines()
        .rev()
        .find(|line| line.starts_with("E:"))
        .or_else(|| errors.lines().rev().find(|line| !line.trim().is_empty()))
        .unwrap_or("no message");
    let arguments: Vec<String> = command.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
    Err(format!("`{program} {}` failed ({}): {}", arguments.join(" "), output.status, reason.trim()))
}

/// The package `linux-image-amd64` depends on, from `apt-cache depends` output such as
/// `linux-image-amd64\n  Depends: linux-image-6.1.0-56-amd64\n`.
fn kernel_dependency(depends_output: &str) -> Option<String> {
    depends_output.lines().find_map(|line| {
        let name = line.trim().trim_start_matches('|').strip_prefix("Depends:")?.trim();
        (name.starts_with("linux-image-") && !name.starts_with('<')).then(|| name.to_string())
    })
}

/// Resolves the real kernel package of the metapackage.
fn resolve_kernel_package() -> Result<String, String> {
    let output = run_tool(Command::new("apt-cache").args(["depends", KERNEL_METAPACKAGE]))?;
    kernel_dependency(&output).ok_or_else(|| format!("`apt-cache depends {KERNEL_METAPACKAGE}` names no kernel"))
}

/// Where a package is unpacked in the cache, and its version note.
fn unpack_directory(cache: &Path, package: &str) -> PathBuf {
    cache.join(package)
}

/// The cached copy of `package` if it was unpacked before: its version note and `file`.
fn cached(cache: &Path, package: &str, find_file: impl Fn(&Path) -> Option<PathBuf>) -> Option<Unpacked> {
    let directory = unpack_directory(cache, package);
    let version = std::fs::read_to_string(directory.join("VERSION")).ok()?;
    let file = find_file(&directory)?;
    Some(Unpacked { package: package.to_string(), version: version.trim().to_string(), file })
}

/// `apt-get download package` into `cache/debs`, running `apt-get update` once if the first
/// try fails (a fresh machine has no package lists); returns the .deb path.
fn download(cache: &Path, package: &str) -> Result<PathBuf, String> {
    let debs = cache.join("debs");
    std::fs::create_dir_all(&debs).map_err(|e| format!("creating {}: {e}", debs.display()))?;
    let debs_of_package = || -> Vec<PathBuf> {
        let prefix = format!("{package}_");
        std::fs::read_dir(&debs)
            .into_iter()
            .flatten()
            .flatten()
            .map(|entry| entry.path())
            .filter(|path| {
                let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                name.starts_with(&prefix) && name.ends_with(".deb")
            })
            .collect()
    };
    for stale in debs_of_package() {
        let _ = std::fs::remove_file(stale);
    }
    eprintln!("xtask: apt-get download {package}");
    let download = || run_tool(Command::new("apt-get").args(["download", "-q", package]).current_dir(&debs));
    if let Err(first) = download() {
        eprintln!("xtask: {first}; running apt-get update and trying again");
        run_tool(Command::new("apt-get").args(["update", "-q"]))?;
        download()?;
    }
    debs_of_package().into_iter().next().ok_or_else(|| format!("apt-get download {package} left no .deb"))
}

/// The `Version` field of a .deb.
fn deb_version(deb: &Path) -> Result<String, String> {
    Ok(run_tool(Command::new("dpkg-deb").arg("-f").arg(deb).arg("Version"))?.trim().to_string())
}

/// Unpacks only `./boot/vmlinuz-*` of a kernel .deb: `dpkg-deb -x` would also write its
/// ~400 MB of modules, which an initramfs boot without modules never reads.
fn unpack_kernel_image(deb: &Path, directory: &Path) -> Result<(), String> {
    let mut dpkg = Command::new("dpkg-deb")
        .arg("--fsys-tarfile")
        .arg(deb)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start dpkg-deb: {e}"))?;
    let archive = dpkg.stdout.take().expect("piped");
    let tar = Command::new("tar")
        .arg("-x")
        .arg("-C")
        .arg(directory)
        .args(["--wildcards", "./boot/vmlinuz-*"])
        .stdin(archive)
        .status()
        .map_err(|e| format!("cannot start tar: {e}"))?;
    let dpkg = dpkg.wait().map_err(|e| e.to_string())?;
    if dpkg.success() && tar.success() {
        Ok(())
    } else {
        Err(format!("unpacking {}: dpkg-deb {dpkg}, tar {tar}", deb.display()))
    }
}

/// Downloads `package` and unpacks it with `unpack` into its cache directory, writing the
/// version note last so that an interrupted unpack is redone.
fn fetch(
    cache: &Path,
    package: &str,
    unpack: impl Fn(&Path, &Path) -> Result<(), String>,
    find_file: impl Fn(&Path) -> Option<PathBuf>,
) -> Result<Unpacked, String> {
    if let Some(unpacked) = cached(cache, package, &find_file) {
        return Ok(unpacked);
    }
    let deb = download(cache, package)?;
    let version = deb_version(&deb)?;
    let directory = unpack_directory(cache, package);
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(&directory).map_err(|e| format!("creating {}: {e}", directory.display()))?;
    unpack(&deb, &directory)?;
    std::fs::write(directory.join("VERSION"), format!("{version}\n")).map_err(|e| e.to_string())?;
    // The unpacked file is the cache; the 70 MB kernel .deb is not needed again.
    let _ = std::fs::remove_file(&deb);
    cached(cache, package, &find_file).ok_or_else(|| format!("{package} {version} holds no file we can boot or run"))
}

/// The kernel image in an unpacked kernel package.
fn find_kernel_image(directory: &Path) -> Option<PathBuf> {
    let mut images: Vec<PathBuf> = std::fs::read_dir(directory.join("boot"))
        .ok()?
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.file_name().is_some_and(|name| name.to_string_lossy().starts_with("vmlinuz-")))
        .collect();
    images.sort();
    images.pop()
}

/// Debian's kernel: the one the metapackage names now, or, when apt cannot say (no package
/// lists, no network), the one already in the cache.
pub fn fetch_kernel(cache: &Path) -> Result<Unpacked, String> {
    let package = match resolve_kernel_package() {
        Ok(package) => package,
        Err(first) => {
            let cached_packages: Vec<String> = std::fs::read_dir(cache)
                .into_iter()
                .flatten()
                .flatten()
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .filter(|name| name.starts_with("linux-image-"))
                .collect();
            if let Some(unpacked) = cached_packages.iter().find_map(|p| cached(cache, p, find_kernel_image)) {
                eprintln!("xtask: {first}; using the cached {}", unpacked.package);
                return Ok(unpacked);
            }
            eprintln!("xtask: {first}; running apt-get update and trying again");
            run_tool(Command::new("apt-get").args(["update", "-q"]))?;
            resolve_kernel_package()?
        }
    };
    fetch(cache, &package, unpack_kernel_image, find_kernel_image)
}

/// Unpacks a whole .deb into `directory` (`dpkg-deb -x`: files only, nothing installed).
fn unpack_whole(deb: &Path, directory: &Path) -> Result<(), String> {
    run_tool(Command::new("dpkg-deb").arg("-x").arg(deb).arg(directory)).map(drop)
}

/// `package` unpacked whole, its file the one at `path` in the package.
fn fetch_program(cache: &Path, package: &str, path: &str) -> Result<Unpacked, String> {
    fetch(cache, package, unpack_whole, |directory| Some(directory.join(path)).filter(|file| file.is_file()))
}

/// Debian's static busybox.
pub fn fetch_busybox(cache: &Path) -> Result<Unpacked, String> {
    fetch_program(cache, BUSYBOX_PACKAGE, "bin/busybox")
}

/// Debian's static bash (`bin/bash-static`), which the bash script suite runs on Reef and,
/// as the reference, on the host.
pub fn fetch_bash_static(cache: &Path) -> Result<Unpacked, String> {
    fetch_program(cache, BASH_PACKAGE, "bin/bash-static")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_package_from_apt_cache() {
        let output = "linux-image-amd64\n  Depends: linux-image-6.1.0-56-amd64\n  Recommends: firmware\n";
        assert_eq!(kernel_dependency(output).as_deref(), Some("linux-image-6.1.0-56-amd64"));
        assert_eq!(
            kernel_dependency("linux-image-amd64\n |Depends: linux-image-6.12-amd64\n").as_deref(),
            Some("linux-image-6.12-amd64")
        );
        assert_eq!(kernel_dependency("E: No packages found\n"), None);
    }
}
