//! The hot-key tracker: a bounded top-K of accessed keys (Space-Saving, Metwally,
//! Agrawal, El Abbadi 2005), so a restarting instance can warm the keys that matter.
//!
//! Fed cheaply: every miss and slow-path access is recorded; fresh hits only when the hit
//! counter's stripe passes a multiple of the sample rate (the counter is incremented anyway,
//! so choosing costs nothing), and then with `try_lock`, weighted by the rate. The summary is
//! split in stripes by key hash, so stripes hold disjoint keys and merge exactly.
//!
//! Export and import are a tiny JSON array, written and parsed by hand: the core stays free of
//! dependencies and `no_std`, and the format is small enough to own
//! (`[{"key":"users:1","count":120,"misses":3}]`).

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use hashbrown::HashTable;

use crate::sync::Mutex;

const STRIPES: usize = 8;

/// One key of the top-K, as counted by the tracker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HotKey {
    /// The key.
    pub key: String,
    /// Estimated accesses (sampled hits are weighted by the sample rate; Space-Saving may
    /// overestimate a key by what the key it replaced had counted).
    pub count: u64,
    /// Misses recorded for this key while tracked.
    pub misses: u64,
}

struct Slot {
    key: String,
    hash: u64,
    count: u64,
    misses: u64,
    /// Misses since the detector's last tick, and in the tick before (for attribution).
    window_misses: u64,
    last_window_misses: u64,
}

#[derive(Default)]
struct Summary {
    slots: Vec<Slot>,
    index: HashTable<usize>,
    /// Slot indices as a binary min-heap on `count`, and each slot's place in it: Space-Saving
    /// replaces the least counted slot on every miss of an untracked key, and a full scan
    /// for it was a tenth of a miss's time (a flood of new keys misses on every call).
    heap: Vec<u32>,
    place: Vec<u32>,
}

impl Summary {
    fn record(&mut self, cap: usize, key: &str, hash: u64, weight: u64, miss: bool) {
        let slots = &mut self.slots;
        if let Some(&i) = self
            .index
            .find(hash, |&i| slots[i].hash == hash && slots[i].key == key)
        {
            let s = &mut slots[i];
            s.count = s.count.saturating_add(weight);
            if miss {
                s.misses += 1;
                s.window_misses += 1;
            }
            self.sift_down(self.place[i] as usize);
            return;
        }
        let miss = u64::from(miss);
        if slots.len() < cap {
            let i = slots.len();
            self.index.insert_unique(hash, i, |&i| slots[i].hash);
            slots.push(Slot {
                key: key.into(),
                hash,
                count: weight,
                misses: miss,
                window_misses: miss,
                last_window_misses: 0,
            });
            self.heap.push(i as u32);
            self.place.push((self.heap.len() - 1) as u32);
            self.sift_up(self.heap.len() - 1);
            return;
        }
        // Space-Saving: the new key takes the least counted slot and inherits its count.
        let Some(&top) = self.heap.first() else {
            return;
        };
        let i = top as usize;
        let old = slots[i].hash;
        if let Ok(e) = self.index.find_entry(old, |&j| j == i) {
            e.remove();
        }
        let s = &mut slots[i];
        s.key.clear();
        s.key.push_str(key); // reuses the slot's buffer
        s.hash = hash;
        s.count = s.count.saturating_add(weight);
        s.misses = miss;
        s.window_misses = miss;
        s.last_window_misses = 0;
        self.index.insert_unique(hash, i, |&j| slots[j].hash);
        self.sift_down(0);
    }

    fn count_at(&self, at: usize) -> u64 {
        self.slots[self.heap[at] as usize].count
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        self.place[self.heap[a] as usize] = a as u32;
        self.place[self.heap[b] as usize] = b as u32;
    }

    /// Restores the heap after the count at `at` fell (a new slot).
    fn sift_up(&mut self, mut at: usize) {
        while at > 0 {
            let parent = (at - 1) / 2;
            if self.count_at(parent) <= self.count_at(at) {
                break;
            }
            self.swap(parent, at);
            at = parent;
        }
    }

    /// Restores the heap after the count at `at` grew (counts only grow).
    fn sift_down(&mut self, mut at: usize) {
        loop {
            let (l, r) = (2 * at + 1, 2 * at + 2);
            let mut least = at;
            if l < self.heap.len() && self.count_at(l) < self.count_at(least) {
                least = l;
            }
            if r < self.heap.len() && self.count_at(r) < self.count_at(least) {
                least = r;
            }
            if least == at {
                break;
            }
            self.swap(at, least);
            at = least;
        }
    }
}

