//! The log of the standard normal's CDF, `log Φ(a)`, as Optuna's TPE sampler computes it
//! (`optuna/samplers/_tpe/_truncnorm.py`'s `_log_ndtr_single`), to the bit: the same branches,
//! the same operations in the same order, and the C library's own `erf`, `erfc`, `log` and `pow`,
//! which are what Python's `math` module and float `**` call. Optuna maps that Python function over
//! arrays with `np.frompyfunc`: a tune of 200 trials asks it about a million times, seconds of the
//! command's own CPU (Optuna issue #5478). `corpus/study.py` has the sampler use this one instead
//! where the native core runs, so a tune asks the same trials on either core.

use std::hint::black_box;

// SAFETY: these are the C library's (glibc's libm, linked by std on every target the core builds
// for) pure functions of one or two `double`s returning a `double`: they take no pointer, touch
// no memory of ours, and are defined for every input (NaN and the infinities included; a domain
// error only sets errno, which nothing here reads). The declarations match their C prototypes.
extern "C" {
    fn erf(x: f64) -> f64;
    fn erfc(x: f64) -> f64;
    fn log(x: f64) -> f64;
    fn pow(x: f64, y: f64) -> f64;
}

fn c_erf(x: f64) -> f64 {
    // SAFETY: see the declarations above.
    unsafe { erf(x) }
}

fn c_erfc(x: f64) -> f64 {
    // SAFETY: see the declarations above.
    unsafe { erfc(x) }
}

fn c_log(x: f64) -> f64 {
    // SAFETY: see the declarations above.
    unsafe { log(x) }
}

/// Python's `a**2`: the C library's `pow` (its exponent hidden from the compiler, which would
/// otherwise turn the call into `a * a`, not always the same double).
fn square(a: f64) -> f64 {
    // SAFETY: see the declarations above.
    unsafe { pow(a, black_box(2.0)) }
}

/// `_ndtr_single`: Φ(a).
fn ndtr(a: f64) -> f64 {
    let x = a / std::f64::consts::SQRT_2; // (Python's `2**0.5`: the same double)
    if x < -1.0 / std::f64::consts::SQRT_2 {
        0.5 * c_erfc(-x)
    } else if x < 1.0 / std::f64::consts::SQRT_2 {
        0.5 + 0.5 * c_erf(x)
    } else {
        1.0 - 0.5 * c_erfc(x)
    }
}

/// `_log_ndtr_single`: log Φ(a), by an asymptotic series below -20.
pub fn log_ndtr(a: f64) -> f64 {
    if a > 6.0 {
        return -ndtr(-a);
    }
    if a > -20.0 {
        return c_log(ndtr(a));
    }
    let log_lhs = -0.5 * square(a) - c_log(-a) - 0.5 * c_log(black_box(2.0 * std::f64::consts::PI));
    let mut last_total = 0.0f64;
    let mut right_hand_side = 1.0f64;
    let mut numerator = 1.0f64;
    let mut denom_factor = 1.0f64;
    let denom_cons = 1.0 / square(a);
    let mut sign = 1.0f64;
    let mut i = 0i64;
    while (last_total - right_hand_side).abs() > f64::EPSILON {
        i += 1;
        last_total = right_hand_side;
        sign = -sign;
        denom_factor *= denom_cons;
        numerator *= (2 * i - 1) as f64;
        right_hand_side += sign * numerator * denom_factor;
    }
    log_lhs + c_log(right_hand_side)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_branches_give_the_values_of_the_normal_cdf() {
        assert_eq!(log_ndtr(f64::INFINITY), 0.0);
        assert!((log_ndtr(0.0) - 0.5f64.ln()).abs() < 1e-15);
        // Φ(-1.96) = 0.024997895148220435; Φ(7) = 1 - 1.279812543885835e-12
        assert!((log_ndtr(-1.96) - 0.024997895148220435f64.ln()).abs() < 1e-13);
        assert!((log_ndtr(7.0) + 1.279812543885835e-12).abs() < 1e-24);
        // the series at -20 and below meets log(erfc) from above: log Φ(-20) = -203.91715537109727
        assert!((log_ndtr(-20.0) + 203.91715537109727).abs() < 1e-9);
        assert!((log_ndtr(-20.000001) - log_ndtr(-19.999999)).abs() < 1e-4);
        assert_eq!(log_ndtr(f64::NEG_INFINITY), f64::NEG_INFINITY);
        assert!(log_ndtr(f64::NAN).is_nan());
    }
}
