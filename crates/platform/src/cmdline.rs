//! The kernel command line: `cores=N timer_hz=N kc_spin_us=N log=LEVEL test=NAME[,NAME]
//! share=TAG:/mountpoint exec="command line"`.

/// Longest `test=` or `exec=` value kept.
pub const MAX_VALUE: usize = 1024;

/// How much the kernel logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    /// Only errors.
    Error,
    /// Errors and warnings.
    Warn,
    /// Boot progress (the default).
    Info,
    /// Per-subsystem detail.
    Debug,
    /// Everything.
    Trace,
}

/// A short owned string (no allocator at parse time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Value {
    bytes: [u8; MAX_VALUE],
    length: usize,
}

impl Value {
    const EMPTY: Self = Self { bytes: [0; MAX_VALUE], length: 0 };

    fn new(text: &str) -> Self {
        let mut value = Self::EMPTY;
        value.bytes[..text.len()].copy_from_slice(text.as_bytes());
        value.length = text.len();
        value
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        core::str::from_utf8(&self.bytes[..self.length]).unwrap_or("")
    }
}

/// Most `share=` entries kept.
pub const MAX_SHARES: usize = 8;
/// Longest mount tag a `share=` entry names (the 9P device's limit, `virtio::nine_p::MAX_TAG`).
pub const MAX_SHARE_TAG: usize = crate::virtio::nine_p::MAX_TAG;
/// Longest mount point a `share=` entry names.
pub const MAX_MOUNT_POINT: usize = 128;

/// One `share=TAG:/mountpoint`: the 9P device whose mount tag is `TAG` is mounted at
/// `/mountpoint` (`cargo xtask run --share DIR:/mountpoint` writes it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Share {
    tag: [u8; MAX_SHARE_TAG],
    tag_length: usize,
    mount_point: [u8; MAX_MOUNT_POINT],
    mount_point_length: usize,
}

impl Share {
    const EMPTY: Self =
        Self { tag: [0; MAX_SHARE_TAG], tag_length: 0, mount_point: [0; MAX_MOUNT_POINT], mount_point_length: 0 };

    /// Parses `TAG:/mountpoint`: a tag of 1 to [`MAX_SHARE_TAG`] ASCII bytes without `:`, and
    /// an absolute path of at most [`MAX_MOUNT_POINT`] bytes, not `/` itself, without `..`.
    pub fn parse(value: &str) -> Option<Self> {
        let (tag, mount_point) = value.split_once(':')?;
        let tag_ok = (1..=MAX_SHARE_TAG).contains(&tag.len()) && tag.bytes().all(|b| b.is_ascii_graphic());
        let mount_point = mount_point.trim_end_matches('/');
        let path_ok = mount_point.len() > 1
            && mount_point.len() <= MAX_MOUNT_POINT
            && mount_point.starts_with('/')
            && mount_point.bytes().all(|b| b.is_ascii_graphic())
            && !mount_point.split('/').any(|part| part == ".." || part == ".");
        if !tag_ok || !path_ok {
            return None;
        }
        let mut share = Self::EMPTY;
        share.tag[..tag.len()].copy_from_slice(tag.as_bytes());
        share.tag_length = tag.len();
        share.mount_point[..mount_point.len()].copy_from_slice(mount_point.as_bytes());
        share.mount_point_length = mount_point.len();
        Some(share)
    }

    /// The 9P device's mount tag.
    pub fn tag(&self) -> &str {
        core::str::from_utf8(&self.tag[..self.tag_length]).unwrap_or("")
    }

    /// Where its files appear (absolute, no trailing `/`).
    pub fn mount_point(&self) -> &str {
        core::str::from_utf8(&self.mount_point[..self.mount_point_length]).unwrap_or("")
    }
}

/// The `share=` entries, in command-line order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shares {
    entries: [Share; MAX_SHARES],
    count: usize,
}

impl Shares {
    const EMPTY: Self = Self { entries: [Share::EMPTY; MAX_SHARES], count: 0 };

    /// The entries.
    pub fn entries(&self) -> &[Share] {
        &self.entries[..self.count]
    }

    /// The mount point of the device tagged `tag`, if an entry names it.
    pub fn mount_point_of(&self, tag: &str) -> Option<&str> {
        self.entries().iter().find(|share| share.tag() == tag).map(Share::mount_point)
    }
}

