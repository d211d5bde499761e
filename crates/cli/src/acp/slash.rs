//! The REPL's commands that make sense in an editor, as ACP commands: a prompt that starts with
//! `/NAME` runs one, and its answer is the agent's text (`/tree` draws the tree, `/N` moves to
//! node N). What a command means is the session's; this only words it.

use super::front::Turn;
use crate::tree_view::{describe, push_tree};
use new_core::config::Lang;
use new_core::conversation::valid_branch_name;
use new_core::session::{Ended, Session};
use new_core::skill::Shelf;

/// One command an editor is offered.
pub struct Command {
    pub name: &'static str,
    pub about: &'static str,
    /// What its input is, when it takes one.
    pub hint: &'static str,
}

pub const COMMANDS: &[Command] = &[
    Command {
        name: "tree",
        about: "Draw the conversation's tree (move with /N)",
        hint: "",
    },
    Command {
        name: "branches",
        about: "List the branches' tips",
        hint: "",
    },
    Command {
        name: "branch",
        about: "Name the branch at the cursor",
        hint: "NAME",
    },
    Command {
        name: "retry",
        about: "Answer the last message again, as a new branch",
        hint: "",
    },
    Command {
        name: "undo",
        about: "Take back your last message (it stays in the tree, folded)",
        hint: "",
    },
    Command {
        name: "btw",
        about: "Ask a side question that does not change the conversation",
        hint: "QUESTION",
    },
    Command {
        name: "merge",
        about: "Bring another branch's conclusion into this one",
        hint: "N or NAME",
    },
    Command {
        name: "compact",
        about: "Summarise the branch so far to free the context",
        hint: "[FOCUS]",
    },
    Command {
        name: "context",
        about: "How full the context window is",
        hint: "",
    },
    Command {
        name: "model",
        about: "Show or change the model",
        hint: "[NAME]",
    },
    Command {
        name: "skills",
        about: "List the skills",
        hint: "",
    },
];

