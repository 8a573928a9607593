//! A table written as CSV the way Python's `csv.writer(out, lineterminator="\n")` writes it
//! (`reports/text.py`'s `csv_bytes`, whose csv module is the reference): fields joined by commas, a
//! field quoted (its quotes doubled) where it holds a comma, a quote or a newline, a row that is a
//! single empty field written `""`, each row ended by a newline.

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

#[cfg(test)]
mod tests {
    use super::*;

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
