//! A block of a JSONL file's lines split as `transcripts/reader.py`'s `iter_raw_lines` splits
//! them (its reference): on `\n` only, the break kept with its line; a line of ASCII whitespace
//! only is blank (Python's `bytes.isspace`).

/// Where the line at `start` of `block` ends (after its `\n`): `None` where no line break
/// follows and `last` does not say the block's end is the file's (its line goes on in the next).
pub fn line_end(block: &[u8], start: usize, last: bool) -> Option<usize> {
    let rest = block.get(start..)?;
    match memchr::memchr(b'\n', rest) {
        Some(k) => Some(start + k + 1),
        None if last && !rest.is_empty() => Some(block.len()),
        None => None,
    }
}

/// Whether a line is blank: every byte ASCII whitespace (`bytes.isspace`: space, `\t`, `\n`,
/// `\r`, `\x0b`, `\x0c`), and at least one.
pub fn blank(line: &[u8]) -> bool {
    !line.is_empty()
        && line
            .iter()
            .all(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c))
}

/// How many `{` and `[` a line holds (`reader.parse_object`'s test before it measures a value's
/// nesting, `raw.count(b"{") + raw.count(b"[")` its reference): counted by memchr, not a byte at
/// a time.
pub fn brackets(line: &[u8]) -> usize {
    memchr::memchr2_iter(b'{', b'[', line).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brackets_are_counted_as_bytes_count_counts_them() {
        let mut seed = 5u64;
        for n in 0..2000usize {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // (lines of every length a SIMD pass splits differently, of brackets and others)
            let line: Vec<u8> = (0..n % 300)
                .map(|k| b"{[]}\"x\n\xc3"[((seed >> (k % 50)) as usize + k) % 8])
                .collect();
            let want = line.iter().filter(|&&b| b == b'{').count()
                + line.iter().filter(|&&b| b == b'[').count();
            assert_eq!(brackets(&line), want, "{line:?}");
        }
    }

    fn lines(block: &[u8], last: bool) -> Vec<&[u8]> {
        let mut out = Vec::new();
        let mut i = 0;
        while let Some(end) = line_end(block, i, last) {
            out.push(&block[i..end]);
            i = end;
        }
        out
    }

    #[test]
    fn a_block_splits_on_line_breaks_only_each_kept_with_its_line() {
        let block = b"{\"a\":1}\r\n\n  \x0b\n{\"b\":\"\xe2\x80\xa8\"}\rx\n{\"c\"";
        assert_eq!(
            lines(block, false),
            [
                &b"{\"a\":1}\r\n"[..],
                b"\n",
                b"  \x0b\n",
                b"{\"b\":\"\xe2\x80\xa8\"}\rx\n"
            ]
        );
        // the last piece is a line only where the block ends the file
        assert_eq!(lines(block, true).last(), Some(&&b"{\"c\""[..]));
        assert_eq!(line_end(b"", 0, true), None);
        assert_eq!(line_end(b"ab", 5, true), None);
    }

    #[test]
    fn a_blank_line_is_ascii_whitespace_only() {
        for line in [&b"\n"[..], b" \t\r\n", b"\x0b\x0c", b"   "] {
            assert!(blank(line), "{line:?}");
        }
        for line in [&b""[..], b" x\n", b"\xc2\xa0\n", b"\x1c\n", b"\x00"] {
            assert!(!blank(line), "{line:?}");
        }
    }
}
