//! Reading Rust source for the checks: comments and literals blanked, tokens, named paths.

/// `text` with every comment and the inside of every string and character literal replaced
/// by spaces. Newlines stay, so lines keep their numbers; quotes stay, so tokens keep apart.
pub fn blank_comments_and_literals(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let at = |index: usize| chars.get(index).copied().unwrap_or('\0');
    let mut out = String::with_capacity(text.len());
    let mut index = 0;
    while index < chars.len() {
        let c = chars[index];
        let starts_word = index == 0 || !is_identifier_char(chars[index - 1]);
        if c == '/' && at(index + 1) == '/' {
            while index < chars.len() && chars[index] != '\n' {
                out.push(' ');
                index += 1;
            }
        } else if c == '/' && at(index + 1) == '*' {
            // Block comments nest in Rust.
            let mut depth = 0;
            while index < chars.len() {
                if chars[index] == '/' && at(index + 1) == '*' {
                    depth += 1;
                    out.push_str("  ");
                    index += 2;
                } else if chars[index] == '*' && at(index + 1) == '/' {
                    depth -= 1;
                    out.push_str("  ");
                    index += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[index]));
                    index += 1;
                }
            }
        } else if starts_word && raw_string_hashes(&chars, index).is_some() {
            // r"…", r#"…"#, br"…", cr"…": no escapes; it ends at a quote and as many hashes.
            let (prefix, hashes) = raw_string_hashes(&chars, index).unwrap_or_default();
            for _ in 0..prefix + hashes + 1 {
                out.push(chars[index]);
                index += 1;
            }
            while index < chars.len() {
                if chars[index] == '"' && (1..=hashes).all(|k| at(index + k) == '#') {
                    break;
                }
                out.push(blank(chars[index]));
                index += 1;
            }
            for _ in 0..(hashes + 1).min(chars.len() - index) {
                out.push(chars[index]);
                index += 1;
            }
        } else if c == '"' {
            index = blank_quoted(&chars, index, '"', &mut out);
        } else if c == '\'' && (at(index + 1) == '\\' || (at(index + 1) != '\0' && at(index + 2) == '\'')) {
            // A character literal ('x', '\n', '\''), not a lifetime ('a, 'static).
            index = blank_quoted(&chars, index, '\'', &mut out);
        } else {
            out.push(c);
            index += 1;
        }
    }
    out
}

/// What a blanked character becomes: a space, but a newline stays (lines keep their numbers).
fn blank(c: char) -> char {
    if c == '\n' {
        '\n'
    } else {
        ' '
    }
}

/// A quoted literal at `start` (a string or a character, by `quote`, with `\` escapes)
/// written to `out` with its quotes kept and its contents blanked; the index after it.
fn blank_quoted(chars: &[char], start: usize, quote: char, out: &mut String) -> usize {
    out.push(quote);
    let mut index = start + 1;
    while index < chars.len() && chars[index] != quote {
        if chars[index] == '\\' {
            out.push(' ');
            index += 1;
        }
        if index < chars.len() {
            out.push(blank(chars[index]));
            index += 1;
        }
    }
    if index < chars.len() {
        out.push(quote);
        index += 1;
    }
    index
}

/// At the start of a raw string literal, the length of its prefix (`r`, `br`, `cr`) and its
/// number of hashes.
fn raw_string_hashes(chars: &[char], index: usize) -> Option<(usize, usize)> {
    let prefix = match (chars.get(index), chars.get(index + 1)) {
        (Some('r'), _) => 1,
        (Some('b' | 'c'), Some('r')) => 2,
        _ => return None,
    };
    let hashes = chars[index + prefix..].iter().take_while(|&&c| c == '#').count();
    (chars.get(index + prefix + hashes) == Some(&'"')).then_some((prefix, hashes))
}

fn is_identifier_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// One token of blanked source: a word (identifier, keyword or number), `::`, or one other
/// character; with the line it is on, from 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub text: String,
    pub line: usize,
}

impl Token {
    fn is(&self, text: &str) -> bool {
        self.text == text
    }

    fn is_word(&self) -> bool {
        self.text.chars().next().is_some_and(is_identifier_char)
    }
}

