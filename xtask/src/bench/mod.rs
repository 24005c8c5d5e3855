//! `cargo xtask bench` and `cargo xtask peer`: figures, never verdicts. Each writes JSON under
//! `results/`.
//!
//! This file only dispatches. Each benchmark is a file of its own (`ftq` a directory, with
//! its spectrum and interrupt readers); what they share is below them and names none of them:
//! [`common`] (options, results files, times in tables), [`stats`], [`plot`],
//! [`figure_lines`] (the programs' figure lines), [`op_counts`] (fsbench's message counts) and
//! [`peer`] (the Linux guest).

mod boot;
mod common;
mod cores;
mod figure_lines;
mod fs;
mod ftq;
mod host_files;
mod msg;
mod net;
mod op_counts;
mod peer;
mod pingpong;
mod plot;
mod proc;
mod stats;
mod syscall;

/// `cargo xtask bench <what>`.
pub fn run(arguments: &[String]) -> Result<u8, String> {
    match arguments.first().map(String::as_str) {
        Some("boot") => boot::run(&arguments[1..]),
        Some("msg") => msg::run(&arguments[1..]),
        Some("proc") => proc::run(&arguments[1..]),
        Some("fs") => fs::run(&arguments[1..]),
        Some("host-files") => host_files::run(&arguments[1..]),
        Some("syscall") => syscall::run(&arguments[1..]),
        Some("ftq") => ftq::bench(&arguments[1..]),
        Some("cores") => cores::bench(&arguments[1..]),
        Some("pingpong") => pingpong::run(&arguments[1..]),
        Some("net") => net::run(&arguments[1..]),
        Some(other) => Err(format!(
            "unknown benchmark `{other}`: known are boot, msg, proc, fs, host-files, syscall, ftq, cores, pingpong, net"
        )),
        None => Err("which benchmark? `cargo xtask bench boot` or `cargo xtask bench msg`".into()),
    }
}

/// `cargo xtask peer <what>`: the Linux half of a benchmark alone.
pub fn run_peer(arguments: &[String]) -> Result<u8, String> {
    match arguments.first().map(String::as_str) {
        Some("msg") => peer::msg::run(&arguments[1..]),
        Some("proc") => proc::peer(&arguments[1..]),
        Some("syscall") => syscall::peer(&arguments[1..]),
        Some("ftq") => ftq::peer(&arguments[1..]),
        Some("cores") => cores::peer(&arguments[1..]),
        Some("cpython") => crate::test::catalogue::cpython::peer(&arguments[1..]),
        Some("net") => crate::test::catalogue::network::peer(&arguments[1..]),
        Some(other) => {
            Err(format!("unknown peer benchmark `{other}`: known are msg, proc, syscall, ftq, cores, cpython, net"))
        }
        None => Err("which peer benchmark? `cargo xtask peer msg`".into()),
    }
}
