//! What a run keeps of its trace when its question reads less than all of it.
//!
//! A callee question (`callees_across_tests` without `transitive`) reads the activations of its
//! function and the calls they make directly, nothing below them; yet a trace with scope
//! `targets` holds every call inside the targets' extents, most of them deeper (SymPy's
//! `Add.flatten`: 49.6 M events in the suite's largest part, nearly all calls below its
//! callees). A run that is only asked that answer keeps [`Keep::TargetCalls`]: the events of
//! targeted activations and of the activations they call directly, and the test boundaries. The
//! merge applies it to each extent as the extent closes (`flux_merge`'s rule `keep`), so the
//! merged trace never holds the rest. [`retain_target_calls`] is the one definition, shared by
//! the merge and by the extractors' test that an extractor declaring it answers the same from
//! the kept events as from all of them.
use crate::{Event, Kind};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// What of the merged trace a run keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Keep {
    /// Every event (what a harvest writes as the run's trace).
    #[default]
    All,
    /// Test boundaries, the events of targeted activations, and the events of the activations
    /// those call directly.
    TargetCalls,
}

/// What a trace that is not whole kept (`Meta::kept`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kept {
    pub keep: Keep,
    /// The names (as [`Event::name`]) of the targeted code: their activations kept their events
    /// and their direct calls'. An answer about a function not among them cannot be taken from
    /// the trace.
    pub targets: Vec<String>,
}

impl Keep {
    pub fn is_all(&self) -> bool {
        *self == Keep::All
    }
}

/// Of `events[from..]`, keep test boundaries (activation 0), the events of activations with a
/// call event `is_target` accepts (the merge and the extractors' test judge it by the name
/// extractors look functions up by, [`Event::name`]), and the events of the activations those are parents of;
/// `dropped` sees each event removed. Activations must not span the cut at `from`: the merge
/// calls this at extent edges, where nothing of the thread is open. Returns how many were
/// removed.
pub fn retain_target_calls(
    events: &mut Vec<Event>,
    from: usize,
    is_target: impl Fn(&Event) -> bool,
    mut dropped: impl FnMut(&Event),
) -> usize {
    let targets: HashSet<u64> = events[from..]
        .iter()
        .filter(|e| e.ev == Kind::Call && is_target(e))
        .map(|e| e.activation)
        .collect();
    let before = events.len();
    let mut i = from;
    // An in-place retain of the tail (`Vec::retain` would walk the kept head too).
    for j in from..before {
        let e = &events[j];
        let keep =
            e.activation == 0 || targets.contains(&e.activation) || targets.contains(&e.parent);
        if keep {
            events.swap(i, j);
            i += 1;
        } else {
            dropped(e);
        }
    }
    events.truncate(i);
    before - i
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Event, Kind, Source};

    fn ev(kind: Kind, act: u64, parent: u64, func: &str) -> Event {
        let mut e = Event::new(act * 10, 1, 1, kind, Source::Hook);
        e.activation = act;
        e.frame = act;
        e.parent = parent;
        e.code = crate::Codes::default().intern(crate::CodeNames {
            func: func.into(),
            qualname: func.into(),
            ..Default::default()
        });
        e
    }

    #[test]
    fn keeps_targets_their_direct_calls_and_test_boundaries_only() {
        // t (1) calls a (2), which calls b (3); t then calls itself (4), which calls c (5).
        let mut v = vec![
            ev(Kind::TestStart, 0, 0, ""),
            ev(Kind::Call, 1, 0, "t"),
            ev(Kind::Call, 2, 1, "a"),
            ev(Kind::Call, 3, 2, "b"),
            ev(Kind::Return, 3, 2, "b"),
            ev(Kind::Return, 2, 1, "a"),
            ev(Kind::Call, 4, 1, "t"),
            ev(Kind::Line, 4, 1, "t"),
            ev(Kind::Call, 5, 4, "c"),
            ev(Kind::Return, 5, 4, "c"),
            ev(Kind::Return, 4, 1, "t"),
            ev(Kind::Return, 1, 0, "t"),
            ev(Kind::TestEnd, 0, 0, ""),
        ];
        let mut gone = Vec::new();
        let n = retain_target_calls(&mut v, 1, |e| e.name() == "t", |e| gone.push(e.activation));
        assert_eq!(n, 2);
        assert_eq!(gone, vec![3, 3]);
        let kept: Vec<(Kind, u64)> = v.iter().map(|e| (e.ev, e.activation)).collect();
        assert_eq!(
            kept,
            vec![
                (Kind::TestStart, 0),
                (Kind::Call, 1),
                (Kind::Call, 2),
                (Kind::Return, 2),
                (Kind::Call, 4),
                (Kind::Line, 4),
                (Kind::Call, 5),
                (Kind::Return, 5),
                (Kind::Return, 4),
                (Kind::Return, 1),
                (Kind::TestEnd, 0),
            ]
        );
    }

    #[test]
    fn the_head_before_the_cut_is_left_alone() {
        let mut v = vec![ev(Kind::Call, 7, 0, "x"), ev(Kind::Return, 7, 0, "x")];
        v.push(ev(Kind::Call, 8, 0, "y"));
        let n = retain_target_calls(&mut v, 2, |e| e.name() == "t", |_| {});
        assert_eq!(n, 1);
        assert_eq!(v.len(), 2);
    }
}
