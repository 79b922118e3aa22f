//! Automatic failure classes, after the patterns the SWE-Flux paper reports, decided only
//! where the gold (a projection of the trace) can tell; otherwise `wrong_value`.
//!
//! The first list field that differs is compared element by element, each element reduced to
//! its *identity* (its `line`, `file`, `function`, `variable`, … fields: where execution went)
//! and its *values* (everything else: reprs, counts):
//!
//! | class | rule |
//! |---|---|
//! | `format` | no answer, not JSON, or not the template's shape (a key missing, a list where an object is due) |
//! | `stopped_early` | the answer's list is a strict prefix of the gold's (in identity), or a count-like number (`*count*`, `*iterations*`, `*number*`, `*total*`) below the gold's, or a call graph missing edges and adding none |
//! | `wrong_path` | the answer names a step the trace never took: an identity absent from every gold element, or a call-graph edge that is not in the gold |
//! | `right_path_wrong_values` | the identities match the gold's in order, the values differ |
//! | `aggregation` | the same steps but counted or ordered wrongly: equal identity sets with a different multiset or order, or a count-like number above the gold's |
//! | `wrong_value` | anything else (a wrong scalar, a wrong boolean) |
//!
//! These are heuristics on the answer's structure, named for what a reader would check
//! first; the HTML report shows gold and answer side by side for every failure.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A failure class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    Format,
    StoppedEarly,
    WrongPath,
    RightPathWrongValues,
    Aggregation,
    WrongValue,
}

impl FailureClass {
    pub const ALL: [FailureClass; 6] = [
        FailureClass::Format,
        FailureClass::StoppedEarly,
        FailureClass::WrongPath,
        FailureClass::RightPathWrongValues,
        FailureClass::Aggregation,
        FailureClass::WrongValue,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FailureClass::Format => "format",
            FailureClass::StoppedEarly => "stopped_early",
            FailureClass::WrongPath => "wrong_path",
            FailureClass::RightPathWrongValues => "right_path_wrong_values",
            FailureClass::Aggregation => "aggregation",
            FailureClass::WrongValue => "wrong_value",
        }
    }

    /// One line for readers of a report.
    pub fn describe(self) -> &'static str {
        match self {
            FailureClass::Format => "no usable answer of the template's shape",
            FailureClass::StoppedEarly => "stopped early: a prefix of what ran, or a count too low",
            FailureClass::WrongPath => "followed a path that did not run",
            FailureClass::RightPathWrongValues => "right path, wrong values",
            FailureClass::Aggregation => {
                "aggregation error: the right steps counted or ordered wrongly"
            }
            FailureClass::WrongValue => "a wrong value the gold cannot explain further",
        }
    }
}

const IDENTITY: &[&str] = &[
    "line",
    "lineno",
    "file",
    "filename",
    "path",
    "func",
    "function",
    "qualname",
    "callee",
    "caller",
    "variable",
    "name",
    "def_line",
    "use_line",
    "test",
    "exception",
    "type",
    "event",
    "header",
];

fn is_count_key(k: &str) -> bool {
    let k = k.to_ascii_lowercase();
    ["count", "iterations", "number", "total", "times"]
        .iter()
        .any(|w| k.contains(w))
}

/// The identity of a list element: its identity fields (or the element itself when it is a
/// scalar or has none).
fn identity(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let id: serde_json::Map<String, Value> = m
                .iter()
                .filter(|(k, _)| IDENTITY.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            if id.is_empty() {
                v.clone()
            } else {
                Value::Object(id)
            }
        }
        _ => v.clone(),
    }
}

fn lenient(a: &Value, b: &Value) -> bool {
    crate::compare::matches(a, b, &Default::default())
}

fn classify_lists(g: &[Value], a: &[Value]) -> FailureClass {
    let gi: Vec<Value> = g.iter().map(identity).collect();
    let ai: Vec<Value> = a.iter().map(identity).collect();
    // A step the trace never took.
    if ai.iter().any(|x| !gi.iter().any(|y| lenient(y, x))) {
        return FailureClass::WrongPath;
    }
    let same_order = gi.len() == ai.len() && gi.iter().zip(&ai).all(|(x, y)| lenient(x, y));
    if same_order {
        return FailureClass::RightPathWrongValues;
    }
    if ai.len() < gi.len() && gi.iter().zip(&ai).all(|(x, y)| lenient(x, y)) {
        return FailureClass::StoppedEarly;
    }
    // Every answered step ran; the multiset or the order differs.
    FailureClass::Aggregation
}

