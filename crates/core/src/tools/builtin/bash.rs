//! `bash`: a shell command in WORKDIR, in a process group of its own, so that a timeout or Ctrl-C
//! kills everything it started. Output is captured with its head and tail kept when long.

use std::collections::VecDeque;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::plural;
use crate::secret;
use crate::tools::{Tool, ToolContext, ToolError, ToolFuture, ToolKind, ToolOutput, args};
use new_sys::os_sandbox;
use new_sys::os_sandbox::OsSandbox;
use new_sys::os_sandbox::Reach;
use new_sys::platform;
use new_sys::platform::ShellKind;
use new_sys::process;
use std::sync::OnceLock;
use tokio::time;

/// Bytes kept from the start and from the end of each stream.
pub const HEAD_BYTES: usize = 10_000;
pub const TAIL_BYTES: usize = 10_000;
/// The longest timeout a call may ask for.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);
/// How long output is still read after the command exits (background children may hold the pipe).
const DRAIN_GRACE: Duration = Duration::from_millis(200);

pub struct Bash;

impl Tool for Bash {
    fn name(&self) -> &str {
        "bash"
    }

    fn description(&self) -> &str {
        static TEXT: OnceLock<String> = OnceLock::new();
        TEXT.get_or_init(|| describe(platform::shell().kind, cfg!(windows)))
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "command": {"type": "string"},
                "timeout_seconds": {"type": "integer"},
                "sandbox": {"type": "boolean"},
                "reason": {"type": "string"}
            },
            "required": ["command"]
        })
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Execute
    }

    fn subject(&self, args: &Value) -> Option<String> {
        args::subject(args, "command")
    }

    fn preview(&self, args: &Value, ctx: &ToolContext) -> Option<String> {
        let command = args::subject(args, "command")?;
        if leaves_sandbox(args, ctx) {
            let reason = args::subject(args, "reason")
                .filter(|r| !r.trim().is_empty())
                .unwrap_or_else(|| "(the model gave no reason)".into());
            return Some(format!(
                "$ {command}\n\nto run OUTSIDE the sandbox (it could write anywhere you can and use the network).\nReason: {reason}"
            ));
        }
        Some(format!("$ {command}"))
    }

    fn run<'a>(&'a self, args: &'a Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(run(args, ctx))
    }
}

/// The tool's description for the shell commands run in: bash (Git Bash on Windows) or
/// PowerShell, which the model must be told, since its commands are another language.
fn describe(kind: ShellKind, windows: bool) -> String {
    use new_sys::platform::ShellKind;
    let shell = match (kind, windows) {
        (ShellKind::PowerShell, _) => {
            "Run a PowerShell command (Windows PowerShell or PowerShell 7; there is no bash on this \
             machine: write PowerShell, e.g. `Get-ChildItem`, `Select-String`, `;` between commands) \
             in the working folder; returns its exit code, stdout and stderr. Permission rules \
             cannot read PowerShell, so most commands are asked about."
        }
        (_, true) => {
            "Run a shell command (Git Bash on Windows: bash syntax and Unix tools, drives as /c/…) \
             in the working folder; returns its exit code, stdout and stderr."
        }
        _ => "Run a bash command in the working folder; returns its exit code, stdout and stderr.",
    };
    format!(
        "{shell} No terminal or stdin; long output keeps its start and \
         end; timeout 30 s (`timeout_seconds`: up to 600). In new's sandbox (if \
         on) it writes only in the working folder and $TMPDIR (not .git, .new), secret folders \
         look empty, no network unless configured; if truly needed, set `sandbox: false` with a \
         `reason` (the user is asked)."
    )
}

/// Kills the command's whole process group when dropped: on completion, timeout, or cancellation;
/// then, where the system allows, every process that left the group (`setsid`, a double fork) and
/// was handed to `new` when its parent died.
/// A sandboxed command (`contained`) runs in a PID namespace of its own, whose processes end
/// with it: nothing of it can reach `new` as an escapee, so one pass reaps what is left (a
/// helper's init handed over) without waiting for late arrivals.
struct GroupGuard {
    pid: i32,
    contained: bool,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        platform::end_group(self.pid as u32, true);
        if self.contained {
            process::sweep_once(self.pid);
        } else {
            process::sweep(self.pid);
        }
    }
}

