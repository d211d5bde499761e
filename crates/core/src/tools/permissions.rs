//! Who may run what: permission modes, rules, and the session's own allowances.
//!
//! | tool kind | strict | default | permissive |
//! |---|---|---|---|
//! | read inside WORKDIR | allow | allow | allow |
//! | write inside WORKDIR | ask | allow | allow |
//! | execute | ask | ask | allow |
//! | execute inside the OS sandbox | ask | allow | allow |
//!
//! Rules `{tool, pattern, action, reason}` are matched in order, project rules before user rules,
//! and the first match wins. `tool` is a glob (`mcp__*`). `pattern` is a path glob for file tools
//! (`src/**`, matched against the path relative to WORKDIR) and a command pattern for `bash`, where
//! `*` matches anything and `git *` also matches plain `git`. A shell line with several commands
//! (`a && b | c`) is judged command by command: any denial denies it, any question asks. What the
//! user allows for the session only answers questions; it never overrides a rule that denies. The
//! hard limits of [`super::blacklist`] come before everything.

use globset::{GlobBuilder, GlobMatcher};
use serde::{Deserialize, Serialize};

use super::{blacklist, shell};
use crate::layers::Origin;
use new_sys::platform;
use new_sys::platform::ShellKind;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Strict,
    Default,
    Permissive,
}

impl Mode {
    pub fn parse(s: &str) -> Option<Mode> {
        match s.trim().to_ascii_lowercase().as_str() {
            "strict" => Some(Mode::Strict),
            "default" => Some(Mode::Default),
            "permissive" => Some(Mode::Permissive),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Strict => "strict",
            Mode::Default => "default",
            Mode::Permissive => "permissive",
        }
    }

    /// The mode table.
    pub fn action(self, kind: ToolKind) -> Action {
        match (self, kind) {
            (_, ToolKind::Read) => Action::Allow,
            (Mode::Strict, ToolKind::Write) => Action::Ask,
            (_, ToolKind::Write) => Action::Allow,
            (Mode::Permissive, ToolKind::Execute) => Action::Allow,
            (_, ToolKind::Execute) => Action::Ask,
            (Mode::Strict, ToolKind::Contained) => Action::Ask,
            (_, ToolKind::Contained) => Action::Allow,
        }
    }
}

/// What a tool does, as far as permissions care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolKind {
    /// Reads inside WORKDIR.
    Read,
    /// Writes inside WORKDIR.
    Write,
    /// Runs programs (and, later, external tools).
    Execute,
    /// Runs a program inside the operating-system sandbox (a `bash` call while it is on): the
    /// kernel keeps it to WORKDIR, so the default mode runs it without asking.
    Contained,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Allow,
    Deny,
    Ask,
}

