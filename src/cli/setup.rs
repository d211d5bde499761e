//! First run: with no key and no configuration, say in a few lines how to configure `new`, and on a
//! terminal offer a short setup that writes the user config file (readable only by its owner).

use std::io::Write;
use std::path::{Path, PathBuf};

use super::repl::App;
use crate::config::{self, FileConfig, ProviderEntry};
use crate::llm::Provider;

impl App {
    /// Whether this looks like a first run: nothing configured that could reach a model.
    pub(super) fn is_first_run(&self) -> bool {
        !self.config.has_credentials && self.config.files.is_empty()
    }

    /// The few lines on how to configure; to stderr, as a warning would go.
    pub(super) fn explain_configuration(&self) {
        let path = user_config_path()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "~/.config/new/config.json".into());
        let text = self.t(
            &format!(
                "new needs a model to talk to. Set one of:\n\
                 \x20 export OPENAI_API_KEY=sk-...                      # OpenAI\n\
                 \x20 export ANTHROPIC_API_KEY=sk-ant-...               # Anthropic (with --provider anthropic)\n\
                 \x20 export OPENAI_BASE_URL=http://127.0.0.1:8080/v1   # a local server: llama.cpp, Ollama (:11434/v1), vLLM\n\
                 or write {path}, for example:\n\
                 \x20 {{\"provider\": \"anthropic\", \"model\": \"claude-sonnet-4-5\", \"providers\": {{\"anthropic\": {{\"api_key\": \"sk-ant-...\"}}}}}}\n\
                 \x20 {{\"provider\": \"openai\", \"model\": \"gpt-4o-mini\", \"providers\": {{\"openai\": {{\"api_key\": \"sk-...\"}}}}}}\n\
                 \x20 {{\"provider\": \"local\", \"model\": \"qwen2.5-coder\", \"providers\": {{\"local\": {{\"base_url\": \"http://127.0.0.1:8080/v1\"}}}}}}"
            ),
            &format!(
                "new 需要一个模型服务。设置以下之一：\n\
                 \x20 export OPENAI_API_KEY=sk-...                      # OpenAI\n\
                 \x20 export ANTHROPIC_API_KEY=sk-ant-...               # Anthropic（配合 --provider anthropic）\n\
                 \x20 export OPENAI_BASE_URL=http://127.0.0.1:8080/v1   # 本地服务：llama.cpp、Ollama（:11434/v1）、vLLM\n\
                 或编写 {path}，例如：\n\
                 \x20 {{\"provider\": \"anthropic\", \"model\": \"claude-sonnet-4-5\", \"providers\": {{\"anthropic\": {{\"api_key\": \"sk-ant-...\"}}}}}}\n\
                 \x20 {{\"provider\": \"openai\", \"model\": \"gpt-4o-mini\", \"providers\": {{\"openai\": {{\"api_key\": \"sk-...\"}}}}}}\n\
                 \x20 {{\"provider\": \"local\", \"model\": \"qwen2.5-coder\", \"providers\": {{\"local\": {{\"base_url\": \"http://127.0.0.1:8080/v1\"}}}}}}"
            ),
        );
        eprintln!("{text}");
    }

    /// The interactive setup. Writes the user config file and switches to what it configures.
    pub(super) fn offer_setup(&mut self) {
        let answer = self.ask(
            &self.t("Set up now? [Y/n] ", "现在设置吗？[Y/n] "),
            "",
            false,
        );
        if answer.is_none_or(|a| a.trim().eq_ignore_ascii_case("n") || a.trim() == "否") {
            return self.out.say(&self.t(
                "Skipped. You can still use the commands; set a key to chat.",
                "已跳过。命令仍可使用；设置密钥后即可对话。",
            ));
        }
        let choice = self
            .ask(
                &self.t(
                    "Provider: 1) OpenAI  2) Anthropic  3) a local or other OpenAI-compatible server [1] ",
                    "服务：1) OpenAI  2) Anthropic  3) 本地或其他 OpenAI 兼容服务 [1] ",
                ),
                "",
                false,
            )
            .unwrap_or_default();
        let (name, kind, default_model, default_url) = match choice.trim() {
            "" | "1" => ("openai", None, "gpt-4o-mini", None),
            "2" => ("anthropic", None, "claude-sonnet-4-5", None),
            "3" => (
                "local",
                Some("openai"),
                "local",
                Some("http://127.0.0.1:8080/v1"),
            ),
            other => {
                return self.out.error(&self.t(
                    &format!("no provider `{other}`; run new again to set up"),
                    &format!("没有选项 `{other}`；请重新运行 new 进行设置"),
                ));
            }
        };
        let mut entry = ProviderEntry {
            kind: kind.map(str::to_string),
            ..ProviderEntry::default()
        };
        if let Some(default_url) = default_url {
            let url = self
                .ask(&format!("Base URL [{default_url}] "), "", false)
                .unwrap_or_default();
            let url = url.trim();
            entry.base_url = Some(if url.is_empty() { default_url } else { url }.to_string());
        }
        let key_prompt = if default_url.is_some() {
            self.t("API key (Enter for none): ", "API 密钥（没有则直接回车）：")
        } else {
            self.t("API key (not shown): ", "API 密钥（输入不显示）：")
        };
        let key = self.read_secret(&key_prompt).unwrap_or_default();
        if !key.trim().is_empty() {
            entry.api_key = Some(key.trim().to_string());
        } else if default_url.is_none() {
            return self.out.error(&self.t(
                "no key given; nothing was written",
                "未输入密钥；没有写入任何内容",
            ));
        }
        let model = self
            .ask(&format!("Model [{default_model}] "), "", false)
            .unwrap_or_default();
        let model = match model.trim() {
            "" => default_model.to_string(),
            m => m.to_string(),
        };
        let Some(path) = user_config_path() else {
            return self.out.error("this platform has no config folder");
        };
        let mut file = match config::read_file(&path) {
            Ok(existing) => existing.unwrap_or_default(),
            Err(e) => return self.out.error(&e.to_string()),
        };
        file.provider = Some(name.to_string());
        file.model = Some(model);
        file.providers.insert(name.to_string(), entry);
        if let Err(e) = write_private(&path, &file) {
            return self.out.error(&format!("writing {}: {e}", path.display()));
        }
        self.out.say(&self.t(
            &format!("wrote {} (readable only by you)", path.display()),
            &format!("已写入 {}（仅你可读）", path.display()),
        ));
        self.reload_configuration();
    }

    /// Reads the configuration again (after setup) and rebuilds the provider from it.
    fn reload_configuration(&mut self) {
        // The command line was not about the new provider: only its language still applies.
        let overrides = config::Overrides {
            lang: self.overrides.lang,
            ..config::Overrides::default()
        };
        let loaded = config::load(&self.layers, &overrides, &|n| std::env::var(n).ok())
            .map_err(|e| e.to_string())
            .and_then(|c| {
                Provider::new(c.provider.clone())
                    .map(|p| (c, p))
                    .map_err(|e| e.to_string())
            });
        match loaded {
            Ok((config, provider)) => {
                self.config = config;
                self.provider = provider;
                self.out.say(&self.t(
                    &format!(
                        "using {} with model {}",
                        self.provider.settings().name,
                        self.config.model
                    ),
                    &format!(
                        "正在使用 {}，模型 {}",
                        self.provider.settings().name,
                        self.config.model
                    ),
                ));
            }
            Err(e) => self.out.error(&e),
        }
    }

    /// Reads a line without echoing it (on a terminal), so a key never shows on screen or in the
    /// input history.
    fn read_secret(&mut self, prompt: &str) -> Option<String> {
        if self.reader.is_piped() {
            return self.ask(prompt, "", false);
        }
        print!("{prompt}");
        let _ = std::io::stdout().flush();
        let line = without_echo(|| {
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).map(|_| line)
        });
        println!();
        line.ok()
            .map(|l| l.trim_end_matches(['\n', '\r']).to_string())
    }
}

