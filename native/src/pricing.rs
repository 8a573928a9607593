//! A run's calls priced (`engine/cost/pricing.py`'s `price_calls`, the reference): each call's
//! cache reads and writes settled by the recording's cache events and the provider's rules, its
//! input cost at its model's prices, and the raw history's cost beside it. The same operations on
//! the same `f64`s in the same order as Python's, so every cost is Python's to the last bit (a
//! differential test holds the two to the same records and sums on generated runs).

use std::collections::{BTreeMap, HashMap, HashSet};

/// The per-token prices of one tier, USD per million tokens (`ModelPrices`' fields).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    pub input: f64,
    pub cache_read: f64,
    pub cache_write_5m: f64,
    pub cache_write_1h: f64,
    pub output: f64,
}

/// A model's prices: its own, and the tiers a call over so many input tokens is billed at wholly
/// (`ModelPrices.tiers`, in their order).
#[derive(Debug, Clone, PartialEq)]
pub struct Prices {
    pub base: Rates,
    pub tiers: Vec<(i64, Rates)>,
}

const MTOK: f64 = 1_000_000.0;

impl Prices {
    /// `ModelPrices.at`: the rates of a call of `tokens` input tokens in all.
    fn at(&self, tokens: i64) -> &Rates {
        self.tiers
            .iter()
            .rev()
            .find(|(start, _)| tokens > *start)
            .map_or(&self.base, |(_, rates)| rates)
    }

    /// `ModelPrices.input_cost`: cache reads, and writes at the TTL's rate.
    fn input_cost(&self, read: i64, write: i64, one_hour: bool) -> f64 {
        let p = self.at(read + write);
        let rate = if one_hour {
            p.cache_write_1h
        } else {
            p.cache_write_5m
        };
        (read as f64 * p.cache_read + write as f64 * rate) / MTOK
    }

    /// `ModelPrices.nocache_cost`: every token at the input price.
    fn nocache_cost(&self, tokens: i64) -> f64 {
        tokens as f64 * self.at(tokens).input / MTOK
    }
}

/// The provider's cache (`CacheRules`' fields the pricing reads).
#[derive(Debug, Clone, Copy)]
pub struct Rules {
    pub caches: bool,
    pub reply_cached: bool,
    pub granularity: i64,
    pub minimum: i64,
    /// seconds an entry lives (the rules' own, else the TTL's)
    pub lifetime: f64,
}

impl Rules {
    /// `CacheRules.read`: what a prefix of `tokens` tokens reads.
    fn read(&self, tokens: i64) -> i64 {
        if !self.caches || tokens < self.minimum {
            0
        } else if self.granularity > 1 {
            tokens - tokens.rem_euclid(self.granularity)
        } else {
            tokens
        }
    }
}

/// A call as the pricing reads and settles it (a `TurnRecord`'s columns).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Call {
    pub tokens: i64,
    pub raw_tokens: i64,
    pub cache_read_tokens: i64,
    pub cache_write_tokens: i64,
    pub input_cost_usd: f64,
}

/// What a run's calls are, beside each one: its prices (an index into the table), its model (an id
/// per distinct model; `None`: none named), its time, and the run's cache events.
pub struct Run<'a> {
    pub prices: &'a [Prices],
    /// each call's prices in `prices` (empty: every call at the first)
    pub index: &'a [usize],
    /// each call's model (empty: none named)
    pub models: &'a [Option<i64>],
    /// each call's time in seconds (empty: none recorded)
    pub times: &'a [Option<f64>],
    pub one_hour: bool,
    /// recorded cache events (call -> the tokens it read) and what the rules expected there
    pub breaks: &'a HashMap<usize, i64>,
    pub expected: &'a HashMap<usize, i64>,
    pub rules: Rules,
    /// each call's reply in tokens (empty: not known)
    pub replies: &'a [i64],
}