impl Action {
    fn severity(self) -> u8 {
        match self {
            Action::Allow => 0,
            Action::Ask => 1,
            Action::Deny => 2,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    /// A tool name or glob of names.
    pub tool: String,
    /// A path glob (file tools) or command pattern (`bash`); absent: any call of the tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    pub action: Action,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Rule {
    pub fn describe(&self) -> String {
        let mut text = format!(
            "{:<5} {}",
            format!("{:?}", self.action).to_lowercase(),
            self.tool
        );
        if let Some(p) = &self.pattern {
            text.push_str(&format!(" {p}"));
        }
        if let Some(r) = &self.reason {
            text.push_str(&format!("  ({r})"));
        }
        text
    }
}

/// The outcome of a check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Ask,
    /// Denied by a rule; the text says which and why.
    Deny(String),
    /// Refused by a hard limit.
    Refuse(String),
}

#[derive(Debug, Clone)]
struct Compiled {
    rule: Rule,
    origin: Origin,
    tool: GlobMatcher,
    path: Option<GlobMatcher>,
}

#[derive(Debug, thiserror::Error)]
#[error("bad permission rule for `{tool}`: {reason}")]
pub struct RuleError {
    pub tool: String,
    pub reason: String,
}

fn compile(rule: Rule, origin: Origin) -> Result<Compiled, RuleError> {
    let err = |reason: String| RuleError {
        tool: rule.tool.clone(),
        reason,
    };
    let tool = GlobBuilder::new(&rule.tool)
        .build()
        .map_err(|e| err(e.to_string()))?
        .compile_matcher();
    let path = match &rule.pattern {
        Some(p) => Some(
            GlobBuilder::new(p.trim_start_matches("./"))
                .literal_separator(true)
                .build()
                .map_err(|e| err(e.to_string()))?
                .compile_matcher(),
        ),
        None => None,
    };
    Ok(Compiled {
        rule,
        origin,
        tool,
        path,
    })
}

/// `*` matches any text; a pattern ending in ` *` also matches the command without arguments.
fn command_matches(pattern: &str, command: &str) -> bool {
    let command = command.split_whitespace().collect::<Vec<_>>().join(" ");
    let pattern = pattern.split_whitespace().collect::<Vec<_>>().join(" ");
    if let Some(bare) = pattern.strip_suffix(" *")
        && command == bare
    {
        return true;
    }
    wildcard(pattern.as_bytes(), command.as_bytes())
}

fn wildcard(p: &[u8], s: &[u8]) -> bool {
    // Iterative glob match with backtracking to the last `*`.
    let (mut pi, mut si) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while si < s.len() {
        if pi < p.len() && (p[pi] == b'?' || p[pi] == s[si]) {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some(pi);
            pi += 1;
            mark = si;
        } else if let Some(st) = star {
            pi = st + 1;
            mark += 1;
            si = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len()
}

#[derive(Debug, Clone)]
pub struct Policy {
    pub mode: Mode,
    rules: Vec<Compiled>,
    session: Vec<Compiled>,
    /// The project's rules come from a file the user has not trusted: they may only make a call
    /// stricter (ask or deny), never looser than the user's rules and the mode would have it.
    project_narrows_only: bool,
    /// Tools work in the background may run where the user would be asked
    /// (`subagent.background_allowed_tools`); a deny rule and the hard limits still hold.
    pub background_allowed: Vec<String>,
}

impl Policy {
    /// `project` rules are checked before `user` rules.
    pub fn new(mode: Mode, project: Vec<Rule>, user: Vec<Rule>) -> Result<Self, RuleError> {
        let rules = project
            .into_iter()
            .map(|r| compile(r, Origin::Project))
            .chain(user.into_iter().map(|r| compile(r, Origin::User)))
            .collect::<Result<_, _>>()?;
        Ok(Policy {
            mode,
            rules,
            session: Vec::new(),
            project_narrows_only: false,
            background_allowed: Vec::new(),
        })
    }

    /// Makes the project's rules narrow-only (see the field); for an untrusted project file.
    pub fn project_untrusted(mut self, untrusted: bool) -> Self {
        self.project_narrows_only = untrusted;
        self
    }

    /// The rules in force, in the order they are checked.
    pub fn rules(&self) -> impl Iterator<Item = (&Rule, Origin)> {
        self.rules.iter().map(|c| (&c.rule, c.origin))
    }

    pub fn session_rules(&self) -> impl Iterator<Item = &Rule> {
        self.session.iter().map(|c| &c.rule)
    }

    /// Allows what `rule` matches for the rest of the session (it answers questions only).
    pub fn allow_for_session(&mut self, rule: Rule) -> Result<(), RuleError> {
        self.session.push(compile(rule, Origin::Project)?);
        Ok(())
    }

    /// Adds a project rule after the existing project rules (what "always allow" saves). The user
    /// chose it at the prompt, so it applies even while the project's file is not trusted.
    pub fn add_project_rule(&mut self, rule: Rule) -> Result<(), RuleError> {
        if self.project_narrows_only {
            self.session.push(compile(rule.clone(), Origin::Project)?);
        }
        let at = self
            .rules
            .iter()
            .position(|c| c.origin == Origin::User)
            .unwrap_or(self.rules.len());
        self.rules.insert(at, compile(rule, Origin::Project)?);
        Ok(())
    }

    /// Decides one call. `subject` is the path relative to WORKDIR for file tools, the command line
    /// for `bash`.
    pub fn check(&self, tool: &str, kind: ToolKind, subject: Option<&str>) -> Verdict {
        self.check_for(tool, kind, subject, platform::shell().kind)
    }

    /// [`Policy::check`] for commands run by a shell of `shell_kind`.
    fn check_for(
        &self,
        tool: &str,
        kind: ToolKind,
        subject: Option<&str>,
        shell_kind: ShellKind,
    ) -> Verdict {
        let is_shell = tool == "bash";
        // A command line is read once, for the hard limits and for the rules.
        let parts = match (is_shell, subject) {
            // No reader of PowerShell here: the line is one part that no allow rule can match,
            // and that deny and ask rules match as a whole (said in the tool's description). The
            // hard limits still read it as bash would: that can only refuse more.
            (true, Some(command)) if shell_kind == ShellKind::PowerShell => {
                if let Some(reason) = blacklist::check(command) {
                    return Verdict::Refuse(reason);
                }
                vec![Part::unread(command)]
            }
            (true, Some(command)) => {
                let script = shell::parse(command);
                if let Some(reason) = blacklist::check_parsed(command, &script) {
                    return Verdict::Refuse(reason);
                }
                Part::of_script(&script)
            }
            (_, s) => vec![Part::plain(s.unwrap_or(""))],
        };
        let shell_limits = is_shell
            && self
                .rules
                .iter()
                .any(|c| c.rule.action != Action::Allow && c.tool.is_match(tool));
        let mut worst = (Action::Allow, None::<&Compiled>);
        for part in &parts {
            let find = |origin: Option<Origin>| {
                self.rules.iter().find(|c| {
                    origin.is_none_or(|o| c.origin == o) && self.matches(c, tool, is_shell, part)
                })
            };
            let (matched, mut action) = if self.project_narrows_only {
                // The stricter of the project's rule and what the user's rules or the mode say.
                let user = find(Some(Origin::User));
                let user_action = user.map_or_else(|| self.mode.action(kind), |c| c.rule.action);
                match find(Some(Origin::Project)) {
                    Some(p) if p.rule.action.severity() > user_action.severity() => {
                        (Some(p), p.rule.action)
                    }
                    _ => (user, user_action),
                }
            } else {
                let matched = find(None);
                (
                    matched,
                    matched.map_or_else(|| self.mode.action(kind), |c| c.rule.action),
                )
            };
            // A program named only at run time (`$X push`, `$(which git) push`), or a shell fed a
            // script or its input, could run what a rule denies: with such rules in force, it is
            // asked for even where the mode allows.
            if action == Action::Allow
                && matched.is_none()
                && (part.dynamic || part.opaque)
                && shell_limits
            {
                action = Action::Ask;
            }
            if action == Action::Ask
                && self
                    .session
                    .iter()
                    .any(|c| self.matches(c, tool, is_shell, part))
            {
                action = Action::Allow;
            }
            if action.severity() > worst.0.severity() {
                worst = (action, matched);
            }
        }
        match worst {
            (Action::Allow, _) => Verdict::Allow,
            (Action::Ask, _) => Verdict::Ask,
            (Action::Deny, rule) => Verdict::Deny(match rule {
                Some(c) => format!(
                    "denied by the {} rule `{}`{}",
                    c.origin.label(),
                    c.rule.describe(),
                    c.rule
                        .reason
                        .as_deref()
                        .map(|r| format!(": {r}"))
                        .unwrap_or_default()
                ),
                None => "denied".to_string(),
            }),
        }
    }

    fn matches(&self, c: &Compiled, tool: &str, is_shell: bool, part: &Part) -> bool {
        if !c.tool.is_match(tool) {
            return false;
        }
        match (&c.rule.pattern, is_shell) {
            (None, _) => c.rule.action != Action::Allow || part.plain_enough(),
            (Some(p), true) => {
                if c.rule.action == Action::Allow {
                    // An allow rule allows only the command as written: no substitution in its
                    // program, no output written to a path, nothing seen through a wrapper.
                    part.plain_enough() && command_matches(p, &part.literal)
                } else {
                    // Deny and ask rules see through wrappers and options too.
                    command_matches(p, &part.literal)
                        || part.views.iter().any(|v| command_matches(p, v))
                }
            }
            (Some(_), false) => c
                .path
                .as_ref()
                .is_some_and(|m| m.is_match(part.literal.trim_start_matches("./"))),
        }
    }
}

/// One thing a rule is matched against: a path, or one simple command of a shell line.
#[derive(Debug, Clone, Default)]
struct Part {
    /// The path, or the command's words as written (quotes removed), joined by spaces.
    literal: String,
    /// The command seen through wrappers and options ([`shell::views`]).
    views: Vec<String>,
    /// The command writes its output to a path (`> file`, `2>> log`, `&> out`).
    writes: bool,
    /// The program is known only at run time: a variable, a substitution or a glob.
    dynamic: bool,
    /// It runs commands no rule can see: a shell reading a script or its input, `eval` or
    /// `source` of text built at run time, `xargs` with a command line assembled from its input.
    opaque: bool,
}

/// The program of a view (its first word's name).
fn program_name_of(view: &[String]) -> &str {
    view.first().map_or("", |w| shell::program_name(w))
}

impl Part {
    fn plain(text: &str) -> Part {
        Part {
            literal: text.to_string(),
            ..Part::default()
        }
    }

    /// A command line in a language the reader does not know: its programs are unknown.
    fn unread(text: &str) -> Part {
        Part {
            literal: text.to_string(),
            dynamic: true,
            opaque: true,
            ..Part::default()
        }
    }

    /// Whether an allow rule may match it at all.
    fn plain_enough(&self) -> bool {
        !self.writes && !self.dynamic
    }

    /// Every simple command of a command line, those inside substitutions included, each a part.
    fn of_script(script: &shell::Script) -> Vec<Part> {
        let mut parts: Vec<Part> = script
            .all_stages()
            .into_iter()
            .filter(|stage| !stage.is_control())
            .map(|stage| {
                let words: Vec<String> = stage.command_texts();
                let views = shell::views(&words);
                let any_dynamic = stage.command_words().iter().any(|w| w.dynamic);
                let opaque = views.iter().any(|v| {
                    let program = v[0].as_str();
                    let inline = v
                        .iter()
                        .skip(1)
                        .any(|w| w.starts_with('-') && !w.starts_with("--") && w.contains('c'));
                    (shell::is_shell(program) && !inline)
                        || (shell::is_shell(program) && any_dynamic)
                        || (matches!(program, "eval" | "source" | ".") && any_dynamic)
                        || matches!(program, "source" | ".")
                        || (program == "xargs"
                            && v.len() > 1
                            && v[1..].iter().any(|w| w.contains("{}")))
                });
                // `git -c core.pager=…`, `-c alias.x=!…`, `--config-env`: the command runs what
                // its options say, so no allow rule for it can be trusted.
                let embeds = views.iter().any(|v| {
                    program_name_of(v) == "git"
                        && (!shell::git_embedded_commands(v).is_empty()
                            || v.iter().any(|w| {
                                w.starts_with("--config-env")
                                    || w.strip_prefix("-c").is_some_and(|s| {
                                        s.split_once('=').is_some_and(|(k, _)| {
                                            shell::git_setting_runs(&k.to_ascii_lowercase())
                                        })
                                    })
                            }))
                });
                Part {
                    literal: words.join(" "),
                    views: views.into_iter().map(|v| v.join(" ")).collect(),
                    opaque,
                    writes: stage.redirects.iter().any(shell::Redirect::writes_to_path),
                    dynamic: embeds
                        || stage
                            .command_words()
                            .first()
                            .is_some_and(|w| w.dynamic || w.glob),
                }
            })
            .collect();
        // Text fed to a shell on its input (`bash <<< 'cmd'`, `cat <<EOF | sh`, `echo cmd |
        // bash`): its commands are judged as the shell will run them.
        for range in &script.pipelines {
            let stages = &script.stages[range.clone()];
            let Some(shell_at) = stages.iter().position(|s| {
                let words = s.command_texts();
                words
                    .first()
                    .is_some_and(|p| shell::is_shell(shell::program_name(p)))
                    && !words
                        .iter()
                        .skip(1)
                        .any(|w| w.starts_with('-') && !w.starts_with("--") && w.contains('c'))
            }) else {
                continue;
            };
            let mut fed = Vec::new();
            for stage in &stages[..=shell_at] {
                for r in &stage.redirects {
                    match (r.op, &r.body) {
                        (_, Some(body)) => fed.push(body.clone()),
                        ("<<<", None) => fed.push(r.target.text.clone()),
                        _ => {}
                    }
                }
            }
            for stage in &stages[..shell_at] {
                let words = stage.command_texts();
                if words
                    .first()
                    .is_some_and(|p| matches!(p.as_str(), "echo" | "printf"))
                {
                    fed.push(
                        words[1..]
                            .iter()
                            .filter(|w| !w.starts_with('-'))
                            .cloned()
                            .collect::<Vec<_>>()
                            .join(" "),
                    );
                }
            }
            for text in fed {
                let inner = shell::parse(&text);
                parts.extend(
                    Part::of_script(&inner)
                        .into_iter()
                        .filter(|p| !p.literal.is_empty())
                        .map(|p| Part { opaque: true, ..p }),
                );
            }
        }
        if parts.is_empty() {
            parts.push(Part::default());
        }
        parts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use new_sys::platform::ShellKind;

    fn rule(tool: &str, pattern: Option<&str>, action: Action) -> Rule {
        Rule {
            tool: tool.into(),
            pattern: pattern.map(str::to_string),
            action,
            reason: None,
        }
    }

    /// Under PowerShell (Windows without Git Bash) no allow rule matches a command line, deny
    /// and ask rules match it whole, and the hard limits still refuse what bash would run.
    #[test]
    fn powershell_lines_are_judged_whole_and_never_allowed_by_a_rule() {
        use new_sys::platform::ShellKind::PowerShell;
        let user = vec![
            rule("bash", Some("Remove-Item *"), Action::Deny),
            rule("bash", Some("git status"), Action::Allow),
            rule("bash", Some("git *"), Action::Allow),
        ];
        let p = Policy::new(Mode::Default, vec![], user).unwrap();
        let check = |line: &str| p.check_for("bash", ToolKind::Execute, Some(line), PowerShell);
        assert_eq!(
            check("git status"),
            Verdict::Ask,
            "an allow rule allows nothing"
        );
        assert_eq!(check("git status; Remove-Item -Recurse C:\\"), Verdict::Ask);
        assert!(matches!(check("Remove-Item -Recurse x"), Verdict::Deny(_)));
        // Not split at `;` as bash would: the deny rule sees the line whole.
        assert_eq!(check("ls; Remove-Item x"), Verdict::Ask);
        assert!(matches!(check("rm -rf /"), Verdict::Refuse(_)));
        // The same rules read bash as bash.
        assert_eq!(
            p.check_for(
                "bash",
                ToolKind::Execute,
                Some("git status"),
                ShellKind::Bash
            ),
            Verdict::Allow
        );
    }

    #[test]
    fn every_cell_of_the_mode_table() {
        use Action::*;
        use ToolKind::*;
        let table = [
            (Mode::Strict, [Allow, Ask, Ask]),
            (Mode::Default, [Allow, Allow, Ask]),
            (Mode::Permissive, [Allow, Allow, Allow]),
        ];
        for (mode, expected) in table {
            let policy = Policy::new(mode, vec![], vec![]).unwrap();
            for ((tool, kind, subject), want) in [
                ("read_file", Read, "a.txt"),
                ("edit_file", Write, "a.txt"),
                ("bash", Execute, "ls"),
            ]
            .into_iter()
            .zip(expected)
            {
                assert_eq!(mode.action(kind), want, "{mode:?} {kind:?}");
                let verdict = policy.check(tool, kind, Some(subject));
                let want = match want {
                    Allow => Verdict::Allow,
                    Ask => Verdict::Ask,
                    Deny => unreachable!(),
                };
                assert_eq!(verdict, want, "{mode:?} {tool}");
            }
        }
    }

    #[test]
    fn rules_match_in_order_project_first_and_first_match_wins() {
        let project = vec![
            rule("write_file", Some("secrets/**"), Action::Deny),
            rule("bash", Some("git push *"), Action::Ask),
            rule("bash", Some("git *"), Action::Allow),
        ];
        let user = vec![
            rule("bash", Some("git *"), Action::Deny),
            rule("write_file", None, Action::Ask),
            rule("mcp__*", None, Action::Deny),
        ];
        let p = Policy::new(Mode::Default, project, user).unwrap();
        assert!(
            matches!(p.check("write_file", ToolKind::Write, Some("secrets/key.pem")), Verdict::Deny(r) if r.contains("project rule"))
        );
        assert!(matches!(
            p.check("write_file", ToolKind::Write, Some("secrets/a/b")),
            Verdict::Deny(_)
        ));
        assert_eq!(
            p.check("write_file", ToolKind::Write, Some("src/main.rs")),
            Verdict::Ask
        );
        assert_eq!(
            p.check("bash", ToolKind::Execute, Some("git status")),
            Verdict::Allow
        );
        assert_eq!(
            p.check("bash", ToolKind::Execute, Some("git")),
            Verdict::Allow
        );
        assert_eq!(
            p.check("bash", ToolKind::Execute, Some("git push origin main")),
            Verdict::Ask
        );
        assert_eq!(
            p.check("bash", ToolKind::Execute, Some("cargo build")),
            Verdict::Ask
        );
        assert!(matches!(
            p.check("mcp__github__create_issue", ToolKind::Execute, None),
            Verdict::Deny(_)
        ));
        assert_eq!(
            p.check("read_file", ToolKind::Read, Some("secrets/key.pem")),
            Verdict::Allow
        );
    }

    #[test]
    fn compound_commands_are_judged_part_by_part() {
        let p = Policy::new(
            Mode::Default,
            vec![
                rule("bash", Some("git *"), Action::Allow),
                rule("bash", Some("rm *"), Action::Deny),
            ],
            vec![],
        )
        .unwrap();
        assert_eq!(
            p.check(
                "bash",
                ToolKind::Execute,
                Some("git add . && git commit -m x")
            ),
            Verdict::Allow
        );
        assert_eq!(
            p.check("bash", ToolKind::Execute, Some("git status && cargo test")),
            Verdict::Ask
        );
        assert!(matches!(
            p.check("bash", ToolKind::Execute, Some("git status; rm -r build")),
            Verdict::Deny(_)
        ));
    }

    /// The docs' own rules (`git push*` deny, `git *` allow) and every way found, and more, to
    /// run something else under the allow rule or to slip past the deny rule.
    #[test]
    fn allow_rules_pass_no_embedded_command_and_deny_rules_see_through_wrappers() {
        let readme = || {
            vec![
                rule("bash", Some("git push*"), Action::Deny),
                rule("bash", Some("git *"), Action::Allow),
            ]
        };
        for mode in [Mode::Default, Mode::Permissive] {
            let p = Policy::new(mode, readme(), vec![]).unwrap();
            let check = |c: &str| p.check("bash", ToolKind::Execute, Some(c));
            // Allowed as written.
            for ok in [
                "git status",
                "git log --oneline -5",
                "git diff 2>&1",
                "git log > /dev/null",
                "git log 2>/dev/null | git hash-object --stdin",
                "git status && git diff",
                "git commit -m 'fix $(the) `bug` > here'",
                "git log $(git rev-parse HEAD)",
            ] {
                assert_eq!(check(ok), Verdict::Allow, "{mode:?}: {ok}");
            }
            // Something else runs, or output goes to a path: never allowed by the rule.
            for embedded in [
                "git status $(touch X)",
                "git status `touch X`",
                "git status \"$(touch X)\"",
                "git status ${X:-$(touch X)}",
                "git diff <(touch X)",
                "git diff >(touch X)",
                "git status $((1+$(touch X)))",
                "git log > ../outside",
                "git log >> ../outside",
                "git log 1> out.txt",
                "git log 2> err.txt",
                "git log &> out.txt",
                "git log >| out.txt",
                "git log >&out.txt",
                "git log > $HOME/x",
                "git log; touch X",
                "git log\ntouch X",
                "git log & touch X",
                "git log | sh",
                "git log || touch X",
                "$(echo git) status",
                "$GIT status",
            ] {
                // A program named at run time, or a shell fed from a pipe, asks in every mode.
                let opaque = embedded.starts_with('$') || embedded.ends_with("| sh");
                let want = if mode == Mode::Permissive && !opaque {
                    Verdict::Allow // the mode allows it; the rule does not
                } else {
                    Verdict::Ask
                };
                assert_eq!(check(embedded), want, "{mode:?}: {embedded}");
            }
            // The deny rule matches through options, wrappers, and nested command lines.
            for push in [
                "git push",
                "git push origin main",
                "git -C . push",
                "git -C x push --force",
                "git --no-pager push",
                "git -c push.default=current push",
                "git --git-dir=.git push",
                "command git push",
                "env X=1 git push",
                "env -i git push",
                "X=1 git push",
                "/usr/bin/git push",
                "\\git push",
                "'git' 'push'",
                "g\"i\"t pu''sh",
                "sudo git push",
                "nohup git push &",
                "timeout 10 git push",
                "nice -n 5 git push",
                "setsid git push",
                "xargs git push < /dev/null",
                "bash -c 'git push'",
                "sh -c \"git -C . push\"",
                "eval git push",
                "eval 'git push'",
                "echo $(git push)",
                "echo `git push`",
                "git status && git push",
                "git status; (git push)",
                "{ git push; }",
                "if true; then git push; fi",
                "for i in 1; do git push; done",
                "find . -maxdepth 0 -exec git push \\;",
                "$'git' push",
                "git $'\\x70ush'",
            ] {
                assert!(
                    matches!(check(push), Verdict::Deny(_)),
                    "{mode:?}: {push} gave {:?}",
                    check(push)
                );
            }
        }
        // A program named at run time asks when deny rules exist, even where the mode allows.
        let p = Policy::new(Mode::Permissive, readme(), vec![]).unwrap();
        for dynamic in [
            "$GIT push",
            "$(which git) push",
            "`which git` push",
            "${G} push",
            "/usr/bin/gi? push",
        ] {
            assert_eq!(
                p.check("bash", ToolKind::Execute, Some(dynamic)),
                Verdict::Ask,
                "{dynamic}"
            );
        }
        // So is a shell fed a script or its input, or eval/source of text built at run time.
        // Text piped into a shell is read as the shell will run it: a denied command is denied.
        assert!(matches!(
            p.check("bash", ToolKind::Execute, Some("echo 'git push' | sh")),
            Verdict::Deny(_)
        ));
        for opaque in [
            "bash deploy.sh",
            "sh < commands.txt",
            "bash -c \"$CMD\"",
            "eval \"$CMD\"",
            "source ./env.sh",
            ". ./env.sh",
            "echo push | xargs -I{} git {}",
        ] {
            assert_eq!(
                p.check("bash", ToolKind::Execute, Some(opaque)),
                Verdict::Ask,
                "{opaque}"
            );
        }
        // Without deny or ask rules for bash the mode decides, and a rule naming it allows it.
        let free = Policy::new(Mode::Permissive, vec![], vec![]).unwrap();
        assert_eq!(
            free.check("bash", ToolKind::Execute, Some("$GIT push")),
            Verdict::Allow
        );
        assert_eq!(
            free.check("bash", ToolKind::Execute, Some("bash deploy.sh")),
            Verdict::Allow
        );
        for rules in [
            vec![rule("bash", Some("git *"), Action::Allow)],
            vec![rule("write_file", Some("secrets/**"), Action::Deny)],
            vec![rule("mcp__*", None, Action::Ask)],
        ] {
            let p = Policy::new(Mode::Permissive, rules.clone(), vec![]).unwrap();
            assert_eq!(
                p.check("bash", ToolKind::Execute, Some("$GIT push")),
                Verdict::Allow,
                "{rules:?}"
            );
        }
        let named = Policy::new(
            Mode::Default,
            vec![
                rule("bash", Some("git push*"), Action::Deny),
                rule("bash", Some("bash deploy.sh"), Action::Allow),
            ],
            vec![],
        )
        .unwrap();
        assert_eq!(
            named.check("bash", ToolKind::Execute, Some("bash deploy.sh")),
            Verdict::Allow
        );
    }

    #[test]
    fn hard_limits_beat_every_rule_and_mode() {
        let p = Policy::new(
            Mode::Permissive,
            vec![rule("*", None, Action::Allow)],
            vec![],
        )
        .unwrap();
        assert!(matches!(
            p.check("bash", ToolKind::Execute, Some("sudo rm -rf /")),
            Verdict::Refuse(_)
        ));
    }

    #[test]
    fn session_allowances_answer_questions_but_never_override_denials() {
        let mut p = Policy::new(
            Mode::Strict,
            vec![rule("bash", Some("rm *"), Action::Deny)],
            vec![],
        )
        .unwrap();
        assert_eq!(
            p.check("bash", ToolKind::Execute, Some("cargo test")),
            Verdict::Ask
        );
        p.allow_for_session(rule("bash", Some("cargo test"), Action::Allow))
            .unwrap();
        p.allow_for_session(rule("bash", None, Action::Allow))
            .unwrap();
        assert_eq!(
            p.check("bash", ToolKind::Execute, Some("cargo test")),
            Verdict::Allow
        );
        assert!(matches!(
            p.check("bash", ToolKind::Execute, Some("rm x")),
            Verdict::Deny(_)
        ));
        p.add_project_rule(rule("write_file", None, Action::Allow))
            .unwrap();
        assert_eq!(
            p.check("write_file", ToolKind::Write, Some("a")),
            Verdict::Allow
        );
        assert_eq!(p.rules().count(), 2);
    }

    #[test]
    fn command_patterns() {
        assert!(command_matches("git *", "git  status"));
        assert!(command_matches("git *", "git"));
        assert!(!command_matches("git *", "gitk"));
        assert!(command_matches("npm test", "npm test"));
        assert!(!command_matches("npm test", "npm test --watch"));
        assert!(command_matches(
            "cargo * --release",
            "cargo build --release"
        ));
        assert!(command_matches("*", "anything at all"));
    }

    #[test]
    fn an_untrusted_project_only_narrows() {
        let project = vec![
            rule("bash", Some("git *"), Action::Allow),
            rule("bash", Some("rm *"), Action::Ask),
            rule("write_file", Some("docs/**"), Action::Deny),
            rule("bash", Some("ls *"), Action::Ask),
        ];
        let user = vec![
            rule("bash", Some("rm *"), Action::Deny),
            rule("bash", Some("ls *"), Action::Allow),
        ];
        let trusted = Policy::new(Mode::Default, project.clone(), user.clone()).unwrap();
        let untrusted = Policy::new(Mode::Default, project, user)
            .unwrap()
            .project_untrusted(true);
        let check = |p: &Policy, tool: &str, kind: ToolKind, s: &str| p.check(tool, kind, Some(s));
        use ToolKind::*;
        // Trusted: first match wins, the project first.
        assert_eq!(check(&trusted, "bash", Execute, "git push"), Verdict::Allow);
        assert_eq!(check(&trusted, "bash", Execute, "rm x"), Verdict::Ask);
        assert_eq!(check(&trusted, "bash", Execute, "ls -la"), Verdict::Ask);
        // Untrusted: an allow does not widen, an ask does not loosen a user's deny, but an ask
        // or a deny still narrows.
        assert_eq!(check(&untrusted, "bash", Execute, "git push"), Verdict::Ask);
        assert!(matches!(
            check(&untrusted, "bash", Execute, "rm x"),
            Verdict::Deny(_)
        ));
        assert_eq!(check(&untrusted, "bash", Execute, "ls -la"), Verdict::Ask);
        assert!(matches!(
            check(&untrusted, "write_file", Write, "docs/a.md"),
            Verdict::Deny(r) if r.contains("project rule")
        ));
        assert_eq!(
            check(&untrusted, "write_file", Write, "src/a.rs"),
            Verdict::Allow
        );
        // Where both deny, the user's rule is the one that decides and is named.
        let both = Policy::new(
            Mode::Default,
            vec![rule("bash", Some("rm *"), Action::Deny)],
            vec![rule("bash", Some("rm *"), Action::Deny)],
        )
        .unwrap()
        .project_untrusted(true);
        assert!(matches!(
            both.check("bash", Execute, Some("rm x")),
            Verdict::Deny(r) if r.contains("the user rule")
        ));
        // What the user allows "always" at the prompt applies at once all the same.
        let mut untrusted = untrusted;
        untrusted
            .add_project_rule(rule("bash", Some("cargo test"), Action::Allow))
            .unwrap();
        assert_eq!(
            check(&untrusted, "bash", Execute, "cargo test"),
            Verdict::Allow
        );
    }

    #[test]
    fn modes_parse_and_name_themselves_and_rules_describe_themselves() {
        for mode in [Mode::Strict, Mode::Default, Mode::Permissive] {
            assert_eq!(Mode::parse(mode.as_str()), Some(mode));
            assert_eq!(
                Mode::parse(&format!(" {} ", mode.as_str().to_uppercase())),
                Some(mode)
            );
        }
        assert_eq!(
            [Mode::Strict, Mode::Default, Mode::Permissive].map(Mode::as_str),
            ["strict", "default", "permissive"]
        );
        assert_eq!(Mode::parse("yolo"), None);
        let mut r = rule("bash", Some("git push*"), Action::Deny);
        assert_eq!(r.describe(), "deny  bash git push*");
        r.reason = Some("review first".into());
        assert_eq!(r.describe(), "deny  bash git push*  (review first)");
        assert_eq!(
            rule("mcp__*", None, Action::Allow).describe(),
            "allow mcp__*"
        );
        let p = Policy::new(Mode::Default, vec![r], vec![]).unwrap();
        assert_eq!(
            p.check("bash", ToolKind::Execute, Some("git push")),
            Verdict::Deny(
                "denied by the project rule `deny  bash git push*  (review first)`: review first"
                    .into()
            )
        );
    }

    #[test]
    fn bad_globs_are_reported() {
        let err =
            Policy::new(Mode::Default, vec![rule("[", None, Action::Allow)], vec![]).unwrap_err();
        assert!(err.to_string().starts_with("bad permission rule for `[`"));
    }
}

#[cfg(test)]
mod third_attack {
    use super::*;

    fn rule(pattern: &str, action: Action) -> Rule {
        Rule {
            tool: "bash".into(),
            pattern: Some(pattern.into()),
            action,
            reason: None,
        }
    }

    /// The spellings that passed a deny rule `rm *` and an allow rule `git *`: each is judged
    /// by the command that really runs.
    #[test]
    fn deny_rules_see_into_functions_coprocs_traps_aliases_fed_text_and_braces() {
        let p = Policy::new(Mode::Permissive, vec![], vec![rule("rm *", Action::Deny)]).unwrap();
        for c in [
            "function f { rm -f x; }; f",
            "f() { rm -f x; }; f",
            "coproc rm -f x",
            "coproc NAME { rm -f x; }",
            "trap 'rm -f x' EXIT",
            "shopt -s expand_aliases; alias z='rm -f x'; z",
            "bash <<< 'rm -f x'",
            "cat <<EOF | sh\nrm -f x\nEOF",
            "{rm,-f,x}",
            "echo 'rm -f x' | bash",
            "git -c alias.x='!rm -f x' x",
        ] {
            assert!(
                matches!(
                    p.check("bash", ToolKind::Execute, Some(c)),
                    Verdict::Deny(_)
                ),
                "{c}"
            );
        }
        let a = Policy::new(Mode::Default, vec![], vec![rule("git *", Action::Allow)]).unwrap();
        for c in [
            "git -c alias.x='!touch P7' x",
            "git --config-env=core.pager=X log",
            "git -c core.pager='touch P' log",
            "git -ccore.sshCommand=evil fetch",
        ] {
            assert_eq!(
                a.check("bash", ToolKind::Execute, Some(c)),
                Verdict::Ask,
                "{c}"
            );
        }
        assert_eq!(
            a.check("bash", ToolKind::Execute, Some("git -c user.name=x commit")),
            Verdict::Allow
        );
        assert_eq!(
            a.check("bash", ToolKind::Execute, Some("git status")),
            Verdict::Allow
        );
    }
}
