//! What the merge left out, inferred or named, counted under a name each (the trace's
//! `meta.counts`, `merge.*`), and what it could not place (problems: the trace is then
//! incomplete). Every rule that drops or infers something has its counter here; a count is
//! written only when it is not zero.
use flux_trace::Trace;

#[derive(Default, Debug)]
pub(super) struct Counters {
    /// `hook-own-work`: USDT events of code the hook itself ran.
    pub hook_internal_dropped: u64,
    /// `unmatched-returns`: returns of frames whose entry was never placed (nothing open, or
    /// with USDT entries).
    pub pre_hook_returns: u64,
    /// `unwind-reconcile`: activations closed as unwound by a return lower in the stack.
    pub reconciled_unwind: u64,
    /// `hook-lines-win`: USDT lines of code whose lines the hook reports.
    pub usdt_lines_dropped: u64,
    /// `generator-entries`: USDT entries of generator code (creation or resumption).
    pub generator_entries_dropped: u64,
    /// `line0-naming`: line-0 USDT entries named from the hook's code definitions.
    pub lineless_named: u64,
    /// `line0-naming`: line-0 USDT entries of code whose starts the hook reports.
    pub lineless_dropped: u64,
    /// `target-entries`: USDT entries of targeted code (scope `targets`).
    pub target_entries_dropped: u64,
    /// `join-returns`: hook returns joined to USDT's.
    pub joined_returns: u64,
    /// `before-hook`: USDT events before the process's hook was installed.
    pub before_hook_install: u64,
    /// `after-hook`: USDT events after the process's hook's last record (3.11).
    pub after_hook: u64,
    /// `fresh-frames`: fresh generator starts at the key of a frame left suspended (freed
    /// unseen; a new frame, not a resumption).
    pub fresh_at_suspended_key: u64,
    /// `unseen-starts`: resumptions of generator frames whose start was not traced (started
    /// outside the scope, or in another thread): a frame id of their own, no fresh call.
    pub unseen_starts: u64,
    /// `test-windows`: events outside test windows.
    pub outside_windows: u64,
    /// `target-extents`: events outside target extents.
    pub outside_extents: u64,
    /// `keep`: events cut from extents as they closed (the run keeps the targets' direct calls).
    pub not_kept: u64,
    /// `keep`: of those, the ones inside a test's span.
    pub not_kept_in_tests: u64,
    /// What could not be placed.
    pub problems: Vec<String>,
}

/// How many placement problems are written out in full.
const SHOWN_PROBLEMS: usize = 20;

impl Counters {
    /// Every counter: (its rule, its name in `meta.counts`, its value).
    fn named(&self) -> [(&'static str, &'static str, u64); 17] {
        [
            (
                "unwind-reconcile",
                "merge.reconciled_unwind",
                self.reconciled_unwind,
            ),
            (
                "hook-lines-win",
                "merge.usdt_lines_dropped_for_hook_lines",
                self.usdt_lines_dropped,
            ),
            (
                "generator-entries",
                "merge.usdt_generator_entries_dropped",
                self.generator_entries_dropped,
            ),
            (
                "line0-naming",
                "merge.usdt_line0_entries_named",
                self.lineless_named,
            ),
            (
                "line0-naming",
                "merge.usdt_line0_entries_dropped_for_hook_starts",
                self.lineless_dropped,
            ),
            ("join-returns", "merge.returns_joined", self.joined_returns),
            (
                "unmatched-returns",
                "merge.usdt_returns_of_frames_started_before_hook",
                self.pre_hook_returns,
            ),
            (
                "hook-own-work",
                "merge.usdt_events_of_hook_internals_dropped",
                self.hook_internal_dropped,
            ),
            (
                "before-hook",
                "merge.usdt_events_before_hook_install",
                self.before_hook_install,
            ),
            (
                "after-hook",
                "merge.usdt_events_after_hook_end",
                self.after_hook,
            ),
            (
                "fresh-frames",
                "merge.fresh_generator_starts_at_a_suspended_frames_key",
                self.fresh_at_suspended_key,
            ),
            (
                "unseen-starts",
                "merge.resumptions_of_generator_frames_started_untraced",
                self.unseen_starts,
            ),
            (
                "test-windows",
                "merge.events_outside_test_windows",
                self.outside_windows,
            ),
            (
                "target-extents",
                "merge.events_outside_target_extents",
                self.outside_extents,
            ),
            (
                "target-entries",
                "merge.usdt_target_entries_dropped_for_hook_starts",
                self.target_entries_dropped,
            ),
            ("keep", "merge.events_not_kept", self.not_kept),
            (
                "keep",
                "merge.events_not_kept_in_tests",
                self.not_kept_in_tests,
            ),
        ]
    }

    /// `(rule, counter)` of every counter (the merge's tests pair each rule with its evidence).
    #[cfg(test)]
    pub(super) fn rules() -> Vec<(&'static str, &'static str)> {
        Counters::default()
            .named()
            .iter()
            .map(|(rule, name, _)| (*rule, *name))
            .collect()
    }

    /// Write the problems (the first [`SHOWN_PROBLEMS`] in full) and the counts into `trace`,
    /// and decide its completeness.
    pub(super) fn write_to(&self, trace: &mut Trace) {
        for p in self.problems.iter().take(SHOWN_PROBLEMS) {
            trace.meta.problems.push(p.clone());
        }
        if self.problems.len() > SHOWN_PROBLEMS {
            trace.meta.problems.push(format!(
                "… and {} more placement problems",
                self.problems.len() - SHOWN_PROBLEMS
            ));
        }
        trace.meta.complete = trace.meta.problems.is_empty();
        trace.meta.counts = trace.count_by_kind();
        for (_, k, v) in self.named() {
            if v > 0 {
                trace.meta.counts.insert(k.into(), v);
            }
        }
    }
}
