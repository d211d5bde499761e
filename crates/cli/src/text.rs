//! One home for what the REPL says: every sentence in English and Chinese, by key, with named
//! placeholders (`{id}`); `{n:message}` is a count with its English plural (`1 message`, `2
//! messages`), `{role:a}` a word with its English article (`an assistant`). A test checks that every key has both languages with the same placeholders, that
//! every key the code uses exists, and that none is left unused.
use std::error::Error as StdError;

use new_core::config::CONFIG_FILE;
use new_core::config::Lang;
use new_core::escape;
use new_core::hooks::HookFailure;
use new_core::llm::ProviderKind;
use new_core::tools::builtin;
use std::collections::HashMap;
use std::fmt::Display;
use std::sync::OnceLock;

/// (key, English, Chinese).
pub const TEXTS: &[(&str, &str, &str)] = &[
    (
        "writes_to_new_and_git_always",
        "writes to .new/, .git/ and the project's AGENTS.md always need approval and there is no terminal to ask, so it was not run",
        "写入 .new/、.git/ 和项目的 AGENTS.md 总是需要批准，但没有终端可询问，因此未运行",
    ),
    (
        "needs_approval_and_there_is_no",
        "needs approval and there is no terminal to ask, so it was not run (allow it with --permission-mode or a rule)",
        "需要批准，但没有终端可询问，因此未运行（可用 --permission-mode 或规则允许）",
    ),
    (
        "this_writes_inside_new_or_git",
        "this writes to .new/, .git/ or AGENTS.md (settings, hooks, instructions): it is asked every time · y: allow once · n: deny",
        "此操作写入 .new/、.git/ 或 AGENTS.md（设置、钩子、指令）：每次都会询问 · y：允许一次 · n：拒绝",
    ),
    (
        "leaving_the_sandbox_needs_a_terminal",
        "running outside the sandbox always needs approval and there is no terminal to ask, so it was not run",
        "在沙箱外运行总是需要批准，但没有终端可询问，因此未运行",
    ),
    (
        "this_leaves_the_sandbox",
        "this command asks to run outside the sandbox: it is asked every time · y: allow once · n: deny",
        "此命令要求在沙箱外运行：每次都会询问 · y：允许一次 · n：拒绝",
    ),
    (
        "network_question",
        "a command wants to reach {host}:{port}, which sandbox.network does not allow · s: allow it for this session · a: always (saved in {file}) · n: refuse",
        "一个命令想要连接 {host}:{port}，sandbox.network 不允许 · s：本会话允许 · a：总是允许（保存在 {file}） · n：拒绝",
    ),
    (
        "no_rule_can_allow_this",
        "no rule can allow this command as written (it writes to a file with >, runs a substitution, or goes through a wrapper), so \"for this session\" and \"always\" would not stick: it is asked every time · y: allow once · n: deny",
        "按原样书写的此命令无法被任何规则允许（它用 > 写入文件、含命令替换或经由包装程序），因此“本会话”和“总是”不会生效：每次都会询问 · y：允许一次 · n：拒绝",
    ),
    (
        "not_an_answer_kept",
        "“{line}” is no answer to that question: taken as no, and kept as your next input",
        "“{line}”不是对该问题的回答：按“否”处理，并保留为你的下一条输入",
    ),
    ("answer_s_a_or_n", "answer s, a or n", "请回答 s、a 或 n"),
    (
        "one_key_answers",
        " · one key answers, no Enter (Esc: n)",
        " · 按一个键即可回答，无需回车（Esc：n）",
    ),
    (
        "typed_ahead_kept",
        "what was typed meanwhile is kept as your next input; answer with one key",
        "期间输入的内容已保留为你的下一条输入；请按一个键回答",
    ),
    ("answer_y_or_n", "answer y or n", "请回答 y 或 n"),
    (
        "mcp_passes_a_secret",
        "⚠ passes the variable {name} on: a secret of yours",
        "⚠ 会传出变量 {name}：你的一个机密",
    ),
    (
        "mcp_secret_question",
        "{entry}The project's MCP server {name} would get {secrets}. Let it have them? [y/N] ",
        "{entry}项目的 MCP 服务器 {name} 会得到 {secrets}。允许吗？[y/N] ",
    ),
    (
        "mcp_secret_refused",
        "the project's MCP server {name} references {secrets} and was not confirmed on its own: it does not run (confirm it on a terminal, or move it to your own config)",
        "项目的 MCP 服务器 {name} 引用了 {secrets}，且未单独确认：它不会运行（请在终端上确认，或把它移到你自己的配置中）",
    ),
    (
        "help_sandbox",
        "what the sandbox of bash, hooks and MCP servers enforces: writable, hidden, reachable",
        "bash、钩子和 MCP 服务器的沙箱限制了什么：可写、隐藏、可达",
    ),
    (
        "sandbox_nothing_runs",
        "no sandbox: this session runs no program (no bash, hooks or MCP servers)",
        "没有沙箱：本会话不运行任何程序（没有 bash、钩子或 MCP 服务器）",
    ),
    (
        "sandbox_on",
        "sandbox: on (writes in the working folder and $TMPDIR only; network {network})",
        "沙箱：开启（只能写入工作文件夹和 $TMPDIR；网络：{network}）",
    ),
    (
        "sandbox_workdir_is_home",
        "sandbox: the working folder is your home folder: commands may write anywhere in it, except the shell's start-up files, git's configuration, ~/.config/autostart, ~/.config/systemd and ~/.local/bin, which stay read-only",
        "沙箱：工作文件夹就是你的主文件夹：命令可以写入其中任何地方，但 shell 启动文件、git 配置、~/.config/autostart、~/.config/systemd 和 ~/.local/bin 保持只读",
    ),
    ("sandbox_network_off", "off", "关闭"),
    ("sandbox_network_on", "on", "开启"),
    (
        "sandbox_off",
        "sandbox: off ({why}); bash commands are asked for",
        "沙箱：关闭（{why}）；bash 命令都会询问",
    ),
    ("sandbox_none_listed", "(none)", "（无）"),
    ("sandbox_writable", "  writable: {list}", "  可写：{list}"),
    ("sandbox_devices", "  devices: {list}", "  设备：{list}"),
    (
        "sandbox_read_only",
        "  read-only inside: {list}",
        "  其中只读：{list}",
    ),
    (
        "sandbox_not_there_yet",
        "  not there yet (a command could create them; new says so when one does): {list}",
        "  尚不存在（命令可能创建它们；一旦创建，new 会告诉你）：{list}",
    ),
    ("sandbox_hidden", "  hidden: {list}", "  隐藏：{list}"),
    (
        "sandbox_network",
        "  network: {network}",
        "  网络：{network}",
    ),
    (
        "sandbox_reach_none",
        "none (a loopback of its own only)",
        "无（只有自己的回环接口）",
    ),
    (
        "sandbox_reach_all",
        "all (as outside the sandbox)",
        "全部（与沙箱外相同）",
    ),
    (
        "sandbox_reach_hosts",
        "through new's proxy to {hosts} only",
        "只能通过 new 的代理访问 {hosts}",
    ),
    (
        "sandbox_leaving_asked",
        "  leaving it: a command the model runs with \"sandbox\": false is asked for every time",
        "  离开沙箱：模型以 \"sandbox\": false 运行的命令每次都会询问",
    ),
    (
        "sandbox_leaving_forbidden",
        "  leaving it: forbidden (sandbox.allow_unsandboxed is false)",
        "  离开沙箱：禁止（sandbox.allow_unsandboxed 为 false）",
    ),
    (
        "sandbox_reads_elsewhere",
        "  reads elsewhere are allowed; the file tools keep their own checks; hooks and MCP servers from the project run inside it, yours as configured",
        "  其他位置可以读取；文件工具有自己的检查；项目的钩子和 MCP 服务器在沙箱内运行，你自己的按配置运行",
    ),
    (
        "sandbox_asks_every_command",
        "  every bash command is asked for (in permissive mode: run), as without a sandbox",
        "  每个 bash 命令都会询问（permissive 模式下直接运行），与没有沙箱时相同",
    ),
    (
        "err_off_disabled",
        "sandbox.enabled is false in the config",
        "配置中 sandbox.enabled 为 false",
    ),
    (
        "err_off_unsupported",
        "not available on {os} yet",
        "{os} 上暂不可用",
    ),
    (
        "err_off_helper_failed",
        "the helper failed ({status})",
        "沙箱辅助程序失败（{status}）",
    ),
    (
        "err_off_cannot_start",
        "cannot start the sandbox helper {path}: {cause}",
        "无法启动沙箱辅助程序 {path}：{cause}",
    ),
    (
        "err_sandbox_temp_folder",
        "creating the sandbox's temp folder {path}: {cause}",
        "创建沙箱的临时文件夹 {path} 失败：{cause}",
    ),
    (
        "err_sandbox_no_proxy",
        "no proxy is configured",
        "没有配置代理",
    ),
    (
        "err_sandbox_proxy",
        "starting the network proxy: {cause}",
        "启动网络代理失败：{cause}",
    ),
    (
        "err_sandbox_describe",
        "writing the sandbox description: {cause}",
        "写入沙箱描述失败：{cause}",
    ),
    (
        "err_setup_no_spec",
        "no sandbox description given",
        "没有给出沙箱描述",
    ),
    (
        "err_setup_bad_spec",
        "reading the sandbox description: {cause}",
        "读取沙箱描述失败：{cause}",
    ),
    (
        "err_setup_no_program",
        "no program to run",
        "没有要运行的程序",
    ),
    (
        "err_setup_fork",
        "fork: {cause}",
        "创建进程（fork）失败：{cause}",
    ),
    (
        "err_setup_exec",
        "cannot run `{program}`: {cause}",
        "无法运行 `{program}`：{cause}",
    ),
    (
        "err_setup_wait",
        "waiting: {cause}",
        "等待进程失败：{cause}",
    ),
    (
        "err_setup_enter_folder",
        "entering {path}: {cause}",
        "进入 {path} 失败：{cause}",
    ),
    (
        "err_setup_unshare",
        "user namespaces are unavailable (unshare: {cause})",
        "用户命名空间不可用（unshare：{cause}）",
    ),
    (
        "err_setup_write_proc",
        "writing {path}: {cause}",
        "写入 {path} 失败：{cause}",
    ),
    (
        "err_setup_private_mounts",
        "making the mounts private: {cause}",
        "将挂载设为私有失败：{cause}",
    ),
    (
        "err_setup_pin",
        "pinning {path}: {cause}",
        "固定 {path} 失败：{cause}",
    ),
    (
        "err_setup_hide",
        "hiding {path}: {cause}",
        "隐藏 {path} 失败：{cause}",
    ),
    (
        "err_setup_shared_memory",
        "mounting a private /dev/shm: {cause}",
        "挂载私有的 /dev/shm 失败：{cause}",
    ),
    (
        "err_setup_protect",
        "protecting {path}: {cause}",
        "保护 {path} 失败：{cause}",
    ),
    (
        "err_setup_read_only_outside",
        "making what lies outside the writable folders read-only: {cause}",
        "将可写文件夹以外的一切设为只读失败：{cause}",
    ),
    (
        "err_setup_keep_writable",
        "keeping {path} writable: {cause}",
        "保持 {path} 可写失败：{cause}",
    ),
    (
        "err_setup_untraceable",
        "making the sandbox's first process impossible to trace: {cause}",
        "使沙箱的第一个进程无法被跟踪失败：{cause}",
    ),
    (
        "err_setup_loopback",
        "bringing up loopback: {cause}",
        "启用回环接口失败：{cause}",
    ),
    (
        "err_setup_proxy_listener",
        "listening for the proxy: {cause}",
        "为代理监听端口失败：{cause}",
    ),
    (
        "err_setup_landlock",
        "Landlock: {cause}",
        "Landlock 出错：{cause}",
    ),
    (
        "err_setup_landlock_unavailable",
        "Landlock is not available in this kernel",
        "此内核不支持 Landlock",
    ),
    (
        "err_setup_landlock_too_old",
        "Landlock is too old in this kernel (ABI 6, Linux 6.12, is needed)",
        "此内核的 Landlock 版本太旧（需要 ABI 6，即 Linux 6.12）",
    ),
    (
        "err_setup_drop_capability",
        "dropping capability {capability}: {cause}",
        "放弃权能 {capability} 失败：{cause}",
    ),
    (
        "err_setup_drop_capabilities",
        "dropping capabilities: {cause}",
        "放弃权能失败：{cause}",
    ),
    (
        "err_setup_no_seccomp",
        "no seccomp filter for this architecture",
        "此架构没有 seccomp 过滤器",
    ),
    (
        "err_setup_seccomp",
        "installing the seccomp filter: {cause}",
        "安装 seccomp 过滤器失败：{cause}",
    ),
    (
        "err_sandbox_network_word",
        "`sandbox.network` is not valid: `{word}` is not \"none\", \"all\" or a list of domains",
        "`sandbox.network` 无效：`{word}` 不是 \"none\"、\"all\" 或域名列表",
    ),
    (
        "err_sandbox_hosts",
        "`sandbox.network` is not valid: {reason}",
        "`sandbox.network` 无效：{reason}",
    ),
    (
        "err_sandbox_not_absolute",
        "`sandbox.{key}` is not valid: `{path}` is not an absolute path (or one starting with ~/)",
        "`sandbox.{key}` 无效：`{path}` 不是绝对路径（也不以 ~/ 开头）",
    ),
    (
        "err_hosts_empty",
        "sandbox.network entry {number} is empty",
        "sandbox.network 的第 {number} 项为空",
    ),
    (
        "err_hosts_bad",
        "bad sandbox.network entry `{pattern}`: {problem}",
        "sandbox.network 的条目 `{pattern}` 有误：{problem}",
    ),
    ("host_problem_empty", "it is empty", "它是空的"),
    ("host_problem_space", "it contains a space", "它包含空格"),
    (
        "host_problem_scheme",
        "write just the host, without a scheme (like `github.com`)",
        "只写主机名，不要协议（如 `github.com`）",
    ),
    (
        "host_problem_path",
        "write just the host, without a path",
        "只写主机名，不要路径",
    ),
    (
        "host_problem_port",
        "write just the host, without a port (ports are not filtered)",
        "只写主机名，不要端口（端口不做过滤）",
    ),
    (
        "host_problem_star_twice",
        "`*` may only appear once, as a leading `*.`",
        "`*` 只能出现一次，且只能作为开头的 `*.`",
    ),
    (
        "host_problem_star_place",
        "`*` may only appear alone or as a leading `*.`",
        "`*` 只能单独出现，或作为开头的 `*.`",
    ),
    (
        "host_problem_star_before_ip",
        "`*.` needs a domain name after it, not an IP",
        "`*.` 后面必须是域名，不能是 IP",
    ),
    (
        "host_problem_bad_ipv6",
        "it is not a valid bracketed IPv6 address",
        "它不是有效的带方括号的 IPv6 地址",
    ),
    (
        "host_problem_not_a_host",
        "it is neither a host name nor an IP address",
        "它既不是主机名也不是 IP 地址",
    ),
    ("host_problem_empty_host", "the host is empty", "主机名为空"),
    (
        "host_problem_too_long",
        "the host name is longer than 253 bytes",
        "主机名超过 253 字节",
    ),
    (
        "host_problem_bad_label",
        "a part of the host name is empty or over 63 bytes",
        "主机名的某一段为空或超过 63 字节",
    ),
    (
        "host_problem_bad_character",
        "the host name has a character other than letters, digits, `-`, `_` and `.` (write international names in their `xn--` form)",
        "主机名含有字母、数字、`-`、`_` 和 `.` 以外的字符（国际化域名请写成 `xn--` 形式）",
    ),
    (
        "host_problem_numeric",
        "it looks numeric but is not a dotted IPv4 address",
        "它看起来是数字，但不是点分格式的 IPv4 地址",
    ),
    (
        "hook_failed",
        "hook `{name}` ({event}): {reason}",
        "钩子 `{name}`（{event}）：{reason}",
    ),
    (
        "err_hook_no_subagents",
        "agent hooks cannot run here (no subagents)",
        "agent 钩子在这里无法运行（没有子代理）",
    ),
    (
        "err_hook_subagent_timeout",
        "the subagent did not answer within {secs} s",
        "子代理在 {secs} 秒内没有回答",
    ),
    (
        "err_hook_http_client",
        "cannot make an HTTP client: {reason}",
        "无法创建 HTTP 客户端：{reason}",
    ),
    (
        "err_hook_status",
        "HTTP {status}",
        "服务器回答 HTTP {status}",
    ),
    (
        "err_hook_sandbox",
        "cannot start it in the sandbox: {reason}",
        "无法在沙箱中启动：{reason}",
    ),
    (
        "err_hook_start",
        "cannot start: {cause}",
        "无法启动：{cause}",
    ),
    (
        "err_hook_exit",
        "exit code {code}: {stderr}",
        "退出码 {code}：{stderr}",
    ),
    (
        "err_hook_killed",
        "it was killed by a signal",
        "它被信号终止",
    ),
    (
        "err_hook_wait",
        "waiting for it: {cause}",
        "等待它结束失败：{cause}",
    ),
    (
        "err_hook_timeout",
        "no answer within {secs} s; stopped",
        "{secs} 秒内没有回答；已停止",
    ),
    (
        "err_subagent_unknown_role",
        "no subagent role `{role}`; the roles are {known}",
        "没有子代理角色 `{role}`；可用的角色：{known}",
    ),
    (
        "err_subagent_project_role",
        "the role `{role}` is the project's ({file}): a hook of yours runs only your own roles and the built-in ones",
        "角色 `{role}` 属于项目（{file}）：你自己的钩子只运行你自己的角色和内置角色",
    ),
    (
        "err_subagent_store",
        "storing the hook's task: {reason}",
        "保存钩子的任务失败：{reason}",
    ),
    (
        "err_subagent_no_runtime",
        "no runtime to run the subagent on",
        "没有可运行子代理的运行时",
    ),
    (
        "err_subagent_thread",
        "starting the subagent's thread: {cause}",
        "启动子代理的线程失败：{cause}",
    ),
    (
        "err_subagent_failed",
        "the subagent failed: {reason}",
        "子代理失败：{reason}",
    ),
    (
        "err_subagent_stopped",
        "the subagent stopped: {reason}",
        "子代理已停止：{reason}",
    ),
    (
        "err_subagent_interrupted",
        "the subagent was interrupted",
        "子代理被中断",
    ),
    (
        "err_subagent_no_answer",
        "the subagent gave no answer",
        "子代理没有给出回答",
    ),
    (
        "err_subagent_ended",
        "the subagent ended without an answer",
        "子代理结束时没有回答",
    ),
    (
        "err_config_invalid",
        "`{key}` is not valid: {reason}",
        "`{key}` 无效：{reason}",
    ),
    (
        "reason_for_the_model_optional",
        "reason for the model (optional): ",
        "给模型的理由（可选）：",
    ),
    (
        "answer_y_s_a_or_n",
        "answer y, s, a or n",
        "请回答 y、s、a 或 n",
    ),
    (
        "the_next_message_continues_from_here",
        "the next message continues from here",
        "下一条消息从这里继续",
    ),
    (
        "the_next_message_starts_a_new",
        "the next message starts a new branch here",
        "下一条消息将从这里开始新分支",
    ),
    ("no_branches_yet", "no branches yet\n", "还没有分支\n"),
    (
        "there_is_no_fork_above_this",
        "there is no fork above this point: nothing to flip between",
        "此处上方没有分叉：没有可切换的分支",
    ),
    (
        "nothing_to_retry_there_is_no",
        "nothing to retry: there is no user message on this branch",
        "无法重试：此分支上没有用户消息",
    ),
    (
        "nothing_to_edit_there_is_no",
        "nothing to edit: there is no user message on this branch",
        "无法编辑：此分支上没有用户消息",
    ),
    (
        "edit_the_message_enter_sends_it",
        "Edit the message (Enter sends it as a new branch; Ctrl-C cancels)\n✎ ",
        "编辑消息（回车作为新分支发送；Ctrl-C 取消）\n✎ ",
    ),
    ("edit_cancelled", "edit cancelled", "已取消编辑"),
    (
        "edit_cancelled_the_text_is_empty",
        "edit cancelled: the text is empty",
        "已取消编辑：内容为空",
    ),
    (
        "the_text_is_unchanged_retry_asks",
        "the text is unchanged; /retry asks for a new answer to it",
        "内容未改变；/retry 可重新回答",
    ),
    (
        "this_new_conversation_not_saved_until",
        "(this new conversation, not saved until its first message)",
        "（当前新对话，发送第一条消息后才保存）",
    ),
    (
        "no_conversations_yet",
        "no conversations yet\n",
        "还没有对话\n",
    ),
    ("msgs", "msgs", "条"),
    (
        "usage_switch_id_see_list",
        "usage: /switch <id> (see /list)",
        "用法：/switch <id>（见 /list）",
    ),
    (
        "this_conversation_has_no_title_yet",
        "this conversation has no title yet",
        "当前对话还没有标题",
    ),
    (
        "nothing_to_name_yet_send_a",
        "nothing to name yet: send a first message, then /title",
        "还没有可命名的内容：先发送一条消息，再 /title",
    ),
    (
        "usage_delete_id_see_list",
        "usage: /delete <id> (see /list)",
        "用法：/delete <id>（见 /list）",
    ),
    (
        "that_is_the_current_conversation_new",
        "that is the current conversation: /new or /switch to another one first",
        "这是当前对话：请先 /new 或 /switch 到其他对话",
    ),
    ("messages", "messages", "条消息"),
    ("nothing_deleted", "nothing deleted", "未删除"),
    (
        "usage_search_text",
        "usage: /search <text>",
        "用法：/search <文字>",
    ),
    (
        "nothing_to_export_this_conversation_has",
        "nothing to export: this conversation has no messages",
        "没有可导出的内容：当前对话没有消息",
    ),
    ("mode", "mode", "模式"),
    ("read", "read", "读取"),
    ("write", "write", "写入"),
    ("execute", "execute", "执行"),
    (
        "sandbox_refusal_hint",
        "the sandbox seems to have refused that command. To widen it: sandbox.network (the hosts commands may reach, or \"all\"), sandbox.allow_write (more folders to write), or one call with \"sandbox\": false, which you are asked about each time; /sandbox shows what it allows now (said once a session)",
        "沙箱似乎拒绝了该命令。要放宽：sandbox.network（命令可访问的主机，或 \"all\"）、sandbox.allow_write（更多可写目录），或以 \"sandbox\": false 单次运行（每次都会询问你）；/sandbox 显示当前允许的内容（每个会话只提示一次）",
    ),
    (
        "sandboxed_commands",
        "commands in the sandbox",
        "沙箱中的命令",
    ),
    (
        "permissions_sandbox_note",
        "commands run in the OS sandbox (the working folder, no network unless sandbox.network allows); one that asks to leave it is asked every time; execute is for what runs outside it (MCP tools that change things)",
        "命令在操作系统沙箱中运行（仅工作目录；除非 sandbox.network 允许，否则无网络）；要求离开沙箱的命令每次都会询问；“执行”指沙箱之外运行的内容（会改动东西的 MCP 工具）",
    ),
    (
        "permissions_no_sandbox_note",
        "the OS sandbox is off (/sandbox says why): commands are judged as execute",
        "操作系统沙箱已关闭（/sandbox 说明原因）：命令按“执行”判断",
    ),
    (
        "no_rules_the_mode_decides",
        "no rules; the mode decides\n",
        "没有规则；由模式决定\n",
    ),
    (
        "rules_first_match_wins",
        "rules, first match wins:\n",
        "规则（先匹配者生效）：\n",
    ),
    (
        "hard_limits_rm_rf_mkfs_dd",
        "Hard limits (rm -rf /, mkfs, dd to a disk, fork bombs, shutdown, curl | sh, …) are refused in every mode; file tools never leave the working folder.",
        "硬性限制（rm -rf /、mkfs、dd 写磁盘、fork 炸弹、关机、curl | sh 等）在任何模式下都会被拒绝；文件工具永远不会离开工作目录。",
    ),
    ("interrupted", "interrupted", "已中断"),
    (
        "the_server_lists_no_models",
        "the server lists no models",
        "服务没有列出模型",
    ),
    (
        "model_name_switches",
        "/model NAME switches",
        "/model NAME 切换模型",
    ),
    ("skill_injected", "injected ", "注入    "),
    ("skill_on_demand", "on demand", "按需    "),
    ("skill_off", "off      ", "已停用  "),
    (
        "help_memory",
        "list what is remembered across sessions (kind, level, name); forget one",
        "列出跨会话记住的内容（类型、层级、名称）；或忘记其中一条",
    ),
    (
        "help_remember",
        "remember TEXT: a preference of yours, or with --project a fact about this project",
        "记住 TEXT：你的偏好；加 --project 则为本项目的事实",
    ),
    ("memory_changed", "memory: {what}", "记忆：{what}"),
    (
        "memory_off",
        "memory is off (memory.enabled is false)",
        "记忆已关闭（memory.enabled 为 false）",
    ),
    (
        "memory_usage",
        "/memory takes nothing or `forget NAME` (got `{args}`)",
        "/memory 不带参数，或 `forget 名称`（收到 `{args}`）",
    ),
    (
        "memory_forgotten",
        "forgot `{name}` ({level}); the file is in the memory folder's .trash",
        "已忘记 `{name}`（{level}）；文件移到了记忆目录的 .trash 中",
    ),
    (
        "no_memory_named",
        "no memory is named `{name}`; /memory lists them",
        "没有名为 `{name}` 的记忆；/memory 可列出全部",
    ),
    (
        "memory_not_ours",
        "`{name}` is CodePilot's ({path}): new reads CodePilot's memory but never changes it; edit or delete the file yourself",
        "`{name}` 属于 CodePilot（{path}）：new 读取 CodePilot 的记忆但从不修改；请自行编辑或删除该文件",
    ),
    ("no_memories", "nothing remembered yet", "还没有任何记忆"),
    (
        "remember_usage",
        "/remember takes the text to remember (and --project for a fact about this project)",
        "/remember 需要要记住的内容（加 --project 表示本项目的事实）",
    ),
    (
        "remembered",
        "remembered `{name}` ({level})",
        "已记住 `{name}`（{level}）",
    ),
    (
        "skills_usage",
        "/skills takes nothing, `enable NAME` or `disable NAME` (got `{args}`)",
        "/skills 不带参数，或 `enable 名称`、`disable 名称`（收到 `{args}`）",
    ),
    (
        "no_skill_named",
        "no skill is named `{name}`; /skills lists them",
        "没有名为 `{name}` 的技能；/skills 可列出全部",
    ),
    (
        "skill_enabled",
        "skill `{name}` is on for this project (saved in {file})",
        "技能 `{name}` 已在本项目启用（保存在 {file}）",
    ),
    (
        "skill_disabled",
        "skill `{name}` is off for this project (saved in {file})",
        "技能 `{name}` 已在本项目停用（保存在 {file}）",
    ),
    ("no_skills", "no skills\n", "没有技能\n"),
    (
        "move_to_node_n_of_tree",
        "move to node N of /tree; the next message forks from there",
        "移动到 /tree 中的节点 N；下一条消息从那里分支",
    ),
    (
        "send_text_that_starts_with",
        "send text that starts with /",
        "发送以 / 开头的文字",
    ),
    ("aliases", "Aliases:", "别名："),
    ("provider", "provider", "服务"),
    ("model", "model", "模型"),
    ("role", "role", "角色"),
    ("working_folder", "working folder", "工作目录"),
    (
        "help_for_commands_alt_enter_or",
        "/help for commands, Alt-Enter or a trailing \\ for a new line",
        "/help 查看命令，Alt-Enter 或行尾 \\ 换行",
    ),
    (
        "interrupted_what_arrived_is_kept",
        "interrupted; what arrived is kept",
        "已中断；已收到的内容已保存",
    ),
    (
        "your_message_is_saved_send_it",
        "Your message is saved; send it again or fork from it once this is fixed.",
        "你的消息已保存；修复后可重新发送或从此处分支。",
    ),
    ("set_up_now_y_n", "Set up now? [Y/n] ", "现在设置吗？[Y/n] "),
    (
        "skipped_you_can_still_use_the",
        "Skipped. You can still use the commands; set a key to chat.",
        "已跳过。命令仍可使用；设置密钥后即可对话。",
    ),
    (
        "provider_1_openai_2_anthropic_3",
        "Provider: 1) OpenAI  2) Anthropic  3) a local or other OpenAI-compatible server [1] ",
        "服务：1) OpenAI  2) Anthropic  3) 本地或其他 OpenAI 兼容服务 [1] ",
    ),
    (
        "api_key_enter_for_none",
        "API key (Enter for none): ",
        "API 密钥（没有则直接回车）：",
    ),
    (
        "api_key_not_shown",
        "API key (not shown): ",
        "API 密钥（输入不显示）：",
    ),
    (
        "no_key_given_nothing_was_written",
        "no key given; nothing was written",
        "未输入密钥；没有写入任何内容",
    ),
    (
        "needs_your_approval",
        "⚠ {name} needs your approval:",
        "⚠ {name} 需要你的批准：",
    ),
    (
        "takes_no_argument_got",
        "{command} takes no argument (got `{args}`)",
        "{command} 不接受参数（收到 `{args}`）",
    ),
    (
        "no_node_this_tree_has_nodes",
        "no node [{n}]; this tree has nodes [0] to [{last}] (see /tree)",
        "没有节点 [{n}]；此树的节点为 [0] 到 [{last}]（见 /tree）",
    ),
    (
        "tree_takes_no_argument_but_full",
        "/tree takes no argument but --full (got `{args}`)",
        "/tree 只接受 --full 参数（收到 `{args}`）",
    ),
    (
        "edit_takes_a_node_number_from",
        "/edit takes a node number from /tree (got `{args}`)",
        "/edit 需要 /tree 中的节点编号（收到 `{args}`）",
    ),
    (
        "list_takes_no_argument_but_all",
        "/list takes no argument but `all` (got `{other}`)",
        "/list 只接受参数 all（收到 `{other}`）",
    ),
    (
        "is_already_the_current_conversation",
        "{id} is already the current conversation",
        "{id} 已经是当前对话",
    ),
    ("titled", "titled “{args}”", "标题已设为“{args}”"),
    (
        "move_conversation_to_the_trash_y",
        "Move conversation {id}{about} to the trash? [y/N] ",
        "把对话 {id}{about} 移到回收站？[y/N] ",
    ),
    (
        "export_knows_json_only_got",
        "/export knows --json only (got `{w}`)",
        "/export 只支持 --json（收到 `{w}`）",
    ),
    (
        "export_takes_one_file_name_got",
        "/export takes one file name (got another: `{w}`)",
        "/export 只接受一个文件名（多出 `{w}`）",
    ),
    (
        "unknown_permission_mode_use_strict_default",
        "unknown permission mode `{args}`; use strict, default or permissive",
        "未知权限模式 `{args}`；可用 strict、default 或 permissive",
    ),
    (
        "a_model_name_has_no_spaces",
        "a model name has no spaces (got `{args}`)",
        "模型名不含空格（收到 `{args}`）",
    ),
    (
        "model_for_the_rest_of_this",
        "model {args} for the rest of this session (/models lists what the server offers)",
        "本次会话改用模型 {args}（/models 列出可用模型）",
    ),
    (
        "cannot_list_the_models",
        "cannot list the models: {e}",
        "无法列出模型：{e}",
    ),
    (
        "help_setup",
        "set up the provider, its address, key and model again (writes your config file; new --setup does the same at start)",
        "重新设置服务商、地址、密钥和模型（写入你的配置文件；启动时 new --setup 相同）",
    ),
    (
        "retry_nodes",
        "{nodes}; /compare shows every answer at this fork by these numbers",
        "{nodes}；/compare 以同样的编号列出此分叉处的每个回答",
    ),
    (
        "unknown_command_did_you_mean",
        "unknown command {word}; did you mean {near}? (/help lists the commands)",
        "未知命令 {word}；你是想输入 {near} 吗？（/help 列出所有命令）",
    ),
    (
        "unknown_command_help_lists_the_commands",
        "unknown command {word}; /help lists the commands (start with // to send a line beginning with /)",
        "未知命令 {word}；/help 列出所有命令（以 // 开头可发送以 / 开头的文字）",
    ),
    (
        "no_provider_run_new_again_to",
        "no provider `{other}`; run new again to set up",
        "没有选项 `{other}`；请重新运行 new 进行设置",
    ),
    (
        "approval_options",
        "y: allow once · s: allow `{session}` for this session · a: always allow `{always}` (saved in {file}) · n: deny",
        "y：允许一次 · s：本次会话允许 `{session}` · a：始终允许 `{always}`（保存到 {file}）· n：拒绝",
    ),
    ("saved_in", "saved in {file}", "已保存到 {file}"),
    (
        "could_not_save_the_rule",
        "could not save the rule in {file}: {error}; allowed once",
        "无法把规则保存到 {file}：{error}；本次允许",
    ),
    ("depth_messages", "({n:message})", "（{n} 条消息）"),
    (
        "this_is_the_first_alternative",
        "this is the first of {count} alternatives",
        "这已是 {count} 个分支中的第一个",
    ),
    (
        "this_is_the_last_alternative",
        "this is the last of {count} alternatives",
        "这已是 {count} 个分支中的最后一个",
    ),
    (
        "alternative_of",
        "alternative {at} of {count}",
        "第 {at} 个分支，共 {count} 个",
    ),
    (
        "only_user_messages_can_be_edited",
        "[{n}] is {role:a} message; only user messages can be edited (/retry asks for a new answer)",
        "[{n}] 是 {role} 消息；只能编辑用户消息（/retry 可重新回答）",
    ),
    (
        "list_more",
        "… {n} more; /list all shows every one",
        "… 还有 {n} 个；/list all 显示全部",
    ),
    (
        "switched_to",
        "switched to {id} ({n:message}); /tree shows it",
        "已切换到 {id}（{n} 条消息）；/tree 查看",
    ),
    (
        "skipped_unreadable_lines",
        "skipped {n:unreadable line} of the file (line {lines}): the rest loaded",
        "跳过了文件中 {n} 行无法读取的内容（第 {lines} 行）；其余已加载",
    ),
    (
        "orphans_under_the_root",
        "{n:message} had a missing parent and hang under the root: {ids}",
        "{n} 条消息缺少父消息，已挂在根节点下：{ids}",
    ),
    (
        "ignored_repeated_ids",
        "ignored repeated message ids: {ids}",
        "忽略了重复的消息 id：{ids}",
    ),
    ("new_conversation", "new conversation {id}", "新对话 {id}"),
    (
        "moved_to_trash",
        "moved {id} to {path}",
        "已把 {id} 移到 {path}",
    ),
    (
        "search_first_shown",
        "first {n:match} shown; narrow the search to see others",
        "仅显示前 {n} 条结果；请缩小搜索范围",
    ),
    (
        "search_found",
        "{n:match} in {c:conversation}; /switch ID then /N opens one",
        "在 {c} 个对话中找到 {n} 条；用 /switch ID 再 /N 打开",
    ),
    ("wrote", "wrote {path}", "已写入 {path}"),
    ("wrote_both", "wrote {a} and {b}", "已写入 {a} 和 {b}"),
    (
        "provider_and_model",
        "provider {name} ({kind}, {url}) · model {model}",
        "服务 {name}（{kind}，{url}）· 模型 {model}",
    ),
    (
        "keeping_the_role",
        "{error}; keeping the role as it was",
        "{error}；保留原来的角色",
    ),
    (
        "writing_failed",
        "writing {path}: {error}",
        "写入 {path} 失败：{error}",
    ),
    (
        "writing_the_dump_failed",
        "writing the dump: {error}",
        "写入转储失败：{error}",
    ),
    ("trusted", "trusted", "已信任"),
    ("not_trusted", "not trusted", "未信任"),
    (
        "project_config_in_force",
        "project config {file} in force ({trust}): permission mode {mode}, base URL {url}",
        "项目配置 {file} 生效（{trust}）：权限模式 {mode}，服务地址 {url}",
    ),
    (
        "ignored_from_project",
        "ignored from {file} until you trust it: {what}. A project file may narrow what you allow, not widen it nor choose the provider, model, key or host (answer yes when asked on a terminal, or start with --trust-project)",
        "在你信任之前已忽略 {file} 中的：{what}。项目文件只能收紧、不能放宽权限，也不能选择提供商、模型、密钥或地址（在终端中回答 yes，或使用 --trust-project 启动）",
    ),
    (
        "trust_question",
        "{file} asks for more than you allow:\n{list}Trust this file as it is now? It stays trusted until it changes. [y/N] ",
        "{file} 要求超出你允许的权限：\n{list}信任此文件的当前内容吗？内容改变后需重新确认。[y/N] ",
    ),
    (
        "nothing_to_continue",
        "no conversation to continue in this project; starting a new one",
        "本项目没有可继续的对话；开始新对话",
    ),
    (
        "resumed",
        "resumed {id} ({n:message}); /tree shows it",
        "已恢复 {id}（{n} 条消息）；/tree 查看",
    ),
    (
        "no_api_key_for",
        "no API key for `{name}`: set {key} (or point {url} at a local server, which needs none)",
        "`{name}` 没有 API 密钥：请设置 {key}（或把 {url} 指向无需密钥的本地服务）",
    ),
    (
        "compacting_automatic",
        "compacting the conversation: the context window is nearly full…",
        "正在压缩对话：上下文窗口快满了…",
    ),
    (
        "compacting",
        "compacting the conversation…",
        "正在压缩对话…",
    ),
    (
        "compacted",
        "compacted {n:message}: {before} → {after} tokens",
        "已压缩 {n} 条消息：{before} → {after} 个 token",
    ),
    (
        "compaction_failed",
        "compaction failed: {reason}",
        "压缩失败：{reason}",
    ),
    (
        "compaction_breaker_open",
        "automatic compaction is off for this session after repeated failures; /compact still works and turns it back on",
        "多次失败后，本次会话已关闭自动压缩；/compact 仍可使用，成功后会重新开启",
    ),
    (
        "compaction_cancelled",
        "compaction cancelled; nothing was written",
        "已取消压缩；未写入任何内容",
    ),
    (
        "go_on_without_compacting",
        "go on with this turn without compacting? [y/N] ",
        "不压缩，继续本轮吗？[y/N] ",
    ),
    (
        "context_full",
        "the context window is nearly full and compaction could not make room (context_safety_margin): the answer above wraps up; go on in a fresh branch (/clear, or /N from /tree)",
        "上下文窗口即将用满，且压缩无法腾出空间（context_safety_margin）：上面的回答已作收尾；请在新分支中继续（/clear，或 /tree 后 /N）",
    ),
    (
        "round_limit",
        "stopped after {n:round} of tool calls (max_rounds in the config); send a message to let it go on",
        "工具调用已达 {n} 轮上限（配置项 max_rounds）；发送消息可继续",
    ),
    (
        "how_to_configure",
        "new needs a model to talk to. Set one of:\n  export OPENAI_API_KEY=sk-...          # OpenAI\n  export ANTHROPIC_API_KEY=sk-ant-...   # Anthropic (with --provider anthropic)\n  export OPENAI_BASE_URL=http://127.0.0.1:8080/v1\n                          # a local server: llama.cpp, Ollama (:11434/v1), vLLM\nor write {path}, for example:\n  {\"provider\": \"anthropic\", \"model\": \"claude-sonnet-4-5\",\n   \"providers\": {\"anthropic\": {\"api_key\": \"sk-ant-...\"}}}\n  {\"provider\": \"local\", \"model\": \"qwen2.5-coder\",\n   \"providers\": {\"local\": {\"base_url\": \"http://127.0.0.1:8080/v1\"}}}\n(a provider written there has its own address: LOCAL_BASE_URL for `local`;\nnew --setup asks for it all again)",
        "new 需要一个模型服务。设置以下之一：\n  export OPENAI_API_KEY=sk-...          # OpenAI\n  export ANTHROPIC_API_KEY=sk-ant-...   # Anthropic（配合 --provider anthropic）\n  export OPENAI_BASE_URL=http://127.0.0.1:8080/v1\n                          # 本地服务：llama.cpp、Ollama（:11434/v1）、vLLM\n或编写 {path}，例如：\n  {\"provider\": \"anthropic\", \"model\": \"claude-sonnet-4-5\",\n   \"providers\": {\"anthropic\": {\"api_key\": \"sk-ant-...\"}}}\n  {\"provider\": \"local\", \"model\": \"qwen2.5-coder\",\n   \"providers\": {\"local\": {\"base_url\": \"http://127.0.0.1:8080/v1\"}}}\n（写在那里的服务商有自己的地址：`local` 用 LOCAL_BASE_URL；\nnew --setup 可重新设置）",
    ),
    (
        "wrote_private",
        "wrote {path} (readable only by you)",
        "已写入 {path}（仅你可读）",
    ),
    (
        "using_provider_and_model",
        "using {name} with model {model}",
        "正在使用 {name}，模型 {model}",
    ),
    (
        "no_config_folder",
        "this platform has no config folder",
        "此平台没有配置目录",
    ),
    (
        "help_tree",
        "draw this conversation's tree; every node gets a number [N]",
        "显示当前对话树，每个节点都有编号 [N]",
    ),
    (
        "help_branches",
        "list the tip of every branch; /N jumps to one",
        "列出每个分支的末端；用 /N 跳转",
    ),
    (
        "help_prev",
        "go to the previous alternative at the nearest fork above",
        "切换到上方最近分叉处的上一个分支",
    ),
    (
        "help_next",
        "go to the next alternative at the nearest fork above",
        "切换到上方最近分叉处的下一个分支",
    ),
    (
        "help_branch",
        "name the current branch (the prompt, /switch NAME and /merge NAME know it); alone: list the names; -d NAME removes one",
        "为当前分支命名（提示符、/switch NAME 与 /merge NAME 都认得）；单独使用：列出名字；-d NAME 删除一个",
    ),
    (
        "help_btw",
        "ask a side question in a branch of its own; the cursor stays where it is",
        "在单独的分支里问一个旁支问题；光标留在原处",
    ),
    (
        "help_undo",
        "back to before the last message, with the folder as it was (the undone answer stays in the tree, folded)",
        "回到上一条消息之前，文件夹也恢复原状（被撤销的回答保留在树中，折叠显示）",
    ),
    (
        "help_merge",
        "bring what branch N (or NAME) concluded into this one, as a summary node",
        "把分支 N（或 NAME）的结论作为摘要节点带回当前分支",
    ),
    (
        "no_branch_named",
        "no branch is named {name} (/branch lists the names)",
        "没有名为 {name} 的分支（/branch 列出名字）",
    ),
    (
        "branch_unnamed",
        "the name {name} is removed; the branch stays",
        "名字 {name} 已删除；分支保留",
    ),
    (
        "number_moved",
        "[{n}] is no longer the node you were shown: the tree has grown since, and /tree numbers depth-first. The node shown as [{n}], {seen}, is now [{seen_now} · {seen_id}]; [{n}] is now {now} ({now_id}). Nothing moved: /{seen_now} or /{seen_id} goes to the one you saw, /{n} again to this one.",
        "[{n}] 已不是你看到的那个节点：树在那之后增长了（/tree 按深度优先编号）。当时显示为 [{n}] 的节点（{seen}）现在是 [{seen_now} · {seen_id}]；[{n}] 现在是 {now}（{now_id}）。光标未移动：/{seen_now} 或 /{seen_id} 去你看到的节点，再输入 /{n} 去这个节点。",
    ),
    (
        "branch_named",
        "this branch is {name} (its tip is [{n}]; the name follows it as it grows)",
        "此分支名为 {name}（末端 [{n}]；名字随分支增长）",
    ),
    (
        "branch_moved",
        "the name {name} now stands for this branch (its tip is [{n}])",
        "名字 {name} 现在指向此分支（末端 [{n}]）",
    ),
    (
        "branch_usage",
        "usage: /branch [NAME | -d NAME]; a name is letters, digits, - _ . /, at most 40, not only digits (got {args})",
        "用法：/branch [NAME | -d NAME]；名字由字母、数字、- _ . / 组成，最多 40 个，不能全是数字（收到 {args}）",
    ),
    (
        "no_branch_names_yet",
        "no branch has a name yet: /branch NAME names the one you are on",
        "还没有分支有名字：/branch NAME 为当前分支命名",
    ),
    (
        "branch_size_age",
        "({n:message} · {age} ago)",
        "（{n} 条消息 · {age} 前）",
    ),
    (
        "branch_nothing_yet",
        "nothing to name yet: send a first message, then /branch NAME",
        "还没有可命名的：先发送一条消息，再 /branch NAME",
    ),
    ("side_mark", " (side question)", "（旁支问题）"),
    (
        "tree_undone",
        " (undone · {n:message} folded)",
        "（已撤销 · 折叠 {n} 条消息）",
    ),
    (
        "tree_merged",
        "merged from [{tip}], which left at [{fork}]",
        "合并自 [{tip}]（分叉于 [{fork}]）",
    ),
    ("btw_usage", "usage: /btw QUESTION", "用法：/btw 问题"),
    (
        "btw_done",
        "(a side question, [{side}]: the cursor is back at [{here}]; /merge {side_id} brings its answer in)",
        "（旁支问题 [{side}]：光标回到 [{here}]；/merge {side_id} 可把回答带回）",
    ),
    (
        "nothing_to_undo",
        "nothing to undo: there is no message of yours above the cursor",
        "没有可撤销的：光标之上没有你的消息",
    ),
    (
        "undone",
        "undone: [{n}] and what followed it stay in the tree, folded (/tree --full shows them)",
        "已撤销：[{n}] 及其后续保留在树中，折叠显示（/tree --full 可见）",
    ),
    (
        "merge_usage",
        "usage: /merge N|NAME [--files] (a node or a branch name; --files brings its file changes too)",
        "用法：/merge N|NAME [--files]（节点或分支名；--files 同时带回文件改动）",
    ),
    (
        "merge_usage_no_such",
        "no node or branch {args}: /merge N or /merge NAME (/branches and /branch list them)",
        "没有节点或分支 {args}：/merge N 或 /merge NAME（/branches 与 /branch 列出它们）",
    ),
    (
        "merge_same_branch",
        "[{n}] is on this branch already: nothing to bring back",
        "[{n}] 已在当前分支上：没有可带回的",
    ),
    (
        "merge_asking",
        "asking the model for what the branch ending at [{n}] found ({count:message})…",
        "正在请模型总结末端为 [{n}] 的分支（{count} 条消息）…",
    ),
    (
        "merge_files_none",
        "the branch changed no files since it left this one (as its checkpoints know)",
        "该分支离开当前分支后没有改动文件（据其检查点）",
    ),
    ("merge_take", "take ", "采用"),
    ("merge_remove", "remove", "删除"),
    ("merge_merged", "merge", "合并"),
    (
        "merge_conflict",
        "conflict (left as it is)",
        "冲突（保持原样）",
    ),
    (
        "merge_files_would",
        "bringing the branch's file changes here would:",
        "把该分支的文件改动带到这里将会：",
    ),
    (
        "merge_files_ask",
        "write {n:file}? [y/N] ",
        "写入 {n} 个文件吗？[y/N] ",
    ),
    (
        "merge_files_done",
        "wrote {done:file}; the folder as it was is snapshot {id}, the state of the node merged into",
        "已写入 {done} 个文件；原来的文件夹是快照 {id}，即被合并节点的状态",
    ),
    (
        "merge_conflict_left",
        "{path}: left as it is for you to merge",
        "{path}：保持原样，留给你合并",
    ),
    (
        "merge_empty",
        "the model gave an empty account; nothing was merged",
        "模型给出的总结为空；未合并",
    ),
    ("merge_failed", "nothing was merged: {why}", "未合并：{why}"),
    (
        "merged",
        "merged branch {from} as [{n}]; the next message carries it: {preview}",
        "已合并分支 {from}，成为 [{n}]；下一条消息会带上它：{preview}",
    ),
    (
        "help_compare",
        "the answers at the nearest fork, one after another: model, tokens, time, cost, files changed",
        "最近分叉处的各个回答依次列出：模型、令牌、时间、费用、改动的文件",
    ),
    (
        "compare_header",
        "{mark} {i} of {count} · [{n}] · {model} · {input} in · {output} out · {seconds} s{cost}",
        "{mark} 第 {i}/{count} 个 · [{n}] · {model} · 输入 {input} · 输出 {output} · {seconds} 秒{cost}",
    ),
    ("compare_files", "files: {files}", "文件：{files}"),
    (
        "retry_usage",
        "usage: /retry [--model NAME] [--n K] (K from 1 to 5; got {args})",
        "用法：/retry [--model NAME] [--n K]（K 为 1 到 5；收到 {args}）",
    ),
    (
        "memory_reviews_run",
        "memory: every {n:turn} worth it (not small talk) are reviewed in the background for what to keep, never beside a turn; memory.enabled: false turns it off, memory.model picks a cheaper model (said once, not again in later sessions)",
        "记忆：每 {n} 个值得的回合（不含闲聊）会在后台回顾以决定要记住什么，从不与回合同时进行；memory.enabled: false 可关闭，memory.model 可选更便宜的模型（只提示一次，之后的会话不再提示）",
    ),
    (
        "queued_dropped",
        "dropped {n:line} typed during the interrupted turn",
        "已丢弃在被中断的一轮中输入的 {n} 行",
    ),
    ("bye", "bye", "再见！"),
    ("tree_title", "conversation [{id}]:", "会话 [{id}]:"),
    ("spinner_model", "waiting for {server}", "等待 {server}"),
    ("spinner_the_model", "the model", "模型"),
    (
        "spinner_servers",
        "starting MCP servers",
        "正在启动 MCP 服务器",
    ),
    ("spinner_compacting", "compacting", "正在压缩"),
    ("help_group_tree", "The tree", "树"),
    ("help_group_conversations", "Conversations", "对话"),
    ("help_group_project", "The project's files", "项目文件"),
    ("help_group_context", "Context", "上下文"),
    ("help_group_extensions", "Extensions", "扩展"),
    ("help_group_settings", "Settings", "设置"),
    (
        "help_group_skills",
        "Skills (call one as a command)",
        "技能（可作为命令调用）",
    ),
    ("help_group_keys", "Keys", "按键"),
    ("help_key_enter", "send the message", "发送消息"),
    (
        "help_key_newline",
        "a new line in the message (a trailing backslash too)",
        "在消息中换行（行尾反斜杠亦可）",
    ),
    (
        "help_key_tab",
        "complete a command, a skill or a conversation id",
        "补全命令、技能或对话 ID",
    ),
    (
        "help_key_ctrl_c",
        "clear the line; while an answer streams, stop the turn (what arrived is kept)",
        "清空当前行；回答生成时停止本轮（已收到的内容保留）",
    ),
    ("help_key_ctrl_l", "clear the screen", "清屏"),
    (
        "help_key_ctrl_d",
        "leave (on an empty line)",
        "退出（在空行上）",
    ),
    (
        "help_command_details",
        "/help COMMAND shows one command whole",
        "/help 命令 显示该命令的完整说明",
    ),
    (
        "help_no_such_command",
        "no command {name}; /help lists them",
        "没有命令 {name}；/help 列出所有命令",
    ),
    ("list_one_shot", "  (-p)", "  （-p 单次）"),
    ("you_said", "you:", "你："),
    ("the_answer", "answer:", "回答："),
    (
        "resumed_place",
        "at [{n}]{name} ({branches:branch} in all); the next message continues from here; /tree shows the tree",
        "位于 [{n}]{name}（共 {branches} 个分支）；下一条消息从这里继续；/tree 显示整棵树",
    ),
    (
        "partial_answer_on_stdout",
        "the answer on stdout is partial (interrupted); it is kept in conversation {id} (new --resume {id})",
        "标准输出中的回答不完整（已中断）；它保存在对话 {id} 中（new --resume {id}）",
    ),
    (
        "a_sentence_not_a_folder",
        "`{text}` is not a folder (the first argument is the working folder). To send it as a prompt and print the answer: new -p \"{text}\"; to start the REPL with it as the first message: new -q \"{text}\"",
        "`{text}` 不是文件夹（第一个参数是工作文件夹）。要把它作为提示发送并打印回答：new -p \"{text}\"；要以它为第一条消息启动 REPL：new -q \"{text}\"",
    ),
    (
        "workdir_windows_refused",
        "`{text}` cannot be the working folder: {reason}",
        "`{text}` 不能作为工作文件夹：{reason}",
    ),
    (
        "mcp_server_failed",
        "MCP server `{server}` failed: {error}",
        "MCP 服务器 `{server}` 失败：{error}",
    ),
    (
        "stopped_by_hook",
        "stopped by a hook: {reason}",
        "被钩子停止：{reason}",
    ),
    (
        "one_after_another_no_checkpoints",
        "the answers run one after another: with checkpoints off, what one changes could not be put back for the next",
        "回答将依次运行：检查点已关闭，无法在回答之间复原文件",
    ),
    (
        "one_after_another_stop_hooks",
        "the answers run one after another: a post_message (Stop) hook checks each answer's end in the folder as it left it",
        "回答将依次运行：post_message（Stop）钩子需在各回答留下的文件夹中检查其结果",
    ),
    (
        "retry_together",
        "{count} answers side by side: rounds of reading tools run together; an answer that changes files has the folder to itself, then puts back what it changed",
        "{count} 个回答并行：只读工具的轮次同时运行；修改文件的回答独占文件夹，结束后复原",
    ),
    (
        "not_put_back",
        "not put back as it was: {what}",
        "未能复原：{what}",
    ),
    (
        "together_going",
        "{label} · {tokens} tokens so far · {seconds} s{tool}",
        "{label} · 已收到 {tokens} 个词元 · {seconds} 秒{tool}",
    ),
    (
        "together_ended",
        "{label} · ended · {tokens} tokens · {seconds} s · shown in turn",
        "{label} · 已结束 · {tokens} 个词元 · {seconds} 秒 · 依次显示",
    ),
    (
        "retry_n_of",
        "answer {i} of {count}",
        "第 {i}/{count} 个回答",
    ),
    (
        "help_retry",
        "a new answer to the same message, as a new branch (the old one stays); --model NAME with another model, --n K for K answers side by side",
        "对同一条消息重新回答，作为新分支（旧回答保留）；--model NAME 换模型，--n K 并行 K 个回答",
    ),
    (
        "help_edit",
        "edit user message N (default: the last one) into a new branch and answer it",
        "编辑用户消息 N（默认最后一条），作为新分支并回答",
    ),
    (
        "help_list",
        "list this project's conversations, newest first",
        "列出本项目的对话，最新的在前",
    ),
    (
        "help_switch",
        "make another conversation current (an unambiguous id prefix is enough)",
        "切换到另一个对话（可用无歧义的 id 前缀）",
    ),
    (
        "help_new",
        "start a new conversation (role and skills are read again)",
        "开始新对话（重新读取角色和技能）",
    ),
    (
        "auto_continuing",
        "going on with the answer of {n} background task(s) (subagent.auto_continue)",
        "根据 {n} 个后台任务的回答继续（subagent.auto_continue）",
    ),
    (
        "tasks_go_on",
        "{n} background task(s) go on: {tasks} (/tasks lists them, /tasks stop ID stops one)",
        "{n} 个后台任务仍在运行：{tasks}（/tasks 列出，/tasks stop ID 停止其一）",
    ),
    (
        "enter_to_go_on",
        " (auto_continue: press Enter and the conversation goes on with it)",
        "（auto_continue：按回车，对话将据此继续）",
    ),
    (
        "help_clear",
        "clear the screen and start a fresh branch from the start of this conversation (the branch left stays in /tree)",
        "清屏并从本对话开头开启新分支（原分支仍保留在 /tree 中）",
    ),
    (
        "cleared",
        "a fresh branch from the start of conversation [{id}]: the next message begins it (the earlier branch stays in /tree)",
        "已回到会话 [{id}] 的开头：下一条消息将开启新分支（之前的分支仍在 /tree 中）",
    ),
    (
        "help_title",
        "name this conversation (shown by /list); without TEXT, show its title",
        "为当前对话命名（/list 中显示）；不带参数则显示标题",
    ),
    (
        "help_delete",
        "move a conversation to the trash folder in DATADIR (asks first)",
        "把对话移到 DATADIR 的回收站（会先确认）",
    ),
    (
        "help_search",
        "find messages containing the text in all of this project's conversations",
        "在本项目所有对话中搜索包含该文字的消息",
    ),
    (
        "help_export",
        "write this branch as Markdown (--json: the whole tree; --html: the tree as one page) to FILE or ./<id>.md",
        "把当前分支导出为 Markdown（--json：整棵树；--html：整棵树为一个网页）到 FILE 或 ./<id>.md",
    ),
    (
        "help_dump",
        "write exactly what the model sees (system prompt, branch, tools) beside the conversation file",
        "把模型实际看到的内容（系统提示、分支、工具）写到对话文件旁",
    ),
    (
        "help_permissions",
        "show the permission mode and rules; with MODE (strict, default, permissive), switch",
        "显示权限模式与规则；带 MODE（strict、default、permissive）则切换",
    ),
    (
        "help_model",
        "show the provider and model; with NAME, use that model for the rest of the session",
        "显示服务与模型；带 NAME 则在本次会话中改用该模型",
    ),
    (
        "help_models",
        "list the models the server offers",
        "列出服务提供的模型",
    ),
    (
        "help_skills",
        "list skills by tier, with their files and how each is used; enable or disable one for this project",
        "按层级列出技能、文件及使用方式；为本项目启用或停用某个技能",
    ),
    ("help_help", "show this help", "显示帮助"),
    (
        "help_exit",
        "leave (Ctrl-D does the same)",
        "退出（Ctrl-D 同样）",
    ),
    ("warning_prefix", "warning: {text}", "警告：{text}"),
    ("error_prefix", "error: {text}", "错误：{text}"),
    ("usage_line", "[tokens: {parts}]", "[令牌：{parts}]"),
    (
        "diff_lines_cut",
        "… {n:line} of the diff not shown …",
        "…… 差异中有 {n} 行未显示 ……",
    ),
    (
        "diff_line_cut",
        "{head} […{n:character} more]",
        "{head} [……还有 {n} 个字符]",
    ),
    ("reasoning_label", "[reasoning]", "[思考]"),
    (
        "retrying",
        "↻ {reason}; retrying in {secs} s (attempt {attempt} of {of})",
        "↻ {reason}；{secs} 秒后重试（第 {attempt} 次，共 {of} 次）",
    ),
    (
        "token_limit_note",
        "(the answer stopped at the token limit: max_tokens in the config, or what the context window left)",
        "（回答达到了令牌上限：配置项 max_tokens，或上下文窗口所余）",
    ),
    (
        "empty_answer_note",
        "(the model sent an empty answer)",
        "（模型返回了空回答）",
    ),
    (
        "tree_gap",
        "{lead}┆ [{first}–{last}] {n:message} (/tree --full shows them)",
        "{lead}┆ [{first}–{last}] {n} 条消息（/tree --full 全部显示）",
    ),
    ("current_mark", " ← current", " ← 当前"),
    (
        "tree_tool_call",
        "[tool call: {name}({args})]",
        "[工具调用: {name}({args})]",
    ),
    ("tree_interrupted", " (interrupted)", "（已中断）"),
    ("tree_system", "system: {text}", "系统提示词：{text}"),
    ("tree_user", "user: {text}", "你：{text}"),
    ("tree_assistant", "assistant: {text}", "AI：{text}"),
    ("tree_tool", "tool: {text}", "工具结果：{text}"),
    (
        "history_not_saved",
        "could not save the input history to {path}: {error}",
        "无法把输入历史保存到 {path}：{error}",
    ),
    (
        "reading_input_failed",
        "reading input: {error}",
        "读取输入失败：{error}",
    ),
    (
        "ask_base_url",
        "Base URL [{default}] ",
        "服务地址 [{default}] ",
    ),
    ("ask_model", "Model [{default}] ", "模型 [{default}] "),
    (
        "setup_models",
        "the server offers these models (a number or a name picks one):\n{list}",
        "服务器提供以下模型（输入编号或名称选择）：\n{list}",
    ),
    (
        "setup_models_more",
        "  … and {n} more (any name works)",
        "  … 另有 {n} 个（任何名称均可）",
    ),
    ("timed_out", "no answer within 10 s", "10 秒内没有回应"),
    (
        "setup_no_models",
        "could not ask the server for its models ({error}): name one",
        "无法向服务器询问其模型（{error}）：请输入一个名称",
    ),
    (
        "err_missing_key",
        "no API key for provider `{provider}`: set {var} (or `api_key` in the config file)",
        "服务 `{provider}` 没有 API 密钥：请设置 {var}（或在配置文件中设置 `api_key`）",
    ),
    (
        "err_connect",
        "cannot reach {url}: {reason}. Is the server running? Check {var}",
        "无法连接 {url}：{reason}。服务是否在运行？请检查 {var}",
    ),
    (
        "err_http",
        "{url} answered {status}: {message}{hint}",
        "{url} 返回 {status}：{message}{hint}",
    ),
    (
        "hint_key",
        "; check {var} (the API key)",
        "；请检查 {var}（API 密钥）",
    ),
    (
        "hint_model_openai",
        "; check the model name `{model}` (--model) and {var} (it usually ends in /v1)",
        "；请检查模型名 `{model}`（--model）和 {var}（通常以 /v1 结尾）",
    ),
    (
        "hint_model_anthropic",
        "; check the model name `{model}` (--model) and {var} (the host root, without /v1)",
        "；请检查模型名 `{model}`（--model）和 {var}（主机根地址，不带 /v1）",
    ),
    (
        "hint_rate_limited",
        "; rate limited: wait a little",
        "；请求过于频繁：请稍等",
    ),
    (
        "hint_quota",
        "; the account's quota or budget is spent: check your plan",
        "；账户额度或预算已用完：请检查你的套餐",
    ),
    (
        "hint_server_failed",
        "; the server failed: try again later",
        "；服务出错：请稍后再试",
    ),
    (
        "err_server",
        "the server reported an error during the answer: {message}",
        "回答过程中服务报告了错误：{message}",
    ),
    (
        "err_stream_cut",
        "the answer stream was cut: {reason}",
        "回答流被中断：{reason}",
    ),
    (
        "err_bad_value",
        "`{key}` is `{value}`; use {expected}",
        "`{key}` 的值 `{value}` 无效；应为 {expected}",
    ),
    (
        "err_out_of_range",
        "`{key}` is {value}; it must be between {min} and {max}",
        "`{key}` 的值 {value} 超出范围；应在 {min} 到 {max} 之间",
    ),
    (
        "err_overflow",
        "{url} refused the request as longer than the model's context window{window}: {message}",
        "{url} 拒绝了请求：超出模型的上下文窗口{window}：{message}",
    ),
    (
        "err_silent",
        "{url} accepted the request but sent nothing for {secs} s (idle timeout; `idle_timeout_secs` in the config sets it)",
        "{url} 接受了请求，但 {secs} 秒内没有任何回应（空闲超时；可用配置项 `idle_timeout_secs` 设置）",
    ),
    (
        "err_client",
        "could not build the HTTP client: {reason}",
        "无法创建 HTTP 客户端：{reason}",
    ),
    (
        "err_not_saved",
        "the message is kept in memory but could not be saved: {error}",
        "消息保留在内存中，但无法保存：{error}",
    ),
    (
        "err_no_conversation",
        "no conversation `{id}` in this project",
        "本项目中没有对话 `{id}`",
    ),
    (
        "err_ambiguous",
        "`{prefix}` matches several conversations: {ids}",
        "`{prefix}` 匹配多个对话：{ids}",
    ),
    (
        "err_unknown_message",
        "no message with id {id} in this conversation",
        "当前对话中没有 id 为 {id} 的消息",
    ),
    (
        "err_duplicate_message",
        "message {id} is already in this conversation",
        "消息 {id} 已在当前对话中",
    ),
    (
        "err_config_read",
        "cannot read config file {path}: {cause}",
        "无法读取配置文件 {path}：{cause}",
    ),
    (
        "err_config_parse",
        "config file {path} is not valid: {cause}",
        "配置文件 {path} 无效：{cause}",
    ),
    (
        "err_unknown_provider",
        "unknown provider `{name}`; known providers: {known}. Add others under \"providers\" in {file}",
        "未知服务 `{name}`；已知服务：{known}。可在 {file} 的 \"providers\" 中添加",
    ),
    (
        "err_unknown_kind",
        "provider `{name}` has kind `{kind}`; supported kinds: openai, anthropic",
        "服务 `{name}` 的类型为 `{kind}`；支持的类型：openai、anthropic",
    ),
    (
        "err_no_base_url",
        "provider `{name}` has no base_url; set it under \"providers\" in {file}",
        "服务 `{name}` 没有 base_url；请在 {file} 的 \"providers\" 中设置",
    ),
    (
        "err_unknown_lang",
        "unknown language `{lang}`; use en or zh",
        "未知语言 `{lang}`；请使用 en 或 zh",
    ),
    (
        "err_unknown_mode",
        "unknown permission mode `{mode}`; use strict, default or permissive",
        "未知权限模式 `{mode}`；请使用 strict、default 或 permissive",
    ),
    (
        "err_unknown_role",
        "unknown role `{name}`; looked for {name}.md in {searched} and the built-in roles; available roles: {available}",
        "未知角色 `{name}`；已在 {searched} 和内置角色中查找 {name}.md；可用角色：{available}",
    ),
    (
        "err_role_read",
        "cannot read role file {path}: {cause}",
        "无法读取角色文件 {path}：{cause}",
    ),
    (
        "status_line",
        "[{model} · {parts}]",
        "[模型 {model} · {parts}]",
    ),
    (
        "status_context",
        "context {pct}% of {window}",
        "上下文 {pct}%（共 {window}）",
    ),
    (
        "help_diff",
        "the working folder against node N's state (default: the current node), or node N's state against node M's",
        "比较工作目录与节点 N 的状态（默认当前节点），或比较节点 N 与 M 的状态",
    ),
    (
        "help_checkpoints",
        "the checkpoint store: snapshots, stored files and their size; gc removes what no conversation refers to",
        "检查点存储：快照数、存储的文件及其大小；gc 删除没有对话引用的内容",
    ),
    (
        "help_mcp",
        "MCP servers: state, tools, resources, prompts and log; restart NAME starts one again; login NAME / logout NAME: its OAuth authorization; @server:uri in a message attaches a resource, /mcp__server__prompt ARGS runs a prompt",
        "MCP 服务器：状态、工具、资源、提示与日志；restart NAME 重新启动一个；login NAME / logout NAME：它的 OAuth 授权；消息中的 @server:uri 附加一个资源，/mcp__server__prompt ARGS 运行一个提示",
    ),
    (
        "mcp_usage",
        "/mcp takes nothing, `restart NAME`, `login NAME` or `logout NAME` (got `{args}`)",
        "/mcp 不带参数，或 `restart NAME`、`login NAME`、`logout NAME`（收到 `{args}`）",
    ),
    (
        "mcp_login_started",
        "{name}: its stored authorization is forgotten and it connects again; when it asks for one, the address to open is said here",
        "{name}：已忘记它保存的授权并重新连接；当它要求授权时，会在此显示要打开的地址",
    ),
    (
        "mcp_logged_out",
        "{name}: its OAuth tokens are deleted from {file}",
        "{name}：它的 OAuth 令牌已从 {file} 删除",
    ),
    (
        "mcp_not_logged_in",
        "{name} has no stored OAuth tokens",
        "{name} 没有保存的 OAuth 令牌",
    ),
    (
        "mcp_no_token_store",
        "there is no user config folder to keep OAuth tokens in",
        "没有可保存 OAuth 令牌的用户配置文件夹",
    ),
    (
        "elicit_heading",
        "The MCP server {server} asks (Enter keeps the value in brackets; * is required):",
        "MCP 服务器 {server} 请求（回车保留方括号中的值；* 为必填）：",
    ),
    (
        "elicit_invalid",
        "that is not a value this field takes",
        "这不是此字段可接受的值",
    ),
    ("elicit_required", "this field is required", "此字段为必填"),
    (
        "elicit_send",
        "Send these answers to the server? [Y/n]",
        "把这些回答发送给服务器吗？[Y/n]",
    ),
    (
        "mcp_none",
        "no MCP servers are configured (`mcp.servers` in a config file, or the project's .mcp.json)",
        "没有配置 MCP 服务器（配置文件中的 `mcp.servers`，或项目的 .mcp.json）",
    ),
    (
        "mcp_row",
        "{name} ({origin}): {state} · {tools:tool} · log {log}",
        "{name}（{origin}）：{state} · {tools} 个工具 · 日志 {log}",
    ),
    (
        "mcp_resources",
        "  {n:resource}: {list}",
        "  {n} 个资源：{list}",
    ),
    (
        "mcp_prompts",
        "  {n:prompt}: {list}",
        "  {n} 个提示：{list}",
    ),
    (
        "mcp_resource_unread",
        "{why}; the message was not sent (Up brings it back)",
        "{why}；消息未发送（按上箭头可找回）",
    ),
    (
        "mcp_prompt_needs",
        "the prompt needs `{name}`: {usage}",
        "该提示需要 `{name}`：{usage}",
    ),
    ("mcp_restarting", "restarting {name}", "正在重启 {name}"),
    (
        "mcp_no_such_server",
        "no MCP server `{name}` that may run (see /mcp)",
        "没有可运行的 MCP 服务器 `{name}`（见 /mcp）",
    ),
    (
        "mcp_trust_question",
        "This project configures MCP servers, programs that would run on your machine:\n{list}Trust them? [y/N] ",
        "此项目配置了 MCP 服务器，它们会在你的机器上运行：\n{list}信任它们吗？[y/N] ",
    ),
    (
        "mcp_not_trusted",
        "the project's MCP servers are not trusted and do not run (start with --trust-project, or answer yes on a terminal)",
        "项目的 MCP 服务器未被信任，不会运行（使用 --trust-project 启动，或在终端中回答 yes）",
    ),
    (
        "hooks_trust_question",
        "This project configures hooks, commands that would run on your machine:\n{list}Trust them? [y/N] ",
        "此项目配置了钩子，它们会在你的机器上运行命令：\n{list}信任它们吗？[y/N] ",
    ),
    (
        "claude_allow_question",
        "This project's .claude/settings.json lets these run without asking you:\n{list}Trust them? [y/N] ",
        "此项目的 .claude/settings.json 允许以下操作无需询问你：\n{list}信任它们吗？[y/N] ",
    ),
    (
        "claude_allow_not_trusted",
        "the allow rules of the project's .claude/settings.json are not trusted and do not apply (start with --trust-project, or answer yes on a terminal); its deny and ask rules do",
        "项目 .claude/settings.json 中的允许规则未被信任，不生效（使用 --trust-project 启动，或在终端中回答 yes）；其拒绝与询问规则生效",
    ),
    (
        "hooks_not_trusted",
        "the project's hooks are not trusted and do not run (start with --trust-project, or answer yes on a terminal)",
        "项目的钩子未被信任，不会运行（使用 --trust-project 启动，或在终端中回答 yes）",
    ),
    (
        "blocked_by_hook",
        "the message was not sent: a hook blocked it ({reason})",
        "消息未发送：被钩子阻止（{reason}）",
    ),
    (
        "stop_hook_gave_up",
        "a hook asked the turn to go on {n} times in a row; it ends here",
        "钩子已连续 {n} 次要求继续；本轮到此结束",
    ),
    (
        "hook_interrupted",
        "interrupted: the `{event}` hooks were stopped (a `pre_message` hook stopped means the message was not sent)",
        "已中断：`{event}` 钩子已停止（`pre_message` 钩子被停止时消息不会发送）",
    ),
    (
        "help_hooks",
        "hooks: each entry's event, how often it fired and failed, and whether it runs",
        "钩子：每一项的事件、触发与失败次数，以及是否运行",
    ),
    (
        "hooks_none",
        "no hooks are configured (`hook.entries` in a config file)",
        "没有配置钩子（配置文件中的 `hook.entries`）",
    ),
    (
        "hooks_row",
        "{name} ({origin}, {event}): fired {fired}, failed {failed}{note}",
        "{name}（{origin}，{event}）：触发 {fired} 次，失败 {failed} 次{note}",
    ),
    (
        "list_subagents_hidden",
        "({n:subagent conversation} not shown; /list all shows them)",
        "（未显示 {n} 个子代理对话；/list all 可显示）",
    ),
    (
        "help_agents",
        "the subagent roles the `agent` tool can start: where each was read, what it does, its tools",
        "`agent` 工具可启动的子代理角色：来源、用途与工具",
    ),
    (
        "agents_off",
        "subagents are off (`subagent.enabled` is false)",
        "子代理已关闭（`subagent.enabled` 为 false）",
    ),
    (
        "agents_every_tool",
        "every tool the session allows",
        "会话允许的所有工具",
    ),
    (
        "help_tasks",
        "the subagent tasks of this session: state, time, calls, tokens; `stop ID` stops one",
        "本次会话的子代理任务：状态、用时、调用、令牌；`stop ID` 停止一个",
    ),
    ("tasks_none", "no subagent tasks yet", "还没有子代理任务"),
    (
        "tasks_row",
        "{id} {role} · {state}{where} · {elapsed} s · {calls:tool call} · {input} in, {output} out · {task}",
        "{id} {role} · {state}{where} · {elapsed} 秒 · {calls} 次工具调用 · 输入 {input}，输出 {output} · {task}",
    ),
    ("tasks_background", " (background)", "（后台）"),
    (
        "tasks_usage",
        "/tasks takes nothing or `stop ID` (got `{args}`)",
        "/tasks 不带参数，或 `stop ID`（收到 `{args}`）",
    ),
    (
        "tasks_stopping",
        "stopping task {id}; it keeps what it said",
        "正在停止任务 {id}；已说的内容会保留",
    ),
    (
        "task_ended",
        "background task {id} ({role}) {state} · its answer goes with the next message in conversation {parent}",
        "后台任务 {id}（{role}）{state} · 其答复将随对话 {parent} 的下一条消息送达",
    ),
    (
        "protected_changed_at_exit",
        "while the MCP servers ran, {names} was created or replaced: new protects these names (they shape later sessions); check them before the next session",
        "MCP 服务器运行期间，{names} 被创建或替换：new 保护这些名称（它们会影响以后的会话）；请在下次会话前检查",
    ),
    (
        "tasks_stopped_at_exit",
        "stopped {n:subagent task} still running",
        "已停止 {n} 个仍在运行的子代理任务",
    ),
    (
        "agents_row",
        "{name} ({source}): {description} · tools: {tools}",
        "{name}（{source}）：{description} · 工具：{tools}",
    ),
    (
        "checkpoints_usage",
        "/checkpoints takes nothing or `gc` (got `{args}`)",
        "/checkpoints 不带参数，或 `gc`（收到 `{args}`）",
    ),
    (
        "checkpoints_collected",
        "removed {snapshots} snapshots and {objects} stored files no conversation refers to ({mb} MB)",
        "删除了没有对话引用的 {snapshots} 个快照和 {objects} 个存储文件（{mb} MB）",
    ),
    (
        "help_restore",
        "make the working folder match the current node's state (the folder as it was is kept, so it can be undone)",
        "让工作目录与当前节点的状态一致（原来的状态会保留，可以撤销）",
    ),
    (
        "folder_differs",
        "the working folder differs from [{n}]'s state; restoring it would change:",
        "工作目录与 [{n}] 的状态不同；恢复将改动：",
    ),
    ("and_more", "… and {n} more", "……还有 {n} 个"),
    (
        "restore_hint",
        "/restore makes the folder match it; /diff shows what changed since",
        "/restore 可使目录与之一致；/diff 显示此后的改动",
    ),
    (
        "restore_offer",
        "restore the folder to this node's state? [y/N/d(iff)] ",
        "将目录恢复为此节点的状态吗？[y/N/d(差异)] ",
    ),
    (
        "folder_matches",
        "the working folder already matches [{n}]",
        "工作目录已与 [{n}] 一致",
    ),
    (
        "changed_outside",
        "  (changed outside new)",
        "  （在 new 之外被修改）",
    ),
    (
        "changed_outside_short",
        "changed outside new",
        "在 new 之外被修改",
    ),
    (
        "restore_changed_meanwhile",
        "{n:file} changed since you answered (left alone so far):",
        "{n} 个文件在你回答之后被修改（暂未改动）：",
    ),
    (
        "restore_overwrite_them",
        "Overwrite them too? [y/N] ",
        "也覆盖它们吗？[y/N] ",
    ),
    (
        "changed_meanwhile_short",
        "changed since the question",
        "在提问之后被修改",
    ),
    (
        "restore_would",
        "restoring [{n}] would change:",
        "恢复 [{n}] 将改动：",
    ),
    ("restore_ask", "restore? [y/N] ", "恢复吗？[y/N] "),
    (
        "restore_ask_outside",
        "{n:file} changed outside new since its last snapshot; overwrite them too? [y/N] ",
        "有 {n} 个文件在 new 上次快照之后被外部修改；也覆盖它们吗？[y/N] ",
    ),
    ("restore_cancelled", "nothing restored", "未恢复任何内容"),
    (
        "restored",
        "restored {done:file} to [{n}]'s state; {kept}",
        "已将 {done} 个文件恢复到 [{n}] 的状态；{kept}",
    ),
    (
        "restored_kept_with",
        "the folder as it was is kept as [{from}]'s state: /{id} then /restore brings it back",
        "原来的目录保存为 [{from}] 的状态：/{id} 再 /restore 即可恢复",
    ),
    (
        "restored_kept_in_store",
        "the folder as it was is kept in the checkpoint store",
        "原来的目录保存在检查点存储中",
    ),
    ("not_restored", "not restored: {what}", "未恢复：{what}"),
    (
        "cannot_restore",
        "cannot be restored: {what}",
        "无法恢复：{what}",
    ),
    (
        "restore_the_rest",
        "restore the rest? [y/N] ",
        "恢复其余文件吗？[y/N] ",
    ),
    (
        "checkpoints_off",
        "checkpoints are off (checkpoints.enabled is false)",
        "检查点已关闭（checkpoints.enabled 为 false）",
    ),
    (
        "diff_usage",
        "/diff takes up to two node numbers (got `{args}`)",
        "/diff 最多接受两个节点编号（收到 `{args}`）",
    ),
    (
        "no_node_n",
        "there is no node [{n}]; /tree shows the numbers",
        "没有节点 [{n}]；/tree 会显示编号",
    ),
    (
        "no_checkpoint_at",
        "node [{n}] has no checkpoint yet: no tool has changed files on its branch",
        "节点 [{n}] 还没有检查点：其分支上尚无工具修改过文件",
    ),
    ("no_differences", "no differences", "没有差异"),
    (
        "checkpoint_stats",
        "{snapshots} snapshots, {objects} stored files, {mb} MB",
        "{snapshots} 个快照，{objects} 个存储文件，共 {mb} MB",
    ),
    (
        "checkpoint_failed",
        "the working folder could not be checkpointed ({reason}); the turn goes on",
        "无法为工作目录建立检查点（{reason}）；本轮继续",
    ),
    (
        "a_summary_is_not_edited",
        "[{n}] is a summary node: it is never edited; /compact writes a new one",
        "[{n}] 是摘要节点，不能编辑；/compact 会生成新的摘要",
    ),
    (
        "misplaced_summaries",
        "summary nodes whose replaced message is not above them are kept but not used in requests: {ids}",
        "以下摘要节点所代替的消息不在其上方，已保留但不会用于请求：{ids}",
    ),
    (
        "tree_summary",
        "summary of {range} · {before} → {after}",
        "摘要，代替 {range} · {before} → {after}",
    ),
    (
        "help_compact",
        "summarise the start of this branch into a new node (nothing is rewritten); an optional focus says what to keep",
        "把本分支的前段总结为一个新节点（不改写任何内容）；可附上需要重点保留的内容",
    ),
    (
        "help_context",
        "the context window and what the next request holds, by source and kind",
        "上下文窗口，以及下一次请求按来源和类型的占用",
    ),
    (
        "ctx_window",
        "context window: {window} tokens ({source})",
        "上下文窗口：{window} 个 token（{source}）",
    ),
    ("ctx_source_config", "from the config", "来自配置"),
    ("ctx_source_server", "reported by the server", "服务器报告"),
    (
        "ctx_source_error",
        "named by the server's context-overflow error",
        "来自服务器的超出上下文错误",
    ),
    (
        "ctx_source_family",
        "default for {family} models",
        "{family} 系列模型的默认值",
    ),
    (
        "ctx_source_fallback",
        "assumed; set context_window_size in the config",
        "假定值；可在配置中设置 context_window_size",
    ),
    (
        "ctx_in_use",
        "next request: {used} tokens ({pct}% of the window; estimates × {factor} from the last reported count)",
        "下一次请求：{used} 个 token（占窗口 {pct}%；估算值按上次报告的用量 × {factor} 校准）",
    ),
    ("ctx_row_system", "system prompt", "系统提示"),
    ("ctx_row_tools", "tool definitions", "工具定义"),
    ("ctx_row_summary", "summary", "摘要"),
    ("ctx_row_user", "user messages", "用户消息"),
    ("ctx_row_assistant", "answers", "回答"),
    ("ctx_row_results", "tool results", "工具结果"),
    ("ctx_count", "{n}", "{n} 条"),
    (
        "ctx_results_count",
        "{n}, {previews} sent as previews",
        "{n} 条，其中 {previews} 条以预览发送",
    ),
    (
        "ctx_left",
        "left before automatic compaction: {left} tokens (margin {margin})",
        "距自动压缩还剩：{left} 个 token（预留 {margin}）",
    ),
    ("ctx_auto_on", "automatic compaction: on", "自动压缩：开启"),
    (
        "ctx_auto_disabled",
        "automatic compaction: off (compaction.enabled is false)",
        "自动压缩：关闭（compaction.enabled 为 false）",
    ),
    (
        "ctx_auto_breaker",
        "automatic compaction: stopped after repeated failures (breaker open); /compact turns it back on",
        "自动压缩：多次失败后已停止（断路器打开）；/compact 成功后重新开启",
    ),
    ("status_secs", "{secs} s", "{secs} 秒"),
    (
        "help_status",
        "the last turn's status line, the model, the permission mode and this session's totals",
        "上一轮的状态行、模型、权限模式和本次会话的累计用量",
    ),
    (
        "status_no_turn_yet",
        "no turn yet in this session",
        "本次会话还没有对话轮次",
    ),
    (
        "status_setup",
        "provider {name} · model {model} · permission mode {mode}",
        "服务 {name} · 模型 {model} · 权限模式 {mode}",
    ),
    (
        "status_totals",
        "this session: {turns:turn} · {input} in · {output} out{cost}",
        "本次会话：{turns} 轮 · 输入 {input} · 输出 {output}{cost}",
    ),
    (
        "help_init",
        "ask the model to survey the project and write its AGENTS.md (build and test commands, layout, conventions)",
        "让模型调查项目并编写 AGENTS.md（构建和测试命令、目录结构、约定）",
    ),
];

