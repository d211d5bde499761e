//! Knowing that nothing changed without looking: an inotify watch on every folder a walk read,
//! added before the folder is read, so a change is either seen by the walk or queued as an event.
//! A snapshot finds the queue empty: the folder is as the last walk left it, and the walk is not
//! repeated (the cost of a round that changed nothing does not grow with the folder).
//!
//! What inotify does not report is not seen: writes through a shared memory map, changes made
//! through a hard link from outside the folder, and changes on network file systems made by
//! another machine. `checkpoints.watch: false` walks every time.

use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::inotify::{self, CreateFlags, WatchFlags};
use rustix::io;
use rustix::io::Errno;

#[derive(Debug)]
pub(super) struct Watch {
    fd: OwnedFd,
    /// A watch could not be added (the per-user limit): what is not watched could change
    /// unseen, so every snapshot walks until the next walk watches everything.
    incomplete: AtomicBool,
}

impl Watch {
    pub(super) fn new() -> Option<Watch> {
        let fd = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC).ok()?;
        Some(Watch {
            fd,
            incomplete: AtomicBool::new(false),
        })
    }

    /// Watches a folder the walk is about to read.
    pub(super) fn add(&self, folder: &Path) {
        let flags = WatchFlags::MODIFY
            | WatchFlags::ATTRIB
            | WatchFlags::CLOSE_WRITE
            | WatchFlags::CREATE
            | WatchFlags::DELETE
            | WatchFlags::DELETE_SELF
            | WatchFlags::MOVE_SELF
            | WatchFlags::MOVED_FROM
            | WatchFlags::MOVED_TO
            | WatchFlags::DONT_FOLLOW
            | WatchFlags::ONLYDIR
            | WatchFlags::EXCL_UNLINK;
        if inotify::add_watch(&self.fd, folder, flags).is_err() {
            self.incomplete.store(true, Ordering::SeqCst);
        }
    }

    /// Before a walk: forgets what happened up to now (the walk will see it) and whether the
    /// last walk's watches were complete.
    pub(super) fn reset(&self) {
        self.drain();
        self.incomplete.store(false, Ordering::SeqCst);
    }

    /// Whether anything under the watched folders may have changed since the last `reset`
    /// (events waiting, a queue that overflowed, a watch that could not be added). Reads what
    /// is waiting.
    pub(super) fn changed(&self) -> bool {
        let events = self.drain();
        events || self.incomplete.load(Ordering::SeqCst)
    }

    /// Reads every waiting event; whether there was one.
    fn drain(&self) -> bool {
        let mut buffer = [0u8; 4096];
        let mut any = false;
        loop {
            match io::read(&self.fd, &mut buffer) {
                Ok(0) => return any,
                Ok(_) => any = true,
                // Nothing more waiting (or the descriptor failed: treated as "changed" below
                // by `Checkpoints`, which never trusts a watch it could not read).
                Err(Errno::AGAIN) => return any,
                Err(Errno::INTR) => continue,
                Err(_) => {
                    self.incomplete.store(true, Ordering::SeqCst);
                    return true;
                }
            }
        }
    }
}
