//! The Lua scripts (PROTOCOL.md, "Scripts"), run with EVALSHA and an EVAL fallback through
//! `redis::Script`. Each touches only keys of one slot: a namespace's, or one tag's record.
//!
//! Numbers are Lua doubles: times in ms, versions in µs and epochs stay far below 2^53, so
//! they are exact. Integers are written with `%.0f`, never `tostring` (which would print
//! `1.7e+15`).

use std::sync::LazyLock;

use redis::Script;

/// Helpers prepended to every script.
const PRELUDE: &str = r#"
local HEADER = 52
local function u64(s, i)
  local n = 0
  for k = i, i + 7 do n = n * 256 + string.byte(s, k) end
  return n
end
local function be64(n)
  local t = {}
  for k = 8, 1, -1 do t[k] = n % 256; n = math.floor(n / 256) end
  return string.char(t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8])
end
local function num(n) return string.format('%.0f', n) end
local function valid(s)
  local h = s and string.sub(s, 1, 3)
  return s and #s >= HEADER and (h == 'hl\1' or h == 'hl\2' or h == 'hl\4')
end
local function get(k)
  local v = redis.pcall('GET', k)
  if type(v) == 'table' then
    redis.call('DEL', k)
    return nil, 1
  end
  return v or nil, 0
end
local function epoch(k)
  local e, bad = get(k)
  if not e and bad == 0 then return 0, 0 end
  if e and #e <= 16 and string.match(e, '^%d+$') and tonumber(e) < 9007199254740992 then
    return tonumber(e), 0
  end
  local t = redis.call('TIME')
  local n = tonumber(t[1]) * 1000000 + tonumber(t[2])
  redis.call('SET', k, num(n))
  return n, 1
end
local function lock_epoch(v)
  local e = v and string.match(v, '^(%d+):')
  return e and tonumber(e)
end
local function notify(sharded, channel, kind, origin, n, key)
  local cmd = 'PUBLISH'
  if sharded == '1' then cmd = 'SPUBLISH' end
  redis.call(cmd, channel, kind .. ':' .. origin .. ':' .. num(n) .. ':' .. key)
end
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function tag_record(k)
  local cur, corrupt = get(k)
  if cur then
    local i, r, x = string.match(cur, '^([0-9a-f]+):(%d+):(%d+)$')
    if i and #i == 16 and i ~= '0000000000000000' and #r <= 16 and #x <= 16 then
      return i, tonumber(r), tonumber(x), 0
    end
    corrupt = 1
  end
  return nil, 0, 0, corrupt
end
"#;

/// `acquire`: KEYS value, epoch, lock. ARGV now_ms, lease_ms, secret (32 hex), have_version.
/// Returns `{status, entry, epoch, pttl, corrupt}`: status 0 = a fresh entry newer than
/// have_version (no lock), 1 = locked by the caller, 2 = locked by someone else (pttl =
/// its remaining lease), 3 = marked "load locally" by a process whose value could not be
/// encoded (pttl = the mark's remaining time); entry = the fresh entry (0) or an entry
/// still servable within grace (1, 2, 3), else ""; corrupt = 1 when unreadable or
/// wrongly typed state was found (and repaired).
const ACQUIRE: &str = r#"
local now = tonumber(ARGV[1])
local have = tonumber(ARGV[4])
local ep, corrupt = epoch(KEYS[2])
local raw, bad = get(KEYS[1])
if bad == 1 then corrupt = 1 end
local keep = ''
if raw then
  if not valid(raw) then
    corrupt = 1
  elseif u64(raw, 45) == ep and now < u64(raw, 13) then
    if now < u64(raw, 5) and u64(raw, 37) > have then
      return {0, raw, ep, 0, corrupt}
    end
    keep = raw
  end
end
local cur, badlock = get(KEYS[3])
if badlock == 1 then corrupt = 1 end
if cur then
  local pttl = redis.call('PTTL', KEYS[3])
  -- A lock without expiry was not set by herdless: it would block the key forever.
  if pttl > 0 then
    if lock_epoch(cur) == ep then
      return {2, keep, ep, pttl, corrupt}
    end
    if cur == 'unshared:' .. num(ep) then
      return {3, keep, ep, pttl, corrupt}
    end
  end
end
redis.call('SET', KEYS[3], num(ep) .. ':' .. ARGV[3], 'PX', ARGV[2])
return {1, keep, ep, tonumber(ARGV[2]), corrupt}
"#;

/// `commit`: KEYS value, epoch, lock. ARGV token ("<epoch>:<secret>", or "" for an
/// unconditional write), entry, px_ms, channel, origin, sharded ("1"/"0"), key.
/// Returns `{1, version, epoch}` when stored, `{0, 0, epoch}` when superseded.
const COMMIT: &str = r#"
local ep = epoch(KEYS[2])
local e = ARGV[2]
if not valid(e) then
  return redis.error_reply('ERR herdless: commit of a malformed entry')