/// The text for `key` in `lang`, its placeholders filled from `args`. An unknown key (a bug the
/// tests catch) shows as the key itself rather than failing.
pub fn tr(lang: Lang, key: &str, args: &[(&str, &dyn Display)]) -> String {
    match template(lang, key) {
        Some(template) => fill(lang, template, args),
        None => {
            debug_assert!(false, "no text `{key}`");
            key.to_string()
        }
    }
}

/// The template of a text, placeholders unfilled: for a caller that fills one placeholder itself
/// on every line of a long drawing (`/tree`'s role labels).
pub fn template(lang: Lang, key: &str) -> Option<&'static str> {
    // Found by a map made on first use: `/tree` asks for a text on each of its lines.
    static BY_KEY: OnceLock<HashMap<&str, usize>> = OnceLock::new();
    let by_key = BY_KEY.get_or_init(|| {
        TEXTS
            .iter()
            .enumerate()
            .map(|(i, (k, _, _))| (*k, i))
            .collect()
    });
    let (_, en, zh) = by_key.get(key).map(|&i| &TEXTS[i])?;
    Some(match lang {
        Lang::En => en,
        Lang::Zh => zh,
    })
}

fn fill(lang: Lang, template: &str, args: &[(&str, &dyn Display)]) -> String {
    let mut out = String::with_capacity(template.len() + 16);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            out.push_str(&rest[open..]);
            return out;
        };
        let inner = &after[..close];
        let (name, noun) = match inner.split_once(':') {
            Some((name, noun)) => (name, Some(noun)),
            None => (inner, None),
        };
        match args.iter().find(|(n, _)| *n == name) {
            Some((_, value)) => {
                let value = value.to_string();
                match (noun, value.parse::<usize>()) {
                    (Some("a"), _) if lang == Lang::En => {
                        out.push_str(article(&value));
                        out.push(' ');
                        out.push_str(&value);
                    }
                    (Some(noun), Ok(n)) if noun != "a" => out.push_str(&count(lang, n, noun)),
                    _ => out.push_str(&value),
                }
            }
            None => {
                out.push('{');
                out.push_str(inner);
                out.push('}');
            }
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    out
}

