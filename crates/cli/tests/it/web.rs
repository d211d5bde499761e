//! `new web` driven as a user (and an attacker) would: plain HTTP requests for the server's
//! refusals (no token, another Host, another Origin, the CSP), the page's own requests for a
//! message, a branch and an approval, and, with `NEW_TEST_BROWSER=1`, headless Chromium through
//! ChromeDriver (WebDriver's JSON over HTTP): typing, streaming, a click that branches, approve and
//! deny, a model's `<script>`, and the `/export --html` file opened from disk.

use crate::support::*;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};
use std::env;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// An answer to a raw request.
#[derive(Debug)]
struct Resp {
    status: u16,
    headers: String,
    body: String,
}

impl Resp {
    fn header(&self, name: &str) -> Option<String> {
        self.headers.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    }
}

/// One HTTP/1.1 request as written, its answer read to the end (`Connection: close`).
fn http(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Resp {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut request = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        request.push_str(&format!("Host: 127.0.0.1:{port}\r\n"));
    }
    for (n, v) in headers {
        request.push_str(&format!("{n}: {v}\r\n"));
    }
    request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(request.as_bytes()).unwrap();
    // The head, then as much body as it says (a server may keep the connection open).
    let mut raw = Vec::new();
    let mut byte = [0u8; 1];
    while !raw.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
        raw.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&raw).to_ascii_lowercase();
    let length = head.lines().find_map(|l| {
        l.strip_prefix("content-length:")
            .and_then(|n| n.trim().parse::<usize>().ok())
    });
    if path == "/events" {
        // A stream: its head is enough.
    } else if let Some(n) = length {
        let mut body = vec![0u8; n];
        stream.read_exact(&mut body).unwrap();
        raw.extend(body);
    } else if head.contains("transfer-encoding: chunked") {
        while !raw.ends_with(b"\r\n0\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
            raw.push(byte[0]);
        }
    } else {
        stream.read_to_end(&mut raw).unwrap();
    }
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        unchunk(body)
    } else {
        body.to_string()
    };
    Resp {
        status,
        headers: head.to_string(),
        body,
    }
}

fn unchunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// `new web` running on a test's folders.
struct Web {
    child: Child,
    url: String,
    port: u16,
    token: String,
}

impl Web {
    fn start(env: &Env, base_url: &str, extra: &[&str]) -> Web {
        let mut extra = extra.to_vec();
        extra.push("--no-open");
        Web::start_in(env, base_url, &env.work(), &extra, &[])
    }

    /// `new web WORKDIR default DATADIR EXTRA…` with more variables set.
    fn start_in(
        env: &Env,
        base_url: &str,
        workdir: &Path,
        extra: &[&str],
        vars: &[(&str, String)],
    ) -> Web {
        Web::start_full(env, base_url, workdir, extra, vars, Stdio::null())
    }

    /// [`Web::start_in`] with its stderr sent to `stderr`.
    fn start_full(
        env: &Env,
        base_url: &str,
        workdir: &Path,
        extra: &[&str],
        vars: &[(&str, String)],
        stderr: Stdio,
    ) -> Web {
        let mut cmd = env.command(base_url);
        for (name, value) in vars {
            cmd.env(name, value);
        }
        cmd.arg("web")
            .arg(workdir)
            .arg("default")
            .arg(env.data())
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr);
        let mut child = cmd.spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line.trim().to_string();
        let rest = url
            .strip_prefix("http://127.0.0.1:")
            .unwrap_or_else(|| panic!("the first line is the address: {url:?}"));
        let (port, token) = rest.split_once("/#t=").unwrap();
        Web {
            child,
            port: port.parse().unwrap(),
            token: token.to_string(),
            url,
        }
    }

    fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn get(&self, path: &str) -> Resp {
        http(self.port, "GET", path, &[("X-New-Token", &self.token)], "")
    }

    fn post(&self, path: &str, body: Value) -> Resp {
        http(
            self.port,
            "POST",
            path,
            &[
                ("X-New-Token", &self.token),
                ("Origin", &self.origin()),
                ("Content-Type", "application/json"),
            ],
            &body.to_string(),
        )
    }

    fn state(&self) -> Value {
        serde_json::from_str(&self.get("/api/state").body).unwrap()
    }

    /// Waits for the engine to be idle with `done` true of its state.
    fn until(&self, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        let mut last = Value::Null;
        let ok = eventually(400, Duration::from_millis(50), || {
            last = self.state();
            done(&last)
        });
        assert!(ok, "{what}: {last:#}");
        last
    }
}

