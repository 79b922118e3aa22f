//! The 14 SWE-Flux question kinds and the per-kind screening gate.
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A question kind, spelled in files exactly as SWE-Flux's `question_kind` strings.
/// S = about one test's run, M = across the tests of the suite. `S7_Invariants` is flux's
/// single-test invariants kind (SWE-Flux has only `M7_Invariants`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum QuestionKind {
    #[serde(rename = "S1_IntraProceduralCFG")]
    S1,
    #[serde(rename = "S2_Loops")]
    S2,
    #[serde(rename = "S3_ProgramState")]
    S3,
    #[serde(rename = "S4_DataFlow")]
    S4,
    #[serde(rename = "S5_Exceptions")]
    S5,
    #[serde(rename = "S6_InterProceduralCFG")]
    S6,
    #[serde(rename = "S7_Invariants")]
    S7,
    #[serde(rename = "M1_IntraProceduralCFG")]
    M1,
    #[serde(rename = "M2_Loops")]
    M2,
    #[serde(rename = "M3_ProgramState")]
    M3,
    #[serde(rename = "M4_DataFlow")]
    M4,
    #[serde(rename = "M5_Exceptions")]
    M5,
    #[serde(rename = "M6_InterProceduralCFG")]
    M6,
    #[serde(rename = "M7_Invariants")]
    M7,
}

impl QuestionKind {
    /// Every kind, in declaration order. Written out (a `const` cannot enumerate an enum), so
    /// `tests::all_holds_every_variant` checks it against the variants serde's derive lists:
    /// a variant left out of it would never be parsed ([`QuestionKind::parse`] looks here).
    pub const ALL: [QuestionKind; 14] = [
        QuestionKind::S1,
        QuestionKind::S2,
        QuestionKind::S3,
        QuestionKind::S4,
        QuestionKind::S5,
        QuestionKind::S6,
        QuestionKind::S7,
        QuestionKind::M1,
        QuestionKind::M2,
        QuestionKind::M3,
        QuestionKind::M4,
        QuestionKind::M5,
        QuestionKind::M6,
        QuestionKind::M7,
    ];

    /// The `question_kind` string.
    pub fn as_str(self) -> &'static str {
        match self {
            QuestionKind::S1 => "S1_IntraProceduralCFG",
            QuestionKind::S2 => "S2_Loops",
            QuestionKind::S3 => "S3_ProgramState",
            QuestionKind::S4 => "S4_DataFlow",
            QuestionKind::S5 => "S5_Exceptions",
            QuestionKind::S6 => "S6_InterProceduralCFG",
            QuestionKind::S7 => "S7_Invariants",
            QuestionKind::M1 => "M1_IntraProceduralCFG",
            QuestionKind::M2 => "M2_Loops",
            QuestionKind::M3 => "M3_ProgramState",
            QuestionKind::M4 => "M4_DataFlow",
            QuestionKind::M5 => "M5_Exceptions",
            QuestionKind::M6 => "M6_InterProceduralCFG",
            QuestionKind::M7 => "M7_Invariants",
        }
    }

    /// Parse a `question_kind` string.
    pub fn parse(s: &str) -> Option<QuestionKind> {
        QuestionKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// True for the M kinds (answers span the tests of a suite).
    pub fn is_multi_test(self) -> bool {
        self.as_str().starts_with('M')
    }

    /// The family of conventions its questions are written under, the family of its preamble
    /// (`flux_instance::preamble`): S1 and M1 share `control-flow`, and so on.
    pub fn family(self) -> &'static str {
        match self {
            QuestionKind::S1 | QuestionKind::M1 => "control-flow",
            QuestionKind::S2 | QuestionKind::M2 => "loops",
            QuestionKind::S3 | QuestionKind::M3 => "state",
            QuestionKind::S4 | QuestionKind::M4 => "data-flow",
            QuestionKind::S5 | QuestionKind::M5 => "exceptions",
            QuestionKind::S6 | QuestionKind::M6 => "calls",
            QuestionKind::S7 | QuestionKind::M7 => "invariants",
        }
    }

    /// The default screening minimum of [`answer_size`] for an answer of this kind: below it
    /// the question is too easy to keep (e.g. an executed path of two lines). Fixed-shape answers
    /// (a loop count, an invariant record) have minimum 1 and are screened by other means.
    pub fn min_answer_size(self) -> usize {
        match self {
            QuestionKind::S1 => 3,
            QuestionKind::S2 => 1,
            QuestionKind::S3 => 1,
            QuestionKind::S4 => 2,
            QuestionKind::S5 => 3,
            QuestionKind::S6 => 2,
            QuestionKind::S7 => 1,
            QuestionKind::M1 => 2,
            QuestionKind::M2 => 2,
            QuestionKind::M3 => 2,
            QuestionKind::M4 => 2,
            QuestionKind::M5 => 2,
            QuestionKind::M6 => 2,
            QuestionKind::M7 => 1,
        }
    }
}

impl std::fmt::Display for QuestionKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The size of an answer for screening: the number of non-null scalar leaves (numbers, strings,
/// booleans), counted through lists and objects (object keys are not counted).
/// `{"executed_path":[{"line":3},{"line":4}]}` has size 2; `{"x":null,"y":[]}` has size 0.
pub fn answer_size(v: &Value) -> usize {
    match v {
        Value::Null => 0,
        Value::Bool(_) | Value::Number(_) | Value::String(_) => 1,
        Value::Array(items) => items.iter().map(answer_size).sum(),
        Value::Object(map) => map.values().map(answer_size).sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kinds_round_trip_through_their_strings() {
        for k in QuestionKind::ALL {
            assert_eq!(QuestionKind::parse(k.as_str()), Some(k));
            let s = serde_json::to_string(&k).unwrap();
            assert_eq!(s, format!("\"{}\"", k.as_str()));
        }
        assert_eq!(QuestionKind::parse("S8_Nope"), None);
        assert!(QuestionKind::M3.is_multi_test() && !QuestionKind::S3.is_multi_test());
    }

    /// `ALL` was written by hand and nothing compared it with the enum: a new variant left out
    /// of it could never be parsed. The variants' names come from serde's derive here (its
    /// unknown-variant error lists every one, in declaration order).
    #[test]
    fn all_holds_every_variant() {
        let e = serde_json::from_str::<QuestionKind>("\"?\"")
            .unwrap_err()
            .to_string();
        let listed = e
            .split_once("expected one of ")
            .map(|(_, l)| l.split(" at line").next().unwrap_or(l))
            .unwrap_or_else(|| panic!("serde's error lists no variants: {e}"));
        let variants: Vec<&str> = listed.split(", ").map(|v| v.trim_matches('`')).collect();
        let all: Vec<&str> = QuestionKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(
            all, variants,
            "QuestionKind::ALL against the enum's variants"
        );
    }

    #[test]
    fn answer_size_counts_non_null_scalar_leaves() {
        assert_eq!(
            answer_size(&json!({"executed_path":[{"line":3},{"line":4}]})),
            2
        );
        assert_eq!(answer_size(&json!({"x": null, "y": [], "z": {}})), 0);
        assert_eq!(
            answer_size(&json!({"g": {"a": ["b", "c"], "d": []}, "ok": false})),
            3
        );
    }
}
