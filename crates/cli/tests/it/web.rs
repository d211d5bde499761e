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
        let mut cmd = env.command(base_url);
        cmd.arg("web")
            .arg(env.work())
            .arg("default")
            .arg(env.data())
            .arg("--no-open")
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line.trim().to_string();
        let rest = url
            .strip_prefix("http://127.0.0.1:")
            .unwrap_or_else(|| panic!("the first line is the address: {url:?}"));
        let (port, token) = rest.split_once("/?token=").unwrap();
        Web {
            child,
            port: port.parse().unwrap(),
            token: token.to_string(),
            url,
        }
    }

    fn cookie(&self) -> String {
        format!("new_token_{}={}", self.port, self.token)
    }

    fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn get(&self, path: &str) -> Resp {
        http(self.port, "GET", path, &[("Cookie", &self.cookie())], "")
    }

    fn post(&self, path: &str, body: Value) -> Resp {
        http(
            self.port,
            "POST",
            path,
            &[
                ("Cookie", &self.cookie()),
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
    for path in ["/", "/api/state", "/app.js", "/events"] {
        assert_eq!(http(web.port, "GET", path, &[], "").status, 401, "{path}");
    }
    let wrong = format!("/?token={}", "0".repeat(web.token.len()));
    assert_eq!(http(web.port, "GET", &wrong, &[], "").status, 401);
    let forged = format!("new_token_{}={}x", web.port, web.token);
    assert_eq!(
        http(web.port, "GET", "/api/state", &[("Cookie", &forged)], "").status,
        401
    );
    // The first address: the token becomes an HttpOnly, SameSite=Strict cookie and leaves the
    // address bar.
    let first = http(web.port, "GET", &format!("/?token={}", web.token), &[], "");
    assert_eq!(first.status, 303, "{first:?}");
    assert_eq!(first.header("location").as_deref(), Some("/"));
    let cookie = first.header("set-cookie").unwrap();
    assert!(cookie.starts_with(&web.cookie()), "{cookie}");
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    assert_eq!(web.get("/api/state").status, 200);
    assert!(web.url.ends_with(&web.token));
}

#[test]
fn another_host_or_origin_is_refused_and_the_page_runs_no_inline_script() {
    let server = Server::start(vec![]);
    let env = Env::new();
    let web = Web::start(&env, &server.base_url, &[]);
    let cookie = web.cookie();
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
            &[("Host", &host), ("Cookie", &cookie)],
            "",
        );
        assert_eq!(r.status, 403, "{host}");
    }
    let by_name = format!("localhost:{}", web.port);
    let r = http(
        web.port,
        "GET",
        "/api/state",
        &[("Host", &by_name), ("Cookie", &cookie)],
        "",
    );
    assert_eq!(r.status, 200);
    // CSRF: a state-changing request from another site, or with no origin at all.
    let body = json!({"text": "/title hacked"}).to_string();
    for origin in [Some("http://evil.example"), Some("null"), None] {
        let mut headers = vec![("Cookie", cookie.as_str())];
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
            ("Cookie", &cookie),
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
        &[("Cookie", &cookie), ("Origin", "http://evil.example")],
        "",
    );
    assert_eq!(r.status, 403);
    let r = http(
        web.port,
        "GET",
        "/events",
        &[("Cookie", &cookie), ("Origin", &web.origin())],
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
fn in_a_browser_type_stream_branch_approve_deny_and_no_script_of_the_model_runs() {
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
            r#"{"filepath":"<img src=x onerror=window.pwned=3>.txt","content":"x"}"#,
        )]),
        text(&["denied it"]),
        tool_calls(&[("w", "write_file", r#"{"filepath":"ok.txt","content":"x"}"#)]),
        text(&["wrote it"]),
    ]);
    let env = Env::new();
    let web = Web::start(&env, &server.base_url, &["--permission-mode", "strict"]);
    browser.open(&web.url);
    browser.find("textarea[name=\"message\"]");
    // The token left the address bar for a cookie the page's script cannot read.
    assert_eq!(browser.run("return location.search"), json!(""));
    assert_eq!(browser.run("return document.cookie"), json!(""));
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
