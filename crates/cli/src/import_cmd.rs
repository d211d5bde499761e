//! `new import claude|codex|pi PATH…`: other agents' history as conversations of a project.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use new_core::conversation::Store;
use new_core::conversation::import::{ImportError, MAX_LINE_BYTES, Source, import};
use new_core::escape;
use std::fs;
use std::io;

/// What `new import` was asked.
pub struct ImportLaunch {
    pub source: String,
    pub paths: Vec<PathBuf>,
    /// The project whose conversations they become [default: the current folder].
    pub workdir: Option<PathBuf>,
    pub datadir: Option<PathBuf>,
}

/// The `.jsonl` files of `path`: itself, or those below it (sorted), a folder of sessions.
fn files(path: &Path, out: &mut Vec<PathBuf>) -> io::Result<()> {
    if !path.is_dir() {
        out.push(path.to_path_buf());
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = fs::read_dir(path)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    // Links are not followed (a loop of links would never end), nor anything but regular files
    // read; a folder's files before its folders (a session before its subagents' files).
    let kind = |p: &Path| fs::symlink_metadata(p).map(|m| m.file_type()).ok();
    for p in &entries {
        if kind(p).is_some_and(|t| t.is_file()) && p.extension().is_some_and(|e| e == "jsonl") {
            out.push(p.clone());
        }
    }
    for p in &entries {
        if kind(p).is_some_and(|t| t.is_dir()) {
            files(p, out)?;
        }
    }
    Ok(())
}

/// Imports each file; says what each became. Fails (exit 1) when one could not be imported; the
/// others are imported all the same.
pub fn run_import(launch: ImportLaunch) -> ExitCode {
    let Some(source) = Source::parse(&launch.source) else {
        eprintln!(
            "error: `{}` is not a history new can import; use claude, codex or pi",
            escape::escape_controls(&launch.source)
        );
        return ExitCode::from(2);
    };
    if launch.paths.is_empty() {
        eprintln!("error: name the files (or folders of them) to import");
        return ExitCode::from(2);
    }
    let workdir = launch
        .workdir
        .unwrap_or_else(|| PathBuf::from("."))
        .canonicalize();
    let workdir = match workdir {
        Ok(w) => w,
        Err(e) => {
            eprintln!("error: the working folder cannot be used: {e}");
            return ExitCode::from(2);
        }
    };
    let datadir = launch
        .datadir
        .unwrap_or_else(|| super::default_datadir(&workdir));
    let store = match Store::open(&datadir) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    let mut all = Vec::new();
    for p in &launch.paths {
        if let Err(e) = files(p, &mut all) {
            eprintln!("error: reading {}: {e}", p.display());
            return ExitCode::from(1);
        }
    }
    let mut failed = false;
    for path in &all {
        let shown = escape::escape_controls(&path.display().to_string());
        match import(&store, source, path) {
            Ok(done) => {
                let mut line = format!(
                    "imported {shown} as {} ({} messages from {})",
                    done.id,
                    done.messages,
                    source.label()
                );
                if !done.subagents.is_empty() {
                    line.push_str(&format!(
                        ", with {} subagent conversation(s)",
                        done.subagents.len()
                    ));
                }
                println!("{line}");
                if !done.too_long.is_empty() {
                    let lines: Vec<String> = done.too_long.iter().map(|n| n.to_string()).collect();
                    let which = if lines.len() == 1 { "line" } else { "lines" };
                    eprintln!(
                        "warning: {shown}: {which} {} longer than {} MB; left out unread",
                        lines.join(", "),
                        MAX_LINE_BYTES >> 20
                    );
                }
                if !done.skipped.is_empty() {
                    let lines: Vec<String> = done.skipped.iter().map(|n| n.to_string()).collect();
                    let which = if lines.len() == 1 { "line" } else { "lines" };
                    eprintln!(
                        "warning: {shown}: {which} {} could not be read; left out",
                        lines.join(", ")
                    );
                }
            }
            Err(e @ ImportError::Already { .. }) => {
                println!("{}", escape::escape_controls(&e.to_string()));
            }
            Err(e) => {
                failed = true;
                eprintln!("error: {}", escape::escape_controls(&e.to_string()));
            }
        }
    }
    println!(
        "into {} (`new {}` and /list show them)",
        escape::escape_controls(&datadir.display().to_string()),
        escape::escape_controls(&workdir.display().to_string())
    );
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
