//! The session's permission gate: applies the [`Policy`], reports refusals, and asks the front
//! end when a call needs approval: allow once, for this session, always (saved as a project rule),
//! or deny with an optional reason for the model. With nobody to ask, the answer is no.

use std::cell::RefCell;
use std::path::PathBuf;

use serde_json::Value;

use super::event::{
    Answer, Approval, Event, Frontend, HostAnswer, HostQuestion, Notice, RefusedWhy,
};
use crate::agent::{Gate, GateDecision};
use crate::config;
use crate::config::CONFIG_FILE;
use crate::hooks::Hooks;
use crate::hooks::Permission;
use crate::hooks::claude;
use crate::layers;
use crate::layers::INSTRUCTION_FILES;
use crate::layers::Layers;
use crate::tools::builtin;
use crate::tools::{Action, Policy, Rule, ToolKind, ToolRegistry, Verdict};
use crate::trust::Trust;
use crate::vocab::ToolCall;
use std::fs;
use std::io;
use std::path::Path;

/// The gate of a session's turns: its policy, its front end to ask, its project's config for
/// "always" rules (trusted again when the user trusted it), its hooks.
pub struct SessionGate<'a, 'f> {
    pub policy: &'a mut Policy,
    pub front: &'a RefCell<&'f mut dyn Frontend>,
    /// `<WORKDIR>/.new/config.json`, where "always allow" saves its rule.
    pub project_config: PathBuf,
    /// When that file is trusted: the trust store and WORKDIR, to trust it again once the rule is
    /// saved (the user's own answer changed it).
    pub retrust: Option<(Trust, PathBuf)>,
    /// The subagent asking, when one is (its role names the question).
    pub label: Option<String>,
    /// The user's hooks: `notification` ones hear that a question waits.
    pub hooks: Option<&'a Hooks>,
}

impl<'a, 'f> SessionGate<'a, 'f> {
    /// The gate of a session's turns.
    pub fn new(
        policy: &'a mut Policy,
        front: &'a RefCell<&'f mut dyn Frontend>,
        layers: &Layers,
        project_trusted: bool,
        workdir: &Path,
        hooks: Option<&'a Hooks>,
    ) -> Self {
        SessionGate {
            policy,
            front,
            project_config: layers.project.join(CONFIG_FILE),
            // A file the user trusted (or none yet) stays trusted with the rule they add to it.
            retrust: project_trusted
                .then(|| (Trust::new(layers.user.as_deref()), workdir.to_path_buf())),
            label: None,
            hooks,
        }
    }

    fn say(&self, notice: Notice) {
        self.front.borrow_mut().event(Event::Notice(notice));
    }

    fn refused(&self, name: &str, why: RefusedWhy) {
        self.say(Notice::Refused {
            tool: name.to_string(),
            why,
        });
    }

    /// The rule an answer of "this session" or "always" adds.
    fn rule_for(name: &str, kind: ToolKind, subject: Option<&str>, always: bool) -> Rule {
        let pattern = match kind {
            // One command line, exactly (whitespace aside).
            ToolKind::Execute | ToolKind::Contained => {
                subject.map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
            }
            // Writes: this file for good, any file for the session.
            _ if always => subject.map(str::to_string),
            _ => None,
        };
        Rule {
            tool: name.to_string(),
            pattern,
            action: Action::Allow,
            reason: always.then(|| "allowed at the prompt".to_string()),
        }
    }