/// The tokens of blanked source (see [`blank_comments_and_literals`]).
pub fn tokens(blanked: &str) -> Vec<Token> {
    let chars: Vec<char> = blanked.chars().collect();
    let mut tokens = Vec::new();
    let mut line = 1;
    let mut index = 0;
    while index < chars.len() {
        let c = chars[index];
        if c == '\n' {
            line += 1;
            index += 1;
        } else if c.is_whitespace() {
            index += 1;
        } else if is_identifier_char(c) {
            let start = index;
            while index < chars.len() && is_identifier_char(chars[index]) {
                index += 1;
            }
            tokens.push(Token { text: chars[start..index].iter().collect(), line });
        } else if c == ':' && chars.get(index + 1) == Some(&':') {
            tokens.push(Token { text: "::".into(), line });
            index += 2;
        } else {
            tokens.push(Token { text: c.to_string(), line });
            index += 1;
        }
    }
    tokens
}

/// How a named path starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    /// `crate::`, `$crate::`, `self::` or `super::`: the segments are absolute in this crate.
    ThisCrate,
    /// One of the words asked for (another crate's name, or a room named from the crate
    /// root): the segments follow that word.
    Word(String),
}

/// A path a file names, every `use` group expanded: `use crate::a::{b, c::d}` names `a::b`
/// and `a::c::d`. `line` is the line of its last segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedPath {
    pub start: Start,
    pub segments: Vec<String>,
    pub line: usize,
}

/// What [`named_paths`] finds in one file.
#[derive(Debug, Default)]
pub struct FileReading {
    pub paths: Vec<NamedPath>,
    /// The names of the `macro_rules!` the file defines.
    pub macros: Vec<String>,
}

/// Every path `tokens` names from the crate (`crate::`, `$crate::`, `self::`, `super::`,
/// resolved against `module`, the file's module path, and the inline `mod x { … }` around
/// it) or from one of `words` followed by `::`.
pub fn named_paths(tokens: &[Token], module: &[String], words: &[&str]) -> FileReading {
    let mut reading = FileReading::default();
    // Inline modules around the current token: their name and the brace depth inside them.
    let mut inline_modules: Vec<(String, usize)> = Vec::new();
    let mut depth: usize = 0;
    let mut index = 0;
    while index < tokens.len() {
        let token = &tokens[index];
        let next_is_path = tokens.get(index + 1).is_some_and(|next| next.is("::"));
        let after_path = index > 0 && (tokens[index - 1].is("::") || tokens[index - 1].is("."));
        if token.is("{") {
            depth += 1;
        } else if token.is("}") {
            depth = depth.saturating_sub(1);
            while inline_modules.last().is_some_and(|&(_, inside)| inside > depth) {
                inline_modules.pop();
            }
        } else if token.is("mod") && tokens.get(index + 2).is_some_and(|t| t.is("{")) {
            inline_modules.push((tokens[index + 1].text.clone(), depth + 1));
            depth += 1;
            index += 3;
            continue;
        } else if token.is("macro_rules") && tokens.get(index + 1).is_some_and(|t| t.is("!")) {
            if let Some(name) = tokens.get(index + 2) {
                reading.macros.push(name.text.clone());
            }
        } else if next_is_path && !after_path && ["crate", "self", "super"].contains(&token.text.as_str()) {
            let mut current: Vec<String> = module.to_vec();
            current.extend(inline_modules.iter().map(|(name, _)| name.clone()));
            let mut prefix = match token.text.as_str() {
                "crate" => Vec::new(),
                "self" => current,
                _ => {
                    current.pop();
                    current
                }
            };
            let mut next = index + 2;
            while tokens.get(next).is_some_and(|t| t.is("super")) && tokens.get(next + 1).is_some_and(|t| t.is("::")) {
                prefix.pop();
                next += 2;
            }
            let mut leaves = Vec::new();
            index = use_tree(tokens, next, prefix, &mut leaves);
            reading.paths.extend(leaves.into_iter().map(|(segments, line)| NamedPath {
                start: Start::ThisCrate,
                segments,
                line,
            }));
            continue;
        } else if next_is_path && !after_path && words.contains(&token.text.as_str()) {
            let mut leaves = Vec::new();
            index = use_tree(tokens, index + 2, Vec::new(), &mut leaves);
            let start = Start::Word(token.text.clone());
            reading.paths.extend(leaves.into_iter().map(|(segments, line)| NamedPath {
                start: start.clone(),
                segments,
                line,
            }));
            continue;
        }
        index += 1;
    }
    reading
}

