//! Rule `keep`: a run asked only an answer whose extractor reads no deeper than the targets'
//! direct calls ([`flux_trace::Keep::TargetCalls`], scope `targets`) keeps only those events.
//! Each thread's output is cut as each extent closes (nothing of the thread is open there, rule
//! `extent-edges`), so the merged trace never holds the calls below the direct ones: on a
//! callee question over SymPy's suite, nearly all of it.
//!
//! What is cut is counted (`merge.events_not_kept`, and of those the ones inside a test's
//! window, `merge.events_not_kept_in_tests`), so a run still reports how many events it merged.
use super::counters::Counters;
use crate::plan::Plan;
use crate::protocol::{HookCapture, CODE_TARGET};
use flux_trace::Event;
use std::collections::{HashMap, HashSet};

/// What the cut needs: which code is targeted, and when tests ran.
pub(super) struct Cut {
    /// The qualified names of the code objects a hook defined as targeted. An activation is
    /// the target's by its name alone, whatever its file: an extractor asks about a function by
    /// name, and every activation it could take for one must keep its calls.
    targeted: HashSet<String>,
    /// Per process, its tests' spans (`t` to `T` records), in time order.
    tests: HashMap<u32, Vec<(u64, u64)>>,
}

impl Cut {
    /// The cut `plan` asks for, if any.
    pub(super) fn new(hook: &HookCapture, plan: &Plan) -> Option<Cut> {
        if !plan.keeps_target_calls() {
            return None;
        }
        let mut targeted = HashSet::new();
        let mut tests: HashMap<u32, Vec<(u64, u64)>> = HashMap::new();
        for s in &hook.streams {
            for c in s.codes.values().filter(|c| c.has(CODE_TARGET)) {
                targeted.insert(c.qualname.to_string());
            }
            tests
                .entry(s.pid)
                .or_default()
                .extend(s.summary.tests.iter().copied());
        }
        for spans in tests.values_mut() {
            spans.sort_unstable();
        }
        Some(Cut { targeted, tests })
    }

    /// What the trace's meta says it kept.
    pub(super) fn kept(&self) -> flux_trace::keep::Kept {
        let mut targets: Vec<String> = self.targeted.iter().cloned().collect();
        targets.sort();
        flux_trace::keep::Kept {
            keep: flux_trace::Keep::TargetCalls,
            targets,
        }
    }

    fn in_test(&self, e: &Event) -> bool {
        self.tests
            .get(&e.pid)
            .is_some_and(|spans| super::scopes::within(spans, e.ts))
    }

    /// Cut `out[from..]`, one extent of a thread's (or what lies between two), to what is kept.
    pub(super) fn apply(&self, out: &mut Vec<Event>, from: usize, c: &mut Counters) {
        let (mut gone, mut in_tests) = (0u64, 0u64);
        flux_trace::keep::retain_target_calls(
            out,
            from,
            |e| self.targeted.contains(e.name()),
            |e| {
                gone += 1;
                in_tests += u64::from(self.in_test(e));
            },
        );
        c.not_kept += gone;
        c.not_kept_in_tests += in_tests;
    }
}
