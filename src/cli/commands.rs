//! The REPL's commands as data: one table drives dispatch, `/help` and Tab completion.

use crate::config::Lang;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandId {
    Tree,
    Branches,
    Prev,
    Next,
    Retry,
    Edit,
    List,
    Switch,
    New,
    Title,
    Delete,
    Search,
    Export,
    Dump,
    Permissions,
    Model,
    Models,
    Skills,
    Help,
    Exit,
}

pub struct CommandSpec {
    pub id: CommandId,
    /// Names, the first being the one shown; all start with `/`.
    pub names: &'static [&'static str],
    pub args: &'static str,
    pub help_en: &'static str,
    pub help_zh: &'static str,
    /// Whether Tab after the command completes conversation ids.
    pub takes_conversation: bool,
}

impl CommandSpec {
    pub fn help(&self, lang: Lang) -> &'static str {
        match lang {
            Lang::En => self.help_en,
            Lang::Zh => self.help_zh,
        }
    }
}

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        id: CommandId::Tree,
        names: &["/tree"],
        args: "[--full]",
        help_en: "draw this conversation's tree; every node gets a number [N]",
        help_zh: "显示当前对话树，每个节点都有编号 [N]",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Branches,
        names: &["/branches"],
        args: "",
        help_en: "list the tip of every branch; /N jumps to one",
        help_zh: "列出每个分支的末端；用 /N 跳转",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Prev,
        names: &["/prev"],
        args: "",
        help_en: "go to the previous alternative at the nearest fork above",
        help_zh: "切换到上方最近分叉处的上一个分支",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Next,
        names: &["/next"],
        args: "",
        help_en: "go to the next alternative at the nearest fork above",
        help_zh: "切换到上方最近分叉处的下一个分支",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Retry,
        names: &["/retry"],
        args: "",
        help_en: "a new answer to the same message, as a new branch (the old one stays)",
        help_zh: "对同一条消息重新回答，作为新分支（旧回答保留）",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Edit,
        names: &["/edit"],
        args: "[N]",
        help_en: "edit user message N (default: the last one) into a new branch and answer it",
        help_zh: "编辑用户消息 N（默认最后一条），作为新分支并回答",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::List,
        names: &["/list", "/sessions"],
        args: "[all]",
        help_en: "list this project's conversations, newest first",
        help_zh: "列出本项目的对话，最新的在前",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Switch,
        names: &["/switch", "/resume"],
        args: "<id>",
        help_en: "make another conversation current (an unambiguous id prefix is enough)",
        help_zh: "切换到另一个对话（可用无歧义的 id 前缀）",
        takes_conversation: true,
    },
    CommandSpec {
        id: CommandId::New,
        names: &["/new"],
        args: "",
        help_en: "start a new conversation (role and skills are read again)",
        help_zh: "开始新对话（重新读取角色和技能）",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Title,
        names: &["/title"],
        args: "[TEXT]",
        help_en: "name this conversation (shown by /list); without TEXT, show its title",
        help_zh: "为当前对话命名（/list 中显示）；不带参数则显示标题",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Delete,
        names: &["/delete"],
        args: "<id>",
        help_en: "move a conversation to the trash folder in DATADIR (asks first)",
        help_zh: "把对话移到 DATADIR 的回收站（会先确认）",
        takes_conversation: true,
    },
    CommandSpec {
        id: CommandId::Search,
        names: &["/search"],
        args: "<text>",
        help_en: "find messages containing the text in all of this project's conversations",
        help_zh: "在本项目所有对话中搜索包含该文字的消息",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Export,
        names: &["/export"],
        args: "[--json] [FILE]",
        help_en: "write this branch as Markdown (--json: the whole tree) to FILE or ./<id>.md",
        help_zh: "把当前分支导出为 Markdown（--json：整棵树）到 FILE 或 ./<id>.md",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Dump,
        names: &["/dump"],
        args: "",
        help_en: "write exactly what the model sees (system prompt, branch, tools) beside the conversation file",
        help_zh: "把模型实际看到的内容（系统提示、分支、工具）写到对话文件旁",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Permissions,
        names: &["/permissions"],
        args: "[MODE]",
        help_en: "show the permission mode and rules; with MODE (strict, default, permissive), switch",
        help_zh: "显示权限模式与规则；带 MODE（strict、default、permissive）则切换",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Model,
        names: &["/model"],
        args: "[NAME]",
        help_en: "show the provider and model; with NAME, use that model for the rest of the session",
        help_zh: "显示服务与模型；带 NAME 则在本次会话中改用该模型",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Models,
        names: &["/models"],
        args: "",
        help_en: "list the models the server offers",
        help_zh: "列出服务提供的模型",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Skills,
        names: &["/skills"],
        args: "",
        help_en: "list skills and whether each is enabled",
        help_zh: "列出技能及其启用状态",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Help,
        names: &["/help", "/?"],
        args: "",
        help_en: "show this help",
        help_zh: "显示帮助",
        takes_conversation: false,
    },
    CommandSpec {
        id: CommandId::Exit,
        names: &["/exit", "/quit"],
        args: "",
        help_en: "leave (Ctrl-D does the same)",
        help_zh: "退出（Ctrl-D 同样）",
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
    fn completes_from_the_table() {
        assert_eq!(
            complete_names("/s"),
            ["/sessions", "/switch", "/search", "/skills"]
        );
        assert_eq!(complete_names("/p"), ["/prev", "/permissions"]);
        assert_eq!(complete_names("/e"), ["/edit", "/export", "/exit"]);
        assert_eq!(complete_names("/mo"), ["/model", "/models"]);
        assert_eq!(complete_names("/ex"), ["/export", "/exit"]);
        assert!(complete_names("/zzz").is_empty());
    }
}
