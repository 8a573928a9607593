//! A float's text as Python's `repr` and orjson both write it, where they write it alike: the
//! replay's JSON and calls.csv (`records.rs`) written without asking Python for each cost.

/// A positive float's text as both Python's `repr` and orjson write it, where both write it in
/// decimals ([1e-4, 1e16)) and `0.0`; None for any other (asked of Python). `ryu` gives the
/// shortest digits that read back as the float, a tie rounded to even as Python's does (Rust's own
/// formatting rounds a tie up: 70368744177664.625 is `...664.63` to it, `...664.62` to Python).
pub fn float_text(f: f64, buffer: &mut ryu::Buffer) -> Option<&str> {
    if f == 0.0 && f.is_sign_positive() {
        return Some("0.0");
    }
    if !(1e-4..1e16).contains(&f) {
        return None;
    }
    let text = buffer.format_finite(f);
    (!text.contains('e')).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_in_decimals_are_written_as_python_writes_them() {
        let mut b = ryu::Buffer::new();
        assert_eq!(float_text(0.0, &mut b), Some("0.0"));
        assert_eq!(float_text(-0.0, &mut b), None);
        assert_eq!(float_text(1.0, &mut b), Some("1.0"));
        assert_eq!(float_text(0.0001, &mut b), Some("0.0001"));
        assert_eq!(float_text(0.00009, &mut b), None);
        assert_eq!(float_text(0.012345, &mut b), Some("0.012345"));
        assert_eq!(float_text(123456.0, &mut b), Some("123456.0"));
        // a tie rounded to even, as Python's repr: not Rust's Display (2^46 + 0.625 is exact)
        assert_eq!(
            float_text(2f64.powi(46) + 0.625, &mut b),
            Some("70368744177664.62")
        );
        assert_eq!(float_text(1e16, &mut b), None);
        assert_eq!(float_text(f64::NAN, &mut b), None);
        assert_eq!(float_text(-1.0, &mut b), None);
    }
}
