//! One reader for every file a project supplies: `AGENTS.md`, `CLAUDE.md` and what they include,
//! roles, skills (`SKILL.md` and flat ones), agent definitions, `.mcp.json`, the project's config.
//!
//! A cloned repository chooses these files, links included (git stores symlinks): `AGENTS.md`
//! linked to `/proc/self/environ` would put the user's keys into every system prompt, a `SKILL.md`
//! linked to `/dev/zero` would grow memory without end, a FIFO would hang the first message. So a
//! project's file is resolved as the file tools resolve paths (no link may lead out of WORKDIR),
//! its last component is opened with `O_NOFOLLOW` and `O_NONBLOCK`, only a regular file is read,
//! and never more than the bytes the caller will use. The user's own files (under the config
//! folder) may be links anywhere, but are bounded and must be regular files too.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

use crate::fs::confine::ConfineError;
use crate::fs::confine::FolderHandle;
use crate::fs::confine::Workdir;
use new_sys::platform;
use std::fs;
use std::fs::File;
use std::io;
use std::io::ErrorKind;

/// What was read: at most the limit, and whether the file went on past it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bounded {
    pub bytes: Vec<u8>,
    pub truncated: bool,
}

impl Bounded {
    /// As text; a character cut at the limit, or bytes that are not UTF-8, are replaced.
    pub fn text(self) -> String {
        match String::from_utf8(self.bytes) {
            Ok(text) => text,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        }
    }

    /// As text when all of it is UTF-8 and it was not cut; else an error naming `shown`.
    pub fn whole_text(self, shown: &Path, limit: usize) -> Result<String, String> {
        if self.truncated {
            return Err(format!(
                "{} is larger than {limit} bytes, the most that is read",
                shown.display()
            ));
        }
        String::from_utf8(self.bytes).map_err(|_| format!("{} is not UTF-8 text", shown.display()))
    }
}

/// The files of one project, read safely. Cheap to make; holds WORKDIR resolved.
#[derive(Debug, Clone)]
pub struct ProjectFiles {
    workdir: Option<Workdir>,
    /// WORKDIR as given (the paths of its files start with it, not with the resolved one).
    given: PathBuf,
}

impl ProjectFiles {
    pub fn new(workdir: &Path) -> ProjectFiles {
        ProjectFiles {
            workdir: Workdir::new(workdir).ok(),
            given: workdir.to_path_buf(),
        }
    }

    /// [`ProjectFiles::read`] for one of many files (a tier of skills): the handles of the
    /// folders opened for the last file are kept in `folder` for the next. A path below WORKDIR
    /// by plain names is opened name by name from WORKDIR's handle, each folder and the file
    /// without following a link, so no link is resolved and nothing outside can be reached; a
    /// path with a link on the way, or anything but a regular file at its end, is read (or
    /// refused) by [`ProjectFiles::read`], which says why.
    pub fn read_in(
        &self,
        path: &Path,
        limit: usize,
        folder: &mut FolderHandle,
    ) -> Result<Option<Bounded>, String> {
        let Some(workdir) = &self.workdir else {
            return Ok(None);
        };
        let plain = path.strip_prefix(&self.given).ok().filter(|rel| {
            rel.components().count() > 0
                && rel.components().all(|c| matches!(c, Component::Normal(_)))
        });
        if let Some(rel) = plain {
            let shown = path.display().to_string();
            match workdir.open_read_in(&workdir.root().join(rel), &shown, folder) {
                Ok(opened) => {
                    return bounded(opened.file, limit)
                        .map(Some)
                        .map_err(|e| format!("reading {shown}: {e}"));
                }
                Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
                Err(_) => {}
            }
        }
        self.read(path, limit)
    }

    /// Reads `path` (absolute inside WORKDIR, or relative to it) as a project file, at most
    /// `limit` bytes. `Ok(None)`: nothing is there. Errors say what was refused and why.
    pub fn read(&self, path: &Path, limit: usize) -> Result<Option<Bounded>, String> {
        let Some(workdir) = &self.workdir else {
            return Ok(None);
        };
        let shown = path.display().to_string();
        let resolved = match workdir.resolve(&path.to_string_lossy()) {
            Ok(p) => p,
            Err(ConfineError::Outside(_)) => {
                return Err(format!(
                    "{shown} is refused: it leads out of the project (a link to a place outside it)"
                ));
            }
            Err(e) => return Err(format!("{shown} is refused: {e}")),
        };
        if fs::symlink_metadata(&resolved).is_err() {
            return Ok(None);
        }
        let opened = workdir
            .open_read(&resolved, &shown)
            .map_err(|e| format!("{shown} is refused: {e}"))?;
        bounded(opened.file, limit)
            .map(Some)
            .map_err(|e| format!("reading {shown}: {e}"))
    }

