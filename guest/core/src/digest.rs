//! The SHA-256 digests the gate records and binds consent to: `hex(SHA-256(JCS(value)))`
//! over the canonical text of [`crate::canonical`], lowercase hex.

use crate::canonical;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

/// A SHA-256 faster than this build's own, where the embedding has one (the component's host,
/// through its `digest` import: WebAssembly has no SHA instructions, and a form round hashes
/// about 5 KB of text). It answers the digest as lowercase hex, or `None`: it has none.
pub type Sha256Accelerator = fn(&str) -> Option<String>;

static ACCELERATOR: OnceLock<Sha256Accelerator> = OnceLock::new();

/// Set when the accelerator answered `None`, or something that is not 64 lowercase hex
/// digits, once: it is not asked again (a host without one pays one call, not one per digest).
static DECLINED: AtomicBool = AtomicBool::new(false);

/// Texts below this many bytes are hashed here: one or two blocks cost less than a call out.
const ACCELERATE_FROM: usize = 128;

/// Hash text with `f` from now on (texts of `ACCELERATE_FROM` bytes or more). Set once:
/// false when one was set already (the first stays).
pub fn accelerate(f: Sha256Accelerator) -> bool {
    ACCELERATOR.set(f).is_ok()
}

/// Lowercase hex SHA-256 of `bytes`, computed here.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(Sha256::digest(bytes).into())
}

/// Lowercase hex SHA-256 of `text`'s UTF-8 bytes: the same digest as [`sha256_hex`], computed
/// by the accelerator when one is set and the text is long enough to be worth the call.
pub fn text_sha256_hex(text: &str) -> String {
    if text.len() >= ACCELERATE_FROM
        && !DECLINED.load(Ordering::Relaxed)
        && let Some(f) = ACCELERATOR.get()
    {
        match f(text) {
            Some(digest) if is_sha256_hex(&digest) => return digest,
            _ => DECLINED.store(true, Ordering::Relaxed),
        }
    }
    sha256_hex(text.as_bytes())
}

/// 64 lowercase hex digits: the shape of every digest the gate records.
pub fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn hex(digest: [u8; 32]) -> String {
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
    text_sha256_hex(&canonical::to_canonical(value))
}

/// `hex(SHA-256(JCS(s)))` for a string, without building a `Value`.
pub fn digest_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    canonical::write_string(&mut out, s);
    text_sha256_hex(&out)
}

/// Byte equality compared eight bytes at a time (`compiler_builtins`' `memcmp` is a byte loop,
/// which the component replaces with its own, but the core does not rely on that; the
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
