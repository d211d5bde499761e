//! The children `new` owns, and the strays it reaps.
//!
//! Descendants that escape the process group. On Linux `new` makes itself a child subreaper, so
//! that a process whose parent dies is re-parented to `new` rather than to init: after a command
//! ends, every child of `new` that `new` did not start itself is such an escapee, and is killed
//! (its own children then come to `new` in turn, and go the same way). Elsewhere only the process
//! group is killed; the docs say so (tools, permissions and the sandbox).

use std::collections::HashSet;
#[cfg(all(not(windows), not(target_os = "macos")))]
use std::fs;
use std::io;
#[cfg(all(not(windows), not(target_os = "macos")))]
use std::process;
#[cfg(all(not(windows), not(target_os = "macos")))]
use std::ptr;
use std::sync::{Mutex, Once};
#[cfg(all(not(windows), not(target_os = "macos")))]
use std::thread;
#[cfg(all(not(windows), not(target_os = "macos")))]
use std::time::Duration;
use tokio::process::Child;
use tokio::process::Command;

/// Children `new` started on purpose and still owns (a running command; later, servers).
/// Spawning and sweeping both hold it, so a sweep never mistakes a child being born for a
/// stray.
static OWN: Mutex<Option<HashSet<i32>>> = Mutex::new(None);
static SUBREAPER: Once = Once::new();

/// Spawns a child of our own: becomes a subreaper first (once), and records the child.
pub fn spawn_own(cmd: &mut Command) -> io::Result<Child> {
    SUBREAPER.call_once(|| {
        #[cfg(target_os = "linux")]
        // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes an integer flag; no memory involved.
        unsafe {
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        }
    });
    let mut own = OWN.lock().unwrap_or_else(|e| e.into_inner());
    let child = cmd.spawn()?;
    if let Some(pid) = child.id() {
        own.get_or_insert_with(HashSet::new).insert(pid as i32);
    }
    Ok(child)
}

/// Forgets `pid` and reaps, in one pass, the strays there are now.
pub fn sweep_once(pid: i32) {
    let mut own = OWN.lock().unwrap_or_else(|e| e.into_inner());
    own.get_or_insert_with(HashSet::new).remove(&pid);
    #[cfg(target_os = "linux")]
    for stray in children_of(process::id() as i32)
        .into_iter()
        .filter(|c| *c != pid && own.as_ref().is_none_or(|o| !o.contains(c)))
    {
        // SAFETY: signals and reaps a child of this process; no memory involved.
        unsafe {
            libc::kill(stray, libc::SIGKILL);
            libc::waitpid(stray, ptr::null_mut(), 0);
        }
    }
}

/// Forgets `pid` (it ended) and kills every escaped descendant.
pub fn sweep(pid: i32) {
    OWN.lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashSet::new)
        .remove(&pid);
    #[cfg(target_os = "linux")]
    for round in 0..40 {
        let found = {
            let own = OWN.lock().unwrap_or_else(|e| e.into_inner());
            let strays: Vec<i32> = children_of(process::id() as i32)
                .into_iter()
                .filter(|c| *c != pid && own.as_ref().is_none_or(|o| !o.contains(c)))
                .collect();
            for stray in &strays {
                // SAFETY: signals and reaps a child of this process; no memory involved.
                unsafe {
                    libc::kill(*stray, libc::SIGKILL);
                    libc::waitpid(*stray, ptr::null_mut(), 0);
                }
            }
            !strays.is_empty()
        };
        if !found && round > 0 {
            break;
        }
        // One re-parented a moment later (its parent was still dying) is found next round.
        thread::sleep(Duration::from_millis(if found { 2 } else { 20 }));
    }
}

/// The pids whose parent is `parent`, from /proc.
#[cfg(target_os = "linux")]
fn children_of(parent: i32) -> Vec<i32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    // `pid (comm) state ppid …`; comm may hold spaces and parentheses.
                    let after = &stat[stat.rfind(')')? + 1..];
                    after.split_whitespace().nth(1)?.parse::<i32>().ok()
                })
                == Some(parent)
        })
        .collect()
}

/// The child `cmd` starts gets SIGTERM when `new` ends, even when `new` is killed and cannot end
/// it (Linux; elsewhere nothing).
pub fn end_with_parent(cmd: &mut Command) {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cmd;
}

/// The effective user ID of `new` (Unix).
#[cfg(unix)]
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}
