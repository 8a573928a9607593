//! The API's tool-pairing rules checked incrementally, as `compactlab/engine/measures/violations.py`'s
//! `InvariantTracker` does (the reference this is tested against; its docstring explains the
//! method): each violation but a duplicate id is *owned* by one message, decided by it and its
//! neighbours, so a new context whose first messages are unchanged is checked again only from the
//! first that changed, and a run of the very same messages kept behind a change (a snip's tail)
//! keeps what it owned, moved.
//!
//! Plain data in: a message is its `Facts` (ids interned by the caller as numbers) and a `key`
//! that is the same for the very same message (the caller's object identity).

use rustc_hash::{FxHashMap, FxHashSet};
use std::sync::Arc;

/// An interned string (a tool id, a role); `NONE` stands for a missing one.
pub type Id = u32;
pub const NONE: Id = Id::MAX;
/// `violations.NO_MESSAGE_ORIGIN`: the origin of the violation of a context of no message
pub const NO_MESSAGE_ORIGIN: i64 = -1;

/// The kinds, in `violations.KINDS`'s order (a listing sorts by it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    OrphanToolUse,
    OrphanToolResult,
    DuplicateToolUseId,
    ToolResultNotFirst,
    EmptyContent,
    FirstNotUser,
}

impl Kind {
    pub const NAMES: [&'static str; 6] = [
        "orphan_tool_use",
        "orphan_tool_result",
        "duplicate_tool_use_id",
        "tool_result_not_first",
        "empty_content",
        "first_not_user",
    ];

    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

/// What the rules read of a message (`transcripts.messages.Entry`'s facts), compact: a context of
/// tens of thousands of messages keeps one each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Facts {
    pub origin: i64,
    pub role: Id,
    pub empty: bool,
    /// its tool_use ids, its tool_result blocks' ids and those of its results after a block that is
    /// not one (misplaced), each in order, one after the other
    ids: Box<[Id]>,
    n_uses: u32,
    n_results: u32,
}

impl Facts {
    pub fn new(
        origin: i64,
        role: Id,
        uses: Vec<Id>,
        results: Vec<Id>,
        misplaced: Vec<Id>,
        empty: bool,
    ) -> Self {
        let (n_uses, n_results) = (uses.len() as u32, results.len() as u32);
        Facts {
            origin,
            role,
            empty,
            ids: [uses, results, misplaced].concat().into_boxed_slice(),
            n_uses,
            n_results,
        }
    }

    /// An assistant message's tool_use ids, in order (as a set: `Entry.use_set`).
    pub fn uses(&self) -> &[Id] {
        &self.ids[..self.n_uses as usize]
    }

    /// Its tool_result blocks' ids, in order (as a set: `Entry.result_set`).
    pub fn results(&self) -> &[Id] {
        &self.ids[self.n_uses as usize..(self.n_uses + self.n_results) as usize]
    }

    /// The ids of its results after a block that is not one.
    pub fn misplaced(&self) -> &[Id] {
        &self.ids[(self.n_uses + self.n_results) as usize..]
    }
}

/// A message of a context: its identity and its facts.
#[derive(Clone, Debug)]
pub struct Slot {
    pub key: usize,
    pub facts: Arc<Facts>,
}

/// One violation: its kind, its message's position, its tool id (`NONE`: none) and the owning
/// message's origin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Violation {
    pub kind: Kind,
    pub position: usize,
    pub tool_id: Id,
    pub origin: i64,
}

type Owned = (Kind, Id, i64);

/// The roles the rules name: the caller's ids for "user" and "assistant".
#[derive(Clone, Copy, Debug)]
pub struct Roles {
    pub user: Id,
    pub assistant: Id,
}

/// Whether `ids` (a message's few tool ids, as a set: `Entry.use_set`, `Entry.result_set`) has `id`.
fn contains(ids: &[Id], id: Id) -> bool {
    ids.contains(&id)
}

