//! Canonical numbers: one text per value, never one text for two values.

use std::fmt::Write as _;

/// Append an integer in the canonical number form ([`write_number`]): its exact decimal
/// digits (JCS's own text for every integer within ±2^53).
pub(crate) fn write_i64(out: &mut String, i: i64) {
    if i < 0 {
        out.push('-');
    }
    write_u64_digits(out, i.unsigned_abs());
}

/// Append an unsigned integer in the canonical number form: its exact decimal digits.
pub(crate) fn write_u64(out: &mut String, u: u64) {
    write_u64_digits(out, u);
}

/// An integer's exact decimal text (not JCS's: a stored record is read back, not hashed, and
/// must keep every digit).
pub(crate) fn write_i64_exact(out: &mut String, i: i64) {
    if i < 0 {
        out.push('-');
    }
    write_u64_digits(out, i.unsigned_abs());
}

/// Decimal digits of `u`, without the formatting machinery (integers are written many times
/// a round: ids, sequence numbers, times).
pub(crate) fn write_u64_digits(out: &mut String, mut u: u64) {
    let mut buf = [0u8; 20];
    let mut at = buf.len();
    loop {
        at = at.saturating_sub(1);
        if let Some(slot) = buf.get_mut(at) {
            // `u % 10` is below 10: the cast cannot truncate.
            *slot = b'0'.saturating_add((u % 10) as u8);
        }
        u /= 10;
        if u == 0 || at == 0 {
            break;
        }
    }
    out.push_str(std::str::from_utf8(buf.get(at..).unwrap_or_default()).unwrap_or_default());
}

/// Append the canonical text of a number: the layout of ECMAScript's
/// `Number.prototype.toString` applied to the number's exact decimal value.
///
/// JCS writes the shortest digits of the nearest double, so `9007199254740993` and
/// `9007199254740992` (or two long fractions) would share one text and one digest, and a
/// retry would carry a value other than the one registered or validated. The text here is
/// JCS's whenever JCS's text denotes the source's exact value (every number a JavaScript
/// host writes, and every integer within ±2^53), and otherwise the exact value in the same
/// layout: one value, one text (`1.0`, `1` and `10e-1` write `1`; `-0` is the value 0 and
/// writes `0`), and two values never share one.
pub(crate) fn write_number(out: &mut String, n: &serde_json::Number) {
    let text = n.as_str();
    if is_plain_integer(text) {
        out.push_str(text);
        return;
    }
    match Decimal::parse(text) {
        Some(d) => d.write(out),
        // Only a number the strict parser refuses (an exponent beyond ±10^15) has no
        // decimal form here: its source text is still exact JSON.
        None => out.push_str(text),
    }
}

/// Is `text` an integer JCS writes as it is: no leading zero, no `-0`, at most 21 digits?
fn is_plain_integer(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    let bytes = digits.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 21
        && bytes.iter().all(u8::is_ascii_digit)
        && (bytes.first() != Some(&b'0') || (bytes.len() == 1 && digits.len() == text.len()))
}

/// The most digits of a number's exponent (after leading zeros) that the gate reads: beyond,
/// the exponent alone would overflow the arithmetic, and no real number is written so.
pub(crate) const MAX_EXPONENT_DIGITS: usize = 15;

/// Does the exponent of JSON number text (if any) have at most [`MAX_EXPONENT_DIGITS`]
/// digits after its leading zeros? The one bound [`Decimal::parse`] puts on a JSON number,
/// checked without building the decimal.
pub(crate) fn exponent_fits(text: &str) -> bool {
    let Some(at) = text.find(['e', 'E']) else {
        return true;
    };
    let exp = text.get(at.saturating_add(1)..).unwrap_or("");
    let digits = exp.trim_start_matches(['+', '-']).trim_start_matches('0');
    digits.len() <= MAX_EXPONENT_DIGITS
}

/// A JSON number's exact decimal value, normalised: `±0.d1…dk × 10^n` with `d1` and `dk`
/// nonzero; zero has no digits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decimal {
    negative: bool,
    digits: String,
    n: i64,
}

