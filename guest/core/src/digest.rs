//! The SHA-256 digests the gate records and binds consent to: `hex(SHA-256(JCS(value)))`
//! over the canonical text of [`crate::canonical`], lowercase hex.

use crate::canonical;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut hex = [0u8; 64];
    for (pair, byte) in hex.chunks_exact_mut(2).zip(digest) {
        // Nibbles are below 16: always in the table.
        let hi = canonical::HEX_DIGITS
            .get(usize::from(byte >> 4))
            .copied()
            .unwrap_or(b'0');
        let lo = canonical::HEX_DIGITS
            .get(usize::from(byte & 0x0f))
            .copied()
            .unwrap_or(b'0');
        pair.copy_from_slice(&[hi, lo]);
    }
    // Only ASCII hex digits were written.
    String::from_utf8(hex.to_vec()).unwrap_or_default()
}

/// `hex(SHA-256(JCS(value)))`.
pub fn digest(value: &Value) -> String {
    sha256_hex(canonical::to_canonical(value).as_bytes())
}

/// `hex(SHA-256(JCS(s)))` for a string, without building a `Value`.
pub fn digest_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    canonical::write_string(&mut out, s);
    sha256_hex(out.as_bytes())
}

/// Byte equality compared eight bytes at a time (inside wasm `memcmp` is a byte loop; the
/// read-back of every audit line compares about a kilobyte). The differences are OR-ed
/// together rather than compared word by word: an early-exit loop is what LLVM turns back
/// into a `memcmp` call.
pub fn bytes_equal(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (wa, wb) = (a.chunks_exact(8), b.chunks_exact(8));
    let mut diff = wa
        .remainder()
        .iter()
        .zip(wb.remainder())
        .fold(0u64, |acc, (x, y)| acc | u64::from(x ^ y));
    for (x, y) in wa.zip(wb) {
        // Chunks are exactly eight bytes; the fallbacks differ, so they could never agree.
        let x: [u8; 8] = x.try_into().unwrap_or([0; 8]);
        let y: [u8; 8] = y.try_into().unwrap_or([1; 8]);
        diff |= u64::from_ne_bytes(x) ^ u64::from_ne_bytes(y);
    }
    diff == 0
}