/// Whether two messages' ids are the same set (`frozenset` equality: order and repeats aside).
fn same_set(a: &[Id], b: &[Id]) -> bool {
    subset(a, b) && subset(b, a)
}

fn subset(small: &[Id], big: &[Id]) -> bool {
    small.iter().all(|&id| contains(big, id))
}

/// `violations._plainly_valid`: a message after the first, not empty, with no misplaced result,
/// whose tool calls the next message answers (an assistant's) or whose results all answer the one
/// before (another's).
fn plainly_valid(entries: &[Slot], i: usize, e: &Facts, roles: Roles) -> bool {
    if e.role == roles.assistant {
        if e.uses().is_empty() {
            return true;
        }
        return match entries.get(i + 1) {
            Some(next) => next.facts.role == roles.user && subset(e.uses(), next.facts.results()),
            None => false,
        };
    }
    if e.results().is_empty() {
        return true;
    }
    let before = &entries[i - 1].facts;
    before.role == roles.assistant && subset(e.results(), before.uses())
}

/// `violations.owned_violations`: what the message at `i` owns.
pub fn owned_violations(entries: &[Slot], i: usize, roles: Roles) -> Vec<Owned> {
    let e = &*entries[i].facts;
    let mut out = Vec::new();
    if i > 0 && !e.empty && e.misplaced().is_empty() && plainly_valid(entries, i, e, roles) {
        return out;
    }
    if i == 0 && e.role != roles.user {
        out.push((Kind::FirstNotUser, NONE, e.origin));
    }
    if e.empty {
        out.push((Kind::EmptyContent, NONE, e.origin));
    }
    if !e.uses().is_empty() && e.role == roles.assistant {
        let answered: &[Id] = match entries.get(i + 1) {
            Some(after) if after.facts.role == roles.user => after.facts.results(),
            _ => &[],
        };
        out.extend(
            e.uses()
                .iter()
                .filter(|&&id| !contains(answered, id))
                .map(|&id| (Kind::OrphanToolUse, id, e.origin)),
        );
    }
    if !e.results().is_empty() {
        let uses: &[Id] = match i.checked_sub(1).map(|p| &entries[p].facts) {
            Some(prev) if prev.role == roles.assistant => prev.uses(),
            _ => &[],
        };
        out.extend(
            e.results()
                .iter()
                .filter(|&&id| !contains(uses, id))
                .map(|&id| (Kind::OrphanToolResult, id, e.origin)),
        );
        out.extend(
            e.misplaced()
                .iter()
                .map(|&id| (Kind::ToolResultNotFirst, id, e.origin)),
        );
    }
    out
}

/// `violations._same_shape`: `b` is `a`, or a copy of it whose content alone changed.
fn same_shape(a: &Slot, b: &Slot) -> bool {
    if a.key == b.key {
        return true;
    }
    let (a, b) = (&*a.facts, &*b.facts);
    a.origin == b.origin
        && a.role == b.role
        && a.uses() == b.uses()
        && a.results().len() == b.results().len()
        && same_set(a.results(), b.results())
        && a.empty == b.empty
        && a.misplaced() == b.misplaced()
}

/// `context.find_origin`: the position at or after `lo` of the message of origin `origin` (origins
/// increase along a context; a made message's, negative, is stepped over).
fn find_origin(entries: &[Slot], origin: i64, mut lo: usize) -> Option<usize> {
    let mut hi = entries.len();
    while lo < hi {
        let mid = (lo + hi) / 2;
        let mut j = mid;
        while j < hi && entries[j].facts.origin < 0 {
            j += 1;
        }
        if j == hi {
            hi = mid;
            continue;
        }
        let o = entries[j].facts.origin;
        if o == origin {
            return Some(j);
        }
        if o < origin {
            lo = j + 1;
        } else {
            hi = mid;
        }
    }
    None
}