impl Decimal {
    /// The value of JSON number text; none when it is not a JSON number or its exponent has
    /// more than [`MAX_EXPONENT_DIGITS`] digits.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let (negative, rest) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (mantissa, exp) = match rest.find(['e', 'E']) {
            Some(at) => (rest.get(..at)?, Some(rest.get(at.saturating_add(1)..)?)),
            None => (rest, None),
        };
        let (int, frac) = match mantissa.split_once('.') {
            Some((i, f)) => (i, Some(f)),
            None => (mantissa, None),
        };
        let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !all_digits(int) || (int.len() > 1 && int.starts_with('0')) {
            return None;
        }
        if frac.is_some_and(|f| !all_digits(f)) {
            return None;
        }
        let exp: i64 = match exp {
            None => 0,
            Some(e) => {
                let (minus, digits) = match e.as_bytes().first() {
                    Some(b'-') => (true, e.get(1..)?),
                    Some(b'+') => (false, e.get(1..)?),
                    _ => (false, e),
                };
                if !all_digits(digits) {
                    return None;
                }
                let digits = digits.trim_start_matches('0');
                if digits.len() > MAX_EXPONENT_DIGITS {
                    return None;
                }
                let v: i64 = if digits.is_empty() {
                    0
                } else {
                    digits.parse().ok()?
                };
                if minus { -v } else { v }
            }
        };
        let frac = frac.unwrap_or("");
        let leading = int
            .bytes()
            .chain(frac.bytes())
            .take_while(|&b| b == b'0')
            .count();
        let mut digits = String::with_capacity(int.len().saturating_add(frac.len()));
        digits.push_str(int);
        digits.push_str(frac);
        let digits = digits.get(leading..).unwrap_or("").trim_end_matches('0');
        if digits.is_empty() {
            return Some(Self {
                negative: false,
                digits: String::new(),
                n: 0,
            });
        }
        let int_len = i64::try_from(int.len()).ok()?;
        let leading = i64::try_from(leading).ok()?;
        Some(Self {
            negative,
            digits: digits.to_owned(),
            n: int_len.checked_add(exp)?.checked_sub(leading)?,
        })
    }

    /// The value of `n`; none for text no JSON parser yields.
    pub(crate) fn of(n: &serde_json::Number) -> Option<Self> {
        Self::parse(n.as_str())
    }

    /// Is the value an integer?
    pub(crate) fn is_integer(&self) -> bool {
        i64::try_from(self.digits.len()).is_ok_and(|k| k <= self.n)
    }

    fn is_zero(&self) -> bool {
        self.digits.is_empty()
    }

    /// The order of the two values, exact.
    pub(crate) fn cmp_value(&self, other: &Self) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        let sign = |d: &Self| match (d.is_zero(), d.negative) {
            (true, _) => 0,
            (false, true) => -1,
            (false, false) => 1,
        };
        match sign(self).cmp(&sign(other)) {
            Ordering::Equal => {}
            unequal => return unequal,
        }
        if self.is_zero() {
            return Ordering::Equal;
        }
        // Normalised digits compare by magnitude first, then as digit strings.
        let magnitude = self
            .n
            .cmp(&other.n)
            .then_with(|| self.digits.as_bytes().cmp(other.digits.as_bytes()));
        if self.negative {
            magnitude.reverse()
        } else {
            magnitude
        }
    }

    /// Append the ECMAScript `Number.prototype.toString` layout of the exact value.
    fn write(&self, out: &mut String) {
        if self.is_zero() {
            out.push('0');
            return;
        }
        if self.negative {
            out.push('-');
        }
        let digits = self.digits.as_str();
        let k = i64::try_from(digits.len()).unwrap_or(i64::MAX);
        let n = self.n;
        if k <= n && n <= 21 {
            out.push_str(digits);
            for _ in 0..(n - k) {
                out.push('0');
            }
        } else if 0 < n && n <= 21 {
            let (int, frac) = digits.split_at(usize::try_from(n).unwrap_or(0).min(digits.len()));
            out.push_str(int);
            out.push('.');
            out.push_str(frac);
        } else if -6 < n && n <= 0 {
            out.push_str("0.");
            for _ in 0..(-n) {
                out.push('0');
            }
            out.push_str(digits);
        } else {
            let (first, rest) = digits.split_at(1.min(digits.len()));
            out.push_str(first);
            if !rest.is_empty() {
                out.push('.');
                out.push_str(rest);
            }
            let e = n.saturating_sub(1);
            let _ = write!(
                out,
                "e{}{}",
                if e >= 0 { "+" } else { "-" },
                e.unsigned_abs()
            );
        }
    }
}