end
if ARGV[1] ~= '' then
  if get(KEYS[3]) ~= ARGV[1] then
    return {0, 0, ep}
  end
  redis.call('DEL', KEYS[3])
  if lock_epoch(ARGV[1]) ~= ep then
    notify(ARGV[6], ARGV[4], 'r', ARGV[5], 0, ARGV[7])
    return {0, 0, ep}
  end
else
  redis.call('DEL', KEYS[3])
end
local t = redis.call('TIME')
local ver = tonumber(t[1]) * 1000000 + tonumber(t[2])
local old = get(KEYS[1])
if valid(old) and u64(old, 37) >= ver then ver = u64(old, 37) + 1 end
local entry = string.sub(e, 1, 36) .. be64(ver) .. be64(ep) .. string.sub(e, HEADER + 1)
redis.call('SET', KEYS[1], entry, 'PX', ARGV[3])
notify(ARGV[6], ARGV[4], 'w', ARGV[5], ver, ARGV[7])
return {1, ver, ep}
"#;

/// `extend`: KEYS lock. ARGV token, lease_ms. Returns 1 when extended, 0 when not owned.
const EXTEND: &str = r#"
if get(KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"#;

/// `release`: KEYS lock. ARGV token, channel, origin, sharded, key. Returns 1 when released.
const RELEASE: &str = r#"
if get(KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  notify(ARGV[4], ARGV[2], 'r', ARGV[3], 0, ARGV[5])
  return 1
end
return 0
"#;

/// `forget`: KEYS lock. ARGV secret (32 hex), channel, origin, sharded, key. Releases a
/// lock taken with that secret under any epoch (an acquire whose answer was lost); returns
/// 1 when it did.
const FORGET: &str = r#"
local cur = get(KEYS[1])
if cur and string.match(cur, '^%d+:(%x+)$') == ARGV[1] then
  redis.call('DEL', KEYS[1])
  notify(ARGV[4], ARGV[2], 'r', ARGV[3], 0, ARGV[5])
  return 1
end
return 0
"#;

/// `unshare`: KEYS lock. ARGV token, hold_ms, channel, origin, sharded, key. Replaces the
/// caller's lock with the mark `unshared:<epoch>` for hold_ms (every process then loads
/// for itself) and wakes the waiters; returns 1 when the token owned the lock.
const UNSHARE: &str = r#"
if get(KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], 'unshared:' .. num(lock_epoch(ARGV[1])), 'PX', ARGV[2])
  notify(ARGV[5], ARGV[3], 'r', ARGV[4], 0, ARGV[6])
  return 1
end
return 0
"#;

/// `invalidate`: KEYS value, lock. ARGV channel, origin, sharded, key. Returns 1 when an
/// entry was deleted (and publishes `d` with it: key tracking then reports the delete).
const INVALIDATE: &str = r#"
local n = redis.call('DEL', KEYS[1])
redis.call('DEL', KEYS[2])
notify(ARGV[3], ARGV[1], 'd', ARGV[2], n, ARGV[4])
return n
"#;

/// `touch`: KEYS value. ARGV life_ms, channel, origin, sharded, key. Lengthens a live
/// entry's life to life_ms from now if that is later (`PEXPIRE ... GT`); when it did, publishes
/// `i` with 1, so that the invalidation key tracking reports for it is known for herdless's
/// own. Returns 1 when lengthened.
const TOUCH: &str = r#"
local n = redis.call('PEXPIRE', KEYS[1], ARGV[1], 'GT')
if n == 1 then notify(ARGV[4], ARGV[2], 'i', ARGV[3], 1, ARGV[5]) end
return n
"#;

/// `bump`: KEYS epoch. ARGV channel, origin, sharded, namespace. Returns `{epoch,
/// repaired}`: the new epoch, and 1 when the epoch key was corrupt and reset forward first.
const BUMP: &str = r#"
local _, repaired = epoch(KEYS[1])
local n = redis.call('INCR', KEYS[1])
notify(ARGV[3], ARGV[1], 'e', ARGV[2], n, ARGV[4])
return {n, repaired}
"#;

/// `tag`: KEYS the tag's record. ARGV soft ("1": expire, "0": remove), retention_ms,
/// channel ("" on a Cluster: the caller publishes), origin, sharded, tag, incarnation (16
/// hex digits, for a record this makes). A record that is missing or not one is made anew
/// with this incarnation (the entries written under the old one are removed whatever it
/// held). The removed (or expired) field gets the stamp max(the server's clock in µs,
/// either field + 1): the two fields are one increasing sequence, and stamps never come
/// from a client's clock. Keeps the record for retention_ms and publishes `t` (removed) or
/// `x` (expired) with the stamp. Returns `{incarnation, removed, expired, corrupt}`.
const TAG: &str = r#"
local inc, removed, expired, corrupt = tag_record(KEYS[1])
if not inc then inc = ARGV[7] end
local stamp = math.max(now_us(), removed + 1, expired + 1)
local kind = 't'
if ARGV[1] == '1' then
  kind = 'x'
  expired = stamp
else
  removed = stamp
end
redis.call('SET', KEYS[1], inc .. ':' .. num(removed) .. ':' .. num(expired), 'PX', ARGV[2])
if ARGV[3] ~= '' then
  notify(ARGV[5], ARGV[3], kind, ARGV[4], stamp, ARGV[6])
end
return {inc, removed, expired, corrupt}
"#;

/// `tag_use`: KEYS the tag's record. ARGV incarnation (16 hex digits), retention_ms. A
/// writer's use of a tag just before its commit: a record that is missing or not one is
/// made with this incarnation and no invalidation; the record is kept at least
/// retention_ms. Returns `{incarnation, removed, expired, corrupt}`: what the entry's mark
/// is made of.
const TAG_USE: &str = r#"
local inc, removed, expired, corrupt = tag_record(KEYS[1])
if not inc then
  inc = ARGV[1]
  redis.call('SET', KEYS[1], inc .. ':0:0', 'PX', ARGV[2])
elseif redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return {inc, removed, expired, corrupt}
"#;

fn script(body: &str) -> Script {
    Script::new(&format!("{PRELUDE}{body}"))
}

/// The compiled scripts (their SHA1 is computed once).
pub struct Scripts {
    /// The `acquire` script (PROTOCOL.md, section 6).
    pub acquire: Script,
    /// The `commit` script (PROTOCOL.md, section 6).
    pub commit: Script,
    /// The `extend` script (PROTOCOL.md, section 6).
    pub extend: Script,
    /// The `release` script (PROTOCOL.md, section 6).
    pub release: Script,
    /// The `forget` script (PROTOCOL.md, section 6).
    pub forget: Script,
    /// The `unshare` script (PROTOCOL.md, section 6).
    pub unshare: Script,
    /// The `invalidate` script (PROTOCOL.md, section 6).
    pub invalidate: Script,
    /// The `touch` script (PROTOCOL.md, section 6).
    pub touch: Script,
    /// The `bump` script (PROTOCOL.md, section 6).
    pub bump: Script,
    /// The `tag` script (PROTOCOL.md, section 6).
    pub tag: Script,
    /// The `tag_use` script (PROTOCOL.md, section 6).
    pub tag_use: Script,
}

/// The scripts, shared by every backend of the process.
pub static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    acquire: script(ACQUIRE),
    commit: script(COMMIT),
    extend: script(EXTEND),
    release: script(RELEASE),
    forget: script(FORGET),
    unshare: script(UNSHARE),
    invalidate: script(INVALIDATE),
    touch: script(TOUCH),
    bump: script(BUMP),
    tag: script(TAG),
    tag_use: script(TAG_USE),
});

