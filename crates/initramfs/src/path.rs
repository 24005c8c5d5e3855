//! Path components as lookups see them: `/`-separated, empty and `.` components skipped.
//!
//! Entry names and the paths callers look up are compared component by component, so `a//b`,
//! `./a/b` and `a/./b` all name `a/b` without any string being rewritten (the reader does not
//! allocate).

/// The components of `path` in order: the parts between `/`, without empty ones and `.`.
/// `..` is returned as it is; only the lookups give it a meaning.
pub(crate) fn components(path: &str) -> impl DoubleEndedIterator<Item = &str> + Clone {
    path.split('/').filter(|component| !component.is_empty() && *component != ".")
}

/// The first component of `path` and what follows it, or `None` when nothing but separators
/// and `.` remain.
pub(crate) fn split_first(path: &str) -> Option<(&str, &str)> {
    let mut rest = path;
    loop {
        rest = rest.trim_start_matches('/');
        if rest.is_empty() {
            return None;
        }
        let end = rest.find('/').unwrap_or(rest.len());
        let (component, after) = rest.split_at(end);
        if component != "." {
            return Some((component, after));
        }
        rest = after;
    }
}

/// The components of `path` with every `..` applied lexically (it removes the component
/// before it; above the root it stays at the root), last component first. Reading from the
/// end needs only a count of the `..` still to apply, so no list of components is kept.
pub(crate) fn lexical_components_reversed(path: &str) -> impl Iterator<Item = &str> + Clone {
    let mut parents_to_skip = 0usize;
    components(path).rev().filter(move |component| {
        if *component == ".." {
            parents_to_skip = parents_to_skip.saturating_add(1);
            false
        } else if parents_to_skip > 0 {
            parents_to_skip -= 1;
            false
        } else {
            true
        }
    })
}

/// The part of `name` that follows the components of `directory`, if `name` starts with them.
pub(crate) fn strip_directory<'n>(name: &'n str, directory: &str) -> Option<&'n str> {
    let mut rest = name;
    for wanted in components(directory) {
        let (component, after) = split_first(rest)?;
        if component != wanted {
            return None;
        }
        rest = after;
    }
    Some(rest)
}

/// `name` up to the end of its `count`-th component (all of it when it has fewer); `""` for 0.
pub(crate) fn leading_components(name: &str, count: usize) -> &str {
    if count == 0 {
        return "";
    }
    let mut seen = 0;
    let mut start = 0;
    for segment in name.split('/') {
        // `split` yields consecutive segments separated by one byte each.
        let end = start + segment.len();
        if !segment.is_empty() && segment != "." {
            seen += 1;
            if seen == count {
                return &name[..end];
            }
        }
        start = end + 1;
    }
    name
}

/// The directory holding `name`: all its components but the last (`""`, the root, for the root).
pub(crate) fn parent(name: &str) -> &str {
    leading_components(name, components(name).count().saturating_sub(1))
}

/// `name` without the leading `/` and `./` that archives built with `find /` or `find .`
/// carry; `.` alone is the root, `""`.
pub(crate) fn without_leading_root(name: &str) -> &str {
    let mut rest = name;
    loop {
        if let Some(after) = rest.strip_prefix('/') {
            rest = after;
        } else if let Some(after) = rest.strip_prefix("./") {
            rest = after;
        } else if rest == "." {
            return "";
        } else {
            return rest;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    #[test]
    fn components_skip_empty_and_dot() {
        assert_eq!(components("/a//./b/").collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(components("a/../b").collect::<Vec<_>>(), ["a", "..", "b"]);
        assert_eq!(components("./.").count(), 0);
        assert_eq!(split_first("/./a//b"), Some(("a", "//b")));
        assert_eq!(split_first("//./"), None);
    }

    #[test]
    fn dot_dot_is_lexical_and_stops_at_the_root() {
        let reversed = |path| lexical_components_reversed(path).collect::<Vec<_>>();
        assert_eq!(reversed("/a/b/../c"), ["c", "a"]);
        assert_eq!(reversed("../../x/./y/.."), ["x"]);
        assert!(reversed("a/..").is_empty());
    }

    #[test]
    fn prefixes_and_parents() {
        assert_eq!(strip_directory("bin/sh", "/bin/"), Some("/sh"));
        assert_eq!(strip_directory("bin/sh", ""), Some("bin/sh"));
        assert_eq!(strip_directory("binary", "bin"), None);
        assert_eq!(leading_components("a/./b//c", 2), "a/./b");
        assert_eq!(leading_components("a/b", 5), "a/b");
        assert_eq!(parent("a/./b"), "a");
        assert_eq!(parent("a/."), "");
        assert_eq!(parent(""), "");
        assert_eq!(without_leading_root("/./bin/sh"), "bin/sh");
        assert_eq!(without_leading_root("."), "");
        assert_eq!(without_leading_root("./"), "");
        assert_eq!(without_leading_root("..a"), "..a");
    }
}