    fn ask(
        &mut self,
        call: &ToolCall,
        tools: &ToolRegistry,
        args: &Value,
        j: &Judgement,
    ) -> GateDecision {
        let (kind, subject, protected, leaving) =
            (j.kind, j.subject.as_deref(), j.protected, j.leaving);
        let name = call.function.name.as_str();
        if !self.front.borrow().can_ask() {
            if leaving {
                self.refused(name, RefusedWhy::LeavingNobodyToAsk);
                return GateDecision::Refuse(format!(
                    "Permission denied: running `{name}` outside the sandbox needs the user's approval, and the user could not be asked (no terminal). The call was not run; run it inside the sandbox, or tell the user what to run themselves."
                ));
            }
            let why = if protected {
                RefusedWhy::ProtectedNobodyToAsk
            } else {
                RefusedWhy::NobodyToAsk
            };
            self.refused(name, why);
            return GateDecision::Refuse(format!(
                "Permission denied: `{name}` needs the user's approval and the user could not be asked (no terminal). The call was not run."
            ));
        }
        let tool = tools.get(name).expect("checked by the caller");
        // Claude Code's `Notification`: the user is needed (a desktop notifier, a sound).
        if let Some(hooks) = self.hooks {
            hooks.notify(&format!(
                "new needs your permission to use {}",
                claude::tool_name(name)
            ));
        }
        let preview = tool
            .preview(args, tools.context())
            .unwrap_or_else(|| serde_json::to_string_pretty(args).unwrap_or_default());
        let session_rule = Self::rule_for(name, kind, subject, false);
        let always_rule = Self::rule_for(name, kind, subject, true);
        // "For this session" and "always" are offered only when their rule would allow this
        // very call next time: tried on a copy of the rules.
        let would_allow = |rule: &Rule, always: bool| {
            let mut policy = self.policy.clone();
            let added = if always {
                policy.add_project_rule(rule.clone())
            } else {
                policy.allow_for_session(rule.clone())
            };
            added.is_ok() && matches!(policy.check(name, kind, subject), Verdict::Allow)
        };
        let no_rule = !(would_allow(&session_rule, false) && would_allow(&always_rule, true));
        let question = Approval {
            tool: name.to_string(),
            call_id: call.id.clone(),
            label: self.label.clone(),
            kind,
            preview,
            protected,
            leaving,
            no_rule,
            session_rule,
            always_rule,
            rules_file: self.project_config.clone(),
        };
        let answer = self.front.borrow_mut().approve(&question);
        match answer {
            Answer::Once => GateDecision::Run,
            Answer::Interrupted => GateDecision::Interrupt,
            // Only yes or no: anything else is no.
            Answer::Session | Answer::Always if question.yes_or_no() => {
                GateDecision::Refuse(denied_by_user(name, ""))
            }
            Answer::Session => {
                if let Err(e) = self.policy.allow_for_session(question.session_rule) {
                    self.say(Notice::RuleNotAdded {
                        error: e.to_string(),
                    });
                }
                GateDecision::Run
            }
            Answer::Always => {
                let file = self.project_config.clone();
                match save_rule(&file, &question.always_rule) {
                    Ok(()) => {
                        if let Some((trust, workdir)) = &self.retrust
                            && let Ok(bytes) = fs::read(&file)
                        {
                            let _ = trust.trust(workdir, "config", &bytes);
                        }
                        let _ = self.policy.add_project_rule(question.always_rule);
                        self.say(Notice::RuleSaved { file });
                    }
                    Err(e) => self.say(Notice::RuleNotSaved {
                        file,
                        error: e.to_string(),
                    }),
                }
                GateDecision::Run
            }
            Answer::Deny(reason) => GateDecision::Refuse(denied_by_user(name, reason.trim())),
        }
    }

    fn ask_network(&mut self, host: &str, port: u16) -> bool {
        if !self.front.borrow().can_ask() {
            return false;
        }
        let file = layers::user_dir()
            .map(|d| d.join(CONFIG_FILE))
            .unwrap_or_default();
        let question = HostQuestion {
            host: host.to_string(),
            port,
            file: file.clone(),
        };
        let answer = self.front.borrow_mut().allow_host(&question);
        match answer {
            HostAnswer::No => false,
            HostAnswer::Session => true,
            HostAnswer::Always => {
                match save_host(&file, host) {
                    Ok(()) => self.say(Notice::RuleSaved { file }),
                    Err(e) => self.say(Notice::RuleNotSaved {
                        file,
                        error: e.to_string(),
                    }),
                }
                true
            }
        }
    }

    fn decide(
        &mut self,
        call: &ToolCall,
        tools: &ToolRegistry,
        args: &Value,
        hook: Option<Permission>,
    ) -> GateDecision {
        let name = call.function.name.as_str();
        let Some(j) = judge(self.policy, call, tools, args, hook) else {
            return GateDecision::Run; // unknown tools are answered by the registry
        };
        match j.verdict {
            Verdict::Allow | Verdict::Ask if j.protected || j.leaving => {
                self.ask(call, tools, args, &j)
            }
            Verdict::Allow => GateDecision::Run,
            Verdict::Deny(why) => {
                self.refused(name, RefusedWhy::Rule(why.clone()));
                denied(&why)
            }
            Verdict::Refuse(why) => {
                self.refused(name, RefusedWhy::Rule(why.clone()));
                refused(&why)
            }
            Verdict::Ask => self.ask(call, tools, args, &j),
        }
    }
}

/// What the model is told of a call the user denied, with their reason when they gave one.
fn denied_by_user(name: &str, reason: &str) -> String {
    let mut text = format!("The user denied this `{name}` call; it was not run.");
    if !reason.is_empty() {
        text.push_str(&format!(" Their reason: {reason}"));
    }
    text
}

