//! The REPL's commands as data: one table drives dispatch, `/help` and Tab completion.

use new_core::config::Lang;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandId {
    Tree,
    Branches,
    Branch,
    Btw,
    Undo,
    Merge,
    Compare,
    Prev,
    Next,
    Retry,
    Edit,
    List,
    Switch,
    New,
    Clear,
    Title,
    Delete,
    Search,
    Export,
    Dump,
    Compact,
    Context,
    Init,
    Permissions,
    Sandbox,
    Model,
    Models,
    Setup,
    Status,
    Skills,
    Memory,
    Remember,
    Diff,
    Restore,
    Checkpoints,
    Mcp,
    Hooks,
    Agents,
    Tasks,
    Help,
    Exit,
}

pub struct CommandSpec {
    pub id: CommandId,
    /// Names, the first being the one shown; all start with `/`.
    pub names: &'static [&'static str],
    pub args: &'static str,
    /// The key of its one-line help in [`super::text`].
    pub help: &'static str,
    /// Whether Tab after the command completes conversation ids.
    pub takes_conversation: bool,
}

impl CommandSpec {
    pub fn help(&self, lang: Lang) -> String {
        super::text::tr(lang, self.help, &[])
    }
}

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        id: CommandId::Tree,
        names: &["/tree"],
        args: "[--full]",
        help: "help_tree",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Branches,
        names: &["/branches"],
        args: "",
        help: "help_branches",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Branch,
        names: &["/branch"],
        args: "[NAME | -d NAME]",
        help: "help_branch",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Btw,
        names: &["/btw"],
        args: "QUESTION",
        help: "help_btw",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Undo,
        names: &["/undo"],
        args: "",
        help: "help_undo",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Merge,
        names: &["/merge"],
        args: "N | NAME [--files]",
        help: "help_merge",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Compare,
        names: &["/compare"],
        args: "",
        help: "help_compare",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Prev,
        names: &["/prev"],
        args: "",
        help: "help_prev",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Next,
        names: &["/next"],
        args: "",
        help: "help_next",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Retry,
        names: &["/retry"],
        args: "[--model NAME] [--n K]",
        help: "help_retry",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Edit,
        names: &["/edit"],
        args: "[N]",
        help: "help_edit",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::List,
        names: &["/list", "/sessions"],
        args: "[all]",
        help: "help_list",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Switch,
        names: &["/switch", "/resume"],
        args: "<id>",
        help: "help_switch",
        takes_conversation: true,
    },
    CommandSpec {
        id: CommandId::New,
        names: &["/new"],
        args: "",
        help: "help_new",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Clear,
        names: &["/clear"],
        args: "",
        help: "help_clear",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Title,
        names: &["/title"],
        args: "[TEXT]",
        help: "help_title",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Delete,
        names: &["/delete"],
        args: "<id>",
        help: "help_delete",
        takes_conversation: true,
    },
    CommandSpec {
        id: CommandId::Search,
        names: &["/search"],
        args: "<text>",
        help: "help_search",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Export,
        names: &["/export"],
        args: "[--json|--html] [FILE]",
        help: "help_export",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Dump,
        names: &["/dump"],
        args: "",
        help: "help_dump",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Setup,
        names: &["/setup"],
        args: "",
        help: "help_setup",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Init,
        names: &["/init"],
        args: "",
        help: "help_init",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Permissions,
        names: &["/permissions"],
        args: "[MODE]",
        help: "help_permissions",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Sandbox,
        names: &["/sandbox"],
        args: "",
        help: "help_sandbox",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Model,
        names: &["/model"],
        args: "[NAME]",
        help: "help_model",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Models,
        names: &["/models"],
        args: "",
        help: "help_models",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Compact,
        names: &["/compact"],
        args: "[focus]",
        help: "help_compact",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Context,
        names: &["/context"],
        args: "",
        help: "help_context",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Memory,
        names: &["/memory"],
        args: "[forget NAME]",
        help: "help_memory",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Remember,
        names: &["/remember"],
        args: "[--project] TEXT",
        help: "help_remember",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Diff,
        names: &["/diff"],
        args: "[N [M]]",
        help: "help_diff",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Restore,
        names: &["/restore"],
        args: "",
        help: "help_restore",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Checkpoints,
        names: &["/checkpoints"],
        args: "[gc]",
        help: "help_checkpoints",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Mcp,
        names: &["/mcp"],
        args: "[restart NAME]",
        help: "help_mcp",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Hooks,
        names: &["/hooks"],
        args: "",
        help: "help_hooks",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Agents,
        names: &["/agents"],
        args: "",
        help: "help_agents",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Tasks,
        names: &["/tasks"],
        args: "[stop ID]",
        help: "help_tasks",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Status,
        names: &["/status"],
        args: "",
        help: "help_status",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Skills,
        names: &["/skills"],
        args: "[enable|disable NAME]",
        help: "help_skills",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Help,
        names: &["/help", "/?"],
        args: "[COMMAND]",
        help: "help_help",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Exit,
        names: &["/exit", "/quit"],
        args: "",
        help: "help_exit",
        takes_conversation: false,
    },
];