/// The parsed options; anything absent keeps its default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// `cores=N`: start only the first N cores the MADT lists (default: all).
    pub cores: Option<usize>,
    /// `timer_hz=N`: LAPIC timer rate, 1..=10000 (default 100).
    pub timer_hz: u32,
    /// `kc_spin_us=N`: how long a kernel core scans its syspages with nothing to do before it
    /// arms its doorbell and halts, 0..=1000000 µs (default 2000).
    pub kc_spin_us: u32,
    /// `log=error|warn|info|debug|trace` (default info).
    pub log: LogLevel,
    /// `test=NAME[,NAME…]`: in-guest tests to run before init, or instead of it when there is
    /// no `exec=`.
    pub test: Option<Value>,
    /// `exec="command line"`: `/sbin/init` runs it through `sh -c` instead of starting the
    /// shell on the console, and QEMU exits with its status.
    pub exec: Option<Value>,
    /// `share=TAG:/mountpoint`, once per share: where the 9P device tagged `TAG` is mounted.
    pub shares: Shares,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            cores: None,
            timer_hz: 100,
            kc_spin_us: 2000,
            log: LogLevel::Info,
            test: None,
            exec: None,
            shares: Shares::EMPTY,
        }
    }
}

/// One option that was not understood, reported in one line; boot goes on with the default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Diagnostic<'a> {
    /// The key is not an option Reef knows.
    UnknownOption(&'a str),
    /// The key is known but its value is not valid; `expected` says what is.
    BadValue { key: &'a str, value: &'a str, expected: &'static str },
    /// A quoted value has no closing quote.
    UnterminatedQuote(&'a str),
    /// A second `share=` for a tag, or one past [`MAX_SHARES`].
    ShareIgnored { value: &'a str, why: &'static str },
}

impl core::fmt::Display for Diagnostic<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::UnknownOption(key) => {
                write!(
                    f,
                    "unknown kernel option `{key}` ignored (known: cores= timer_hz= kc_spin_us= log= test= share= exec=)"
                )
            }
            Self::BadValue { key, value, expected } => {
                write!(f, "bad value `{value}` for `{key}=` ignored, default kept: expected {expected}")
            }
            Self::UnterminatedQuote(token) => write!(f, "unterminated quote in `{token}` ignored: close it with \""),
            Self::ShareIgnored { value, why } => write!(f, "`share={value}` ignored: {why}"),
        }
    }
}

/// Splits on spaces, honouring double quotes: `exec="msg ping 1"` is one token.
fn tokens(line: &str) -> impl Iterator<Item = Result<&str, &str>> {
    let mut rest = line;
    core::iter::from_fn(move || {
        rest = rest.trim_start_matches([' ', '\t', '\n', '\0']);
        if rest.is_empty() {
            return None;
        }
        let mut in_quote = false;
        let mut end = rest.len();
        for (i, c) in rest.char_indices() {
            match c {
                '"' => in_quote = !in_quote,
                ' ' | '\t' | '\n' | '\0' if !in_quote => {
                    end = i;
                    break;
                }
                _ => {}
            }
        }
        let token = &rest[..end];
        rest = &rest[end..];
        Some(if in_quote { Err(token) } else { Ok(token) })
    })
}