/// The raw history's cost, both without caching, and the calls made after the cache expired
/// (`Priced`; `None`: no time recorded).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Priced {
    pub raw: f64,
    pub nocache: f64,
    pub raw_nocache: f64,
    pub expired: Option<i64>,
}

/// `_as_recorded`: what call `i` reads of a prompt of `tokens` it would read `read` of, once the
/// recorded cache event at it (`kept`) is replayed.
fn as_recorded(
    i: usize,
    read: i64,
    tokens: i64,
    kept: Option<i64>,
    expected: &HashMap<usize, i64>,
) -> i64 {
    let Some(mut kept) = kept else {
        return read;
    };
    if kept != 0 && i != 0 {
        if let Some(&e) = expected.get(&i) {
            kept = (read - (e - kept).max(0)).max(0);
        }
    }
    if read > kept || i == 0 {
        kept.min(tokens)
    } else {
        read
    }
}

/// `price_calls`: each call settled and priced in call order.
pub fn price_calls(calls: &mut [Call], run: &Run<'_>) -> Priced {
    let mut priced = Priced {
        raw: 0.0,
        nocache: 0.0,
        raw_nocache: 0.0,
        expired: run.times.iter().any(Option::is_some).then_some(0),
    };
    let (mut prev_raw, mut prev_model) = (0i64, None);
    for (i, r) in calls.iter_mut().enumerate() {
        let model = run.models.get(i).copied().flatten();
        let p = &run.prices[run.index.get(i).copied().unwrap_or(0)];
        let expired = i != 0
            && !run.times.is_empty()
            && match (run.times[i - 1], run.times[i]) {
                (Some(before), Some(now)) => now - before,
                _ => 0.0,
            } > run.rules.lifetime;
        if expired {
            priced.expired = Some(priced.expired.unwrap_or(0) + 1);
        }
        if i != 0 && (model != prev_model || expired) {
            // an empty cache: the whole prompt is written
            r.cache_read_tokens = 0;
            prev_raw = 0;
        }
        prev_model = model;
        let kept = run.breaks.get(&i).copied();
        let read = as_recorded(i, r.cache_read_tokens, r.tokens, kept, run.expected);
        r.cache_read_tokens = read;
        r.cache_write_tokens = r.tokens - read;
        let nocache = p.nocache_cost(r.tokens);
        let raw_nocache = p.nocache_cost(r.raw_tokens);
        let raw_cost = if !run.rules.caches {
            r.cache_read_tokens = 0;
            r.cache_write_tokens = r.tokens;
            r.input_cost_usd = nocache;
            raw_nocache
        } else {
            r.input_cost_usd =
                p.input_cost(r.cache_read_tokens, r.cache_write_tokens, run.one_hour);
            let reply =
                if run.rules.reply_cached && !run.replies.is_empty() && i != 0 && prev_raw != 0 {
                    run.replies[i - 1]
                } else {
                    0
                };
            let raw_read = as_recorded(
                i,
                run.rules.read((prev_raw + reply).min(r.raw_tokens)),
                r.raw_tokens,
                kept,
                run.expected,
            );
            p.input_cost(raw_read, r.raw_tokens - raw_read, run.one_hour)
        };
        priced.raw += raw_cost;
        priced.nocache += nocache;
        priced.raw_nocache += raw_nocache;
        prev_raw = r.raw_tokens;
    }
    priced
}

/// A call's recorded usage as the pricing reads it (`model.USAGE_KEYS` and the 1-hour writes, each
/// 0 where absent), whether it recorded anything (a usage object with a member), and its model (an
/// id per distinct model; `None`: none named).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Used {
    pub any: bool,
    pub fresh: i64,
    pub written: i64,
    pub read: i64,
    pub output: i64,
    pub one_hour: i64,
    pub model: Option<i64>,
}

impl Used {
    /// `pricing.prompt_of`: the prompt's tokens, uncached, written and read.
    pub fn prompt(&self) -> i64 {
        self.fresh + self.written + self.read
    }
}

