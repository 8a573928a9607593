//! The layers' arithmetic on a context's facts, for the native loop of a policy made of snip and
//! micro (`turns.rs`'s `LayerTurns`; `engine/layers/snip.py` and `micro.py` are the references):
//! where snip cuts (`Held::snip_cut`, pair-safe as seed 000), and which tool results, counted from
//! the first, micro may replace (`Held::cutoff`: by results, assistant turns or user turns, with
//! the newest of the older ones kept up to a budget). What a result is replaced with, and whether
//! it is worth it, needs the run's tool names and the placeholder; the placeholder message snip
//! puts in the middle is the run's to make: the loop decides those.
//!
//! `Held` is the context's facts the layers read, kept as the context grows and spliced as snip
//! splices it (`Context.spliced`); micro's count of results dealt with is spliced as
//! `ResultMemo.spliced` splices it (`spliced_count`).

/// How `keep_recent` is counted (`MicroConfig.keep_by`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeepBy {
    Results,
    Turns,
    UserTurns,
}

impl KeepBy {
    pub fn parse(name: &str) -> Option<KeepBy> {
        match name {
            "results" => Some(KeepBy::Results),
            "turns" => Some(KeepBy::Turns),
            "user_turns" => Some(KeepBy::UserTurns),
            _ => None,
        }
    }
}

/// The settings of the layer that decide its cutoff (`MicroConfig`'s).
#[derive(Clone, Debug)]
pub struct Rule {
    pub keep_recent: usize,
    pub keep_by: KeepBy,
    pub only_consumed: bool,
    /// `protect_tokens` times the estimate's characters a token (0: off)
    pub protect_chars: f64,
}

/// What a message is to the layer's count of turns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turn {
    /// the agent's: an assistant message
    Agent,
    /// a user prompt of the transcript (`is_prompt`: a user message with text)
    Prompt,
    Other,
}

/// What a message is to the layers: its turn, whether it calls tools, its tool results' sizes.
#[derive(Clone, Debug, PartialEq)]
pub struct Facts {
    pub turn: Turn,
    pub uses: bool,
    pub sizes: Vec<i64>,
}

/// A context's facts the layers read: each message's, and every tool result in order (its
/// message's position, its index among that message's results) with its size.
#[derive(Default, Debug)]
pub struct Held {
    pub messages: Vec<Facts>,
    pub refs: Vec<(usize, usize)>,
    pub sizes: Vec<i64>,
    /// the last assistant message's position
    pub last_agent: Option<usize>,
}

impl Held {
    /// A message appended.
    pub fn push(&mut self, facts: Facts) {
        let pos = self.messages.len();
        for (k, &size) in facts.sizes.iter().enumerate() {
            self.refs.push((pos, k));
            self.sizes.push(size);
        }
        if facts.turn == Turn::Agent {
            self.last_agent = Some(pos);
        }
        self.messages.push(facts);
    }

    /// The result at `r` (in context order) now `size` long (micro replaced it).
    pub fn resize(&mut self, r: usize, size: i64) {
        let (pos, k) = self.refs[r];
        self.sizes[r] = size;
        self.messages[pos].sizes[k] = size;
    }

    /// The message at `pos` replaced by one of the same shape (its results in the same places).
    pub fn replace(&mut self, pos: usize, facts: Facts) {
        let first = self.refs_before(pos);
        for (k, &size) in facts.sizes.iter().enumerate() {
            self.sizes[first + k] = size;
        }
        self.messages[pos] = facts;
    }

    /// `Context.spliced`: the first `head_end` messages, `made`, then those from `tail_start` on.
    pub fn splice(&mut self, head_end: usize, made: Vec<Facts>, tail_start: usize) {
        self.messages.splice(head_end..tail_start, made);
        self.refs.clear();
        self.sizes.clear();
        self.last_agent = None;
        for (pos, m) in self.messages.iter().enumerate() {
            for (k, &size) in m.sizes.iter().enumerate() {
                self.refs.push((pos, k));
                self.sizes.push(size);
            }
            if m.turn == Turn::Agent {
                self.last_agent = Some(pos);
            }
        }
    }

    /// `Context.refs_before`: how many tool results sit in messages before `position`.
    pub fn refs_before(&self, position: usize) -> usize {
        self.refs.partition_point(|&(pos, _)| pos < position)
    }

