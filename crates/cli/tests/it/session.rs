//! The engine's session in-process, with no terminal: commands driven against the scripted model
//! server, what the session tells recorded by a [`Recorder`] front end (a `Vec` of events).

use std::path::PathBuf;
use std::sync::Arc;

use new_core::config::{self, Overrides};
use new_core::layers::Layers;
use new_core::session::{
    Answer, CommandError, Ended, Event, Notice, Options, Recorder, RefusedWhy, Resume, Session,
};
use new_core::vocab::Role;

use crate::support::{Env, Server, text, tool_calls, tool_names};

/// A session over `env`'s folders talking to `server`, as `new` would open it, with checkpoints
/// and memory off unless `config` says otherwise.
fn open(env: &Env, server: &Server, config: &str) -> (Session, Runtime) {
    env.write_config(config);
    let workdir = env.work().canonicalize().unwrap();
    let layers = Layers {
        project: workdir.join(".new"),
        user: Some(env.config_dir()),
        codepilot_user: None,
    };
    let base_url = server.base_url.clone();
    let vars = move |name: &str| match name {
        "OPENAI_BASE_URL" => Some(base_url.clone()),
        "LANG" => Some("C".to_string()),
        _ => None,
    };
    let overrides = Overrides::default();
    let config = config::load(&layers, &overrides, &vars).unwrap();
    let role = new_core::prompt::load_role(&layers, "default").unwrap();
    let (interrupt, interrupts) = tokio::sync::watch::channel(0u64);
    let opened = Session::open(Options {
        workdir,
        layers,
        config,
        overrides,
        role,
        datadir: env.data(),
        resume: Resume::Fresh,
        one_shot: false,
        agent: None,
        os_sandbox: None,
        shelf: Default::default(),
        interrupts,
        busy: Arc::default(),
    })
    .unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    (
        opened.session,
        Runtime {
            runtime,
            _interrupt: interrupt,
        },
    )
}

/// What drives the session's work, and the interrupt no one raises here (its sender kept: a
/// closed channel reads as an interrupt).
struct Runtime {
    runtime: tokio::runtime::Runtime,
    _interrupt: tokio::sync::watch::Sender<u64>,
}

impl Runtime {
    fn block_on<F: std::future::Future>(&self, work: F) -> F::Output {
        self.runtime.block_on(work)
    }
}

const PLAIN: &str =
    r#"{"retry_initial_ms": 5, "memory": {"enabled": false}, "checkpoints": {"enabled": false}}"#;

fn ended(recorder: &Recorder) -> Vec<&Ended> {
    recorder
        .events
        .iter()
        .filter_map(|e| match e {
            Event::TurnEnded(end) => Some(end),
            _ => None,
        })
        .collect()
}

fn content(session: &Session, id: &str) -> String {
    session.chat.conversation().get(id).unwrap().content.clone()
}

#[test]
fn a_message_streams_as_events_and_retry_answers_the_same_question_again() {
    let env = Env::new();
    let server = Server::start(vec![text(&["fir", "st"]), text(&["second"])]);
    let (mut session, rt) = open(&env, &server, PLAIN);
    let mut front = Recorder::default();
    let end = rt.block_on(session.send("hello", &mut front)).unwrap();
    assert!(end.is_complete());
    // The text arrived as its pieces, then the answer's end, then the turn's.
    let texts: Vec<&str> = front
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["fir", "st"]);
    assert!(matches!(
        front.events.last(),
        Some(Event::TurnEnded(Ended::Complete))
    ));
    let first = session.chat.conversation().cursor().to_string();
    assert_eq!(content(&session, &first), "first");

    let user = session.retry_from().unwrap();
    assert_eq!(content(&session, &user), "hello");
    assert_eq!(session.chat.conversation().cursor(), user);
    let mut again = Recorder::default();
    assert!(rt.block_on(session.answer(&mut again)).is_complete());
    assert_eq!(again.text(), "second");
    // Two answers under the one question: siblings, the cursor on the new one.
    let c = session.chat.conversation();
    let second = c.cursor().to_string();
    assert_ne!(first, second);
    assert_eq!(
        c.get(&second).unwrap().parent_id.as_deref(),
        Some(user.as_str())
    );
    assert_eq!(
        c.get(&first).unwrap().parent_id.as_deref(),
        Some(user.as_str())
    );
    // The second request carried the question once, not the first answer.
    let last = server.requests().last().unwrap().clone();
    let said: Vec<String> = crate::support::messages_of(&last)
        .into_iter()
        .map(|(_, text)| text)
        .collect();
    assert!(said.iter().any(|t| t == "hello"), "{said:?}");
    assert!(!said.iter().any(|t| t == "first"), "{said:?}");

    // `/compare` sees both, the cursor's marked.
    let alternatives = session.compare().unwrap();
    assert_eq!(alternatives.len(), 2);
    assert_eq!(alternatives[0].answer, "first");
    assert_eq!(alternatives[1].answer, "second");
    assert!(!alternatives[0].current && alternatives[1].current);
    assert!(alternatives.iter().all(|a| a.files.is_empty()));
}

