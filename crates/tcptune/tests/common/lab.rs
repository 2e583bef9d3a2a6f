//! A lab for the privileged CLI tests: made with `tcptune lab up` (emulator backend), removed
//! on drop (also when an assertion fails), with a `tcptune serve` (or another server) in its
//! server namespace and `tcptune test --json` from its client.

#![allow(dead_code)] // each test file uses the part it needs

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;
use tcptune_testkit::{line_channel, wait_for_line, Kill};

pub fn tcptune(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcptune"))
        .args(args)
        .output()
        .unwrap()
}

/// A lab removed on drop (also when an assertion fails).
pub struct Lab(pub &'static str);
impl Lab {
    pub fn up(name: &'static str, args: &[&str]) -> Lab {
        let _ = tcptune(&["lab", "down", "--name", name]);
        let mut a = vec!["lab", "up", "--backend", "emu", "--name", name];
        a.extend_from_slice(args);
        let o = tcptune(&a);
        assert!(
            o.status.success(),
            "lab up: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        Lab(name)
    }
    pub fn set(&self, args: &[&str]) {
        let mut a = vec!["lab", "set", "--name", self.0];
        a.extend_from_slice(args);
        let o = tcptune(&a);
        assert!(
            o.status.success(),
            "lab set: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    pub fn ns(&self, host: &str) -> String {
        format!("tcptune-{}-{host}", self.0)
    }
    /// Waits until the emulator holds no packet in either direction: a test's sockets keep
    /// sending what their buffers held after the test ends, and a deep queue takes a while to
    /// drain, so the next test would otherwise start behind the last one's leftovers.
    pub fn wait_idle(&self) {
        let empty = |d: &Value| d["queue_packets"] == 0 && d["held_packets"] == 0;
        tcptune_testkit::wait_for("the lab's link to drain", Duration::from_secs(30), || {
            let o = tcptune(&["lab", "status", "--name", self.0, "--json"]);
            let v: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
            let emu = &v["result"]["labs"][0]["emulator"];
            empty(&emu["up"]) && empty(&emu["down"])
        });
    }
    /// `tcptune serve -1` on the server, once it says it listens (a pipe read with a deadline),
    /// then `tcptune test 198.18.0.2 --json ARGS` on the client: exit code and JSON result.
    pub fn test(&self, args: &[&str]) -> (i32, Value) {
        let bin = env!("CARGO_BIN_EXE_tcptune");
        self.test_against(&[bin, "serve", "-1"], "listening on", args)
    }
    /// As `test`, against another server command that prints `ready` once it listens.
    pub fn test_against(&self, server: &[&str], ready: &str, args: &[&str]) -> (i32, Value) {
        self.wait_idle();
        let ns_server = self.ns("server");
        let mut argv = vec!["netns", "exec", ns_server.as_str()];
        argv.extend_from_slice(server);
        let mut srv = Kill(
            Command::new("ip")
                .args(&argv)
                .stdout(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let rx = line_channel(srv.0.stdout.take().unwrap());
        wait_for_line(&rx, Duration::from_secs(10), |l| l.contains(ready))
            .expect("the server printed that it listens within 10 s");
        let ns_client = self.ns("client");
        let mut a = vec!["netns", "exec", ns_client.as_str()];
        let bin = env!("CARGO_BIN_EXE_tcptune");
        a.extend_from_slice(&[bin, "test", "198.18.0.2", "--json", "-i", "0"]);
        a.extend_from_slice(args);
        let o = Command::new("ip").args(&a).output().unwrap();
        let code = o.status.code().unwrap();
        assert!(
            code == 0 || code == 1,
            "tcptune test {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        (code, v["result"].clone())
    }
}
impl Drop for Lab {
    fn drop(&mut self) {
        let _ = tcptune(&["lab", "down", "--name", self.0]);
    }
}