/// `pricing.BREAK_SHARE`: a cache read under this share of the previous prompt is a break.
pub const BREAK_SHARE: f64 = 0.9;

/// `pricing.expected_reads`: what each call (from 1) would have read under `rules` by its recorded
/// sizes, the previous call's prompt and (where the provider caches it) reply.
pub fn expected_reads(used: &[Used], rules: &Rules) -> BTreeMap<usize, i64> {
    let mut out = BTreeMap::new();
    for (i, pair) in used.windows(2).enumerate() {
        let (prev, u) = (&pair[0], &pair[1]);
        if u.any && prev.any {
            let reply = if rules.reply_cached { prev.output } else { 0 };
            out.insert(i + 1, rules.read((prev.prompt() + reply).min(u.prompt())));
        }
    }
    out
}

/// `pricing.recorded_breaks`: the prefix rewrites the recording shows and no compaction explains
/// (call -> the tokens it still read), `times` each call's (empty: none recorded), `restarted` the
/// calls just after a recorded compaction, `expected` the rules' expected reads (computed here
/// where the provider caches replies and none are given). None where `expected` lacks a call it is
/// asked for (Python's `KeyError`).
pub fn recorded_breaks(
    used: &[Used],
    times: &[Option<f64>],
    restarted: &HashSet<usize>,
    rules: &Rules,
    expected: Option<&BTreeMap<usize, i64>>,
) -> Option<BTreeMap<usize, i64>> {
    let mut out = BTreeMap::new();
    if !rules.caches {
        return Some(out);
    }
    let computed;
    let expected = match expected {
        None if rules.reply_cached => {
            computed = expected_reads(used, rules);
            Some(&computed)
        }
        given => given,
    };
    if let Some(first) = used.first() {
        if first.read > 0 {
            out.insert(0, first.read);
        }
    }
    let missed_whole = |u: &Used| rules.reply_cached && u.read == 0 && u.prompt() >= rules.minimum;
    for i in 1..used.len() {
        let (u, prev) = (&used[i], &used[i - 1]);
        if u.any && !prev.any && !restarted.contains(&i) && missed_whole(u) {
            out.insert(i, 0);
            continue;
        }
        if !u.any || !prev.any || restarted.contains(&i) || u.model != prev.model {
            continue;
        }
        if !times.is_empty() {
            let apart = match (times[i - 1], times[i]) {
                (Some(before), Some(now)) => now - before,
                _ => 0.0,
            };
            if apart > rules.lifetime {
                continue;
            }
        }
        let (before, read) = (prev.prompt(), u.read);
        match expected {
            Some(e) => {
                if read <= e.get(&i)? - rules.granularity.max(1) {
                    out.insert(i, read);
                }
            }
            None => {
                if before != 0 && (read as f64) < BREAK_SHARE * before as f64 {
                    out.insert(i, read);
                }
            }
        }
    }
    Some(out)
}

/// `pricing.recorded_of` over a recording's calls: the input and output cost their usage implies,
/// each call at its prices (`index` into `prices`; empty: all at the first), in call order (a call
/// that recorded nothing adds nothing).
pub fn recorded_cost(used: &[Used], prices: &[Prices], index: &[usize]) -> (f64, f64) {
    let (mut input, mut output) = (0.0, 0.0);
    for (i, u) in used.iter().enumerate() {
        if !u.any {
            continue;
        }
        let p = prices[index.get(i).copied().unwrap_or(0)].at(u.prompt());
        input += (u.fresh as f64 * p.input
            + (u.written - u.one_hour) as f64 * p.cache_write_5m
            + u.one_hour as f64 * p.cache_write_1h
            + u.read as f64 * p.cache_read)
            / MTOK;
        output += u.output as f64 * p.output / MTOK;
    }
    (input, output)
}