/// An error as the REPL says it: in English its own text; in Chinese, for the errors a user meets
/// (providers, storage, configuration, roles), the catalogue's translation. Text that comes from
/// elsewhere inside (a server's message, the system's reason) stays as it came.
pub fn error(lang: Lang, e: &(dyn StdError + 'static)) -> String {
    use new_core::agent::AgentError;
    use new_core::config::ConfigError;
    use new_core::conversation::{SessionError, StoreError, TreeError};
    use new_core::llm::{Hint, LlmError};
    use new_core::prompt::RoleError;
    if lang == Lang::En {
        return e.to_string();
    }
    let t = |key: &str, args: &[(&str, &dyn Display)]| tr(lang, key, args);
    if let Some(e) = e.downcast_ref::<AgentError>() {
        return match e {
            AgentError::Llm(e) => error(lang, e),
            AgentError::Session(e) => error(lang, e),
        };
    }
    if let Some(e) = e.downcast_ref::<LlmError>() {
        return match e {
            LlmError::MissingKey { provider, var } => {
                t("err_missing_key", &[("provider", provider), ("var", var)])
            }
            LlmError::Connect { url, reason, var } => t(
                "err_connect",
                &[("url", url), ("reason", reason), ("var", var)],
            ),
            LlmError::Http {
                status,
                url,
                message,
                hint,
                ..
            } => {
                let hint = match hint.as_ref() {
                    Hint::None => String::new(),
                    Hint::Key { var } => t("hint_key", &[("var", var)]),
                    Hint::Model { model, var, kind } => t(
                        match kind {
                            ProviderKind::OpenAi => "hint_model_openai",
                            ProviderKind::Anthropic => "hint_model_anthropic",
                        },
                        &[("model", model), ("var", var)],
                    ),
                    Hint::RateLimited => t("hint_rate_limited", &[]),
                    Hint::Quota => t("hint_quota", &[]),
                    Hint::ServerFailed => t("hint_server_failed", &[]),
                };
                t(
                    "err_http",
                    &[
                        ("url", url),
                        ("status", status),
                        ("message", message),
                        ("hint", &hint),
                    ],
                )
            }
            LlmError::Server { message, .. } => t("err_server", &[("message", message)]),
            LlmError::StreamCut(reason) => t("err_stream_cut", &[("reason", reason)]),
            LlmError::Silent { url, secs } => t("err_silent", &[("url", url), ("secs", secs)]),
            LlmError::Client(reason) => t("err_client", &[("reason", reason)]),
            LlmError::ContextOverflow {
                url,
                message,
                window,
                ..
            } => t(
                "err_overflow",
                &[
                    ("url", url),
                    (
                        "window",
                        &window.map(|n| format!(" ({n})")).unwrap_or_default(),
                    ),
                    ("message", message),
                ],
            ),
        };
    }
    if let Some(e) = e.downcast_ref::<SessionError>() {
        return match e {
            SessionError::Tree(e) => error(lang, e),
            SessionError::Store(e) => t("err_not_saved", &[("error", &error(lang, e))]),
        };
    }
    if let Some(e) = e.downcast_ref::<StoreError>() {
        return match e {
            StoreError::NotFound(id) => t("err_no_conversation", &[("id", id)]),
            StoreError::Ambiguous { prefix, matches } => t(
                "err_ambiguous",
                &[("prefix", prefix), ("ids", &matches.join(", "))],
            ),
            StoreError::Io { .. } | StoreError::Foreign { .. } | StoreError::NotRegular(_) => {
                e.to_string()
            }
        };
    }
    if let Some(e) = e.downcast_ref::<TreeError>() {
        return match e {
            TreeError::UnknownMessage(id) => t("err_unknown_message", &[("id", id)]),
            TreeError::DuplicateMessage(id) => t("err_duplicate_message", &[("id", id)]),
        };
    }
    if let Some(e) = e.downcast_ref::<ConfigError>() {
        let file = CONFIG_FILE;
        return match e {
            ConfigError::Read { path, cause } => t(
                "err_config_read",
                &[("path", &path.display()), ("cause", cause)],
            ),
            ConfigError::Parse { path, key, cause } => t(
                "err_config_parse",
                &[
                    ("path", &path.display()),
                    (
                        "cause",
                        &match key {
                            Some(k) => format!("`{k}`: {cause}"),
                            None => cause.to_string(),
                        },
                    ),
                ],
            ),
            ConfigError::At {
                path,
                line,
                column,
                inner,
            } => format!(
                "{}:{line}:{column}: {}",
                path.display(),
                error(lang, inner.as_ref())
            ),
            ConfigError::UnknownProvider { name, known } => t(
                "err_unknown_provider",
                &[
                    ("name", name),
                    ("known", &known.join(", ")),
                    ("file", &file),
                ],
            ),
            ConfigError::UnknownKind { name, kind } => {
                t("err_unknown_kind", &[("name", name), ("kind", kind)])
            }
            ConfigError::BadValue {
                key,
                value,
                expected,
            } => t(
                "err_bad_value",
                &[("key", key), ("value", value), ("expected", expected)],
            ),
            ConfigError::Invalid { key, reason } => {
                t("err_config_invalid", &[("key", key), ("reason", reason)])
            }
            ConfigError::OutOfRange {
                key,
                value,
                min,
                max,
            } => t(
                "err_out_of_range",
                &[("key", key), ("value", value), ("min", min), ("max", max)],
            ),
            ConfigError::NoBaseUrl { name } => {
                t("err_no_base_url", &[("name", name), ("file", &file)])
            }
            ConfigError::UnknownLang(l) => t("err_unknown_lang", &[("lang", l)]),
            ConfigError::UnknownMode(m) => t("err_unknown_mode", &[("mode", m)]),
            ConfigError::Sandbox(e) => error(lang, e),
        };
    }
    if let Some(e) = e.downcast_ref::<RoleError>() {
        return match e {
            RoleError::Unknown {
                name,
                available,
                searched,
            } => t(
                "err_unknown_role",
                &[
                    ("name", name),
                    ("available", &available.join(", ")),
                    (
                        "searched",
                        &searched
                            .iter()
                            .map(|d| d.display().to_string())
                            .collect::<Vec<_>>()
                            .join(", "),
                    ),
                ],
            ),
            RoleError::Read { path, cause } => t(
                "err_role_read",
                &[("path", &path.display()), ("cause", cause)],
            ),
        };
    }
    sandbox_error(lang, e)
        .or_else(|| hook_error(lang, e))
        .unwrap_or_else(|| e.to_string())
}

/// The sandbox's errors ([`new_sys::os_sandbox`]) in `lang`; None for another error.
fn sandbox_error(lang: Lang, e: &(dyn StdError + 'static)) -> Option<String> {
    use new_sys::os_sandbox::proxy::{HostProblem, HostsError};
    use new_sys::os_sandbox::{OffReason, SandboxError, SettingsError, SetupError};
    let t = |key: &str, args: &[(&str, &dyn Display)]| tr(lang, key, args);
    if let Some(e) = e.downcast_ref::<OffReason>() {
        return Some(match e {
            OffReason::Disabled => t("err_off_disabled", &[]),
            OffReason::Unsupported { os } => t("err_off_unsupported", &[("os", os)]),
            OffReason::Session(e) => error(lang, e),
            OffReason::Setup(e) => error(lang, e),
            // The helper's own words, as they came.
            OffReason::Helper { line } => line.clone(),
            OffReason::HelperFailed { status } => t("err_off_helper_failed", &[("status", status)]),
            OffReason::CannotStart { path, cause } => t(
                "err_off_cannot_start",
                &[("path", &path.display()), ("cause", cause)],
            ),
        });
    }
    if let Some(e) = e.downcast_ref::<SandboxError>() {
        return Some(match e {
            SandboxError::TempFolder { path, cause } => t(
                "err_sandbox_temp_folder",
                &[("path", &path.display()), ("cause", cause)],
            ),
            SandboxError::NoProxy => t("err_sandbox_no_proxy", &[]),
            SandboxError::Proxy { cause } => t("err_sandbox_proxy", &[("cause", cause)]),
            SandboxError::Describe { cause } => t("err_sandbox_describe", &[("cause", cause)]),
        });
    }
    if let Some(e) = e.downcast_ref::<SetupError>() {
        return Some(match e {
            SetupError::NoSpec => t("err_setup_no_spec", &[]),
            SetupError::BadSpec { cause } => t("err_setup_bad_spec", &[("cause", cause)]),
            SetupError::NoProgram => t("err_setup_no_program", &[]),
            SetupError::Fork { cause } => t("err_setup_fork", &[("cause", cause)]),
            SetupError::Exec { program, cause } => {
                t("err_setup_exec", &[("program", program), ("cause", cause)])
            }
            SetupError::Wait { cause } => t("err_setup_wait", &[("cause", cause)]),
            SetupError::EnterFolder { path, cause } => t(
                "err_setup_enter_folder",
                &[("path", &path.display()), ("cause", cause)],
            ),
            SetupError::Unshare { cause } => t("err_setup_unshare", &[("cause", cause)]),
            SetupError::WriteProc { path, cause } => {
                t("err_setup_write_proc", &[("path", path), ("cause", cause)])
            }
            SetupError::PrivateMounts { cause } => {
                t("err_setup_private_mounts", &[("cause", cause)])
            }
            SetupError::Pin { path, cause } => t(
                "err_setup_pin",
                &[("path", &path.display()), ("cause", cause)],
            ),
            SetupError::Hide { path, cause } => t(
                "err_setup_hide",
                &[("path", &path.display()), ("cause", cause)],
            ),
            SetupError::SharedMemory { cause } => t("err_setup_shared_memory", &[("cause", cause)]),
            SetupError::Protect { path, cause } => t(
                "err_setup_protect",
                &[("path", &path.display()), ("cause", cause)],
            ),
            SetupError::ReadOnlyOutside { cause } => {
                t("err_setup_read_only_outside", &[("cause", cause)])
            }
            SetupError::KeepWritable { path, cause } => t(
                "err_setup_keep_writable",
                &[("path", &path.display()), ("cause", cause)],
            ),
            SetupError::Untraceable { cause } => t("err_setup_untraceable", &[("cause", cause)]),
            SetupError::Loopback { cause } => t("err_setup_loopback", &[("cause", cause)]),
            SetupError::ProxyListener { cause } => {
                t("err_setup_proxy_listener", &[("cause", cause)])
            }
            SetupError::Landlock { cause } => t("err_setup_landlock", &[("cause", cause)]),
            SetupError::LandlockUnavailable => t("err_setup_landlock_unavailable", &[]),
            SetupError::LandlockTooOld => t("err_setup_landlock_too_old", &[]),
            SetupError::DropCapability { capability, cause } => t(
                "err_setup_drop_capability",
                &[("capability", capability), ("cause", cause)],
            ),
            SetupError::DropCapabilities { cause } => {
                t("err_setup_drop_capabilities", &[("cause", cause)])
            }
            SetupError::NoSeccompFilter => t("err_setup_no_seccomp", &[]),
            SetupError::Seccomp { cause } => t("err_setup_seccomp", &[("cause", cause)]),
        });
    }
    if let Some(e) = e.downcast_ref::<SettingsError>() {
        return Some(match e {
            SettingsError::NetworkWord { word } => t("err_sandbox_network_word", &[("word", word)]),
            SettingsError::Hosts(e) => t("err_sandbox_hosts", &[("reason", &error(lang, e))]),
            SettingsError::NotAbsolute { key, path } => {
                t("err_sandbox_not_absolute", &[("key", key), ("path", path)])
            }
        });
    }
    if let Some(e) = e.downcast_ref::<HostsError>() {
        return Some(match e {
            HostsError::Empty { number } => t("err_hosts_empty", &[("number", number)]),
            HostsError::Bad { pattern, problem } => {
                let problem = match problem {
                    HostProblem::Empty => t("host_problem_empty", &[]),
                    HostProblem::Space => t("host_problem_space", &[]),
                    HostProblem::Scheme => t("host_problem_scheme", &[]),
                    HostProblem::Path => t("host_problem_path", &[]),
                    HostProblem::Port => t("host_problem_port", &[]),
                    HostProblem::StarTwice => t("host_problem_star_twice", &[]),
                    HostProblem::StarPlace => t("host_problem_star_place", &[]),
                    HostProblem::StarBeforeIp => t("host_problem_star_before_ip", &[]),
                    HostProblem::BadIpv6 => t("host_problem_bad_ipv6", &[]),
                    HostProblem::NotAHost => t("host_problem_not_a_host", &[]),
                    HostProblem::EmptyHost => t("host_problem_empty_host", &[]),
                    HostProblem::TooLong => t("host_problem_too_long", &[]),
                    HostProblem::BadLabel => t("host_problem_bad_label", &[]),
                    HostProblem::BadCharacter => t("host_problem_bad_character", &[]),
                    HostProblem::Numeric => t("host_problem_numeric", &[]),
                };
                t(
                    "err_hosts_bad",
                    &[("pattern", pattern), ("problem", &problem)],
                )
            }
        });
    }
    None
}

/// A hook's run and its subagent's errors ([`new_core::hooks`]) in `lang`; None for another.
fn hook_error(lang: Lang, e: &(dyn StdError + 'static)) -> Option<String> {
    use new_core::hooks::{RunError, SubagentError};
    let t = |key: &str, args: &[(&str, &dyn Display)]| tr(lang, key, args);
    if let Some(e) = e.downcast_ref::<RunError>() {
        return Some(match e {
            RunError::NoSubagents => t("err_hook_no_subagents", &[]),
            RunError::SubagentTimeout { timeout } => {
                t("err_hook_subagent_timeout", &[("secs", &timeout.as_secs())])
            }
            RunError::Subagent(e) => error(lang, e),
            RunError::HttpClient { reason } => t("err_hook_http_client", &[("reason", reason)]),
            // Names the URL and what failed, as the HTTP client said it.
            RunError::Request { reason } => reason.clone(),
            RunError::Status { status } => t("err_hook_status", &[("status", status)]),
            RunError::Sandbox(e) => t("err_hook_sandbox", &[("reason", &error(lang, e))]),
            RunError::Start { cause } => t("err_hook_start", &[("cause", cause)]),
            RunError::Exit { code, stderr } => {
                t("err_hook_exit", &[("code", code), ("stderr", stderr)])
            }
            RunError::Killed => t("err_hook_killed", &[]),
            RunError::Wait { cause } => t("err_hook_wait", &[("cause", cause)]),
            RunError::Timeout { timeout } => {
                t("err_hook_timeout", &[("secs", &timeout.as_secs_f64())])
            }
        });
    }
    if let Some(e) = e.downcast_ref::<SubagentError>() {
        return Some(match e {
            SubagentError::UnknownRole { role, known } => t(
                "err_subagent_unknown_role",
                &[("role", role), ("known", &known.join(", "))],
            ),
            SubagentError::ProjectRole { role, file } => t(
                "err_subagent_project_role",
                &[("role", role), ("file", file)],
            ),
            SubagentError::Store { reason } => t("err_subagent_store", &[("reason", reason)]),
            SubagentError::NoRuntime => t("err_subagent_no_runtime", &[]),
            SubagentError::Thread { cause } => t("err_subagent_thread", &[("cause", cause)]),
            SubagentError::Failed { reason } => t("err_subagent_failed", &[("reason", reason)]),
            SubagentError::Stopped { reason } => t("err_subagent_stopped", &[("reason", reason)]),
            SubagentError::Interrupted => t("err_subagent_interrupted", &[]),
            SubagentError::NoAnswer => t("err_subagent_no_answer", &[]),
            SubagentError::Ended => t("err_subagent_ended", &[]),
        });
    }
    None
}

/// A hook's failure as one line in `lang`, its control characters made visible (it quotes
/// what the hook wrote).
pub fn hook_failure(lang: Lang, failure: &HookFailure) -> String {
    let t = |key: &str, args: &[(&str, &dyn Display)]| tr(lang, key, args);
    let line = {
        let reason = error(lang, &failure.error);
        t(
            "hook_failed",
            &[
                ("name", &failure.name),
                ("event", &failure.event),
                ("reason", &reason),
            ],
        )
    };
    escape::escape_controls(&line)
}

/// The placeholder names of a template, sorted.
#[cfg(test)]
fn placeholders(template: &str) -> Vec<String> {
    let mut names: Vec<String> = template
        .split('{')
        .skip(1)
        .filter_map(|p| p.split_once('}'))
        .map(|(inner, _)| inner.split(':').next().unwrap_or("").to_string())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// `1 message`, `2 messages`, `3 entries`: a count with its noun in English (the tools' own
/// [`new_core::tools::builtin::plural`]). Chinese text writes its measure words itself, so this is for
/// English only; `_lang` keeps call sites honest about which language they are in.
pub fn count(_lang: Lang, n: usize, noun: &str) -> String {
    builtin::plural(n, noun)
}

/// `a user message`, `an assistant message`: the English article for a word (a `u` sounding as
/// "you" takes `a`, as in "a user"; words starting with "un" take `an`).
pub fn article(word: &str) -> &'static str {
    let lower = word.to_ascii_lowercase();
    if lower.starts_with(['a', 'e', 'i', 'o']) || lower.starts_with("un") {
        "an"
    } else {
        "a"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use new_core::config::ConfigError;
    use new_core::escape;
    use new_sys::os_sandbox::SandboxError;
    use std::collections::HashSet;
    use std::fs;
    use std::path::Path;
    use std::time::Duration;

    #[test]
    fn every_key_has_both_languages_with_the_same_placeholders() {
        let mut seen = HashSet::new();
        for (key, en, zh) in TEXTS {
            assert!(seen.insert(*key), "`{key}` twice");
            assert!(
                !en.trim().is_empty() && !zh.trim().is_empty(),
                "`{key}` lacks a language"
            );
            assert_eq!(
                placeholders(en),
                placeholders(zh),
                "`{key}` placeholders differ"
            );
            // A Chinese text that is the English one was not translated; only a few words (a
            // command, a key) are the same in both.
            let has_cjk = zh.chars().any(|c| {
                ('\u{4e00}'..='\u{9fff}').contains(&c) || "，。：；（）、？！“”".contains(c)
            });
            assert!(has_cjk, "`{key}` has no Chinese text: {zh}");
        }
    }

    #[test]
    fn every_key_used_exists_and_every_key_is_used() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut sources = String::new();
        let mut stack = vec![dir];
        while let Some(d) = stack.pop() {
            for e in fs::read_dir(d).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    let text = fs::read_to_string(&p).unwrap();
                    if p.ends_with("src/text.rs") {
                        // Only the code that uses keys here, not the table or these tests.
                        let from = text.find("pub fn error(").unwrap();
                        let to = text
                            .find("/// The placeholder names of a template")
                            .unwrap();
                        sources.push_str(&text[from..to]);
                    } else {
                        sources.push_str(&text);
                    }
                }
            }
        }
        // Keys hold no spaces: with every space gone, `tr(\n    lang, "key"` reads `tr(lang,"key"`.
        let compact: String = sources.chars().filter(|c| !c.is_whitespace()).collect();
        let sources = compact;
        let mut used = HashSet::new();
        // (what precedes a key in a call, what of it belongs to the key)
        for (call, kept) in [
            (".tr(\"", ""),
            ("=tr(\"", ""),
            ("&tr(\"", ""),
            ("text::tr(lang,\"", ""),
            ("text::tr(out.lang,\"", ""),
            ("text::tr(self.lang,\"", ""),
            ("text::tr(self.out.lang,\"", ""),
            ("refuse_text(\"", ""),
            ("help:\"", ""),
            ("=>\"tree_", "tree_"),
            // The tree's role labels, looked up once for a drawing (`Labels::new`).
            ("split(\"tree_", "tree_"),
            ("\"this_is_the_", "this_is_the_"),
            ("\"trusted\"", "trusted"),
            ("\"not_trusted\"", "not_trusted"),
            ("=>t(\"", ""),
            ("=>{t(\"", ""),
            (";t(\"", ""),
            ("=>\"hint_model_", "hint_model_"),
            // `/help`'s groups and keys, named in tables.
            ("\"help_group_", "help_group_"),
            ("\"help_key_", "help_key_"),
            (
                "\"send_text_that_starts_with\"",
                "send_text_that_starts_with",
            ),
        ] {
            if call == format!("\"{kept}\"") {
                if sources.contains(call) {
                    used.insert(kept.to_string());
                }
                continue;
            }
            for piece in sources.split(call).skip(1) {
                used.insert(format!("{kept}{}", piece.split('"').next().unwrap()));
            }
        }
        used.remove("");
        for key in &used {
            assert!(TEXTS.iter().any(|(k, _, _)| k == key), "no text `{key}`");
        }
        for (key, _, _) in TEXTS {
            assert!(used.contains(*key), "`{key}` is never used");
        }
    }

    #[test]
    fn placeholders_are_filled_and_counts_agree() {
        assert_eq!(
            fill(
                Lang::En,
                "resumed {id} ({n:message})",
                &[("id", &"ab12"), ("n", &1)]
            ),
            "resumed ab12 (1 message)"
        );
        assert_eq!(
            fill(Lang::En, "({n:message})", &[("n", &3)]),
            "(3 messages)"
        );
        assert_eq!(
            fill(Lang::Zh, "（{n} 条消息）", &[("n", &3)]),
            "（3 条消息）"
        );
        assert_eq!(fill(Lang::En, "{missing}", &[]), "{missing}");
        assert_eq!(
            fill(Lang::En, "is {r:a} message", &[("r", &"assistant")]),
            "is an assistant message"
        );
        assert_eq!(
            fill(Lang::En, "is {r:a} message", &[("r", &"user")]),
            "is a user message"
        );
        assert_eq!(
            fill(Lang::Zh, "是 {r} 消息", &[("r", &"user")]),
            "是 user 消息"
        );
    }

    #[test]
    fn hook_failures_and_sandbox_settings_are_said_in_either_language() {
        use new_core::hooks::{HookFailure, RunError, SubagentError};
        let failure = |error| HookFailure {
            name: "lint".into(),
            event: "post_tool_use".into(),
            error,
        };
        let exit = failure(RunError::Exit {
            code: 3,
            stderr: "oops\x1b[31m".into(),
        });
        assert_eq!(
            hook_failure(Lang::En, &exit),
            escape::escape_controls(&exit.to_string())
        );
        assert!(!hook_failure(Lang::En, &exit).contains('\x1b'));
        assert!(
            hook_failure(Lang::Zh, &exit)
                .starts_with("钩子 `lint`（post_tool_use）：退出码 3：oops"),
            "{}",
            hook_failure(Lang::Zh, &exit)
        );
        let role = failure(RunError::Subagent(SubagentError::UnknownRole {
            role: "judge".into(),
            known: vec!["explore".into(), "plan".into()],
        }));
        assert_eq!(
            hook_failure(Lang::En, &role),
            "hook `lint` (post_tool_use): no subagent role `judge`; the roles are explore, plan"
        );
        assert_eq!(
            hook_failure(Lang::Zh, &role),
            "钩子 `lint`（post_tool_use）：没有子代理角色 `judge`；可用的角色：explore, plan"
        );
        let timeout = failure(RunError::Timeout {
            timeout: Duration::from_millis(1500),
        });
        assert_eq!(
            hook_failure(Lang::Zh, &timeout),
            "钩子 `lint`（post_tool_use）：1.5 秒内没有回答；已停止"
        );
        let sandbox = failure(RunError::Sandbox(SandboxError::NoProxy));
        assert_eq!(
            hook_failure(Lang::En, &sandbox),
            "hook `lint` (post_tool_use): cannot start it in the sandbox: no proxy is configured"
        );
        assert_eq!(
            hook_failure(Lang::Zh, &sandbox),
            "钩子 `lint`（post_tool_use）：无法在沙箱中启动：没有配置代理"
        );
        // A bad `sandbox.network` entry stops the configuration: said in either language.
        use new_sys::os_sandbox::SettingsError;
        use new_sys::os_sandbox::proxy::{HostProblem, HostsError};
        let bad = ConfigError::Sandbox(SettingsError::Hosts(HostsError::Bad {
            pattern: "https://x.org".into(),
            problem: HostProblem::Scheme,
        }));
        assert_eq!(
            error(Lang::En, &bad),
            "`sandbox.network` is not valid: bad sandbox.network entry `https://x.org`: write just the host, without a scheme (like `github.com`)"
        );
        assert_eq!(
            error(Lang::Zh, &bad),
            "`sandbox.network` 无效：sandbox.network 的条目 `https://x.org` 有误：只写主机名，不要协议（如 `github.com`）"
        );
    }

    #[test]
    fn counts_and_articles() {
        for (n, noun, want) in [
            (0, "conversation", "0 conversations"),
            (1, "conversation", "1 conversation"),
            (2, "round", "2 rounds"),
            (1, "round", "1 round"),
            (3, "entry", "3 entries"),
            (2, "day", "2 days"),
            (2, "match", "2 matches"),
            (5, "message", "5 messages"),
        ] {
            assert_eq!(count(Lang::En, n, noun), want);
        }
        assert_eq!(article("assistant"), "an");
        assert_eq!(article("user"), "a");
        assert_eq!(article("tool"), "a");
        assert_eq!(article("system"), "a");
    }
}
