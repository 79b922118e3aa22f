//! The offline merge corpus: every fixture under `tests/corpus/` (the recorded inputs of a
//! witness-corpus program, see `flux_merge::fixture` and `cargo xtask record-merge-corpus`) is
//! merged and rendered, and the text must equal its snapshot (`<fixture>.snap`). Runs without
//! root, eBPF or Python. `UPDATE_EXPECT=1` rewrites the snapshots; review their diff.
use flux_merge::fixture::render;
use std::path::{Path, PathBuf};

use crate::support::load;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

/// Every fixture: (directory name, program, path).
fn fixtures() -> Vec<(String, String, PathBuf)> {
    let mut v = Vec::new();
    for d in std::fs::read_dir(corpus_dir()).expect("tests/corpus exists") {
        let d = d.unwrap().path();
        if !d.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(&d).unwrap() {
            let f = f.unwrap().path();
            let n = f.file_name().unwrap().to_string_lossy().into_owned();
            if let Some(stem) = n.strip_suffix(".jsonl.gz") {
                let dir = d.file_name().unwrap().to_string_lossy().into_owned();
                v.push((dir, stem.to_string(), f.clone()));
            }
        }
    }
    v.sort();
    v
}

fn snapshot_of(path: &Path) -> PathBuf {
    let s = path.to_string_lossy();
    PathBuf::from(format!("{}.snap", s.trim_end_matches(".jsonl.gz")))
}

