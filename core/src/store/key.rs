//! A stored key as one thin pointer: its length is written at the head of its own
//! allocation (LEB128: one byte below 128 bytes), not beside the pointer, so a node carries
//! 8 bytes of key instead of a `Box<str>`'s 16. The allocation is shared by a count at its
//! tail: a load's flight makes the key once, and the node that stores its result takes a
//! share rather than a copy (one allocation and one free less per miss). At the tail, not
//! the head, so a hit reads the key exactly as before (the pointer is the prefix's).

use alloc::alloc::{Layout, alloc, dealloc, handle_alloc_error};
use core::ptr::NonNull;
// Not `crate::sync`'s: the count guards only this allocation's life, as `Arc`'s own does,
// which loom need not model (`sync::unchecked`).
use core::sync::atomic::{AtomicU8, Ordering, fence};

const COUNT: usize = core::mem::size_of::<AtomicU8>();

/// Where the share count starts: right after the text (a byte needs no alignment).
#[inline]
fn count_at(prefix: usize, len: usize) -> usize {
    prefix + len
}

/// An owned, immutable key: a length prefix, the key's UTF-8 bytes, then a share count, in
/// one allocation.
pub(crate) struct Key {
    ptr: NonNull<u8>,
}

// SAFETY: `Key` owns a share of its allocation, whose text is never written after `new` and
// whose count is atomic, like an `Arc<str>`.
unsafe impl Send for Key {}
// SAFETY: as above; shared access only reads the text or updates the count atomically.
unsafe impl Sync for Key {}

/// The LEB128 encoding of `n` into `out`; how many bytes it took.
fn encode_len(mut n: usize, out: &mut [u8; 10]) -> usize {
    let mut i = 0;
    loop {
        let low = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out[i] = low;
            return i + 1;
        }
        out[i] = low | 0x80;
        i += 1;
    }
}

impl Key {
    /// A copy of `key`.
    pub(crate) fn new(key: &str) -> Self {
        let mut prefix = [0u8; 10];
        let p = encode_len(key.len(), &mut prefix);
        let layout = Self::layout_of(p, key.len());
        // SAFETY: the layout's size is at least `1 + COUNT` (the prefix, the count).
        let raw = unsafe { alloc(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            handle_alloc_error(layout)
        };
        // SAFETY: the allocation holds the text, then the count at an offset aligned for it
        // (the allocation itself is); the sources do not overlap it.
        unsafe {
            let at = count_at(p, key.len());
            ptr.as_ptr()
                .add(at)
                .cast::<AtomicU8>()
                .write(AtomicU8::new(1));
            let text = ptr.as_ptr();
            // Most keys are short: their one-byte prefix is written, not copied by `memcpy`.
            if p == 1 {
                text.write(prefix[0]);
            } else {
                core::ptr::copy_nonoverlapping(prefix.as_ptr(), text, p);
            }
            core::ptr::copy_nonoverlapping(key.as_ptr(), text.add(p), key.len());
        }
        Self { ptr }
    }

    /// Another owner of the same allocation. Shares are few (a flight's and its node's), so
    /// the count cannot overflow.
    #[inline]
    pub(crate) fn share(&self) -> Self {
        // Relaxed, as `Arc::clone`: a new share needs an existing one, which keeps it alive.
        let before = self.count().fetch_add(1, Ordering::Relaxed);
        // A key is shared once, by the flight whose load stores it (two owners at most), so
        // one byte counts (a wider count would add its size and padding to every stored key:
        // 4 bytes cost 6.7 B per entry at 1,000,000 keys); if that ever changed, a wrapped
        // count would free the key under its other owners: refuse, as `Arc` does.
        assert!(before < u8::MAX / 2, "herdless: a key shared too often");
        Self { ptr: self.ptr }
    }

    #[inline]
    fn count(&self) -> &AtomicU8 {
        let (len, p) = self.len_and_prefix();
        // SAFETY: `new` wrote the count there, aligned for it, and it is only used atomically.
        unsafe { &*self.ptr.as_ptr().add(count_at(p, len)).cast::<AtomicU8>() }
    }

    fn layout_of(prefix: usize, len: usize) -> Layout {
        // A `str` of `len` bytes exists, so the size (prefix <= 10, a one-byte count)
        // cannot overflow `isize::MAX` by more than the caller's string already does;
        // checked anyway.
        let size = count_at(prefix, len) + COUNT;
        Layout::from_size_align(size, core::mem::align_of::<AtomicU8>())
            .expect("herdless: key too long to store")
    }

    /// The length prefix's first byte.
    #[inline]
    fn text(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// The length and the size of its prefix.
    #[inline]
    fn len_and_prefix(&self) -> (usize, usize) {
        // SAFETY: the text starts with a complete LEB128 prefix written by `new`.
        let first = unsafe { *self.text() };
        if first < 0x80 {
            return (usize::from(first), 1);
        }
        self.long_len()
    }

    #[cold]
    fn long_len(&self) -> (usize, usize) {
        let (mut n, mut shift, mut i) = (0usize, 0, 0);
        loop {
            // SAFETY: within the prefix written by `new`, which ends with a byte < 0x80.
            let b = unsafe { *self.text().add(i) };
            n |= usize::from(b & 0x7f) << shift;
            i += 1;
            if b < 0x80 {
                return (n, i);
            }
            shift += 7;
        }
    }

    /// The key.
    #[inline]
    pub(crate) fn as_str(&self) -> &str {
        let (len, p) = self.len_and_prefix();
        // SAFETY: `new` copied `len` bytes of a `str` after the `p`-byte prefix; they are
        // never written again and live as long as `self`.
        unsafe {
            let bytes = core::slice::from_raw_parts(self.text().add(p), len);
            core::str::from_utf8_unchecked(bytes)
        }
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        // The only share (the common case): nobody else can make one, so no write is needed.
        // Otherwise as `Arc`'s drop: the last owner frees, after every other owner's reads.
        if self.count().load(Ordering::Acquire) != 1
            && self.count().fetch_sub(1, Ordering::Release) != 1
        {
            return;
        }
        fence(Ordering::Acquire);
        let (len, p) = self.len_and_prefix();
        // SAFETY: allocated by `new` with this very layout.
        unsafe { dealloc(self.ptr.as_ptr(), Self::layout_of(p, len)) }
    }
}

impl core::ops::Deref for Key {
    type Target = str;

    #[inline]
    fn deref(&self) -> &str {
        self.as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::String;

    #[test]
    fn keys_of_every_prefix_size_read_back() {
        for len in [0, 1, 12, 127, 128, 129, 300, 16_383, 16_384, 70_000] {
            let s: String = (0..len)
                .map(|i| char::from(b'a' + (i % 26) as u8))
                .collect();
            let k = Key::new(&s);
            assert_eq!(k.as_str(), s);
            assert_eq!(&*k, s.as_str());
        }
        assert_eq!(Key::new("clé:é").as_str(), "clé:é");
        let k = Key::new("users:1");
        let shared = k.share();
        drop(k);
        assert_eq!(
            shared.as_str(),
            "users:1",
            "a share outlives the key it came from"
        );
        assert_eq!(core::mem::size_of::<Option<Key>>(), 8);
    }
}
