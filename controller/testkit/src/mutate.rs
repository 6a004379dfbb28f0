//! Seeded mutations of valid inputs, for fuzzing parsers and validators:
//! most bugs hide near valid input (a field one past its limit, a length
//! that lies, a line that vanished), which random bytes rarely reach.
//! Every run is reproducible from its seed.

/// Values at the edges of integer encodings and ranges.
const EDGE_BYTES: [u8; 8] = [0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff, 0x20, 0x2f];
/// Numbers to drop into text: limits, signs, overflow, floats, nonsense.
const EDGE_NUMBERS: [&str; 16] = [
    "0",
    "-1",
    "1",
    "255",
    "256",
    "65535",
    "65536",
    "4294967295",
    "4294967296",
    "18446744073709551616",
    "-9223372036854775809",
    "1e309",
    "NaN",
    "0.5",
    "1_000",
    "0x10",
];
/// Fragments that break YAML structure or identifiers.
const EDGE_TEXT: [&str; 12] = [
    ":", "- ", "{", "}", "[", "]", "\"", "'", "\t", "\u{0}", "\u{202e}", "~",
];

/// A seeded mutator.
pub struct Mutator {
    rng: fastrand::Rng,
}

impl Mutator {
    pub fn new(seed: u64) -> Mutator {
        Mutator {
            rng: fastrand::Rng::with_seed(seed),
        }
    }

    /// A number in `0..n` (for callers choosing among their inputs).
    pub fn below(&mut self, n: usize) -> usize {
        self.rng.usize(..n.max(1))
    }

    /// `input` with 1 to 4 byte-level edits: bit flips, edge values,
    /// inserted or deleted runs, a duplicated run, truncation, or a run
    /// spliced in from `other` (another valid input).
    pub fn bytes(&mut self, input: &[u8], other: &[u8]) -> Vec<u8> {
        let mut b = input.to_vec();
        for _ in 0..self.rng.usize(1..=4) {
            let at = self.rng.usize(..=b.len());
            match self.rng.u8(..8) {
                0 if !b.is_empty() => {
                    let i = self.rng.usize(..b.len());
                    b[i] ^= 1 << self.rng.u8(..8);
                }
                1 if !b.is_empty() => {
                    let i = self.rng.usize(..b.len());
                    b[i] = EDGE_BYTES[self.rng.usize(..EDGE_BYTES.len())];
                }
                2 => {
                    let n = self.rng.usize(1..=8);
                    let run: Vec<u8> = (0..n).map(|_| self.rng.u8(..)).collect();
                    b.splice(at..at, run);
                }
                3 if at < b.len() => {
                    let end = (at + self.rng.usize(1..=8)).min(b.len());
                    b.drain(at..end);
                }
                4 if at < b.len() => {
                    let end = (at + self.rng.usize(1..=16)).min(b.len());
                    let run = b[at..end].to_vec();
                    b.splice(at..at, run);
                }
                5 => b.truncate(at),
                6 if !other.is_empty() => {
                    let from = self.rng.usize(..other.len());
                    let end = (from + self.rng.usize(1..=32)).min(other.len());
                    b.splice(at..at, other[from..end].iter().copied());
                }
                _ => {
                    // A varint at its widest: ten 0xff-ish bytes.
                    let run = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
                    b.splice(at..at, run);
                }
            }
        }
        b
    }

    /// `input` with 1 to 3 text edits at line and token level: a line
    /// deleted, duplicated or swapped, a number replaced by an edge value,
    /// a structural character inserted, indentation changed, or a line
    /// taken from `other`.
    pub fn text(&mut self, input: &str, other: &str) -> String {
        let mut lines: Vec<String> = input.lines().map(str::to_string).collect();
        let others: Vec<&str> = other.lines().collect();
        for _ in 0..self.rng.usize(1..=3) {
            if lines.is_empty() {
                lines.push(String::new());
            }
            let i = self.rng.usize(..lines.len());
            match self.rng.u8(..7) {
                0 => {
                    lines.remove(i);
                }
                1 => {
                    let l = lines[i].clone();
                    lines.insert(i, l);
                }
                2 => {
                    let j = self.rng.usize(..lines.len());
                    lines.swap(i, j);
                }
                3 => lines[i] = replace_number(&lines[i], self.edge_number(), &mut self.rng),
                4 => {
                    let l = &mut lines[i];
                    let at = char_boundary(l, self.rng.usize(..=l.len()));
                    l.insert_str(at, EDGE_TEXT[self.rng.usize(..EDGE_TEXT.len())]);
                }
                5 => {
                    let l = &mut lines[i];
                    if self.rng.bool() {
                        l.insert_str(0, "  ");
                    } else if let Some(rest) = l.strip_prefix("  ") {
                        *l = rest.to_string();
                    }
                }
                _ if !others.is_empty() => {
                    let l = others[self.rng.usize(..others.len())].to_string();
                    lines.insert(i, l);
                }
                _ => {}
            }
        }
        let mut out = lines.join("\n");
        out.push('\n');
        out
    }

    fn edge_number(&mut self) -> &'static str {
        EDGE_NUMBERS[self.rng.usize(..EDGE_NUMBERS.len())]
    }
}

/// `line` with one of its numbers (a run of ASCII digits) replaced.
fn replace_number(line: &str, with: &str, rng: &mut fastrand::Rng) -> String {
    let runs: Vec<(usize, usize)> = {
        let b = line.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < b.len() {
            if b[i].is_ascii_digit() {
                let s = i;
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
                out.push((s, i));
            } else {
                i += 1;
            }
        }
        out
    };
    if runs.is_empty() {
        return format!("{line} {with}");
    }
    let (s, e) = runs[rng.usize(..runs.len())];
    format!("{}{with}{}", &line[..s], &line[e..])
}

fn char_boundary(s: &str, mut at: usize) -> usize {
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_mutations() {
        let (mut a, mut b) = (Mutator::new(7), Mutator::new(7));
        for _ in 0..100 {
            assert_eq!(a.bytes(b"abcdef", b"xyz"), b.bytes(b"abcdef", b"xyz"));
            assert_eq!(
                a.text("a: 1\nb: 2\n", "c: 3"),
                b.text("a: 1\nb: 2\n", "c: 3")
            );
        }
    }

    #[test]
    fn mutations_change_the_input_most_of_the_time() {
        let mut m = Mutator::new(1);
        let changed = (0..1000)
            .filter(|_| m.bytes(b"0123456789abcdef", b"") != b"0123456789abcdef")
            .count();
        assert!(changed > 900, "{changed}");
        let changed = (0..1000)
            .filter(|_| m.text("a: 1\nb: [2, 3]\n", "c: 4") != "a: 1\nb: [2, 3]\n")
            .count();
        assert!(changed > 800, "{changed}");
    }
}