/// The striped Space-Saving summary.
pub(crate) struct HotKeys {
    stripes: [Mutex<Summary>; STRIPES],
    per_stripe: usize,
    /// Hits are sampled when `counter & mask == 0`; their weight is `mask + 1`.
    mask: u64,
}

impl HotKeys {
    /// A tracker of about `capacity` keys sampling one hit in `sample` (a power of two).
    pub(crate) fn new(capacity: usize, sample: u64) -> Self {
        Self {
            stripes: Default::default(),
            per_stripe: capacity.div_ceil(STRIPES).max(1),
            mask: sample.max(1).next_power_of_two() - 1,
        }
    }

    #[inline]
    fn stripe(&self, hash: u64) -> &Mutex<Summary> {
        &self.stripes[(hash as usize) % STRIPES]
    }

    /// A fresh hit whose striped counter was `counter` before it was incremented.
    #[inline]
    pub(crate) fn hit(&self, counter: u64, key: &str, hash: u64) {
        // Scrambled, so traffic that reads keys in a fixed order does not alias with the
        // sampling period (one multiply).
        if (counter.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) & self.mask == 0 {
            self.sample_hit(key, hash);
        }
    }

    #[cold]
    fn sample_hit(&self, key: &str, hash: u64) {
        if let Some(mut s) = try_lock(self.stripe(hash)) {
            s.record(self.per_stripe, key, hash, self.mask + 1, false);
        }
    }

    /// An access on a slow path (a miss, a stale hit, a refresh): always recorded.
    pub(crate) fn access(&self, key: &str, hash: u64, miss: bool) {
        self.stripe(hash)
            .lock()
            .record(self.per_stripe, key, hash, 1, miss);
    }

    /// Adds `count` accesses to `key` (import).
    pub(crate) fn add(&self, key: &str, hash: u64, count: u64) {
        self.stripe(hash)
            .lock()
            .record(self.per_stripe, key, hash, count, false);
    }

    /// The `n` most accessed keys, most first.
    pub(crate) fn top(&self, n: usize) -> Vec<HotKey> {
        let mut all = Vec::new();
        for s in &self.stripes {
            let s = s.lock();
            all.extend(s.slots.iter().map(|s| HotKey {
                key: s.key.clone(),
                count: s.count,
                misses: s.misses,
            }));
        }
        all.sort_unstable_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
        all.truncate(n);
        all
    }

    /// Closes the detector's window: the misses of the tick just ended become "last".
    pub(crate) fn roll(&self) {
        for s in &self.stripes {
            for slot in s.lock().slots.iter_mut() {
                slot.last_window_misses = core::mem::take(&mut slot.window_misses);
            }
        }
    }

    /// The key of `namespace` with the most misses in the last closed window, and them.
    pub(crate) fn top_misser(&self, namespace: &str) -> Option<(String, u64)> {
        let mut best: Option<(String, u64)> = None;
        for s in &self.stripes {
            for slot in s.lock().slots.iter() {
                let m = slot.last_window_misses;
                if m > 0
                    && crate::key::namespace_of(&slot.key) == namespace
                    && best.as_ref().is_none_or(|(_, b)| m > *b)
                {
                    best = Some((slot.key.clone(), m));
                }
            }
        }
        best
    }
}

impl<V: Clone + Send + Sync + 'static> crate::Cache<V> {
    /// The `n` most accessed keys, most first (empty when the tracker is off). Counts are
    /// estimates: fresh hits are sampled (see
    /// [`Builder::hot_key_sample`](crate::Builder::hot_key_sample)).
    pub fn hot_keys(&self, n: usize) -> Vec<HotKey> {
        self.inner.hot.as_ref().map_or_else(Vec::new, |h| h.top(n))
    }

    /// The `n` hottest keys as JSON, for [`import_hot_keys`](Self::import_hot_keys) in the
    /// next instance (e.g. written to a file at shutdown or fetched from a live peer).
    pub fn export_hot_keys(&self, n: usize) -> String {
        to_json(&self.hot_keys(n))
    }

    /// Reads an export into this cache's tracker (their counts add to what it counted) and
    /// returns the keys, hottest first, ready for [`warm`](Self::warm).
    pub fn import_hot_keys(&self, json: &str) -> Result<Vec<HotKey>, HotKeysJsonError> {
        let mut keys = from_json(json)?;
        if let Some(h) = &self.inner.hot {
            for k in &keys {
                h.add(&k.key, self.hash(&k.key), k.count);
            }
        }
        keys.sort_by_key(|k| core::cmp::Reverse(k.count));
        Ok(keys)
    }
}