/// A run's call as the cache ledger reads it: its number, its modelled cache reads and writes and
/// its input cost.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Priced1 {
    pub call: i64,
    pub cache_read: i64,
    pub cache_write: i64,
    pub input_cost: f64,
}

/// `pricing.cache_ledger_in_python`'s sums over the calls that recorded usage (`calls` and `used`
/// side by side, the shorter deciding): how many, the modelled and the recorded reads, the modelled
/// and the recorded writes (the uncached input counted as written), the modelled input cost (summed
/// in call order), and per call `[call, modelled read, recorded read]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Ledger {
    pub calls: usize,
    pub modelled_read: i64,
    pub read: i64,
    pub modelled_write: i64,
    pub write: i64,
    pub cost: f64,
    pub per_call: Vec<[i64; 3]>,
}

pub fn cache_ledger(calls: &[Priced1], used: &[Used]) -> Ledger {
    let mut out = Ledger {
        calls: 0,
        modelled_read: 0,
        read: 0,
        modelled_write: 0,
        write: 0,
        cost: 0.0,
        per_call: Vec::new(),
    };
    for (c, u) in calls.iter().zip(used).filter(|(_, u)| u.any) {
        out.calls += 1;
        out.modelled_read += c.cache_read;
        out.modelled_write += c.cache_write;
        out.read += u.read;
        out.write += u.written + u.fresh;
        out.cost += c.input_cost;
        out.per_call.push([c.call, c.cache_read, u.read]);
    }
    out
}

