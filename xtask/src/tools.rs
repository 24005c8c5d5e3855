//! Making sure the tools exist (the pinned toolchain's targets and components, QEMU), and
//! building what QEMU boots: the kernel image, the user programs and the initramfs.

use crate::debian;
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

/// Builds the kernel (release, with symbols), writes its image checksum, and returns the ELF
/// path.
pub fn build_kernel() -> Result<PathBuf, String> {
    crate::kernel_images::build_full()
}

/// Builds the kernel of the kind this run builds ([`kernel_images::selected`]) without writing
/// its checksum ([`build_kernel`] does).
///
/// [`kernel_images::selected`]: crate::kernel_images::selected
pub fn build_kernel_unsealed() -> Result<PathBuf, String> {
    build_kernel_of(crate::kernel_images::selected())
}

/// Builds the full kernel of `kind`, unsealed, and returns the ELF path.
pub fn build_kernel_of(kind: crate::kernel_images::ImageKind) -> Result<PathBuf, String> {
    let elf = kind.directory().join(crate::kernel_images::ELF_PATH);
    crate::kernel_images::kernel_build(kind, "", &elf, &format!("building the kernel ({kind:?})"))?;
    Ok(elf)
}

/// Reef's user programs, each the workspace package `user/<name>` with a binary of that name.
/// `init` becomes `/sbin/init` in the initramfs, the others `/bin/<name>`.
pub const USER_PROGRAMS: [&str; 15] = [
    "init",
    "proctest",
    "fstest",
    "sigtest",
    "sysfuzz",
    "procbench",
    "fsbench",
    "syscallbench",
    "ftq",
    "corebench",
    "pingpong",
    "webd",
    "tiny",
    "isolation",
    "reef",
];
/// The commands of `user/reef`, each a link `/bin/<name> -> reef`; `ps` and `poweroff` take
/// the place of busybox's applets of those names.
pub const REEF_LINKS: [&str; 15] = [
    "help",
    "cores",
    "mem",
    "start",
    "msg",
    "syscalls",
    "on",
    "spawn",
    "ps",
    "poweroff",
    "role",
    "execac",
    "move",
    "core",
    "setuidgid",
];
/// The target of the user programs: Linux's system-call ABI, linked statically against musl,
/// so the same binaries run on Reef and in the Linux guest.
const USER_TARGET: &str = "x86_64-unknown-linux-musl";
/// Where `cargo xtask build` and `run` write Reef's initramfs; `test` and `bench` write theirs,
/// whose `/boot` holds their kind of kernel images, to the same name in their kind's directory
/// ([`initramfs_file`]).
pub const INITRAMFS_FILE: &str = "target/reef-initramfs.cpio";

/// Where this run's initramfs goes: [`INITRAMFS_FILE`] for the production images, else its
/// file name in the directory of the kind of image this run builds.
pub fn initramfs_file() -> PathBuf {
    let kind = crate::kernel_images::selected();
    match kind {
        crate::kernel_images::ImageKind::Production => root().join(INITRAMFS_FILE),
        _ => kind.directory().join("reef-initramfs.cpio"),
    }
}
/// `/etc/hello.txt`: a fixed text, so a test can check that a program read the whole file.
pub const HELLO_TEXT: &str = "\
Hello from Reef's initramfs.
This is /etc/hello.txt: three lines of fixed text,
so a test can check every byte a program read.
";
/// `/etc/passwd` and `/etc/group`: root, the user `reef` (1000, group `reef` 1000, its home
/// `/home/reef` its own), and `nobody` and `nogroup` as Debian names them, which programs
/// (and nix's tests) look up as the unprivileged user. `reef` is also in `users` (100).
const PASSWD: &str = "root:x:0:0:root:/root:/bin/sh\n\
                      reef:x:1000:1000:Reef user:/home/reef:/bin/sh\n\
                      nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n";
const GROUP: &str = "root:x:0:\nusers:x:100:reef\nreef:x:1000:\nnogroup:x:65534:\n";
/// The non-root user's ids, and its home, which the image holds as its own.
pub const USER_ID: u32 = 1000;
const USER_HOME: &str = "home/reef";
/// `/www/index.html`: a page for a web server to serve (`httpd -h /www`).
const WWW_INDEX: &str =
    "<!doctype html>\n<title>Reef</title>\n<p>Served by Reef, a multikernel OS: one kernel per core, \
                         one network stack, sockets from every core.</p>\n";
/// `/etc/motd`.
const MOTD: &str = "Reef: a multikernel OS. Every core runs its own kernel instance; cores talk by messages.\n";
/// The directories at the top of the image, with their permissions: `/tmp` is world-writable
/// with the sticky bit, as on any Unix.
const INITRAMFS_DIRECTORIES: [(&str, u32); 7] = [
    ("bin", 0o755),
    ("sbin", 0o755),
    ("etc", 0o755),
    ("dev", 0o755),
    ("proc", 0o555),
    ("tmp", 0o1777),
    ("boot", 0o755),
];

