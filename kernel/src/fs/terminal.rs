//! The console's line discipline: termios modes, line editing, echo, and the keys that send
//! signals to the foreground process group [Linux drivers/tty/n_tty.c, termios(3)].

use abi::Errno;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use linux_raw_sys::errno;

/// `struct termios` as `TCGETS` passes it: four flag words, the line discipline, 19 controls.
const TERMIOS_SIZE: usize = 36;

mod input_flags {
    pub const IGNORE_CR: u32 = 0o200;
    pub const CR_TO_NL: u32 = 0o400;
    pub const NL_TO_CR: u32 = 0o100;
}

mod local_flags {
    pub const SIGNALS: u32 = 0o1;
    pub const CANONICAL: u32 = 0o2;
    pub const ECHO: u32 = 0o10;
    pub const ECHO_ERASE: u32 = 0o20;
    pub const ECHO_NEWLINE: u32 = 0o100;
    pub const ECHO_CONTROL: u32 = 0o1000;
}

/// Indices of `c_cc`.
mod control_characters {
    pub const INTERRUPT: usize = 0;
    pub const QUIT: usize = 1;
    pub const ERASE: usize = 2;
    pub const KILL: usize = 3;
    pub const END_OF_FILE: usize = 4;
    pub const MINIMUM: usize = 6;
    pub const SUSPEND: usize = 10;
    pub const WORD_ERASE: usize = 14;
}

/// Terminal requests (`ioctl` numbers) Reef serves [Linux include/uapi/asm-generic/ioctls.h].
pub mod request {
    pub const GET_ATTRIBUTES: u32 = 0x5401;
    pub const SET_ATTRIBUTES: u32 = 0x5402;
    pub const SET_ATTRIBUTES_DRAIN: u32 = 0x5403;
    pub const SET_ATTRIBUTES_FLUSH: u32 = 0x5404;
    pub const FLOW_CONTROL: u32 = 0x540a;
    pub const FLUSH: u32 = 0x540b;
    pub const SET_CONTROLLING: u32 = 0x540e;
    pub const GET_FOREGROUND: u32 = 0x540f;
    pub const SET_FOREGROUND: u32 = 0x5410;
    pub const GET_WINDOW_SIZE: u32 = 0x5413;
    pub const SET_WINDOW_SIZE: u32 = 0x5414;
    pub const BYTES_READABLE: u32 = 0x541b;
    pub const DROP_CONTROLLING: u32 = 0x5422;
    pub const GET_SESSION: u32 = 0x5429;
}

/// Bytes a request reads from and writes to the caller's argument: (in, out); `None` for a
/// request Reef does not serve (ENOTTY).
pub fn argument_sizes(number: u32) -> Option<(usize, usize)> {
    use request::*;
    Some(match number {
        GET_ATTRIBUTES => (0, TERMIOS_SIZE),
        SET_ATTRIBUTES | SET_ATTRIBUTES_DRAIN | SET_ATTRIBUTES_FLUSH => (TERMIOS_SIZE, 0),
        GET_WINDOW_SIZE => (0, 8),
        SET_WINDOW_SIZE => (8, 0),
        GET_FOREGROUND | GET_SESSION | BYTES_READABLE => (0, 4),
        SET_FOREGROUND => (4, 0),
        FLOW_CONTROL | FLUSH | SET_CONTROLLING | DROP_CONTROLLING => (0, 0),
        _ => return None,
    })
}

const SIGINT: u32 = 2;
const SIGQUIT: u32 = 3;
const SIGTSTP: u32 = 20;

pub struct Terminal {
    input_flags: u32,
    output_flags: u32,
    control_flags: u32,
    local_flags: u32,
    line_discipline: u8,
    controls: [u8; 19],
    window: [u8; 8],
    /// The foreground process group: the target of Ctrl-C.
    pub foreground: u32,
    /// The line being edited (canonical mode).
    line: Vec<u8>,
    /// Bytes a read may take.
    ready: VecDeque<u8>,
    /// Lengths of the complete lines in `ready` (canonical mode); a 0 is an end of file.
    lines: VecDeque<usize>,
}

