//! No test or benchmark code in the production kernel image: its symbol table, read back.

use crate::tools::{cargo, run_checked};

/// The kernel modules only test and benchmark images hold (the `test-hooks` and `bench`
/// features): no symbol of the production image may lie in them.
const TEST_ONLY_PATHS: [&str; 4] =
    ["kernel::selftest", "kernel::msg::bench", "kernel::msg::stress", "kernel::msg::test_hooks"];

/// Fault-injection items outside those modules, by their last name (a Rust item's, or an
/// assembly symbol's): the store that faults on purpose, the `FAULT_NOW` handler's helpers and
/// the SMAP test's load probe.
const TEST_ONLY_ITEMS: [&str; 6] = [
    "store_to_unmapped_address",
    "hold_tickets_for_fault",
    "register_fault_now",
    "kernel_load_probe",
    "kernel_load_probe_load",
    "kernel_load_probe_fault",
];

/// `symbol` demangled, if it is a Rust legacy symbol (`_ZN…E`, as rustc names the kernel's
/// own items: `kernel::msg::bench::run`, or `<kernel::msg::bench::RunError as
/// core::fmt::Display>::fmt`), without its hash; else the symbol as it is (assembly symbols,
/// and the `_R…` symbols of the precompiled `core` and `alloc`, which [`is_test_only`] reads
/// raw).
pub fn demangle(symbol: &str) -> String {
    let Some(mut rest) = symbol.strip_prefix("_ZN") else { return symbol.to_string() };
    let mut segments = Vec::new();
    while let Some(digits) = rest.find(|c: char| !c.is_ascii_digit()).filter(|&end| end > 0) {
        let Ok(length) = rest[..digits].parse::<usize>() else { break };
        let Some(segment) = rest.get(digits..digits + length) else { break };
        segments.push(segment);
        rest = &rest[digits + length..];
    }
    if !rest.starts_with('E') || segments.is_empty() {
        return symbol.to_string();
    }
    // The last segment `h` and 16 hex digits is the hash, not a name.
    if segments
        .last()
        .is_some_and(|s| s.len() == 17 && s.starts_with('h') && s[1..].chars().all(|c| c.is_ascii_hexdigit()))
    {
        segments.pop();
    }
    segments.iter().map(|segment| unescape(segment)).collect::<Vec<_>>().join("::")
}

/// A legacy segment's escapes undone: `..` is `::`, `$LT$` `<`, `$u20$` a space, and so on.
fn unescape(segment: &str) -> String {
    let segment = segment.strip_prefix("_$").map_or(segment.to_string(), |rest| format!("${rest}"));
    let mut out = String::new();
    let mut rest = segment.as_str();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("..") {
            out.push_str("::");
            rest = after;
        } else if let Some((escape, after)) = rest.strip_prefix('$').and_then(|r| r.split_once('$')) {
            let text = match escape {
                "SP" => "@".to_string(),
                "BP" => "*".to_string(),
                "RF" => "&".to_string(),
                "LT" => "<".to_string(),
                "GT" => ">".to_string(),
                "LP" => "(".to_string(),
                "RP" => ")".to_string(),
                "C" => ",".to_string(),
                code => code
                    .strip_prefix('u')
                    .and_then(|hex| u32::from_str_radix(hex, 16).ok())
                    .and_then(char::from_u32)
                    .map_or_else(|| format!("${code}$"), String::from),
            };
            out.push_str(&text);
            rest = after;
        } else {
            let next = rest.chars().next().unwrap_or_default();
            out.push(next);
            rest = &rest[next.len_utf8()..];
        }
    }
    out
}

/// Whether the symbol `raw` is test or benchmark code: its demangled name names a path of
/// [`TEST_ONLY_PATHS`] (anywhere: a method of a type there, a generic instance for one),
/// or its last name is one of [`TEST_ONLY_ITEMS`]. `_R…` symbols are matched on their
/// length-prefixed names (`6kernel3msg5bench`), which both manglings share.
pub fn is_test_only(raw: &str) -> bool {
    let name = demangle(raw);
    let is_identifier = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let names_path = |path: &str| {
        name.match_indices(path).any(|(at, _)| {
            let before = name[..at].chars().next_back();
            let after = name[at + path.len()..].chars().next();
            !before.is_some_and(|c| is_identifier(c) || c == ':') && !after.is_some_and(is_identifier)
        })
    };
    let encoded =
        |path: &str| path.split("::").map(|segment| format!("{}{segment}", segment.len())).collect::<String>();
    let last = name.rsplit("::").next().unwrap_or(&name);
    let last = last.split('.').next().unwrap_or(last);
    TEST_ONLY_PATHS.iter().any(|path| names_path(path) || (raw.starts_with("_R") && raw.contains(&encoded(path))))
        || TEST_ONLY_ITEMS.contains(&last)
}

/// The symbols of `names` that are test or benchmark code, demangled, each once, sorted.
pub fn test_only_symbols<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let found: std::collections::BTreeSet<String> =
        names.into_iter().filter(|raw| is_test_only(raw)).map(demangle).collect();
    found.into_iter().collect()
}