/// The violations of the last context it was shown, updated from what changed.
#[derive(Debug)]
pub struct Tracker {
    pub entries: Vec<Slot>,
    roles: Roles,
    owned: FxHashMap<usize, Vec<Owned>>,
    owned_counts: FxHashMap<(Kind, Id), i64>,
    owned_total: i64,
    /// how many of the context's messages call each tool id (ids are dense numbers: one count each)
    use_count: Vec<u32>,
    /// how many call a missing id
    none_uses: u32,
    duplicated: FxHashSet<Id>,
}

impl Tracker {
    pub fn new(roles: Roles) -> Self {
        Tracker {
            entries: Vec::new(),
            roles,
            owned: FxHashMap::default(),
            owned_counts: FxHashMap::default(),
            owned_total: 0,
            use_count: Vec::new(),
            none_uses: 0,
            duplicated: FxHashSet::default(),
        }
    }

    /// Where a new context of `n_new` messages starts to need a look: its first `dirty_from` are
    /// those it saw before (the caller hands the messages from there on to `update`).
    pub fn start(&self, dirty_from: usize, n_new: usize) -> usize {
        dirty_from.min(self.entries.len()).min(n_new)
    }

    /// Show it a context of `n_new` messages whose first `d0` (`start`) it has seen and whose others
    /// are `tail`.
    pub fn update(&mut self, d0: usize, tail: Vec<Slot>) {
        let n_old = self.entries.len();
        let n_new = d0 + tail.len();
        let new = |i: usize| &tail[i - d0];
        let mut d = d0;
        // a result's content replaced (micro, budget) leaves every violation as it was
        while d < n_old && d < n_new && same_shape(&self.entries[d], new(d)) {
            self.entries[d] = new(d).clone();
            d += 1;
        }
        if d == n_old {
            self.grow(d, &tail[d - d0..]);
            return;
        }
        let (mut i0, mut j0, run) = self.kept_run(d, d0, &tail);
        if run == 0 {
            i0 = n_new;
            j0 = n_old;
        }
        // tool ids: out with the old messages that went, in with the new ones
        let gone: Vec<Arc<Facts>> = self.entries[d..j0]
            .iter()
            .chain(&self.entries[j0 + run..])
            .map(|s| s.facts.clone())
            .collect();
        for e in gone {
            for &id in e.uses() {
                let left = self.uses(id) - 1;
                self.set_uses(id, left);
                if left == 1 {
                    self.duplicated.remove(&id);
                }
            }
        }
        for i in (d..i0).chain(i0 + run..n_new) {
            let facts = new(i).facts.clone();
            for &id in facts.uses() {
                self.count_use(id);
            }
        }
        // owned violations: kept before the change, moved with the kept run, dropped elsewhere
        let shift = i0 as i64 - j0 as i64;
        let mut owned = FxHashMap::default();
        for (pos, found) in std::mem::take(&mut self.owned) {
            if (pos as i64) < d as i64 - 1 {
                owned.insert(pos, found);
            } else if run > 0 && j0 < pos && pos + 2 <= j0 + run {
                owned.insert((pos as i64 + shift) as usize, found);
            } else {
                self.drop_owned(&found);
            }
        }
        self.entries.truncate(d);
        self.entries.extend_from_slice(&tail[d - d0..]);
        self.owned = owned;
        let mut check: Vec<usize> = (d.saturating_sub(1)..(i0 + 1).min(n_new)).collect();
        if run > 0 {
            check.extend((i0 + run - 1).max(i0 + 1)..n_new);
        }
        for pos in check {
            let made = owned_violations(&self.entries, pos, self.roles);
            if !made.is_empty() {
                self.own(pos, made);
            }
        }
        self.own_no_message();
    }

    /// `violations.NO_MESSAGE`: a context of no message does not start with a user message either
    /// (the API refuses an empty list). Owned by position 0, which the first message takes over
    /// (`grow` checks it again).
    fn own_no_message(&mut self) {
        if self.entries.is_empty() {
            self.own(0, vec![(Kind::FirstNotUser, NONE, NO_MESSAGE_ORIGIN)]);
        }
    }

    fn count_use(&mut self, id: Id) {
        let n = self.uses(id) + 1;
        self.set_uses(id, n);
        if n > 1 {
            self.duplicated.insert(id);
        }
    }

