//! Test and benchmark code is named only under its feature: every module that holds it is
//! declared behind `#[cfg(feature = ...)]`, so a production build that names it does not compile.

use std::path::Path;

/// The modules of the kernel that hold test or benchmark code, and the feature each needs.
/// Their symbols are what `symbols::TEST_ONLY_PATHS` looks for in the production image.
pub const GATED_MODULES: [(&str, &str); 4] =
    [("selftest", "test-hooks"), ("bench", "bench"), ("stress", "bench"), ("test_hooks", "test-hooks")];

/// The declarations of gated modules in `text` (a file `name`) that lack their feature's `cfg`
/// on the lines just above (attributes and doc comments may sit between).
pub fn ungated_declarations(name: &str, text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut problems = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        let declared = line.trim().trim_start_matches("pub(crate) ").trim_start_matches("pub ");
        let Some(module) = declared.strip_prefix("mod ").and_then(|rest| rest.strip_suffix(';')) else { continue };
        let Some((_, feature)) = GATED_MODULES.iter().find(|(gated, _)| *gated == module) else { continue };
        let gate = format!("#[cfg(feature = \"{feature}\")]");
        let gated = lines[..index]
            .iter()
            .rev()
            .take_while(|above| above.trim().starts_with("#[") || above.trim().starts_with("//"))
            .any(|above| above.trim() == gate);
        if !gated {
            problems.push(format!(
                "{name}:{}: `mod {module};` holds test or benchmark code: declare it under {gate}",
                index + 1
            ));
        }
    }
    problems
}

/// Checks every file of the kernel crates.
pub fn check(root: &Path) -> Result<String, String> {
    let mut problems = Vec::new();
    let mut declarations = 0;
    for crate_dir in ["kernel/src", "kernel/base/src"] {
        for file in super::kernel_layers::rust_files(&root.join(crate_dir), &[]) {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            let name = file.strip_prefix(root).unwrap_or(&file).display().to_string();
            declarations += text
                .lines()
                .filter(|line| GATED_MODULES.iter().any(|(module, _)| line.trim().ends_with(&format!("mod {module};"))))
                .count();
            problems.extend(ungated_declarations(&name, &text));
        }
    }
    if problems.is_empty() {
        Ok(format!("test and bench code: {declarations} module declarations, each behind its feature"))
    } else {
        Err(format!("test or benchmark code outside its feature:\n  {}", problems.join("\n  ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gated_declaration_passes_and_an_ungated_one_fails() {
        let gated = "mod proc;\n#[cfg(feature = \"test-hooks\")]\nmod selftest;\n";
        assert!(ungated_declarations("main.rs", gated).is_empty());
        let documented = "/// The benchmark.\n#[cfg(feature = \"bench\")]\n/// More.\npub mod bench;\n";
        assert!(ungated_declarations("msg/mod.rs", documented).is_empty());
        let ungated = "mod proc;\nmod selftest;\n";
        assert_eq!(
            ungated_declarations("main.rs", ungated),
            ["main.rs:2: `mod selftest;` holds test or benchmark code: declare it under #[cfg(feature = \"test-hooks\")]"]
        );
        let wrong_feature = "#[cfg(feature = \"test-hooks\")]\npub mod stress;\n";
        assert_eq!(ungated_declarations("msg/mod.rs", wrong_feature).len(), 1);
        assert!(ungated_declarations("x.rs", "mod benchmarks;\nmod ping;\n").is_empty());
    }
}
