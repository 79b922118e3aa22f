//! What a harvest does with its gold files: compare two runs (`--twice`), compare with the
//! stored files (`--check`), or write them; each of the two files judged on its own.
//!
//! Rules, each with its verdict ([`Verdict`]) in the instance's report:
//! - **Separately.** `oracle.json` (the gold answer) and `callgraph.json` (the TraceEval-style
//!   call graph) each get a verdict and their own section in an error: a call graph that
//!   differs no longer hides whether the gold answer reproduced, nor the other way round.
//! - **Two runs must agree** (`--twice`, for generated instances): the test runs twice, from
//!   clean containers. Answers that differ are refused — nothing is written, the error shows
//!   the difference — since a gold answer that depends on the run is no gold answer. A call
//!   graph that differs (SymPy's assumption system shuffles with an unseeded RNG) is
//!   [`Verdict::Unstable`]: neither written nor compared, and the report says so; the answer is
//!   kept when it agreed.
//! - **Never silently replaced.** Writing checks both files for conflicts before either is
//!   written; `--replace` keeps the replaced files in the instance's `history/`.
use crate::{json_diff, Harvested, InstanceReport, Status};
use anyhow::{bail, Result};
use flux_instance::{Instance, Oracle, Stored, WriteOutcome};
use serde::Serialize;
use serde_json::Value;

/// What happened to one gold file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// There was none; it was written.
    Created,
    /// The stored one holds the same; untouched.
    Unchanged,
    /// A different stored one was replaced (`--replace`; kept in `history/`).
    Replaced,
    /// `--check`: the fresh run gave the stored one.
    Reproduced,
    /// `--check`, or a write refused: the stored one differs.
    Differs,
    /// `--twice`: the two runs disagreed.
    Unstable,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Created => "created",
            Verdict::Unchanged => "unchanged",
            Verdict::Replaced => "replaced",
            Verdict::Reproduced => "reproduced",
            Verdict::Differs => "differs",
            Verdict::Unstable => "unstable",
        }
    }
}

/// What the harvest takes as fresh: one run, or what two runs agreed on.
pub(crate) struct Fresh {
    pub oracle: Oracle,
    pub graph: Option<Value>,
    /// `--twice` found the call graphs different.
    pub graph_unstable: bool,
}

impl From<Harvested> for Fresh {
    fn from(h: Harvested) -> Fresh {
        Fresh {
            oracle: h.oracle,
            graph: h.graph,
            graph_unstable: false,
        }
    }
}

/// `--twice`: the answers of `a` and `b` must be equal; call graphs that differ are dropped.
pub(crate) fn agree(a: Harvested, b: Harvested, report: &mut InstanceReport) -> Result<Fresh> {
    if a.oracle.oracle_answer != b.oracle.oracle_answer {
        report.oracle = Some(Verdict::Unstable);
        bail!(
            "not deterministic: two runs gave different answers, so neither is a gold answer \
             (runs in {} and {}):\n{}",
            a.run_dir.display(),
            b.run_dir.display(),
            json_diff(
                &a.oracle.oracle_answer,
                &b.oracle.oracle_answer,
                "first",
                "second"
            )
        );
    }
    let graph_unstable = a.graph != b.graph;
    if graph_unstable {
        report.call_graph = Some(Verdict::Unstable);
        let diff = match (&a.graph, &b.graph) {
            (Some(x), Some(y)) => json_diff(x, y, "first", "second"),
            _ => String::new(),
        };
        report.warnings.push(format!(
            "the call graph differs between two runs: not written, not compared\n{diff}"
        ));
    }
    Ok(Fresh {
        oracle: a.oracle,
        graph: if graph_unstable { None } else { a.graph },
        graph_unstable,
    })
}