/// The first lines where `want` and `got` differ, readably.
fn first_difference(want: &str, got: &str) -> String {
    let (w, g): (Vec<&str>, Vec<&str>) = (want.lines().collect(), got.lines().collect());
    let i = w.iter().zip(&g).take_while(|(a, b)| a == b).count();
    let show = |v: &[&str]| {
        v.iter()
            .skip(i.saturating_sub(3))
            .take(8)
            .map(|l| format!("      {l}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    format!(
        "first difference at line {} ({} vs {} lines)\n    snapshot:\n{}\n    merged now:\n{}",
        i + 1,
        w.len(),
        g.len(),
        show(&w),
        show(&g)
    )
}

#[test]
fn every_fixture_merges_to_its_snapshot() {
    let update = std::env::var_os("UPDATE_EXPECT").is_some_and(|v| v == "1");
    let mut bad = Vec::new();
    let all = fixtures();
    assert!(
        !all.is_empty(),
        "no fixtures under {}",
        corpus_dir().display()
    );
    for (dir, prog, path) in &all {
        let f = load(path);
        let got = render(&f.merged(), &format!("/{prog}.py"));
        let snap = snapshot_of(path);
        if update {
            std::fs::write(&snap, &got).unwrap();
            continue;
        }
        match std::fs::read_to_string(&snap) {
            Ok(want) if want == got => {}
            Ok(want) => bad.push(format!("{dir}/{prog}: {}", first_difference(&want, &got))),
            Err(e) => bad.push(format!(
                "{dir}/{prog}: no snapshot {} ({e}); run with UPDATE_EXPECT=1",
                snap.display()
            )),
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {} fixtures differ from their snapshots:\n{}",
        bad.len(),
        all.len(),
        bad.join("\n")
    );
}

/// Done-criterion of the corpus: every witness program has a fixture on both interpreters.
#[test]
fn every_witness_program_has_fixtures_on_both_interpreters() {
    let witness = Path::new(env!("CARGO_MANIFEST_DIR")).join("../flux-cli/tests/witness");
    let mut missing = Vec::new();
    for p in std::fs::read_dir(&witness).unwrap() {
        let p = p.unwrap().path();
        if p.extension().is_none_or(|e| e != "py") {
            continue;
        }
        let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
        for py in ["3.11", "3.15"] {
            let f = corpus_dir().join(format!("{py}-run/{stem}.jsonl.gz"));
            if !f.exists() {
                missing.push(format!("{py}-run/{stem}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "no fixture for {missing:?}: run `cargo xtask record-merge-corpus --only …`"
    );
}

/// What a witness program's header says of its trace on `python`: `Some(text)` when it must be
/// incomplete with a problem containing `text` (`# witness: incomplete on 3.11: …`).
fn expected_incomplete(prog: &str, python: &str) -> Option<String> {
    let witness = Path::new(env!("CARGO_MANIFEST_DIR")).join("../flux-cli/tests/witness");
    // A top-level program, or a scoped one (`scoped/test_*.py`).
    let text = std::fs::read_to_string(witness.join(format!("{prog}.py")))
        .or_else(|_| std::fs::read_to_string(witness.join(format!("scoped/{prog}.py"))))
        .ok()?;
    let tag = format!("# witness: incomplete on {python}: ");
    text.lines()
        .find_map(|l| l.strip_prefix(&tag).map(str::to_string))
}

/// Every fixture of the corpus is a complete trace: the recorded runs are the witness
/// programs, on which both witnesses agree; a program whose header says its trace is
/// incomplete on an interpreter (a program's own tracer) must merge incomplete, saying why.
#[test]
fn every_recorded_run_merges_complete() {
    let mut bad = Vec::new();
    for (dir, prog, path) in fixtures()
        .into_iter()
        .filter(|(d, _, _)| !d.ends_with("-regress"))
    {
        let t = load(&path).merged();
        let python = dir.split('-').next().unwrap_or_default();
        match expected_incomplete(&prog, python) {
            None if !t.meta.complete => bad.push(format!("{dir}/{prog}: {:?}", t.meta.problems)),
            Some(why) if t.meta.complete || !t.meta.problems.iter().any(|p| p.contains(&why)) => {
                bad.push(format!(
                    "{dir}/{prog}: want incomplete ({why}), got {:?}",
                    t.meta.problems
                ))
            }
            _ => {}
        }
    }
    assert!(
        bad.is_empty(),
        "merges not as the programs say:\n{}",
        bad.join("\n")
    );
}

/// 17.2: on 3.11, code in a `_thread.start_new_thread` thread and code run under the program's
/// own `sys.settrace` were filed as "hook internals" and the trace said complete. Their USDT
/// returns are now problems; on 3.15 (sys.monitoring sees both) the same programs are complete.
#[test]
fn code_the_311_hook_cannot_see_makes_the_trace_incomplete() {
    for (prog, cause) in [
        ("raw_thread", "the hook never traced it"),
        ("own_settrace", "code the hook did not see ran"),
    ] {
        let t = load(&corpus_dir().join(format!("3.11-regress/{prog}.jsonl.gz"))).merged();
        assert!(!t.meta.complete, "{prog} on 3.11 merged complete");
        assert!(
            t.meta.problems.iter().any(|p| p.contains(cause)),
            "{prog}: {:?}",
            t.meta.problems
        );
        let t = load(&corpus_dir().join(format!("3.15-regress/{prog}.jsonl.gz"))).merged();
        assert!(t.meta.complete, "{prog} on 3.15: {:?}", t.meta.problems);
    }
}

/// The encoding (times as deltas, `flux_merge::fixture`) loses nothing: every fixture written
/// and read back is the same fixture, and it is written in the current version.
#[test]
fn every_fixture_survives_being_written_and_read_back() {
    for (dir, prog, path) in fixtures() {
        let f = load(&path);
        assert_eq!(
            f.header.fixture,
            flux_merge::fixture::VERSION,
            "{dir}/{prog}: an old version (cargo xtask record-merge-corpus --reencode)"
        );
        let mut text = Vec::new();
        f.write(&mut text).unwrap();
        let back = flux_merge::fixture::Fixture::read(&text[..]).unwrap();
        assert_eq!(back.strings, f.strings, "{dir}/{prog}");
        assert_eq!(back.usdt, f.usdt, "{dir}/{prog}");
        assert_eq!(back.hook, f.hook, "{dir}/{prog}");
    }
}

/// A trace's events hold their code's five names as one shared `Code` (the merged trace is
/// most of the agent's memory: 112 bytes an event with five names inline, 80 with one
/// pointer). The merge gives its events codes it made once per distinct names — the USDT
/// decoder's one per pair of strings, the merge's table for what the hook names — never one
/// per event: over every fixture, a handful of storages per distinct code.
#[test]
fn the_events_of_one_code_share_its_storage() {
    let mut worst = (0.0f64, String::new());
    for (dir, prog, path) in fixtures() {
        let t = load(&path).merged();
        let mut names = std::collections::HashSet::new();
        let mut storages: Vec<&flux_trace::Code> = Vec::new();
        for e in &t.events {
            names.insert(e.code.names());
            if !storages.iter().any(|c| c.ptr_eq(&e.code)) {
                storages.push(&e.code);
            }
        }
        let ratio = storages.len() as f64 / names.len().max(1) as f64;
        if ratio > worst.0 {
            worst = (
                ratio,
                format!(
                    "{dir}/{prog}: {} storages for {} codes, {} events",
                    storages.len(),
                    names.len(),
                    t.events.len()
                ),
            );
        }
    }
    assert!(worst.0 <= 2.0, "{}", worst.1);
}

/// Rule `keep`: a run that keeps only the targets' direct calls (scope `targets`,
/// `Keep::TargetCalls`) gets, from the merge's cut at each extent edge, exactly the events that
/// cutting the whole merged trace at once leaves (`flux_trace::keep`), and counts the rest: on
/// every scope-`targets` fixture of the corpus, and at least one fixture loses events to it.
#[test]
fn the_cut_at_each_extent_edge_keeps_what_cutting_the_whole_trace_keeps() {
    use flux_merge::protocol::CODE_TARGET;
    let mut cut_somewhere = false;
    for (dir, prog, path) in fixtures()
        .into_iter()
        .filter(|(d, ..)| d.ends_with("-targets"))
    {
        let mut f = load(&path);
        let full = f.merged();
        let (_, hook) = f.inputs();
        let targeted: std::collections::HashSet<String> = hook
            .streams
            .iter()
            .flat_map(|s| s.codes.values())
            .filter(|c| c.has(CODE_TARGET))
            .map(|c| c.qualname.to_string())
            .collect();
        let mut want = full.events.clone();
        flux_trace::keep::retain_target_calls(
            &mut want,
            0,
            |e| targeted.contains(e.name()),
            |_| {},
        );
        f.header.plan.keep = flux_trace::Keep::TargetCalls;
        let kept = f.merged();
        let lines = |evs: &[flux_trace::Event]| -> Vec<String> {
            evs.iter()
                .map(|e| serde_json::to_string(e).unwrap())
                .collect()
        };
        assert_eq!(lines(&kept.events), lines(&want), "{dir}/{prog}");
        assert_eq!(kept.meta.complete, full.meta.complete, "{dir}/{prog}");
        let not_kept = kept
            .meta
            .counts
            .get("merge.events_not_kept")
            .copied()
            .unwrap_or(0);
        assert_eq!(
            kept.events.len() as u64 + not_kept,
            full.events.len() as u64,
            "{dir}/{prog}: kept and cut add up to the whole"
        );
        cut_somewhere |= not_kept > 0;
    }
    assert!(
        cut_somewhere,
        "no scope-targets fixture has a call below a direct callee"
    );
}

/// Issue 28: a capture's USDT records (`RawStore::spilling`) and its hook streams' records
/// (`Stream::spill_to`, as lines) written to files and read back a thread at a time by the
/// merge give every fixture the trace they give held in memory; tiny blocks, so every fixture's
/// records cross many of them, and a bound of a few records held, so both kinds of block meet.
#[test]
fn every_fixture_merges_the_same_from_records_spilled_to_a_file() {
    let (mut usdt_spilled, mut hook_spilled) = (false, false);
    for (dir, prog, path) in fixtures() {
        let f = load(&path);
        let held = f.merged();
        let store = flux_merge::raw_store::RawStore::spilling(tempfile::tempfile().unwrap(), 0)
            .with_block(3);
        let (usdt, hook) = f.inputs_in(store, &mut |s| {
            s.records
                .spill_in_blocks(tempfile::tempfile().unwrap(), 5, 3)
        });
        let mut spilled = flux_merge::merge(usdt, &hook, &f.header.interpreter, &f.header.plan);
        let n = spilled.meta.counts.remove("usdt.records_spilled");
        usdt_spilled |= n.is_some_and(|n| n > 0);
        let n = spilled.meta.counts.remove("hook.records_spilled");
        hook_spilled |= n.is_some_and(|n| n > 0);
        let lines = |t: &flux_trace::Trace| -> Vec<String> {
            t.events
                .iter()
                .map(|e| serde_json::to_string(e).unwrap())
                .collect()
        };
        assert_eq!(lines(&spilled), lines(&held), "{dir}/{prog}");
        assert_eq!(spilled.meta, held.meta, "{dir}/{prog}");
    }
    assert!(usdt_spilled, "no fixture's USDT records were spilled");
    assert!(hook_spilled, "no fixture's hook records were spilled");
}

/// Issue 28: a run that keeps only the targets' direct calls and writes the whole trace
/// (`flux harvest`: `merge_writing`) writes, on every fixture, the very bytes the merge keeping
/// every event writes, and keeps what rule `keep` keeps: with its events held, spilled a chunk
/// at a time from the first (a bound of 0), and held past a bound of a few. Every fixture of
/// another scope writes its whole trace too.
#[test]
fn the_whole_trace_written_as_the_merge_goes_is_the_whole_merged_trace() {
    let mut spilled_somewhere = false;
    for (dir, prog, path) in fixtures() {
        let mut f = load(&path);
        let full = f.merged();
        let mut want = Vec::new();
        full.write_jsonl(&mut want).unwrap();
        f.header.plan.keep = flux_trace::Keep::TargetCalls;
        let kept = f.merged();
        for (spill, after) in [(false, 0), (true, 0), (true, 5)] {
            let (usdt, hook) = f.inputs();
            let mut got = Vec::new();
            let whole = flux_merge::Whole {
                to: &mut got,
                spill: spill.then(|| tempfile::tempfile().unwrap()),
                after,
            };
            let mut t = flux_merge::merge_writing(
                usdt,
                &hook,
                &f.header.interpreter,
                &f.header.plan,
                whole,
            )
            .unwrap();
            let n = t.meta.counts.remove("merge.events_spilled");
            spilled_somewhere |= n.is_some_and(|n| n > 0);
            let what = format!("{dir}/{prog}, spill {spill} after {after}");
            assert!(
                got == want,
                "{what}: the written trace differs from the whole merged trace's"
            );
            assert_eq!(t.meta, kept.meta, "{what}");
            assert_eq!(t.events, kept.events, "{what}");
        }
    }
    assert!(spilled_somewhere, "no fixture's merged events were spilled");
}
