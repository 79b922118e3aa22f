"""flux's questions as an Inspect task (written by `flux export --format inspect`).

    inspect eval flux_task.py --model openai/gpt-4o -T split=test

Each sample is one row of `data/<split>.jsonl` beside this file: the system and user messages
exactly as `flux eval` sends them (the user message holds the question, the answer format, and
the test code and repository source the question needs). The model answers once (no repair
rounds); the first JSON object of its reply is taken as `flux eval` takes it (a code fence's
content, else the first balanced object) and scored against the row's gold by flux's rules,
ported to `flux_scoring.py` beside this file (pure Python: no flux binary is needed), so a
verdict here is the one `flux score --predictions` gives. `-T call_graph_threshold=F` is
`flux score --call-graph-threshold F`.

`-T scorer=flux` scores with the flux binary itself instead (`flux score --predictions` on each
reply): the binary on PATH, or named by `-T flux=PATH` or `$FLUX_BIN`.
"""

import importlib.util
import json
import os
import pathlib
import shutil
import subprocess
import tempfile

from inspect_ai import Task, task
from inspect_ai.dataset import Sample, json_dataset
from inspect_ai.model import ChatMessageSystem, ChatMessageUser
from inspect_ai.scorer import Score, Target, accuracy, mean, scorer, stderr
from inspect_ai.solver import TaskState, generate

HERE = pathlib.Path(__file__).resolve().parent


def _load_scoring():
    spec = importlib.util.spec_from_file_location("flux_scoring", HERE / "flux_scoring.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


scoring = _load_scoring()
extract_json = scoring.extract_json


def record_to_sample(row):
    return Sample(
        id=row["instance_id"],
        input=[
            ChatMessageSystem(content=row["system"]),
            ChatMessageUser(content=row["prompt"]),
        ],
        target=row["gold"],
        metadata={
            "kind": row["kind"],
            "repository": row["repository"],
            "split": row["split"],
            "template": row["template"],
            "order_insensitive": list(row.get("order_insensitive") or []),
        },
    )


@scorer(metrics={"pass": [accuracy(), stderr()], "partial": [mean()]})
def flux_score(call_graph_threshold=1.0):
    """Score a reply by flux's rules (flux_scoring.py) against the sample's gold."""

    async def score(state: TaskState, target: Target) -> Score:
        gold = json.loads(target.text)
        answer = extract_json(state.output.completion)
        oi = state.metadata.get("order_insensitive") or []
        r = scoring.score(gold, answer, oi, float(call_graph_threshold))
        return Score(
            value={"pass": 1.0 if r["pass"] else 0.0, "partial": float(r["partial"])},
            answer=json.dumps(answer) if answer is not None else None,
            explanation=r["reason"] or "passed",
            metadata={"flux": r},
        )

    return score


def _flux_binary(flux):
    path = flux or os.environ.get("FLUX_BIN") or shutil.which("flux")
    if not path:
        raise RuntimeError(
            "the flux scorer needs the `flux` binary: put it on PATH, set FLUX_BIN, "
            "or pass -T flux=PATH"
        )
    return path


@scorer(metrics={"pass": [accuracy(), stderr()], "partial": [mean()]})
def flux_binary_score(data, flux=None, call_graph_threshold=1.0):
    """Score a reply with `flux score` against the row of `data` (a JSONL file of this dataset)."""
    binary = _flux_binary(flux)

    async def score(state: TaskState, target: Target) -> Score:
        key = str(state.sample_id)
        reply = state.output.completion
        answer = extract_json(reply)
        with tempfile.TemporaryDirectory() as tmp:
            preds = pathlib.Path(tmp) / "predictions.jsonl"
            preds.write_text(json.dumps({"instance_id": key, "answer": answer}) + "\n")
            run = subprocess.run(
                [
                    binary, "score", "--instances", str(data), "--predictions", str(preds),
                    "--filter", "id=" + key, "--format", "json",
                    "--call-graph-threshold", str(call_graph_threshold),
                    "--results", str(pathlib.Path(tmp) / "results.json"),
                ],
                capture_output=True,
                text=True,
            )
        if run.returncode != 0:
            raise RuntimeError(f"flux score failed on {key}: {run.stderr.strip()}")
        report = json.loads(run.stdout)
        rows = report["instances"]
        if len(rows) != 1:
            raise RuntimeError(f"flux score did not score {key}: {run.stdout[:500]}")
        r = rows[0]
        passed = bool(r.get("pass"))
        return Score(
            value={"pass": 1.0 if passed else 0.0, "partial": float(r.get("partial") or 0.0)},
            answer=json.dumps(answer) if answer is not None else None,
            explanation=r.get("reason") or "passed",
            metadata={"flux": r},
        )

    return score


@task
def flux(split="test", scorer="python", flux=None, call_graph_threshold=1.0):
    """flux's questions of one split of this dataset, scored by flux's rules: in Python
    (`scorer="python"`, the default) or by the flux binary (`scorer="flux"`)."""
    data = HERE / "data" / f"{split}.jsonl"
    if not data.is_file():
        have = sorted(p.stem for p in (HERE / "data").glob("*.jsonl"))
        raise ValueError(f"no split {split!r} in {HERE / 'data'} (splits: {', '.join(have)})")
    threshold = float(call_graph_threshold)
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"call_graph_threshold {threshold}: must be between 0 and 1")
    if scorer == "python":
        chosen = flux_score(threshold)
    elif scorer == "flux":
        chosen = flux_binary_score(data, flux, threshold)
    else:
        raise ValueError(f"scorer {scorer!r}: `python` (the default) or `flux` (the binary)")
    return Task(
        dataset=json_dataset(str(data), record_to_sample),
        solver=generate(),
        scorer=chosen,
    )
