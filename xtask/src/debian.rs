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

/// Runs `dpkg-deb --fsys-tarfile deb | tar -x -C directory --wildcards patterns...`: only the
/// members `patterns` match are written; whether both tools succeeded.
fn extract_members(deb: &Path, directory: &Path, patterns: &[&str]) -> Result<bool, String> {
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
        .arg("--wildcards")
        .args(patterns)
        .stdin(archive)
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("cannot start tar: {e}"))?;
    let dpkg = dpkg.wait().map_err(|e| e.to_string())?;
    Ok(dpkg.success() && tar.success())
}

/// The members of a kernel package whose modules a guest loads: for a 9P share, virtio-mmio,
/// 9P over virtio, the 9P file system and the netfs and fscache libraries it uses; for a
/// network card, virtio-net and the failover modules it depends on; and the list of every
/// module (`modules.order`), which says where each module lives.
const MODULE_MEMBERS: [&str; 9] = [
    "./lib/modules/*/modules.order",
    "./lib/modules/*/kernel/drivers/virtio/*",
    "./lib/modules/*/kernel/net/9p/*",
    "./lib/modules/*/kernel/fs/9p/*",
    "./lib/modules/*/kernel/fs/netfs/*",
    "./lib/modules/*/kernel/fs/fscache/*",
    "./lib/modules/*/kernel/drivers/net/virtio_net.ko*",
    "./lib/modules/*/kernel/drivers/net/net_failover.ko*",
    "./lib/modules/*/kernel/net/core/failover.ko*",
];

/// Unpacks `./boot/vmlinuz-*` of a kernel .deb, and the modules a guest loads (a few MB,
/// [`MODULE_MEMBERS`]): `dpkg-deb -x` would also write its ~400 MB of other modules,
/// which no guest boot reads. A kernel whose modules live elsewhere (a pattern matches
/// nothing) still unpacks its image; [`modules`] then says what is missing.
fn unpack_kernel_image(deb: &Path, directory: &Path) -> Result<(), String> {
    if !extract_members(deb, directory, &["./boot/vmlinuz-*"])? {
        return Err(format!("unpacking ./boot/vmlinuz-* of {}: dpkg-deb or tar failed", deb.display()));
    }
    unpack_modules(deb, directory);
    Ok(())
}

/// The second pass of [`unpack_kernel_image`]: the modules, best effort (said, not fatal).
fn unpack_modules(deb: &Path, directory: &Path) {
    if !extract_members(deb, directory, &MODULE_MEMBERS).unwrap_or(false) {
        eprintln!("xtask: note: {} lacks some of {}", deb.display(), MODULE_MEMBERS.join(" "));
    }
}

/// One kernel module to load: its name and the `.ko` file in the cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Module {
    pub name: String,
    pub file: PathBuf,
}

/// The modules Linux needs to mount a virtio-9p share on microvm (Debian builds them all as
/// modules): the virtio-mmio transport, 9P over virtio and the 9P file system. Their
/// dependencies come from each module's `depends=`.
pub const NINE_P_MODULES: [&str; 3] = ["virtio_mmio", "9pnet_virtio", "9p"];

/// The modules Linux needs for a `virtio-net-device` on microvm (Debian builds them as
/// modules too, `CONFIG_VIRTIO_NET=m`): the virtio-mmio transport and the virtio-net driver,
/// which brings `net_failover` and `failover` by its `depends=`.
pub const NETWORK_MODULES: [&str; 2] = ["virtio_mmio", "virtio_net"];

/// The `depends=` of a module's `.modinfo` section: the modules it needs loaded first. The
/// section is NUL-separated `key=value` strings, so the field is found among the file's bytes.
fn module_dependencies(ko: &[u8]) -> Vec<String> {
    ko.split(|&byte| byte == 0)
        .find_map(|field| field.strip_prefix(b"depends="))
        .map(|list| {
            String::from_utf8_lossy(list).split(',').filter(|name| !name.is_empty()).map(str::to_string).collect()
        })
        .unwrap_or_default()
}

/// The module name of a `modules.order` line (`kernel/fs/9p/9p.ko`): its file name without the
/// extension, `-` read as `_` as the kernel does.
fn module_name(path: &str) -> String {
    let file = path.rsplit('/').next().unwrap_or(path);
    file.split(".ko").next().unwrap_or(file).replace('-', "_")
}

/// `wanted` and everything they depend on, each after its dependencies (a depth-first
/// post-order, as `modprobe` loads them), from `depends_of` (a module's `depends=`); an
/// unknown module or a dependency loop is an error naming it.
fn load_order(
    wanted: &[&str],
    depends_of: &dyn Fn(&str) -> Result<Vec<String>, String>,
) -> Result<Vec<String>, String> {
    fn visit(
        name: &str,
        depends_of: &dyn Fn(&str) -> Result<Vec<String>, String>,
        visiting: &mut Vec<String>,
        order: &mut Vec<String>,
    ) -> Result<(), String> {
        if order.iter().any(|done| done == name) {
            return Ok(());
        }
        if visiting.iter().any(|open| open == name) {
            return Err(format!("the modules depend on each other in a loop: {} -> {name}", visiting.join(" -> ")));
        }
        visiting.push(name.to_string());
        for dependency in depends_of(name)? {
            visit(&dependency, depends_of, visiting, order)?;
        }
        visiting.pop();
        order.push(name.to_string());
        Ok(())
    }
    let mut order = Vec::new();
    for name in wanted {
        visit(name, depends_of, &mut Vec::new(), &mut order)?;
    }
    Ok(order)
}