/// The prelude shared by all scripts and each script's own body, by name, as PROTOCOL.md
/// quotes them (a test checks that it does, verbatim).
pub fn parts() -> (&'static str, [(&'static str, &'static str); 11]) {
    (
        PRELUDE,
        [
            ("acquire", ACQUIRE),
            ("commit", COMMIT),
            ("extend", EXTEND),
            ("release", RELEASE),
            ("forget", FORGET),
            ("unshare", UNSHARE),
            ("invalidate", INVALIDATE),
            ("touch", TOUCH),
            ("bump", BUMP),
            ("tag", TAG),
            ("tag_use", TAG_USE),
        ],
    )
}

/// The full source of every script, by name: the prelude followed by the body.
pub fn sources() -> [(&'static str, String); 11] {
    [
        ("acquire", format!("{PRELUDE}{ACQUIRE}")),
        ("commit", format!("{PRELUDE}{COMMIT}")),
        ("extend", format!("{PRELUDE}{EXTEND}")),
        ("release", format!("{PRELUDE}{RELEASE}")),
        ("forget", format!("{PRELUDE}{FORGET}")),
        ("unshare", format!("{PRELUDE}{UNSHARE}")),
        ("invalidate", format!("{PRELUDE}{INVALIDATE}")),
        ("touch", format!("{PRELUDE}{TOUCH}")),
        ("bump", format!("{PRELUDE}{BUMP}")),
        ("tag", format!("{PRELUDE}{TAG}")),
        ("tag_use", format!("{PRELUDE}{TAG_USE}")),
    ]
}