impl Drop for Web {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn user_parents(lines: &[Value]) -> Vec<(String, String)> {
    lines
        .iter()
        .filter(|l| l["type"] == "message" && l["role"] == "user")
        .map(|l| {
            (
                l["content"].as_str().unwrap_or("").to_string(),
                l["parent_id"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[test]
fn the_server_listens_on_loopback_only_and_refuses_requests_without_the_token() {
    let server = Server::start(vec![]);
    let env = Env::new();
    let web = Web::start(&env, &server.base_url, &[]);
    // Listening on 127.0.0.1 alone (the kernel's table of listening sockets says so).
    #[cfg(target_os = "linux")]
    {
        let table = fs::read_to_string("/proc/net/tcp").unwrap();
        let port = format!(":{:04X}", web.port);
        let listening: Vec<&str> = table
            .lines()
            .filter(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                cols.len() > 3 && cols[1].ends_with(&port) && cols[3] == "0A"
            })
            .collect();
        assert!(!listening.is_empty(), "{table}");
        for l in listening {
            assert!(
                l.split_whitespace().nth(1).unwrap().starts_with("0100007F"),
                "{l}"
            );
        }
    }
    // The address holds the secret in its fragment only (a browser never sends a fragment to a
    // server, nor in a Referer): nothing of it in the path or the query.
    assert!(
        web.url.ends_with(&format!("/#t={}", web.token)) && !web.url.contains('?'),
        "{}",
        web.url
    );
    assert!(web.token.len() >= 32, "{}", web.token);
    // The page's own files hold nothing of the session: served without the secret.
    for path in ["/", "/app.js", "/app.css"] {
        let r = http(web.port, "GET", path, &[], "");
        assert_eq!(r.status, 200, "{path}");
        assert!(!r.body.contains(&web.token), "{path}");
    }
    // Everything else needs the secret in its header.
    for path in ["/api/state", "/events", "/favicon.ico"] {
        assert_eq!(http(web.port, "GET", path, &[], "").status, 401, "{path}");
    }
    let wrong = "0".repeat(web.token.len());
    let longer = format!("{}0", web.token);
    for bad in [wrong.as_str(), longer.as_str(), &web.token[1..], ""] {
        let r = http(web.port, "GET", "/api/state", &[("X-New-Token", bad)], "");
        assert_eq!(r.status, 401, "{bad}");
    }
    // Never in a cookie, nor in the address: a browser sends 127.0.0.1's cookies to every port
    // of it, so to any other local server a page makes it visit; an address lands in history,
    // logs and Referer. Neither is accepted, and no cookie is ever set.
    let cookie = format!("new_token_{}={}", web.port, web.token);
    let r = http(web.port, "GET", "/api/state", &[("Cookie", &cookie)], "");
    assert_eq!(r.status, 401);
    let query = format!("/api/state?token={}", web.token);
    assert_eq!(http(web.port, "GET", &query, &[], "").status, 401);
    let first = http(web.port, "GET", &format!("/?token={}", web.token), &[], "");
    assert_eq!(first.status, 200);
    for r in [&first, &web.get("/"), &web.get("/api/state")] {
        assert!(r.header("set-cookie").is_none(), "{r:?}");
    }
    // A state-changing request with the cookie and the page's Origin, as a page of another
    // port would have the browser send it: refused.
    let r = http(
        web.port,
        "POST",
        "/api/send",
        &[("Cookie", &cookie), ("Origin", &web.origin())],
        &json!({"text": "/title hacked"}).to_string(),
    );
    assert_eq!(r.status, 401);
    // A browser's preflight for another site's request with the header gets no permission.
    let r = http(
        web.port,
        "OPTIONS",
        "/api/send",
        &[
            ("Origin", "http://evil.example"),
            ("Access-Control-Request-Method", "POST"),
            ("Access-Control-Request-Headers", "x-new-token"),
        ],
        "",
    );
    assert!(r.status >= 400, "{r:?}");
    assert!(r.header("access-control-allow-origin").is_none(), "{r:?}");
    assert_eq!(web.get("/api/state").status, 200);
    assert_eq!(web.state()["conversation"]["title"], "");
}

#[test]
fn another_host_or_origin_is_refused_and_the_page_runs_no_inline_script() {
    let server = Server::start(vec![]);
    let env = Env::new();
    let web = Web::start(&env, &server.base_url, &[]);
    let token = web.token.clone();
    // DNS rebinding: a name of the attacker's resolved to 127.0.0.1.
    for host in [
        format!("evil.example:{}", web.port),
        "127.0.0.1".to_string(),
        format!("127.0.0.1:{}", web.port + 1),
    ] {
        let r = http(
            web.port,
            "GET",
            "/api/state",
            &[("Host", &host), ("X-New-Token", &token)],
            "",
        );
        assert_eq!(r.status, 403, "{host}");
    }
    let by_name = format!("localhost:{}", web.port);
    let r = http(
        web.port,
        "GET",
        "/api/state",
        &[("Host", &by_name), ("X-New-Token", &token)],
        "",
    );
    assert_eq!(r.status, 200);
    // CSRF: a state-changing request from another site, or with no origin at all.
    let body = json!({"text": "/title hacked"}).to_string();
    for origin in [Some("http://evil.example"), Some("null"), None] {
        let mut headers = vec![("X-New-Token", token.as_str())];
        if let Some(o) = origin {
            headers.push(("Origin", o));
        }
        let r = http(web.port, "POST", "/api/send", &headers, &body);
        assert_eq!(r.status, 403, "{origin:?}");
    }
    let r = http(
        web.port,
        "POST",
        "/api/stop",
        &[
            ("X-New-Token", &token),
            ("Origin", &web.origin()),
            ("Sec-Fetch-Site", "cross-site"),
        ],
        "",
    );
    assert_eq!(r.status, 403);
    // The event stream: another site's EventSource is refused, the page's is served.
    let r = http(
        web.port,
        "GET",
        "/events",
        &[("X-New-Token", &token), ("Origin", "http://evil.example")],
        "",
    );
    assert_eq!(r.status, 403);
    let r = http(
        web.port,
        "GET",
        "/events",
        &[("X-New-Token", &token), ("Origin", &web.origin())],
        "",
    );
    assert_eq!(r.status, 200);
    assert!(
        r.header("content-type")
            .unwrap()
            .starts_with("text/event-stream")
    );
    // A strict policy on every answer, and a page whose only script is its own file.
    let page = web.get("/");
    let csp = page.header("content-security-policy").unwrap();
    assert!(csp.contains("default-src 'none'"), "{csp}");
    assert!(csp.contains("script-src 'self'"), "{csp}");
    assert!(!csp.contains("unsafe") && !csp.contains("http"), "{csp}");
    assert!(page.body.contains("<script src=\"/app.js\"></script>"));
    assert_eq!(page.body.matches("<script").count(), 1, "{}", page.body);
    assert!(page.body.contains("<textarea name=\"message\""));
    let refused = http(web.port, "GET", "/api/state", &[], "");
    assert!(refused.header("content-security-policy").is_some());
    // Nothing of it reached the session.
    assert_eq!(web.state()["conversation"]["title"], "");
}

#[test]
fn a_message_from_the_page_is_answered_and_a_click_on_a_node_branches_the_file() {
    let server = Server::start(vec![text(&["first ", "answer"]), text(&["second answer"])]);
    let env = Env::new();
    let web = Web::start(&env, &server.base_url, &[]);
    assert_eq!(web.post("/api/send", json!({"text": "hello"})).status, 202);
    let state = web.until("the first answer", |s| {
        s["branch"].as_array().map_or(0, Vec::len) == 2
    });
    assert!(
        state["branch"][1]["html"]
            .as_str()
            .unwrap()
            .contains("first answer")
    );
    let root = state["nodes"][0]["id"].as_str().unwrap().to_string();
    let current: Vec<&Value> = state["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["current"] == true)
        .collect();
    assert_eq!(current.len(), 1);
    assert_eq!(current[0]["id"], state["cursor"]);
    // A click on the root: the next message branches from it.
    assert_eq!(web.post("/api/goto", json!({"id": root})).status, 202);
    web.until("the cursor at the root", |s| s["cursor"] == root.as_str());
    web.post("/api/send", json!({"text": "another way"}));
    web.until("the second answer", |s| {
        s["branch"][1]["html"]
            .as_str()
            .is_some_and(|h| h.contains("second answer"))
    });
    let (_, lines) = env.only_conversation();
    let users = user_parents(&lines);
    assert_eq!(users.len(), 2, "{users:?}");
    assert_eq!(users[0].1, users[1].1, "both from the root: {users:?}");
    // /commands typed in the box: the title, then /N back to the first branch.
    web.post("/api/send", json!({"text": "/title From the page"}));
    web.until("the title", |s| {
        s["conversation"]["title"] == "From the page"
    });
    web.post("/api/send", json!({"text": "/2"}));
    let state = web.until("node 2", |s| {
        s["branch"][1]["html"]
            .as_str()
            .is_some_and(|h| h.contains("first answer"))
    });
    assert_eq!(state["branch"][1]["siblings"], Value::Null);
    assert_eq!(state["branch"][0]["siblings"].as_array().unwrap().len(), 2);
}

#[test]
fn approvals_in_strict_mode_are_answered_from_the_page() {
    let write = |name: &str| {
        tool_calls(&[(
            "w",
            "write_file",
            &format!(r#"{{"filepath":"{name}","content":"x"}}"#),
        )])
    };
    let server = Server::start(vec![
        write("denied.txt"),
        text(&["as you wish"]),
        write("allowed.txt"),
        text(&["written"]),
    ]);
    let env = Env::new();
    let web = Web::start(&env, &server.base_url, &["--permission-mode", "strict"]);
    web.post("/api/send", json!({"text": "write one"}));
    // The first question is number 1; an answer to another is refused.
    assert!(eventually(200, Duration::from_millis(50), || {
        web.post("/api/answer", json!({"id": 7, "action": "deny"}))
            .status
            == 409
            && web
                .post("/api/answer", json!({"id": 1, "action": "deny"}))
                .status
                == 202
    }));
    web.until("the answer after the denial", |s| {
        s["branch"].as_array().map_or(0, Vec::len) == 4
    });
    assert!(!env.work().join("denied.txt").exists());
    let denied = results(&server, 1);
    assert!(denied[0].contains("denied"), "{denied:?}");
    web.post("/api/send", json!({"text": "write another"}));
    assert!(eventually(200, Duration::from_millis(50), || {
        web.post("/api/answer", json!({"id": 2, "action": "approve"}))
            .status
            == 202
    }));
    web.until("the answer after the approval", |s| {
        s["branch"].as_array().map_or(0, Vec::len) == 8
    });
    assert!(env.work().join("allowed.txt").exists());
    // An unknown action is refused before it reaches anything.
    let r = web.post("/api/answer", json!({"id": 3, "action": "always"}));
    assert_eq!(r.status, 400);
}

#[test]
fn stop_interrupts_a_streaming_answer() {
    let server = Server::start(vec![Reply::SseStall(
        vec![chunk_text("the start")],
        Duration::from_secs(30),
        vec![chunk_text(" never"), "[DONE]".into()],
    )]);
    let env = Env::new();
    let web = Web::start(&env, &server.base_url, &[]);
    web.post("/api/send", json!({"text": "talk"}));
    assert!(eventually(200, Duration::from_millis(50), || !server
        .requests()
        .is_empty()));
    thread::sleep(Duration::from_millis(300));
    assert_eq!(web.post("/api/stop", json!({})).status, 202);
    let state = web.until("the interrupted answer", |s| {
        s["branch"][1]["interrupted"] == true
    });
    assert!(
        state["branch"][1]["html"]
            .as_str()
            .unwrap()
            .contains("the start")
    );
}

#[test]
fn the_html_export_is_one_self_contained_page_with_the_node_contract() {
    let server = Server::start(vec![text(&[
        "<script>alert(1)</script> **bold** [x](javascript:alert(2))",
    ])]);
    let env = Env::new();
    let run = env.run(
        &server.base_url,
        &[],
        "hi </script><script>alert(3)</script>\n/export --html tree.html\n",
    );
    assert!(run.stdout.contains("tree.html"), "{}", run.stdout);
    let page = fs::read_to_string(env.work().join("tree.html")).unwrap();
    let (id, lines) = env.only_conversation();
    assert!(page.contains(&id));
    // Nothing from elsewhere; the only scripts: the data (not run) and ours, allowed by hash.
    assert!(!page.contains("src=") && !page.contains("href=\"http"));
    assert!(page.contains("Content-Security-Policy"));
    assert!(page.contains("script-src 'sha256-"));
    assert_eq!(page.matches("<script").count(), 2);
    assert!(page.contains("<script type=\"application/json\" id=\"new-data\">"));
    assert!(!page.contains("<script>alert"));
    assert!(!page.contains("href=\\\"javascript"));
    // Not the system prompt (AGENTS.md, memory and the environment are in it).
    assert!(!page.contains("You are a helpful assistant"));
    for l in lines.iter().filter(|l| l["type"] == "message") {
        assert!(page.contains(l["msg_id"].as_str().unwrap()));
    }
    // The REPL's other formats are as before.
    let run = env.run(&server.base_url, &["-c"], "/export --pdf\n");
    assert!(
        run.stderr
            .contains("/export knows --json only (got `--pdf`)"),
        "{}",
        run.stderr
    );
}

/// The page's event stream, read on a thread of its own: every JSON object it sent so far.
struct Events {
    seen: Arc<Mutex<Vec<Value>>>,
}

impl Events {
    fn listen(web: &Web) -> Events {
        let mut stream = TcpStream::connect(("127.0.0.1", web.port)).unwrap();
        let request = format!(
            "GET /events HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nX-New-Token: {}\r\nOrigin: {}\r\n\r\n",
            web.port,
            web.token,
            web.origin()
        );
        stream.write_all(request.as_bytes()).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let into = seen.clone();
        thread::spawn(move || {
            for line in BufReader::new(stream).lines() {
                let Ok(line) = line else { break };
                // Chunked framing aside, each event is one `data:` line of JSON.
                if let Some(data) = line.strip_prefix("data: ")
                    && let Ok(v) = serde_json::from_str::<Value>(data)
                {
                    into.lock().unwrap().push(v);
                }
            }
        });
        // Listening before anything is asked of the page.
        thread::sleep(Duration::from_millis(200));
        Events { seen }
    }

    /// Waits for an event of that type, after `from` events; returns it and its index.
    fn until(&self, what: &str, from: usize, found: impl Fn(&Value) -> bool) -> (usize, Value) {
        let mut hit = None;
        let ok = eventually(400, Duration::from_millis(50), || {
            let seen = self.seen.lock().unwrap();
            hit = seen
                .iter()
                .enumerate()
                .skip(from)
                .find(|(_, e)| found(e))
                .map(|(i, e)| (i, e.clone()));
            hit.is_some()
        });
        assert!(ok, "{what}: {:#?}", self.seen.lock().unwrap());
        hit.unwrap()
    }

    fn len(&self) -> usize {
        self.seen.lock().unwrap().len()
    }
}

fn output_with(text: &str) -> impl Fn(&Value) -> bool + '_ {
    move |e| e["type"] == "output" && e["text"].as_str().is_some_and(|t| t.contains(text))
}

/// A name the browser would send for this server, but at another port (one the attacker's page
/// could be served from on this machine), is refused even with the secret and the right origin.
#[test]
fn a_host_of_this_server_at_another_port_is_refused() {
    let server = Server::start(vec![]);
    let env = Env::new();
    let web = Web::start(&env, &server.base_url, &[]);
    let token = web.token.clone();
    let origin = web.origin();
    let other = if web.port == u16::MAX {
        1
    } else {
        web.port + 1
    };
    for host in [
        format!("127.0.0.1:{other}"),
        format!("localhost:{other}"),
        format!("127.0.0.1:{}0", web.port),
        format!("localhost:{}", web.port / 10),
        format!("127.0.0.1:0{}", web.port),
        "localhost".to_string(),
        format!("127.0.0.1:{}.", web.port),
    ] {
        let r = http(
            web.port,
            "GET",
            "/api/state",
            &[("Host", &host), ("X-New-Token", &token)],
            "",
        );
        assert_eq!(r.status, 403, "GET with Host {host}");
        let r = http(
            web.port,
            "POST",
            "/api/send",
            &[
                ("Host", &host),
                ("X-New-Token", &token),
                ("Origin", &origin),
            ],
            &json!({"text": "/title hacked"}).to_string(),
        );
        assert_eq!(r.status, 403, "POST with Host {host}");
    }
    // The same requests at the right port pass.
    assert_eq!(web.get("/api/state").status, 200);
    assert_eq!(web.state()["conversation"]["title"], "");
}

#[cfg(unix)]
#[test]
fn the_file_panel_shows_workdir_read_only_and_refuses_links_out_dotdot_and_secrets() {
    use std::os::unix::fs::symlink;
    let server = Server::start(vec![]);
    let env = Env::new();
    let work = env.work();
    let private = work.join("private");
    env.write_config(
        &json!({"retry_initial_ms": 5, "sandbox": {"deny_read": [private.display().to_string()]}})
            .to_string(),
    );
    fs::create_dir_all(work.join("src")).unwrap();
    fs::create_dir_all(&private).unwrap();
    fs::write(private.join("key.pem"), "PRIVATE KEY\n").unwrap();
    fs::write(
        work.join("src/page.html"),
        "<script>window.pwned=1</script>\n",
    )
    .unwrap();
    fs::write(work.join("logo.png"), b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR").unwrap();
    fs::write(work.join("big.txt"), "x".repeat(300 * 1024)).unwrap();
    let outside = env.dir.path().join("outside.txt");
    fs::write(&outside, "OUTSIDE SECRET\n").unwrap();
    symlink(&outside, work.join("leak.txt")).unwrap();
    symlink(env.dir.path(), work.join("up")).unwrap();
    let web = Web::start(&env, &server.base_url, &[]);
    let open = |path: &str| web.post("/api/files", json!({"path": path}));
    // The top: folders first, the secret place not listed, the links marked.
    let top: Value = serde_json::from_str(&open("").body).unwrap();
    let entries: Vec<(String, String)> = top["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(
        entries.contains(&("src".into(), "dir".into())),
        "{entries:?}"
    );
    assert!(
        entries.contains(&("leak.txt".into(), "link-out".into())),
        "{entries:?}"
    );
    assert!(
        entries.contains(&("up".into(), "link-out".into())),
        "{entries:?}"
    );
    assert!(!entries.iter().any(|(n, _)| n == "private"), "{entries:?}");
    // A file's text as data (the page sets it as text, never as HTML).
    let page: Value = serde_json::from_str(&open("src/page.html").body).unwrap();
    assert_eq!(page["kind"], "file");
    assert_eq!(page["text"], "<script>window.pwned=1</script>\n");
    // Bounded, and a binary file named, not shown.
    let big: Value = serde_json::from_str(&open("big.txt").body).unwrap();
    assert_eq!(big["truncated"], true);
    assert_eq!(big["text"].as_str().unwrap().len(), 256 * 1024);
    let png: Value = serde_json::from_str(&open("logo.png").body).unwrap();
    assert_eq!(png["kind"], "binary");
    assert!(png.get("text").is_none());
    // Refused: a link out, a path through it, `..`, an absolute path outside, a secret place.
    for path in [
        "leak.txt",
        "up/outside.txt",
        "../outside.txt",
        "src/../../outside.txt",
        &outside.display().to_string(),
        "private/key.pem",
        "private",
    ] {
        let r = open(path);
        assert_eq!(r.status, 403, "{path}: {}", r.body);
        assert!(
            !r.body.contains("SECRET") && !r.body.contains("PRIVATE"),
            "{path}: {}",
            r.body
        );
    }
    assert!(
        open("../outside.txt")
            .body
            .contains("outside the working folder")
    );
    assert!(open("private/key.pem").body.contains("secret place"));
    // Read by another site: refused before anything is read.
    let r = http(
        web.port,
        "POST",
        "/api/files",
        &[
            ("X-New-Token", &web.token),
            ("Origin", "http://evil.example"),
        ],
        &json!({"path": "src/page.html"}).to_string(),
    );
    assert_eq!(r.status, 403);
}

/// The browser is opened on a file of its own, never on the address: the opener's command line
/// (which every user of the machine may read in `/proc/PID/cmdline`) names a file, 0600 in a
/// folder of 0700, that sends the browser on to the address; the folder goes once the page has
/// its secret.
#[cfg(target_os = "linux")]
#[test]
fn the_browser_is_opened_on_a_private_launcher_file_never_on_the_address() {
    let server = Server::start(vec![]);
    let env = Env::new();
    let bin = env.dir.path().join("bin");
    let run = env.dir.path().join("run");
    fs::create_dir_all(&bin).unwrap();
    fs::create_dir_all(&run).unwrap();
    let seen = env.dir.path().join("opened");
    // An opener that notes its arguments, its file's and folder's modes and the file, as a
    // browser would read it.
    let opener = bin.join("xdg-open");
    fs::write(
        &opener,
        format!(
            "#!/bin/sh\nout='{}'\nprintf '%s\\n' \"$@\" > \"$out.args\"\n\
stat -c '%a' \"$1\" > \"$out.mode\"\nstat -c '%a' \"$(dirname \"$1\")\" > \"$out.dirmode\"\n\
cat \"$1\" > \"$out.page\"\nmv \"$out.args\" \"$out.done\"\n",
            seen.display()
        ),
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&opener, fs::Permissions::from_mode(0o755)).unwrap();
    }
    let path = format!("{}:{}", bin.display(), env::var("PATH").unwrap_or_default());
    let said = env.dir.path().join("stderr");
    let web = Web::start_full(
        &env,
        &server.base_url,
        &env.work(),
        &[],
        &[
            ("PATH", path.clone()),
            ("XDG_RUNTIME_DIR", run.display().to_string()),
        ],
        Stdio::from(fs::File::create(&said).unwrap()),
    );
    let done = seen.with_extension("done");
    assert!(
        eventually(400, Duration::from_millis(50), || done.exists()),
        "the opener never ran"
    );
    let args = fs::read_to_string(&done).unwrap();
    let args: Vec<&str> = args.lines().collect();
    assert_eq!(args.len(), 1, "{args:?}");
    assert!(!args[0].contains(&web.token), "{args:?}");
    let file = PathBuf::from(args[0]);
    assert!(file.starts_with(&run), "{}", file.display());
    let mode = |ext: &str| {
        fs::read_to_string(seen.with_extension(ext))
            .unwrap()
            .trim()
            .to_string()
    };
    assert_eq!(mode("mode"), "600");
    assert_eq!(mode("dirmode"), "700");
    let page = fs::read_to_string(seen.with_extension("page")).unwrap();
    assert!(
        page.contains(&format!(
            "http-equiv=\"refresh\" content=\"0;url=http://127.0.0.1:{}/#t={}\"",
            web.port, web.token
        )),
        "{page}"
    );
    // Once the page has its secret, the launcher is gone.
    assert!(file.exists());
    assert_eq!(web.get("/api/state").status, 200);
    assert!(
        eventually(100, Duration::from_millis(50), || !file
            .parent()
            .unwrap()
            .exists()),
        "{} is still there",
        file.display()
    );
    // What to do where the browser cannot read the launcher (a snap or flatpak one): said, with
    // the address and the option that opens it.
    let hint = || fs::read_to_string(&said).unwrap();
    assert!(
        eventually(100, Duration::from_millis(50), || hint()
            .contains("--open-address")),
        "{}",
        hint()
    );
    let hint = hint();
    assert!(hint.contains("file was not found"), "{hint}");
    assert!(hint.contains(&web.url), "{hint}");
    drop(web);

    // `--open-address`: the browser is opened on the address itself, and no launcher is made.
    fs::remove_file(&done).unwrap();
    let web = Web::start_in(
        &env,
        &server.base_url,
        &env.work(),
        &["--open-address"],
        &[
            ("PATH", path),
            ("XDG_RUNTIME_DIR", run.display().to_string()),
        ],
    );
    assert!(
        eventually(400, Duration::from_millis(50), || done.exists()),
        "the opener never ran"
    );
    let args = fs::read_to_string(&done).unwrap();
    assert_eq!(args.lines().collect::<Vec<_>>(), [web.url.as_str()]);
    assert_eq!(
        fs::read_dir(&run).unwrap().count(),
        0,
        "a launcher was made"
    );
}

/// A question waiting for its answer is in the state (a page loaded again shows it, and can
/// answer it); the command it asks about is shown with its control characters and bidirectional
/// overrides (U+202E) as visible escapes, never as they would act.
#[test]
fn a_question_waiting_is_in_the_state_with_its_command_escaped() {
    let command = "echo safe \u{202e}hs.lmth\u{202c} \r\u{1b}[2Kls # \u{2066}x\u{2069}";
    let server = Server::start(vec![
        tool_calls(&[("b", "bash", &json!({ "command": command }).to_string())]),
        text(&["not run"]),
    ]);
    let env = Env::new();
    let web = Web::start(&env, &server.base_url, &["--permission-mode", "strict"]);
    let events = Events::listen(&web);
    assert_eq!(web.state()["pending"], Value::Null);
    web.post("/api/send", json!({"text": "run it"}));
    let (_, asked) = events.until("the approval", 0, |e| e["type"] == "approval");
    // A page loaded now: the question is in its state, as sent.
    let state = web.until("the question in the state", |s| s["pending"].is_object());
    let pending = &state["pending"];
    assert_eq!(pending, &asked, "{state:#}");
    let preview = pending["preview"].as_str().unwrap();
    for bad in [
        '\u{202e}', '\u{202c}', '\u{2066}', '\u{2069}', '\r', '\u{1b}',
    ] {
        assert!(!preview.contains(bad), "{bad:?} in {preview:?}");
    }
    assert!(
        preview.contains("\\u{202e}hs.lmth\\u{202c}")
            && preview.contains("\\r\\e[2Kls")
            && preview.contains("\\u{2066}x\\u{2069}"),
        "{preview}"
    );
    // (No rule could allow this very command again: yes or no only.)
    assert_eq!(pending["options"], json!(["approve", "deny"]));
    let id = pending["id"].as_u64().unwrap();
    assert_eq!(
        web.post("/api/answer", json!({"id": id, "action": "deny"}))
            .status,
        202
    );
    let state = web.until("the answer after the denial", |s| {
        s["pending"].is_null() && s["branch"].as_array().map_or(0, Vec::len) == 4
    });
    assert!(results(&server, 1)[0].contains("denied"));
    // The call's card, streamed and in the branch, shows its arguments so too.
    let (_, card) = events.until("the call", 0, |e| e["type"] == "tool_call");
    for arguments in [
        &card["arguments"],
        &state["branch"][1]["calls"][0]["arguments"],
    ] {
        let arguments = arguments.as_str().unwrap();
        assert!(
            !arguments.contains('\u{202e}') && arguments.contains("\\u{202e}hs.lmth"),
            "{arguments}"
        );
    }
}

/// The file panel opens what it checked: a folder swapped for a link out of WORKDIR between the
/// check and the open (over and over, atomically, by another hand) is refused, never listed.
#[cfg(target_os = "linux")]
#[test]
fn a_folder_swapped_for_a_link_while_the_panel_opens_it_never_leads_out() {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::symlink;
    use std::sync::atomic::{AtomicBool, Ordering};
    let server = Server::start(vec![]);
    let env = Env::new();
    let work = env.work();
    let outside = env.dir.path().join("outside");
    fs::create_dir_all(&outside).unwrap();
    fs::write(outside.join("OUTSIDE-SECRET.txt"), "OUTSIDE\n").unwrap();
    fs::write(outside.join("inside.txt"), "OUTSIDE\n").unwrap();
    fs::create_dir_all(work.join("sub")).unwrap();
    fs::write(work.join("sub/inside.txt"), "inside\n").unwrap();
    let swap = env.dir.path().join("swap");
    symlink(&outside, &swap).unwrap();
    let web = Web::start(&env, &server.base_url, &[]);
    let stop = Arc::new(AtomicBool::new(false));
    let swapping = {
        let stop = stop.clone();
        let sub = CString::new(work.join("sub").as_os_str().as_bytes()).unwrap();
        let swap = CString::new(swap.as_os_str().as_bytes()).unwrap();
        thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(Ordering::SeqCst) {
                // `sub` is the folder, then the link out, then the folder…, each in one step.
                // SAFETY: two valid NUL-terminated paths; renameat2 only reads them.
                let rc = unsafe {
                    libc::renameat2(
                        libc::AT_FDCWD,
                        sub.as_ptr(),
                        libc::AT_FDCWD,
                        swap.as_ptr(),
                        libc::RENAME_EXCHANGE,
                    )
                };
                if rc != 0 {
                    break;
                }
                swaps += 1;
            }
            swaps
        })
    };
    let (mut listed, mut refused) = (0, 0);
    for i in 0..1000 {
        // The folder listed, or a file in it read.
        let path = if i % 2 == 0 { "sub" } else { "sub/inside.txt" };
        let r = web.post("/api/files", json!({"path": path}));
        assert!(!r.body.contains("OUTSIDE"), "{path}: {}", r.body);
        if r.status == 200 {
            listed += 1;
        } else {
            refused += 1;
        }
    }
    stop.store(true, Ordering::SeqCst);
    let swaps = swapping.join().unwrap();
    assert!(
        swaps > 100 && listed > 0 && refused > 0,
        "{swaps} swaps, {listed} listed, {refused} refused"
    );
}

/// Secret places are judged as they are at each request: one named through a link, made after
/// the start, stays hidden; and with WORKDIR `/` the kernel's folders (`/proc`: the
/// environment of `new` itself) are neither listed nor read.
#[cfg(unix)]
#[test]
fn secret_places_made_later_stay_hidden_and_workdir_root_does_not_show_proc() {
    use std::os::unix::fs::symlink;
    let server = Server::start(vec![]);
    let env = Env::new();
    let work = env.work();
    // The place named through a link to WORKDIR, and not there yet.
    symlink(&work, env.dir.path().join("alias")).unwrap();
    let later = env.dir.path().join("alias/later");
    env.write_config(
        &json!({"retry_initial_ms": 5, "checkpoints": {"enabled": false},
                "sandbox": {"deny_read": [later.display().to_string()]}})
        .to_string(),
    );
    let web = Web::start(&env, &server.base_url, &[]);
    fs::create_dir_all(work.join("later")).unwrap();
    fs::write(work.join("later/key.pem"), "PRIVATE KEY\n").unwrap();
    fs::write(work.join("open.txt"), "open\n").unwrap();
    let top: Value =
        serde_json::from_str(&web.post("/api/files", json!({"path": ""})).body).unwrap();
    let names: Vec<&str> = top["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"open.txt") && !names.contains(&"later"),
        "{names:?}"
    );
    for path in ["later", "later/key.pem"] {
        let r = web.post("/api/files", json!({"path": path}));
        assert_eq!(r.status, 403, "{path}: {}", r.body);
        assert!(
            r.body.contains("secret place") && !r.body.contains("PRIVATE"),
            "{}",
            r.body
        );
    }
    drop(web);
    // WORKDIR `/`.
    let web = Web::start_in(&env, &server.base_url, Path::new("/"), &["--no-open"], &[]);
    let top: Value =
        serde_json::from_str(&web.post("/api/files", json!({"path": "."})).body).unwrap();
    let names: Vec<&str> = top["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"etc"), "{names:?}");
    for kernel in ["proc", "sys", "dev"] {
        assert!(!names.contains(&kernel), "{names:?}");
    }
    for path in [
        "proc",
        "proc/self/environ",
        "/proc/self/environ",
        "sys/kernel",
        "dev/zero",
    ] {
        let r = web.post("/api/files", json!({"path": path}));
        assert_eq!(r.status, 403, "{path}: {}", r.body);
        assert!(!r.body.contains("OPENAI_BASE_URL"), "{path}: {}", r.body);
    }
}

/// A folder of very many entries is read only so far: the listing is cut, says so, and comes
/// at once (a folder of a million entries neither hangs the page nor fills its memory).
#[test]
fn a_huge_folder_is_listed_cut_and_says_so() {
    let server = Server::start(vec![]);
    let env = Env::new();
    let many = env.work().join("many");
    fs::create_dir_all(&many).unwrap();
    // 20,000 names are read at most; 2,000 listed.
    for i in 0..20_050 {
        fs::File::create(many.join(format!("f{i:05}"))).unwrap();
    }
    fs::create_dir_all(env.work().join("some")).unwrap();
    for i in 0..2_010 {
        fs::File::create(env.work().join("some").join(format!("f{i:04}"))).unwrap();
    }
    // Past twice the listed count (the listing lets names go as it reads): all still counted.
    fs::create_dir_all(env.work().join("lots")).unwrap();
    for i in 0..10_000 {
        fs::File::create(env.work().join("lots").join(format!("f{i:05}"))).unwrap();
    }
    let web = Web::start(&env, &server.base_url, &[]);
    let r = web.post("/api/files", json!({"path": "many"}));
    assert_eq!(r.status, 200);
    let listing: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(listing["entries"].as_array().unwrap().len(), 2_000);
    assert_eq!(listing["cut"], true, "{}", listing["read"]);
    assert_eq!(listing["read"], 20_000);
    // Below the reading limit: every name read, the first 2,000 in order listed, the rest counted.
    let some: Value =
        serde_json::from_str(&web.post("/api/files", json!({"path": "some"})).body).unwrap();
    assert_eq!(some["cut"], false);
    assert_eq!(some["more"], 10);
    let entries = some["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2_000);
    assert_eq!(entries[0]["name"], "f0000");
    assert_eq!(entries[1_999]["name"], "f1999");
    let lots: Value =
        serde_json::from_str(&web.post("/api/files", json!({"path": "lots"})).body).unwrap();
    assert_eq!(lots["cut"], false);
    assert_eq!(lots["read"], 10_000);
    assert_eq!(lots["more"], 8_000, "{}", lots["read"]);
    let entries = lots["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2_000);
    assert_eq!(entries[0]["name"], "f00000");
    assert_eq!(entries[1_999]["name"], "f01999");
    // Cut at the reading limit: what was read past the listed ones is counted too.
    assert_eq!(listing["more"], 18_000);
}

/// `/retry`, `/compare`, `/branch`, `/tree`, `/model`, `/merge` and `/retry --n` typed in the
/// page do what they do in the REPL, through the engine's commands.
#[test]
fn commands_typed_in_the_page_work_as_in_the_repl() {
    let server = Server::start(vec![
        text(&["First answer."]),
        text(&["Second answer."]),
        text(&["With the other model."]),
        text(&["Another way."]),
        text(&["Side one."]),
        text(&["Side two."]),
        text(&["Side three."]),
        text(&["Side four."]),
    ]);
    server.answer_summaries("The other branch concluded: use tabs.");
    let env = Env::new();
    let web = Web::start(&env, &server.base_url, &[]);
    let events = Events::listen(&web);
    web.post("/api/send", json!({"text": "hello"}));
    web.until("the first answer", |s| {
        s["branch"].as_array().map_or(0, Vec::len) == 2
    });
    web.post("/api/send", json!({"text": "/retry"}));
    let state = web.until("the retried answer", |s| {
        s["branch"][1]["html"]
            .as_str()
            .is_some_and(|h| h.contains("Second answer."))
    });
    assert_eq!(state["branch"][1]["siblings"].as_array().unwrap().len(), 2);
    // Side by side: both answers, each rendered, the current one marked.
    let from = events.len();
    web.post("/api/send", json!({"text": "/compare"}));
    let (_, compared) = events.until("the comparison", from, |e| e["type"] == "compare");
    let alternatives = compared["alternatives"].as_array().unwrap();
    assert_eq!(alternatives.len(), 2);
    assert!(
        alternatives[0]["html"]
            .as_str()
            .unwrap()
            .contains("First answer.")
    );
    assert!(
        alternatives[1]["html"]
            .as_str()
            .unwrap()
            .contains("Second answer.")
    );
    assert_eq!(alternatives[1]["current"], true);
    // A name for this branch, in the file and in the drawing of /tree.
    let from = events.len();
    web.post("/api/send", json!({"text": "/branch second"}));
    events.until("the branch named", from, output_with("branch second names"));
    let (_, lines) = env.only_conversation();
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "branch" && l["name"] == "second"),
        "{lines:?}"
    );
    let from = events.len();
    web.post("/api/send", json!({"text": "/tree"}));
    events.until("the tree drawn", from, output_with("Second answer."));
    // Another model from now on: the next request asks for it.
    let from = events.len();
    web.post("/api/send", json!({"text": "/model other-model"}));
    events.until("the model changed", from, output_with("model other-model"));
    web.post("/api/send", json!({"text": "/retry"}));
    web.until("the answer of the other model", |s| {
        s["branch"][1]["html"]
            .as_str()
            .is_some_and(|h| h.contains("With the other model."))
    });
    assert_eq!(server.requests().last().unwrap()["model"], "other-model");
    // From the first answer, another way; then that branch's conclusion merged here.
    web.post("/api/send", json!({"text": "/2"}));
    web.until("node 2", |s| {
        s["branch"][1]["html"]
            .as_str()
            .is_some_and(|h| h.contains("First answer."))
    });
    web.post("/api/send", json!({"text": "and then?"}));
    web.until("another way", |s| {
        s["branch"].as_array().map_or(0, Vec::len) == 4
    });
    let from = events.len();
    web.post("/api/send", json!({"text": "/merge second"}));
    events.until("merged", from, output_with("merged ["));
    let (_, lines) = env.only_conversation();
    assert!(
        lines.iter().any(|l| l["merged_from"].is_object()
            && l["content"]
                .as_str()
                .is_some_and(|c| c.contains("use tabs"))),
        "{lines:?}"
    );
    // Two answers at once (or one after the other, as the session can): two more siblings,
    // numbered as `/compare` numbers them (after the answers the message has).
    let before = server.requests().len();
    web.post("/api/send", json!({"text": "/retry --n 2"}));
    assert!(eventually(400, Duration::from_millis(50), || {
        server.requests().len() == before + 2
    }));
    let state = web.until("two more answers", |s| {
        s["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["label"].as_str().is_some_and(|l| l.starts_with("Side ")))
            .count()
            == 2
    });
    assert!(state["status"]["turns"].as_u64().unwrap() >= 5, "{state:#}");
    // Again: the two new answers are numbered after the two the message has now, as
    // `/compare` shows them.
    let again = server.requests().len();
    let from = events.len();
    web.post("/api/send", json!({"text": "/retry --n 2"}));
    assert!(eventually(400, Duration::from_millis(50), || {
        server.requests().len() == again + 2
    }));
    let named = |e: &Value| -> Option<(usize, usize)> {
        let text = e["text"].as_str()?;
        let words: Vec<&str> = text.split_whitespace().collect();
        if e["type"] != "output" || words.len() < 4 || words[0] != "answer" || words[2] != "of" {
            return None;
        }
        Some((words[1].parse().ok()?, words[3].parse().ok()?))
    };
    let (_, last) = events.until("the last answer's name", from, |e| {
        named(e).is_some_and(|(i, of)| i == of)
    });
    let (i, of) = named(&last).unwrap();
    let compare_from = events.len();
    web.post("/api/send", json!({"text": "/compare"}));
    let (_, compared) = events.until("the comparison after /retry --n 2", compare_from, |e| {
        e["type"] == "compare"
    });
    let shown = compared["alternatives"].as_array().unwrap().len();
    assert_eq!((i, of), (shown, shown), "{last}");
    assert!(
        shown >= 4,
        "numbered after the answers the message had: {last}"
    );
    // A bad argument is said, as in the REPL.
    let from = events.len();
    web.post("/api/send", json!({"text": "/retry --n 9"}));
    events.until("the refusal", from, |e| {
        e["type"] == "error" && e["text"].as_str().unwrap().contains("K from 1 to 5")
    });
}

/// `/list`, `/search` and `/context` typed in the page answer as in the REPL (its own code, its
/// words), as lines in the page; a bad argument is said as the REPL says it.
#[test]
fn list_search_and_context_answer_in_the_page_as_in_the_repl() {
    let server = Server::start(vec![text(&["Tabs it is."])]);
    let env = Env::new();
    let web = Web::start(&env, &server.base_url, &[]);
    let events = Events::listen(&web);
    web.post("/api/send", json!({"text": "we indent with tabs"}));
    let state = web.until("the answer", |s| {
        s["branch"].as_array().map_or(0, Vec::len) == 2
    });
    let id = state["conversation"]["id"].as_str().unwrap().to_string();
    let asked = |command: &str, expected: &[&str]| {
        let from = events.len();
        web.post("/api/send", json!({"text": command}));
        let (_, said) = events.until(command, from, |e| {
            e["type"] == "output"
                && e["text"]
                    .as_str()
                    .is_some_and(|t| expected.iter().all(|x| t.contains(x)))
        });
        let text = said["text"].as_str().unwrap().to_string();
        // Plain text for the page: no terminal colours.
        assert!(!text.contains('\u{1b}'), "{text:?}");
        text
    };
    asked("/list", &[&format!("* {id}"), "2 msgs"]);
    asked("/search tabs", &[&id, "[1] user: we indent with tabs"]);
    asked("/context", &["context window:", "tokens"]);
    for (command, refusal) in [
        ("/list everything", "/list takes no argument but `all`"),
        ("/context now", "/context"),
    ] {
        let from = events.len();
        web.post("/api/send", json!({"text": command}));
        events.until(command, from, |e| {
            e["type"] == "error" && e["text"].as_str().is_some_and(|t| t.contains(refusal))
        });
    }
}

/// `/merge NAME --files` in the page: the branch's account merged, then its file changes listed
/// in a question; Yes brings them into the folder (the REPL's own code does it), this branch's
/// own changes kept.
#[test]
fn merge_files_asks_in_the_page_and_brings_the_branch_s_files() {
    let write =
        |path: &str, content: &str| json!({"filepath": path, "content": content}).to_string();
    let (x1, x2, here) = (
        write("c.txt", "x theirs\n"),
        write("new.txt", "n\n"),
        write("a.txt", "a ours\n"),
    );
    let server = Server::start(vec![
        text(&["ok"]),
        tool_calls(&[("w0", "write_file", &x1), ("w1", "write_file", &x2)]),
        text(&["done x"]),
        tool_calls(&[("w2", "write_file", &here)]),
        text(&["done here"]),
    ]);
    server.answer_summaries("Changed c.txt and added new.txt.");
    let env = Env::new();
    fs::write(env.work().join("a.txt"), "a\n").unwrap();
    fs::write(env.work().join("c.txt"), "x\n").unwrap();
    let web = Web::start(&env, &server.base_url, &["--permission-mode", "permissive"]);
    let events = Events::listen(&web);
    let question = |from: usize| {
        let (at, q) = events.until("a question", from, |e| {
            e["type"] == "approval" && e["kind"] == "question"
        });
        (at, q)
    };
    let answer = |q: &Value, action: &str| {
        let id = q["id"].as_u64().unwrap();
        assert_eq!(
            web.post("/api/answer", json!({"id": id, "action": action}))
                .status,
            202
        );
    };
    web.post("/api/send", json!({"text": "begin"}));
    web.until("ok", |s| s["branch"].as_array().map_or(0, Vec::len) == 2);
    web.post("/api/send", json!({"text": "change on x"}));
    web.until("done x", |s| {
        s["branch"].as_array().map_or(0, Vec::len) == 7
    });
    web.post("/api/send", json!({"text": "/branch x"}));
    // Back to the answer before: the folder made to hold its files.
    let from = events.len();
    web.post("/api/send", json!({"text": "/2"}));
    let (at, q) = question(from);
    answer(&q, "yes");
    events.until("restored", at, output_with("restored node"));
    assert!(!env.work().join("new.txt").exists());
    web.post("/api/send", json!({"text": "change here"}));
    web.until("done here", |s| {
        s["branch"].as_array().map_or(0, Vec::len) == 6
    });
    let from = events.len();
    web.post("/api/send", json!({"text": "/merge x --files"}));
    let (at, q) = question(from);
    assert_eq!(q["tool"], "merge", "{q}");
    let preview = q["preview"].as_str().unwrap();
    assert!(
        preview.contains("c.txt") && preview.contains("new.txt") && !preview.contains("a.txt"),
        "{q}"
    );
    answer(&q, "yes");
    events.until("the files written", at, output_with("wrote 2 files"));
    assert_eq!(
        fs::read_to_string(env.work().join("c.txt")).unwrap(),
        "x theirs\n"
    );
    assert_eq!(
        fs::read_to_string(env.work().join("new.txt")).unwrap(),
        "n\n"
    );
    assert_eq!(
        fs::read_to_string(env.work().join("a.txt")).unwrap(),
        "a ours\n"
    );
    let (_, lines) = env.only_conversation();
    assert!(
        lines.iter().any(|l| l["merged_from"].is_object()),
        "{lines:?}"
    );
}

/// A move that leaves the folder unlike the node's files offers to restore them, as the REPL
/// does: No leaves the folder; `/restore` asks its own question, Yes brings the node's files back;
/// a click back to the end offers the way back, and Yes takes it.
#[test]
fn a_move_offers_restore_and_restore_asks_its_question_in_the_page() {
    let server = Server::start(vec![
        tool_calls(&[(
            "w",
            "write_file",
            &json!({"filepath": "made.txt", "content": "made\n"}).to_string(),
        )]),
        text(&["Written."]),
    ]);
    let env = Env::new();
    fs::write(env.work().join("kept.txt"), "kept\n").unwrap();
    let web = Web::start(&env, &server.base_url, &["--permission-mode", "permissive"]);
    let events = Events::listen(&web);
    web.post("/api/send", json!({"text": "write it"}));
    let state = web.until("the write", |s| {
        s["branch"].as_array().map_or(0, Vec::len) == 4
    });
    let end = state["cursor"].as_str().unwrap().to_string();
    assert!(env.work().join("made.txt").exists());
    let question = |from: usize, title: &str| {
        let (at, q) = events.until("a question", from, |e| {
            e["type"] == "approval" && e["kind"] == "question"
        });
        assert_eq!(q["options"], json!(["yes", "no"]), "{q}");
        assert!(q["title"].as_str().unwrap().contains(title), "{q}");
        assert!(q["preview"].as_str().unwrap().contains("made.txt"), "{q}");
        // In the state too, for a page loaded now.
        assert_eq!(web.state()["pending"], q);
        (at, q["id"].as_u64().unwrap())
    };
    let answer = |id: u64, action: &str| {
        assert_eq!(
            web.post("/api/answer", json!({"id": id, "action": action}))
                .status,
            202
        );
    };
    // Back to the first message (as `/1`): the offer; No.
    let from = events.len();
    web.post("/api/send", json!({"text": "/1"}));
    let (at, id) = question(from, "differs from node 1");
    answer(id, "no");
    events.until(
        "the folder kept",
        at,
        output_with("the folder is as it was"),
    );
    assert!(env.work().join("made.txt").exists());
    // `/restore`: its own question; Yes.
    let from = events.len();
    web.post("/api/send", json!({"text": "/restore"}));
    let (at, id) = question(from, "node 1");
    answer(id, "yes");
    events.until("restored", at, output_with("restored node"));
    assert!(!env.work().join("made.txt").exists());
    // A click on the last node: the offer of its files; Yes.
    let from = events.len();
    web.post("/api/goto", json!({"id": end}));
    let (at, id) = question(from, "differs from node");
    answer(id, "yes");
    events.until("restored again", at, output_with("restored node"));
    assert_eq!(
        fs::read_to_string(env.work().join("made.txt")).unwrap(),
        "made\n"
    );
    assert_eq!(
        fs::read_to_string(env.work().join("kept.txt")).unwrap(),
        "kept\n"
    );
}

/// A turn made in the page is reviewed for memory in the background, as a REPL turn is.
#[test]
fn a_turn_in_the_page_is_reviewed_for_memory() {
    let server = Server::start(vec![text(&["Noted."])]);
    server.answer_reviews(r#"{"changes": []}"#, Duration::ZERO);
    let env = Env::new();
    env.write_config(r#"{"retry_initial_ms": 5, "memory": {"review_every": 1}}"#);
    let web = Web::start(&env, &server.base_url, &[]);
    web.post(
        "/api/send",
        json!({"text": "we always use pnpm in this project"}),
    );
    web.until("the answer", |s| {
        s["branch"].as_array().map_or(0, Vec::len) == 2
    });
    assert!(
        eventually(200, Duration::from_millis(50), || server.reviews().len()
            == 1),
        "no review"
    );
    let asked = server.reviews()[0]["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        asked.contains("we always use pnpm") && asked.contains("Noted."),
        "{asked}"
    );
}

/// The status line: model, tokens, context in use against the window, the sandbox, hooks, and
/// each MCP server's health (one ready, one failed).
#[test]
fn the_status_line_shows_context_and_each_mcp_server_s_health() {
    let python = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !python {
        eprintln!("skipped: python3 runs the scripted MCP server");
        return;
    }
    let fake = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures_mcp/fake_mcp.py");
    let server = Server::start(vec![text(&["Hi."])]);
    let env = Env::new();
    let notes = env.dir.path().join("notes");
    env.write_config(
        &json!({"retry_initial_ms": 5, "context_window_size": 20_000, "mcp": {"servers": [
            {"name": "fake", "command": "python3", "args": [fake.display().to_string()],
             "env": {"FAKE_MCP_NOTES": notes.display().to_string()}},
            {"name": "broken", "command": "/nonexistent/mcp-server"},
        ]}})
        .to_string(),
    );
    let web = Web::start(&env, &server.base_url, &[]);
    let health = |s: &Value, name: &str| -> String {
        s["status"]["mcp"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == name)
            .map(|m| m["state"].as_str().unwrap().to_string())
            .unwrap_or_default()
    };
    // Drawn again when a server's health changes, without anything asked of the page.
    let state = web.until("both servers settled", |s| {
        health(s, "fake") == "ready" && health(s, "broken") == "failed"
    });
    assert!(
        state["status"]["mcp"][1]["detail"]
            .as_str()
            .unwrap()
            .contains("not found"),
        "{state:#}"
    );
    web.post("/api/send", json!({"text": "hello"}));
    let state = web.until("the answer", |s| {
        s["branch"].as_array().map_or(0, Vec::len) == 2
    });
    let status = &state["status"];
    assert_eq!(status["context_window"], 20_000, "{status:#}");
    let (used, percent) = (
        status["context_tokens"].as_u64().unwrap(),
        status["context_percent"].as_u64().unwrap(),
    );
    assert!(used > 0 && percent == used * 100 / 20_000, "{status:#}");
    assert!(
        status["model"].is_string() && status["input_tokens"].is_u64(),
        "{status:#}"
    );
    assert!(
        status.get("sandbox").is_some() && status["hooks"].is_boolean(),
        "{status:#}"
    );
}

/// The sandbox's network question (a host `sandbox.network` does not list) is asked in the page:
/// allowed for the session, the command reaches it; refused, it does not.
#[cfg(target_os = "linux")]
#[test]
fn the_sandbox_s_network_question_is_answered_in_the_page() {
    use std::net::TcpListener;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\nConnection: close\r\n\r\nhello world\n",
            );
        }
    });
    let curl = json!({"command": format!("curl -sS -m 20 --noproxy '' http://localhost:{port}/")})
        .to_string();
    let server = Server::start(vec![
        tool_calls(&[("c1", "bash", &curl)]),
        text(&["Reached."]),
        tool_calls(&[("c2", "bash", &curl.replace("localhost", "127.0.0.1"))]),
        text(&["Refused."]),
    ]);
    let env = Env::new();
    env.write_config(
        &json!({"retry_initial_ms": 5, "sandbox": {"network": ["example.invalid"]}}).to_string(),
    );
    let web = Web::start(&env, &server.base_url, &["--permission-mode", "permissive"]);
    if web.state()["status"]["sandbox"] != true {
        eprintln!("skipped: the sandbox is off on this machine");
        return;
    }
    let events = Events::listen(&web);
    let mut from = 0;
    for (host, action, expected, request) in [
        ("localhost", "approve-session", "hello world", 1),
        ("127.0.0.1", "deny", "refused", 3),
    ] {
        web.post("/api/send", json!({"text": format!("reach {host}")}));
        let (at, question) = events.until("the network question", from, |e| {
            e["type"] == "approval" && e["kind"] == "network"
        });
        assert_eq!(question["preview"], format!("{host}:{port}"), "{question}");
        assert_eq!(
            question["options"],
            json!(["approve-session", "approve-always", "deny"])
        );
        // Waiting, it is in the state (a page loaded now shows it).
        assert_eq!(web.state()["pending"], question);
        let id = question["id"].as_u64().unwrap();
        assert_eq!(
            web.post("/api/answer", json!({"id": id, "action": action}))
                .status,
            202
        );
        let (end, _) = events.until("the turn's end", at, |e| e["type"] == "turn_ended");
        from = end + 1;
        let result = results(&server, request).pop().unwrap();
        assert!(result.contains(expected), "{host}: {result}");
    }
}

/// The page and a REPL (piped) on one DATADIR at once, even on one conversation: each appends
/// whole lines, the REPL writes while the page's answer streams, and each sees the other's
/// messages after a reload (`--continue`, or `/switch` in the page).
#[test]
fn the_page_and_a_repl_on_one_datadir_at_once_keep_every_line_whole() {
    let server = Server::start(vec![
        text(&["Page answer one."]),
        Reply::SseStall(
            vec![chunk_text("Page answer ")],
            Duration::from_secs(3),
            vec![chunk_text("two."), chunk_finish("stop"), "[DONE]".into()],
        ),
        text(&["REPL answer."]),
        text(&["REPL again."]),
        text(&["Page answer three."]),
    ]);
    let env = Env::new();
    let web = Web::start(&env, &server.base_url, &[]);
    web.post("/api/send", json!({"text": "from the page"}));
    let state = web.until("the page's first answer", |s| {
        s["branch"].as_array().map_or(0, Vec::len) == 2
    });
    let page_id = state["conversation"]["id"].as_str().unwrap().to_string();
    // The page's second answer streams slowly; meanwhile the REPL continues the same file.
    web.post("/api/send", json!({"text": "page again"}));
    assert!(eventually(200, Duration::from_millis(50), || server
        .requests()
        .len()
        == 2));
    let run = env.run(&server.base_url, &["--continue"], "from the repl\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(run.stdout.contains("REPL answer."), "{run:?}");
    web.until("the page's second answer", |s| {
        s["branch"].as_array().map_or(0, Vec::len) == 4
    });
    // Every line whole (read_lines fails on a broken one), every message there.
    let (id, lines) = env.only_conversation();
    assert_eq!(id, page_id);
    let users: Vec<String> = user_parents(&lines).into_iter().map(|u| u.0).collect();
    for said in ["from the page", "page again", "from the repl"] {
        assert!(users.iter().any(|u| u == said), "{said}: {users:?}");
    }
    let raw = fs::read_to_string(&env.conversation_files()[0]).unwrap();
    assert!(raw.ends_with('\n'), "{raw}");
    // The REPL, again: it sees the page's messages.
    let run = env.run(&server.base_url, &["--continue"], "/tree\nlast one\n");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(run.stdout.contains("page again"), "{run:?}");
    // The page, reloaded (another conversation, then this one again): the REPL's are there.
    web.post("/api/send", json!({"text": "/new"}));
    web.until("a new conversation", |s| {
        s["conversation"]["id"] != page_id.as_str()
    });
    web.post("/api/send", json!({"text": format!("/switch {page_id}")}));
    let state = web.until("the REPL's messages in the page", |s| {
        s["nodes"].as_array().unwrap().iter().any(|n| {
            n["label"]
                .as_str()
                .is_some_and(|l| l.contains("REPL again."))
        })
    });
    assert!(
        state["conversations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["id"] == page_id.as_str()),
        "{state:#}"
    );
    web.post("/api/send", json!({"text": "and from the page"}));
    web.until("the page's third answer", |s| {
        s["nodes"].as_array().unwrap().iter().any(|n| {
            n["label"]
                .as_str()
                .is_some_and(|l| l.contains("Page answer three."))
        })
    });
    for file in env.conversation_files() {
        read_lines(&file);
    }
}

// ---- in a real browser ----

/// ChromeDriver and a headless Chromium for one test, ended with it.
struct Browser {
    driver: Child,
    port: u16,
    session: String,
    _profile: tempfile::TempDir,
}

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

impl Browser {
    /// None (said) unless `NEW_TEST_BROWSER=1` and ChromeDriver is there.
    fn start(test: &str) -> Option<Browser> {
        if env::var("NEW_TEST_BROWSER").as_deref() != Ok("1") {
            eprintln!("{test}: skipped (set NEW_TEST_BROWSER=1 with chromium and chromedriver)");
            return None;
        }
        let driver_path = env::var("NEW_CHROMEDRIVER").unwrap_or("/usr/bin/chromedriver".into());
        let chromium = env::var("NEW_CHROMIUM").unwrap_or("/usr/bin/chromium".into());
        assert!(
            Path::new(&driver_path).exists() && Path::new(&chromium).exists(),
            "NEW_TEST_BROWSER=1 but {driver_path} or {chromium} is missing"
        );
        let port = unused_port();
        let driver = Command::new(&driver_path)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        assert!(eventually(200, Duration::from_millis(50), || {
            TcpStream::connect(("127.0.0.1", port)).is_ok()
        }));
        let profile = tempfile::tempdir().unwrap();
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--window-size=1280,800",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            },
        }}});
        let mut browser = Browser {
            driver,
            port,
            session: String::new(),
            _profile: profile,
        };
        let made = browser.call("POST", "/session", caps);
        browser.session = made["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no WebDriver session: {made}"))
            .to_string();
        Some(browser)
    }

