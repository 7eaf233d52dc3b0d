//! A coverage-blind mutation loop for stable Rust: the fallback of `ci.sh` where no nightly
//! compiler (and so no `cargo fuzz`) exists, and the replay of saved inputs.
//!
//! Each execution takes a seed, applies one to eight random edits (bit flips, interesting
//! bytes, JSON tokens, deletions, duplications, splices from another seed) and runs the
//! target. The pool never grows (there is no coverage to say what is new), so this finds
//! shallow bugs only; libFuzzer is the real fuzzer. The generator is seeded, so a run is
//! reproducible.

/// A small deterministic generator (SplitMix64).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`0` when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        // Truncation is intended: only the low bits are needed.
        (self.next_u64() % n as u64) as usize
    }
}

/// Bytes that often matter to a JSON parser.
const INTERESTING: &[u8] = b"{}[]\",:\\0-+.eE \n\x00\x7f\xff\xc3\xa9";

/// Tokens spliced in whole: edge values of the JSON grammar and of the protocol's rules.
const TOKENS: &[&str] = &[
    "null",
    "true",
    "false",
    "0",
    "-0",
    "1e308",
    "1e309",
    "-1e-324",
    "9007199254740991",
    "9007199254740993",
    "18446744073709551615",
    "18446744073709551616",
    "-9223372036854775809",
    "0.1",
    "\"\\ud800\"",
    "\"\\udc00\\ud800\"",
    "\"\\u0000\"",
    "\"\u{202e}\"",
    "\"\"",
    "{}",
    "[]",
    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
    "{\"a\":1,\"a\":2}",
    "\"_reserved\":1,",
    "\"id\":",
    "\"method\":",
    "\"params\":",
    "\"version\":1,",
];

/// Applies one to eight random edits to `input`, keeping it at most `max_len` bytes.
pub fn mutate(input: &mut Vec<u8>, pool: &[Vec<u8>], rng: &mut Rng, max_len: usize) {
    let edits = 1 + rng.below(8);
    for _ in 0..edits {
        edit(input, pool, rng);
    }
    input.truncate(max_len);
}

fn edit(input: &mut Vec<u8>, pool: &[Vec<u8>], rng: &mut Rng) {
    let len = input.len();
    let at = rng.below(len + 1);
    match rng.below(8) {
        0 if len > 0 => {
            let i = rng.below(len);
            input[i] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let i = rng.below(len);
            input[i] = INTERESTING[rng.below(INTERESTING.len())];
        }
        2 => {
            let byte = INTERESTING[rng.below(INTERESTING.len())];
            input.insert(at, byte);
        }
        3 if len > 0 => {
            let end = (at + 1 + rng.below(16)).min(len);
            input.drain(at.min(len - 1)..end);
        }
        4 => {
            let token = TOKENS[rng.below(TOKENS.len())].as_bytes();
            input.splice(at..at, token.iter().copied());
        }
        5 if len > 0 => {
            let start = rng.below(len);
            let end = (start + 1 + rng.below(64)).min(len);
            let chunk = input[start..end].to_vec();
            input.splice(at..at, chunk);
        }
        6 => {
            let other = &pool[rng.below(pool.len())];
            if !other.is_empty() {
                let start = rng.below(other.len());
                let end = (start + 1 + rng.below(256)).min(other.len());
                let cut = (at + rng.below(64)).min(len);
                input.splice(at..cut, other[start..end].iter().copied());
            }
        }
        _ if len > 0 => {
            let i = rng.below(len);
            input[i] = u8::try_from(rng.below(256)).unwrap_or(0);
        }
        _ => input.push(u8::try_from(rng.below(256)).unwrap_or(0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutation_stays_within_the_length_limit() {
        let pool = vec![b"{\"a\":1}".to_vec(), Vec::new()];
        let mut rng = Rng::new(7);
        for _ in 0..10_000 {
            let mut input = pool[rng.below(2)].clone();
            mutate(&mut input, &pool, &mut rng, 64);
            assert!(input.len() <= 64);
        }
    }
}
