//! Debian's own dynamically linked programs: `ld.so` and glibc from the Debian tree, read
//! through the share, on core 0 and on core 1, with the host's run of the same binaries as
//! the expected output; Debian's bash and python3 in a `chroot` of the tree on a TC, on
//! another core, and on an AC with and without a syspage; and interpreters that are missing
//! or not an ELF.

use super::exec;
use crate::qemu::{Machine, Share};
use crate::test::runner::Integration;
use crate::test::serial::{nothing_leaked, printed_in_order};
use std::path::Path;

/// The runs' names (the tree is made only when one of them is selected).
const NAMES: [&str; 4] =
    ["dynamic-debian-2-cores", "dynamic-bad-interpreter", "debian-chroot-4-cores", "file-pages-shared-2-cores"];

/// The loader and its library path inside the tree, relative to its root.
const LOADER: &str = "lib/x86_64-linux-gnu/ld-linux-x86-64.so.2";
const LIBRARY_PATH: &str = "lib/x86_64-linux-gnu:usr/lib/x86_64-linux-gnu";

/// What the programs are run on: `ls -l`, `cat` and `sha256sum` of files of the tree.
const COMMANDS: [&str; 3] = ["bin/ls -l bin/true bin/cat", "bin/cat etc/debian_version", "usr/bin/sha256sum bin/true"];

pub(super) fn integrations(list: &mut Vec<Integration>, machine: &dyn Fn(usize, &str) -> Machine) {
    if !NAMES.iter().any(|name| super::is_selected(name)) {
        return;
    }
    let tree = match crate::rootfs::build() {
        Ok(tree) => tree,
        Err(why) => {
            list.extend(NAMES.iter().map(|name| super::unprepared(name.to_string(), &why, machine)));
            return;
        }
    };
    debian_programs(list, machine, &tree);
    bad_interpreter(list, machine, &tree);
    chrooted(list, machine, &tree);
    shared_pages(list, machine, &tree);
}

/// A command of [`COMMANDS`] run by the tree's loader from the tree's root: `root` is `/debian`
/// in Reef, the tree's path on the host.
fn loaded(root: &str, command: &str) -> String {
    let library_path: Vec<String> = LIBRARY_PATH.split(':').map(|p| format!("{root}/{p}")).collect();
    format!("{root}/{LOADER} --library-path {} {command}", library_path.join(":"))
}

/// The host's output of every command of [`COMMANDS`], run in `tree`.
fn host_output(tree: &Path) -> Result<Vec<String>, String> {
    let root = tree.display().to_string();
    COMMANDS
        .iter()
        .map(|command| {
            let output = std::process::Command::new("sh")
                .arg("-c")
                .arg(loaded(&root, command))
                .current_dir(tree)
                .output()
                .map_err(|e| format!("running {command} on the host: {e}"))?;
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        })
        .collect()
}

/// `ls -l`, `cat` and `sha256sum` of the tree run on core 0, then on core 1, print what they
/// print on the host, and ask for no system call Reef lacks.
fn debian_programs(list: &mut Vec<Integration>, machine: &dyn Fn(usize, &str) -> Machine, tree: &Path) {
    let commands: Vec<String> = COMMANDS.iter().map(|c| loaded("/debian", c)).collect();
    let all = commands.join("; ");
    let script = format!("cd /debian; {all}; echo core 1; on 1 sh -c 'cd /debian; {all}'; cat /proc/reef/syscalls");
    let mut m = machine(2, &exec(&script));
    m.shares = vec![Share { directory: tree.to_path_buf(), mount_point: "/debian".into() }];
    let tree = tree.to_path_buf();
    list.push(Integration {
        name: NAMES[0].into(),
        machine: m,
        expected_status: 0,
        check: Box::new(move |serial| {
            let host = host_output(&tree)?;
            let mut expected: Vec<&str> = host.iter().map(String::as_str).collect();
            expected.push("core 1\n");
            expected.extend(host.iter().map(String::as_str));
            expected.extend(["core 0:", "0 unimplemented (ENOSYS)", "core 1:", "0 unimplemented (ENOSYS)"]);
            printed_in_order(serial, &expected)
        }),
    });
}