    fn call(&self, method: &str, path: &str, body: Value) -> Value {
        let path = if path == "/session" {
            path.to_string()
        } else {
            format!("/session/{}{path}", self.session)
        };
        let r = http(
            self.port,
            method,
            &path,
            &[("Content-Type", "application/json")],
            &if body.is_null() {
                String::new()
            } else {
                body.to_string()
            },
        );
        let v: Value = serde_json::from_str(&r.body)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}: {}", r.body));
        v["value"].clone()
    }

    fn open(&self, url: &str) {
        self.call("POST", "/url", json!({"url": url}));
    }

    fn run(&self, script: &str) -> Value {
        self.call(
            "POST",
            "/execute/sync",
            json!({"script": script, "args": []}),
        )
    }

    fn find(&self, css: &str) -> String {
        let mut found = None;
        let mut last = Value::Null;
        eventually(200, Duration::from_millis(50), || {
            let v = self.call(
                "POST",
                "/element",
                json!({"using": "css selector", "value": css}),
            );
            found = v[ELEMENT].as_str().map(str::to_string);
            last = v;
            found.is_some()
        });
        found.unwrap_or_else(|| {
            panic!(
                "no {css} on the page ({last}): {}",
                self.run("return location.href + ' ' + document.documentElement.outerHTML")
            )
        })
    }