/// `--check`: each stored file must equal the fresh one; an error has one section per file.
pub(crate) fn check_against(
    inst: &Instance,
    stored: &Oracle,
    fresh: &Fresh,
    report: &mut InstanceReport,
) -> Result<Status> {
    let mut problems = Vec::new();
    let o = &fresh.oracle;
    let same_question =
        stored.question_kind == o.question_kind && stored.template_answer == o.template_answer;
    if stored.oracle_answer == o.oracle_answer && same_question {
        report.oracle = Some(Verdict::Reproduced);
    } else {
        report.oracle = Some(Verdict::Differs);
        if stored.oracle_answer != o.oracle_answer {
            problems.push(format!(
                "oracle: oracle_answer differs from {}:\n{}",
                inst.oracle_path().display(),
                json_diff(
                    &stored.oracle_answer,
                    &o.oracle_answer,
                    "stored",
                    "harvested"
                )
            ));
        }
        if !same_question {
            problems.push(format!(
                "oracle: question_kind/template_answer differ: stored {} {}, instance {} {}",
                stored.question_kind, stored.template_answer, o.question_kind, o.template_answer
            ));
        }
    }
    let graph_path = inst.dir.join(flux_instance::CALL_GRAPH_FILE);
    if graph_path.exists() {
        match &fresh.graph {
            Some(graph) => {
                let old = flux_instance::read_call_graph(&inst.dir)?;
                if &old == graph {
                    report.call_graph = Some(Verdict::Reproduced);
                } else {
                    report.call_graph = Some(Verdict::Differs);
                    problems.push(format!(
                        "call graph: differs from {}:\n{}",
                        graph_path.display(),
                        json_diff(&old, graph, "stored", "harvested")
                    ));
                }
            }
            None if fresh.graph_unstable => problems.push(format!(
                "call graph: {} is stored, but two runs gave different call graphs",
                graph_path.display()
            )),
            None => {}
        }
    }
    if problems.is_empty() {
        return Ok(Status::Reproduced);
    }
    bail!(
        "--check: not reproduced ({})\n{}",
        verdicts(report),
        problems.join("\n")
    )
}

/// `oracle reproduced, call graph differs`: the verdicts of a report.
pub fn verdicts(r: &InstanceReport) -> String {
    let mut parts = Vec::new();
    if let Some(v) = r.oracle {
        parts.push(format!("oracle {}", v.as_str()));
    }
    if let Some(v) = r.call_graph {
        parts.push(format!("call graph {}", v.as_str()));
    }
    parts.join(", ")
}

fn verdict_of(w: WriteOutcome) -> Verdict {
    match w {
        WriteOutcome::Created => Verdict::Created,
        WriteOutcome::Unchanged => Verdict::Unchanged,
        WriteOutcome::Replaced => Verdict::Replaced,
    }
}

