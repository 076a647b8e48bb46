//! Attacks on the shared tier: guessing or replaying lock tokens, and oversized keys and
//! values.

mod common;

use std::collections::HashSet;
use std::time::Duration;

use herdless::backend::{Backend, LockToken, StoredEntry, WriteOutcome};
use herdless_redis::{
    DEFAULT_MAX_ENTRY_BYTES, Error, FleetOptions, FleetOutcome, Json, RawBytes, RedisBackend,
    TieredCache, block_on, new_entry,
};

fn backend(url: &str, prefix: &str) -> RedisBackend {
    RedisBackend::builder(url)
        .prefix(prefix)
        .build()
        .expect("backend")
}

fn entry(value: &[u8]) -> StoredEntry {
    let s = Duration::from_secs;
    new_entry(Some(value.to_vec()), s(60), s(0), s(0), s(0))
}

/// The token behind a lock, read from Redis: `<epoch>:<32 hex digits>` (PROTOCOL.md).
fn token_in_redis(conn: &mut redis::Connection, lock: &str) -> LockToken {
    let raw: String = redis::cmd("GET").arg(lock).query(conn).expect("GET lock");
    let (epoch, hex) = raw.split_once(':').expect("<epoch>:<secret>");
    assert_eq!(hex.len(), 32, "a 128-bit secret: {raw}");
    let mut secret = [0u8; 16];
    for (i, b) in secret.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).expect("hex");
    }
    LockToken {
        epoch: epoch.parse().expect("epoch"),
        secret,
    }
}

/// Lock tokens are 128 random bits, never repeated, and nothing but the holder's exact token
/// can extend, release or commit: not a replayed token of an earlier lock of the same key,
/// not a guess built from the (public) epoch, not a token that differs in one bit.
#[test]
fn lock_tokens_are_random_distinct_and_cannot_be_guessed_or_replayed() {
    if !common::redis_available() {
        return;
    }
    const N: usize = 1_000;
    let srv = common::Server::start();
    let prefix = common::unique("tok");
    let b = backend(&srv.url(), &prefix);
    let fleet = b.fleet(FleetOptions::default());
    let mut conn = srv.client();
    let key = "accounts:v1:balance:7";
    let lock = b.names(key).lock;
    let mut seen = HashSet::new();
    let mut ones = [0u32; 128];
    let mut previous: Option<LockToken> = None;
    for i in 0..N {
        let lease = match fleet.lead_blocking(key, 0).expect("lead") {
            FleetOutcome::Lead(lease) => lease,
            _ => panic!("acquisition {i}: the lock was free, so this caller leads"),
        };
        let token = token_in_redis(&mut conn, &lock);
        assert!(seen.insert(token.secret), "token repeated after {i}");
        for (bit, n) in ones.iter_mut().enumerate() {
            *n += u32::from(token.secret[bit / 8] >> (bit % 8) & 1);
        }
        // Forgeries: a replay of the previous holder's token, guesses from the epoch, and
        // the real token with one bit flipped.
        let mut flipped = token.clone();
        flipped.secret[i % 16] ^= 1 << (i % 8);
        let mut forged = vec![
            LockToken {
                epoch: token.epoch,
                secret: [0; 16],
            },
            LockToken {
                epoch: token.epoch,
                secret: [0xff; 16],
            },
            flipped,
        ];
        forged.extend(previous.take());
        if i % 5 != 0 {
            // Forgeries on every fifth lock keep the test short; tokens on every one.
            forged.clear();
        }
        block_on(async {
            for f in &forged {
                assert!(!b.extend(key, f, Duration::from_secs(60)).await.unwrap());
                assert!(!b.release(key, f).await.unwrap());
                let w = b.commit(key, entry(b"forged"), Some(f)).await.unwrap();
                assert_eq!(w, WriteOutcome::Superseded, "a forged token committed");
            }
        })
        .unwrap();
        assert_eq!(
            fleet.read_blocking(key).unwrap(),
            None,
            "nothing forged landed"
        );
        // The real token still holds the lock: the forgeries did not free it.
        let still: String = redis::cmd("GET").arg(&lock).query(&mut conn).unwrap();
        assert!(
            still.ends_with(
                &token
                    .secret
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>()
            )
        );
        if i % 2 == 0 {
            assert!(lease.release_blocking().unwrap());
        } else {
            // The parsed token is the real one: it releases the lock (so the checks above
            // were made with a token format Redis accepts).
            assert!(block_on(b.release(key, &token)).unwrap().unwrap());
            drop(lease);
        }
        previous = Some(token);
    }
    // Each of the 128 bits is set in about half of the tokens: for N = 1,000 a fair bit
    // lands within 500 +/- 100 (6.3 standard deviations; all 128 bits: p > 1 - 1e-7).
    for (bit, &n) in ones.iter().enumerate() {
        assert!(
            (400..=600).contains(&n),
            "bit {bit} set in {n} of {N} tokens: not uniform"
        );
    }
}