impl Terminal {
    /// Linux's defaults for a serial line: canonical, echo, signals, CR read as NL.
    pub fn new() -> Self {
        let mut controls = [0u8; 19];
        controls[..17]
            .copy_from_slice(&[3, 0x1c, 0x7f, 0x15, 4, 0, 1, 0, 0x11, 0x13, 0x1a, 0, 0x12, 0x0f, 0x17, 0x16, 0]);
        let mut window = [0u8; 8];
        window[0..2].copy_from_slice(&24u16.to_le_bytes());
        window[2..4].copy_from_slice(&80u16.to_le_bytes());
        Self {
            input_flags: input_flags::CR_TO_NL | 0o2000,
            output_flags: 0o5,
            control_flags: 0o277,
            local_flags: 0o105073,
            line_discipline: 0,
            controls,
            window,
            foreground: 0,
            line: Vec::new(),
            ready: VecDeque::new(),
            lines: VecDeque::new(),
        }
    }

    fn canonical(&self) -> bool {
        self.local_flags & local_flags::CANONICAL != 0
    }

    fn echo(&self, bytes: &[u8], out: &mut dyn FnMut(&[u8])) {
        if self.local_flags & local_flags::ECHO != 0 {
            out(bytes);
        }
    }

    fn echo_control(&self, byte: u8, out: &mut dyn FnMut(&[u8])) {
        if self.local_flags & local_flags::ECHO_CONTROL != 0 {
            self.echo(&[b'^', byte ^ 0x40], out);
        }
    }

    /// Takes one typed byte; returns a signal for the foreground group, if the byte is one.
    pub fn input(&mut self, byte: u8, out: &mut dyn FnMut(&[u8])) -> Option<(u32, u32)> {
        let mut byte = byte;
        if byte == b'\r' {
            if self.input_flags & input_flags::IGNORE_CR != 0 {
                return None;
            }
            if self.input_flags & input_flags::CR_TO_NL != 0 {
                byte = b'\n';
            }
        } else if byte == b'\n' && self.input_flags & input_flags::NL_TO_CR != 0 {
            byte = b'\r';
        }
        let controls = self.controls;
        if self.local_flags & local_flags::SIGNALS != 0 && byte != 0 {
            let signal = if byte == controls[control_characters::INTERRUPT] {
                Some(SIGINT)
            } else if byte == controls[control_characters::QUIT] {
                Some(SIGQUIT)
            } else if byte == controls[control_characters::SUSPEND] {
                Some(SIGTSTP)
            } else {
                None
            };
            if let Some(signal) = signal {
                self.echo_control(byte, out);
                self.echo(b"\n", out);
                self.line.clear();
                self.ready.clear();
                self.lines.clear();
                return Some((self.foreground, signal));
            }
        }
        if !self.canonical() {
            self.ready.push_back(byte);
            self.echo(&[byte], out);
            return None;
        }
        if byte == controls[control_characters::ERASE] || byte == 0x08 {
            if self.line.pop().is_some() && self.local_flags & local_flags::ECHO_ERASE != 0 {
                self.echo(b"\x08 \x08", out);
            }
        } else if byte == controls[control_characters::WORD_ERASE] {
            while self.line.last() == Some(&b' ') {
                self.line.pop();
                self.echo(b"\x08 \x08", out);
            }
            while self.line.last().is_some_and(|&b| b != b' ') {
                self.line.pop();
                self.echo(b"\x08 \x08", out);
            }
        } else if byte == controls[control_characters::KILL] {
            for _ in 0..self.line.len() {
                self.echo(b"\x08 \x08", out);
            }
            self.line.clear();
        } else if byte == controls[control_characters::END_OF_FILE] {
            self.finish_line();
        } else if byte == b'\n' {
            self.line.push(b'\n');
            if self.local_flags & (local_flags::ECHO | local_flags::ECHO_NEWLINE) != 0 {
                out(b"\n");
            }
            self.finish_line();
        } else {
            if byte < 0x20 && byte != b'\t' {
                self.echo_control(byte, out);
            } else {
                self.echo(&[byte], out);
            }
            self.line.push(byte);
        }
        None
    }