/// The front end hears when the gate has decided (the REPL's line editor then gives the keys
/// typed during the turn back to the type-ahead), not between two questions of one decision.
impl Gate for SessionGate<'_, '_> {
    fn set_label(&mut self, label: Option<String>) {
        self.label = label;
    }

    fn unattended(&self) -> Option<Box<dyn Gate + Send>> {
        Some(Unattended::boxed(self.policy))
    }

    fn network(&mut self, host: &str, port: u16) -> bool {
        let yes = self.ask_network(host, port);
        self.front.borrow_mut().decided();
        yes
    }

    fn continue_uncompacted(&mut self) -> bool {
        let yes = {
            let mut front = self.front.borrow_mut();
            front.can_ask() && front.continue_uncompacted()
        };
        self.front.borrow_mut().decided();
        yes
    }

    fn check(
        &mut self,
        call: &ToolCall,
        tools: &ToolRegistry,
        args: &Value,
        hook: Option<Permission>,
    ) -> GateDecision {
        let decision = self.decide(call, tools, args, hook);
        self.front.borrow_mut().decided();
        decision
    }
}

/// The gate of work nobody watches (a subagent in the background): the same rules, sandbox and
/// blacklist, but what would ask the user is refused with a reason for the model.
pub struct Unattended {
    pub policy: Policy,
}

impl Unattended {
    /// One deciding by (a copy of) `policy` as it is now.
    pub fn boxed(policy: &Policy) -> Box<dyn Gate + Send> {
        Box::new(Unattended {
            policy: policy.clone(),
        })
    }
}

impl Gate for Unattended {
    fn check(
        &mut self,
        call: &ToolCall,
        tools: &ToolRegistry,
        args: &Value,
        hook: Option<Permission>,
    ) -> GateDecision {
        let name = call.function.name.as_str();
        let Some(j) = judge(&self.policy, call, tools, args, hook) else {
            return GateDecision::Run;
        };
        match j.verdict {
            Verdict::Allow if !j.protected && !j.leaving => GateDecision::Run,
            Verdict::Ask
                if !j.protected
                    && !j.leaving
                    && self.policy.background_allowed.iter().any(|t| t == name) =>
            {
                GateDecision::Run
            }
            Verdict::Allow | Verdict::Ask => GateDecision::Refuse(format!(
                "Permission denied: `{name}` needs the user's approval, and a subagent working in \
                 the background cannot ask. The call was not run; do without it, or say in your \
                 answer what the user should allow."
            )),
            Verdict::Deny(why) => denied(&why),
            Verdict::Refuse(why) => refused(&why),
        }
    }
}

fn denied(why: &str) -> GateDecision {
    GateDecision::Refuse(format!(
        "Permission denied: {why}. The call was not run; do not retry it."
    ))
}

fn refused(why: &str) -> GateDecision {
    GateDecision::Refuse(format!("Refused: {why}. The call was not run."))
}

/// What the rules, the hard limits and a hook say of a call, before anyone is asked.
struct Judgement {
    verdict: Verdict,
    kind: ToolKind,
    subject: Option<String>,
    /// It writes where the next session's settings live: asked every time, whatever the rules.
    protected: bool,
    /// A command that asks to run outside the OS sandbox: asked every time, `y` or `n`.
    leaving: bool,
}