    fn click(&self, css: &str) {
        let e = self.find(css);
        self.call("POST", &format!("/element/{e}/click"), json!({}));
    }

    fn type_in(&self, css: &str, text: &str) {
        let e = self.find(css);
        self.call(
            "POST",
            &format!("/element/{e}/value"),
            json!({"text": text}),
        );
    }

    /// Waits until `script` returns true.
    fn until(&self, what: &str, script: &str) {
        let ok = eventually(300, Duration::from_millis(50), || {
            self.run(script) == Value::Bool(true)
        });
        assert!(ok, "{what}: {}", self.run("return document.body.innerText"));
    }

    /// A screenshot for the book, when `NEW_WEB_SCREENSHOTS` names a folder.
    fn screenshot(&self, name: &str) {
        let Ok(dir) = env::var("NEW_WEB_SCREENSHOTS") else {
            return;
        };
        let png = self.call("GET", "/screenshot", Value::Null);
        let bytes = BASE64.decode(png.as_str().unwrap()).unwrap();
        fs::write(PathBuf::from(dir).join(name), bytes).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = http(
                self.port,
                "DELETE",
                &format!("/session/{}", self.session),
                &[],
                "",
            );
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

const ENTER: &str = "\u{E007}";

#[test]
fn in_a_browser_type_stream_branch_approve_deny_files_compare_restore_and_no_script_runs() {
    let Some(browser) = Browser::start("in_a_browser") else {
        return;
    };
    let xss = "<script>window.pwned=1</script><img src=x onerror=\"window.pwned=2\"> **safe**";
    let server = Server::start(vec![
        text(&["Hello ", "from ", "the model"]),
        text(&[xss]),
        tool_calls(&[(
            "w",
            "write_file",
            r#"{"filepath":"<img src=x onerror=window.pwned=3>\u202etxt.exe","content":"x"}"#,
        )]),
        text(&["denied it"]),
        tool_calls(&[("w", "write_file", r#"{"filepath":"ok.txt","content":"x"}"#)]),
        text(&["wrote it"]),
    ]);
    let env = Env::new();
    // Project files for the file panel, there before the session's first snapshot.
    fs::create_dir_all(env.work().join("docs")).unwrap();
    fs::write(
        env.work().join("docs/notes.md"),
        "# Notes\n<img src=x onerror=\"window.pwned=4\"> stays text\n",
    )
    .unwrap();
    fs::write(env.dir.path().join("secret.txt"), "OUTSIDE\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::symlink;
        symlink(
            env.dir.path().join("secret.txt"),
            env.work().join("leak.txt"),
        )
        .unwrap();
    }
    let web = Web::start(&env, &server.base_url, &["--permission-mode", "strict"]);
    browser.open(&web.url);
    browser.find("textarea[name=\"message\"]");
    // The secret came in the fragment, left the address bar, and lives in this tab's
    // sessionStorage (of this origin, port included), sent in a header: never a cookie.
    browser.until(
        "the state drawn with the secret's header",
        "return document.querySelectorAll('[data-node-id]').length === 1",
    );
    assert_eq!(
        browser.run("return location.search + location.hash"),
        json!("")
    );
    assert_eq!(browser.run("return document.cookie"), json!(""));
    assert_eq!(
        browser.run("return sessionStorage.getItem('new-token')"),
        json!(web.token)
    );
    // The page at an address with another secret (a link a model wrote, say), loaded: the tab
    // keeps the one that works.
    browser.open(&format!(
        "http://127.0.0.1:{}/#t={}",
        web.port,
        "0".repeat(64)
    ));
    browser.call("POST", "/refresh", json!({}));
    browser.until(
        "the state drawn with the tab's own secret",
        "return document.querySelectorAll('[data-node-id]').length === 1 && location.hash === ''",
    );
    assert_eq!(
        browser.run("return sessionStorage.getItem('new-token')"),
        json!(web.token)
    );
    browser.type_in("textarea[name=\"message\"]", &format!("hi there{ENTER}"));
    browser.until(
        "the streamed answer",
        "return document.querySelector('#messages').innerText.includes('Hello from the model')",
    );
    browser.until(
        "two nodes besides the root, the answer current",
        "return document.querySelectorAll('[data-node-id]').length === 3 && \
         document.querySelector('[data-current=\"true\"]').innerText.includes('Hello')",
    );
    browser.screenshot("web-answer.png");
    // A click on the root, and the next message branches from it.
    browser.click("[data-node-id]:first-child");
    browser.until(
        "the root current",
        "return document.querySelector('[data-node-id]').dataset.current === 'true'",
    );
    browser.type_in("textarea[name=\"message\"]", &format!("again{ENTER}"));
    browser.until(
        "the model's HTML shown as text",
        "return document.querySelector('#messages').innerText.includes('<script>window.pwned=1</script>')",
    );
    assert_eq!(
        browser.run("return window.pwned === undefined"),
        json!(true)
    );
    assert_eq!(
        browser.run("return document.querySelectorAll('#messages script, #messages img').length"),
        json!(0)
    );
    let (_, lines) = env.only_conversation();
    let users = user_parents(&lines);
    assert_eq!(users.len(), 2);
    assert_eq!(users[0].1, users[1].1, "a fork at the root: {users:?}");
    // Strict mode: a write asks; its hostile path is shown as text; deny, then approve.
    browser.type_in("textarea[name=\"message\"]", &format!("write{ENTER}"));
    browser.find("[data-action=\"deny\"]");
    // The page loaded again while the question waits (the secret kept by the tab): it is
    // still asked, once.
    browser.call("POST", "/refresh", json!({}));
    browser.until(
        "the question shown again after a reload",
        "return document.querySelectorAll('[data-action=\"deny\"]').length === 1 && \
         document.querySelector('#approvals').innerText.includes('onerror=window.pwned=3') && \
         document.querySelector('#approvals').innerText.includes('\\\\u{202e}txt.exe') && \
         !document.querySelector('#approvals').innerText.includes(String.fromCharCode(0x202e))",
    );
    browser.screenshot("web-approval.png");
    assert_eq!(
        browser.run("return window.pwned === undefined"),
        json!(true)
    );
    browser.click("[data-action=\"deny\"]");
    browser.until(
        "the answer after the denial",
        "return document.querySelector('#messages').innerText.includes('denied it')",
    );
    browser.type_in("textarea[name=\"message\"]", &format!("write ok{ENTER}"));
    browser.click("[data-action=\"approve\"]");
    browser.until(
        "the answer after the approval",
        "return document.querySelector('#messages').innerText.includes('wrote it')",
    );
    assert!(env.work().join("ok.txt").exists());
    assert_eq!(
        browser.run("return window.pwned === undefined"),
        json!(true)
    );
    browser.screenshot("web-tree.png");
    // The file panel: a folder opened, a file shown as text (its HTML runs nothing), a link out
    // of WORKDIR refused.
    browser.click("#files li[data-path=\"docs\"]");
    browser.click("#files li[data-path=\"docs/notes.md\"]");
    browser.until(
        "the file shown as text",
        "return !document.querySelector('#file-view').hidden && \
         document.querySelector('#file-text').innerText.includes('<img src=x onerror=')",
    );
    assert_eq!(
        browser.run("return document.querySelectorAll('#file-view img, #file-view script').length"),
        json!(0)
    );
    browser.screenshot("web-files.png");
    browser.click("#files li.up");
    #[cfg(unix)]
    {
        browser.click("#files li[data-path=\"leak.txt\"]");
        browser.until(
            "the link out refused",
            "return document.querySelector('#live').innerText.includes('outside the working folder')",
        );
        assert_eq!(
            browser
                .run("return document.querySelector('#file-text').innerText.includes('OUTSIDE')"),
            json!(false)
        );
    }
    browser.click("#file-close");
    // A /command: the two answers at the root's fork side by side.
    browser.type_in("textarea[name=\"message\"]", &format!("/compare{ENTER}"));
    browser.until(
        "the comparison",
        "return document.querySelectorAll('.compare .alternative').length === 2 && \
         document.querySelector('.compare').innerText.includes('Hello from the model')",
    );
    browser.screenshot("web-compare.png");
    assert_eq!(
        browser.run("return window.pwned === undefined"),
        json!(true)
    );
    // /restore asks in the page: back at the first message, the folder as it was then.
    browser.type_in("textarea[name=\"message\"]", &format!("/1{ENTER}"));
    browser.until(
        "node 1 current",
        "return document.querySelectorAll('#messages .msg').length === 1",
    );
    // The move offers to restore (the folder holds ok.txt, node 1 did not): No, for now.
    browser.until(
        "the offer after the move",
        "return document.querySelector('#approvals').innerText.includes('differs from node 1')",
    );
    browser.click("[data-action=\"no\"]");
    browser.until(
        "the offer answered",
        "return document.querySelector('#live').innerText.includes('the folder is as it was')",
    );
    assert!(env.work().join("ok.txt").exists());
    browser.type_in("textarea[name=\"message\"]", &format!("/restore{ENTER}"));
    browser.find("[data-action=\"yes\"]");
    browser.until(
        "the question names the file",
        "return document.querySelector('#approvals').innerText.includes('ok.txt')",
    );
    browser.screenshot("web-restore.png");
    browser.click("[data-action=\"yes\"]");
    browser.until(
        "restored",
        "return document.querySelector('#live').innerText.includes('restored node')",
    );
    assert!(!env.work().join("ok.txt").exists());
    assert!(env.work().join("docs/notes.md").exists());
    // The export, opened from its file: the same contract, a click moves through the tree.
    web.post("/api/send", json!({"text": "/export --html shared.html"}));
    let file = env.work().join("shared.html");
    assert!(eventually(200, Duration::from_millis(50), || file.exists()));
    browser.open(&format!("file://{}", file.display()));
    browser.until(
        "the exported tree",
        "return document.querySelectorAll('[data-node-id]').length > 5 && \
         !!document.querySelector('[data-current=\"true\"]')",
    );
    browser.click("[data-node-id]:nth-child(3)");
    browser.until(
        "the first branch shown from the file",
        "return document.querySelector('#messages').innerText.includes('Hello from the model')",
    );
    assert_eq!(
        browser.run("return window.pwned === undefined"),
        json!(true)
    );
}

/// A folder of 10,000 files says in the panel how many are not listed; and a page whose
/// `new web` has ended, with another one now on its port: the event stream is refused (401), and
/// the page says its secret is no longer valid instead of asking again and again.
#[test]
fn in_a_browser_a_big_folder_counts_the_rest_and_an_ended_session_stops_listening() {
    let Some(browser) = Browser::start("in_a_browser_ended") else {
        return;
    };
    let server = Server::start(vec![]);
    let env = Env::new();
    fs::create_dir_all(env.work().join("lots")).unwrap();
    for i in 0..10_000 {
        fs::File::create(env.work().join("lots").join(format!("f{i:05}"))).unwrap();
    }
    let port = unused_port().to_string();
    let mut first = Web::start(&env, &server.base_url, &["--port", &port]);
    browser.open(&first.url);
    browser.until(
        "the page drawn",
        "return document.querySelectorAll('[data-node-id]').length === 1",
    );
    browser.click("#files li[data-path=\"lots\"]");
    browser.until(
        "the folder's 8,000 more said",
        "return !!document.querySelector('#files li.more') && \
         document.querySelector('#files li.more').innerText.includes('8000 more')",
    );
    let _ = first.child.kill();
    let _ = first.child.wait();
    let second = Web::start(&env, &server.base_url, &["--port", &port]);
    assert_ne!(second.token, first.token);
    browser.until(
        "the page told its secret is no longer valid",
        "return document.querySelector('#live').innerText.includes('secret is no longer valid')",
    );
    // Said once: the stream is not asked for again.
    thread::sleep(Duration::from_secs(3));
    let said = browser.run(
        "return [...document.querySelectorAll('#live .line')]\
         .filter((l) => l.innerText.includes('no longer valid')).length",
    );
    assert_eq!(said, json!(1));
}