/// One output stream, keeping its first and last bytes.
#[derive(Default)]
struct Capture {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    cut_bytes: usize,
    cut_lines: usize,
}

impl Capture {
    fn push(&mut self, bytes: &[u8]) {
        let room = HEAD_BYTES.saturating_sub(self.head.len());
        let (head, rest) = bytes.split_at(room.min(bytes.len()));
        self.head.extend_from_slice(head);
        for &b in rest {
            if self.tail.len() == TAIL_BYTES {
                let dropped = self.tail.pop_front().expect("full");
                self.cut_bytes += 1;
                self.cut_lines += usize::from(dropped == b'\n');
            }
            self.tail.push_back(b);
        }
    }

    fn is_empty(&self) -> bool {
        self.head.is_empty() && self.tail.is_empty()
    }

    fn text(&self) -> String {
        let mut out = String::from_utf8_lossy(&self.head).into_owned();
        if self.cut_bytes > 0 {
            out.push_str(&format!(
                "\n[… {} ({}) cut from the middle …]\n",
                plural(self.cut_bytes, "byte"),
                plural(self.cut_lines, "line")
            ));
        }
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        out.push_str(&String::from_utf8_lossy(&tail));
        out
    }
}

async fn drain(stream: Option<impl AsyncRead + Unpin>, capture: &mut Capture) {
    let Some(mut stream) = stream else { return };
    let mut buf = [0u8; 8192];
    while let Ok(n) = stream.read(&mut buf).await {
        if n == 0 {
            break;
        }
        capture.push(&buf[..n]);
    }
}

/// The session's sandbox, when this call runs inside it: the sandbox is on and the call did not
/// ask to leave it.
pub fn sandbox_for<'a>(args: &Value, ctx: &'a ToolContext) -> Option<&'a OsSandbox> {
    let sandbox = ctx.os_sandbox.as_deref().filter(|s| s.is_on())?;
    (args::opt_bool(args, "sandbox").ok().flatten() != Some(false)).then_some(sandbox)
}

/// Whether the call asks to run outside a sandbox that is on (`"sandbox": false`).
pub fn leaves_sandbox(args: &Value, ctx: &ToolContext) -> bool {
    ctx.os_sandbox.as_deref().is_some_and(|s| s.is_on()) && sandbox_for(args, ctx).is_none()
}

