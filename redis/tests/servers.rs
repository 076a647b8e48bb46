//! The server the Redis tests run against (Redis, or Valkey through `scripts/valkey`) is one
//! the tier supports (PROTOCOL.md section 8): its version, and every command the tier or
//! redis-rs for it sends. A suite run against an older server would pass or fail for the
//! wrong reasons; this says so by name.

mod common;

/// Commands the tier sends: in its scripts, pub/sub, reads, and redis-rs's connection
/// set-up (HELLO for RESP3, CLUSTER SLOTS for a Cluster's map).
const USED: &[&str] = &[
    "EVALSHA",
    "EVAL",
    "SCRIPT",
    "GET",
    "SET",
    "DEL",
    "INCR",
    "TIME",
    "PTTL",
    "PEXPIRE",
    "MGET",
    "PUBLISH",
    "PSUBSCRIBE",
    "PUNSUBSCRIBE",
    "SPUBLISH",
    "SSUBSCRIBE",
    "SUNSUBSCRIBE",
    "PING",
    "HELLO",
    "CLUSTER",
];

/// `field:value` of an INFO answer.
fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .map(str::trim)
}

fn version(text: &str) -> (u32, u32) {
    let mut parts = text
        .split('.')
        .map(|p| p.parse::<u32>().expect("version number"));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

#[test]
fn the_server_is_one_the_tier_supports() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let mut c = srv.client();
    let info: String = redis::cmd("INFO").arg("server").query(&mut c).unwrap();
    // Valkey names itself (and keeps redis_version at the Redis release it is compatible
    // with); Redis has no server_name.
    let name = info_field(&info, "server_name").unwrap_or("redis");
    let own = match name {
        "valkey" => info_field(&info, "valkey_version"),
        _ => info_field(&info, "redis_version"),
    }
    .expect("a version in INFO server");
    eprintln!("server under test: {name} {own}");
    // Redis 7.0 brought sharded pub/sub (a Cluster's notices); Valkey's first release is
    // 7.2, with everything Redis 7.2 has.
    let minimum = if name == "valkey" { (7, 2) } else { (7, 0) };
    assert!(
        version(own) >= minimum,
        "{name} {own} is older than the tier's minimum {minimum:?} (PROTOCOL.md section 8)"
    );
    for command in USED {
        let found: redis::Value = redis::cmd("COMMAND")
            .arg("INFO")
            .arg(*command)
            .query(&mut c)
            .unwrap();
        let known = matches!(&found, redis::Value::Array(a) if a.first().is_some_and(|v| *v != redis::Value::Nil));
        assert!(known, "{name} {own} lacks {command}");
    }
}
