//! A table written as CSV the way Python's `csv.writer(out, lineterminator="\n")` writes it
//! (`reports/text.py`'s `csv_bytes`, whose csv module is the reference): fields joined by commas, a
//! field quoted (its quotes doubled) where it holds a comma, a quote or a newline, a row that is a
//! single empty field written `""`, each row ended by a newline.

// (the sized placeholder's mark, `messages.SIZED_MARK`: a noncharacter no report shows)
use crate::facts::MARK;

/// Appends `field` to the row being written in `out` (`first`: the row's first field).
pub fn push_field(out: &mut Vec<u8>, field: &str, first: bool) {
    if !first {
        out.push(b',');
    }
    let b = field.as_bytes();
    if memchr::memchr3(b',', b'"', b'\n', b).is_none() {
        out.extend_from_slice(b);
        return;
    }
    out.push(b'"');
    for part in field.split('"').enumerate() {
        if part.0 > 0 {
            out.extend_from_slice(b"\"\"");
        }
        out.extend_from_slice(part.1.as_bytes());
    }
    out.push(b'"');
}

/// Ends a row of `fields` fields in `out`, started at `start` (a single empty field is quoted, as
/// the csv module tells it from an empty row).
pub fn end_row(out: &mut Vec<u8>, start: usize, fields: usize) {
    if fields == 1 && out.len() == start {
        out.extend_from_slice(b"\"\"");
    }
    out.push(b'\n');
}

/// Whether `c` acts on a terminal (`reports/text.py`'s `_CONTROL`): a C0 control, DEL, a C1
/// control, a bidirectional embedding, override or isolate.
fn acts(c: char) -> bool {
    matches!(c, '\0'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `reports/text.py`'s `visible` (the reference): `text` on one line, each character that acts
/// shown as its escape (`\x1b`, `\u202e`), the sized placeholder's mark left out.
pub fn visible(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(|c| acts(c) || c == MARK) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c == MARK {
            continue;
        }
        if !acts(c) {
            out.push(c);
        } else if (c as u32) < 0x100 {
            out.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            out.push_str(&format!("\\u{:04x}", c as u32));
        }
    }
    std::borrow::Cow::Owned(out)
}

/// `reports/text.py`'s `csv_cell` of a text (the reference): `visible`, after a `'` where the text
/// starts as a spreadsheet formula does (`= + - @`, a tab or a CR).
pub fn csv_cell(text: &str) -> std::borrow::Cow<'_, str> {
    if text.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        return std::borrow::Cow::Owned(format!("'{}", visible(text)));
    }
    visible(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_is_made_visible_and_a_formula_is_not_run() {
        assert_eq!(visible("plain"), "plain");
        assert_eq!(
            visible("a\u{1b}[2Jb\u{7f}\u{85}\u{202e}\u{2069}\u{fdd0}[X len=3]"),
            "a\\x1b[2Jb\\x7f\\x85\\u202e\\u2069[X len=3]"
        );
        assert_eq!(visible("tab\there\nnew"), "tab\\x09here\\x0anew");
        assert_eq!(csv_cell("=1+1"), "'=1+1");
        assert_eq!(csv_cell("\tx"), "'\\x09x");
        assert_eq!(csv_cell("-"), "'-");
        assert_eq!(csv_cell("a=b"), "a=b");
        assert_eq!(csv_cell(""), "");
    }

    fn row(fields: &[&str]) -> String {
        let mut out = Vec::new();
        for (k, f) in fields.iter().enumerate() {
            push_field(&mut out, f, k == 0);
        }
        end_row(&mut out, 0, fields.len());
        String::from_utf8(out).expect("UTF-8")
    }

    #[test]
    fn a_field_is_quoted_only_where_the_csv_module_quotes_it() {
        // (what csv.writer(lineterminator="\n") writes for these rows, Python 3.11)
        assert_eq!(
            row(&["a\rb", "c\nd", "e,f", "g\"h", " i ", "", "x\ty", "\u{2028}"]),
            "a\rb,\"c\nd\",\"e,f\",\"g\"\"h\", i ,,x\ty,\u{2028}\n"
        );
        assert_eq!(row(&[""]), "\"\"\n");
        assert_eq!(row(&[]), "\n");
        assert_eq!(row(&["\"\"", "é"]), "\"\"\"\"\"\",é\n");
    }
}
