//! `cargo xtask check`: formatting, clippy with the workspace lints, the direction between
//! crates and between kernel rooms, and where `unsafe` is.

mod crates;
mod feature_gates;
mod kernel_layers;
mod layers;
mod source;
pub mod symbols;
mod unsafe_code;

use crate::tools::{cargo, root, run_checked};
use serde_json::Value;
use std::path::Path;
use unsafe_code::Package;

/// `cargo metadata` of the workspace, without dependencies.
fn metadata() -> Result<Value, String> {
    let output = cargo()
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .output()
        .map_err(|e| format!("cargo metadata: {e}"))?;
    if !output.status.success() {
        return Err(format!("cargo metadata failed: {}", String::from_utf8_lossy(&output.stderr)));
    }
    serde_json::from_slice(&output.stdout).map_err(|e| e.to_string())
}

/// The workspace crates with their library and program roots.
fn packages(metadata: &Value, root: &Path) -> Vec<Package> {
    let relative =
        |path: &str| Path::new(path).strip_prefix(root).unwrap_or(Path::new(path)).to_string_lossy().replace('\\', "/");
    let mut packages: Vec<Package> = metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|package| {
            let manifest = package["manifest_path"].as_str().unwrap_or_default();
            let dir = relative(Path::new(manifest).parent().and_then(Path::to_str).unwrap_or_default());
            let roots = package["targets"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|target| {
                    target["kind"].as_array().into_iter().flatten().any(|kind| {
                        matches!(kind.as_str(), Some("lib" | "rlib" | "staticlib" | "cdylib" | "bin" | "proc-macro"))
                    })
                })
                .filter_map(|target| target["src_path"].as_str().map(relative))
                .collect();
            Package { dir, roots }
        })
        .collect();
    packages.sort_by(|a, b| a.dir.cmp(&b.dir));
    packages
}

fn read_data(root: &Path, name: &str) -> Result<String, String> {
    std::fs::read_to_string(root.join(name)).map_err(|e| format!("{name}: {e}"))
}

/// The checks that read the source only (no compiler): crates, kernel rooms, `unsafe`.
pub fn source_checks() -> Result<(), String> {
    let metadata = metadata()?;
    crates::dependency_direction(&metadata)?;
    let root = root();
    let layers = kernel_layers::check(
        &root,
        layers::ROOMS,
        &layers::KERNEL_CRATES,
        &read_data(&root, kernel_layers::ALLOW_LIST)?,
    );
    let unsafe_places = unsafe_code::check(
        &root,
        &packages(&metadata, &root),
        layers::ROOMS,
        &read_data(&root, unsafe_code::ALLOW_LIST)?,
        &read_data(&root, unsafe_code::EXEMPTIONS)?,
    );
    let gates = feature_gates::check(&root);
    // All are reported before any fails, so one run shows everything to fix.
    for summary in [&layers, &unsafe_places, &gates].into_iter().flatten() {
        println!("xtask: {summary}");
    }
    let errors: Vec<String> = [layers, unsafe_places, gates].into_iter().filter_map(Result::err).collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("\n"))
    }
}

/// Prints what the allow-lists would hold for today's tree (to see what is left).
fn print_lists() -> Result<u8, String> {
    let root = root();
    let metadata = metadata()?;
    println!("==> xtask/src/check/layers.rs <==");
    for row in layers::ROOMS.iter().filter(|row| root.join(row.crate_dir).join("src").is_dir()) {
        println!("{:<12} {:<16} {:>2}  {}", row.crate_dir, row.room, row.rank, row.why);
    }
    println!();
    let reading = kernel_layers::read(&root, layers::ROOMS, &layers::KERNEL_CRATES);
    for problem in &reading.problems {
        eprintln!("xtask: {problem}");
    }
    println!("==> {} <==\n{}", kernel_layers::ALLOW_LIST, kernel_layers::allow_list(&reading));
    let scan = unsafe_code::scan(
        &root,
        &packages(&metadata, &root),
        layers::ROOMS,
        &read_data(&root, unsafe_code::EXEMPTIONS)?,
    );
    println!("==> {} <==\n{}", unsafe_code::ALLOW_LIST, unsafe_code::allow_list(&scan));
    Ok(0)
}

/// Runs every check; the first failure stops it.
pub fn run_all() -> Result<(), String> {
    run_checked(cargo().args(["fmt", "--all", "--check"]), "cargo fmt --check (run `cargo fmt --all`)")?;
    source_checks()?;
    run_checked(
        cargo().args([
            "clippy",
            "--quiet",
            "--workspace",
            "--exclude",
            "kernel",
            "--exclude",
            "base",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ]),
        "clippy on the host crates",
    )?;
    symbols::kernel_clippy(None)?;
    symbols::kernel_clippy(Some("test-hooks,bench"))?;
    symbols::production_image_has_no_test_code()
}

/// `cargo xtask check [layers | lists]`.
pub fn run(arguments: &[String]) -> Result<u8, String> {
    match arguments.first().map(String::as_str) {
        None => run_all()?,
        Some("layers") => source_checks()?,
        Some("lists") => return print_lists(),
        Some(other) => return Err(format!("check: unknown argument `{other}` (layers, lists or none)")),
    }
    println!("xtask: check passed");
    Ok(0)
}

#[cfg(test)]
pub mod tests {
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A directory of files for one test, removed when dropped.
    pub struct FakeTree {
        pub root: PathBuf,
    }

    impl FakeTree {
        /// Writes `files` (path from the root, text); a later file of the same path wins.
        pub fn new(files: &[(&str, &str)]) -> FakeTree {
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            let root = std::env::temp_dir().join(format!(
                "reef-xtask-check-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = std::fs::remove_dir_all(&root);
            for (path, text) in files {
                let path = root.join(path);
                std::fs::create_dir_all(path.parent().expect("a file has a parent")).expect("temporary directory");
                std::fs::write(path, text).expect("temporary file");
            }
            FakeTree { root }
        }
    }

    impl Drop for FakeTree {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}