    /// How many of the context's messages call `id`.
    fn uses(&self, id: Id) -> u32 {
        if id == NONE {
            self.none_uses
        } else {
            self.use_count.get(id as usize).copied().unwrap_or(0)
        }
    }

    fn set_uses(&mut self, id: Id, n: u32) {
        if id == NONE {
            self.none_uses = n;
            return;
        }
        let i = id as usize;
        if i >= self.use_count.len() {
            self.use_count.resize(i + 1, 0);
        }
        self.use_count[i] = n;
    }

    /// `update` of a context that only gained messages after its first `d` (`added`).
    fn grow(&mut self, d: usize, added: &[Slot]) {
        for s in added {
            for &id in s.facts.uses() {
                self.count_use(id);
            }
        }
        self.entries.truncate(d);
        self.entries.extend_from_slice(added);
        let first = d.saturating_sub(1);
        if let Some(found) = self.owned.remove(&first) {
            // what the last old message owned depended on its missing neighbour
            self.drop_owned(&found);
        }
        for pos in first..self.entries.len() {
            let found = owned_violations(&self.entries, pos, self.roles);
            if !found.is_empty() {
                self.own(pos, found);
            }
        }
        self.own_no_message();
    }

    /// `violations._kept_run`: (i0, j0, length): the new messages from `i0` are the very old ones
    /// from `j0`, the first such run after `d` (a layer inserts at most a few messages before what
    /// it keeps).
    fn kept_run(&self, d: usize, d0: usize, tail: &[Slot]) -> (usize, usize, usize) {
        let old = &self.entries;
        let n_new = d0 + tail.len();
        for i0 in d..(d + 3).min(n_new) {
            let e = &tail[i0 - d0];
            if e.facts.origin < 0 {
                continue;
            }
            let Some(j0) = find_origin(old, e.facts.origin, d) else {
                continue;
            };
            if old[j0].key != e.key {
                continue;
            }
            let limit = (n_new - i0).min(old.len() - j0);
            let mut run = 1;
            while run < limit && tail[i0 + run - d0].key == old[j0 + run].key {
                run += 1;
            }
            return (i0, j0, run);
        }
        (d, d, 0)
    }

    fn drop_owned(&mut self, found: &[Owned]) {
        self.owned_total -= found.len() as i64;
        for &(kind, id, _) in found {
            let n = self
                .owned_counts
                .get_mut(&(kind, id))
                .expect("a violation counted when owned");
            *n -= 1;
            if *n == 0 {
                self.owned_counts.remove(&(kind, id));
            }
        }
    }

    fn own(&mut self, pos: usize, found: Vec<Owned>) {
        self.owned_total += found.len() as i64;
        for &(kind, id, _) in &found {
            *self.owned_counts.entry((kind, id)).or_insert(0) += 1;
        }
        self.owned.insert(pos, found);
    }

    /// Its message at `pos` let go by a context that only grows (`KeepingTurns`): its facts kept
    /// (the violations listed from them stay as they were), its key made 0, which no message has,
    /// so that another message may take the address it had. Such a context is read again only from
    /// where it grew, past every message let go.
    pub fn release(&mut self, pos: usize) {
        if let Some(s) = self.entries.get_mut(pos) {
            s.key = 0;
        }
    }

    /// The stream's messages it no longer needs, from `start` to `stop`, replaced by `freed` (their
    /// violations were counted; what is checked next looks from the message before the next call).
    pub fn free(&mut self, start: usize, stop: usize, freed: &Slot) {
        let stop = stop.min(self.entries.len());
        for s in &mut self.entries[start.min(stop)..stop] {
            *s = freed.clone();
        }
    }

    /// How many violations the context has.
    pub fn total(&self) -> i64 {
        self.owned_total
            + self
                .duplicated
                .iter()
                .map(|&id| i64::from(self.uses(id)) - 1)
                .sum::<i64>()
    }

