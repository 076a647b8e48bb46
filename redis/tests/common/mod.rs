//! Test harness: private redis-server instances (and a three-node Cluster) on free loopback
//! ports, stopped by pid. Under CI=true a missing redis-server fails the test; elsewhere
//! the test is skipped loudly.

#![allow(dead_code)]

pub mod memcached;

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Whether redis-server can be used here; panics under CI=true when it cannot.
pub fn redis_available() -> bool {
    let found = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("redis-server is not installed, and CI=true requires the Redis tests to run");
        }
        eprintln!("SKIPPED: redis-server not found on PATH; the Redis tests did not run");
    }
    found
}

/// A free TCP port on 127.0.0.1 (and its cluster bus port + 10000 is checked too).
pub fn free_port() -> u16 {
    loop {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        if port < 50000 && TcpListener::bind(("127.0.0.1", port + 10000)).is_ok() {
            return port;
        }
    }
}

fn scratch(name: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "herdless-redis-{}-{}-{}",
        std::process::id(),
        name,
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// A private redis-server.
pub struct Server {
    pub port: u16,
    child: Option<Child>,
    dir: PathBuf,
    extra: Vec<String>,
}

impl Server {
    /// Starts one on a free port and waits until it answers.
    pub fn start() -> Server {
        Self::start_with(free_port(), Vec::new())
    }

    pub fn start_with(port: u16, extra: Vec<String>) -> Server {
        let mut s = Server {
            port,
            child: None,
            dir: scratch("srv"),
            extra,
        };
        s.spawn();
        s
    }

    fn spawn(&mut self) {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .args(["--dir", self.dir.to_str().expect("utf-8 path")])
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        self.child = Some(child);
        wait_ready(self.port);
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().expect("running").id() as i32
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

    /// SIGSTOP: the server hangs with its sockets open (every thread stopped on return).
    pub fn stop(&self) {
        stop(self.pid());
    }

    /// SIGCONT.
    pub fn resume(&self) {
        signal(self.pid(), libc::SIGCONT);
    }

    /// A plain synchronous connection for test set-up and checks.
    pub fn client(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .expect("client")
            .get_connection_with_timeout(Duration::from_secs(2))
            .expect("connect")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(c) = &self.child {
            signal(c.id() as i32, libc::SIGCONT);
        }
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// SIGSTOP to `pid`, returning once every thread of it is stopped. `kill` only queues the
/// signal: the kernel stops one thread, which then stops the others, so on a busy machine
/// a server's worker thread could still answer a request sent right after `kill` returned
/// (a "stalled" memcached granted a lease that way and a conformance scenario failed).
pub fn stop(pid: i32) {
    signal(pid, libc::SIGSTOP);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !all_stopped(pid) {
        assert!(Instant::now() < deadline, "process {pid} did not stop");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Whether every thread of `pid` is stopped (state `T` in `/proc/<pid>/task/*/stat`).
fn all_stopped(pid: i32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().all(|t| {
        let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
        // The state follows the command name, which is in parentheses and may hold any.
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, r)| r.trim_start().chars().next());
        // A thread that exited meanwhile (no stat) holds nothing back.
        stat.is_empty() || state == Some('T')
    })
}

pub fn signal(pid: i32, sig: i32) {
    // SAFETY: kill(2) on a pid we spawned; no memory is touched.
    unsafe {
        libc::kill(pid, sig);
    }
}

fn wait_ready(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let url = format!("redis://127.0.0.1:{port}");
    loop {
        let ok = redis::Client::open(url.as_str())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(200)))
            .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
            .is_ok();
        if ok {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "redis-server on {port} did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A three-node Redis Cluster on loopback, created with `redis-cli --cluster create`.
pub struct Cluster {
    pub nodes: Vec<Server>,
}

impl Cluster {
    pub fn start() -> Cluster {
        Self::start_with(&[])
    }

    /// A cluster whose nodes get `extra` redis-server options after the defaults (a later
    /// option overrides an earlier one: `--cluster-node-timeout 60000` keeps a node
    /// stopped by a test from being declared failed meanwhile).
    pub fn start_with(extra: &[&str]) -> Cluster {
        let nodes: Vec<Server> = (0..3)
            .map(|_| {
                let mut args: Vec<String> = vec![
                    "--cluster-enabled".into(),
                    "yes".into(),
                    "--cluster-node-timeout".into(),
                    "2000".into(),
                ];
                args.extend(extra.iter().map(|a| (*a).to_owned()));
                Server::start_with(free_port(), args)
            })
            .collect();
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let out = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .expect("run redis-cli --cluster create");
        assert!(
            out.status.success(),
            "cluster create failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let c = Cluster { nodes };
        c.wait_ok();
        c
    }

    fn wait_ok(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let ok = self.nodes.iter().all(|n| {
                let info: String = redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query(&mut n.client())
                    .unwrap_or_default();
                info.contains("cluster_state:ok")
            });
            if ok {
                return;
            }
            assert!(Instant::now() < deadline, "cluster did not become ok");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(Server::url).collect()
    }
}

/// A unique key prefix for tests sharing a server.
pub fn unique(name: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "t{}x{}x{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
        name
    )
}

/// Polls `f` until it is true or `within` passes.
pub fn eventually(within: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    f()
}
