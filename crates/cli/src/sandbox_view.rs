//! `/sandbox`, and the sandbox's line in `/status` and at start-up: what the OS sandbox of `bash`,
//! hooks and MCP servers enforces, or why it is off, in the user's language. The text is built
//! from plain facts ([`Facts`]) by pure functions; the session's sandbox gives the facts.

use std::path::{Path, PathBuf};

use new_core::config::Lang;
use new_sys::os_sandbox::{Network, OsSandbox, Reach, SandboxError, SandboxSettings, Spec, State};

use super::text;

/// What the view shows, read from the session's sandbox once.
pub struct Facts<'a> {
    pub state: &'a State,
    pub settings: &'a SandboxSettings,
    /// What a command would run with now, or why that could not be worked out.
    pub spec: Result<Spec, SandboxError>,
    /// Protected names inside WORKDIR that are not there yet.
    pub missing: Vec<PathBuf>,
    /// Paths under it are shown as `~/…`.
    pub home: Option<PathBuf>,
}

impl<'a> Facts<'a> {
    pub fn of(sandbox: &'a OsSandbox) -> Facts<'a> {
        // The spec first: it makes the session's folder, which finding the state needs too.
        let spec = sandbox.spec(Reach::Configured);
        Facts {
            state: sandbox.state(),
            settings: sandbox.settings(),
            spec,
            missing: sandbox.missing_protected(),
            home: dirs::home_dir(),
        }
    }
}

/// One line for start-up and `/status`: on, with the network, or off and why.
pub fn one_line(lang: Lang, state: &State, settings: &SandboxSettings) -> String {
    match state {
        State::On => {
            let network = match &settings.network {
                Network::None => text::tr(lang, "sandbox_network_off", &[]),
                Network::All => text::tr(lang, "sandbox_network_on", &[]),
                Network::Hosts(h) => h.patterns().join(", "),
            };
            text::tr(lang, "sandbox_on", &[("network", &network)])
        }
        State::Off(why) => text::tr(lang, "sandbox_off", &[("why", &text::error(lang, why))]),
    }
}

/// What `/sandbox` shows: the line, then what is writable, read-only, hidden and reachable (or
/// why none of it holds).
pub fn describe(lang: Lang, facts: &Facts) -> String {
    let mut out = one_line(lang, facts.state, facts.settings);
    out.push('\n');
    let show = |p: &Path| -> String {
        match facts.home.as_deref().and_then(|h| p.strip_prefix(h).ok()) {
            Some(rest) => format!("~/{}", rest.display()),
            None => p.display().to_string(),
        }
    };
    let list = |paths: &[PathBuf]| -> String {
        if paths.is_empty() {
            text::tr(lang, "sandbox_none_listed", &[])
        } else {
            paths.iter().map(|p| show(p)).collect::<Vec<_>>().join(", ")
        }
    };
    let mut line = |text: String| {
        out.push_str(&text);
        out.push('\n');
    };
    match (&facts.spec, facts.state) {
        (Ok(spec), State::On) => {
            line(text::tr(
                lang,
                "sandbox_writable",
                &[("list", &list(&spec.writable))],
            ));
            line(text::tr(
                lang,
                "sandbox_devices",
                &[("list", &list(&spec.devices))],
            ));
            line(text::tr(
                lang,
                "sandbox_read_only",
                &[("list", &list(&spec.read_only))],
            ));
            if !facts.missing.is_empty() {
                line(text::tr(
                    lang,
                    "sandbox_not_there_yet",
                    &[("list", &list(&facts.missing))],
                ));
            }
            line(text::tr(
                lang,
                "sandbox_hidden",
                &[("list", &list(&spec.hidden))],
            ));
            let network = match &facts.settings.network {
                Network::None => text::tr(lang, "sandbox_reach_none", &[]),
                Network::All => text::tr(lang, "sandbox_reach_all", &[]),
                Network::Hosts(h) => text::tr(
                    lang,
                    "sandbox_reach_hosts",
                    &[("hosts", &h.patterns().join(", "))],
                ),
            };
            line(text::tr(lang, "sandbox_network", &[("network", &network)]));
            line(if facts.settings.allow_unsandboxed {
                text::tr(lang, "sandbox_leaving_asked", &[])
            } else {
                text::tr(lang, "sandbox_leaving_forbidden", &[])
            });
            line(text::tr(lang, "sandbox_reads_elsewhere", &[]));
        }
        (Err(e), _) => line(format!("  {}", text::error(lang, e))),
        (_, State::Off(_)) => line(text::tr(lang, "sandbox_asks_every_command", &[])),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use new_sys::os_sandbox::{OffReason, OsCause, SetupError};
    use std::io;
    use std::io::ErrorKind;

    fn spec() -> Spec {
        Spec {
            writable: vec![
                "/home/ann/work".into(),
                "/tmp/new-1000-42-ab12cd34/tmp".into(),
            ],
            devices: vec!["/dev/null".into(), "/dev/tty".into()],
            read_only: vec!["/home/ann/work/.git".into()],
            hidden: vec!["/home/ann/.ssh".into()],
            cwd: "/home/ann/work".into(),
            ..Spec::default()
        }
    }

    fn facts<'a>(state: &'a State, settings: &'a SandboxSettings) -> Facts<'a> {
        Facts {
            state,
            settings,
            spec: Ok(spec()),
            missing: vec!["/home/ann/work/AGENTS.md".into()],
            home: Some("/home/ann".into()),
        }
    }

    #[test]
    fn the_view_of_a_sandbox_that_holds_in_both_languages() {
        let settings = SandboxSettings::default();
        let on = State::On;
        insta::assert_snapshot!(describe(Lang::En, &facts(&on, &settings)), @r#"
        sandbox: on (writes in the working folder and $TMPDIR only; network off)
          writable: ~/work, /tmp/new-1000-42-ab12cd34/tmp
          devices: /dev/null, /dev/tty
          read-only inside: ~/work/.git
          not there yet (a command could create them; new says so when one does): ~/work/AGENTS.md
          hidden: ~/.ssh
          network: none (a loopback of its own only)
          leaving it: a command the model runs with "sandbox": false is asked for every time
          reads elsewhere are allowed; the file tools keep their own checks; hooks and MCP servers from the project run inside it, yours as configured
        "#);
        insta::assert_snapshot!(describe(Lang::Zh, &facts(&on, &settings)), @r#"
        沙箱：开启（只能写入工作文件夹和 $TMPDIR；网络：关闭）
          可写：~/work, /tmp/new-1000-42-ab12cd34/tmp
          设备：/dev/null, /dev/tty
          其中只读：~/work/.git
          尚不存在（命令可能创建它们；一旦创建，new 会告诉你）：~/work/AGENTS.md
          隐藏：~/.ssh
          网络：无（只有自己的回环接口）
          离开沙箱：模型以 "sandbox": false 运行的命令每次都会询问
          其他位置可以读取；文件工具有自己的检查；项目的钩子和 MCP 服务器在沙箱内运行，你自己的按配置运行
        "#);
    }

    #[test]
    fn why_the_sandbox_is_off_is_said_in_both_languages() {
        let settings = SandboxSettings::default();
        let cause = || OsCause {
            errno: Some(1),
            message: "Operation not permitted (os error 1)".into(),
        };
        let cases = [
            (
                OffReason::Setup(SetupError::Unshare { cause: cause() }),
                "user namespaces are unavailable (unshare: Operation not permitted (os error 1))",
                "用户命名空间不可用（unshare：Operation not permitted (os error 1)）",
            ),
            (
                OffReason::Setup(SetupError::LandlockTooOld),
                "Landlock is too old in this kernel (ABI 6, Linux 6.12, is needed)",
                "此内核的 Landlock 版本太旧（需要 ABI 6，即 Linux 6.12）",
            ),
            (
                OffReason::Setup(SetupError::Pin {
                    path: "/w/scripts".into(),
                    cause: cause(),
                }),
                "pinning /w/scripts: Operation not permitted (os error 1)",
                "固定 /w/scripts 失败：Operation not permitted (os error 1)",
            ),
            (
                OffReason::Disabled,
                "sandbox.enabled is false in the config",
                "配置中 sandbox.enabled 为 false",
            ),
            (
                OffReason::Unsupported { os: "macos" },
                "not available on macos yet",
                "macos 上暂不可用",
            ),
            (
                OffReason::CannotStart {
                    path: "/opt/new".into(),
                    cause: io::Error::from(ErrorKind::NotFound),
                },
                "cannot start the sandbox helper /opt/new: entity not found",
                "无法启动沙箱辅助程序 /opt/new：entity not found",
            ),
            (
                OffReason::Session(SandboxError::NoProxy),
                "no proxy is configured",
                "没有配置代理",
            ),
            (
                OffReason::Helper {
                    line: "something else".into(),
                },
                "something else",
                "something else",
            ),
        ];
        for (why, en, zh) in cases {
            let off = State::Off(why);
            let line = one_line(Lang::En, &off, &settings);
            assert_eq!(
                line,
                format!("sandbox: off ({en}); bash commands are asked for")
            );
            let line = one_line(Lang::Zh, &off, &settings);
            assert_eq!(line, format!("沙箱：关闭（{zh}）；bash 命令都会询问"));
        }
        // `/sandbox` of a sandbox that is off, and of one whose spec failed.
        let off = State::Off(OffReason::Disabled);
        let view = describe(Lang::Zh, &facts(&off, &settings));
        assert!(
            view.ends_with(
                "  每个 bash 命令都会询问（permissive 模式下直接运行），与没有沙箱时相同\n"
            ),
            "{view}"
        );
        let failed = Facts {
            spec: Err(SandboxError::TempFolder {
                path: "/tmp/new-x/tmp".into(),
                cause: cause(),
            }),
            ..facts(&off, &settings)
        };
        let view = describe(Lang::En, &failed);
        assert!(
            view.ends_with("\n  creating the sandbox's temp folder /tmp/new-x/tmp: Operation not permitted (os error 1)\n"),
            "{view}"
        );
        let view = describe(Lang::Zh, &failed);
        assert!(
            view.ends_with("\n  创建沙箱的临时文件夹 /tmp/new-x/tmp 失败：Operation not permitted (os error 1)\n"),
            "{view}"
        );
    }
}