/// `/NAME ARGS` (or `/N`): the name and the rest; None for a message.
pub fn parse(text: &str) -> Option<(&str, &str)> {
    let rest = text.trim().strip_prefix('/')?;
    let (name, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    (!name.is_empty() && !name.contains('/')).then_some((name, args.trim()))
}

/// Runs a command; what it says goes to `turn` as the agent's text. A turn it starts (`/retry`,
/// `/btw`, a skill) ends as turns do.
pub async fn run(
    engine: &mut Session,
    turn: &mut Turn<'_>,
    name: &str,
    args: &str,
) -> Option<Ended> {
    let lang = Lang::En;
    if let Ok(n) = name.parse::<usize>() {
        match engine.node(n) {
            Ok(id) => {
                if let Err(e) = engine.move_to(&id) {
                    turn.say(&e.to_string());
                } else {
                    let m = engine.chat.conversation().current();
                    turn.say(&format!(
                        "→ [{n}] {}\nThe next message continues from here.",
                        describe(m, lang)
                    ));
                }
            }
            Err(e) => turn.say(&e.to_string()),
        }
        return None;
    }
    match name {
        "tree" => {
            let mut text = format!("Conversation {}\n", engine.chat.id());
            push_tree(
                &mut text,
                engine.chat.conversation(),
                args == "--full",
                lang,
                &|_, drawn| drawn.to_string(),
            );
            turn.say(&format!("```\n{}\n```", text.trim_end()));
        }
        "branches" => {
            let c = engine.chat.conversation();
            let current = c.tip(c.cursor()).map(|m| m.id.clone());
            let mut text = String::new();
            for (number, (_, m)) in c.preorder().into_iter().enumerate() {
                if !c.is_leaf(&m.id) {
                    continue;
                }
                let mark = if Some(&m.id) == current.as_ref() {
                    "*"
                } else {
                    " "
                };
                let names = c.names_of(&m.id).join(", ");
                text.push_str(&format!(
                    "{mark} {names} [{number}] {}\n",
                    describe(m, lang)
                ));
            }
            if text.is_empty() {
                text = "No branches yet.".into();
            }
            turn.say(&format!("```\n{}\n```", text.trim_end()));
        }
        "branch" => {
            if !valid_branch_name(args) {
                turn.say(
                    "A branch name is one word of letters, digits, `-`, `_` or `.`, not a number.",
                );
            } else if !engine.chat.is_persisted() {
                turn.say("This conversation has no message yet: there is nothing to name.");
            } else {
                let tip = engine.chat.conversation().cursor().to_string();
                match engine.chat.name_branch(args, &tip) {
                    Ok(()) => turn.say(&format!("This branch is named {args}.")),
                    Err(e) => turn.say(&e.to_string()),
                }
            }
        }
        "retry" => match engine.retry_from() {
            Ok(_) => return Some(engine.answer(turn).await),
            Err(e) => turn.say(&e.to_string()),
        },
        "undo" => match engine.undo() {
            Ok(undone) => turn.say(&format!(
                "Undone [{}]: the next message continues from where it was sent.",
                undone.n
            )),
            Err(e) => turn.say(&e.to_string()),
        },
        "btw" => {
            if args.is_empty() {
                turn.say("/btw needs a question.");
            } else {
                return match engine.btw(args, turn).await {
                    Ok(btw) => Some(btw.end),
                    Err(e) => {
                        turn.say(&e.to_string());
                        None
                    }
                };
            }
        }
        "merge" => match engine.merge_tip(args) {
            Ok(tip) => match engine.merge(&tip, &mut |_, _| {}).await {
                Ok(merged) => turn.say(&format!("Merged {}:\n\n{}", merged.from, merged.summary)),
                Err(e) => turn.say(&e.to_string()),
            },
            Err(e) => turn.say(&e.to_string()),
        },
        "compact" => {
            let focus = (!args.is_empty()).then_some(args);
            engine.compact(focus, turn).await;
            turn.say("Compacted.");
        }
        "context" => {
            let (used, window) = engine.context_use();
            turn.say(&format!(
                "{used} of {window} tokens in use ({}%).",
                used * 100 / window.max(1)
            ));
        }
        "model" => {
            if args.is_empty() {
                turn.say(&format!("The model is {}.", engine.config.model));
            } else {
                match engine.set_model(args) {
                    Ok(()) => turn.say(&format!("The model is now {args}.")),
                    Err(e) => turn.say(&e.to_string()),
                }
            }
        }
        "skills" => {
            let mut names: Vec<String> = engine
                .skills
                .all()
                .map(|s| format!("- {}: {}", s.name, s.description))
                .collect();
            names.sort();
            turn.say(&if names.is_empty() {
                "No skills.".to_string()
            } else {
                names.join("\n")
            });
        }
        skill if engine.skills.get(skill).is_some() => {
            let skill = engine.skills.get(skill).cloned().expect("just found");
            let mut text = engine
                .tools
                .source::<Shelf>()
                .unwrap_or_default()
                .instructions(&skill, engine.config.skill.max_bytes);
            if let Some(dir) = &skill.dir {
                engine.tools.workdir().add_read_root(dir.clone());
                text.push_str(&format!(
                    "\n\n[This skill's folder is {}: its files can be read with read_file and grep.]",
                    dir.display()
                ));
            }
            if !args.is_empty() {
                text.push_str(&format!("\n\n<user_args>\n{args}\n</user_args>"));
            }
            engine.skill_tools = skill.allowed_tools.clone();
            let end = engine.send(&text, turn).await;
            engine.skill_tools = None;
            return end;
        }
        _ => {
            // Not a command here: a message, as typed (`/etc/hosts is…`).
            let text = format!("/{name} {args}");
            return engine.send(text.trim_end(), turn).await;
        }
    }
    None
}
