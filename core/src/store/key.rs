//! A stored key as one thin pointer: its length is written at the head of its own
//! allocation (LEB128: one byte below 128 bytes), not beside the pointer, so a node carries
//! 8 bytes of key instead of a `Box<str>`'s 16.

use alloc::alloc::{Layout, alloc, dealloc, handle_alloc_error};
use core::ptr::NonNull;

/// An owned, immutable key: a length prefix then the key's UTF-8 bytes, in one allocation.
pub(crate) struct Key {
    ptr: NonNull<u8>,
}

// SAFETY: `Key` owns its allocation and never mutates it after `new`, like a `Box<str>`.
unsafe impl Send for Key {}
// SAFETY: as above; shared access only reads.
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
        // SAFETY: the layout's size is at least 1 (the prefix).
        let raw = unsafe { alloc(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            handle_alloc_error(layout)
        };
        // SAFETY: the allocation holds `p + key.len()` bytes; the sources do not overlap it.
        unsafe {
            core::ptr::copy_nonoverlapping(prefix.as_ptr(), ptr.as_ptr(), p);
            core::ptr::copy_nonoverlapping(key.as_ptr(), ptr.as_ptr().add(p), key.len());
        }
        Self { ptr }
    }

    fn layout_of(prefix: usize, len: usize) -> Layout {
        // A `str` of `len` bytes exists, so `prefix + len` (prefix <= 10) cannot overflow
        // `isize::MAX` by more than the caller's string already does; checked anyway.
        Layout::from_size_align(prefix + len, 1).expect("herdless: key too long to store")
    }

    /// The length and the size of its prefix.
    #[inline]
    fn len_and_prefix(&self) -> (usize, usize) {
        // SAFETY: the allocation starts with a complete LEB128 prefix written by `new`.
        let first = unsafe { *self.ptr.as_ptr() };
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
            let b = unsafe { *self.ptr.as_ptr().add(i) };
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
            let bytes = core::slice::from_raw_parts(self.ptr.as_ptr().add(p), len);
            core::str::from_utf8_unchecked(bytes)
        }
    }
}

impl Drop for Key {
    fn drop(&mut self) {
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
        assert_eq!(core::mem::size_of::<Option<Key>>(), 8);
    }
}