    /// Whether `path` is a folder that stays inside `within` (also through links): a skill
    /// folder linked out of its tier is not one.
    pub fn is_folder_within(&self, path: &Path, within: &Path) -> bool {
        let Ok(tier) = Workdir::new(within) else {
            return false;
        };
        match tier.resolve(&path.to_string_lossy()) {
            Ok(p) => {
                p.is_dir()
                    && self
                        .workdir
                        .as_ref()
                        .is_some_and(|s| p.starts_with(s.root()))
            }
            Err(_) => false,
        }
    }
}

/// The kernel's folders: their files (`/proc/self/environ`, `/sys/…`, devices) look regular,
/// or nearly, yet hold the state of the machine and of `new` itself, never a file of the user.
const KERNEL_FOLDERS: [&str; 3] = ["/proc", "/sys", "/dev"];

/// Reads one of the user's own files (their config folder, a key or token file their config
/// names): links are followed, but only a regular file outside the kernel's folders (`/proc`,
/// `/sys`, `/dev`) is read, opened without blocking, and at most `limit` bytes.
pub fn read_own(path: &Path, limit: usize) -> Result<Option<Bounded>, String> {
    let shown = path.display();
    // Resolved first and that path opened, so the folder judged is the one read.
    let real = match fs::canonicalize(path) {
        Ok(real) => real,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("reading {shown}: {e}")),
    };
    let file = match platform::nonblocking_read_options().open(&real) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("reading {shown}: {e}")),
    };
    let meta = file
        .metadata()
        .map_err(|e| format!("reading {shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{shown} is refused: it is not a regular file"));
    }
    if let Some(folder) = KERNEL_FOLDERS.iter().find(|f| real.starts_with(f)) {
        return Err(format!(
            "{shown} is refused: it is in {folder}, the kernel's, not a file of yours"
        ));
    }
    bounded(file, limit)
        .map(Some)
        .map_err(|e| format!("reading {}: {e}", path.display()))
}

