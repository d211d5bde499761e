//! First run: with no key and no configuration, say in a few lines how to configure `new`, and on a
//! terminal offer a short setup that writes the user config file (readable only by its owner).

use std::io::Write;
use std::path::{Path, PathBuf};

use super::repl::App;
use new_core::config::{self, FileConfig, ProviderEntry};
use new_core::escape;
use new_core::fs::atomic;
use new_core::layers;
use new_core::llm::{Provider, ProviderKind};
use new_sys::platform::SavedTerminal;
use std::env;
use std::io;
use std::time::Duration;
use tokio::time;

impl App {
    /// Whether this looks like a first run: nothing configured that could reach a model.
    pub(super) fn is_first_run(&self) -> bool {
        !self.engine.config.has_credentials && self.engine.config.files.is_empty()
    }

    /// The few lines on how to configure; to stderr, as a warning would go.
    pub(super) fn explain_configuration(&self) {
        let path = user_config_path()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "~/.config/new/config.json".into());
        let text = self.tr("how_to_configure", &[("path", &path)]);
        // Each line fits the terminal, broken between words (a long path, a narrow terminal).
        let width = super::markdown::terminal_layout(false).width.max(20);
        let fitted: Vec<String> = text
            .lines()
            .flat_map(|line| {
                let indent = line.len() - line.trim_start().len();
                super::wrap::lines(line.trim_start(), width.saturating_sub(indent).max(10))
                    .into_iter()
                    .map(move |l| format!("{}{l}", &line[..indent]))
            })
            .collect();
        eprintln!("{}", fitted.join("\n"));
    }

    /// The interactive setup, offered on a first run. Writes the user config file and switches
    /// to what it configures.
    pub(super) fn offer_setup(&mut self) {
        let answer = self.ask(&self.tr("set_up_now_y_n", &[]), "", false);
        if answer.is_none_or(|a| a.trim().eq_ignore_ascii_case("n") || a.trim() == "否") {
            return self.out.say(&self.tr("skipped_you_can_still_use_the", &[]));
        }
        self.run_setup();
    }

    /// The setup's questions (`new --setup`, `/setup`, or yes to the first run's offer).
    pub(super) fn run_setup(&mut self) {
        let choice = self
            .ask(&self.tr("provider_1_openai_2_anthropic_3", &[]), "", false)
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
                return self
                    .out
                    .error(&self.tr("no_provider_run_new_again_to", &[("other", &other)]));
            }
        };
        let mut entry = ProviderEntry {
            kind: kind.map(str::to_string),
            ..ProviderEntry::default()
        };
        if let Some(default_url) = default_url {
            let url = self
                .ask(
                    &self.tr("ask_base_url", &[("default", &default_url)]),
                    "",
                    false,
                )
                .unwrap_or_default();
            let url = url.trim();
            entry.base_url = Some(if url.is_empty() { default_url } else { url }.to_string());
        }
        let key_prompt = if default_url.is_some() {
            self.tr("api_key_enter_for_none", &[])
        } else {
            self.tr("api_key_not_shown", &[])
        };
        let key = self.read_secret(&key_prompt).unwrap_or_default();
        if !key.trim().is_empty() {
            entry.api_key = Some(key.trim().to_string());
        } else if default_url.is_none() {
            return self
                .out
                .error(&self.tr("no_key_given_nothing_was_written", &[]));
        }
        // A server of the user's own: the models it offers, to pick from.
        let offered = match &entry.base_url {
            Some(url) => self.server_models(url, entry.api_key.as_deref()),
            None => Vec::new(),
        };
        let default_model = offered.first().map_or(default_model, String::as_str);
        let model = self
            .ask(
                &self.tr("ask_model", &[("default", &default_model)]),
                "",
                false,
            )
            .unwrap_or_default();
        let model = match model.trim() {
            "" => default_model.to_string(),
            n => match n.parse::<usize>() {
                Ok(i @ 1..) if i <= offered.len() => offered[i - 1].clone(),
                _ => n.to_string(),
            },
        };
        let Some(path) = user_config_path() else {
            return self.out.error(&self.tr("no_config_folder", &[]));
        };
        let mut file = match config::read_file(&path) {
            Ok(existing) => existing.unwrap_or_default(),
            Err(e) => return self.out.error(&super::text::error(self.out.lang, &e)),
        };
        file.provider = Some(name.to_string());
        file.model = Some(model);
        file.providers.insert(name.to_string(), entry);
        if let Err(e) = write_private(&path, &file) {
            return self.out.error(&self.tr(
                "writing_failed",
                &[("path", &path.display()), ("error", &e)],
            ));
        }
        self.out
            .say(&self.tr("wrote_private", &[("path", &path.display())]));
        self.reload_configuration();
    }

    /// The models an OpenAI-compatible server at `url` offers (`GET /models`), listed for the
    /// user with numbers; none, and said why, when it cannot be asked within a few seconds.
    fn server_models(&mut self, url: &str, key: Option<&str>) -> Vec<String> {
        const SHOWN: usize = 20;
        let mut settings = self.engine.provider.settings().clone();
        settings.name = "local".to_string();
        settings.kind = ProviderKind::OpenAi;
        settings.base_url = url.to_string();
        settings.api_key = key.map(str::to_string);
        settings.key_required = false;
        let asked = Provider::new(settings)
            .map_err(|e| e.to_string())
            .and_then(|p| {
                self.runtime
                    .block_on(async { time::timeout(Duration::from_secs(10), p.models()).await })
                    .map_err(|_| self.tr("timed_out", &[]))
                    .and_then(|r| r.map_err(|e| e.to_string()))
            });
        let models: Vec<String> = match asked {
            Ok(models) => models.into_iter().map(|m| m.id).collect(),
            Err(e) => {
                self.out.say(&self.out.dim(&self.tr(
                    "setup_no_models",
                    &[("error", &escape::escape_controls(&e))],
                )));
                return Vec::new();
            }
        };
        if models.is_empty() {
            return models;
        }
        let mut list: Vec<String> = models
            .iter()
            .take(SHOWN)
            .enumerate()
            .map(|(i, m)| format!("  {}) {}", i + 1, escape::escape_controls(m)))
            .collect();
        if models.len() > SHOWN {
            list.push(self.tr("setup_models_more", &[("n", &(models.len() - SHOWN))]));
        }
        self.out
            .say(&self.tr("setup_models", &[("list", &list.join("\n"))]));
        models
    }

    /// Reads the configuration again (after setup) and rebuilds the provider from it.
    fn reload_configuration(&mut self) {
        // The command line was not about the new provider: only its language still applies.
        let overrides = config::Overrides {
            lang: self.engine.overrides.lang,
            ..config::Overrides::default()
        };
        let loaded = config::load(&self.engine.layers, &overrides, &|n| env::var(n).ok())
            .map_err(|e| e.to_string())
            .and_then(|c| {
                Provider::new(c.provider.clone())
                    .map(|p| (c, p))
                    .map_err(|e| e.to_string())
            });
        match loaded {
            Ok((config, provider)) => {
                self.engine.config = config;
                self.engine.provider = provider;
                self.reset_context();
                self.out.say(&self.tr(
                    "using_provider_and_model",
                    &[
                        ("name", &self.engine.provider.settings().name),
                        ("model", &self.engine.config.model),
                    ],
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
        let _ = io::stdout().flush();
        let line = without_echo(|| {
            let mut line = String::new();
            io::stdin().read_line(&mut line).map(|_| line)
        });
        println!();
        line.ok()
            .map(|l| l.trim_end_matches(['\n', '\r']).to_string())
    }
}

/// `<config dir>/new/config.json`.
pub fn user_config_path() -> Option<PathBuf> {
    layers::user_dir().map(|d| d.join(config::CONFIG_FILE))
}

/// Writes the config with mode 0600 in a folder with mode 0700, atomically.
fn write_private(path: &Path, file: &FileConfig) -> io::Result<()> {
    let text = serde_json::to_string_pretty(file).map_err(io::Error::other)? + "\n";
    atomic::write_private(path, text.as_bytes())
}

/// Runs `read` with the terminal's echo turned off, restoring it afterwards.
fn without_echo<T>(read: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
    // Not a terminal: nothing to hide from, and nothing changed.
    let quiet = SavedTerminal::without_echo();
    let result = read();
    drop(quiet);
    result
}