    /// `snip`'s cut of a context over `max_messages`: the head's end and the tail's start (the
    /// middle between them dropped), pair-safe as `pair_safe` says (`true`: both, `head`: the
    /// head's only); None where nothing is cut.
    pub fn snip_cut(
        &self,
        max_messages: usize,
        keep_head: usize,
        pair_safe: PairSafe,
    ) -> Option<(usize, usize)> {
        let n = self.messages.len();
        if n <= max_messages {
            return None;
        }
        let mut head_end = keep_head;
        let mut tail_start = n - (max_messages - keep_head);
        if pair_safe != PairSafe::Off {
            head_end = self.pair_safe_head(head_end);
        }
        if pair_safe == PairSafe::Both {
            tail_start = self.pair_safe_tail(tail_start);
        }
        (head_end < tail_start).then_some((head_end, tail_start))
    }

    /// `pair_safe_head`: a head ending in a tool_use takes the tool_result messages after it.
    pub fn pair_safe_head(&self, mut head_end: usize) -> usize {
        let n = self.messages.len();
        if head_end > 0 && self.messages[head_end - 1].uses {
            while head_end < n && !self.messages[head_end].sizes.is_empty() {
                head_end += 1;
            }
        }
        head_end
    }

    /// `pair_safe_tail`: a tail starting with tool results takes the tool_use message before it.
    pub fn pair_safe_tail(&self, tail_start: usize) -> usize {
        let n = self.messages.len();
        if 0 < tail_start
            && tail_start < n
            && !self.messages[tail_start].sizes.is_empty()
            && self.messages[tail_start - 1].uses
        {
            tail_start - 1
        } else {
            tail_start
        }
    }

    /// `_cutoff`: how many tool results, from the first, are old enough to replace.
    pub fn cutoff(&self, rule: &Rule) -> usize {
        let mut cut = self.kept_by_count(rule);
        if rule.protect_chars > 0.0 && cut > 0 {
            // the newest of the older results, up to the budget, are kept too; the one that
            // crosses it and every older one may go
            let mut total = 0i64;
            while cut > 0 {
                total += self.sizes[cut as usize - 1];
                if total as f64 > rule.protect_chars {
                    break;
                }
                cut -= 1;
            }
        }
        cut.max(0) as usize
    }

    /// `_kept_by_count`: the cutoff of `keep_recent` (results, assistant turns or user turns);
    /// negative where fewer results than it are there.
    fn kept_by_count(&self, rule: &Rule) -> i64 {
        let limit = if rule.only_consumed {
            self.last_agent.map_or(0, |a| self.refs_before(a))
        } else {
            self.refs.len()
        } as i64;
        if rule.keep_by == KeepBy::Results {
            return limit - rule.keep_recent as i64;
        }
        if rule.keep_recent == 0 {
            return limit;
        }
        let counted = if rule.keep_by == KeepBy::Turns {
            Turn::Agent
        } else {
            Turn::Prompt
        };
        let mut seen = 0;
        for pos in (0..self.messages.len()).rev() {
            if self.messages[pos].turn == counted {
                seen += 1;
                if seen == rule.keep_recent {
                    return limit.min(self.refs_before(pos) as i64);
                }
            }
        }
        0
    }
}

/// How snip moves its cut so that no tool pair is split (`SnipConfig.pair_safe`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PairSafe {
    Off,
    Head,
    Both,
}

/// `ResultMemo.spliced`: a count `n` of results dealt with, after a splice that keeps the first
/// `head_refs` results and those from `tail_refs` on with `made_refs` new ones between: what was
/// dealt with in the head stays so, and in the tail too unless new results precede it.
pub fn spliced_count(n: usize, head_refs: usize, tail_refs: usize, made_refs: usize) -> usize {
    if n <= head_refs {
        n
    } else if n < tail_refs || made_refs > 0 {
        head_refs
    } else {
        n - (tail_refs - head_refs)
    }
}