#[cfg(not(herdless_loom))]
fn try_lock<T>(m: &Mutex<T>) -> Option<impl core::ops::DerefMut<Target = T> + '_> {
    m.try_lock()
}

#[cfg(herdless_loom)]
fn try_lock<T>(m: &Mutex<T>) -> Option<impl core::ops::DerefMut<Target = T> + '_> {
    Some(m.lock())
}

/// Hot keys as JSON: `[{"key":"...","count":N,"misses":M}, ...]`.
pub fn to_json(keys: &[HotKey]) -> String {
    let mut out = String::from("[");
    for (i, k) in keys.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"key\":\"");
        for ch in k.key.chars() {
            match ch {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if (c as u32) < 0x20 => {
                    let _ = fmt::Write::write_fmt(&mut out, format_args!("\\u{:04x}", c as u32));
                }
                c => out.push(c),
            }
        }
        let _ = fmt::Write::write_fmt(
            &mut out,
            format_args!("\",\"count\":{},\"misses\":{}}}", k.count, k.misses),
        );
    }
    out.push(']');
    out
}

/// Why an exported hot-key list could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct HotKeysJsonError {
    /// Byte offset of the problem.
    pub offset: usize,
    /// What was expected there.
    pub expected: &'static str,
}

impl fmt::Display for HotKeysJsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid hot-key JSON at byte {}: expected {}",
            self.offset, self.expected
        )
    }
}

impl core::error::Error for HotKeysJsonError {}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn err<T>(&self, expected: &'static str) -> Result<T, HotKeysJsonError> {
        Err(HotKeysJsonError {
            offset: self.i,
            expected,
        })
    }
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }
    fn eat(&mut self, b: u8, expected: &'static str) -> Result<(), HotKeysJsonError> {
        self.ws();
        if self.s.get(self.i) == Some(&b) {
            self.i += 1;
            Ok(())
        } else {
            self.err(expected)
        }
    }
    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.i).copied()
    }
    fn hex4(&mut self) -> Result<u32, HotKeysJsonError> {
        let digits = self.s.get(self.i..self.i + 4);
        let v = digits
            .and_then(|d| core::str::from_utf8(d).ok())
            .and_then(|d| u32::from_str_radix(d, 16).ok());
        match v {
            Some(v) => {
                self.i += 4;
                Ok(v)
            }
            None => self.err("four hex digits"),
        }
    }
    fn string(&mut self) -> Result<String, HotKeysJsonError> {
        self.eat(b'"', "a string")?;
        let mut out = String::new();
        loop {
            let start = self.i;
            while self.i < self.s.len() && !matches!(self.s[self.i], b'"' | b'\\') {
                if self.s[self.i] < 0x20 {
                    return self.err("no control character in a string");
                }
                self.i += 1;
            }
            match core::str::from_utf8(&self.s[start..self.i]) {
                Ok(part) => out.push_str(part),
                Err(_) => return self.err("UTF-8"),
            }
            match self.s.get(self.i) {
                Some(b'"') => {
                    self.i += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.i += 1;
                    let c = self.s.get(self.i).copied();
                    self.i += 1;
                    let ch = match c {
                        Some(b'"') => '"',
                        Some(b'\\') => '\\',
                        Some(b'/') => '/',
                        Some(b'b') => '\u{8}',
                        Some(b'f') => '\u{c}',
                        Some(b'n') => '\n',
                        Some(b'r') => '\r',
                        Some(b't') => '\t',
                        Some(b'u') => {
                            let hi = self.hex4()?;
                            let code = if (0xD800..0xDC00).contains(&hi) {
                                if self.s.get(self.i..self.i + 2) != Some(b"\\u") {
                                    return self.err("a low surrogate");
                                }
                                self.i += 2;
                                let lo = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return self.err("a low surrogate");
                                }
                                0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                            } else {
                                hi
                            };
                            match char::from_u32(code) {
                                Some(c) => c,
                                None => return self.err("a valid \\u escape"),
                            }
                        }
                        _ => {
                            self.i -= 1;
                            return self.err("a valid escape");
                        }
                    };
                    out.push(ch);
                }
                _ => return self.err("a closing quote"),
            }
        }
    }
    fn number(&mut self) -> Result<u64, HotKeysJsonError> {
        self.ws();
        let start = self.i;
        while self.i < self.s.len() && self.s[self.i].is_ascii_digit() {
            self.i += 1;
        }
        let digits = core::str::from_utf8(&self.s[start..self.i]).unwrap_or("");
        match digits.parse() {
            Ok(n) => Ok(n),
            Err(_) => {
                self.i = start;
                self.err("a non-negative integer")
            }
        }
    }
    fn entry(&mut self) -> Result<HotKey, HotKeysJsonError> {
        self.eat(b'{', "an object")?;
        let (mut key, mut count, mut misses) = (None, None, None);
        loop {
            let at = self.i;
            let field = self.string()?;
            self.eat(b':', "':'")?;
            match field.as_str() {
                "key" if key.is_none() => key = Some(self.string()?),
                "count" if count.is_none() => count = Some(self.number()?),
                "misses" if misses.is_none() => misses = Some(self.number()?),
                _ => {
                    self.i = at;
                    return self.err("one of \"key\", \"count\", \"misses\", once each");
                }
            }
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    break;
                }
                _ => return self.err("',' or '}'"),
            }
        }
        match (key, count) {
            (Some(key), Some(count)) => Ok(HotKey {
                key,
                count,
                misses: misses.unwrap_or(0),
            }),
            _ => self.err("both \"key\" and \"count\""),
        }
    }
}

