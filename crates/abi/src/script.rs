//! `#!` scripts: the interpreter line `execve` reads, as Linux's `binfmt_script`.

/// Bytes of a script's head that may hold the interpreter line (Linux's `BINPRM_BUF_SIZE`).
const LINE_LIMIT: usize = 256;

/// How many interpreters may name another one before `execve` gives up with `ELOOP` (a script
/// whose interpreter is a script, and so on), as Linux's `binfmt_script` nesting limit.
pub const NESTING_LIMIT: usize = 4;

/// The interpreter line of a script: the interpreter's path and its optional argument.
#[derive(Debug, PartialEq, Eq)]
pub struct Interpreter<'a> {
    pub path: &'a [u8],
    /// Everything after the path on the line, blanks trimmed, as one argument (Linux does not
    /// split it).
    pub argument: Option<&'a [u8]>,
}

/// A `#!` line that names no interpreter Reef can find: `execve` fails with `ENOEXEC`.
#[derive(Debug, PartialEq, Eq)]
pub struct NoInterpreter;

/// The interpreter `image` names, if it begins with `#!`; [`NoInterpreter`] when the line
/// names none or its path does not end within [`LINE_LIMIT`] bytes.
pub fn interpreter(image: &[u8]) -> Option<Result<Interpreter<'_>, NoInterpreter>> {
    let rest = image.strip_prefix(b"#!")?;
    let head = &rest[..rest.len().min(LINE_LIMIT - 2)];
    let line_end = head.iter().position(|&b| b == b'\n');
    let line = &head[..line_end.unwrap_or(head.len())];
    let blank = |b: &u8| *b == b' ' || *b == b'\t';
    let start = line.iter().position(|b| !blank(b)).unwrap_or(line.len());
    let line = &line[start..];
    let path_end = line.iter().position(blank).unwrap_or(line.len());
    let path = &line[..path_end];
    // A path cut by the limit would name another file: refused, as Linux does.
    if path.is_empty() || (line_end.is_none() && path_end == line.len() && rest.len() > head.len()) {
        return Some(Err(NoInterpreter));
    }
    let argument = line[path_end..].trim_ascii();
    Some(Ok(Interpreter { path, argument: (!argument.is_empty()).then_some(argument) }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_linux_interpreter_lines() {
        assert_eq!(interpreter(b"\x7fELF"), None);
        let plain = interpreter(b"#!/bin/sh\necho hi\n").unwrap().unwrap();
        assert_eq!((plain.path, plain.argument), (&b"/bin/sh"[..], None));
        let spaced = interpreter(b"#! /usr/bin/env  python3 -u \nx").unwrap().unwrap();
        assert_eq!((spaced.path, spaced.argument), (&b"/usr/bin/env"[..], Some(&b"python3 -u"[..])));
        assert_eq!(interpreter(b"#!\n").unwrap(), Err(NoInterpreter));
        assert_eq!(interpreter(b"#!/bin/sh").unwrap().unwrap().path, b"/bin/sh");
        let mut long = b"#!/".to_vec();
        long.extend([b'x'; 300]);
        assert_eq!(interpreter(&long).unwrap(), Err(NoInterpreter), "a path cut by the limit");
        long.splice(100..101, *b" ");
        assert!(interpreter(&long).unwrap().is_ok(), "the path ends in the head; its argument is cut");
    }

    proptest::proptest! {
        #[test]
        fn never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..400)) {
            let mut image = b"#!".to_vec();
            image.extend(bytes);
            let _ = interpreter(&image);
        }
    }
}
