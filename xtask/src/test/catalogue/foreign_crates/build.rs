//! Fetching the pinned crates' sources from crates.io and building their tests, static.

use super::Suite;
use crate::tools::{self, run_checked};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the throw-away project, the crates' sources and their build live.
const FOREIGN_DIRECTORY: &str = "target/foreign";

/// The target the tests are built for: static musl, the binaries Reef runs as they are.
const TARGET: &str = "x86_64-unknown-linux-musl";

/// One test executable of a suite: its target's name (`nix`, `test`, `test_prctl`) and file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestBinary {
    pub name: String,
    pub path: PathBuf,
}

/// A suite's crate source and test executables, built.
pub struct Built {
    /// The unpacked crate, where `cargo test` would run its tests (some open files in it).
    pub crate_directory: PathBuf,
    pub binaries: Vec<TestBinary>,
}

/// The pinned lock files and the known differences live in `xtask/foreign/`.
pub fn pinned_file(name: &str) -> PathBuf {
    tools::root().join("xtask/foreign").join(name)
}

/// Fetches every suite's crate with a throw-away project that depends on exactly the pinned
/// versions (its lock is pinned too, so `--locked` fails rather than resolve anew), and
/// returns each crate's unpacked source in cargo's registry, found through `cargo metadata`
/// rather than by guessing `$CARGO_HOME`.
fn fetch(suites: &[Suite]) -> Result<Vec<PathBuf>, String> {
    let project = tools::root().join(FOREIGN_DIRECTORY).join("fetch");
    std::fs::create_dir_all(project.join("src")).map_err(|e| format!("creating {}: {e}", project.display()))?;
    let dependencies: String =
        suites.iter().map(|suite| format!("{} = \"={}\"\n", suite.name, suite.version)).collect();
    let manifest = format!(
        "[package]\nname = \"fetch\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n\
         [dependencies]\n{dependencies}\n# Not a member of Reef's workspace.\n[workspace]\n"
    );
    write(&project.join("Cargo.toml"), manifest.as_bytes())?;
    write(&project.join("src/main.rs"), b"fn main() {}\n")?;
    copy_file(&pinned_file("fetch.Cargo.lock"), &project.join("Cargo.lock"))?;
    let output = nested_cargo(&project)
        .args(["metadata", "--locked", "--format-version", "1"])
        .output()
        .map_err(|e| format!("cargo metadata: cannot start: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "fetching {} with cargo metadata failed: {}",
            suites.iter().map(|s| format!("{} {}", s.name, s.version)).collect::<Vec<_>>().join(", "),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let metadata: serde_json::Value =
        serde_json::from_slice(&output.stdout).map_err(|e| format!("cargo metadata printed no JSON: {e}"))?;
    let packages = metadata["packages"].as_array().ok_or("cargo metadata lists no packages")?;
    suites
        .iter()
        .map(|suite| {
            packages
                .iter()
                .find(|p| p["name"] == suite.name && p["version"] == suite.version)
                .and_then(|p| Some(Path::new(p["manifest_path"].as_str()?).parent()?.to_path_buf()))
                .ok_or_else(|| format!("cargo metadata does not list {} {}", suite.name, suite.version))
        })
        .collect()
}

/// Fetches and builds every suite's tests (cargo's own cache makes a second time quick).
pub fn build_all(suites: &[Suite]) -> Result<Vec<Built>, String> {
    let sources = fetch(suites)?;
    suites.iter().zip(sources).map(|(suite, source)| build(suite, &source)).collect()
}

/// Copies the crate out of the registry (whose files cargo treats as read-only) into
/// `target/foreign/src/<crate>-<version>`, makes it a workspace of its own with the pinned
/// lock, and builds its tests with `cargo test --no-run`, reading the executables from
/// cargo's JSON messages.
fn build(suite: &Suite, source: &Path) -> Result<Built, String> {
    let foreign = tools::root().join(FOREIGN_DIRECTORY);
    let crate_directory = foreign.join("src").join(format!("{}-{}", suite.name, suite.version));
    let manifest = crate_directory.join("Cargo.toml");
    // The appended `[workspace]` marks a finished copy; a copy cut short is made again.
    let copied = std::fs::read_to_string(&manifest).is_ok_and(|text| text.ends_with(WORKSPACE_OF_ITS_OWN));
    if !copied {
        if crate_directory.exists() {
            std::fs::remove_dir_all(&crate_directory)
                .map_err(|e| format!("removing {}: {e}", crate_directory.display()))?;
        }
        let sources = foreign.join("src");
        std::fs::create_dir_all(&sources).map_err(|e| format!("creating {}: {e}", sources.display()))?;
        copy_tree(source, &crate_directory)?;
        let mut text =
            std::fs::read_to_string(&manifest).map_err(|e| format!("reading {}: {e}", manifest.display()))?;
        text.push_str(WORKSPACE_OF_ITS_OWN);
        write(&manifest, text.as_bytes())?;
    }
    // Written only when it differs: nix's build script reruns on any newer file of the crate,
    // and the tests with it.
    let lock = pinned_file(&format!("{}-{}.Cargo.lock", suite.name, suite.version));
    let pinned = std::fs::read(&lock).map_err(|e| format!("reading {}: {e}", lock.display()))?;
    if std::fs::read(crate_directory.join("Cargo.lock")).ok().as_ref() != Some(&pinned) {
        write(&crate_directory.join("Cargo.lock"), &pinned)?;
    }
    println!("xtask: building the tests of {} {} (static musl)", suite.name, suite.version);
    let output = nested_cargo(&crate_directory)
        .args(["test", "--no-run", "--release", "--locked", "--target", TARGET, "--message-format=json"])
        .args(suite.cargo_arguments)
        .arg("--target-dir")
        .arg(foreign.join("build"))
        .env("RUSTFLAGS", "-C target-feature=+crt-static")
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("cargo test --no-run: cannot start: {e}"))?;
    if !output.status.success() {
        return Err(format!("building the tests of {} {} failed ({})", suite.name, suite.version, output.status));
    }
    let binaries = test_executables(&String::from_utf8_lossy(&output.stdout))?;
    if binaries.is_empty() {
        return Err(format!("cargo built no test executable of {}", suite.name));
    }
    for binary in &binaries {
        let elf = std::fs::read(&binary.path).map_err(|e| format!("reading {}: {e}", binary.path.display()))?;
        if tools::has_program_interpreter(&elf) {
            return Err(format!("{} is dynamically linked: Reef has no program loader", binary.path.display()));
        }
    }
    Ok(Built { crate_directory, binaries })
}

/// What marks a crate copy as a workspace of its own (so Reef's workspace does not claim it).
const WORKSPACE_OF_ITS_OWN: &str = "\n# Built alone by cargo xtask test, not in Reef's workspace.\n[workspace]\n";

/// The test executables among cargo's `--message-format=json` lines: artifacts built in the
/// test profile that have an executable, named by their target.
pub fn test_executables(messages: &str) -> Result<Vec<TestBinary>, String> {
    let mut binaries = Vec::new();
    for line in messages.lines().filter(|l| l.starts_with('{')) {
        let message: serde_json::Value =
            serde_json::from_str(line).map_err(|e| format!("cargo printed a line that is no JSON ({e}): {line}"))?;
        if message["reason"] != "compiler-artifact" || message["profile"]["test"] != true {
            continue;
        }
        let (Some(name), Some(path)) = (message["target"]["name"].as_str(), message["executable"].as_str()) else {
            continue;
        };
        binaries.push(TestBinary { name: name.to_string(), path: PathBuf::from(path) });
    }
    binaries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(binaries)
}

/// `cargo` run in `directory`, with none of the outer build's variables that would steer it.
fn nested_cargo(directory: &Path) -> Command {
    let mut command = tools::cargo();
    command.current_dir(directory).env_remove("CARGO_TARGET_DIR").env_remove("CARGO_ENCODED_RUSTFLAGS");
    command
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), String> {
    std::fs::write(path, bytes).map_err(|e| format!("writing {}: {e}", path.display()))
}

fn copy_file(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::copy(from, to).map(|_| ()).map_err(|e| format!("copying {} to {}: {e}", from.display(), to.display()))
}

/// Copies a directory tree of plain files (a crate's source).
fn copy_tree(from: &Path, to: &Path) -> Result<(), String> {
    run_checked(Command::new("cp").arg("-R").arg(from).arg(to), &format!("copying {}", from.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_test_executables_are_the_test_profile_artifacts_with_a_file() {
        let messages = r#"{"reason":"compiler-artifact","target":{"name":"libc"},"profile":{"test":false},"executable":null}
{"reason":"compiler-artifact","target":{"name":"test-prctl"},"profile":{"test":true},"executable":"/b/test_prctl-1"}
{"reason":"build-script-executed","package_id":"nix"}
{"reason":"compiler-artifact","target":{"name":"nix"},"profile":{"test":true},"executable":"/b/nix-2"}
{"reason":"compiler-artifact","target":{"name":"nix"},"profile":{"test":false},"executable":null}
{"reason":"build-finished","success":true}"#;
        let binaries = test_executables(messages).unwrap();
        assert_eq!(
            binaries,
            [
                TestBinary { name: "nix".into(), path: "/b/nix-2".into() },
                TestBinary { name: "test-prctl".into(), path: "/b/test_prctl-1".into() },
            ]
        );
        assert!(test_executables("{not json").is_err());
    }
}
