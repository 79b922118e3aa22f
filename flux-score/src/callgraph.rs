//! TraceEval-style call-graph scoring: `{"call_graph": {caller: [callees]}}` answers are scored
//! by edge precision / recall / F1 (micro-averaged over instances in the report). Edges are
//! deduplicated; caller and callee names match with the scorer's leniency (dotted-name and path
//! suffixes, `<class '…'>`, `|||` alternatives), pairing edges by a maximum matching.

use serde::Serialize;
use serde_json::Value;

use crate::compare::{max_matching, scalar_eq};

/// True when `v` is `{"call_graph": {caller: [callees...]}}`.
pub fn is_call_graph(v: &Value) -> bool {
    v.get("call_graph")
        .and_then(|g| g.as_object())
        .is_some_and(|m| m.values().all(|x| x.is_array()))
}

/// Edge counts of one comparison; add them up for micro averages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct EdgeCounts {
    pub tp: usize,
    pub fp: usize,
    #[serde(rename = "fn")]
    pub fn_: usize,
}

impl EdgeCounts {
    pub fn add(&mut self, o: EdgeCounts) {
        self.tp += o.tp;
        self.fp += o.fp;
        self.fn_ += o.fn_;
    }
    pub fn precision(&self) -> f64 {
        ratio(self.tp, self.tp + self.fp)
    }
    pub fn recall(&self) -> f64 {
        ratio(self.tp, self.tp + self.fn_)
    }
    pub fn f1(&self) -> f64 {
        let (p, r) = (self.precision(), self.recall());
        if p + r == 0.0 {
            0.0
        } else {
            2.0 * p * r / (p + r)
        }
    }
}

/// An empty gold and an empty answer agree perfectly: 0/0 counts as 1.
fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        1.0
    } else {
        a as f64 / b as f64
    }
}

fn edges(v: &Value) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    if let Some(m) = v.get("call_graph").and_then(|g| g.as_object()) {
        for (caller, callees) in m {
            for c in callees.as_array().into_iter().flatten() {
                let callee = match c {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                let e = Value::Array(vec![Value::String(caller.clone()), Value::String(callee)]);
                if !out.contains(&e) {
                    out.push(e);
                }
            }
        }
    }
    out
}

fn edge_eq(a: &Value, b: &Value) -> bool {
    match (a.as_array(), b.as_array()) {
        (Some(x), Some(y)) if x.len() == 2 && y.len() == 2 => {
            scalar_eq(&x[0], &y[0]) && scalar_eq(&x[1], &y[1])
        }
        _ => false,
    }
}

/// Edge counts of an answer against the gold. An answer without a `call_graph` object has no
/// edges (every gold edge is a false negative).
pub fn score_edges(gold: &Value, answer: &Value) -> EdgeCounts {
    let g = edges(gold);
    let a = edges(answer);
    let (tp, _) = max_matching(&g, &a, edge_eq);
    EdgeCounts {
        tp,
        fp: a.len() - tp,
        fn_: g.len() - tp,
    }
}