/// What a line of input asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input<'a> {
    /// Text for the model.
    Chat(&'a str),
    /// `/N`: move the cursor to node N.
    Goto(usize),
    Command(CommandId, &'a str),
    /// A `/word` that is no command.
    Unknown(&'a str),
    Empty,
}

/// Classifies one line. `//text` sends `/text` as chat.
pub fn parse(line: &str) -> Input<'_> {
    let trimmed = line.trim();
    if trimmed.is_empty() {
        return Input::Empty;
    }
    if trimmed.starts_with("//") {
        return Input::Chat(&trimmed[1..]);
    }
    if !trimmed.starts_with('/') {
        return Input::Chat(line.trim_matches(|c| c == '\n' || c == '\r'));
    }
    let (word, rest) = match trimmed.find(char::is_whitespace) {
        Some(i) => (&trimmed[..i], trimmed[i..].trim()),
        None => (trimmed, ""),
    };
    if let Some(digits) = word.strip_prefix('/')
        && !digits.is_empty()
        && digits.chars().all(|c| c.is_ascii_digit())
        && rest.is_empty()
    {
        return match digits.parse() {
            Ok(n) => Input::Goto(n),
            Err(_) => Input::Unknown(word),
        };
    }
    match COMMANDS.iter().find(|c| c.names.contains(&word)) {
        Some(spec) => Input::Command(spec.id, rest),
        None => Input::Unknown(word),
    }
}

/// The command a mistyped `word` most likely meant: the one it begins, or one a letter or two
/// away (`/tre`, `/tere`: `/tree`).
pub fn nearest(word: &str) -> Option<&'static str> {
    if word.chars().count() < 3 {
        return None;
    }
    if let [only] = complete_names(word)[..] {
        return Some(only);
    }
    // A short word is one letter off at most: `/x1` is no `/?`.
    let most = if word.chars().count() <= 4 { 1 } else { 2 };
    COMMANDS
        .iter()
        .flat_map(|c| c.names.iter().copied())
        .filter(|name| name.chars().count() >= 3)
        .map(|name| (distance(word, name), name))
        .filter(|&(d, _)| d <= most)
        .min_by_key(|&(d, _)| d)
        .map(|(_, name)| name)
}

/// How many letters must change (added, removed or replaced) to turn `a` into `b`.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// Command names starting with `prefix`, for completion.
pub fn complete_names(prefix: &str) -> Vec<&'static str> {
    COMMANDS
        .iter()
        .flat_map(|c| c.names.iter().copied())
        .filter(|n| n.starts_with(prefix))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_lines() {
        assert_eq!(parse("hello"), Input::Chat("hello"));
        assert_eq!(parse("  "), Input::Empty);
        assert_eq!(parse("/3"), Input::Goto(3));
        assert_eq!(parse("/0"), Input::Goto(0));
        assert_eq!(
            parse("/tree --full"),
            Input::Command(CommandId::Tree, "--full")
        );
        assert_eq!(
            parse("/switch  ab12 "),
            Input::Command(CommandId::Switch, "ab12")
        );
        assert_eq!(parse("/quit"), Input::Command(CommandId::Exit, ""));
        assert_eq!(parse("/resume ab"), Input::Command(CommandId::Switch, "ab"));
        assert_eq!(parse("/sessions"), Input::Command(CommandId::List, ""));
        assert_eq!(parse("/frobnicate"), Input::Unknown("/frobnicate"));
        assert_eq!(parse("/3x"), Input::Unknown("/3x"));
        assert_eq!(parse("/3 extra"), Input::Unknown("/3"));
        assert_eq!(
            parse("/99999999999999999999999"),
            Input::Unknown("/99999999999999999999999")
        );
        assert_eq!(
            parse("//usr/bin is a folder"),
            Input::Chat("/usr/bin is a folder")
        );
    }

    #[test]
    fn a_mistyped_command_finds_the_one_meant() {
        assert_eq!(nearest("/tre"), Some("/tree"));
        assert_eq!(nearest("/tere"), Some("/tree"));
        assert_eq!(nearest("/brnches"), Some("/branches"));
        assert_eq!(nearest("/zzzzzz"), None);
        assert_eq!(nearest("/t"), None);
        assert_eq!(nearest("/x1"), None);
    }

    #[test]
    fn completes_from_the_table() {
        assert_eq!(
            complete_names("/s"),
            [
                "/sessions",
                "/switch",
                "/search",
                "/setup",
                "/sandbox",
                "/status",
                "/skills"
            ]
        );
        assert_eq!(complete_names("/p"), ["/prev", "/permissions"]);
        assert_eq!(complete_names("/e"), ["/edit", "/export", "/exit"]);
        assert_eq!(complete_names("/mo"), ["/model", "/models"]);
        assert_eq!(complete_names("/ex"), ["/export", "/exit"]);
        assert!(complete_names("/zzz").is_empty());
    }
}
