//! Partial credit: how much of an answer is right, beside the pass/fail verdict.
//!
//! * A **list** scores its multiset F1 against the gold list: 2·m / (|gold| + |answer|), m the
//!   size of a maximum matching under the scorer's lenient equality (order ignored; for lists
//!   without repeated items this is the set F1). Two empty lists score 1.
//! * An **object** scores the mean of its gold keys' scores (a missing key scores 0).
//! * A **scalar** scores 1 when it matches (with the scorer's leniency), else 0.
//!
//! An instance's partial credit is its answer's score; [`fields`] gives the score of each
//! top-level field (per-field accuracy). A call graph's partial credit is its edge F1.

use serde_json::Value;
use std::collections::BTreeMap;

use crate::compare::{matches, max_matching, scalar_eq, CompareOptions};

/// Score of `answer` against `gold` in [0, 1].
pub fn score(gold: &Value, answer: &Value, opts: &CompareOptions) -> f64 {
    match (gold, answer) {
        (Value::Object(g), Value::Object(a)) => {
            if g.is_empty() {
                return 1.0;
            }
            g.iter()
                .map(|(k, gv)| a.get(k).map_or(0.0, |av| score(gv, av, opts)))
                .sum::<f64>()
                / g.len() as f64
        }
        (Value::Array(g), Value::Array(a)) => list_f1(g, a, opts),
        (Value::Object(_) | Value::Array(_), _) => 0.0,
        (_, Value::Object(_) | Value::Array(_)) => 0.0,
        _ => f64::from(u8::from(scalar_eq(gold, answer))),
    }
}

/// Multiset F1 of two lists under lenient element equality.
pub fn list_f1(g: &[Value], a: &[Value], opts: &CompareOptions) -> f64 {
    if g.is_empty() && a.is_empty() {
        return 1.0;
    }
    let (m, _) = max_matching(g, a, |x, y| matches(x, y, opts));
    2.0 * m as f64 / (g.len() + a.len()) as f64
}

/// Per top-level field scores (an answer that is not an object scores 0 on every field).
pub fn fields(gold: &Value, answer: &Value, opts: &CompareOptions) -> BTreeMap<String, f64> {
    let Value::Object(g) = gold else {
        return BTreeMap::new();
    };
    g.iter()
        .map(|(k, gv)| {
            let s = answer.get(k).map_or(0.0, |av| score(gv, av, opts));
            (k.clone(), s)
        })
        .collect()
}