/// Builds the programs of [`USER_PROGRAMS`] that exist in this tree (release, static, for
/// [`USER_TARGET`]) and returns each name with its binary; says in one line which are absent.
/// They build into `target/user-build`, so another target and profile do not invalidate the
/// workspace's build cache.
pub fn build_user_programs() -> Result<Vec<(String, PathBuf)>, String> {
    let (present, absent): (Vec<&str>, Vec<&str>) =
        USER_PROGRAMS.iter().partition(|name| root().join("user").join(name).join("Cargo.toml").is_file());
    if !absent.is_empty() {
        eprintln!("xtask: not in this tree, so not in the initramfs: {}", absent.join(", "));
    }
    if present.is_empty() {
        return Ok(Vec::new());
    }
    let target_directory = root().join("target/user-build");
    let mut command = cargo();
    command
        .args(["build", "--quiet", "--release", "--target", USER_TARGET])
        .arg("--target-dir")
        .arg(&target_directory)
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        // musl links statically by default; saying so keeps it true whatever the defaults become.
        .env("RUSTFLAGS", "-C target-feature=+crt-static")
        // Debug info would multiply the image the kernel reads; symbols stay for backtraces.
        .env("CARGO_PROFILE_RELEASE_DEBUG", "false");
    for name in &present {
        command.args(["--package", name]);
    }
    run_checked(&mut command, &format!("building the user programs ({})", present.join(", ")))?;
    present
        .into_iter()
        .map(|name| {
            let binary = target_directory.join(USER_TARGET).join("release").join(name);
            let elf = std::fs::read(&binary).map_err(|e| format!("reading {}: {e}", binary.display()))?;
            if has_program_interpreter(&elf) {
                return Err(format!("{} is dynamically linked: Reef has no program loader", binary.display()));
            }
            Ok((name.to_string(), binary))
        })
        .collect()
}

/// Builds the user programs and returns the binary of `name`, for a Linux guest's initramfs
/// (`peer`) or the host itself.
pub fn user_program(name: &str) -> Result<PathBuf, String> {
    build_user_programs()?
        .into_iter()
        .find(|(built, _)| built == name)
        .map(|(_, binary)| binary)
        .ok_or_else(|| format!("user/{name} is not in this tree"))
}

/// The bytes of [`user_program`]'s binary.
pub fn user_program_bytes(name: &str) -> Result<Vec<u8>, String> {
    let binary = user_program(name)?;
    std::fs::read(&binary).map_err(|e| format!("reading {}: {e}", binary.display()))
}

/// Builds Reef's initramfs into [`INITRAMFS_FILE`] and returns its path: the user programs,
/// Debian's static busybox with a link for each of its applets, and a few files in `/etc`
/// (`docs/initramfs.md`). The same inputs give the same bytes.
pub fn build_initramfs() -> Result<PathBuf, String> {
    build_initramfs_with(&initramfs_file().to_string_lossy(), &[])
}

/// A file a test adds to Reef's image: its path in the image (no leading `/`; its parent
/// directories are made), its permissions, its bytes.
pub type ExtraFile = (String, u32, Vec<u8>);

