//! `/skills` (list, enable, disable) and `/<skill> [args]`.

use super::repl::App;
use new_core::config;
use new_core::config::CONFIG_FILE;
use new_core::escape;
use new_core::skill::Shelf;
use new_core::skill::Tier;
use new_core::trust::Trust;
use std::fmt::Display;
use std::fs;

impl App {
    /// `/<skill> [args]`: the skill's instructions as the next user message, the arguments after
    /// them in a `<user_args>` section; while the turn runs, only the tools the skill allows.
    pub(super) fn run_skill(&mut self, name: &str, args: &str) {
        let Some(skill) = self.engine.skills.get(name).cloned() else {
            return;
        };
        let mut text = self
            .engine
            .tools
            .source::<Shelf>()
            .unwrap_or_default()
            .instructions(&skill, self.engine.config.skill.max_bytes);
        if let Some(dir) = &skill.dir {
            self.engine.tools.workdir().add_read_root(dir.clone());
            text.push_str(&format!(
                "\n\n[This skill's folder is {}: its files can be read with read_file and grep.]",
                dir.display()
            ));
        }
        if !args.is_empty() {
            text.push_str(&format!("\n\n<user_args>\n{args}\n</user_args>"));
        }
        self.engine.skill_tools = skill.allowed_tools.clone();
        self.chat(&text);
        self.engine.skill_tools = None;
    }

    /// `/skills`, `/skills enable NAME`, `/skills disable NAME`.
    pub(super) fn skills_command(&mut self, args: &str) {
        let mut words = args.split_whitespace();
        match (words.next(), words.next(), words.next()) {
            (None, _, _) => self.list_skills(),
            (Some(action @ ("enable" | "disable")), Some(name), None) => {
                self.set_skill(name, action == "enable")
            }
            _ => self.out.error(&self.tr("skills_usage", &[("args", &args)])),
        }
    }

    fn list_skills(&self) {
        let mut skills: Vec<_> = self.engine.skills.all().collect();
        skills.sort_by_key(|s| (s.tier, s.name.clone()));
        let mut text = String::new();
        for skill in skills {
            let state = match (skill.enabled, skill.on_demand()) {
                (true, true) => self.out.green(&self.tr("skill_on_demand", &[])),
                (true, false) => self.out.green(&self.tr("skill_injected", &[])),
                (false, _) => self.out.dim(&self.tr("skill_off", &[])),
            };
            // Where it comes from: a built-in one is said once, not "(built-in, built in)".
            let whence = if skill.tier == Tier::Builtin {
                skill.tier.label().to_string()
            } else {
                format!("{}, {}", skill.tier.label(), skill.source.display())
            };
            // What the skill's files say is escaped; the colour of the state is ours.
            text.push_str(&format!(
                "{state}  {}",
                escape::escape_controls(&format!("{} ({whence})", skill.name))
            ));
            if !skill.description.is_empty() {
                text.push_str(&format!(
                    " {}",
                    self.out.dim(&escape::escape_controls(&skill.description))
                ));
            }
            text.push('\n');
        }
        if text.is_empty() {
            text = self.tr("no_skills", &[]);
        }
        for problem in &self.engine.skills.problems {
            text.push_str(&format!(
                "{}\n",
                self.out
                    .dim(&escape::escape_controls(&format!("! {problem}")))
            ));
        }
        self.out.say(text.trim_end_matches('\n'));
    }

    /// Turns a skill on or off for this project: saved in the project's config, in force at once.
    fn set_skill(&mut self, name: &str, enabled: bool) {
        if self.engine.skills.get(name).is_none() {
            return self.out.error(&self.tr(
                "no_skill_named",
                &[("name", &escape::escape_controls(name))],
            ));
        }
        let file = self.engine.layers.project.join(CONFIG_FILE);
        let saved = config::update_file(&file, |object| {
            let skill = object
                .entry("skill")
                .or_insert_with(|| serde_json::json!({}));
            let Some(skill) = skill.as_object_mut() else {
                return Err("`skill` is not an object".to_string());
            };
            let overrides = skill
                .entry("overrides")
                .or_insert_with(|| serde_json::json!({}));
            let Some(overrides) = overrides.as_object_mut() else {
                return Err("`skill.overrides` is not an object".to_string());
            };
            overrides.insert(name.to_string(), serde_json::Value::Bool(enabled));
            Ok(())
        });
        if let Err(e) = saved {
            return self.out.error(&self.tr(
                "could_not_save_the_rule",
                &[("file", &file.display()), ("error", &e)],
            ));
        }
        // A file the user trusted stays trusted with their own change in it.
        if self.engine.config.project_trusted
            && let Ok(bytes) = fs::read(&file)
        {
            let _ = Trust::new(self.engine.layers.user.as_deref()).trust(
                &self.engine.workdir,
                "config",
                &bytes,
            );
        }
        self.engine
            .config
            .skill
            .overrides
            .insert(name.to_string(), enabled);
        self.reload_skills(false);
        let args: &[(&str, &dyn Display)] = &[("name", &name), ("file", &file.display())];
        let line = if enabled {
            self.tr("skill_enabled", args)
        } else {
            self.tr("skill_disabled", args)
        };
        self.out.say(&line);
    }

    /// Loads the skills (and AGENTS.md) again and rebuilds what depends on them: the system prompt
    /// (of the conversation in use too) and what `use_skill` can load. With `report`, broken files
    /// are named.
    pub(super) fn reload_skills(&mut self, report: bool) {
        let done = super::repl::read_prompt(
            &self.engine.layers,
            &self.engine.role,
            &self.engine.workdir,
            &self.engine.config.skill,
            self.engine.memory.as_ref(),
            &self.engine.config.memory,
            &self.skill_names,
            &self.engine.tools.source::<Shelf>().unwrap_or_default(),
        );
        self.take_prompt(done, report);
    }
}
