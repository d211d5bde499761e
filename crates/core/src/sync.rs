//! Locks shared between threads and tasks.

use std::sync::{Mutex, MutexGuard};

/// The lock of `m`, also when a thread panicked while holding it: what it guards is plain data,
/// left as the panicking thread wrote it, and one panic must not stop every later user.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