/// A program whose interpreter is missing (Debian's `true` names `/lib64/ld-linux-x86-64.so.2`,
/// absent outside a chroot) fails with `ENOENT`; one whose interpreter is a text file with
/// `ENOEXEC`; the kernel lives on to say `alive`.
fn bad_interpreter(list: &mut Vec<Integration>, machine: &dyn Fn(usize, &str) -> Machine, tree: &Path) {
    let directory = crate::tools::root().join("target/test-bad-interpreter");
    let _ = std::fs::remove_dir_all(&directory);
    let _ = std::fs::create_dir_all(&directory);
    let program = std::fs::read(tree.join("bin/true")).unwrap_or_default();
    let named = b"/lib64/ld-linux-x86-64.so.2\0";
    let text = b"/host/text-interpreter.txt\0\0";
    let mut patched = program.clone();
    if let Some(at) = program.windows(named.len()).position(|w| w == named) {
        patched[at..at + text.len()].copy_from_slice(text);
    }
    let _ = std::fs::write(directory.join("bad-interpreter"), patched);
    let _ = std::fs::write(directory.join("text-interpreter.txt"), b"not an ELF\n");
    let _ = std::fs::copy(tree.join("bin/true"), directory.join("missing-interpreter"));
    #[cfg(unix)]
    for name in ["bad-interpreter", "missing-interpreter"] {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(directory.join(name), std::fs::Permissions::from_mode(0o755));
    }
    let script = "/host/missing-interpreter; echo missing $?; /host/bad-interpreter; echo bad $?; \
                  on 1 sh -c '/host/missing-interpreter; echo missing $?'; echo alive";
    let mut m = machine(2, &exec(script));
    m.shares = vec![Share { directory, mount_point: "/host".into() }];
    list.push(Integration {
        name: NAMES[1].into(),
        machine: m,
        expected_status: 0,
        check: Box::new(|serial| {
            printed_in_order(
                serial,
                &["not found", "missing 127", "Permission denied", "bad 126", "missing 127", "alive"],
            )
        }),
    });
}

/// Where [`chrooted`]'s job lies in the tree, as the chroot sees it.
const JOB: &str = "/srv/reef-test";

/// The job's bash script and Python program (the script takes the job's directory and a
/// scratch directory; the program the job's directory) and the data they read.
const JOB_FILES: [(&str, &str); 7] = [
    ("script.sh", include_str!("debian_job/script.sh")),
    ("program.py", include_str!("debian_job/program.py")),
    ("data/words.txt", "pear\napple\nfig needle\nbanana\n"),
    ("data/sub/hay.txt", "a needle in\nthe hay\n"),
    ("data/config.json", "{\"name\": \"reef\", \"values\": [1, 2, 39]}\n"),
    // What [`shared_pages`]'s bash processes run: bash stays, waiting for its `sleep`.
    ("sleeper.sh", "sleep 60\ntrue\n"),
    // A library that is not an ELF, found first on `LD_LIBRARY_PATH`.
    ("badlib/libc.so.6", "This text file is where a program looks for libc.so.6: ld.so must refuse it.\n"),
];