#[test]
fn nothing_to_retry_undo_or_compare_in_an_empty_conversation() {
    let env = Env::new();
    let server = Server::start(vec![]);
    let (mut session, _rt) = open(&env, &server, PLAIN);
    assert!(matches!(
        session.retry_from(),
        Err(CommandError::NothingToRetry)
    ));
    assert!(matches!(session.undo(), Err(CommandError::NothingToUndo)));
    assert!(matches!(session.compare(), Err(CommandError::NoFork)));
    assert!(matches!(
        session.edit_target(None),
        Err(CommandError::NothingToEdit)
    ));
    assert!(matches!(
        session.merge_tip("7"),
        Err(CommandError::NoSuchBranch(_))
    ));
    assert!(server.requests().is_empty());
}

#[test]
fn btw_answers_on_a_side_branch_with_only_the_reading_tools_and_the_cursor_stays() {
    let env = Env::new();
    let server = Server::start(vec![text(&["main answer"]), text(&["side answer"])]);
    let (mut session, rt) = open(&env, &server, PLAIN);
    rt.block_on(session.send("the task", &mut Recorder::default()));
    let here = session.chat.conversation().cursor().to_string();
    let mut front = Recorder::default();
    let btw = rt
        .block_on(session.btw("what is a monad?", &mut front))
        .unwrap();
    assert!(btw.end.is_complete());
    assert_eq!(front.text(), "side answer");
    // Back where it was; the question is a side message off it.
    let c = session.chat.conversation();
    assert_eq!(c.cursor(), here);
    assert_eq!(btw.back, here);
    let asked = c.get(&btw.asked).unwrap();
    assert!(asked.side);
    assert_eq!(asked.parent_id.as_deref(), Some(here.as_str()));
    // Only what reads was offered; the main turn had the writing tools.
    let requests = server.requests();
    let (main, side) = (tool_names(&requests[0]), tool_names(&requests[1]));
    assert!(main.iter().any(|t| t == "write_file"), "{main:?}");
    assert!(side.iter().any(|t| t == "read_file"), "{side:?}");
    assert!(
        !side.iter().any(|t| t == "write_file" || t == "bash"),
        "{side:?}"
    );
    // A side turn changes no tool list for later turns.
    assert!(session.skill_tools.is_none());
}

#[test]
fn undo_moves_to_where_the_message_was_sent_from_and_keeps_it() {
    let env = Env::new();
    let server = Server::start(vec![text(&["one"]), text(&["two"])]);
    let (mut session, rt) = open(&env, &server, PLAIN);
    rt.block_on(session.send("first", &mut Recorder::default()));
    let after_first = session.chat.conversation().cursor().to_string();
    rt.block_on(session.send("second", &mut Recorder::default()));
    let before_undo = session.chat.conversation().cursor().to_string();
    let undone = session.undo().unwrap();
    assert_eq!(content(&session, &undone.message), "second");
    assert_eq!(undone.parent, after_first);
    let c = session.chat.conversation();
    assert_eq!(c.cursor(), after_first);
    // Kept, marked, and remembered as where the cursor came from.
    assert!(c.get(&before_undo).is_some());
    assert!(c.undone.contains(undone.message.as_str()));
    assert_eq!(session.came_from.as_deref(), Some(before_undo.as_str()));
    // The next undo takes the first message back.
    let again = session.undo().unwrap();
    assert_eq!(content(&session, &again.message), "first");
    assert!(matches!(session.undo(), Err(CommandError::NothingToUndo)));
}