/// Reads a path or `use` tree from `index` (just after a `::`), adding every complete path
/// to `leaves`; returns the index after it.
fn use_tree(tokens: &[Token], index: usize, prefix: Vec<String>, leaves: &mut Vec<(Vec<String>, usize)>) -> usize {
    let Some(token) = tokens.get(index) else {
        return index;
    };
    if token.is("{") {
        let mut index = index + 1;
        while let Some(token) = tokens.get(index) {
            if token.is("}") {
                return index + 1;
            }
            let after = use_tree(tokens, index, prefix.clone(), leaves);
            index = if after == index { index + 1 } else { after };
            if tokens.get(index).is_some_and(|t| t.is(",")) {
                index += 1;
            }
        }
        index
    } else if token.is("*") {
        let mut segments = prefix;
        segments.push("*".into());
        leaves.push((segments, token.line));
        index + 1
    } else if token.is("self") {
        leaves.push((prefix, token.line));
        skip_alias(tokens, index + 1)
    } else if token.is_word() {
        let mut segments = prefix;
        segments.push(token.text.clone());
        let continues = tokens.get(index + 1).is_some_and(|t| t.is("::"))
            && tokens.get(index + 2).is_some_and(|t| t.is("{") || t.is("*") || t.is_word());
        if continues {
            use_tree(tokens, index + 2, segments, leaves)
        } else {
            leaves.push((segments, token.line));
            skip_alias(tokens, index + 1)
        }
    } else {
        if !prefix.is_empty() {
            leaves.push((prefix, token.line));
        }
        index
    }
}

fn skip_alias(tokens: &[Token], index: usize) -> usize {
    if tokens.get(index).is_some_and(|t| t.is("as")) {
        index + 2
    } else {
        index
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(text: &str, module: &[&str]) -> Vec<(String, usize)> {
        let module: Vec<String> = module.iter().map(|s| s.to_string()).collect();
        named_paths(&tokens(&blank_comments_and_literals(text)), &module, &["base"])
            .paths
            .into_iter()
            .map(|path| {
                let start = match path.start {
                    Start::ThisCrate => String::new(),
                    Start::Word(word) => format!("{word}:"),
                };
                (format!("{start}{}", path.segments.join("::")), path.line)
            })
            .collect()
    }

    #[test]
    fn comments_and_literals_are_blanked_but_lines_kept() {
        let text =
            "a // crate::x\n/* crate::y /* nested */ crate::z */ b\n\"crate::s\\\"\" 'c' '\\'' 'a r#\"crate::r\"# c";
        let blanked = blank_comments_and_literals(text);
        assert_eq!(blanked.lines().count(), text.lines().count());
        assert!(!blanked.contains("crate"), "{blanked}");
        assert!(blanked.contains("'a r#"), "a lifetime stays: {blanked}");
        assert!(blanked.ends_with(" c"), "{blanked}");
    }

    #[test]
    fn use_groups_are_expanded_with_their_lines() {
        let text = "use crate::{\n    msg::drain,\n    proc::{signal::Signal, self as p},\n};\nfn f() { crate::time::now(); crate::sched::Thread::<u8>::new(); }";
        assert_eq!(
            paths(text, &["sched"]),
            [
                ("msg::drain".into(), 2),
                ("proc::signal::Signal".into(), 3),
                ("proc".into(), 3),
                ("time::now".into(), 5),
                ("sched::Thread".into(), 5),
            ]
        );
    }

    #[test]
    fn super_and_self_follow_the_module_and_inline_modules() {
        let text = "use super::SyscallResult;\nmod tests { use super::*; fn f() { self::g(); } }\nfn h() { base::arch::halt(); x.base::y; pub(crate) fn z() {} }";
        assert_eq!(
            paths(text, &["syscall", "syspage"]),
            [
                ("syscall::SyscallResult".into(), 1),
                ("syscall::syspage::*".into(), 2),
                ("syscall::syspage::tests::g".into(), 2),
                ("base:arch::halt".into(), 3),
            ]
        );
    }
}
