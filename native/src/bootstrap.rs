//! The verdict's bootstrap interval of a policy's total saving (`corpus/verdict.py`'s
//! `_interval`, whose numpy code is the reference): the same draws from the same generator,
//! summed in the same order, so the same interval to the last bit, without importing numpy.
//!
//! numpy's `default_rng(0)` is PCG64 (XSL-RR 128/64) seeded by `SeedSequence(0)`; its
//! `integers(0, n)` draws 32-bit words (two from each 64-bit output, the low half first, the
//! other kept for the next draw) and bounds them by Lemire's method; `sum(axis=1)` of a row adds
//! it pairwise from zero; `percentile` interpolates linearly from whichever end is nearer.

/// PCG64's multiplier (`PCG_DEFAULT_MULTIPLIER_128`).
const MULTIPLIER: u128 = 0x2360_ED05_1FC6_5DA4_4385_DF64_9FCC_F645;
/// The state and increment `SeedSequence(0)` gives PCG64 (`np.random.PCG64(0).state`).
const SEED0_STATE: u128 = 0x1aa1_b534_5996_452d_0958_5eb7_a695_61e3;
const SEED0_INC: u128 = 0x418d_dadb_3af7_1a82_5881_33bc_4478_73a9;

/// numpy's PCG64 bit generator, with its kept half of a 64-bit output.
pub struct Pcg64 {
    state: u128,
    inc: u128,
    half: Option<u32>,
}

impl Pcg64 {
    /// `np.random.default_rng(0)`'s generator.
    pub fn seeded_zero() -> Self {
        Pcg64 {
            state: SEED0_STATE,
            inc: SEED0_INC,
            half: None,
        }
    }

    /// The next 64-bit output: the state stepped, then XSL-RR of it.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_mul(MULTIPLIER).wrapping_add(self.inc);
        let folded = ((self.state >> 64) as u64) ^ (self.state as u64);
        folded.rotate_right((self.state >> 122) as u32)
    }

    /// The next 32-bit word: the low half of a new output, or the high half kept from the last.
    pub fn next_u32(&mut self) -> u32 {
        if let Some(high) = self.half.take() {
            return high;
        }
        let next = self.next_u64();
        self.half = Some((next >> 32) as u32);
        next as u32
    }

    /// `integers(0, top + 1)` for `top` below `u32::MAX` (Lemire's bounded draw with rejection).
    pub fn at_most(&mut self, top: u32) -> u32 {
        debug_assert!(top < u32::MAX);
        let excl = u64::from(top) + 1;
        let mut m = u64::from(self.next_u32()) * excl;
        let mut leftover = m & 0xFFFF_FFFF;
        if leftover < excl {
            let threshold = (u64::from(u32::MAX) - u64::from(top)) % excl;
            while leftover < threshold {
                m = u64::from(self.next_u32()) * excl;
                leftover = m & 0xFFFF_FFFF;
            }
        }
        (m >> 32) as u32
    }
}

/// numpy's sum of a row of float64s (`DOUBLE_pairwise_sum`): eight running sums a block of up
/// to 128, halves above that.
pub fn pairwise_sum(a: &[f64]) -> f64 {
    let n = a.len();
    if n < 8 {
        return a.iter().fold(0.0, |sum, x| sum + x);
    }
    if n <= 128 {
        let mut r = [a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]];
        let whole = n - n % 8;
        for chunk in a[8..whole].chunks_exact(8) {
            for (sum, x) in r.iter_mut().zip(chunk) {
                *sum += x;
            }
        }
        let mut res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for x in &a[whole..] {
            res += x;
        }
        return res;
    }
    let mut half = n / 2;
    half -= half % 8;
    pairwise_sum(&a[..half]) + pairwise_sum(&a[half..])
}

/// numpy's `percentile(sorted, q)` by its default (linear) method, of values sorted ascending.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    let last = sorted.len() - 1;
    let at = last as f64 * (q / 100.0);
    let below = at.floor();
    let gamma = at - below;
    let i = (below.max(0.0) as usize).min(last);
    let (a, b) = (sorted[i], sorted[(i + 1).min(last)]);
    let diff = b - a;
    if gamma >= 0.5 {
        b - diff * (1.0 - gamma)
    } else {
        a + diff * gamma
    }
}