async fn run(args: &Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let command = args::string(args, "command")?;
    if command.trim().is_empty() {
        return Err(ToolError::Arguments("`command` is empty".into()));
    }
    let timeout = args::opt_usize(args, "timeout_seconds")?
        .map(|s| Duration::from_secs(s as u64).clamp(Duration::from_secs(1), MAX_TIMEOUT))
        .unwrap_or(ctx.bash_timeout);

    args::opt_bool(args, "sandbox")?;
    let sandbox = sandbox_for(args, ctx);
    let shell = platform::shell();
    let mut cmd = os_sandbox::command(
        sandbox,
        Some(Reach::Configured),
        shell.program.as_os_str(),
        &shell.args(command),
        ctx.workdir.root(),
    )
    .map_err(|e| ToolError::Failed(format!("cannot start the sandbox: {e}")))?;
    let protected_before = sandbox.map(|s| s.protected_state()).unwrap_or_default();
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("PAGER", "cat")
        .env("GIT_PAGER", "cat")
        .kill_on_drop(true);
    platform::own_process_group(&mut cmd);
    // Keys for model providers stay out of reach of the commands the model runs.
    for name in secret::secret_env(&ctx.hidden_env) {
        cmd.env_remove(name);
    }
    let mut child = process::spawn_own(&mut cmd).map_err(|e| {
        ToolError::Failed(format!("could not start {}: {e}", shell.program.display()))
    })?;
    let _guard = child.id().map(|pid| GroupGuard {
        pid: pid as i32,
        contained: sandbox.is_some(),
    });
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let (mut out, mut err) = (Capture::default(), Capture::default());

    let status = {
        let reading = async {
            tokio::join!(drain(stdout, &mut out), drain(stderr, &mut err));
        };
        tokio::pin!(reading);
        let deadline = time::sleep(timeout);
        tokio::pin!(deadline);
        let mut read_all = false;
        let status = loop {
            tokio::select! {
                () = &mut reading, if !read_all => read_all = true,
                status = child.wait() => break Some(status),
                () = &mut deadline => break None,
            }
        };
        if status.is_some() && !read_all {
            let _ = time::timeout(DRAIN_GRACE, &mut reading).await;
        }
        status
    };

    let mut report = String::new();
    let mut summary = match &status {
        None => {
            report.push_str(&format!(
                "Timed out after {} s; the command and everything it started were killed.\n",
                timeout.as_secs()
            ));
            format!("timed out after {} s", timeout.as_secs())
        }
        Some(Ok(s)) => match s.code() {
            Some(code) => {
                report.push_str(&format!("Exit code: {code}\n"));
                format!("exit code {code}")
            }
            None => {
                let signal = platform::exit_signal(s).unwrap_or(0);
                report.push_str(&format!("Killed by signal {signal}\n"));
                format!("killed by signal {signal}")
            }
        },
        Some(Err(e)) => return Err(ToolError::Failed(format!("waiting for the command: {e}"))),
    };
    for (name, capture) in [("stdout", &out), ("stderr", &err)] {
        if !capture.is_empty() {
            report.push_str(&format!("{name}:\n{}", capture.text()));
            if !report.ends_with('\n') {
                report.push('\n');
            }
        }
    }
    if out.is_empty() && err.is_empty() {
        report.push_str("(no output)\n");
    }
    if let Some(sandbox) = sandbox {
        let failed = !matches!(&status, Some(Ok(s)) if s.success());
        let refused = sandbox.take_refused();
        let text = format!("{}\n{}", out.text(), err.text());
        if let Some(note) = sandbox.refusal_note(&text, failed, &refused) {
            report.push_str(&note);
            report.push('\n');
        }
        let changed: Vec<String> = sandbox
            .changed_protected(&protected_before)
            .iter()
            .map(|p| ctx.workdir.display(p))
            .collect();
        if !changed.is_empty() {
            summary.push_str(&format!(
                "; it created or replaced {} (protected: check it before the next session)",
                changed.join(", ")
            ));
            report.push_str(&format!(
                "[sandbox] This command created or replaced {}, which new protects (it shapes \
                 later sessions); the user is told.\n",
                changed.join(", ")
            ));
        }
    }
    Ok(ToolOutput {
        content: report,
        summary,
        diff: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools;
    use std::fs;
    use std::path::Path;
    use std::process;
    use std::thread;
    use std::time::Instant;
    use tokio::time;

    fn ctx(dir: &Path) -> ToolContext {
        tools::test_context(dir)
    }

    async fn bash(dir: &Path, args: Value) -> Result<ToolOutput, ToolError> {
        Bash.run(&args, &ctx(dir)).await
    }

    /// Whether any process has `marker` in its command line.
    fn running(marker: &str) -> bool {
        fs::read_dir("/proc").unwrap().flatten().any(|e| {
            // Arguments are separated by NULs: read them as one line of words.
            fs::read(e.path().join("cmdline"))
                .map(|c| {
                    String::from_utf8_lossy(&c)
                        .replace('\0', " ")
                        .contains(marker)
                })
                .unwrap_or(false)
        })
    }

    #[tokio::test]
    async fn reports_exit_code_and_both_streams_in_workdir() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("here.txt"), "").unwrap();
        let out = bash(dir.path(), json!({"command": "ls; echo oops >&2; exit 3"}))
            .await
            .unwrap();
        assert_eq!(
            out.content,
            "Exit code: 3\nstdout:\nhere.txt\nstderr:\noops\n"
        );
        assert_eq!(out.summary, "exit code 3");
        let out = bash(dir.path(), json!({"command": "true"})).await.unwrap();
        assert_eq!(out.content, "Exit code: 0\n(no output)\n");
    }

    #[tokio::test]
    async fn long_output_keeps_head_and_tail() {
        let dir = tempfile::tempdir().unwrap();
        let out = bash(dir.path(), json!({"command": "seq 1 100000"}))
            .await
            .unwrap();
        assert!(out.content.starts_with("Exit code: 0\nstdout:\n1\n2\n3\n"));
        assert!(out.content.ends_with("99999\n100000\n"));
        assert!(out.content.contains("cut from the middle"));
        assert!(out.content.len() < HEAD_BYTES + TAIL_BYTES + 200);
    }

    #[tokio::test]
    async fn timeout_kills_the_whole_process_group() {
        let dir = tempfile::tempdir().unwrap();
        let marker = format!("sleep 47.{}", process::id());
        let command = format!("({marker}) & {marker}; echo never");
        let started = Instant::now();
        let out = bash(
            dir.path(),
            json!({"command": command, "timeout_seconds": 1}),
        )
        .await
        .unwrap();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(
            out.content.starts_with("Timed out after 1 s"),
            "{}",
            out.content
        );
        thread::sleep(Duration::from_millis(200));
        assert!(!running(&marker), "a child outlived the timeout");
    }

    #[tokio::test]
    async fn cancelling_kills_the_process_group() {
        let dir = tempfile::tempdir().unwrap();
        let marker = format!("sleep 48.{}", process::id());
        let args = json!({"command": format!("({marker}) & {marker}")});
        let context = ctx(dir.path());
        let call = Bash.run(&args, &context);
        // Dropping the future is what Ctrl-C does.
        assert!(
            time::timeout(Duration::from_millis(300), call)
                .await
                .is_err()
        );
        thread::sleep(Duration::from_millis(200));
        assert!(!running(&marker), "a child outlived the cancellation");
    }

    #[tokio::test]
    async fn background_children_do_not_hold_the_call_open() {
        let dir = tempfile::tempdir().unwrap();
        let marker = format!("sleep 49.{}", process::id());
        let started = Instant::now();
        let out = bash(
            dir.path(),
            json!({"command": format!("{marker} & echo started")}),
        )
        .await
        .unwrap();
        assert!(started.elapsed() < Duration::from_secs(3));
        assert!(out.content.contains("started"));
        thread::sleep(Duration::from_millis(200));
        assert!(!running(&marker));
    }

    /// Processes that leave the command's process group (`setsid`, double forks, `nohup`, a new
    /// session that forks again) are found and ended too, on completion, timeout and cancel.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn processes_that_leave_the_group_are_ended_too() {
        let dir = tempfile::tempdir().unwrap();
        let tag = process::id();
        let escapes = [
            format!("setsid sleep 51.{tag}1 &"),
            format!("setsid -f sleep 51.{tag}2"),
            format!("(setsid sleep 51.{tag}3 &)"),
            format!("nohup setsid sleep 51.{tag}4 > /dev/null 2>&1 &"),
            format!("setsid sh -c 'sleep 51.{tag}5 & sleep 51.{tag}6' &"),
            format!("( ( setsid sleep 51.{tag}7 & ) & )"),
            format!("setsid bash -c 'setsid sleep 51.{tag}8 &' &"),
            format!("env -i /bin/sh -c 'setsid sleep 51.{tag}9 &'"),
        ];
        let out = bash(
            dir.path(),
            json!({"command": format!("{}\necho spawned", escapes.join("\n"))}),
        )
        .await
        .unwrap();
        assert!(
            out.content.starts_with("Exit code: 0\nstdout:\nspawned"),
            "{}",
            out.content
        );
        thread::sleep(Duration::from_millis(300));
        for i in 1..=9 {
            let marker = format!("sleep 51.{tag}{i}");
            assert!(!running(&marker), "{marker} escaped the clean-up");
        }
        // And on a timeout.
        let out = bash(
            dir.path(),
            json!({"command": format!("setsid sleep 52.{tag} & sleep 30"), "timeout_seconds": 1}),
        )
        .await
        .unwrap();
        assert!(out.content.contains("Timed out"));
        thread::sleep(Duration::from_millis(300));
        assert!(!running(&format!("sleep 52.{tag}")));
    }
}