#[test]
fn merge_brings_a_branch_s_account_back_as_a_node_the_next_request_carries() {
    let env = Env::new();
    let server = Server::start(vec![
        text(&["ready"]),
        text(&["tried X: it works"]),
        text(&["tried Y: it fails"]),
        text(&["going on"]),
    ]);
    server.answer_summaries("X was tried in src/x.rs and works.");
    let (mut session, rt) = open(&env, &server, PLAIN);
    rt.block_on(session.send("start", &mut Recorder::default()));
    let fork = session.chat.conversation().cursor().to_string();
    rt.block_on(session.send("try X", &mut Recorder::default()));
    let x_tip = session.chat.conversation().cursor().to_string();
    session.move_to(&fork).unwrap();
    rt.block_on(session.send("try Y", &mut Recorder::default()));
    let y_tip = session.chat.conversation().cursor().to_string();
    // A node of this branch is nothing to merge; an unknown one is said.
    let y_n = session.chat.conversation().number_of(&y_tip).unwrap();
    let tip = session.merge_tip(&y_n.to_string()).unwrap();
    let same = rt.block_on(session.merge(&tip, &mut |_, _| {}));
    assert!(matches!(same, Err(CommandError::SameBranch(n)) if n == y_n));

    let x_n = session.chat.conversation().number_of(&x_tip).unwrap();
    let tip = session.merge_tip(&format!("[{x_n}]")).unwrap();
    assert_eq!(tip, x_tip);
    let mut asked = None;
    let merged = rt
        .block_on(session.merge(&tip, &mut |n, count| asked = Some((n, count))))
        .unwrap();
    // Two messages of that branch were summarized: its question and its answer.
    assert_eq!(asked, Some((x_n, 2)));
    assert_eq!(merged.tip, x_tip);
    assert_eq!(merged.fork, fork);
    assert_eq!(merged.before, y_tip);
    let c = session.chat.conversation();
    assert_eq!(c.cursor(), merged.node);
    let node = c.get(&merged.node).unwrap();
    assert_eq!(node.role, Role::User);
    assert!(node.content.contains("brought back with /merge"));
    assert!(node.content.contains("X was tried in src/x.rs and works."));
    let from = node.extra.rare.merged_from.as_ref().unwrap();
    assert_eq!(
        (from.tip.as_str(), from.fork.as_str()),
        (x_tip.as_str(), fork.as_str())
    );
    // The next turn carries the account, not the branch's messages.
    rt.block_on(session.answer(&mut Recorder::default()));
    let last = server.requests().last().unwrap().clone();
    let said: Vec<String> = crate::support::messages_of(&last)
        .into_iter()
        .map(|(_, text)| text)
        .collect();
    assert!(said.iter().any(|t| t.contains("X was tried")), "{said:?}");
    assert!(!said.iter().any(|t| t == "tried X: it works"), "{said:?}");
    assert!(said.iter().any(|t| t == "tried Y: it fails"), "{said:?}");
}

#[test]
fn approvals_are_requests_the_front_end_answers_or_refused_when_nobody_can_be_asked() {
    let env = Env::new();
    let server = Server::start(vec![
        tool_calls(&[("c1", "bash", r#"{"command":"echo hi > made.txt"}"#)]),
        text(&["could not"]),
        tool_calls(&[("c2", "bash", r#"{"command":"echo hi > made.txt"}"#)]),
        text(&["denied"]),
    ]);
    let (mut session, rt) = open(&env, &server, PLAIN);
    // Nobody to ask: refused, said, and the model told so.
    let mut nobody = Recorder::default();
    rt.block_on(session.send("make it", &mut nobody));
    assert!(nobody.notices().iter().any(|n| matches!(
        n,
        Notice::Refused { tool, why: RefusedWhy::NobodyToAsk } if tool == "bash"
    )));
    assert!(crate::support::results(&server, 1)[0].contains("could not be asked"));
    // Denied with a reason: the model hears it, nothing ran.
    let mut user = Recorder {
        answers: [Answer::Deny("not now".to_string())].into(),
        ..Default::default()
    };
    rt.block_on(session.send("make it again", &mut user));
    let result = crate::support::results(&server, 3).last().unwrap().clone();
    assert!(
        result.contains("denied") && result.contains("Their reason: not now"),
        "{result}"
    );
    assert!(!env.work().join("made.txt").exists());
    assert_eq!(ended(&user).len(), 1);
}

#[test]
fn a_failed_request_ends_the_turn_with_its_error_and_keeps_the_message() {
    let env = Env::new();
    // No reply scripted: the server answers 500, and retries give up.
    let server = Server::start(vec![]);
    let (mut session, rt) = open(
        &env,
        &server,
        r#"{"retry_initial_ms": 1, "max_retries": 1, "memory": {"enabled": false}, "checkpoints": {"enabled": false}}"#,
    );
    let mut front = Recorder::default();
    let end = rt.block_on(session.send("hello", &mut front)).unwrap();
    assert!(matches!(end, Ended::Failed(_)));
    assert!(matches!(ended(&front)[..], [Ended::Failed(_)]));
    let c = session.chat.conversation();
    assert_eq!(c.current().role, Role::User);
    assert_eq!(c.current().content, "hello");
    let _: PathBuf = session.store.path(session.chat.id());
}