/// Judges a call; None for a tool the registry does not know (it answers those itself).
fn judge(
    policy: &Policy,
    call: &ToolCall,
    tools: &ToolRegistry,
    args: &Value,
    hook: Option<Permission>,
) -> Option<Judgement> {
    use crate::hooks::Permission;
    let name = call.function.name.as_str();
    let tool = tools.get(name)?;
    // A `bash` call inside the OS sandbox is contained by the kernel; one that asks to leave it
    // is asked for every time, or refused where leaving is forbidden.
    let is_bash = name == "bash";
    let leaving = is_bash && builtin::leaves_sandbox(args, tools.context());
    let kind = match tool.kind() {
        ToolKind::Execute if is_bash && builtin::sandbox_for(args, tools.context()).is_some() => {
            ToolKind::Contained
        }
        kind => kind,
    };
    if leaving
        && tools
            .context()
            .os_sandbox
            .as_deref()
            .is_some_and(|s| !s.may_leave())
    {
        return Some(Judgement {
            verdict: Verdict::Refuse(
                "running outside the sandbox is forbidden by sandbox.allow_unsandboxed; run the command inside it".into(),
            ),
            kind,
            subject: tool.subject(args),
            protected: false,
            leaving,
        });
    }
    // File tools are judged by where the path really lands, `..` and links resolved.
    let subject = tool.subject(args).map(|s| match kind {
        ToolKind::Execute | ToolKind::Contained => s,
        _ => tools
            .workdir()
            .resolve(&s)
            .map(|p| tools.workdir().display(&p))
            .unwrap_or(s),
    });
    // The project's settings and git's hooks decide what runs next time: writing there is
    // asked every time, in every mode, whatever the rules allow.
    let protected = kind == ToolKind::Write
        && (subject.as_deref().is_some_and(is_protected)
            || tool.subject(args).is_some_and(|s| {
                let sandbox = tools.context().os_sandbox.as_deref();
                tools
                    .workdir()
                    .resolve(&s)
                    .is_ok_and(|p| sandbox.is_some_and(|os| os.protects(&p)))
            }));
    let verdict = match (policy.check(name, kind, subject.as_deref()), hook) {
        // A hook's "allow" spares the question a rule would ask; its "ask" asks where a rule
        // would allow. Denials (rules, the blacklist) stand.
        (Verdict::Ask, Some(Permission::Allow)) => Verdict::Allow,
        // What the user's trusted entry lists as `alwaysAllow` (a hook may still ask).
        (Verdict::Ask, hook) if tool.preapproved() && hook != Some(Permission::Ask) => {
            Verdict::Allow
        }
        (Verdict::Allow, Some(Permission::Ask)) => Verdict::Ask,
        (verdict, _) => verdict,
    };
    Some(Judgement {
        verdict,
        kind,
        subject,
        protected,
        leaving,
    })
}

/// Whether a path relative to WORKDIR (already resolved) lies in `.new/` or `.git/`, or is the
/// project's `AGENTS.md` or `CLAUDE.md` (which shape every later session's system prompt).
fn is_protected(relative: &str) -> bool {
    use std::path::Component;
    let mut parts = Path::new(relative)
        .components()
        .filter(|c| !matches!(c, Component::CurDir));
    let first = parts.next();
    let only = parts.next().is_none();
    // The settings, skills and agents of `new`, Claude Code, Codex and CodePilot, and the
    // instructions and MCP servers of later sessions.
    matches!(
        first,
        Some(Component::Normal(first)) if [".new", ".git", ".claude", ".agents", ".codex", ".codepilot"]
            .iter()
            .any(|d| first == *d)
            || (only
                && (first == ".mcp.json"
                    || INSTRUCTION_FILES.iter().any(|f| first == *f)))
    )
}

/// Adds a domain to `sandbox.network` in the user's config (a list; "none" becomes one).
fn save_host(path: &Path, host: &str) -> io::Result<()> {
    config::update_file(path, |object| {
        let sandbox = object
            .entry("sandbox")
            .or_insert_with(|| Value::Object(Default::default()));
        let Some(sandbox) = sandbox.as_object_mut() else {
            return Err("`sandbox` is not an object".to_string());
        };
        let network = sandbox
            .entry("network")
            .or_insert_with(|| Value::Array(Vec::new()));
        if network.as_str() == Some("none") {
            *network = Value::Array(Vec::new());
        }
        match network {
            Value::Array(list) => {
                if !list.iter().any(|h| h.as_str() == Some(host)) {
                    list.push(Value::String(host.to_string()));
                }
                Ok(())
            }
            Value::String(s) if s == "all" => Ok(()),
            _ => Err("`sandbox.network` is not a list".to_string()),
        }
    })
}

