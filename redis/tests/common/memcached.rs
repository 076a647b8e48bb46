//! A private memcached on a free loopback port, stopped by pid: for the memcached tier's
//! tests and its conformance runs. Under CI=true a missing memcached fails the test;
//! elsewhere the test is skipped loudly.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Whether memcached can be used here; panics under CI=true when it cannot.
pub fn available() -> bool {
    let found = Command::new("memcached")
        .arg("-V")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("memcached is not installed, and CI=true requires the memcached tests to run");
        }
        eprintln!("SKIPPED: memcached not found on PATH; the memcached tests did not run");
    }
    found
}

/// A private memcached.
pub struct Memcached {
    pub port: u16,
    child: Option<Child>,
}

impl Memcached {
    /// Starts one, or `None` without memcached (see [`available`]).
    pub fn start() -> Option<Memcached> {
        if !available() {
            return None;
        }
        let mut m = Memcached {
            port: super::free_port(),
            child: None,
        };
        m.spawn();
        Some(m)
    }

    fn spawn(&mut self) {
        let mut cmd = Command::new("memcached");
        cmd.args(["-l", "127.0.0.1", "-U", "0", "-p", &self.port.to_string()]);
        // memcached refuses to run as root unless told which user to be.
        let root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| o.stdout.starts_with(b"0\n"));
        if root {
            cmd.args(["-u", "root"]);
        }
        let child = cmd.stdout(Stdio::null()).spawn().expect("start memcached");
        self.child = Some(child);
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "memcached did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `host:port`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `memcached://host:port`.
    pub fn url(&self) -> String {
        format!("memcached://{}", self.addr())
    }

    /// SIGKILL, and reap.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts again, empty, on the same port.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// Whether the process is there (running or stopped), as opposed to killed.
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    fn pid(&self) -> i32 {
        self.child.as_ref().expect("running").id() as i32
    }

    /// SIGSTOP: connections stay open, nothing answers.
    pub fn stop(&self) {
        super::stop(self.pid());
    }

    /// SIGCONT.
    pub fn resume(&self) {
        super::signal(self.pid(), libc::SIGCONT);
    }

    /// Sends raw protocol lines, answering what memcached said.
    pub fn raw(&self, lines: &[u8]) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        s.write_all(lines).expect("write");
        s.write_all(b"mn\r\n").expect("write");
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        while !out.ends_with(b"MN\r\n") {
            let n = s.read(&mut buf).expect("read");
            assert!(n > 0, "memcached closed the connection");
            out.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Stores `bytes` under the item `name`, never expiring (a write from outside herdless).
    pub fn put(&self, name: &str, bytes: &[u8]) {
        let mut cmd = format!("ms {name} {} T0\r\n", bytes.len()).into_bytes();
        cmd.extend_from_slice(bytes);
        cmd.extend_from_slice(b"\r\n");
        let answer = self.raw(&cmd);
        assert!(answer.starts_with("HD"), "{answer}");
    }
}

impl Drop for Memcached {
    fn drop(&mut self) {
        self.kill();
    }
}
