//! The watcher on Linux: what `new __watch PARENT PROGRAM ARGS…` does for a program that runs
//! outside the sandbox (a user's own hook or MCP server, a command the user let out of the
//! sandbox, everything when the sandbox is off). It starts PROGRAM as its child, in its own
//! process group (the one the caller made for the watcher), and waits for it, ending the same way.
//! If `new` dies first, even by SIGKILL, the kernel tells the watcher (a parent-death signal), and
//! the watcher ends PROGRAM's process group and every process that left it (a child subreaper
//! adopts those whose parents died): nothing it started outlives `new`. What PROGRAM leaves
//! running after it ends normally is left alone, as without the watcher.

use std::ffi::OsString;
use std::fs;
use std::mem;
use std::os::unix::process::ExitStatusExt;
use std::process;
use std::process::Command;
use std::process::ExitStatus;
use std::ptr;
use std::thread;
use std::time::Duration;

/// The exit code of a watcher that could not start PROGRAM (as a shell says for a missing one).
const CANNOT_START: i32 = 127;

/// Runs the watcher; never returns. `args`: the pid of `new`, then the program and its arguments.
pub fn main(args: Vec<OsString>) -> ! {
    use std::os::unix::process::CommandExt;
    let mut args = args.into_iter();
    let parent: libc::pid_t = args
        .next()
        .and_then(|p| p.to_str().and_then(|p| p.parse().ok()))
        .unwrap_or(0);
    let Some(program) = args.next() else {
        eprintln!("new: __watch needs a program");
        process::exit(CANNOT_START);
    };
    // The parent's death and a child's end are waited for as blocked signals (no handler, no
    // race): the parent-death signal is asked for once they are blocked.
    // SAFETY: plain signal-set calls on a local set; prctl takes integer arguments.
    let signals = unsafe {
        let mut set: libc::sigset_t = mem::zeroed();
        libc::sigemptyset(&mut set);
        // What is sent to the whole group (a clean-up's SIGTERM, a SIGINT, a SIGHUP) is for
        // PROGRAM: the watcher waits to see how PROGRAM takes it, and ends the same way (so it
        // reaps PROGRAM, and no zombie is left to a parent that never waits for it).
        for signal in [
            libc::SIGUSR1,
            libc::SIGCHLD,
            libc::SIGTERM,
            libc::SIGINT,
            libc::SIGHUP,
            libc::SIGQUIT,
        ] {
            libc::sigaddset(&mut set, signal);
        }
        libc::sigprocmask(libc::SIG_BLOCK, &set, ptr::null_mut());
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGUSR1);
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        set
    };
    let mut command = Command::new(&program);
    command.args(args);
    // SAFETY: between fork and exec of this single-threaded watcher, only sigprocmask (async-
    // signal-safe) and prctl: PROGRAM starts with no signal blocked.
    unsafe {
        command.pre_exec(|| {
            let mut none: libc::sigset_t = mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::sigprocmask(libc::SIG_SETMASK, &none, ptr::null_mut());
            // A watcher killed outright (SIGKILL to it alone) takes PROGRAM with it.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            eprintln!("new: cannot start {}: {e}", program.to_string_lossy());
            process::exit(CANNOT_START);
        }
    };
    let pid = child.id() as libc::pid_t;
    let second = libc::timespec {
        tv_sec: 1,
        tv_nsec: 0,
    };
    loop {
        // Every child that ended is reaped (PROGRAM's end is ours).
        loop {
            let mut status = 0;
            // SAFETY: reaps a child of this process without waiting.
            let rc = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if rc == pid {
                end_as(ExitStatus::from_raw(status));
            }
            if rc <= 0 {
                break;
            }
        }
        // `new` is gone (also if it died before the parent-death signal was asked for, or the
        // signal came for the end of the thread that started us, which is not `new`'s end):
        // looked at on every signal and at least once a second.
        // SAFETY: getppid has no preconditions.
        if unsafe { libc::getppid() } != parent {
            end_everything();
        }
        // SAFETY: waits for one of the blocked signals, at most a second.
        unsafe { libc::sigtimedwait(&signals, ptr::null_mut(), &second) };
    }
}

/// Ends every process of this watcher's process group and every process adopted (or still a
/// child), pass after pass until none is left, then the watcher.
fn end_everything() -> ! {
    // SAFETY: getpid/getpgrp have no preconditions; kill and waitpid take integers. The group is
    // the one the caller made for this watcher, so it holds only what PROGRAM started.
    unsafe {
        let me = libc::getpid();
        let group = libc::getpgrp();
        for _ in 0..100 {
            let left = left_of(me, (group == me).then_some(group));
            if left.is_empty() {
                break;
            }
            for p in left {
                // Through a pidfd, checked again once open: a pid read from /proc may have ended
                // and been reused by then; the pidfd holds the process that was checked.
                let fd = libc::syscall(libc::SYS_pidfd_open, p, 0);
                if fd < 0 {
                    continue;
                }
                let fd = fd as libc::c_int;
                if belongs(p, me, (group == me).then_some(group)) {
                    libc::syscall(
                        libc::SYS_pidfd_send_signal,
                        fd,
                        libc::SIGKILL,
                        ptr::null::<libc::siginfo_t>(),
                        0,
                    );
                }
                libc::close(fd);
            }
            // Reaped as they end (what they started comes to this subreaper meanwhile).
            let mut status = 0;
            while libc::waitpid(-1, &mut status, libc::WNOHANG) > 0 {}
            thread::sleep(Duration::from_millis(5));
        }
        libc::_exit(137)
    }
}

/// The processes, other than `me`, whose parent is `me` or that are in `group`, from `/proc`.
fn left_of(me: libc::pid_t, group: Option<libc::pid_t>) -> Vec<libc::pid_t> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|entry| entry.file_name().to_str().and_then(|n| n.parse().ok()))
        .filter(|&p| p != me && belongs(p, me, group))
        .collect()
}

/// Whether process `p`'s parent is `me` or it is in `group` (a zombie of ours still counts until
/// it is reaped), from its `/proc` entry.
fn belongs(p: libc::pid_t, me: libc::pid_t, group: Option<libc::pid_t>) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{p}/stat")) else {
        return false;
    };
    // `pid (comm) state ppid pgrp …`: comm may hold spaces and parentheses, so after the last
    // `)`.
    let mut fields = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace())
        .into_iter()
        .flatten()
        .skip(1);
    let ppid = fields.next().and_then(|v| v.parse::<libc::pid_t>().ok());
    let pgrp = fields.next().and_then(|v| v.parse::<libc::pid_t>().ok());
    ppid == Some(me) || (group.is_some() && pgrp == group)
}

/// Ends the way PROGRAM ended: its exit code, or the signal that ended it.
fn end_as(status: ExitStatus) -> ! {
    if let Some(signal) = status.signal() {
        // SAFETY: restores the default action of that signal, unblocks it and raises it at
        // ourselves, so the caller sees the same end; `_exit` if that did not end us.
        unsafe {
            // No core of the watcher: the program's crash is the program's.
            let none = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &none);
            libc::signal(signal, libc::SIG_DFL);
            let mut set: libc::sigset_t = mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, signal);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, ptr::null_mut());
            libc::raise(signal);
            libc::_exit(128 + signal)
        }
    }
    process::exit(status.code().unwrap_or(CANNOT_START))
}