    /// The multiset of (kind, tool id) of its violations.
    pub fn counts(&self) -> Vec<((Kind, Id), i64)> {
        let mut out: Vec<((Kind, Id), i64)> =
            self.owned_counts.iter().map(|(&k, &n)| (k, n)).collect();
        for &id in &self.duplicated {
            out.push(((Kind::DuplicateToolUseId, id), i64::from(self.uses(id)) - 1));
        }
        out
    }

    /// Every violation, by position and kind.
    pub fn violations(&self) -> Vec<Violation> {
        let mut positions: Vec<&usize> = self.owned.keys().collect();
        positions.sort_unstable();
        let mut out: Vec<Violation> = positions
            .into_iter()
            .flat_map(|&pos| {
                self.owned[&pos]
                    .iter()
                    .map(move |&(kind, tool_id, origin)| Violation {
                        kind,
                        position: pos,
                        tool_id,
                        origin,
                    })
            })
            .collect();
        if !self.duplicated.is_empty() {
            let mut seen: FxHashMap<Id, usize> = FxHashMap::default();
            for (pos, e) in self.entries.iter().enumerate() {
                for &id in e.facts.uses() {
                    if self.duplicated.contains(&id) {
                        let n = seen.entry(id).or_insert(0);
                        *n += 1;
                        if *n > 1 {
                            out.push(Violation {
                                kind: Kind::DuplicateToolUseId,
                                position: pos,
                                tool_id: id,
                                origin: e.facts.origin,
                            });
                        }
                    }
                }
            }
        }
        out.sort_by_key(|v| (v.position, v.kind)); // (stable: as Python's sorted)
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROLES: Roles = Roles {
        user: 0,
        assistant: 1,
    };

    fn slot(key: usize, origin: i64, role: Id, uses: &[Id], results: &[Id]) -> Slot {
        Slot {
            key,
            facts: Arc::new(Facts::new(
                origin,
                role,
                uses.to_vec(),
                results.to_vec(),
                vec![],
                false,
            )),
        }
    }

    fn kinds(t: &Tracker) -> Vec<(&'static str, usize, Id)> {
        t.violations()
            .iter()
            .map(|v| (v.kind.name(), v.position, v.tool_id))
            .collect()
    }

    #[test]
    fn a_message_let_go_keeps_its_violations_and_no_key_of_a_message() {
        // an orphan result (1), a tool id used twice far apart (3 and 7): what the tracker lists
        // and counts is the same after the early messages are let go, the context growing on
        let grow = |release: bool| {
            let mut t = Tracker::new(ROLES);
            let all = [
                slot(10, 0, 0, &[], &[]),
                slot(11, 1, 0, &[], &[9]),
                slot(12, 2, 1, &[], &[]),
                slot(13, 3, 1, &[5], &[]),
                slot(14, 4, 0, &[], &[5]),
                slot(15, 5, 1, &[], &[]),
                slot(16, 6, 0, &[], &[]),
                slot(17, 7, 1, &[5], &[]),
                slot(18, 8, 0, &[], &[5]),
            ];
            let mut seen = 0;
            let mut listed = vec![];
            for n in [2, 4, 6, 9] {
                t.update(t.start(seen, n), all[seen..n].to_vec());
                if release {
                    for pos in 0..n.saturating_sub(2) {
                        t.release(pos);
                    }
                }
                listed.push((kinds(&t), t.total(), t.counts().len()));
                seen = n;
            }
            (listed, t.entries.iter().map(|s| s.key).collect::<Vec<_>>())
        };
        let (held, keys) = grow(false);
        let (released, released_keys) = grow(true);
        assert_eq!(held, released);
        assert!(held[3].0.contains(&("duplicate_tool_use_id", 7, 5)));
        assert_eq!(keys, (10..19).collect::<Vec<_>>());
        assert_eq!(released_keys, [0, 0, 0, 0, 0, 0, 0, 17, 18]);
        let mut t = Tracker::new(ROLES);
        t.release(3); // (past the end: nothing)
        assert!(t.entries.is_empty());
    }

    #[test]
    fn a_growing_context_owns_an_unanswered_call_until_its_result_comes() {
        let mut t = Tracker::new(ROLES);
        let (a, b) = (slot(1, 0, 0, &[], &[]), slot(2, 1, 1, &[7], &[]));
        t.update(0, vec![a.clone(), b.clone()]);
        assert_eq!(kinds(&t), [("orphan_tool_use", 1, 7)]);
        let c = slot(3, 2, 0, &[], &[7]);
        t.update(t.start(2, 3), vec![c]);
        assert_eq!(t.total(), 0);
        assert!(kinds(&t).is_empty());
    }

    #[test]
    fn a_dropped_call_orphans_its_result_and_a_reused_id_is_a_duplicate() {
        let mut t = Tracker::new(ROLES);
        let ctx = vec![
            slot(1, 0, 0, &[], &[]),
            slot(2, 1, 1, &[7], &[]),
            slot(3, 2, 0, &[], &[7]),
            slot(4, 3, 1, &[7], &[]),
            slot(5, 4, 0, &[], &[7]),
        ];
        t.update(0, ctx.clone());
        assert_eq!(kinds(&t), [("duplicate_tool_use_id", 3, 7)]);
        // a snip drops messages 1 and 2, keeping the tail (the very same messages, shifted)
        let snipped = [ctx[0].clone(), ctx[3].clone(), ctx[4].clone()];
        t.update(t.start(1, 3), snipped[1..].to_vec());
        assert!(kinds(&t).is_empty() && t.total() == 0);
        let orphan = [ctx[0].clone(), ctx[2].clone()];
        t.update(t.start(1, 2), orphan[1..].to_vec());
        assert_eq!(kinds(&t), [("orphan_tool_result", 1, 7)]);
        assert_eq!(t.counts(), [((Kind::OrphanToolResult, 7), 1)]);
    }

    #[test]
    fn a_missing_id_called_twice_is_a_duplicate_as_any_id_is() {
        let mut t = Tracker::new(ROLES);
        let ctx = vec![
            slot(1, 0, 0, &[], &[]),
            slot(2, 1, 1, &[NONE, 5_000], &[]),
            slot(3, 2, 0, &[], &[NONE, 5_000]),
            slot(4, 3, 1, &[NONE], &[]),
            slot(5, 4, 0, &[], &[NONE]),
        ];
        t.update(0, ctx.clone());
        assert_eq!(kinds(&t), [("duplicate_tool_use_id", 3, NONE)]);
        assert_eq!(t.total(), 1);
        // (an id's count kept by its number: a high one grows the counts to it, a dropped one is 0)
        t.update(t.start(1, 1), vec![]);
        assert_eq!((t.total(), t.uses(NONE), t.uses(5_000)), (0, 0, 0));
    }

    #[test]
    fn a_context_of_no_message_does_not_start_with_a_user_message() {
        let mut t = Tracker::new(ROLES);
        t.update(0, vec![]);
        assert_eq!(kinds(&t), [("first_not_user", 0, NONE)]);
        assert_eq!(t.total(), 1);
        // (the first message takes position 0 over: its own violations, here none)
        t.update(0, vec![slot(1, 0, 0, &[], &[])]);
        assert_eq!((kinds(&t), t.total()), (vec![], 0));
        // (and a context that loses every message has it again)
        t.update(0, vec![]);
        assert_eq!(
            (kinds(&t), t.total()),
            (vec![("first_not_user", 0, NONE)], 1)
        );
    }

    #[test]
    fn the_first_message_must_be_the_user_s_and_none_empty() {
        let mut t = Tracker::new(ROLES);
        let mut e = slot(1, 0, 1, &[], &[]);
        Arc::make_mut(&mut e.facts).empty = true;
        t.update(0, vec![e]);
        assert_eq!(
            kinds(&t),
            [("empty_content", 0, NONE), ("first_not_user", 0, NONE)]
        );
    }
}