/// Parses the command line; `report` is called once per option that was not understood.
pub fn parse<'a>(line: &'a str, mut report: impl FnMut(Diagnostic<'a>)) -> Options {
    let mut options = Options::default();
    for token in tokens(line) {
        let token = match token {
            Ok(token) => token,
            Err(token) => {
                report(Diagnostic::UnterminatedQuote(token));
                continue;
            }
        };
        let (key, value) = token.split_once('=').unwrap_or((token, ""));
        let value = value.trim_matches('"');
        let bad = |expected| Diagnostic::BadValue { key, value, expected };
        match key {
            "cores" => match value.parse::<usize>() {
                Ok(n) if (1..=crate::partition::MAX_CORES).contains(&n) => options.cores = Some(n),
                _ => report(bad("a core count from 1 to 64")),
            },
            "timer_hz" => match value.parse::<u32>() {
                Ok(hz) if (1..=10_000).contains(&hz) => options.timer_hz = hz,
                _ => report(bad("a rate from 1 to 10000")),
            },
            "kc_spin_us" => match value.parse::<u32>() {
                Ok(us) if us <= 1_000_000 => options.kc_spin_us = us,
                _ => report(bad("microseconds from 0 to 1000000")),
            },
            "log" => match value {
                "error" => options.log = LogLevel::Error,
                "warn" => options.log = LogLevel::Warn,
                "info" => options.log = LogLevel::Info,
                "debug" => options.log = LogLevel::Debug,
                "trace" => options.log = LogLevel::Trace,
                _ => report(bad("one of error, warn, info, debug, trace")),
            },
            "test" | "exec" if value.is_empty() || value.len() > MAX_VALUE || !value.is_ascii() => {
                report(bad("1 to 1024 ASCII characters"))
            }
            "test" => options.test = Some(Value::new(value)),
            "share" => match Share::parse(value) {
                None => report(bad("TAG:/mountpoint, a tag of 1 to 64 characters and an absolute path")),
                Some(share) if options.shares.mount_point_of(share.tag()).is_some() => {
                    report(Diagnostic::ShareIgnored { value, why: "its tag has a mount point already" })
                }
                Some(_) if options.shares.count == MAX_SHARES => {
                    report(Diagnostic::ShareIgnored { value, why: "8 shares at most" })
                }
                Some(share) => {
                    options.shares.entries[options.shares.count] = share;
                    options.shares.count += 1;
                }
            },
            "exec" => options.exec = Some(Value::new(value)),
            _ => report(Diagnostic::UnknownOption(key)),
        }
    }
    options
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::{String, ToString};
    use std::vec::Vec;

    fn parse_all(line: &str) -> (Options, Vec<String>) {
        let mut diagnostics = Vec::new();
        let options = parse(line, |d| diagnostics.push(d.to_string()));
        (options, diagnostics)
    }

    #[test]
    fn known_options() {
        let (options, diagnostics) = parse_all("cores=3 timer_hz=1000 log=debug test=fault:2 exec=\"msg ping 1 10\"");
        assert!(diagnostics.is_empty(), "{diagnostics:?}");
        assert_eq!(options.cores, Some(3));
        assert_eq!(options.timer_hz, 1000);
        assert_eq!(options.kc_spin_us, 2000);
        let (spin, spin_diagnostics) = parse_all("kc_spin_us=50");
        assert_eq!((spin.kc_spin_us, spin_diagnostics.len()), (50, 0));
        let (spin, spin_diagnostics) = parse_all("kc_spin_us=2000000");
        assert_eq!((spin.kc_spin_us, spin_diagnostics.len()), (2000, 1));
        assert_eq!(options.log, LogLevel::Debug);
        assert_eq!(options.test.unwrap().as_str(), "fault:2");
        assert_eq!(options.exec.unwrap().as_str(), "msg ping 1 10");
    }

    #[test]
    fn garbage_is_reported_one_line_each_and_defaults_kept() {
        let (options, diagnostics) = parse_all("cores=zero timer_hz=0 log=loud frobnicate=1 =x \"oops");
        assert_eq!(options, Options::default());
        assert_eq!(diagnostics.len(), 6, "{diagnostics:?}");
        assert!(diagnostics[0].contains("cores="));
        assert!(diagnostics[3].contains("frobnicate"));
        assert!(diagnostics[5].contains("unterminated"));
    }

    #[test]
    fn there_is_no_kernel_shell_to_choose() {
        let (options, diagnostics) = parse_all("shell=kernel exec=\"cores\"");
        assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
        assert!(diagnostics[0].starts_with("unknown kernel option `shell` ignored"), "{diagnostics:?}");
        assert_eq!(options.exec.unwrap().as_str(), "cores");
    }

    #[test]
    fn shares_name_a_tag_and_a_mount_point() {
        let (options, diagnostics) = parse_all("share=share0:/host share=data:/mnt/data/ exec=\"ls /host\"");
        assert!(diagnostics.is_empty(), "{diagnostics:?}");
        let shares: Vec<(&str, &str)> = options.shares.entries().iter().map(|s| (s.tag(), s.mount_point())).collect();
        assert_eq!(shares, [("share0", "/host"), ("data", "/mnt/data")]);
        assert_eq!(options.shares.mount_point_of("data"), Some("/mnt/data"));
        assert_eq!(options.shares.mount_point_of("other"), None);
    }

    #[test]
    fn bad_shares_are_reported_and_skipped() {
        let long_tag = "t".repeat(MAX_SHARE_TAG + 1);
        let long_path = std::format!("/{}", "p".repeat(MAX_MOUNT_POINT));
        for bad in ["share=", "share=tag", "share=:/host", "share=tag:host", "share=tag:/", "share=tag:/a/../b"] {
            let (options, diagnostics) = parse_all(bad);
            assert_eq!((options.shares.entries().len(), diagnostics.len()), (0, 1), "{bad}: {diagnostics:?}");
        }
        for bad in [std::format!("share={long_tag}:/host"), std::format!("share=tag:{long_path}")] {
            let (options, diagnostics) = parse_all(&bad);
            assert_eq!((options.shares.entries().len(), diagnostics.len()), (0, 1), "{diagnostics:?}");
        }
        let (options, diagnostics) = parse_all("share=a:/one share=a:/two");
        assert_eq!(options.shares.mount_point_of("a"), Some("/one"));
        assert!(diagnostics[0].contains("has a mount point already"), "{diagnostics:?}");
        let many: Vec<String> = (0..=MAX_SHARES).map(|n| std::format!("share=t{n}:/m{n}")).collect();
        let (options, diagnostics) = parse_all(&many.join(" "));
        assert_eq!(options.shares.entries().len(), MAX_SHARES);
        assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    }

    #[test]
    fn empty_line_is_all_defaults() {
        assert_eq!(parse_all("").0, Options::default());
        assert_eq!(parse_all("   \0").0, Options::default());
    }
}