/// At most `limit` bytes of `file`, and whether there was more.
fn bounded(file: File, limit: usize) -> io::Result<Bounded> {
    let mut bytes = Vec::with_capacity(limit.min(64 * 1024));
    let mut taken = file.take(limit as u64 + 1);
    taken.read_to_end(&mut bytes)?;
    let truncated = bytes.len() > limit;
    bytes.truncate(limit);
    Ok(Bounded { bytes, truncated })
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(not(windows))]
    use new_sys::platform;
    use std::fs;
    #[cfg(not(windows))]
    use std::fs::File;
    #[cfg(unix)]
    use std::os::unix::fs::symlink;
    use std::path::PathBuf;

    fn project() -> (tempfile::TempDir, PathBuf, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().canonicalize().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret.txt"), "OUTSIDE-SECRET\n").unwrap();
        (dir, work, outside)
    }

    #[cfg(unix)]
    #[test]
    fn a_link_out_of_the_project_is_refused_and_one_inside_is_followed() {
        let (_d, work, outside) = project();
        let files = ProjectFiles::new(&work);
        symlink("/proc/self/environ", work.join("AGENTS.md")).unwrap();
        symlink(outside.path().join("secret.txt"), work.join("CLAUDE.md")).unwrap();
        fs::create_dir_all(work.join("docs")).unwrap();
        fs::write(work.join("docs/real.md"), "inside\n").unwrap();
        symlink("docs/real.md", work.join("README.md")).unwrap();
        for name in ["AGENTS.md", "CLAUDE.md"] {
            let err = files.read(&work.join(name), 1000).unwrap_err();
            assert!(err.contains("leads out of the project"), "{name}: {err}");
            let err = files.read(Path::new(name), 1000).unwrap_err();
            assert!(err.contains("leads out of the project"), "{name}: {err}");
        }
        let read = files.read(&work.join("README.md"), 1000).unwrap().unwrap();
        assert_eq!(read.text(), "inside\n");
        assert_eq!(files.read(&work.join("missing.md"), 10).unwrap(), None);
    }

    #[cfg(unix)]
    #[test]
    fn devices_fifos_and_huge_files_are_never_read_whole() {
        let (_d, work, _o) = project();
        let files = ProjectFiles::new(&work);
        // A FIFO would block until a writer came: refused at once.
        let fifo = work.join("SKILL.md");
        platform::make_fifo(&fifo).unwrap();
        let err = files.read(&fifo, 4096).unwrap_err();
        assert!(err.contains("named pipe"), "{err}");
        let err = read_own(&fifo, 4096).unwrap_err();
        assert!(err.contains("not a regular file"), "{err}");
        // A device, even through a link of the user's own.
        let link = work.join("zero");
        symlink("/dev/zero", &link).unwrap();
        assert!(
            read_own(&link, 4096)
                .unwrap_err()
                .contains("not a regular file")
        );
        assert!(files.read(&link, 4096).is_err());
        // A 20 GB sparse file: the limit, and the rest said.
        let big = work.join("big.md");
        let f = File::create(&big).unwrap();
        f.set_len(20 << 30).unwrap();
        let read = files.read(&big, 4096).unwrap().unwrap();
        assert_eq!(read.bytes.len(), 4096);
        assert!(read.truncated);
        let read = read_own(&big, 10).unwrap().unwrap();
        assert_eq!((read.bytes.len(), read.truncated), (10, true));
        assert!(
            read.whole_text(&big, 10)
                .unwrap_err()
                .contains("larger than 10 bytes")
        );
    }

    /// Many files read through kept folder handles answer as one read at a time does: plain
    /// files by their names, links inside followed, links out (of a folder or a file) refused,
    /// a FIFO refused, `..` out refused, nothing there none, and a project given by a link to
    /// it read all the same.
    #[cfg(unix)]
    #[test]
    fn reading_many_answers_as_reading_one() {
        let (_d, work, outside) = project();
        let skills = work.join(".new/skills");
        for name in ["a", "b", "real"] {
            fs::create_dir_all(skills.join(name)).unwrap();
            fs::write(
                skills.join(name).join("SKILL.md"),
                format!("skill {name}\n"),
            )
            .unwrap();
        }
        let link = |target: &Path, at: &str| symlink(target, skills.join(at));
        link(&skills.join("real"), "inside").unwrap();
        link(outside.path(), "out").unwrap();
        fs::create_dir_all(skills.join("c")).unwrap();
        symlink(outside.path().join("secret.txt"), skills.join("c/SKILL.md")).unwrap();
        fs::create_dir_all(skills.join("fifo")).unwrap();
        platform::make_fifo(&skills.join("fifo/SKILL.md")).unwrap();
        let given = tempfile::tempdir().unwrap();
        let via = given.path().join("project");
        symlink(&work, &via).unwrap();
        for root in [work.clone(), via] {
            let files = ProjectFiles::new(&root);
            let mut folder = FolderHandle::default();
            let mut read = |rel: &str| {
                let path = root.join(".new/skills").join(rel);
                let many = files
                    .read_in(&path, 100, &mut folder)
                    .map(|r| r.map(Bounded::text));
                let one = files.read(&path, 100).map(|r| r.map(Bounded::text));
                assert_eq!(many, one, "{rel}");
                many
            };
            for name in ["a", "b", "real", "a", "inside"] {
                let want = if name == "inside" { "real" } else { name };
                assert_eq!(
                    read(&format!("{name}/SKILL.md")),
                    Ok(Some(format!("skill {want}\n")))
                );
            }
            for refused in ["out/secret.txt", "c/SKILL.md", "../../../secret.txt"] {
                let err = read(refused).unwrap_err();
                assert!(err.contains("leads out of the project"), "{refused}: {err}");
            }
            assert!(read("fifo/SKILL.md").unwrap_err().contains("named pipe"));
            assert_eq!(read("missing/SKILL.md"), Ok(None));
            assert_eq!(read("a/missing.md"), Ok(None));
        }
        // The project is the folder resolved when the reader was made, name by name from its
        // handle: a link to it turned elsewhere afterwards leads nowhere new (one read at a
        // time resolves the link again, and refuses what it leads to).
        let via = given.path().join("project");
        let files = ProjectFiles::new(&via);
        fs::remove_file(&via).unwrap();
        symlink(outside.path(), &via).unwrap();
        fs::create_dir_all(outside.path().join(".new/skills/a")).unwrap();
        fs::write(outside.path().join(".new/skills/a/SKILL.md"), "planted").unwrap();
        let path = via.join(".new/skills/a/SKILL.md");
        let many = files.read_in(&path, 100, &mut FolderHandle::default());
        assert_eq!(
            many.unwrap().map(Bounded::text).as_deref(),
            Some("skill a\n")
        );
        assert!(files.read(&path, 100).is_err());
    }

    /// Issue 41 (1): a file of the user's own is never one of the kernel's, even when it looks
    /// regular (`/proc/self/environ`) or a link of the user's leads there; a device stays "not
    /// a regular file".
    #[cfg(target_os = "linux")]
    #[test]
    fn an_own_file_in_the_kernels_folders_is_refused() {
        let (_d, work, _o) = project();
        let err = read_own(Path::new("/proc/self/environ"), 4096).unwrap_err();
        assert_eq!(
            err,
            "/proc/self/environ is refused: it is in /proc, the kernel's, not a file of yours"
        );
        let link = work.join("id-token");
        symlink("/proc/self/environ", &link).unwrap();
        let err = read_own(&link, 4096).unwrap_err();
        assert!(
            err.ends_with("it is in /proc, the kernel's, not a file of yours"),
            "{err}"
        );
        assert!(err.starts_with(&link.display().to_string()), "{err}");
        for (path, folder) in [("/sys/kernel/uevent_seqnum", "/sys"), ("/dev/null", "/dev")] {
            match read_own(Path::new(path), 10) {
                Err(err) => assert!(
                    err.contains(&format!("in {folder},")) || err.contains("not a regular file"),
                    "{err}"
                ),
                Ok(None) => {} // not there on this machine
                Ok(Some(_)) => panic!("{path} was read"),
            }
        }
        // A regular file elsewhere is read, through a link too.
        fs::write(work.join("token"), "tok").unwrap();
        symlink(work.join("token"), work.join("via")).unwrap();
        assert_eq!(
            read_own(&work.join("via"), 10).unwrap().unwrap().text(),
            "tok"
        );
    }

    /// A file of exactly the limit is whole; one byte more is cut and said.
    #[test]
    fn the_limit_is_exact() {
        let (_d, work, _o) = project();
        let files = ProjectFiles::new(&work);
        fs::write(work.join("ten.md"), "0123456789").unwrap();
        let read = files.read(Path::new("ten.md"), 10).unwrap().unwrap();
        assert_eq!((read.bytes.len(), read.truncated), (10, false));
        let read = files.read(Path::new("ten.md"), 9).unwrap().unwrap();
        assert_eq!((read.bytes.len(), read.truncated), (9, true));
        let read = read_own(&work.join("ten.md"), 10).unwrap().unwrap();
        assert_eq!(
            read.whole_text(Path::new("ten.md"), 10).unwrap(),
            "0123456789"
        );
    }

    /// Only a missing file is "nothing there": any other failure to open one of the user's own
    /// files is an error that names it.
    #[test]
    fn an_own_file_that_cannot_be_opened_is_an_error_not_nothing() {
        let (_d, work, _o) = project();
        fs::write(work.join("plain.txt"), "x").unwrap();
        assert_eq!(read_own(&work.join("missing.txt"), 10).unwrap(), None);
        let err = read_own(&work.join("plain.txt/below"), 10).unwrap_err();
        assert!(err.contains("plain.txt/below"), "{err}");
    }

    /// A socket where one of the user's files should be exists but cannot be opened (ENXIO):
    /// an error that names it, not "nothing there".
    #[cfg(unix)]
    #[test]
    fn an_own_file_that_is_a_socket_is_an_error_not_nothing() {
        use std::os::unix::net::UnixListener;
        let (_d, work, _o) = project();
        let path = work.join("key.sock");
        let _listener = UnixListener::bind(&path).unwrap();
        let err = read_own(&path, 10).unwrap_err();
        assert!(err.contains("key.sock"), "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn a_skill_folder_linked_out_of_its_tier_is_not_a_folder_within_it() {
        let (_d, work, outside) = project();
        let tier = work.join(".claude/skills");
        fs::create_dir_all(tier.join("real")).unwrap();
        fs::create_dir_all(work.join("shared")).unwrap();
        symlink(outside.path(), tier.join("away")).unwrap();
        symlink(work.join("shared"), tier.join("sideways")).unwrap();
        let files = ProjectFiles::new(&work);
        assert!(files.is_folder_within(&tier.join("real"), &tier));
        assert!(!files.is_folder_within(&tier.join("away"), &tier));
        assert!(!files.is_folder_within(&tier.join("sideways"), &tier));
        // A file is not a folder; a folder of a tier outside the project is not the project's.
        fs::write(tier.join("file.md"), "x").unwrap();
        assert!(!files.is_folder_within(&tier.join("file.md"), &tier));
        fs::create_dir_all(outside.path().join("skill")).unwrap();
        assert!(!files.is_folder_within(&outside.path().join("skill"), outside.path()));
    }
}
