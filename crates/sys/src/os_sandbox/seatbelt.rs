//! The sandbox's rules as a macOS Seatbelt profile (the language `sandbox-exec -p` reads), made
//! from the same [`Spec`] the Linux helper applies: everything may be read but the hidden places;
//! only the writable folders (less their read-only names) and the listed devices may be written;
//! no network when the spec isolates it.
//!
//! A pure function of the spec, compiled everywhere so that its text is tested on every machine.
//! It is not used to start programs yet: on macOS the sandbox is still reported unavailable,
//! until the profile has been run there (`sandbox-exec` cannot be tried on Linux).
//!
//! Exceptions are written inside the rule that grants (`require-not`), never as a later deny, so
//! the profile means the same whichever way rule order is read.

use std::fmt::Write;
use std::path::Path;

use super::Spec;
use std::path::PathBuf;

/// A path as a Seatbelt string literal.
fn quoted(path: &Path) -> String {
    let mut out = String::from("\"");
    for c in path.to_string_lossy().chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `(subpath "…")` for each path, or `(literal "…")` for devices.
fn filters(kind: &str, paths: &[PathBuf]) -> Vec<String> {
    paths
        .iter()
        .map(|p| format!("({kind} {})", quoted(p)))
        .collect()
}

/// `(allow OPERATION …)` of `granted` with every one of `except` carved out.
fn allow(operation: &str, granted: &[String], except: &[String]) -> String {
    let mut out = String::new();
    for grant in granted {
        if except.is_empty() {
            let _ = writeln!(out, "(allow {operation} {grant})");
        } else {
            let _ = write!(out, "(allow {operation}\n  (require-all {grant}");
            for e in except {
                let _ = write!(out, "\n    (require-not {e})");
            }
            out.push_str("))\n");
        }
    }
    out
}

/// The Seatbelt profile for `spec`.
pub fn profile(spec: &Spec) -> String {
    let mut out = String::from(
        "(version 1)\n\
         (deny default)\n\
         ; Programs run and start others; they signal and inspect only their own sandbox.\n\
         (allow process-exec)\n\
         (allow process-fork)\n\
         (allow signal (target same-sandbox))\n\
         (allow process-info* (target same-sandbox))\n\
         (allow sysctl-read)\n\
         (allow mach-lookup)\n\
         (allow ipc-posix-sem)\n\
         (allow ipc-posix-shm)\n\
         (allow pseudo-tty)\n",
    );
    let hidden = filters("subpath", &spec.hidden);
    out.push_str("; Reading: everything but the hidden places.\n");
    if hidden.is_empty() {
        out.push_str("(allow file-read*)\n");
    } else {
        out.push_str(&allow(
            "file-read*",
            &["(subpath \"/\")".to_string()],
            &hidden,
        ));
    }
    out.push_str("; Writing: the writable folders, less their read-only names; the devices.\n");
    let mut except = filters("subpath", &spec.read_only);
    except.extend(hidden);
    out.push_str(&allow(
        "file-write*",
        &filters("subpath", &spec.writable),
        &except,
    ));
    out.push_str(&allow(
        "file-write*",
        &filters("literal", &spec.devices),
        &[],
    ));
    if spec.isolate_network {
        out.push_str("; No network: only the loopback, and no Unix sockets but the proxy's.\n");
        out.push_str("(allow network* (local ip \"localhost:*\"))\n");
        out.push_str("(allow network-outbound (remote ip \"localhost:*\"))\n");
        if let Some(socket) = &spec.proxy_socket {
            let _ = writeln!(
                out,
                "(allow network-outbound (remote unix-socket (path-literal {})))",
                quoted(socket)
            );
        }
    } else {
        out.push_str("; The network, as configured: open.\n(allow network*)\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn spec() -> Spec {
        Spec {
            writable: vec!["/Users/ann/work".into(), "/private/tmp/new-501-1".into()],
            devices: vec!["/dev/null".into()],
            read_only: vec!["/Users/ann/work/.git".into(), "/Users/ann/work/.new".into()],
            hidden: vec!["/Users/ann/.ssh".into()],
            isolate_network: true,
            proxy_socket: None,
            cwd: "/Users/ann/work".into(),
            ..Spec::default()
        }
    }

    #[test]
    fn the_profile_denies_by_default_and_carves_exceptions_into_its_grants() {
        let text = profile(&spec());
        insta::assert_snapshot!(text, @r#"
        (version 1)
        (deny default)
        ; Programs run and start others; they signal and inspect only their own sandbox.
        (allow process-exec)
        (allow process-fork)
        (allow signal (target same-sandbox))
        (allow process-info* (target same-sandbox))
        (allow sysctl-read)
        (allow mach-lookup)
        (allow ipc-posix-sem)
        (allow ipc-posix-shm)
        (allow pseudo-tty)
        ; Reading: everything but the hidden places.
        (allow file-read*
          (require-all (subpath "/")
            (require-not (subpath "/Users/ann/.ssh"))))
        ; Writing: the writable folders, less their read-only names; the devices.
        (allow file-write*
          (require-all (subpath "/Users/ann/work")
            (require-not (subpath "/Users/ann/work/.git"))
            (require-not (subpath "/Users/ann/work/.new"))
            (require-not (subpath "/Users/ann/.ssh"))))
        (allow file-write*
          (require-all (subpath "/private/tmp/new-501-1")
            (require-not (subpath "/Users/ann/work/.git"))
            (require-not (subpath "/Users/ann/work/.new"))
            (require-not (subpath "/Users/ann/.ssh"))))
        (allow file-write* (literal "/dev/null"))
        ; No network: only the loopback, and no Unix sockets but the proxy's.
        (allow network* (local ip "localhost:*"))
        (allow network-outbound (remote ip "localhost:*"))
        "#);
    }

    /// Every parenthesis closes, and a path cannot end its string early and add rules of its own.
    #[test]
    fn paths_stay_inside_their_strings_and_the_network_follows_the_spec() {
        let mut s = spec();
        s.writable
            .push(PathBuf::from("/Users/ann/we\"ird\\ (allow network*)"));
        s.isolate_network = false;
        let text = profile(&s);
        assert!(text.contains(r#"(subpath "/Users/ann/we\"ird\\ (allow network*)")"#));
        let depth = text.chars().try_fold(0i32, |d, c| {
            let d = d + i32::from(c == '(') - i32::from(c == ')');
            (d >= 0).then_some(d)
        });
        // The quoted path holds one `(` and one `)`, which balance too.
        assert_eq!(depth, Some(0));
        assert!(text.ends_with("(allow network*)\n"));
        let mut isolated = spec();
        isolated.proxy_socket = Some("/private/tmp/new-501-1/proxy.sock".into());
        assert!(profile(&isolated).contains(
            "(allow network-outbound (remote unix-socket (path-literal \"/private/tmp/new-501-1/proxy.sock\")))"
        ));
        assert!(!profile(&isolated).contains("(allow network*)\n"));
    }
}
