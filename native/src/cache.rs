//! The prompt-cache prefix model, as `compactlab/engine/cost/pricing.py`'s `PromptCache` is (the
//! reference it is tested against): the part of a call's prompt unchanged since the previous call
//! was sent is read from the cache, the rest is written.
//!
//! Plain data in, plain data out: each call gives the first message a layer changed, the tokens
//! sent, the recorded reply's characters and the characters of the messages the model does not
//! know yet (from `tail_from` on); the call's reads and writes come back. The messages before
//! `tail_from` are those of the context last sent, whose characters it keeps.

/// A provider's cache rules (`cost/cache_rules.py`'s `CacheRules`): what `read` needs of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rules {
    /// the previous call's reply is part of the cached prefix (else only its prompt)
    pub reply_cached: bool,
    /// reads are whole multiples of this many tokens (rounded down)
    pub granularity: i64,
    /// a prompt shorter than this reads nothing from the cache
    pub minimum: i64,
    /// false: nothing is cached
    pub caches: bool,
}

impl Rules {
    /// Anthropic's: the reply is not cached, reads are exact, no minimum.
    pub const ANTHROPIC: Rules = Rules {
        reply_cached: false,
        granularity: 1,
        minimum: 0,
        caches: true,
    };

    /// The cached tokens a prefix of `tokens` tokens reads under these rules.
    pub fn read(&self, tokens: i64) -> i64 {
        if !self.caches || tokens < self.minimum {
            return 0;
        }
        if self.granularity > 1 {
            tokens - tokens.rem_euclid(self.granularity)
        } else {
            tokens
        }
    }
}

/// Compact JSON length of a list whose items' lengths add up to `sum_of_items` (`sizing.list_chars`).
pub fn list_chars(sum_of_items: i64, count: usize) -> i64 {
    sum_of_items + (count as i64 - 1).max(0) + 2
}

/// Python's `round(x)` of a float: to the nearest integer, ties to the even one.
fn round_even(x: f64) -> i64 {
    x.round_ties_even() as i64
}

/// The prefix model's state over a run.
#[derive(Clone, Debug)]
pub struct PromptCache {
    pub chars_per_token: f64,
    pub overhead_tokens: i64,
    /// tokens are exact counts: the prefix is their share by characters
    pub exact: bool,
    pub rules: Rules,
    pub calls: i64,
    /// messages of the context last sent
    pub sent_messages: usize,
    pub sent_tokens: i64,
    /// of the reply to the context last sent
    pub reply_tokens: i64,
    /// each call's reply, estimated
    pub replies: Vec<i64>,
    /// the characters of the first i messages of the context last sent, for i = 0..=its length
    prefix: Vec<i64>,
}

impl PromptCache {
    pub fn new(chars_per_token: f64, overhead_tokens: i64, exact: bool) -> Self {
        PromptCache {
            chars_per_token,
            overhead_tokens,
            exact,
            rules: Rules::ANTHROPIC,
            calls: 0,
            sent_messages: 0,
            sent_tokens: 0,
            reply_tokens: 0,
            replies: Vec::new(),
            prefix: vec![0],
        }
    }

    /// How many messages of the context last sent it knows the characters of.
    pub fn known(&self) -> usize {
        self.prefix.len() - 1
    }

    /// The estimate's tokens of `chars` characters (`TokenEstimator.tokens`).
    fn tokens(&self, chars: i64) -> i64 {
        self.overhead_tokens + (chars as f64 / self.chars_per_token).ceil() as i64
    }

    /// How many leading messages are as they were sent last time (and the reply to them, where
    /// the provider caches it).
    pub fn unchanged(&self, changed_from: usize) -> usize {
        let reply = usize::from(self.rules.reply_cached && self.calls > 0);
        (self.sent_messages + reply).min(changed_from)
    }