/// Writes the job into `tree` afresh.
fn write_job(tree: &Path) -> Result<(), String> {
    let directory = tree.join(JOB.trim_start_matches('/'));
    let _ = std::fs::remove_dir_all(&directory);
    for (name, contents) in JOB_FILES {
        let path = directory.join(name);
        std::fs::create_dir_all(path.parent().unwrap_or(&directory))
            .and_then(|()| std::fs::write(&path, contents))
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    // Two links naming each other.
    let loop_directory = directory.join("loop");
    std::fs::create_dir_all(&loop_directory).map_err(|e| format!("making {}: {e}", loop_directory.display()))?;
    for (name, target) in [("a", "b"), ("b", "a")] {
        std::os::unix::fs::symlink(target, loop_directory.join(name)).map_err(|e| format!("a link in the job: {e}"))?;
    }
    Ok(())
}

/// What the job prints on the host: the script run by the host's bash (its programs found on
/// the host's `PATH`), the program by the tree's python3 through the tree's loader.
fn job_on_host(tree: &Path) -> Result<(String, String), String> {
    let job = tree.join(JOB.trim_start_matches('/'));
    let scratch = crate::tools::root().join("target/debian-job-scratch");
    let _ = std::fs::create_dir_all(&scratch);
    let run = |command: &mut std::process::Command, what: &str| {
        let output = command.output().map_err(|e| format!("running {what} on the host: {e}"))?;
        if !output.status.success() {
            return Err(format!("{what} failed on the host: {}", String::from_utf8_lossy(&output.stderr)));
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    };
    let script =
        run(std::process::Command::new("bash").arg(job.join("script.sh")).arg(&job).arg(&scratch), "script.sh")?;
    let root = tree.display().to_string();
    let python = loaded(&root, &format!("{root}/usr/bin/python3 {}/program.py {}", job.display(), job.display()));
    let program = run(std::process::Command::new("sh").arg("-c").arg(&python), "program.py")?;
    Ok((script, program))
}

/// Debian's bash runs a script with functions, arrays, `$(...)`, pipes and redirections that
/// calls `ls`, `sort`, `grep -r`, `find -exec` and `sha256sum`, and Debian's python3 a program
/// that uses `json`, `hashlib` and `re` on a file of the share, each under `chroot /debian`:
/// on core 0, on core 2 (`on 2`), on AC 1, and on AC 1 with its calls through a syspage
/// served by KC 3. Each prints what the host prints, `python3 -c` prints 42 on core 2, a
/// library that is not an ELF and a loop of links in the share fail clearly, and no core
/// counts a system call it lacks.
fn chrooted(list: &mut Vec<Integration>, machine: &dyn Fn(usize, &str) -> Machine, tree: &Path) {
    let prepared = write_job(tree);
    let bash = format!("chroot /debian /bin/bash {JOB}/script.sh {JOB} /tmp");
    let python = format!("chroot /debian /usr/bin/python3 {JOB}/program.py {JOB}");
    let script = format!(
        "echo place core-0; {bash}; {python}; echo place core-2; on 2 {bash}; on 2 {python}; \
         on 2 chroot /debian /usr/bin/python3 -c print\\(6\\*7\\); role 1 ac; role 3 kc; \
         echo place ac-1; execac 1 {bash}; execac 1 {python}; \
         echo place ac-1-syspage; execac --syspage 1 {bash}; execac --syspage 1 {python}; \
         chroot /debian /bin/bash -c 'LD_LIBRARY_PATH={JOB}/badlib /bin/true; echo badlib $?; \
         cat {JOB}/loop/a; echo loop $?'; cat /proc/reef/syscalls"
    );
    let mut m = machine(4, &exec(&script));
    m.timeout = std::time::Duration::from_secs(120);
    m.shares = vec![Share { directory: tree.to_path_buf(), mount_point: "/debian".into() }];
    let tree = tree.to_path_buf();
    list.push(Integration {
        name: NAMES[2].into(),
        machine: m,
        expected_status: 0,
        check: Box::new(move |serial| {
            prepared.clone()?;
            let (script, program) = job_on_host(&tree)?;
            let mut expected: Vec<&str> = Vec::new();
            for place in ["place core-0", "place core-2", "42", "place ac-1", "place ac-1-syspage"] {
                expected.push(place);
                if place != "42" {
                    expected.extend([script.as_str(), program.as_str()]);
                }
            }
            // Bad input: a library that is not an ELF, a loop of links, each a clear error.
            expected.extend(["invalid ELF header", "badlib 127", "Too many levels of symbolic links", "loop 1"]);
            for core in 0..4 {
                expected.push(["core 0:", "core 1:", "core 2:", "core 3:"][core]);
                expected.push("0 unimplemented (ENOSYS)");
            }
            printed_in_order(serial, &expected)?;
            // The AC ran them: its calls went home, by ICC and through the syspage.
            let served = serial
                .lines()
                .find_map(|line| line.trim().strip_prefix("as an application core: "))
                .ok_or("no report of AC 1's calls")?;
            let through_syspage = served.split(", ").nth(1).and_then(|part| part.split(' ').next());
            match through_syspage.and_then(|count| count.parse::<u64>().ok()) {
                Some(count) if count > 0 => Ok(()),
                _ => Err(format!("AC 1 sent no call through a syspage: `{served}`")),
            }
        }),
    });
}

/// One Debian `bash` (with its `sleep`) in a chroot on core 0, then ten at once: their
/// libraries' pages are core 0's file page cache's, each mapped by every process (many more
/// mappings than pages), and the ten hold far less than ten times what one holds. When they
/// are killed the cache is empty and nothing leaked. Prints the figure
/// (docs/files.md, "Shared file pages").
fn shared_pages(list: &mut Vec<Integration>, machine: &dyn Fn(usize, &str) -> Machine, tree: &Path) {
    let start = |count: usize| {
        format!(
            "i=0; while [ $i -lt {count} ]; do chroot /debian /bin/bash {JOB}/sleeper.sh & i=$((i+1)); done; \
             n=0; while [ $(pidof sleep | wc -w) -lt {count} ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n+1)); done; \
             sleep 0.5; echo running {count}; cat /proc/reef/mem; kill $(pidof sleep) $(pidof bash); wait; sleep 0.3"
        )
    };
    // On core 0: `/proc/reef/mem` tells the frames of the instance that makes it, the file
    // service's.
    let script =
        format!("echo idle; cat /proc/reef/mem; {}; {}; echo after; cat /proc/reef/mem; /bin/ps", start(1), start(10));
    let mut m = machine(2, &exec(&script));
    m.timeout = std::time::Duration::from_secs(120);
    m.shares = vec![Share { directory: tree.to_path_buf(), mount_point: "/debian".into() }];
    list.push(Integration {
        name: NAMES[3].into(),
        machine: m,
        expected_status: 0,
        check: Box::new(|serial| {
            printed_in_order(
                serial,
                &["idle", "running 1", "running 10", "after", "file pages shared 0 (0 mappings)"],
            )?;
            nothing_leaked(serial, 2)?;
            // Core 0's line of each `/proc/reef/mem`: free frames, shared pages, their mappings.
            let readings: Vec<(u64, u64, u64)> = serial
                .lines()
                .filter(|line| line.starts_with("core 0 ") && line.contains("free frames"))
                .filter_map(|line| {
                    let number_after = |label: &str| {
                        let rest = &line[line.find(label)? + label.len()..];
                        rest.trim_start_matches(['(', ' ']).split(['/', ' ', ')']).next()?.parse::<u64>().ok()
                    };
                    let shared = &line[line.find("file pages shared")? + "file pages shared".len()..];
                    let mut words = shared.split_whitespace().map(|word| word.trim_matches(['(', ')', ',']));
                    let (pages, mappings) = (words.next()?.parse().ok()?, words.next()?.parse().ok()?);
                    Some((number_after("free frames")?, pages, mappings))
                })
                .collect();
            let [idle, one, ten, _after] = readings[..] else {
                return Err(format!("expected four readings of core 0's memory, got {readings:?}"));
            };
            let (used_one, used_ten) = (idle.0.saturating_sub(one.0), idle.0.saturating_sub(ten.0));
            println!(
                "xtask: one Debian bash (and its sleep) holds {used_one} frames, ten hold {used_ten} ({:.2}x one, \
                 against 10x without sharing); {} file pages shared by {} mappings",
                used_ten as f64 / used_one.max(1) as f64,
                ten.1,
                ten.2
            );
            if ten.1 == 0 || ten.2 < 10 * ten.1 {
                return Err(format!("ten processes should map each shared page about ten times: {ten:?}"));
            }
            // Each process has its own stack, heap, page tables and written pages; bash's and
            // sleep's read-only segments, libc and the other libraries are shared: ten hold
            // far less than ten times one (2.25 times when measured).
            if used_ten * 10 > used_one * 50 {
                return Err(format!(
                    "ten processes hold {used_ten} frames, one holds {used_one}: libraries are not shared"
                ));
            }
            Ok(())
        }),
    });
}