    fn finish_line(&mut self) {
        self.lines.push_back(self.line.len());
        self.ready.extend(self.line.drain(..));
    }

    /// Whether a read would return now.
    pub fn readable(&self) -> bool {
        if self.canonical() {
            !self.lines.is_empty()
        } else {
            !self.ready.is_empty() || self.controls[control_characters::MINIMUM] == 0
        }
    }

    /// Up to `length` bytes for a read, or `None` when it must wait (an empty `Some` is the
    /// end of file Ctrl-D gives on an empty line).
    pub fn read(&mut self, length: usize) -> Option<Vec<u8>> {
        if !self.readable() {
            return None;
        }
        if !self.canonical() {
            let count = length.min(self.ready.len());
            return Some(self.ready.drain(..count).collect());
        }
        let line = self.lines.front_mut()?;
        let count = length.min(*line);
        *line -= count;
        let data: Vec<u8> = self.ready.drain(..count).collect();
        if *line == 0 {
            self.lines.pop_front();
        }
        Some(data)
    }

    /// Serves a terminal request: `argument` holds the bytes it reads; returns those it writes.
    pub fn control(&mut self, number: u32, argument: &[u8]) -> Result<Vec<u8>, Errno> {
        use request::*;
        let (needed, _) = argument_sizes(number).ok_or(errno::ENOTTY)?;
        if argument.len() != needed {
            return Err(errno::EINVAL);
        }
        let word = |at: usize| u32::from_le_bytes([argument[at], argument[at + 1], argument[at + 2], argument[at + 3]]);
        Ok(match number {
            GET_ATTRIBUTES => {
                let mut out = Vec::with_capacity(TERMIOS_SIZE);
                for flags in [self.input_flags, self.output_flags, self.control_flags, self.local_flags] {
                    out.extend_from_slice(&flags.to_le_bytes());
                }
                out.push(self.line_discipline);
                out.extend_from_slice(&self.controls);
                out
            }
            SET_ATTRIBUTES | SET_ATTRIBUTES_DRAIN | SET_ATTRIBUTES_FLUSH => {
                let was_canonical = self.canonical();
                self.input_flags = word(0);
                self.output_flags = word(4);
                self.control_flags = word(8);
                self.local_flags = word(12);
                self.line_discipline = argument[16];
                self.controls.copy_from_slice(&argument[17..36]);
                if number == SET_ATTRIBUTES_FLUSH {
                    self.flush_input();
                } else if was_canonical && !self.canonical() {
                    // What was typed but not ended becomes readable at once.
                    self.ready.extend(self.line.drain(..));
                    self.lines.clear();
                }
                Vec::new()
            }
            GET_WINDOW_SIZE => self.window.to_vec(),
            SET_WINDOW_SIZE => {
                self.window.copy_from_slice(argument);
                Vec::new()
            }
            GET_FOREGROUND => self.foreground.to_le_bytes().to_vec(),
            SET_FOREGROUND => {
                let group = word(0);
                if group == 0 || group > i32::MAX as u32 {
                    return Err(errno::EINVAL);
                }
                self.foreground = group;
                Vec::new()
            }
            GET_SESSION => self.foreground.to_le_bytes().to_vec(),
            BYTES_READABLE => (self.ready.len() as u32).to_le_bytes().to_vec(),
            FLUSH => {
                self.flush_input();
                Vec::new()
            }
            _ => Vec::new(),
        })
    }

    fn flush_input(&mut self) {
        self.line.clear();
        self.ready.clear();
        self.lines.clear();
    }
}
