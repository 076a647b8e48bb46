//! The wall clock the fleet shares (keep hosts on NTP), and the random secrets of its
//! tokens and ids.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::Error;

/// Wall-clock Unix milliseconds: the fleet's shared time line (keep hosts on NTP).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Wall-clock Unix microseconds.
pub(crate) fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// 128 random bits from the OS.
pub(crate) fn random_secret() -> Result<[u8; 16], Error> {
    let mut s = [0; 16];
    getrandom::fill(&mut s).map_err(|e| Error::Random(e.to_string()))?;
    Ok(s)
}

pub(crate) fn hex(b: &[u8]) -> String {
    use std::fmt::Write;
    b.iter()
        .fold(String::with_capacity(b.len() * 2), |mut s, x| {
            let _ = write!(s, "{x:02x}");
            s
        })
}
