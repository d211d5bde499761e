//! The sandbox helper on Linux: what `new __sandbox SPEC PROGRAM ARGS…` does before it becomes
//! PROGRAM. It runs in a fresh process (the `new` binary started again), so nothing here happens
//! between a fork and an exec of a multi-threaded program.
//!
//! In order: a new user namespace (the same uid and gid inside) with a private mount namespace and,
//! unless the network is allowed, a network namespace of its own with only loopback; secret places
//! are covered (an empty read-only tmpfs over a folder, `/dev/null` over a file); protected paths
//! inside the writable folders are bind-mounted read-only onto themselves; `/dev/shm` gets a
//! private tmpfs; everything but the writable folders and devices becomes a read-only mount (so
//! modes, times and attributes outside cannot change); then Landlock allows reading and running
//! everywhere and writing only in the writable folders and a few devices, keeps signals and
//! abstract Unix sockets inside the sandbox, and sets `no_new_privs`; a seccomp filter refuses
//! what none of that covers; every capability is dropped. Landlock also forbids mounting from
//! here on, so nothing inside can undo the mounts. All of it is inherited by every child, for
//! good. The command itself runs under a small init that is not dumpable, in a Landlock domain
//! of its own, so it can neither trace nor signal that init.
//!
//! With a domain allow list, the helper stays as a small forwarder: it listens on 127.0.0.1 inside
//! the sandbox's network namespace and relays each connection to `new`'s proxy through a Unix
//! socket (a file, which reaches across network namespaces), while its child runs PROGRAM.

use std::ffi::{CString, OsString};
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, RestrictionStatus, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};

use super::{OsCause, SetupError, Spec};
use std::env;
use std::fs;
use std::fs::OpenOptions;
use std::io;
use std::io::ErrorKind;
use std::mem;
use std::net::Shutdown;
use std::net::TcpListener;
use std::net::TcpStream;
use std::os::fd::OwnedFd;
#[cfg(unix)]
use std::os::unix::net::UnixStream;
use std::process;
use std::process::Command;
use std::ptr;
use std::thread;

/// The Landlock ABI whose rights are handled: fixed, so the sandbox means the same on every
/// kernel that has it (older kernels enforce what they know).
const LANDLOCK_ABI: ABI = ABI::V7;

/// The exit code of a helper that could not set the sandbox up.
pub const SETUP_FAILED: i32 = 125;

/// Runs the helper; never returns. `args`: the spec as JSON, then the program and its arguments.
pub fn main(mut args: Vec<OsString>) -> ! {
    let spec = match read_spec(&mut args) {
        Ok(spec) => spec,
        Err(e) => fail(&e, false),
    };
    match run(&spec, args) {
        Ok(never) => match never {},
        Err(e) => fail(&e, spec.probe),
    }
}

/// Says why the sandbox could not be set up, and ends. A probe's report is read by `new` (as
/// JSON, so that the front end can say it in the user's language); any other is for the person
/// who reads the command's output.
fn fail(e: &SetupError, probe: bool) -> ! {
    let line = match serde_json::to_string(e) {
        Ok(json) if probe => json,
        _ => format!("new: the sandbox could not be set up: {e}"),
    };
    let _ = writeln!(io::stderr(), "{line}");
    process::exit(SETUP_FAILED)
}

enum Never {}

/// The spec, the first argument.
fn read_spec(args: &mut Vec<OsString>) -> Result<Spec, SetupError> {
    if args.is_empty() {
        return Err(SetupError::NoSpec);
    }
    let spec_text = args.remove(0);
    serde_json::from_slice(spec_text.as_bytes()).map_err(|e| SetupError::BadSpec {
        cause: e.to_string(),
    })
}

