//! `bash`: a shell command in WORKDIR, in a process group of its own, so that a timeout or Ctrl-C
//! kills everything it started. Output is captured with its head and tail kept when long.

use std::collections::VecDeque;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::plural;
use crate::tools::{Tool, ToolContext, ToolError, ToolFuture, ToolKind, ToolOutput, args};

/// Bytes kept from the start and from the end of each stream.
pub const HEAD_BYTES: usize = 10_000;
pub const TAIL_BYTES: usize = 10_000;
/// The longest timeout a call may ask for.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);
/// How long output is still read after the command exits (background children may hold the pipe).
const DRAIN_GRACE: Duration = Duration::from_millis(200);

pub struct Bash;

impl Tool for Bash {
    fn name(&self) -> &'static str {
        "bash"
    }

    fn description(&self) -> &'static str {
        "Run a shell command (bash) in the working folder and return its exit code, stdout and stderr. \
         Use it to build, run tests, use git and other command-line tools. Commands run without a \
         terminal or standard input; the default timeout is 30 seconds (`timeout_seconds`, at most 600). \
         Long output keeps its beginning and end."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command line to run"},
                "timeout_seconds": {"type": "integer", "description": "Kill the command after this many seconds (default 30, at most 600)"}
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

    fn preview(&self, args: &Value, _ctx: &ToolContext) -> Option<String> {
        args::subject(args, "command").map(|c| format!("$ {c}"))
    }

    fn run<'a>(&'a self, args: &'a Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(run(args, ctx))
    }
}

/// Kills the command's whole process group when dropped: on completion, timeout, or cancellation.
struct GroupGuard(i32);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        // SAFETY: kill(2) with a negative pid signals the process group; no memory is involved.
        unsafe {
            libc::kill(-self.0, libc::SIGKILL);
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

fn shell() -> &'static str {
    if std::path::Path::new("/bin/bash").exists() {
        "/bin/bash"
    } else {
        "/bin/sh"
    }
}

async fn run(args: &Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let command = args::string(args, "command")?;
    if command.trim().is_empty() {
        return Err(ToolError::Arguments("`command` is empty".into()));
    }
    let timeout = args::opt_usize(args, "timeout_seconds")?
        .map(|s| Duration::from_secs(s as u64).clamp(Duration::from_secs(1), MAX_TIMEOUT))
        .unwrap_or(ctx.bash_timeout);

    let mut cmd = tokio::process::Command::new(shell());
    cmd.arg("-c")
        .arg(command)
        .current_dir(ctx.sandbox.root())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("PAGER", "cat")
        .env("GIT_PAGER", "cat")
        .process_group(0)
        .kill_on_drop(true);
    // Keys for model providers stay out of reach of the commands the model runs.
    for (name, _) in std::env::vars_os() {
        let text = name.to_string_lossy();
        if text.ends_with("_API_KEY") || ctx.hidden_env.iter().any(|h| *h == text) {
            cmd.env_remove(name);
        }
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| ToolError::Failed(format!("could not start {}: {e}", shell())))?;
    let _guard = child.id().map(|pid| GroupGuard(pid as i32));
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let (mut out, mut err) = (Capture::default(), Capture::default());

    let status = {
        let reading = async {
            tokio::join!(drain(stdout, &mut out), drain(stderr, &mut err));
        };
        tokio::pin!(reading);
        let deadline = tokio::time::sleep(timeout);
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
            let _ = tokio::time::timeout(DRAIN_GRACE, &mut reading).await;
        }
        status
    };

    let mut report = String::new();
    let summary = match &status {
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
                use std::os::unix::process::ExitStatusExt;
                let signal = s.signal().unwrap_or(0);
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
    Ok(ToolOutput {
        content: report,
        summary,
        diff: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(dir: &std::path::Path) -> ToolContext {
        crate::tools::test_context(dir)
    }

    async fn bash(dir: &std::path::Path, args: Value) -> Result<ToolOutput, ToolError> {
        Bash.run(&args, &ctx(dir)).await
    }

    /// Whether any process has `marker` in its command line.
    fn running(marker: &str) -> bool {
        std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
            std::fs::read(e.path().join("cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(marker))
                .unwrap_or(false)
        })
    }

    #[tokio::test]
    async fn reports_exit_code_and_both_streams_in_workdir() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("here.txt"), "").unwrap();
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
        let marker = format!("sleep 47.{}", std::process::id());
        let command = format!("({marker}) & {marker}; echo never");
        let started = std::time::Instant::now();
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
        std::thread::sleep(Duration::from_millis(200));
        assert!(!running(&marker), "a child outlived the timeout");
    }

    #[tokio::test]
    async fn cancelling_kills_the_process_group() {
        let dir = tempfile::tempdir().unwrap();
        let marker = format!("sleep 48.{}", std::process::id());
        let args = json!({"command": format!("({marker}) & {marker}")});
        let context = ctx(dir.path());
        let call = Bash.run(&args, &context);
        // Dropping the future is what Ctrl-C does.
        assert!(
            tokio::time::timeout(Duration::from_millis(300), call)
                .await
                .is_err()
        );
        std::thread::sleep(Duration::from_millis(200));
        assert!(!running(&marker), "a child outlived the cancellation");
    }

    #[tokio::test]
    async fn background_children_do_not_hold_the_call_open() {
        let dir = tempfile::tempdir().unwrap();
        let marker = format!("sleep 49.{}", std::process::id());
        let started = std::time::Instant::now();
        let out = bash(
            dir.path(),
            json!({"command": format!("{marker} & echo started")}),
        )
        .await
        .unwrap();
        assert!(started.elapsed() < Duration::from_secs(3));
        assert!(out.content.contains("started"));
        std::thread::sleep(Duration::from_millis(200));
        assert!(!running(&marker));
    }

    #[tokio::test]
    async fn provider_keys_are_not_passed_on() {
        let dir = tempfile::tempdir().unwrap();
        // SAFETY: tests in this module do not read this variable concurrently.
        unsafe { std::env::set_var("SOMEONE_API_KEY", "secret") };
        let out = bash(
            dir.path(),
            json!({"command": "echo \"[${SOMEONE_API_KEY:-unset}]\""}),
        )
        .await
        .unwrap();
        assert!(out.content.contains("[unset]"), "{}", out.content);
    }
}
