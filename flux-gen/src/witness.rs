//! The third witness in `flux gen` (issue 23.1): each instance the spec's `[witness]` policy
//! chooses (a seeded share of each kind) is re-derived, after its own run reproduced its gold,
//! by the plain settrace reference (`flux_harvest::witness`): its exact command in its image,
//! the same extractor and template on the reference's trace. An instance it agrees with records
//! the witness in its oracle's provenance (`witness`); one it disagrees with, or cannot check
//! (an incomplete reference trace, a test that ends otherwise under it), is not kept — counted
//! under `witness-disagrees` / `witness-unavailable` — and both answers are kept in the module
//! result ([`WitnessReport`]) and printed.
//!
//! Candidates with the same tests and config share one reference run (as the cross-check does).
use crate::results::{Candidate, ModuleResult};
use crate::runner::Runner;
use crate::spec::GenSpec;
use flux_harvest::witness::{self, Judgement};
use futures_util::stream::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// An instance the witness did not confirm: what the gold said, what the reference said (or why
/// it could not say), and where its run is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WitnessReport {
    pub id: String,
    pub kind: String,
    /// `disagrees` or `unavailable`.
    pub verdict: String,
    /// The gold, cut to the instance's template.
    pub gold: Value,
    /// The reference's answer, or why there is none.
    pub reference: Value,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub run_dir: String,
}

/// The gold of `c` in its template (what the set writes and the witness is compared with).
fn cut_gold(inst: &flux_instance::Instance, c: &Candidate) -> anyhow::Result<Value> {
    let answer = inst.projection.apply(&c.oracle.oracle_answer)?;
    inst.template.validate(&answer)?;
    Ok(answer)
}

/// Witness the candidates `spec.witness` chooses; keep those it agrees with (and every one it
/// was not asked about).
pub async fn witness(
    runner: &Runner,
    spec: &GenSpec,
    kept: Vec<Candidate>,
    r: &mut ModuleResult,
) -> Vec<Candidate> {
    let (chosen, mut out): (Vec<Candidate>, Vec<Candidate>) = kept
        .into_iter()
        .partition(|c| spec.witness.chooses(spec.seed, c.kind, &c.id));
    let mut groups: BTreeMap<String, Vec<Candidate>> = BTreeMap::new();
    for c in chosen {
        groups
            .entry(crate::screen::run_key(&c))
            .or_default()
            .push(c);
    }
    let scratch = runner.work.join("witness");
    let runs = futures_util::stream::iter(groups.into_values().map(|group| {
        let scratch = scratch.clone();
        async move {
            let run = reference_run(runner, &scratch, &group[0]).await;
            (group, run)
        }
    }))
    .buffer_unordered(spec.budget.jobs.max(1))
    .collect::<Vec<_>>()
    .await;
    for (group, run) in runs {
        for mut c in group {
            let judged = match &run {
                Ok(run) => judge_one(&scratch, &c, run),
                Err(e) => (
                    Value::Null,
                    Judgement::Unavailable {
                        why: format!("{e:#}"),
                    },
                ),
            };
            let run_dir = run
                .as_ref()
                .map(|x| x.run_dir.display().to_string())
                .unwrap_or_default();
            let (gold, verdict) = judged;
            let (id, kind) = (c.id.clone(), c.kind.as_str().to_string());
            let report = |verdict: &str, reference: Value| WitnessReport {
                id: id.clone(),
                kind: kind.clone(),
                verdict: verdict.to_string(),
                gold: gold.clone(),
                reference,
                run_dir: run_dir.clone(),
            };
            match verdict {
                Judgement::Agrees => {
                    let run = run.as_ref().expect("agreed on a run");
                    c.oracle.provenance.witness = Some(flux_instance::Witnessed {
                        by: "reference".into(),
                        trace_sha256: run.trace_sha256.clone(),
                        interpreter: run.trace.meta.interpreter.clone(),
                    });
                    r.witnessed += 1;
                    out.push(c);
                }
                Judgement::Disagrees { reference } => {
                    eprintln!(
                        "flux gen: {id}: the reference witness disagrees (dropped):\n{}",
                        witness::disagreement(&gold, &reference)
                    );
                    r.count("witness-disagrees");
                    r.witness.push(report("disagrees", reference));
                }
                Judgement::Unavailable { why } => {
                    eprintln!(
                        "flux gen: {id}: the reference witness could not check it (dropped): {why}"
                    );
                    r.count("witness-unavailable");
                    r.witness.push(report("unavailable", Value::String(why)));
                }
            }
        }
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out
}

/// The candidate's gold in its template and the reference's verdict on `run`.
fn judge_one(
    scratch: &std::path::Path,
    c: &Candidate,
    run: &witness::ReferenceRun,
) -> (Value, Judgement) {
    let inst = match crate::screen::instance_of(scratch, &c.spec) {
        Ok(i) => i,
        Err(e) => {
            let why = format!("the instance does not load: {e:#}");
            return (Value::Null, Judgement::Unavailable { why });
        }
    };
    match cut_gold(&inst, c) {
        Ok(gold) => {
            let j = witness::judge(&inst, &gold, run);
            (gold, j)
        }
        Err(e) => {
            let why = format!("its gold does not fit its template: {e:#}");
            (Value::Null, Judgement::Unavailable { why })
        }
    }
}

/// One reference run of `c`'s tests and config (written as an instance in `scratch` for the
/// run, removed after). Machinery errors (a container that did not start) are retried as the
/// runner retries its own runs.
async fn reference_run(
    runner: &Runner,
    scratch: &std::path::Path,
    c: &Candidate,
) -> anyhow::Result<witness::ReferenceRun> {
    let mut attempt = 1;
    loop {
        let root = scratch.join(flux_container::runtime::new_run_id());
        let dir = crate::screen::write_instance(&root, c)?;
        let r = async {
            let inst = flux_instance::load_instance(&dir)?;
            witness::run_reference(&runner.rt, &inst, &runner.opts).await
        }
        .await;
        let _ = std::fs::remove_dir_all(&root);
        match r {
            Err(e) if attempt < 3 && machinery(&e) => {
                eprintln!(
                    "flux gen: the reference run of {} could not be made (attempt {attempt}), again: {e:#}",
                    c.id
                );
                tokio::time::sleep(std::time::Duration::from_secs(2 * attempt)).await;
                attempt += 1;
            }
            r => return r,
        }
    }
}

/// An error of the machinery (Docker), not of the run: worth another attempt.
fn machinery(e: &anyhow::Error) -> bool {
    e.chain()
        .any(|c| c.downcast_ref::<flux_container::Error>().is_some())
}