fn run(spec: &Spec, mut args: Vec<OsString>) -> Result<Never, SetupError> {
    let (listener, private_pts) = enter(spec)?;
    if spec.probe {
        confine(spec, private_pts, false)?;
        process::exit(0);
    }
    if args.is_empty() {
        return Err(SetupError::NoProgram);
    }
    let program = args.remove(0);
    // The program runs as the first process of a PID namespace of its own: when it ends, or
    // when this helper dies (it dies with the thread of `new` that started it, even by
    // `kill -9`), the kernel ends everything it started, also what left its process group.
    // SAFETY: the helper has one thread here; the child only runs this code before exec.
    let child = unsafe { libc::fork() };
    if child < 0 {
        return Err(SetupError::Fork {
            cause: OsCause::last(),
        });
    }
    if child == 0 {
        let error = (|| -> Result<Never, SetupError> {
            // Its own /proc (best effort: a host whose /proc is partly covered keeps the old).
            let _ = mount(
                Some("proc"),
                "/proc",
                Some("proc"),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                None,
            );
            confine(spec, private_pts, spec.block_unix_sockets)?;
            // This process is the namespace's first: the kernel ignores a parent-death SIGKILL
            // for it, so it stays as a small init of ours that ends (and so ends the namespace)
            // when the helper dies, and otherwise waits for the command.
            init_parent_death();
            // Nothing inside may trace the init (and so swallow that signal and keep the
            // namespace alive after `new` died): it is not dumpable, which lets only a process
            // with CAP_SYS_PTRACE here trace it or read its memory, and the command gets a
            // Landlock domain of its own below it (a process may trace only inside its domain).
            untraceable()?;
            // SAFETY: one thread; the child only execs.
            let command_pid = unsafe { libc::fork() };
            if command_pid == 0 {
                command_domain()?;
                let mut command = Command::new(&program);
                command.args(&args);
                return Err(SetupError::Exec {
                    program: program.to_string_lossy().into_owned(),
                    cause: command.exec().into(),
                });
            }
            if command_pid < 0 {
                return Err(SetupError::Fork {
                    cause: OsCause::last(),
                });
            }
            init_wait(command_pid)
        })();
        let Err(e) = error;
        let _ = writeln!(io::stderr(), "new: the sandbox could not be set up: {e}");
        // SAFETY: ends the child without running the parent's exit handlers.
        unsafe { libc::_exit(SETUP_FAILED) };
    }
    // The helper itself runs only this code (the wait and the relay) and is not confined: a
    // Landlock domain of its own would keep its death's signal from reaching the init inside.
    // It dies with the thread of `new` that started it.
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    wait_and_relay(child, listener)
}

extern "C" fn init_exit(_: libc::c_int) {
    // SAFETY: async-signal-safe; ends the namespace's init, so the kernel ends the rest.
    unsafe { libc::_exit(137) };
}

/// The namespace's init ends when its parent, the helper, dies: a handled signal is delivered
/// to an init where a default SIGKILL is not.
fn init_parent_death() {
    // SAFETY: installs a handler that only calls `_exit`, then asks for it at the parent's death.
    unsafe {
        libc::signal(libc::SIGUSR1, init_exit as *const () as libc::sighandler_t);
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGUSR1);
    }
}

/// Makes this process not dumpable: tracing it, reading or writing its memory (`ptrace`,
/// `process_vm_readv`, `/proc/PID/mem`) then needs CAP_SYS_PTRACE, which nothing inside has.
/// A program it starts is dumpable again (exec resets it).
fn untraceable() -> Result<(), SetupError> {
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
        return Err(SetupError::Untraceable {
            cause: OsCause::last(),
        });
    }
    Ok(())
}

/// A Landlock domain of the command's own, nested in the sandbox's: it restricts nothing more
/// than signals and abstract sockets to its own, but Landlock lets a process trace only
/// processes of its domain or of domains nested in it, so the command and what it starts can
/// trace each other (a debugger works) and never the init above them.
fn command_domain() -> Result<(), SetupError> {
    let fail = |e: landlock::RulesetError| SetupError::Landlock {
        cause: e.to_string(),
    };
    let status = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .scope(Scope::from_all(LANDLOCK_ABI))
        .map_err(fail)?
        .create()
        .map_err(fail)?
        .restrict_self()
        .map_err(fail)?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err(SetupError::LandlockUnavailable);
    }
    Ok(())
}

/// The init's wait: reaps every process of the namespace handed to it until the command ends,
/// then ends the same way (its end ends the namespace).
fn init_wait(command: libc::pid_t) -> Result<Never, SetupError> {
    loop {
        let mut status = 0;
        // SAFETY: waits for a child of this process.
        let rc = unsafe { libc::waitpid(-1, &mut status, 0) };
        if rc == command {
            // SAFETY: ends without the parent's exit handlers.
            unsafe {
                if libc::WIFSIGNALED(status) {
                    libc::_exit(128 + libc::WTERMSIG(status));
                }
                libc::_exit(libc::WEXITSTATUS(status));
            }
        }
        if rc < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return Err(SetupError::Wait {
                cause: OsCause::last(),
            });
        }
    }
}

/// Landlock, the seccomp filter and no capabilities, then the working folder entered again.
fn confine(spec: &Spec, private_pts: bool, block_unix_sockets: bool) -> Result<(), SetupError> {
    landlock(spec, private_pts)?;
    seccomp(block_unix_sockets)?;
    drop_capabilities()?;
    env::set_current_dir(&spec.cwd).map_err(|e| SetupError::EnterFolder {
        path: spec.cwd.clone(),
        cause: e.into(),
    })
}

