//! `memcmp` and `bcmp` for the guest, eight bytes at a step.
//!
//! `wasm32-unknown-unknown` has no libc: every string or key comparison (`==`, `Ord`, a
//! `BTreeMap` lookup) ends in `compiler_builtins`' `memcmp`, a loop of one byte per step, and
//! inside wasm each step also pays an epoch check at the loop head. Its definitions are weak,
//! so these strong ones replace them at link time. What it saves is measured in
//! docs/performance.md ("The guest's `memcmp`").
//!
//! The body reads raw pointers rather than slices: a loop over slices that exits early is what
//! LLVM may recognise and turn back into a `memcmp` call, which here would call itself. The
//! compiled body makes no call at all (checked when this was written: the `bcmp` of a
//! non-stripped guest build), and a `memcmp` that recursed would overflow the stack on the
//! first string compared, failing every test that runs the component.

/// The order of the `n` bytes at `a` and at `b`: negative, zero or positive as the first byte
/// that differs is smaller in `a`, there is none, or it is larger (C's `memcmp`).
///
/// # Safety
/// `a` and `b` must each be valid for reads of `n` bytes (any pointer when `n` is 0).
// Natively only the tests call it: the symbols are the guest's.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub unsafe fn compare(a: *const u8, b: *const u8, n: usize) -> i32 {
    let mut i = 0;
    // Big-endian words order as their bytes do, so the first differing word decides.
    while n - i >= 8 {
        // SAFETY: `i + 8 <= n`, inside both buffers; unaligned reads are allowed.
        let (x, y) = unsafe {
            (
                u64::from_be(a.add(i).cast::<u64>().read_unaligned()),
                u64::from_be(b.add(i).cast::<u64>().read_unaligned()),
            )
        };
        if x != y {
            return if x < y { -1 } else { 1 };
        }
        i += 8;
    }
    while i < n {
        // SAFETY: `i < n`, inside both buffers.
        let (x, y) = unsafe { (a.add(i).read(), b.add(i).read()) };
        if x != y {
            return i32::from(x) - i32::from(y);
        }
        i += 1;
    }
    0
}

#[cfg(target_arch = "wasm32")]
mod symbols {
    /// C's `memcmp`, in place of `compiler_builtins`' byte loop.
    ///
    /// # Safety
    /// As [`super::compare`].
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
        // SAFETY: the caller's contract is `compare`'s.
        unsafe { super::compare(a, b, n) }
    }

    /// C's `bcmp` (zero when equal): LLVM calls it for an equality test of bytes.
    ///
    /// # Safety
    /// As [`super::compare`].
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
        // SAFETY: the caller's contract is `compare`'s.
        unsafe { super::compare(a, b, n) }
    }
}

#[cfg(test)]
mod tests {
    use super::compare;
    use proptest::prelude::*;
    use std::cmp::Ordering;

    fn order(a: &[u8], b: &[u8]) -> Ordering {
        assert_eq!(a.len(), b.len());
        // SAFETY: both slices hold `a.len()` bytes.
        unsafe { compare(a.as_ptr(), b.as_ptr(), a.len()) }.cmp(&0)
    }

    #[test]
    fn empty_is_equal_whatever_the_pointers() {
        assert_eq!(unsafe { compare(std::ptr::null(), std::ptr::null(), 0) }, 0);
    }

    #[test]
    fn the_first_differing_byte_decides_in_any_word_and_the_tail() {
        for len in 1..40 {
            for at in 0..len {
                let a = vec![0x80u8; len];
                let mut b = a.clone();
                b[at] = 0x7f;
                assert_eq!(order(&a, &b), Ordering::Greater, "len {len}, at {at}");
                assert_eq!(order(&b, &a), Ordering::Less, "len {len}, at {at}");
                // A later difference the other way does not outweigh the first.
                if at + 1 < len {
                    b[len - 1] = 0xff;
                    assert_eq!(order(&a, &b), Ordering::Greater, "len {len}, at {at}");
                }
            }
        }
    }

    proptest! {
        #[test]
        fn orders_as_slices_do(
            a in proptest::collection::vec(any::<u8>(), 0..80),
            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..3),
        ) {
            let mut b = a.clone();
            for (at, byte) in flips {
                if !b.is_empty() {
                    let at = at % b.len();
                    b[at] = byte;
                }
            }
            prop_assert_eq!(order(&a, &b), a.cmp(&b));
            prop_assert_eq!(order(&b, &a), b.cmp(&a));
        }
    }
}