/// The modules `wanted` of `kernel` (as [`fetch_kernel`] returned it) and those they depend
/// on, in the order to load them. A cache unpacked before they were kept (no modules at all,
/// or not these: the network's came after the 9P ones) gets them now: the package is
/// downloaded again and only its modules unpacked.
pub fn modules(cache: &Path, kernel: &Unpacked, wanted: &[&str]) -> Result<Vec<Module>, String> {
    match resolve_modules(cache, kernel, wanted) {
        Err(Missing::InTheCache(why)) => {
            eprintln!("xtask: the cached {} lacks modules ({why}): fetching it again for them", kernel.package);
            let deb = download(cache, &kernel.package)?;
            unpack_modules(&deb, &unpack_directory(cache, &kernel.package));
            let _ = std::fs::remove_file(&deb);
            resolve_modules(cache, kernel, wanted).map_err(Missing::reason)
        }
        resolved => resolved.map_err(Missing::reason),
    }
}

/// Why [`resolve_modules`] found no module list: the cache lacks files the package has (so a
/// new download helps), or the package has no such module (it does not).
enum Missing {
    InTheCache(String),
    InThePackage(String),
}

impl Missing {
    fn reason(self) -> String {
        match self {
            Self::InTheCache(why) | Self::InThePackage(why) => why,
        }
    }
}

/// [`modules`] from what the cache holds.
fn resolve_modules(cache: &Path, kernel: &Unpacked, wanted: &[&str]) -> Result<Vec<Module>, Missing> {
    let package_directory = unpack_directory(cache, &kernel.package);
    let mut roots: Vec<PathBuf> = std::fs::read_dir(package_directory.join("lib/modules"))
        .map_err(|e| Missing::InTheCache(format!("{}: {e}", package_directory.join("lib/modules").display())))?
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.join("modules.order").is_file())
        .collect();
    roots.sort();
    let root = roots.pop().ok_or_else(|| {
        Missing::InTheCache(format!("{} holds no lib/modules/*/modules.order", package_directory.display()))
    })?;
    let order_file = root.join("modules.order");
    let listed = std::fs::read_to_string(&order_file)
        .map_err(|e| Missing::InTheCache(format!("reading {}: {e}", order_file.display())))?;
    let path_of = |name: &str| -> Result<PathBuf, Missing> {
        let line = listed.lines().find(|line| module_name(line.trim()) == name).ok_or_else(|| {
            Missing::InThePackage(format!(
                "{} lists no module `{name}` (built in, or not built?)",
                order_file.display()
            ))
        })?;
        let file = root.join(line.trim());
        if file.is_file() {
            Ok(file)
        } else {
            Err(Missing::InTheCache(format!(
                "{} is not in the cache (its directory is not among those unpacked: {})",
                file.display(),
                MODULE_MEMBERS.join(" ")
            )))
        }
    };
    // `load_order` speaks in strings; a failed look-up is kept aside to keep its kind.
    let failed = std::cell::RefCell::new(None);
    let depends_of = |name: &str| -> Result<Vec<String>, String> {
        let file = path_of(name).map_err(|missing| {
            let why = match &missing {
                Missing::InTheCache(why) | Missing::InThePackage(why) => why.clone(),
            };
            *failed.borrow_mut() = Some(missing);
            why
        })?;
        Ok(module_dependencies(&std::fs::read(file).map_err(|e| e.to_string())?))
    };
    let order = load_order(wanted, &depends_of)
        .map_err(|why| failed.borrow_mut().take().unwrap_or(Missing::InThePackage(why)))?;
    order.into_iter().map(|name| Ok(Module { file: path_of(&name)?, name })).collect()
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

    #[test]
    fn module_dependencies_from_modinfo() {
        let ko = b"\x7fELF...\0license=GPL\0depends=9pnet,fscache,netfs\0retpoline=Y\0name=9p\0";
        assert_eq!(module_dependencies(ko), ["9pnet", "fscache", "netfs"]);
        assert!(module_dependencies(b"\0depends=\0name=netfs\0").is_empty());
        assert!(module_dependencies(b"no modinfo").is_empty());
        assert_eq!(module_name("kernel/net/9p/9pnet_virtio.ko"), "9pnet_virtio");
        assert_eq!(module_name("kernel/drivers/virtio/virtio-mmio.ko.xz"), "virtio_mmio");
    }

    #[test]
    fn modules_load_after_their_dependencies() {
        // Debian 6.1's depends= fields.
        let table = |name: &str| -> Result<Vec<String>, String> {
            let list: &[&str] = match name {
                "virtio_ring" | "9pnet" | "netfs" => &[],
                "virtio" => &["virtio_ring"],
                "virtio_mmio" => &["virtio", "virtio_ring"],
                "9pnet_virtio" => &["virtio", "9pnet", "virtio_ring"],
                "fscache" => &["netfs"],
                "9p" => &["9pnet", "fscache", "netfs"],
                "loop_a" => &["loop_b"],
                "loop_b" => &["loop_a"],
                other => return Err(format!("no module `{other}`")),
            };
            Ok(list.iter().map(|name| name.to_string()).collect())
        };
        assert_eq!(
            load_order(&NINE_P_MODULES, &table).unwrap(),
            ["virtio_ring", "virtio", "virtio_mmio", "9pnet", "9pnet_virtio", "netfs", "fscache", "9p"]
        );
        assert!(load_order(&["loop_a"], &table).unwrap_err().contains("loop"));
        assert_eq!(load_order(&["nothere"], &table).unwrap_err(), "no module `nothere`");
    }
}