/// Sets up namespaces, mounts and Landlock for this process. Returns the forwarder's listener
/// when connections go through the proxy.
type Listener = Option<(TcpListener, PathBuf)>;

fn enter(spec: &Spec) -> Result<(Listener, bool), SetupError> {
    // SAFETY: getuid/getgid cannot fail and touch no memory.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let mut flags = libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWPID;
    if spec.isolate_network {
        flags |= libc::CLONE_NEWNET;
    }
    // SAFETY: unshare takes flags only.
    if unsafe { libc::unshare(flags) } != 0 {
        return Err(SetupError::Unshare {
            cause: OsCause::last(),
        });
    }
    write_proc("/proc/self/setgroups", "deny")?;
    write_proc("/proc/self/uid_map", &format!("{uid} {uid} 1"))?;
    write_proc("/proc/self/gid_map", &format!("{gid} {gid} 1"))?;
    mount(None, "/", None, libc::MS_REC | libc::MS_PRIVATE, None)
        .map_err(|e| SetupError::PrivateMounts { cause: e.into() })?;
    // No controlling terminal: nothing inside can type into the user's (TIOCSTI) or read it.
    detach_terminal();

    // The folders above what is covered or kept read-only become mount points of their own
    // (bound onto themselves, still writable): a mount point cannot be renamed or removed, so a
    // command cannot move `scripts/` aside and put another `scripts/hook.sh` in its place, nor
    // rename `~/.config` to read the `gcloud` folder a later command would no longer cover.
    // A path gone since the spec was made (another session's folder, removed as it ended) has
    // nothing left to cover or keep.
    let gone = |e: &io::Error| e.kind() == ErrorKind::NotFound;
    for path in &spec.pinned {
        pin(path)
            .or_else(|e| if gone(&e) { Ok(()) } else { Err(e) })
            .map_err(|e| SetupError::Pin {
                path: path.clone(),
                cause: e.into(),
            })?;
    }
    for path in &spec.hidden {
        hide(path)
            .or_else(|e| if gone(&e) { Ok(()) } else { Err(e) })
            .map_err(|e| SetupError::Hide {
                path: path.clone(),
                cause: e.into(),
            })?;
    }
    if Path::new("/dev/shm").is_dir() {
        // Shared memory stays inside the sandbox (Python's multiprocessing needs it).
        mount(
            Some("tmpfs"),
            "/dev/shm",
            Some("tmpfs"),
            libc::MS_NOSUID | libc::MS_NODEV,
            Some("mode=1777,size=512m"),
        )
        .map_err(|e| SetupError::SharedMemory { cause: e.into() })?;
    }
    // Terminals of its own only: a new devpts instance, so the user's other terminals
    // (`/dev/pts/N`) are not there to read or write.
    let private_pts = private_devpts();
    for path in &spec.read_only {
        read_only(path)
            .or_else(|e| if gone(&e) { Ok(()) } else { Err(e) })
            .map_err(|e| SetupError::Protect {
                path: path.clone(),
                cause: e.into(),
            })?;
    }
    read_only_outside(&writable_places(spec, private_pts))?;
    let listener = if spec.isolate_network {
        loopback_up().map_err(|e| SetupError::Loopback { cause: e.into() })?;
        match &spec.proxy_socket {
            Some(socket) => {
                let listening = |e: io::Error| SetupError::ProxyListener { cause: e.into() };
                let listener = TcpListener::bind(("127.0.0.1", 0)).map_err(listening)?;
                let port = listener.local_addr().map_err(listening)?.port();
                let url = format!("http://127.0.0.1:{port}");
                for name in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
                    // SAFETY: the helper is single-threaded here.
                    unsafe { env::set_var(name, &url) };
                }
                for name in ["NO_PROXY", "no_proxy"] {
                    // SAFETY: as above.
                    unsafe { env::set_var(name, "localhost,127.0.0.1,::1") };
                }
                Some((listener, socket.clone()))
            }
            None => None,
        }
    } else {
        None
    };
    Ok((listener, private_pts))
}

fn write_proc(path: &str, text: &str) -> Result<(), SetupError> {
    fs::write(path, text).map_err(|e| SetupError::WriteProc {
        path: path.to_string(),
        cause: e.into(),
    })
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(io::Error::other)
}