/// Values larger than `max_entry_bytes` are refused with [`Error::EntryTooLarge`] before
/// they reach Redis, through the backend, the fleet and the tiered cache; keys longer than
/// the L1's `max_key_len` are refused before any write.
#[test]
fn oversized_values_and_keys_are_refused_with_a_typed_error() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let prefix = common::unique("big");
    let small = RedisBackend::builder(srv.url())
        .prefix(&prefix)
        .max_entry_bytes(1_024)
        .build()
        .unwrap();
    let too_large = |e: &herdless::Error| match e {
        herdless::Error::Backend(inner) => {
            matches!(
                inner.downcast_ref::<Error>(),
                Some(Error::EntryTooLarge { max: 1_024, .. })
            )
        }
        _ => false,
    };
    // The backend itself.
    let err = block_on(small.commit("files:1", entry(&[7; 2_000]), None))
        .unwrap()
        .unwrap_err();
    let e = err.downcast_ref::<Error>().expect("a herdless-redis error");
    assert!(
        matches!(e, Error::EntryTooLarge { bytes, max: 1_024 } if *bytes > 2_000),
        "{e:?}"
    );
    assert!(e.to_string().contains("max_entry_bytes"), "{e}");
    // The fleet (what the bindings drive).
    let fleet = small.fleet(FleetOptions::default());
    let err = fleet
        .set_blocking("files:2", entry(&[7; 2_000]))
        .unwrap_err();
    assert!(too_large(&err), "{err:?}");
    // The tiered cache: `set` refuses; a load of an oversized value still answers the
    // caller (from memory) but writes nothing to Redis.
    let cache: TieredCache<Vec<u8>, RawBytes> = TieredCache::builder(small.clone(), RawBytes)
        .build()
        .unwrap();
    let err = cache.set("files:3", vec![1; 4_096]).unwrap_err();
    assert!(too_large(&err), "{err:?}");
    assert_eq!(cache.get("files:3").unwrap(), None);
    let loaded = cache
        .get_or_load("files:4", || {
            Ok::<_, std::io::Error>(Some(vec![2u8; 4_096]))
        })
        .unwrap();
    assert_eq!(loaded.map(|v| v.len()), Some(4_096));
    let mut conn = srv.client();
    for k in ["files:1", "files:2", "files:3", "files:4"] {
        let exists: i64 = redis::cmd("EXISTS")
            .arg(small.names(k).value)
            .query(&mut conn)
            .unwrap();
        assert_eq!(exists, 0, "{k} reached Redis");
    }
    // Within the limit everything is written.
    cache.set("files:5", vec![3; 512]).unwrap();
    let w = block_on(small.commit("files:6", entry(&[7; 900]), None))
        .unwrap()
        .unwrap();
    assert!(matches!(w, WriteOutcome::Written { .. }));

    // The default limit: 8 MiB.
    let default = backend(&srv.url(), &prefix);
    let huge = vec![0u8; DEFAULT_MAX_ENTRY_BYTES];
    let err = block_on(default.commit("files:7", entry(&huge), None))
        .unwrap()
        .unwrap_err();
    assert!(matches!(
        err.downcast_ref::<Error>(),
        Some(Error::EntryTooLarge {
            max: DEFAULT_MAX_ENTRY_BYTES,
            ..
        })
    ));
    assert!(
        block_on(default.commit("files:8", entry(&huge[..1 << 20]), None))
            .unwrap()
            .is_ok()
    );
    assert!(
        RedisBackend::builder(srv.url())
            .max_entry_bytes(0)
            .build()
            .is_err()
    );

    // Keys: the L1's limit (default 1,024 bytes) is checked before Redis sees the key.
    let cache: TieredCache<String, Json> = TieredCache::builder(default, Json).build().unwrap();
    let long = format!("users:{}", "x".repeat(2_000));
    let before: i64 = redis::cmd("DBSIZE").query(&mut conn).unwrap();
    for err in [
        cache.set(&long, "v".into()).unwrap_err(),
        cache
            .get_or_load(&long, || Ok::<_, std::io::Error>(Some("v".to_string())))
            .unwrap_err(),
        cache.invalidate(&long).unwrap_err(),
    ] {
        assert!(
            matches!(
                err,
                herdless::Error::KeyTooLong {
                    len: 2_006,
                    max: 1_024
                }
            ),
            "{err:?}"
        );
    }
    assert!(matches!(
        cache.set("", "v".into()),
        Err(herdless::Error::EmptyKey)
    ));
    // A namespace longer than any key holds no key: no epoch key is made for it.
    assert_eq!(cache.bump(&"n".repeat(2_000)).unwrap(), 0);
    let after: i64 = redis::cmd("DBSIZE").query(&mut conn).unwrap();
    assert_eq!(before, after, "a refused key wrote to Redis");
}