/// The calls (by position, from 1) made just after a recorded compaction: those whose message
/// index is past a compaction's position that the previous call's was not (`pricing._cache_events`'
/// set, the reference): `at` each call's message index, in call order; `positions` the recorded
/// compactions' positions, in any order.
pub fn restarted(at: &[i64], positions: &[i64]) -> Vec<usize> {
    let mut sorted = positions.to_vec();
    sorted.sort_unstable();
    (1..at.len())
        .filter(|&i| {
            // (any position p with at[i - 1] < p <= at[i]: the first past at[i - 1] decides)
            let k = sorted.partition_point(|&p| p <= at[i - 1]);
            k < sorted.len() && sorted[k] <= at[i]
        })
        .collect()
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_call_after_a_recorded_compaction_restarts() {
        // (positions in any order, repeated; a call whose index did not move past one does not)
        assert_eq!(restarted(&[0, 4, 9, 9, 12], &[9, 5, 5, 20]), vec![2]);
        assert_eq!(restarted(&[3, 8, 2, 7], &[5, 6]), vec![1, 3]);
        assert!(restarted(&[1, 2, 3], &[]).is_empty());
        assert!(restarted(&[], &[1]).is_empty());
        assert_eq!(restarted(&[0, 1], &[1]), vec![1]);
    }
    use super::*;

    fn rates(input: f64) -> Rates {
        Rates {
            output: input * 5.0,
            input,
            cache_read: input / 10.0,
            cache_write_5m: input * 1.25,
            cache_write_1h: input * 2.0,
        }
    }

    /// One model's prices, with no tiers.
    fn flat(input: f64) -> [Prices; 1] {
        [Prices {
            base: rates(input),
            tiers: vec![],
        }]
    }

    fn run<'a>(prices: &'a [Prices], none: &'a HashMap<usize, i64>, rules: Rules) -> Run<'a> {
        Run {
            prices,
            index: &[],
            models: &[],
            times: &[],
            one_hour: false,
            breaks: none,
            expected: none,
            rules,
            replies: &[],
        }
    }

    const ANTHROPIC: Rules = Rules {
        caches: true,
        reply_cached: false,
        granularity: 1,
        minimum: 0,
        lifetime: 300.0,
    };

    fn calls(prompts: &[(i64, i64)]) -> Vec<Call> {
        prompts
            .iter()
            .map(|&(tokens, read)| Call {
                tokens,
                raw_tokens: tokens,
                cache_read_tokens: read,
                ..Call::default()
            })
            .collect()
    }

    #[test]
    fn a_call_costs_its_reads_and_writes_at_its_tier() {
        let prices = [Prices {
            base: rates(3.0),
            tiers: vec![(200_000, rates(6.0))],
        }];
        let none = HashMap::new();
        let mut c = calls(&[(1_000, 0), (2_000, 1_000), (300_000, 2_000)]);
        let priced = price_calls(&mut c, &run(&prices, &none, ANTHROPIC));
        assert_eq!(c[0].input_cost_usd, 1_000.0 * 3.75 / MTOK);
        assert_eq!(c[1].cache_write_tokens, 1_000);
        assert_eq!(c[1].input_cost_usd, (1_000.0 * 0.3 + 1_000.0 * 3.75) / MTOK);
        // (over the tier: every token at its rates)
        assert_eq!(
            c[2].input_cost_usd,
            (2_000.0 * 0.6 + 298_000.0 * 7.5) / MTOK
        );
        assert_eq!(priced.expired, None);
        assert_eq!(
            priced.nocache,
            3_000.0 * 3.0 / MTOK + 300_000.0 * 6.0 / MTOK
        );
    }

    #[test]
    fn an_expired_cache_or_another_model_reads_nothing() {
        let prices = flat(3.0);
        let none = HashMap::new();
        let times = [Some(0.0), Some(100.0), Some(1_000.0), None];
        let models = [Some(0), Some(0), Some(0), Some(1)];
        let mut c = calls(&[(1_000, 0), (2_000, 1_000), (3_000, 2_000), (4_000, 3_000)]);
        let mut r = run(&prices, &none, ANTHROPIC);
        r.times = &times;
        r.models = &models;
        let priced = price_calls(&mut c, &r);
        assert_eq!(
            c.iter().map(|c| c.cache_read_tokens).collect::<Vec<_>>(),
            [0, 1_000, 0, 0]
        );
        assert_eq!(priced.expired, Some(1));
    }

    #[test]
    fn a_recorded_break_caps_what_a_call_reads_and_call_zero_reads_its_warm_start() {
        let prices = flat(3.0);
        let breaks = HashMap::from([(0, 300), (2, 200)]);
        let none = HashMap::new();
        let mut c = calls(&[(1_000, 0), (2_000, 1_000), (3_000, 2_000)]);
        let mut r = run(&prices, &none, ANTHROPIC);
        r.breaks = &breaks;
        price_calls(&mut c, &r);
        assert_eq!(
            c.iter().map(|c| c.cache_read_tokens).collect::<Vec<_>>(),
            [300, 1_000, 200]
        );
        // (an automatic cache: the break is what it missed of what its rules expected)
        let expected = HashMap::from([(2, 1_900)]);
        let mut c = calls(&[(1_000, 0), (2_000, 1_000), (3_000, 2_000)]);
        r.expected = &expected;
        price_calls(&mut c, &r);
        assert_eq!(c[2].cache_read_tokens, 2_000 - (1_900 - 200));
    }

    #[test]
    fn no_cache_bills_every_prompt_at_the_input_price_and_steps_round_reads_down() {
        let prices = flat(2.0);
        let none = HashMap::new();
        let mut c = calls(&[(1_000, 0), (2_000, 1_000)]);
        let off = Rules {
            caches: false,
            ..ANTHROPIC
        };
        let priced = price_calls(&mut c, &run(&prices, &none, off));
        assert_eq!(
            (c[1].cache_read_tokens, c[1].cache_write_tokens),
            (0, 2_000)
        );
        assert_eq!(priced.raw, priced.raw_nocache);
        let openai = Rules {
            caches: true,
            reply_cached: true,
            granularity: 128,
            minimum: 1024,
            lifetime: 3600.0,
        };
        assert_eq!(openai.read(1_000), 0);
        assert_eq!(openai.read(1_300), 1_280);
    }
}