fn mount(
    source: Option<&str>,
    target: impl AsRef<Path>,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> io::Result<()> {
    let source = source.map(CString::new).transpose()?;
    let fstype = fstype.map(CString::new).transpose()?;
    let data = data.map(CString::new).transpose()?;
    let target = c_path(target.as_ref())?;
    let ptr = |c: &Option<CString>| c.as_ref().map_or(ptr::null(), |c| c.as_ptr());
    // SAFETY: every pointer is a NUL-terminated string that lives across the call, or null.
    let rc = unsafe {
        libc::mount(
            ptr(&source),
            target.as_ptr(),
            ptr(&fstype),
            flags,
            ptr(&data).cast(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Opens `path` as a handle on exactly that place: no component may be a symlink (the paths are
/// canonical; one that became a link since was swapped by someone), so a mount through the
/// handle lands where it was meant to.
fn open_exact(path: &Path) -> io::Result<OwnedFd> {
    use std::os::fd::FromRawFd;
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }
    const RESOLVE_NO_SYMLINKS: u64 = 0x04;
    let c = c_path(path)?;
    let how = OpenHow {
        flags: (libc::O_PATH | libc::O_CLOEXEC | libc::O_NOFOLLOW) as u64,
        mode: 0,
        resolve: RESOLVE_NO_SYMLINKS,
    };
    // SAFETY: openat2 with a NUL-terminated path and an open_how of the size given.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            c.as_ptr(),
            &how as *const OpenHow,
            mem::size_of::<OpenHow>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor just opened and owned here.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// The `/proc/self/fd/N` name of a handle, for `mount`.
fn fd_path(fd: &OwnedFd) -> PathBuf {
    use std::os::fd::AsRawFd;
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// Binds a folder onto itself: it becomes a mount point, which cannot be renamed or removed.
fn pin(path: &Path) -> io::Result<()> {
    let fd = open_exact(path)?;
    let at = fd_path(&fd);
    let at = at.to_str().expect("ASCII");
    mount(Some(at), at, None, libc::MS_BIND | libc::MS_REC, None)
}

/// Binds `source` onto `target`, then makes the new mount read-only. A remount inside a user
/// namespace must keep the flags the kernel locked on the original mount (nosuid, nodev, noexec,
/// the atime ones), so they are read and kept.
fn bind_read_only(source: &Path, target: &Path) -> io::Result<()> {
    let (source_fd, target_fd) = (open_exact(source)?, open_exact(target)?);
    let source = fd_path(&source_fd);
    mount(
        Some(source.to_str().expect("ASCII")),
        fd_path(&target_fd),
        None,
        libc::MS_BIND | libc::MS_REC,
        None,
    )?;
    // The new mount is on top now: a fresh handle names it (the old one, what lies beneath).
    let mounted = open_exact(target)?;
    let locked = mount_flags(&fd_path(&mounted))?;
    mount(
        None,
        fd_path(&mounted),
        None,
        libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | locked,
        None,
    )
}

/// The flags of the mount `path` is on that a remount must keep.
fn mount_flags(path: &Path) -> io::Result<libc::c_ulong> {
    let c = c_path(path)?;
    // SAFETY: statvfs fills the struct it is given; the path is NUL-terminated.
    let mut st: libc::statvfs = unsafe { mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut flags = 0;
    for (st_flag, ms_flag) in [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ] {
        if st.f_flag & st_flag != 0 {
            flags |= ms_flag;
        }
    }
    Ok(flags)
}

/// Covers a secret place: an empty read-only tmpfs over a folder, `/dev/null` over anything else.
fn hide(path: &Path) -> io::Result<()> {
    let fd = open_exact(path)?;
    let meta = fs::metadata(fd_path(&fd))?;
    if meta.is_dir() {
        mount(
            Some("tmpfs"),
            fd_path(&fd),
            Some("tmpfs"),
            libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            Some("size=4k,mode=0555"),
        )
    } else {
        bind_read_only(Path::new("/dev/null"), path)
    }
}

fn read_only(path: &Path) -> io::Result<()> {
    bind_read_only(path, path)
}

/// Gives up the controlling terminal, if the process has one.
fn detach_terminal() {
    // SAFETY: opens /dev/tty (failing when there is no controlling terminal), detaches, closes.
    unsafe {
        let fd = libc::open(
            c"/dev/tty".as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        );
        if fd >= 0 {
            libc::ioctl(fd, libc::TIOCNOTTY);
            libc::close(fd);
        }
    }
}

/// Mounts a devpts of its own on `/dev/pts` and points `/dev/ptmx` at it; false when that
/// could not be done (then `/dev/pts` is left read-only).
fn private_devpts() -> bool {
    if !Path::new("/dev/pts").is_dir() {
        return false;
    }
    let mounted = mount(
        Some("devpts"),
        "/dev/pts",
        Some("devpts"),
        libc::MS_NOSUID | libc::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=0620"),
    );
    mounted.is_ok()
        && mount(
            Some("/dev/pts/ptmx"),
            "/dev/ptmx",
            None,
            libc::MS_BIND,
            None,
        )
        .is_ok()
}

/// Brings the new network namespace's loopback up, so servers a command starts for itself (a
/// test suite's) can be reached.
fn loopback_up() -> io::Result<()> {
    // SAFETY: a plain datagram socket, closed below; the ifreq is zeroed and then named.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut req: libc::ifreq = mem::zeroed();
        for (i, b) in b"lo\0".iter().enumerate() {
            req.ifr_name[i] = *b as libc::c_char;
        }
        let mut rc = libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req);
        if rc == 0 {
            req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
            rc = libc::ioctl(fd, libc::SIOCSIFFLAGS, &req);
        }
        let err = io::Error::last_os_error();
        libc::close(fd);
        if rc == 0 { Ok(()) } else { Err(err) }
    }
}

/// The writable folders and devices that exist: what Landlock lets be written, and what stays
/// writable when everything else is made read-only.
fn writable_places(spec: &Spec, private_pts: bool) -> Vec<PathBuf> {
    spec.writable
        .iter()
        .chain(&spec.devices)
        // Without a devpts of its own, the terminals there are the user's: not writable.
        .filter(|p| private_pts || !p.starts_with("/dev/pts"))
        .filter(|p| p.exists())
        .cloned()
        .collect()
}

/// The places of `places` that are not inside another one, each once.
fn outermost(places: &[PathBuf]) -> Vec<&Path> {
    let mut out: Vec<&Path> = Vec::new();
    for place in places {
        let inside_another = places
            .iter()
            .any(|other| other != place && place.starts_with(other));
        if !inside_another && !out.contains(&place.as_path()) {
            out.push(place);
        }
    }
    out
}

/// Makes every mount read-only except the writable places, as `bwrap --ro-bind / /` does:
/// Landlock refuses writing a file outside them but not changing its mode, owner, times or
/// extended attributes (`chmod 4755`, `touch -d`, `setfattr`), which a read-only mount refuses
/// too (EROFS). Each writable place is cloned first, with what is mounted inside it (its
/// read-only and covered paths, its pins), then the whole tree is made read-only, and each clone
/// is mounted back where it was.
fn read_only_outside(places: &[PathBuf]) -> Result<(), SetupError> {
    let places = outermost(places);
    if places.iter().any(|p| p.parent().is_none()) {
        // `/` itself is writable: there is no outside.
        return Ok(());
    }
    fn keep(path: &Path) -> impl FnOnce(io::Error) -> SetupError + '_ {
        move |e| SetupError::KeepWritable {
            path: path.to_path_buf(),
            cause: e.into(),
        }
    }
    let mut clones = Vec::with_capacity(places.len());
    for place in places {
        let target = open_exact(place).map_err(keep(place))?;
        let clone = clone_tree(&target).map_err(keep(place))?;
        clones.push((place, target, clone));
    }
    set_read_only_recursively(Path::new("/"))
        .map_err(|e| SetupError::ReadOnlyOutside { cause: e.into() })?;
    for (place, target, clone) in clones {
        attach(&clone, &target).map_err(keep(place))?;
    }
    Ok(())
}

/// A detached copy of the mounts at and below `at` (`open_tree` with `OPEN_TREE_CLONE`).
fn clone_tree(at: &OwnedFd) -> io::Result<OwnedFd> {
    use std::os::fd::{AsRawFd, FromRawFd};
    const OPEN_TREE_CLONE: libc::c_uint = 1;
    let flags = OPEN_TREE_CLONE
        | libc::O_CLOEXEC as libc::c_uint
        | libc::AT_RECURSIVE as libc::c_uint
        | libc::AT_EMPTY_PATH as libc::c_uint;
    // SAFETY: open_tree with a descriptor, an empty NUL-terminated path and flags.
    let fd = unsafe { libc::syscall(libc::SYS_open_tree, at.as_raw_fd(), c"".as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor just opened and owned here.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Mounts the detached tree `tree` on the place `target` is a handle on.
fn attach(tree: &OwnedFd, target: &OwnedFd) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x04;
    const MOVE_MOUNT_T_EMPTY_PATH: libc::c_uint = 0x40;
    // SAFETY: move_mount with two descriptors, empty NUL-terminated paths and flags.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            c"".as_ptr(),
            target.as_raw_fd(),
            c"".as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Makes the mount at `path` and every mount below it read-only (`mount_setattr`).
fn set_read_only_recursively(path: &Path) -> io::Result<()> {
    #[repr(C)]
    struct MountAttr {
        attr_set: u64,
        attr_clr: u64,
        propagation: u64,
        userns_fd: u64,
    }
    const MOUNT_ATTR_RDONLY: u64 = 0x01;
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_RDONLY,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    let c = c_path(path)?;
    // SAFETY: mount_setattr with a NUL-terminated path and a mount_attr of the size given.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            c.as_ptr(),
            libc::AT_RECURSIVE as libc::c_uint,
            &attr as *const MountAttr,
            mem::size_of::<MountAttr>(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn landlock(spec: &Spec, private_pts: bool) -> Result<(), SetupError> {
    let all = AccessFs::from_all(LANDLOCK_ABI);
    let read = AccessFs::from_read(LANDLOCK_ABI);
    let fail = |e: landlock::RulesetError| SetupError::Landlock {
        cause: e.to_string(),
    };
    let ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .map_err(fail)?
        .scope(Scope::from_all(LANDLOCK_ABI))
        .map_err(fail)?
        .create()
        .map_err(fail)?
        .add_rules(path_beneath_rules(["/"], read))
        .map_err(fail)?;
    let status: RestrictionStatus = ruleset
        .add_rules(path_beneath_rules(writable_places(spec, private_pts), all))
        .map_err(fail)?
        .restrict_self()
        .map_err(fail)?;
    if status.ruleset == RulesetStatus::NotEnforced || !status.no_new_privs {
        return Err(SetupError::LandlockUnavailable);
    }
    // Below ABI 6 signals and abstract sockets are not scoped: a command could signal `new`
    // and every process of the user. That is no sandbox to claim.
    match status.landlock {
        landlock::LandlockStatus::Available { effective_abi, .. } if effective_abi >= ABI::V6 => {
            Ok(())
        }
        _ => Err(SetupError::LandlockTooOld),
    }
}

/// Drops every capability the new user namespace gave: from the bounding set (so no program run
/// later regains one), the ambient set, and the current sets.
fn drop_capabilities() -> Result<(), SetupError> {
    // SAFETY: prctl and capset take plain integers and a header/data pair that lives across the
    // call.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
        let mut cap = 0;
        while libc::prctl(libc::PR_CAPBSET_READ, cap, 0, 0, 0) >= 0 {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 {
                return Err(SetupError::DropCapability {
                    capability: cap,
                    cause: OsCause::last(),
                });
            }
            cap += 1;
        }
        #[repr(C)]
        struct Header {
            version: u32,
            pid: i32,
        }
        #[repr(C)]
        #[derive(Default, Clone, Copy)]
        struct Data {
            effective: u32,
            permitted: u32,
            inheritable: u32,
        }
        let header = Header {
            version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
            pid: 0,
        };
        let data = [Data::default(); 2];
        if libc::syscall(libc::SYS_capset, &header, data.as_ptr()) != 0 {
            return Err(SetupError::DropCapabilities {
                cause: OsCause::last(),
            });
        }
    }
    Ok(())
}

/// A seccomp filter for what Landlock and the mounts do not cover, refused with EPERM:
/// - sockets of a family other than IP, netlink (what `ip` and `getifaddrs` use) and, when
///   allowed, Unix: a socket file reaches services outside (tmux, ssh-agent, D-Bus) whatever
///   the network namespace, and `AF_VSOCK` the hypervisor's host; a pair of connected Unix
///   sockets (`socketpair`) reaches nothing and stays allowed;
/// - setting the setuid or setgid bit (`chmod`, `fchmod`, `fchmodat`, `fchmodat2`, and a file
///   created by `open`, `openat`, `creat` or `mknod` with them): a command run as root could
///   leave a root program for anyone in WORKDIR;
/// - `ptrace` and `process_vm_readv`/`writev` aimed at process 1, the sandbox's init (which is
///   also kept from them by being not dumpable and by the command's own Landlock domain);
/// - `io_uring` (which could do the above unseen) and the kernel keyrings (shared with the
///   user's session).
///
/// System calls of a foreign architecture get ENOSYS; on x86-64, those of the x32 ABI (bit 30
/// of the number, which the numbers above would not match) get EPERM.
pub fn seccomp(block_unix_sockets: bool) -> Result<(), SetupError> {
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    return Err(SetupError::NoSeccompFilter);
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    {
        let mut f = filter(block_unix_sockets);
        let prog = libc::sock_fprog {
            len: f.len() as u16,
            filter: f.as_mut_ptr(),
        };
        // SAFETY: the program lives across the call; no_new_privs is set (by Landlock) already.
        let rc = unsafe {
            libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &prog as *const libc::sock_fprog,
            )
        };
        if rc != 0 {
            return Err(SetupError::Seccomp {
                cause: OsCause::last(),
            });
        }
        Ok(())
    }
}

/// A classic BPF program for seccomp, written top to bottom: each `when_*` block runs when its
/// test holds and ends in a return; otherwise it is jumped over.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
struct Bpf(Vec<libc::sock_filter>);

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
impl Bpf {
    const ALLOW: u32 = 0x7fff_0000;
    const ERRNO: u32 = 0x0005_0000;

    fn push(&mut self, code: u32, jt: u8, jf: u8, k: u32) {
        self.0.push(libc::sock_filter {
            code: code as u16,
            jt,
            jf,
            k,
        });
    }

    /// Loads the 32-bit word at `offset` of `seccomp_data`.
    fn load(&mut self, offset: u32) {
        self.push(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, offset);
    }

    /// Loads the low half of argument `n` (all the kernel reads of an int, a mode, a pid).
    fn load_arg(&mut self, n: u32) {
        self.load(16 + 8 * n);
    }

    fn allow(&mut self) {
        self.push(libc::BPF_RET | libc::BPF_K, 0, 0, Self::ALLOW);
    }

    fn refuse(&mut self, errno: i32) {
        self.push(
            libc::BPF_RET | libc::BPF_K,
            0,
            0,
            Self::ERRNO | errno as u32,
        );
    }

    /// Runs `block` when the loaded word equals `k`.
    fn when_equal(&mut self, k: u32, block: impl FnOnce(&mut Bpf)) {
        self.when(libc::BPF_JEQ, k, block);
    }

    /// Runs `block` when the loaded word has any bit of `bits`.
    fn when_any_bit(&mut self, bits: u32, block: impl FnOnce(&mut Bpf)) {
        self.when(libc::BPF_JSET, bits, block);
    }

    fn when(&mut self, test: u32, k: u32, block: impl FnOnce(&mut Bpf)) {
        let at = self.0.len();
        self.push(libc::BPF_JMP | test | libc::BPF_K, 0, 0, k);
        block(self);
        let skip = self.0.len() - at - 1;
        self.0[at].jf = u8::try_from(skip).expect("a block of under 256 instructions");
    }
}

/// The program [`seccomp`] installs.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn filter(block_unix_sockets: bool) -> Vec<libc::sock_filter> {
    #[cfg(target_arch = "x86_64")]
    const ARCH: u32 = 0xC000_003E;
    #[cfg(target_arch = "aarch64")]
    const ARCH: u32 = 0xC000_00B7;
    const SET_ID: u32 = libc::S_ISUID | libc::S_ISGID;
    // O_TMPFILE without the O_DIRECTORY it includes, which alone creates nothing.
    const CREATES: u32 = (libc::O_CREAT | (libc::O_TMPFILE & !libc::O_DIRECTORY)) as u32;
    /// fchmodat2 (Linux 6.6) has the same number everywhere, and no name in libc everywhere.
    const SYS_FCHMODAT2: libc::c_long = 452;
    let eperm = libc::EPERM;
    let mut f = Bpf(Vec::new());
    f.load(4); // seccomp_data.arch
    f.push(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, 1, 0, ARCH);
    f.refuse(libc::ENOSYS);
    f.load(0); // seccomp_data.nr
    #[cfg(target_arch = "x86_64")]
    f.when_any_bit(0x4000_0000, |f| f.refuse(eperm));
    for nr in [
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
    ] {
        f.when_equal(nr as u32, |f| f.refuse(eperm));
    }
    f.when_equal(libc::SYS_socket as u32, |f| {
        f.load_arg(0);
        let mut families = vec![libc::AF_INET, libc::AF_INET6, libc::AF_NETLINK];
        if !block_unix_sockets {
            families.push(libc::AF_UNIX);
        }
        for family in families {
            f.when_equal(family as u32, Bpf::allow);
        }
        f.refuse(eperm);
    });
    f.when_equal(libc::SYS_socketpair as u32, |f| {
        f.load_arg(0);
        f.when_equal(libc::AF_UNIX as u32, Bpf::allow);
        f.refuse(eperm);
    });
    // The mode's argument of each call that sets one.
    let mut set_mode = vec![
        (libc::SYS_fchmod, 1),
        (libc::SYS_fchmodat, 2),
        (SYS_FCHMODAT2, 2),
        (libc::SYS_mknodat, 2),
    ];
    #[cfg(target_arch = "x86_64")]
    set_mode.extend([
        (libc::SYS_chmod, 1),
        (libc::SYS_creat, 1),
        (libc::SYS_mknod, 1),
    ]);
    for (nr, mode) in set_mode {
        f.when_equal(nr as u32, |f| {
            f.load_arg(mode);
            f.when_any_bit(SET_ID, |f| f.refuse(eperm));
            f.allow();
        });
    }
    // `open` and `openat` use their mode only when they create a file.
    let mut open = vec![(libc::SYS_openat, 2, 3)];
    #[cfg(target_arch = "x86_64")]
    open.push((libc::SYS_open, 1, 2));
    for (nr, flags, mode) in open {
        f.when_equal(nr as u32, |f| {
            f.load_arg(flags);
            f.when_any_bit(CREATES, |f| {
                f.load_arg(mode);
                f.when_any_bit(SET_ID, |f| f.refuse(eperm));
                f.allow();
            });
            f.allow();
        });
    }
    for (nr, pid) in [
        (libc::SYS_ptrace, 1),
        (libc::SYS_process_vm_readv, 0),
        (libc::SYS_process_vm_writev, 0),
    ] {
        f.when_equal(nr as u32, |f| {
            f.load_arg(pid);
            f.when_equal(1, |f| f.refuse(eperm));
            f.allow();
        });
    }
    f.allow();
    f.0
}

/// Waits for the child `pid`, relaying every connection to `listener` (when there is one) to the
/// proxy's socket meanwhile; then ends the same way the child did.
fn wait_and_relay(pid: libc::pid_t, listener: Listener) -> Result<Never, SetupError> {
    // The helper keeps no pipe of the command's open: only the command's own ends hold them.
    if let Ok(null) = OpenOptions::new().read(true).write(true).open("/dev/null") {
        use std::os::fd::AsRawFd;
        for fd in 0..3 {
            // SAFETY: dup2 onto the standard descriptors of this process.
            unsafe { libc::dup2(null.as_raw_fd(), fd) };
        }
    }
    if let Some((listener, socket)) = listener {
        // The relay runs in a process of its own inside the command's PID namespace (this one
        // may start no thread once it made that namespace), and ends with the command.
        // SAFETY: the helper has one thread; the child runs only the relay.
        match unsafe { libc::fork() } {
            0 => {
                for stream in listener.incoming().flatten() {
                    let socket = socket.clone();
                    thread::spawn(move || relay(stream, &socket));
                }
                // SAFETY: ends the relay without the parent's exit handlers.
                unsafe { libc::_exit(0) };
            }
            n if n < 0 => {
                return Err(SetupError::Fork {
                    cause: OsCause::last(),
                });
            }
            _ => drop(listener),
        }
    }
    // Every child is reaped, not only the command: the first process of a PID namespace ends
    // only once the others there (the relay) are reaped.
    let status;
    loop {
        let mut any = 0;
        // SAFETY: waits for a child of this process.
        let rc = unsafe { libc::waitpid(-1, &mut any, 0) };
        if rc == pid {
            status = any;
            break;
        }
        if rc < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return Err(SetupError::Wait {
                cause: OsCause::last(),
            });
        }
    }
    if libc::WIFSIGNALED(status) {
        let signal = libc::WTERMSIG(status);
        // SAFETY: restores the default action and sends the signal to this process.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::kill(libc::getpid(), signal);
        }
    }
    process::exit(if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        1
    })
}

/// Copies bytes both ways between a connection from inside and the proxy.
fn relay(inside: TcpStream, socket: &Path) {
    let Ok(proxy) = UnixStream::connect(socket) else {
        return;
    };
    let (Ok(mut inside_r), Ok(mut proxy_w)) = (inside.try_clone(), proxy.try_clone()) else {
        return;
    };
    let up = thread::spawn(move || {
        let _ = copy(&mut inside_r, &mut proxy_w);
        let _ = proxy_w.shutdown(Shutdown::Write);
    });
    let (mut proxy_r, mut inside_w) = (proxy, inside);
    let _ = copy(&mut proxy_r, &mut inside_w);
    let _ = inside_w.shutdown(Shutdown::Write);
    let _ = up.join();
}

fn copy(from: &mut impl Read, to: &mut impl Write) -> io::Result<()> {
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = from.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        to.write_all(&buf[..n])?;
    }
}