/// Appends a rule to the project config's `permissions`, keeping everything else in the file.
fn save_rule(path: &Path, rule: &Rule) -> io::Result<()> {
    let rule = serde_json::to_value(rule).map_err(io::Error::other)?;
    config::update_file(path, |object| {
        let list = object
            .entry("permissions")
            .or_insert_with(|| Value::Array(Vec::new()));
        let Some(list) = list.as_array_mut() else {
            return Err("`permissions` is not a list".to_string());
        };
        list.push(rule);
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::confine::Workdir;
    use crate::hooks::Permission;
    use crate::tools::{Mode, ToolContext};
    use std::path::Path;
    use std::time::Duration;

    fn registry(dir: &Path) -> ToolRegistry {
        ToolRegistry::builtin(
            ToolContext {
                workdir: Workdir::new(dir).unwrap(),
                bash_timeout: Duration::from_secs(5),
                hidden_env: Vec::new(),
                os_sandbox: None,
            },
            &[],
        )
        .unwrap()
    }

    fn decide(
        gate: &mut dyn Gate,
        tools: &ToolRegistry,
        name: &str,
        args: serde_json::Value,
        hook: Option<Permission>,
    ) -> GateDecision {
        let call = ToolCall::new("c1", name, args.to_string());
        gate.check(&call, tools, &args, hook)
    }

    fn unattended(mode: Mode, rules: Vec<Rule>) -> Unattended {
        Unattended {
            policy: Policy::new(mode, rules, vec![]).unwrap(),
        }
    }

    const CANNOT_ASK: &str = "a subagent working in the background cannot ask";

    #[test]
    fn unattended_runs_what_the_rules_allow_and_refuses_what_would_be_asked() {
        let dir = tempfile::tempdir().unwrap();
        let tools = registry(dir.path());
        let mut gate = unattended(Mode::Default, vec![]);
        let read = serde_json::json!({"filepath": "a.txt"});
        let write = serde_json::json!({"filepath": "a.txt", "content": "x"});
        let bash = serde_json::json!({"command": "ls"});
        assert_eq!(
            decide(&mut gate, &tools, "read_file", read.clone(), None),
            GateDecision::Run
        );
        assert_eq!(
            decide(&mut gate, &tools, "write_file", write.clone(), None),
            GateDecision::Run
        );
        // `bash` is asked in the default mode: refused, with the reason.
        assert!(matches!(
            decide(&mut gate, &tools, "bash", bash.clone(), None),
            GateDecision::Refuse(t) if t.contains(CANNOT_ASK) && t.contains("`bash`")
        ));
        // A hook's allow spares the question; its ask makes one where a rule would allow.
        assert_eq!(
            decide(&mut gate, &tools, "bash", bash, Some(Permission::Allow)),
            GateDecision::Run
        );
        assert!(matches!(
            decide(&mut gate, &tools, "write_file", write, Some(Permission::Ask)),
            GateDecision::Refuse(t) if t.contains(CANNOT_ASK)
        ));
        // Strict mode asks for writes: refused too.
        let mut strict = unattended(Mode::Strict, vec![]);
        assert!(matches!(
            decide(&mut strict, &tools, "write_file", serde_json::json!({"filepath": "b.txt", "content": "x"}), None),
            GateDecision::Refuse(t) if t.contains(CANNOT_ASK)
        ));
        assert_eq!(
            decide(&mut strict, &tools, "read_file", read, None),
            GateDecision::Run
        );
        // A tool the registry does not know is answered by the registry.
        assert_eq!(
            decide(
                &mut strict,
                &tools,
                "warp_drive",
                serde_json::json!({}),
                None
            ),
            GateDecision::Run
        );
    }

    #[test]
    fn unattended_keeps_denials_hard_limits_and_protected_paths() {
        let dir = tempfile::tempdir().unwrap();
        let tools = registry(dir.path());
        let deny = Rule {
            tool: "write_file".into(),
            pattern: Some("secret/**".into()),
            action: Action::Deny,
            reason: Some("not there".into()),
        };
        let mut gate = unattended(Mode::Permissive, vec![deny]);
        // A rule's denial stands, even against a hook's allow, and says why.
        assert!(matches!(
            decide(&mut gate, &tools, "write_file", serde_json::json!({"filepath": "secret/k", "content": "x"}), Some(Permission::Allow)),
            GateDecision::Refuse(t) if t.starts_with("Permission denied:") && t.contains("not there") && !t.contains(CANNOT_ASK)
        ));
        // The blacklist refuses whatever the mode.
        assert!(matches!(
            decide(&mut gate, &tools, "bash", serde_json::json!({"command": "rm -rf /"}), None),
            GateDecision::Refuse(t) if t.starts_with("Refused:")
        ));
        // Writing where the next session's settings live is asked every time: never unattended,
        // also through `..` (judged where the path lands).
        for path in [
            ".new/config.json",
            "sub/../.git/hooks/pre-commit",
            "AGENTS.md",
        ] {
            assert!(
                matches!(
                    decide(&mut gate, &tools, "write_file", serde_json::json!({"filepath": path, "content": "x"}), None),
                    GateDecision::Refuse(t) if t.contains(CANNOT_ASK)
                ),
                "{path}"
            );
        }
        // Permissive runs everything else, commands too.
        assert_eq!(
            decide(
                &mut gate,
                &tools,
                "bash",
                serde_json::json!({"command": "ls"}),
                None
            ),
            GateDecision::Run
        );
        assert_eq!(
            decide(
                &mut gate,
                &tools,
                "write_file",
                serde_json::json!({"filepath": "docs/AGENTS.md", "content": "x"}),
                None
            ),
            GateDecision::Run
        );
    }
}
