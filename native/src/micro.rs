//! The micro layer's arithmetic on a context's facts (`engine/layers/micro.py` is the reference):
//! which tool results, counted from the first, are old enough to replace (`Held::cutoff`), by
//! results, assistant turns or user turns, with the newest of the older ones kept up to a budget.
//! What a result is replaced with, and whether it is worth it, needs the run's tool names and the
//! placeholder: the loop that runs the layer decides that (`turns.rs`'s `MaskingTurns`).
//!
//! A context here only grows and has results replaced in place (no message is dropped or made):
//! the loop of a policy whose one layer is micro.

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

/// A context's facts the layer reads: each message's turn, every tool result in order (its
/// message's position, its index among that message's results) and its size.
#[derive(Default, Debug)]
pub struct Held {
    pub turns: Vec<Turn>,
    pub refs: Vec<(usize, usize)>,
    pub sizes: Vec<i64>,
    /// the last assistant message's position
    pub last_agent: Option<usize>,
}

impl Held {
    /// A message appended with the sizes of its tool results.
    pub fn push(&mut self, turn: Turn, results: impl IntoIterator<Item = i64>) {
        let pos = self.turns.len();
        self.turns.push(turn);
        for (k, size) in results.into_iter().enumerate() {
            self.refs.push((pos, k));
            self.sizes.push(size);
        }
        if turn == Turn::Agent {
            self.last_agent = Some(pos);
        }
    }

    /// `Context.refs_before`: how many tool results sit in messages before `position`.
    pub fn refs_before(&self, position: usize) -> usize {
        self.refs.partition_point(|&(pos, _)| pos < position)
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
        for pos in (0..self.turns.len()).rev() {
            if self.turns[pos] == counted {
                seen += 1;
                if seen == rule.keep_recent {
                    return limit.min(self.refs_before(pos) as i64);
                }
            }
        }
        0
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

    /// prompt, then three rounds of an agent call and its two results
    fn session() -> Held {
        let mut h = Held::default();
        h.push(Turn::Prompt, []);
        for round in 0..3 {
            h.push(Turn::Agent, []);
            h.push(Turn::Other, [100 + round, 10]);
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
        h.push(Turn::Prompt, []);
        assert_eq!(h.cutoff(&rule(1, KeepBy::UserTurns)), 6);
    }

    #[test]
    fn only_consumed_counts_results_before_the_last_agent_message() {
        let mut h = session();
        h.push(Turn::Agent, []);
        h.push(Turn::Other, [5]);
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
    fn a_placeholder_is_measured_in_characters() {
        assert_eq!(
            placeholder("[{tool_name} é]", "Bash"),
            ("[Bash é]".into(), 8)
        );
        assert_eq!(placeholder("{tool_name}{tool_name}", "x").1, 2);
    }
}