/// Write the oracle and the call graph, checking both for conflicts first (once) so that a
/// refusal leaves both files as they were. With `replace`, the files replaced are kept in the
/// instance's `history/`.
pub(crate) fn write_outputs(
    inst: &Instance,
    fresh: &Fresh,
    replace: bool,
    report: &mut InstanceReport,
) -> Result<Status> {
    let oracle = &fresh.oracle;
    let graph = fresh.graph.as_ref();
    let stored_oracle = flux_instance::stored_oracle(&inst.dir, oracle);
    let stored_graph = graph.map(|g| flux_instance::stored_call_graph(&inst.dir, g));
    if !replace {
        let mut conflicts = Vec::new();
        match &stored_oracle {
            Stored::Absent => {}
            Stored::Same => report.oracle = Some(Verdict::Unchanged),
            Stored::Differs(old) => {
                report.oracle = Some(Verdict::Differs);
                conflicts.push(format!(
                    "oracle: {} holds a different answer:\n{}",
                    inst.oracle_path().display(),
                    json_diff(old, &oracle.oracle_answer, "stored", "harvested")
                ))
            }
            Stored::Unreadable(e) => {
                report.oracle = Some(Verdict::Differs);
                conflicts.push(format!("oracle: {e} (the file is kept)"))
            }
        }
        if let (Some(stored), Some(graph)) = (&stored_graph, graph) {
            match stored {
                Stored::Absent => {}
                Stored::Same => report.call_graph = Some(Verdict::Unchanged),
                Stored::Differs(old) => {
                    report.call_graph = Some(Verdict::Differs);
                    conflicts.push(format!(
                        "call graph: {} holds a different call graph:\n{}",
                        inst.dir.join(flux_instance::CALL_GRAPH_FILE).display(),
                        json_diff(old, graph, "stored", "harvested")
                    ))
                }
                Stored::Unreadable(e) => {
                    report.call_graph = Some(Verdict::Differs);
                    conflicts.push(format!("call graph: {e} (the file is kept)"))
                }
            }
        }
        if !conflicts.is_empty() {
            bail!(
                "not written ({}): {} (use --replace to replace it)",
                verdicts(report),
                conflicts.join("\n")
            );
        }
    }
    let o = flux_instance::write_oracle_over(&inst.dir, oracle, &stored_oracle)?;
    report.oracle = Some(verdict_of(o));
    let g = match (graph, &stored_graph) {
        (Some(graph), Some(stored)) => {
            let g = flux_instance::write_call_graph_over(&inst.dir, graph, stored)?;
            if !fresh.graph_unstable {
                report.call_graph = Some(verdict_of(g));
            }
            g
        }
        _ => WriteOutcome::Unchanged,
    };
    Ok(match (o, g) {
        (WriteOutcome::Replaced, _) | (_, WriteOutcome::Replaced) => Status::Replaced,
        (WriteOutcome::Created, _) | (_, WriteOutcome::Created) => Status::Created,
        _ => Status::Unchanged,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn harvested(answer: Value, graph: Option<Value>, dir: &str) -> Harvested {
        let oracle: Oracle = serde_json::from_value(json!({
            "question_kind": "S1_IntraProceduralCFG",
            "question": "q",
            "template_answer": {"executed_path": [{"line": "int"}]},
            "oracle_answer": answer,
            "provenance": {"image": "i", "interpreter": "3.11.2", "flux_version": "0",
                "trace_sha256": "0", "harvested_at": "t", "complete": true,
                "extractor": "executed_path"}
        }))
        .unwrap();
        Harvested {
            run_dir: dir.into(),
            _in_use: None,
            oracle,
            graph,
        }
    }

    fn report() -> InstanceReport {
        crate::new_report(std::path::Path::new("d"), crate::Runtime::Docker)
    }

    /// 17.4: a run that differs from another (SymPy's unseeded shuffles) was harvested as gold
    /// as long as it was the first; `--twice` refuses answers that differ, and keeps an answer
    /// that agreed while dropping a call graph that did not.
    #[test]
    fn two_runs_that_disagree_give_no_gold_answer() {
        let a = json!({"executed_path": [{"line": 1}]});
        let b = json!({"executed_path": [{"line": 2}]});
        let g1 = json!({"m.f": ["m.g"]});
        let g2 = json!({"m.f": ["m.h"]});
        let mut r = report();
        let e = agree(
            harvested(a.clone(), Some(g1.clone()), "/runs/1"),
            harvested(b, Some(g1.clone()), "/runs/2"),
            &mut r,
        )
        .err()
        .unwrap()
        .to_string();
        assert!(
            e.starts_with("not deterministic: two runs gave different answers"),
            "{e}"
        );
        assert!(e.contains("(runs in /runs/1 and /runs/2)"), "{e}");
        assert!(
            e.contains("at /executed_path/0/line: first 1, second 2"),
            "{e}"
        );
        assert_eq!(r.oracle, Some(Verdict::Unstable));

        let mut r = report();
        let f = agree(
            harvested(a.clone(), Some(g1.clone()), "/runs/1"),
            harvested(a.clone(), Some(g2), "/runs/2"),
            &mut r,
        )
        .unwrap();
        assert_eq!(f.oracle.oracle_answer, a);
        assert_eq!(f.graph, None);
        assert!(f.graph_unstable);
        assert_eq!(r.call_graph, Some(Verdict::Unstable));
        assert!(r.warnings[0].starts_with("the call graph differs between two runs"));

        let mut r = report();
        let f = agree(
            harvested(a.clone(), Some(g1.clone()), "/runs/1"),
            harvested(a, Some(g1.clone()), "/runs/2"),
            &mut r,
        )
        .unwrap();
        assert_eq!(f.graph, Some(g1));
        assert!(r.warnings.is_empty() && r.call_graph.is_none());
    }
}