/// [`build_initramfs`] into `file` (relative to the repository's root) with `extra` files
/// added after Reef's own: the images of the suites that bring programs of their own (the
/// foreign suites), so the image users boot holds none of them.
pub fn build_initramfs_with(file: &str, extra: &[ExtraFile]) -> Result<PathBuf, String> {
    let programs = build_user_programs()?
        .into_iter()
        .map(|(name, binary)| {
            std::fs::read(&binary).map(|elf| (name, elf)).map_err(|e| format!("reading {}: {e}", binary.display()))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let busybox = debian::fetch_busybox(&debian::cache()?)?;
    let listing = Command::new(&busybox.file)
        .arg("--list")
        .output()
        .map_err(|e| format!("cannot run {} --list: {e}", busybox.file.display()))?;
    if !listing.status.success() {
        return Err(format!("{} --list failed ({})", busybox.file.display(), listing.status));
    }
    let applets = busybox_applets(&String::from_utf8_lossy(&listing.stdout));
    let busybox_binary =
        std::fs::read(&busybox.file).map_err(|e| format!("reading {}: {e}", busybox.file.display()))?;
    let kernel = build_kernel()?;
    let boot = crate::kernel_images::boot_files(&kernel)?;
    let image = initramfs_image(&programs, &busybox_binary, &applets, &boot, extra);
    // Read back with the kernel's reader, so an image it would refuse never boots.
    initramfs::Archive::parse(&image).map_err(|e| format!("the initramfs just built does not parse: {e}"))?;
    let path = root().join(file);
    std::fs::write(&path, &image).map_err(|e| format!("writing {}: {e}", path.display()))?;
    Ok(path)
}

/// The applet names of `busybox --list` output, sorted, each once, `busybox` itself left out.
fn busybox_applets(listing: &str) -> Vec<String> {
    let applets: std::collections::BTreeSet<&str> =
        listing.lines().map(str::trim).filter(|name| !name.is_empty() && *name != "busybox").collect();
    applets.into_iter().map(str::to_string).collect()
}

/// The image: [`INITRAMFS_DIRECTORIES`], `/sbin/init` and `/bin/<program>` for the other
/// `programs`, `/bin/<command> -> reef` for each of [`REEF_LINKS`] when `reef` is one of them,
/// `/bin/busybox` and `/bin/<applet> -> busybox` for each applet whose name no program or link
/// of ours takes, `/etc/hello.txt`, `/etc/motd`, `/www/index.html`, `/bin/bad-elf` (no program), then the `extra`
/// files of a test image (with their parent directories, 0755). Entries come
/// in a fixed order and the writer adds nothing from the host, so the same inputs give the
/// same bytes.
pub fn initramfs_image(
    programs: &[(String, Vec<u8>)],
    busybox: &[u8],
    applets: &[String],
    boot: &[(String, Vec<u8>)],
    extra: &[ExtraFile],
) -> Vec<u8> {
    let mut image = initramfs::Writer::new();
    for (directory, permissions) in INITRAMFS_DIRECTORIES {
        image.directory(directory, permissions);
    }
    let mut in_bin = std::collections::BTreeSet::new();
    for (name, elf) in programs {
        if name == "init" {
            image.file("sbin/init", 0o755, elf);
        } else {
            image.file(&format!("bin/{name}"), 0o755, elf);
            in_bin.insert(name.as_str());
        }
    }
    if in_bin.contains("reef") {
        for command in REEF_LINKS {
            image.symlink(&format!("bin/{command}"), "reef");
            in_bin.insert(command);
        }
    }
    image.file("bin/busybox", 0o755, busybox);
    for applet in applets.iter().filter(|applet| !in_bin.contains(applet.as_str())) {
        image.symlink(&format!("bin/{applet}"), "busybox");
    }
    for (name, elf) in boot {
        image.file(&format!("boot/{name}"), 0o644, elf);
    }
    image.file("etc/hello.txt", 0o644, HELLO_TEXT.as_bytes());
    image.file("etc/motd", 0o644, MOTD.as_bytes());
    image.directory("www", 0o755);
    image.file("www/index.html", 0o644, WWW_INDEX.as_bytes());
    image.file("etc/passwd", 0o644, PASSWD.as_bytes());
    image.file("etc/group", 0o644, GROUP.as_bytes());
    image.directory("home", 0o755);
    image.owned_directory(USER_HOME, 0o755, (USER_ID, USER_ID));
    // An executable file that is no program (an ELF magic, then nothing that parses): the
    // suite checks that starting it is refused with ENOEXEC and harms no kernel.
    image.file("bin/bad-elf", 0o755, b"\x7fELF\x02\x01\x01 not a program, cut short");
    let mut directories: std::collections::BTreeSet<String> = INITRAMFS_DIRECTORIES
        .iter()
        .map(|(name, _)| name.to_string())
        .chain(["home".into(), USER_HOME.into()])
        .collect();
    for (path, mode, bytes) in extra {
        let components: Vec<&str> = path.split('/').collect();
        for end in 1..components.len() {
            let parent = components[..end].join("/");
            if directories.insert(parent.clone()) {
                image.directory(&parent, 0o755);
            }
        }
        image.file(path, *mode, bytes);
    }
    image.finish()
}

/// Whether an ELF64 executable names a program interpreter (a `PT_INTERP` header), i.e. needs
/// the dynamic loader. Anything that is not a readable ELF64 counts as needing one.
pub fn has_program_interpreter(elf: &[u8]) -> bool {
    const PT_INTERP: u32 = 3;
    let field = |offset: usize, size: usize| -> Option<u64> {
        let bytes = elf.get(offset..offset.checked_add(size)?)?;
        Some(bytes.iter().rev().fold(0u64, |value, &byte| value << 8 | u64::from(byte)))
    };
    let parsed = (|| {
        if elf.get(..5)? != b"\x7fELF\x02" {
            return None;
        }
        let (table, entry_size, count) = (field(0x20, 8)? as usize, field(0x36, 2)? as usize, field(0x38, 2)?);
        let mut interpreter = false;
        for index in 0..count as usize {
            let header = index.checked_mul(entry_size)?.checked_add(table)?;
            interpreter |= field(header, 4)? as u32 == PT_INTERP;
        }
        Some(interpreter)
    })();
    parsed.unwrap_or(true)
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
        assert!(targets.iter().any(|t| t == USER_TARGET), "the user programs' target is pinned");
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

    #[test]
    fn static_and_dynamic_elf() {
        // A minimal ELF64 header with one program header of type `type_`.
        let elf = |type_: u32| {
            let mut bytes = vec![0u8; 64 + 56];
            bytes[..5].copy_from_slice(b"\x7fELF\x02");
            bytes[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
            bytes[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
            bytes[0x38..0x3a].copy_from_slice(&1u16.to_le_bytes());
            bytes[64..68].copy_from_slice(&type_.to_le_bytes());
            bytes
        };
        assert!(has_program_interpreter(&elf(3)));
        assert!(!has_program_interpreter(&elf(1)));
        assert!(has_program_interpreter(b"#!/bin/sh"));
    }

    #[test]
    fn reef_takes_its_commands_from_busybox() {
        let programs = vec![("reef".to_string(), b"REEF".to_vec())];
        let applets = busybox_applets("kill\nps\npoweroff\nsh\n");
        let image = initramfs_image(&programs, b"BUSYBOX", &applets, &[], &[]);
        let archive = initramfs::Archive::parse(&image).unwrap();
        for command in REEF_LINKS {
            let path = format!("/bin/{command}");
            assert_eq!(archive.find(&path).unwrap().symlink_target(), Some("reef"), "{path}");
            assert_eq!(archive.resolve(&path, true).unwrap().data, b"REEF");
        }
        for applet in ["kill", "sh"] {
            assert_eq!(archive.find(&format!("/bin/{applet}")).unwrap().symlink_target(), Some("busybox"));
        }
        let names: Vec<&str> = archive.read_dir("/bin").unwrap().map(|entry| entry.file_name()).collect();
        assert_eq!(names.iter().filter(|name| **name == "ps").count(), 1, "one /bin/ps: {names:?}");
    }

    #[test]
    fn the_image_holds_the_programs_busybox_and_its_applets() {
        let programs = vec![("init".to_string(), b"INIT".to_vec()), ("tiny".to_string(), b"TINY".to_vec())];
        let applets = busybox_applets("[\n[[\nash\nbusybox\nls\n\nsh\ntiny\nls\n");
        assert_eq!(applets, ["[", "[[", "ash", "ls", "sh", "tiny"]);
        let image = initramfs_image(&programs, b"BUSYBOX", &applets, &[], &[]);
        assert_eq!(
            image,
            initramfs_image(&programs, b"BUSYBOX", &applets, &[], &[]),
            "the same inputs, the same bytes"
        );
        let archive = initramfs::Archive::parse(&image).unwrap();
        for (directory, _) in INITRAMFS_DIRECTORIES {
            assert!(archive.find(directory).unwrap().inode != 0, "/{directory} has its own entry");
        }
        assert_eq!(archive.find("/tmp").unwrap().permissions(), 0o1777);
        assert_eq!(archive.find("/sbin/init").unwrap().data, b"INIT");
        assert!(archive.find("/bin/init").is_none());
        assert_eq!(archive.find("/bin/tiny").unwrap().data, b"TINY", "our program, not the applet");
        for applet in ["[", "[[", "ash", "ls", "sh"] {
            let path = format!("/bin/{applet}");
            assert_eq!(archive.find(&path).unwrap().symlink_target(), Some("busybox"));
            assert_eq!(archive.resolve(&path, true).unwrap().data, b"BUSYBOX");
        }
        assert_eq!(archive.find("/etc/hello.txt").unwrap().data, HELLO_TEXT.as_bytes());
        assert_eq!(archive.find("/etc/motd").unwrap().data, MOTD.as_bytes());
        assert!(std::str::from_utf8(archive.find("/etc/passwd").unwrap().data).unwrap().starts_with("root:x:0:0:"));
        assert!(archive.find("/etc/group").is_some());
        let home = archive.find("/home/reef").unwrap();
        assert_eq!((home.uid, home.gid, home.mode & 0o7777), (USER_ID, USER_ID, 0o755), "reef's home is its own");
        assert!(std::str::from_utf8(archive.find("/etc/passwd").unwrap().data).unwrap().contains("reef:x:1000:1000:"));
        let in_bin: Vec<&str> = archive.read_dir("/bin").unwrap().map(|entry| entry.file_name()).collect();
        assert_eq!(in_bin, ["tiny", "busybox", "[", "[[", "ash", "ls", "sh", "bad-elf"]);
    }
}
