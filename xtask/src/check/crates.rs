//! The direction between workspace crates, from `cargo metadata`.

use serde_json::Value;

/// Layers, lowest first. A crate may depend only on crates of a lower layer, except that
/// crates of layer 0 may use each other, but for the [`LEAVES`], which use none.
fn layer(manifest_relative: &str) -> Option<(u8, &'static str)> {
    if manifest_relative.starts_with("crates/") {
        Some((0, "library crate"))
    } else if manifest_relative.starts_with("kernel/base/") {
        Some((1, "kernel base"))
    } else if manifest_relative.starts_with("kernel/") {
        Some((2, "kernel"))
    } else if manifest_relative.starts_with("user/") {
        Some((1, "user program"))
    } else if manifest_relative.starts_with("xtask/") {
        Some((3, "host tool"))
    } else {
        None
    }
}

/// The crates both sides of a boundary share (kernel and user space, or kernel instances):
/// they depend on no workspace crate at all, not even one of layer 0.
const LEAVES: [&str; 4] = ["abi", "channel", "syspage", "kcb"];

/// Checks that no workspace crate depends on a crate of its own or a higher layer.
pub fn dependency_direction(metadata: &Value) -> Result<(), String> {
    let root = metadata["workspace_root"].as_str().unwrap_or_default().to_string();
    let packages = metadata["packages"].as_array().cloned().unwrap_or_default();
    let relative =
        |manifest: &str| manifest.strip_prefix(&root).unwrap_or(manifest).trim_start_matches('/').to_string();
    let mut by_name = std::collections::HashMap::new();
    for package in &packages {
        let name = package["name"].as_str().unwrap_or_default().to_string();
        by_name.insert(name, relative(package["manifest_path"].as_str().unwrap_or_default()));
    }
    let mut violations = Vec::new();
    for package in &packages {
        let name = package["name"].as_str().unwrap_or_default();
        let path = relative(package["manifest_path"].as_str().unwrap_or_default());
        let Some((own_layer, own_kind)) = layer(&path) else {
            continue;
        };
        for dependency in package["dependencies"].as_array().into_iter().flatten() {
            let target = dependency["name"].as_str().unwrap_or_default();
            let Some(target_path) = by_name.get(target) else {
                continue;
            };
            let Some((target_layer, target_kind)) = layer(target_path) else {
                continue;
            };
            let upward = target_layer > own_layer || (target_layer == own_layer && own_layer != 0);
            if upward {
                violations.push(format!("{name} ({own_kind}) depends on {target} ({target_kind})"));
            } else if LEAVES.contains(&name) {
                violations.push(format!("{name} depends on {target}, but it must depend on no crate of Reef"));
            }
        }
    }
    if violations.is_empty() {
        println!("xtask: dependency direction ok ({} workspace crates)", packages.len());
        Ok(())
    } else {
        Err(format!("dependencies point upward: {}", violations.join("; ")))
    }
}