/// The class of a failed, parsed answer against its gold. `mismatch_path` is the JSON
/// pointer of the first difference (from [`crate::compare`]).
pub fn classify(gold: &Value, answer: &Value, mismatch_path: &str) -> FailureClass {
    // Walk to the first difference, remembering the innermost list on the way.
    let segs: Vec<String> = mismatch_path
        .split('/')
        .skip(1)
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect();
    let (mut g, mut a) = (gold, answer);
    let mut last_key = String::new();
    for s in &segs {
        if let (Value::Array(gl), Value::Array(al)) = (g, a) {
            return classify_lists(gl, al);
        }
        let (ng, na) = match (g, a) {
            (Value::Object(gm), Value::Object(am)) => (gm.get(s), am.get(s)),
            (Value::Array(gl), Value::Array(al)) => {
                let i: usize = s.parse().unwrap_or(usize::MAX);
                (gl.get(i), al.get(i))
            }
            _ => (None, None),
        };
        let (Some(ng), Some(na)) = (ng, na) else {
            return FailureClass::Format;
        };
        last_key = s.clone();
        g = ng;
        a = na;
    }
    match (g, a) {
        (Value::Array(gl), Value::Array(al)) => classify_lists(gl, al),
        (Value::Array(_) | Value::Object(_), _) | (_, Value::Array(_) | Value::Object(_)) => {
            FailureClass::Format
        }
        (Value::Number(gn), _) if is_count_key(&last_key) => {
            let gv = gn.as_f64().unwrap_or(0.0);
            let av = a
                .as_f64()
                .or_else(|| a.as_str().and_then(|s| s.trim().parse().ok()));
            match av {
                Some(av) if av < gv => FailureClass::StoppedEarly,
                Some(av) if av > gv => FailureClass::Aggregation,
                _ => FailureClass::WrongValue,
            }
        }
        _ => FailureClass::WrongValue,
    }
}

/// The class of a failed call graph from its edge counts.
pub fn classify_call_graph(fp: usize, fn_: usize) -> FailureClass {
    if fp > 0 {
        FailureClass::WrongPath
    } else if fn_ > 0 {
        FailureClass::StoppedEarly
    } else {
        FailureClass::WrongValue
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn path(lines: &[i64]) -> Value {
        json!({"executed_path": lines.iter().map(|l| json!({"file": "a.py", "line": l})).collect::<Vec<_>>()})
    }

    #[test]
    fn classes_of_path_answers() {
        let gold = path(&[1, 2, 3, 2, 3, 4]);
        let c = |a: &Value| {
            let m = crate::compare::compare(&gold, a, &Default::default()).unwrap_err();
            classify(&gold, a, &m.path)
        };
        assert_eq!(c(&path(&[1, 2, 3])), FailureClass::StoppedEarly);
        assert_eq!(c(&path(&[1, 2, 5, 4])), FailureClass::WrongPath);
        assert_eq!(c(&path(&[1, 2, 3, 4])), FailureClass::Aggregation);
        assert_eq!(c(&path(&[1, 3, 2, 2, 3, 4])), FailureClass::Aggregation);
        let vals = json!({"observed_state": [{"variable": "x", "value": "1"}, {"variable": "y", "value": "2"}]});
        let wrong = json!({"observed_state": [{"variable": "x", "value": "1"}, {"variable": "y", "value": "3"}]});
        let m = crate::compare::compare(&vals, &wrong, &Default::default()).unwrap_err();
        assert_eq!(
            classify(&vals, &wrong, &m.path),
            FailureClass::RightPathWrongValues
        );
    }

    #[test]
    fn classes_of_scalars() {
        let gold = json!({"loop_iteration_count": 6, "raised": true});
        for (a, want) in [
            (
                json!({"loop_iteration_count": 4, "raised": true}),
                FailureClass::StoppedEarly,
            ),
            (
                json!({"loop_iteration_count": 7, "raised": true}),
                FailureClass::Aggregation,
            ),
            (
                json!({"loop_iteration_count": 6, "raised": false}),
                FailureClass::WrongValue,
            ),
            (
                json!({"loop_iteration_count": [6], "raised": true}),
                FailureClass::Format,
            ),
        ] {
            let m = crate::compare::compare(&gold, &a, &Default::default()).unwrap_err();
            assert_eq!(classify(&gold, &a, &m.path), want, "{a}");
        }
        let m = crate::compare::compare(&gold, &json!({"raised": true}), &Default::default())
            .unwrap_err();
        assert_eq!(
            classify(&gold, &json!({"raised": true}), &m.path),
            FailureClass::Format
        );
        assert_eq!(classify_call_graph(1, 0), FailureClass::WrongPath);
        assert_eq!(classify_call_graph(0, 2), FailureClass::StoppedEarly);
    }
}
