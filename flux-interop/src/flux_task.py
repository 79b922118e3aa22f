"""flux's questions as an Inspect task (written by `flux export --format inspect`).

    inspect eval flux_task.py --model openai/gpt-4o -T split=test

Each sample is one row of `data/<split>.jsonl` beside this file: the system and user messages
exactly as `flux eval` sends them (the user message holds the question, the answer format, and
the test code and repository source the question needs). The model answers once (no repair
rounds); the first JSON object of its reply is taken as `flux eval` takes it (a code fence's
content, else the first balanced object), and `flux score` scores it against the row's gold,
with the rows of this dataset as its instances, so a verdict here is `flux score`'s verdict.
The scorer needs the `flux` binary: on PATH, or named by `-T flux=PATH` or `$FLUX_BIN`.
"""

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
        },
    )


def _balanced_end(text, start):
    """Length of the balanced {...} at text[start] (JSON strings honoured), or None."""
    depth, in_str, esc = 0, False, False
    for i in range(start, len(text)):
        c = text[i]
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
            continue
        if c == '"':
            in_str = True
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth < 0:
                return None
            if depth == 0:
                return i + 1 - start
    return None


def _strip_fences(text):
    open_ = text.find("```")
    if open_ < 0:
        return text
    after = text[open_ + 3 :]
    nl = after.find("\n")
    body = after[nl + 1 :] if nl >= 0 else after
    close = body.find("```")
    if close >= 0 and "{" in body[:close]:
        return body[:close]
    return text


def extract_json(text):
    """The first JSON object of a reply, as flux eval takes it (flux-eval's parse.rs); None."""
    t = _strip_fences(text)
    try:
        v = json.loads(t.strip())
        if isinstance(v, dict):
            return v
    except ValueError:
        pass
    start = 0
    while True:
        s = t.find("{", start)
        if s < 0:
            return None
        n = _balanced_end(t, s)
        if n is not None:
            try:
                return json.loads(t[s : s + n])
            except ValueError:
                pass
        start = s + 1


def _flux_binary(flux):
    path = flux or os.environ.get("FLUX_BIN") or shutil.which("flux")
    if not path:
        raise RuntimeError(
            "the flux scorer needs the `flux` binary: put it on PATH, set FLUX_BIN, "
            "or pass -T flux=PATH"
        )
    return path


@scorer(metrics={"pass": [accuracy(), stderr()], "partial": [mean()]})
def flux_score(data, flux=None):
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
def flux(split="test", flux=None):
    """flux's questions of one split of this dataset, scored by `flux score`."""
    data = HERE / "data" / f"{split}.jsonl"
    if not data.is_file():
        have = sorted(p.stem for p in (HERE / "data").glob("*.jsonl"))
        raise ValueError(f"no split {split!r} in {HERE / 'data'} (splits: {', '.join(have)})")
    return Task(
        dataset=json_dataset(str(data), record_to_sample),
        solver=generate(),
        scorer=flux_score(data, flux),
    )