/// Builds the production kernel (as `cargo xtask build` and `run` do, into the same target
/// directory, so it is usually up to date) and fails if its symbol table holds test or
/// benchmark code: the image users boot must have none of it.
pub fn production_image_has_no_test_code() -> Result<(), String> {
    use crate::kernel_images::{seal_file, ImageKind};
    let path = crate::tools::build_kernel_of(ImageKind::Production)?;
    seal_file(&path, "full")?;
    let image = std::fs::read(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let elf = goblin::elf::Elf::parse(&image).map_err(|e| format!("{}: not an ELF file: {e}", path.display()))?;
    if elf.syms.is_empty() {
        return Err(format!("{} has no symbol table to check", path.display()));
    }
    let names: Vec<&str> = elf.syms.iter().filter_map(|symbol| elf.strtab.get_at(symbol.st_name)).collect();
    let found = test_only_symbols(names.iter().copied());
    if found.is_empty() {
        println!("xtask: the production kernel holds no test or benchmark code ({} symbols read)", names.len());
        return Ok(());
    }
    let shown: Vec<&str> = found.iter().take(12).map(String::as_str).collect();
    Err(format!(
        "the production kernel {} holds {} symbols of test or benchmark code (put them behind the kernel's \
         test-hooks or bench feature): {}{}",
        path.display(),
        found.len(),
        shown.join(", "),
        if found.len() > shown.len() { ", …" } else { "" }
    ))
}

/// Clippy with the workspace lints as errors on the kernel and its base, without features
/// (the production images) or with `features` (the code only test and benchmark images hold
/// is linted too), in the kernel builds' shared target directory.
pub fn kernel_clippy(features: Option<&str>) -> Result<(), String> {
    let mut command = cargo();
    command.args(["clippy", "--quiet", "--release", "-p", "kernel", "-p", "base", "--target", "x86_64-unknown-none"]);
    command.args(["--target-dir", crate::kernel_images::SHARED_TARGET]);
    if let Some(features) = features {
        command.args(["--features", features]);
    }
    command.args(["--", "-D", "warnings"]);
    let what = match features {
        Some(features) => format!("clippy on the kernel with its {features} features"),
        None => "clippy on the kernel".to_string(),
    };
    run_checked(&mut command, &what)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demangles_legacy_symbols() {
        assert_eq!(demangle("_ZN6kernel3msg5bench10pair_block17h06a953a60edd7da5E"), "kernel::msg::bench::pair_block");
        assert_eq!(
            demangle(
                "_ZN67_$LT$kernel..msg..bench..RunError$u20$as$u20$core..fmt..Display$GT$3fmt17hbf3cf1a304c4d84eE"
            ),
            "<kernel::msg::bench::RunError as core::fmt::Display>::fmt"
        );
        assert_eq!(
            demangle("_ZN6kernel3msg5bench10BENCH_IPIS17h7ee318ccc0a5a14cE.llvm.10665276976393329996"),
            "kernel::msg::bench::BENCH_IPIS"
        );
        assert_eq!(demangle("interrupt_stub_35"), "interrupt_stub_35");
    }

    /// A fake symbol table: what a production image may hold, and each way test or bench
    /// code shows up (an item, a method of a type, a static with LLVM's suffix, a generic
    /// instance in `core` for a bench type in both manglings, a fault-injection item outside
    /// the modules, an assembly symbol).
    #[test]
    fn finds_exactly_the_test_and_bench_symbols() {
        let symbols = [
            "_ZN6kernel3msg4ping4ping17h0123456789abcdefE",
            "_ZN6kernel7control3msg17h0123456789abcdefE",
            "_ZN6kernel3msg12benchmarking3run17h0123456789abcdefE",
            "_ZN6kernel9selftests3run17h0123456789abcdefE",
            "_RNvNtCsg3SjgaGcPXb_4core3ptr13drop_in_place",
            "interrupt_stub_35",
            "user_copy_start",
            "_ZN6kernel8selftest3run17h0123456789abcdefE",
            "_ZN6kernel3msg6stress10run_stress17h0123456789abcdefE.llvm.123",
            "_ZN67_$LT$kernel..msg..bench..RunError$u20$as$u20$core..fmt..Display$GT$3fmt17hbf3cf1a304c4d84eE",
            "_ZN4core3ptr48drop_in_place$LT$kernel..msg..bench..Samples$GT$17h0123456789abcdefE",
            "_RINvNtCsg3SjgaGcPXb_4core3ptr13drop_in_placeNtNtNtCs1_6kernel3msg5bench7SamplesEB4_",
            "_ZN6kernel3msg4send22hold_tickets_for_fault17h0123456789abcdefE",
            "kernel_load_probe_fault",
        ];
        let found = test_only_symbols(symbols);
        assert_eq!(
            found,
            [
                "<kernel::msg::bench::RunError as core::fmt::Display>::fmt",
                "_RINvNtCsg3SjgaGcPXb_4core3ptr13drop_in_placeNtNtNtCs1_6kernel3msg5bench7SamplesEB4_",
                "core::ptr::drop_in_place<kernel::msg::bench::Samples>",
                "kernel::msg::send::hold_tickets_for_fault",
                "kernel::msg::stress::run_stress",
                "kernel::selftest::run",
                "kernel_load_probe_fault",
            ]
        );
        assert!(test_only_symbols(symbols[..7].iter().copied()).is_empty(), "production symbols pass");
    }
}