    /// A call: the context sent is the first `tail_from` messages of the one last sent followed by
    /// messages of `tail` characters (`tail_from` at most `known()`); the first `changed_from` of
    /// it as they were. Its (cache read, cache write) tokens.
    pub fn at_call(
        &mut self,
        changed_from: usize,
        tokens: i64,
        reply_chars: i64,
        tail_from: usize,
        tail: &[i64],
    ) -> (i64, i64) {
        assert!(
            tail_from <= self.known(),
            "a tail from {tail_from} of a context of {} known messages",
            self.known()
        );
        self.prefix.truncate(tail_from + 1);
        let mut total = self.prefix[tail_from];
        for &c in tail {
            total += c;
            self.prefix.push(total);
        }
        let n = self.known();
        let unchanged = self.unchanged(changed_from).min(n);
        let read = if self.calls == 0 {
            0
        } else if unchanged > 0 {
            let prefix = list_chars(self.prefix[unchanged], unchanged);
            let read = if self.exact {
                round_even((tokens * prefix) as f64 / list_chars(total, n) as f64)
            } else {
                self.tokens(prefix)
            };
            let reply = if unchanged > self.sent_messages {
                self.reply_tokens
            } else {
                0
            };
            read.min(tokens).min(self.sent_tokens + reply)
        } else if self.sent_messages == 0 {
            // (the last prompt held no message: all of it, the system prompt and tools, is this
            // one's start, as the raw history reads it)
            self.sent_tokens.min(tokens)
        } else {
            self.overhead_tokens.min(tokens) // system prompt and tools stay cached
        };
        let read = self.rules.read(read);
        self.calls += 1;
        self.sent_messages = n;
        self.sent_tokens = tokens;
        self.reply_tokens = if reply_chars != 0 {
            round_even(reply_chars as f64 / self.chars_per_token)
        } else {
            0
        };
        self.replies.push(self.reply_tokens);
        (read, tokens - read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_call_reads_nothing_and_the_next_reads_its_unchanged_prefix() {
        let mut c = PromptCache::new(4.0, 0, false);
        assert_eq!(c.at_call(2, 150, 40, 0, &[200, 198]), (0, 150));
        // the reply (40 chars) and a new message appended; nothing changed: the two first are read
        let (read, write) = c.at_call(4, 180, 0, 2, &[40, 300]);
        assert_eq!(read, (list_chars(398, 2) as f64 / 4.0).ceil() as i64); // 101 tokens of 401 chars
        assert_eq!(read + write, 180);
    }

    #[test]
    fn a_read_is_never_more_than_what_was_sent() {
        let mut c = PromptCache::new(1.0, 0, false);
        c.at_call(1, 10, 0, 0, &[1000]);
        assert_eq!(c.at_call(2, 2000, 0, 1, &[5]).0, 10);
    }

    #[test]
    fn a_context_changed_from_its_first_message_reads_the_overhead() {
        let mut c = PromptCache::new(4.0, 30, false);
        c.at_call(1, 500, 0, 0, &[1000]);
        assert_eq!(c.at_call(0, 400, 0, 0, &[800]), (30, 370));
    }

    #[test]
    fn a_call_after_a_prompt_of_no_message_reads_all_of_it() {
        // (a recording that opens with the model's reply: its first call sent no message)
        let mut c = PromptCache::new(4.0, 30, false);
        assert_eq!(c.at_call(0, 31, 0, 0, &[]), (0, 31));
        assert_eq!(c.at_call(2, 60, 0, 0, &[50, 60]), (31, 29));
    }

    #[test]
    fn exact_counts_read_their_share_by_characters_rounded_half_even() {
        let mut c = PromptCache::new(4.0, 0, true);
        c.at_call(1, 100, 0, 0, &[6]);
        // prefix 6 + 0 + 2 = 8 chars of list_chars(6 + 6, 2) = 15: 15 * 8 / 15 = 8
        assert_eq!(c.at_call(2, 15, 0, 1, &[6]).0, 8);
        assert_eq!(round_even(2.5), 2);
        assert_eq!(round_even(3.5), 4);
    }

    #[test]
    fn provider_rules_step_and_minimum() {
        let openai = Rules {
            reply_cached: true,
            granularity: 128,
            minimum: 1024,
            caches: true,
        };
        assert_eq!(openai.read(1000), 0);
        assert_eq!(openai.read(1300), 1280);
        let none = Rules {
            reply_cached: false,
            granularity: 1,
            minimum: 0,
            caches: false,
        };
        assert_eq!(none.read(5000), 0);
    }

    #[test]
    fn a_cached_reply_counts_as_an_unchanged_message() {
        let mut c = PromptCache::new(1.0, 0, false);
        c.rules = Rules {
            reply_cached: true,
            granularity: 1,
            minimum: 0,
            caches: true,
        };
        c.at_call(1, 10, 7, 0, &[8]);
        assert_eq!(c.unchanged(5), 2);
        assert_eq!(c.replies, vec![7]);
    }
}