/// The placeholder with `{tool_name}` filled in, and its length in characters (as Python counts).
pub fn placeholder(template: &str, tool_name: &str) -> (String, i64) {
    let text = template.replace("{tool_name}", tool_name);
    let n = text.chars().count() as i64;
    (text, n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(keep_recent: usize, keep_by: KeepBy) -> Rule {
        Rule {
            keep_recent,
            keep_by,
            only_consumed: false,
            protect_chars: 0.0,
        }
    }

    fn msg(turn: Turn, sizes: &[i64]) -> Facts {
        Facts {
            turn,
            uses: turn == Turn::Agent && !sizes.is_empty(),
            sizes: if turn == Turn::Agent {
                vec![]
            } else {
                sizes.to_vec()
            },
        }
    }

    /// prompt, then three rounds of an agent call and its two results
    fn session() -> Held {
        let mut h = Held::default();
        h.push(msg(Turn::Prompt, &[]));
        for round in 0..3 {
            h.push(Facts {
                turn: Turn::Agent,
                uses: true,
                sizes: vec![],
            });
            h.push(msg(Turn::Other, &[100 + round, 10]));
        }
        h
    }

    #[test]
    fn results_are_counted_from_the_newest() {
        let h = session();
        assert_eq!(h.refs.len(), 6);
        assert_eq!(h.cutoff(&rule(2, KeepBy::Results)), 4);
        assert_eq!(h.cutoff(&rule(9, KeepBy::Results)), 0);
        assert_eq!(h.cutoff(&rule(0, KeepBy::Results)), 6);
    }

    #[test]
    fn turns_keep_the_results_after_the_kth_last_agent_message() {
        let h = session();
        // the last agent message is at 5: its results (2) are kept
        assert_eq!(h.cutoff(&rule(1, KeepBy::Turns)), 4);
        assert_eq!(h.cutoff(&rule(3, KeepBy::Turns)), 0);
        assert_eq!(h.cutoff(&rule(4, KeepBy::Turns)), 0);
        assert_eq!(h.cutoff(&rule(0, KeepBy::Turns)), 6);
        // one prompt: every result is after it
        assert_eq!(h.cutoff(&rule(1, KeepBy::UserTurns)), 0);
        let mut h = session();
        h.push(msg(Turn::Prompt, &[]));
        assert_eq!(h.cutoff(&rule(1, KeepBy::UserTurns)), 6);
    }

    #[test]
    fn only_consumed_counts_results_before_the_last_agent_message() {
        let mut h = session();
        h.push(msg(Turn::Agent, &[]));
        h.push(msg(Turn::Other, &[5]));
        let mut r = rule(1, KeepBy::Results);
        r.only_consumed = true;
        assert_eq!(h.cutoff(&r), 5);
    }

    #[test]
    fn a_budget_keeps_the_newest_older_results_until_one_crosses_it() {
        let h = session();
        let mut r = rule(2, KeepBy::Results);
        // older results, newest first: 10, 101, 10, 100; 111 chars keeps two, the third crosses
        r.protect_chars = 111.0;
        assert_eq!(h.cutoff(&r), 2);
        r.protect_chars = 110.5;
        assert_eq!(h.cutoff(&r), 3);
        r.protect_chars = 1e9;
        assert_eq!(h.cutoff(&r), 0);
    }

    #[test]
    fn snip_cuts_the_middle_without_splitting_a_pair() {
        // 7 messages: prompt, (agent, results) x 3
        let h = session();
        assert_eq!(h.snip_cut(7, 1, PairSafe::Both), None);
        // keep 1 + 3: the naive tail starts at 4 (results): it takes the agent message at 3
        assert_eq!(h.snip_cut(4, 1, PairSafe::Off), Some((1, 4)));
        assert_eq!(h.snip_cut(4, 1, PairSafe::Both), Some((1, 3)));
        // a head ending in a tool use (2 messages: prompt, agent) takes its results
        assert_eq!(h.snip_cut(4, 2, PairSafe::Head), Some((3, 5)));
        assert_eq!(h.snip_cut(4, 2, PairSafe::Off), Some((2, 5)));
        // the head reaching the tail: nothing to cut
        assert_eq!(h.snip_cut(6, 5, PairSafe::Both), None);
    }

    #[test]
    fn a_splice_keeps_the_facts_of_what_it_keeps() {
        let mut h = session();
        h.splice(1, vec![msg(Turn::Other, &[])], 5);
        assert_eq!(h.messages.len(), 4);
        assert_eq!(h.refs, vec![(3, 0), (3, 1)]);
        assert_eq!(h.sizes, vec![102, 10]);
        assert_eq!(h.last_agent, Some(2));
        h.resize(1, 3);
        assert_eq!(h.messages[3].sizes, vec![102, 3]);
        // the count of results dealt with, as ResultMemo.spliced makes it
        assert_eq!(spliced_count(1, 2, 4, 0), 1);
        assert_eq!(spliced_count(3, 2, 4, 0), 2);
        assert_eq!(spliced_count(5, 2, 4, 0), 3);
        assert_eq!(spliced_count(5, 2, 4, 1), 2);
    }

    #[test]
    fn a_placeholder_is_measured_in_characters() {
        assert_eq!(
            placeholder("[{tool_name} é]", "Bash"),
            ("[Bash é]".into(), 8)
        );
        assert_eq!(placeholder("{tool_name}{tool_name}", "x").1, 2);
    }
}