/// `<config dir>/new/config.json`.
pub fn user_config_path() -> Option<PathBuf> {
    crate::layers::user_dir().map(|d| d.join(config::CONFIG_FILE))
}

/// Writes the config with mode 0600 in a folder with mode 0700, atomically.
fn write_private(path: &Path, file: &FileConfig) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
    let dir = path.parent().expect("a config path has a folder");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let tmp = dir.join(format!(".config.json.{}.tmp", crate::session::new_id()));
    let text = serde_json::to_string_pretty(file).map_err(std::io::Error::other)? + "\n";
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Runs `read` with the terminal's echo turned off, restoring it afterwards.
fn without_echo<T>(read: impl FnOnce() -> std::io::Result<T>) -> std::io::Result<T> {
    let fd = libc::STDIN_FILENO;
    // SAFETY: termios is plain data; tcgetattr fills it or fails, checked.
    let mut saved: libc::termios = unsafe { std::mem::zeroed() };
    if unsafe { libc::tcgetattr(fd, &mut saved) } != 0 {
        return read(); // not a terminal: nothing to hide from
    }
    let mut quiet = saved;
    quiet.c_lflag &= !libc::ECHO;
    quiet.c_lflag |= libc::ECHONL;
    // SAFETY: fd is stdin and `quiet` a valid termios copied from it.
    unsafe { libc::tcsetattr(fd, libc::TCSANOW, &quiet) };
    let result = read();
    // SAFETY: restores the settings read above.
    unsafe { libc::tcsetattr(fd, libc::TCSANOW, &saved) };
    result
}