/// The 2.5th and 97.5th percentiles of the total saving (`1 - cost / raw` of the resampled
/// transcripts) over `resamples` resamples of the transcripts with replacement (the reference
/// draws them a block of rows at a time, to bound its memory: one stream of draws all the same).
/// None where the reference would not draw this way (fewer than two transcripts, more than 2^32)
/// or a cost is not finite.
pub fn interval(cost: &[f64], raw: &[f64], resamples: usize) -> Option<(f64, f64)> {
    let n = cost.len();
    if n < 2
        || raw.len() != n
        || resamples == 0
        || u32::try_from(n).is_err()
        || !cost.iter().chain(raw).all(|x| x.is_finite())
    {
        return None;
    }
    let top = (n - 1) as u32;
    let mut rng = Pcg64::seeded_zero();
    let (mut picked_cost, mut picked_raw) = (vec![0.0; n], vec![0.0; n]);
    let mut savings = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        for k in 0..n {
            let i = rng.at_most(top) as usize;
            picked_cost[k] = cost[i];
            picked_raw[k] = raw[i];
        }
        let raws = 0.0 + pairwise_sum(&picked_raw);
        let costs = 0.0 + pairwise_sum(&picked_cost);
        savings.push(if raws > 0.0 { 1.0 - costs / raws } else { 0.0 });
    }
    savings.sort_by(f64::total_cmp);
    Some((percentile(&savings, 2.5), percentile(&savings, 97.5)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generator_gives_numpys_first_outputs() {
        // (np.random.PCG64(0).random_raw(3))
        let mut g = Pcg64::seeded_zero();
        assert_eq!(
            [g.next_u64(), g.next_u64(), g.next_u64()],
            [0xa30febcfd9c2825f, 0x4510bdf882d9d721, 0x0a7d3da94ecde8b8]
        );
    }

    #[test]
    fn a_32_bit_word_is_the_low_half_then_the_kept_high_half() {
        let mut g = Pcg64::seeded_zero();
        assert_eq!([g.next_u32(), g.next_u32()], [0xd9c2825f, 0xa30febcf]);
        assert_eq!(g.next_u32(), 0x82d9d721);
    }

    #[test]
    fn a_bounded_draw_stays_in_its_range() {
        let mut g = Pcg64::seeded_zero();
        for top in [0u32, 1, 2, 199, 1_000_000, u32::MAX - 1] {
            for _ in 0..200 {
                assert!(g.at_most(top) <= top);
            }
        }
    }

    #[test]
    fn the_pairwise_sum_adds_short_rows_in_order_and_long_ones_by_blocks() {
        assert_eq!(pairwise_sum(&[]), 0.0);
        assert_eq!(pairwise_sum(&[1.0, 2.0, 3.0]), 6.0);
        let ones = vec![1.0; 1000];
        assert_eq!(pairwise_sum(&ones), 1000.0);
        // (1e16 + 1 + 1 ... in order loses every 1; eight running sums keep 14 of the 15: numpy's
        // np.array(row).sum() - 1e16)
        let mut row = vec![1.0; 16];
        row[0] = 1e16;
        assert_eq!(pairwise_sum(&row), 1e16 + 14.0);
    }

    #[test]
    fn the_percentile_interpolates_from_the_nearer_end() {
        let v: Vec<f64> = (0..1000).map(f64::from).collect();
        assert!((percentile(&v, 2.5) - 24.975).abs() < 1e-9);
        assert!((percentile(&v, 97.5) - 974.025).abs() < 1e-9);
        assert_eq!(percentile(&[5.0], 50.0), 5.0);
        // (numpy's np.percentile of this at 2.5, from the upper end: from the lower one it is
        // -0.016569328946801534, a bit off)
        let (a, b) = (-0.023682002889528375, -0.016386952691859833);
        let mut v = vec![a; 25];
        v.extend(vec![b; 975]);
        v[0] = a - 1.0;
        assert_eq!(percentile(&v, 2.5), -0.016569328946801538);
    }

    #[test]
    fn no_interval_where_the_reference_would_not_draw_so() {
        assert_eq!(interval(&[1.0], &[2.0], 1000), None);
        assert_eq!(interval(&[1.0, f64::NAN], &[2.0, 2.0], 1000), None);
        assert_eq!(interval(&[1.0, 2.0], &[2.0], 1000), None);
        let (low, high) = interval(&[1.0, 2.0], &[2.0, 4.0], 1000).unwrap();
        assert!((low - 0.5).abs() < 1e-12 && (high - 0.5).abs() < 1e-12); // (every resample saves half)
    }
}