/// Reads what [`to_json`] wrote.
pub fn from_json(json: &str) -> Result<Vec<HotKey>, HotKeysJsonError> {
    let mut p = Parser {
        s: json.as_bytes(),
        i: 0,
    };
    p.eat(b'[', "'['")?;
    let mut out = Vec::new();
    if p.peek() == Some(b']') {
        p.i += 1;
    } else {
        loop {
            out.push(p.entry()?);
            match p.peek() {
                Some(b',') => p.i += 1,
                Some(b']') => {
                    p.i += 1;
                    break;
                }
                _ => return p.err("',' or ']'"),
            }
        }
    }
    if p.peek().is_some() {
        return p.err("the end of the input");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trip_with_escapes() {
        let keys = alloc::vec![
            HotKey {
                key: "a:\"q\"\\\n\u{1}é😀".into(),
                count: 7,
                misses: 2
            },
            HotKey {
                key: "b:1".into(),
                count: 1,
                misses: 0
            },
        ];
        let json = to_json(&keys);
        assert_eq!(from_json(&json).unwrap(), keys);
        assert_eq!(from_json(" [ ] ").unwrap(), Vec::new());
        let k = from_json(r#"[{"count":3,"key":"x\u00e9\ud83d\ude00"}]"#).unwrap();
        assert_eq!(k[0].key, "xé😀");
        for bad in [
            "",
            "[",
            "[{}]",
            "[{\"key\":\"a\"}]",
            "[{\"key\":\"a\",\"count\":-1}]",
            "[{\"key\":\"a\",\"count\":1,\"x\":1}]",
            "[{\"key\":\"a\",\"count\":1}] x",
            "[{\"key\":\"a\\q\",\"count\":1}]",
        ] {
            assert!(from_json(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_replaced_slot_is_always_a_least_counted_one() {
        let mut s = Summary::default();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for step in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Skewed keys and weights: a few hot keys, many cold ones, sampled hits (x64).
            let k = if x % 4 == 0 { x % 8 } else { x % 5000 };
            let key = alloc::format!("k:{k}");
            let weight = if x % 16 == 0 { 64 } else { 1 };
            let least = s.slots.iter().map(|s| s.count).min();
            let tracked = s.slots.iter().any(|s| s.key == key);
            let before: Vec<(String, u64)> =
                s.slots.iter().map(|s| (s.key.clone(), s.count)).collect();
            s.record(32, &key, k, weight, x % 3 == 0);
            if !tracked && before.len() == 32 {
                // The slot now holding `key` held a least counted key before.
                let i = s.slots.iter().position(|s| s.key == key).unwrap();
                assert_eq!(Some(before[i].1), least, "step {step}");
                assert_eq!(s.slots[i].count, before[i].1 + weight);
            }
            for (at, &i) in s.heap.iter().enumerate() {
                assert_eq!(s.place[i as usize] as usize, at);
                if at > 0 {
                    assert!(s.count_at((at - 1) / 2) <= s.count_at(at), "step {step}");
                }
            }
        }
        assert_eq!(s.heap.len(), 32);
    }

    #[test]
    fn space_saving_keeps_the_heavy_keys() {
        let hk = HotKeys::new(16, 1);
        for round in 0..200u64 {
            hk.access("hot:a", 1, false);
            hk.access("hot:b", 2, false);
            let cold = alloc::format!("cold:{round}");
            hk.access(&cold, 1000 + round, false);
        }
        let top = hk.top(2);
        assert_eq!(top[0].key, "hot:a");
        assert_eq!(top[1].key, "hot:b");
        assert!(top[0].count >= 200);
    }
}
