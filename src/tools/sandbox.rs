//! Path resolution for the file tools: every path lands inside WORKDIR or is refused.
//!
//! A path is joined to WORKDIR (absolute paths are taken as they are), then walked one component at a
//! time: existing components are canonicalised, which resolves symlinks, and `..` steps up from the
//! resolved location. Components that do not exist yet cannot be symlinks, so they are appended as
//! they are. The result must lie inside the canonical WORKDIR. A dangling symlink is refused, since
//! writing through it could create a file anywhere.

use std::path::{Component, Path, PathBuf};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SandboxError {
    #[error("`{0}` is outside the working folder; only paths inside it can be used")]
    Outside(String),
    #[error("`{0}` is a symbolic link whose target does not exist")]
    DanglingLink(String),
    #[error("cannot resolve `{path}`: {reason}")]
    Unresolvable { path: String, reason: String },
}

#[derive(Debug, Clone)]
pub struct Sandbox {
    root: PathBuf,
}

impl Sandbox {
    pub fn new(workdir: &Path) -> std::io::Result<Self> {
        Ok(Sandbox {
            root: workdir.canonicalize()?,
        })
    }

    /// The canonical WORKDIR.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves a path given by the model to an absolute path inside WORKDIR.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, SandboxError> {
        let requested = Path::new(path.trim());
        let mut current = if requested.is_absolute() {
            PathBuf::from("/")
        } else {
            self.root.clone()
        };
        let mut exists = true;
        for component in requested.components() {
            match component {
                Component::Prefix(_) | Component::RootDir | Component::CurDir => {}
                Component::ParentDir => {
                    current.pop();
                }
                Component::Normal(name) => {
                    let next = current.join(name);
                    if !exists {
                        current = next;
                        continue;
                    }
                    match std::fs::symlink_metadata(&next) {
                        Ok(meta) => {
                            current = next.canonicalize().map_err(|e| {
                                if meta.file_type().is_symlink() {
                                    SandboxError::DanglingLink(path.to_string())
                                } else {
                                    SandboxError::Unresolvable {
                                        path: path.to_string(),
                                        reason: e.to_string(),
                                    }
                                }
                            })?;
                        }
                        Err(_) => {
                            exists = false;
                            current = next;
                        }
                    }
                }
            }
        }
        if current.starts_with(&self.root) {
            Ok(current)
        } else {
            Err(SandboxError::Outside(path.to_string()))
        }
    }

    /// A path inside WORKDIR as the model should see it: relative, `.` for WORKDIR itself.
    pub fn display(&self, path: &Path) -> String {
        match path.strip_prefix(&self.root) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
            Ok(rel) => rel.display().to_string(),
            Err(_) => path.display().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, Sandbox) {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        std::fs::create_dir_all(work.join("src")).unwrap();
        std::fs::write(work.join("src/a.txt"), "a").unwrap();
        std::fs::write(dir.path().join("secret.txt"), "s").unwrap();
        let sandbox = Sandbox::new(&work).unwrap();
        (dir, sandbox)
    }

    #[test]
    fn inside_paths_resolve() {
        let (_d, s) = setup();
        let root = s.root().to_path_buf();
        assert_eq!(s.resolve("src/a.txt").unwrap(), root.join("src/a.txt"));
        assert_eq!(
            s.resolve("./src/../src/a.txt").unwrap(),
            root.join("src/a.txt")
        );
        assert_eq!(s.resolve("").unwrap(), root);
        assert_eq!(s.resolve(".").unwrap(), root);
        assert_eq!(
            s.resolve("new/dir/file.txt").unwrap(),
            root.join("new/dir/file.txt")
        );
        let abs = root.join("src/a.txt");
        assert_eq!(s.resolve(abs.to_str().unwrap()).unwrap(), abs);
    }

    #[test]
    fn escapes_are_refused() {
        let (_d, s) = setup();
        for p in [
            "../secret.txt",
            "src/../../secret.txt",
            "/etc/passwd",
            "/",
            "nothere/../../x",
            "a/b/../../../x",
        ] {
            assert_eq!(
                s.resolve(p),
                Err(SandboxError::Outside(p.to_string())),
                "{p}"
            );
        }
    }

    #[test]
    fn symlinks_are_followed_and_judged_by_their_target() {
        let (d, s) = setup();
        let root = s.root().to_path_buf();
        symlink(d.path().join("secret.txt"), root.join("out")).unwrap();
        symlink(d.path(), root.join("outdir")).unwrap();
        symlink(root.join("src"), root.join("in")).unwrap();
        symlink(d.path().join("missing"), root.join("dangling")).unwrap();
        assert!(matches!(s.resolve("out"), Err(SandboxError::Outside(_))));
        assert!(matches!(
            s.resolve("outdir/new.txt"),
            Err(SandboxError::Outside(_))
        ));
        assert_eq!(s.resolve("in/a.txt").unwrap(), root.join("src/a.txt"));
        assert!(matches!(
            s.resolve("dangling"),
            Err(SandboxError::DanglingLink(_))
        ));
        // `..` after a symlink steps up from where the link points, as the kernel would.
        assert!(matches!(
            s.resolve("outdir/../x"),
            Err(SandboxError::Outside(_))
        ));
    }
}
