#!/usr/bin/env python3
"""Accuracy of callmask's tool calls on BFCL v4 (Berkeley Function-Calling Leaderboard).

    scripts/bfcl.py [--categories simple,multiple,...] [--limit 20] [--dialect smollm2]
                    [--max-tokens 256] [--threads 2] [--timeout 300] [--out target/bfcl]
                    [--modes constrained,unconstrained] [--callmask BIN] [--model GGUF]
                    [--generate-args='--no-parallel-calls'] [--resume] [--max-minutes M]
    scripts/bfcl.py --rescore [--out target/bfcl]    (score the saved results again)
    scripts/bfcl.py --self-test                      (the checker's own tests)
    scripts/bfcl.py --fetch-only                     (fetch the data, run nothing)

The questions and their possible answers come from the PyPI wheel of `bfcl-eval` (pinned below,
checked against its sha256), fetched once with pip into `$CALLMASK_CACHE/bfcl-eval-VERSION/`
(default `.cache/`). For each single-turn category the first N questions are run through
`callmask generate` (the question's functions as OpenAI tools, its turns as `--messages`,
`--tool-choice auto`, greedy), once with the constraint and once without it (`--no-constraint`:
the same prompt, no mask, the output parsed by the same grammar). Every run is one line of
OUT/results.jsonl (the calls, whether the output parsed, tokens, seconds, exit status, the raw
text); the inputs are kept under OUT/inputs/ so any run can be repeated by hand. A crash or a
timeout is recorded as a failure with its reason; the run goes on.

Scoring follows BFCL's AST rules, implemented here from their description (no BFCL code):

- a category with calls expects exactly as many calls as the possible answer lists (simple and
  multiple: one; parallel: several, matched in any order);
- each call names the expected function, has every required parameter, no parameter the
  function does not declare (nor one the possible answer does not list), and every value is
  among the answer's acceptable values; a parameter may be left out only where "" is among them;
- strings compare after BFCL's normalization: spaces and the characters , . / - _ * ^ removed,
  lowercase, ' read as "; an int is accepted where a float is expected (not a float where an
  int is, nor a boolean for a number); lists compare element by element, dicts key by key
  (the answer's dict values being lists of acceptable values), recursively;
- a value of another type than the declared one is accepted where the answer's acceptable
  values have that type (BFCL's "variable" case: e.g. null for an integer); a failed value is
  counted as a wrong type where it does not have the declared type, else as a wrong value;
- irrelevance categories: correct when no call was parsed (an output that does not parse holds
  no call, as in BFCL), wrong when a call was made.

Deliberate differences from BFCL's own checker, rare in the data (run side by side on 14,000
answers drawn from the possible answers and perturbed, the two differed on 9): parallel calls
are matched by a full bipartite matching (BFCL matches greedily in answer order, and can miss a
match); an int is accepted for a float, and strings are normalized, at any depth and whatever
the declared type (BFCL refuses [1, 2] for a list of floats, and compares values nested deeper
than one dict, or a string standing for an integer, exactly); inside dicts, a float is refused
for an int and a number for a boolean (BFCL compares dict values with Python's ==, where
30.0 == 30 and 0 == False).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

BFCL_VERSION = "2026.3.23"
BFCL_WHEEL = f"bfcl_eval-{BFCL_VERSION}-py3-none-any.whl"
BFCL_WHEEL_SHA256 = "3bb6dfa5f0c68ad403c9ec50b00db2bb3b4cc9b38ab1ff33f48fe30d853d3a0a"

# Category -> the data file's stem (the same stem names the possible answers).
CATEGORIES: dict[str, str] = {
    "simple": "BFCL_v4_simple_python",
    "multiple": "BFCL_v4_multiple",
    "parallel": "BFCL_v4_parallel",
    "parallel_multiple": "BFCL_v4_parallel_multiple",
    "live_simple": "BFCL_v4_live_simple",
    "live_multiple": "BFCL_v4_live_multiple",
    "live_parallel": "BFCL_v4_live_parallel",
    "live_parallel_multiple": "BFCL_v4_live_parallel_multiple",
    "irrelevance": "BFCL_v4_irrelevance",
    "live_irrelevance": "BFCL_v4_live_irrelevance",
}
IRRELEVANCE = frozenset({"irrelevance", "live_irrelevance"})
MODES = ("constrained", "unconstrained")

ROOT = Path(__file__).resolve().parent.parent

# ---------------------------------------------------------------------------------------------
# Data


def data_files() -> list[str]:
    """The wheel members this script reads (questions, then possible answers)."""
    names = [f"bfcl_eval/data/{stem}.json" for stem in CATEGORIES.values()]
    names += [
        f"bfcl_eval/data/possible_answer/{stem}.json"
        for cat, stem in CATEGORIES.items()
        if cat not in IRRELEVANCE
    ]
    return names


def fetch_data(cache: Path) -> Path:
    """The folder holding the BFCL data files, fetched with pip on first use.

    The folder is written whole or not at all (a temporary folder, then renamed)."""
    dest = cache / f"bfcl-eval-{BFCL_VERSION}"
    wanted = data_files()
    if all((dest / name.removeprefix("bfcl_eval/data/")).is_file() for name in wanted):
        return dest
    cache.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="bfcl-", dir=cache))
    try:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
            + ["--only-binary", ":all:", f"bfcl-eval=={BFCL_VERSION}", "-d", str(tmp)],
            check=True,
        )
        wheel = tmp / BFCL_WHEEL
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        if digest != BFCL_WHEEL_SHA256:
            sys.exit(f"bfcl.py: {wheel.name}: sha256 {digest}, expected {BFCL_WHEEL_SHA256}")
        out = tmp / "data"
        with zipfile.ZipFile(wheel) as z:
            for name in wanted:
                target = out / name.removeprefix("bfcl_eval/data/")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(z.read(name))
        if dest.exists():
            shutil.rmtree(dest)
        out.rename(dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


@dataclass
class Question:
    """One BFCL entry: id, the offered functions, the conversation and the possible answer."""

    id: str
    category: str
    functions: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    answer: list[dict[str, dict[str, list[Any]]]] | None  # None for irrelevance


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load_questions(
    data: Path, category: str, limit: int | None, offset: int = 0
) -> list[Question]:
    """The `limit` questions of a category after the first `offset` (all of them for None)."""
    stem = CATEGORIES[category]
    entries = read_jsonl(data / f"{stem}.json")[offset:]
    if limit is not None:
        entries = entries[:limit]
    answers: dict[str, Any] = {}
    if category not in IRRELEVANCE:
        for a in read_jsonl(data / "possible_answer" / f"{stem}.json"):
            answers[a["id"]] = a["ground_truth"]
    questions = []
    for e in entries:
        turns = e["question"]
        if len(turns) != 1:
            raise ValueError(f"{e['id']}: {len(turns)} turns, only single-turn is supported")
        questions.append(
            Question(
                id=e["id"],
                category=category,
                functions=e["function"],
                messages=[{"role": m["role"], "content": m["content"]} for m in turns[0]],
                answer=None if category in IRRELEVANCE else answers[e["id"]],
            )
        )
    return questions


def openai_tools(functions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """BFCL functions as OpenAI tools; BFCL's type names (dict, float, tuple, any) are kept."""
    return [{"type": "function", "function": f} for f in functions]


# ---------------------------------------------------------------------------------------------
# Scoring (pure functions of the functions, the possible answer and the parsed calls)

Call = tuple[str, Any]  # (name, arguments as parsed from the call's JSON)

REASONS = (
    "unparsed",
    "budget hit",
    "timeout",
    "crash",
    "no call",
    "repeated call",
    "extra call",
    "too few calls",
    "wrong function",
    "missing param",
    "unexpected param",
    "wrong type",
    "wrong value",
    "call made",
)


@dataclass(frozen=True)
class Verdict:
    correct: bool
    reason: str  # "" when correct, else one of REASONS
    detail: str = ""


def normalize_string(s: str) -> str:
    """BFCL's string normalization: no spaces nor ,./-_*^, lowercase, ' read as ".

    >>> normalize_string("San Francisco, CA") == normalize_string("san-francisco ca")
    True
    >>> normalize_string("April 1, 2024")
    'april12024'
    """
    return re.sub(r"[ ,./\-_*^]", "", s).lower().replace("'", '"')


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def has_type(value: Any, schema: dict[str, Any]) -> bool:
    """Whether `value` has the schema's (BFCL) type, recursively through items and properties.

    An int is a float; a bool is not a number. A schema without a known type takes anything.

    >>> has_type(3, {"type": "float"}), has_type(3.0, {"type": "integer"})
    (True, False)
    >>> has_type(True, {"type": "integer"}), has_type([1, 2.5], {"type": "array", "items": {"type": "float"}})
    (False, True)
    """
    t = schema.get("type")
    if t == "string":
        return isinstance(value, str)
    if t == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if t in ("float", "number"):
        return is_number(value)
    if t == "boolean":
        return isinstance(value, bool)
    if t in ("array", "tuple"):
        items = schema.get("items")
        return isinstance(value, list) and (
            not isinstance(items, dict) or all(has_type(v, items) for v in value)
        )
    if t in ("dict", "object"):
        props = schema.get("properties") or {}
        return isinstance(value, dict) and (
            all(has_type(v, props[k]) for k, v in value.items() if k in props)
        )
    return True  # "any", or no type


def value_matches(value: Any, expected: Any, schema: dict[str, Any] | None = None) -> bool:
    """Whether `value` equals the acceptable value `expected`, with BFCL's normalizations.

    In an expected dict, a value that is a list holds the acceptable values of that key ("" among
    them: the key may be left out); any other value is the one acceptable value. The kind of
    value compared is the expected one's (a string, a list...), whatever the schema declares:
    BFCL's "variable" case, where an answer of another type than the declared one (null for an
    integer, a list of strings for a list of integers) is what the model must write. The schema
    (BFCL types) only decides whether a float may stand for an int answer (where it declares a
    float).

    >>> value_matches("New York, NY", "new york NY"), value_matches(5, 5.0)
    (True, True)
    >>> value_matches(5.0, 5, {"type": "integer"}), value_matches(5, 5.0, {"type": "float"})
    (False, True)
    >>> value_matches(1, True), value_matches(["A", 2], ["a", 2]), value_matches([1], [1, 2])
    (False, True, False)
    >>> value_matches({"size": "Large"}, {"size": ["large"], "milk": ["", "oat"]})
    True
    >>> value_matches({"size": "large", "x": 1}, {"size": ["large"]})
    False
    """
    schema = schema if isinstance(schema, dict) else {}
    if isinstance(expected, str):
        return isinstance(value, str) and normalize_string(value) == normalize_string(expected)
    if isinstance(expected, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(expected, bool) and value == expected
    if is_number(expected):
        # An int answer takes a float only where the schema declares a float.
        if isinstance(expected, int) and isinstance(value, float):
            return schema.get("type") in ("float", "number") and value == expected
        return is_number(value) and value == expected
    if expected is None:
        return value is None
    if isinstance(expected, list):
        items = schema.get("items")
        return (
            isinstance(value, list)
            and len(value) == len(expected)
            and all(value_matches(v, e, items) for v, e in zip(value, expected))
        )
    if isinstance(expected, dict):
        if not isinstance(value, dict):
            return False
        props = schema.get("properties") or {}
        for key, v in value.items():
            if key not in expected:
                return False
            e = expected[key]
            if isinstance(e, list):
                ok = any_matches(v, e, props.get(key))
            else:
                ok = value_matches(v, e, props.get(key))
            if not ok:
                return False
        return all(key in value or (isinstance(e, list) and "" in e) for key, e in expected.items())
    return bool(value == expected)


def any_matches(value: Any, acceptable: list[Any], schema: dict[str, Any] | None = None) -> bool:
    """Whether `value` matches one of the acceptable values ("" marks "may be left out")."""
    return any(
        value_matches(value, a, schema) for a in acceptable if not (isinstance(a, str) and a == "")
    )


def check_call(
    function: dict[str, Any] | None, answer: dict[str, list[Any]], call: Call
) -> Verdict:
    """One call against one expected call (`function`: the expected function's declaration)."""
    name, args = call
    if function is None:
        return Verdict(False, "wrong function", f"{name}: expected function not offered")
    if name != function["name"]:
        return Verdict(False, "wrong function", f"{name} instead of {function['name']}")
    if not isinstance(args, dict):
        return Verdict(False, "wrong type", f"{name}: arguments are not an object")
    params = function.get("parameters") or {}
    props: dict[str, Any] = params.get("properties") or {}
    for p in params.get("required") or []:
        if p not in args:
            return Verdict(False, "missing param", f"{name}: {p} missing")
    for p, v in args.items():
        if p not in props or p not in answer:
            return Verdict(False, "unexpected param", f"{name}: {p} not expected")
        acceptable = answer[p]
        if not any_matches(v, acceptable, props[p]):
            got = json.dumps(v, ensure_ascii=False)
            if len(got) > 80:
                got = got[:77] + "..."
            want = json.dumps(acceptable, ensure_ascii=False)[:80]
            reason = "wrong value" if has_type(v, props[p]) else "wrong type"
            return Verdict(False, reason, f"{name}: {p}={got}, acceptable {want}")
    for p, acceptable in answer.items():
        if p not in args and "" not in acceptable:
            return Verdict(False, "missing param", f"{name}: {p} missing")
    return Verdict(True, "")


def perfect_matching(ok: list[list[bool]]) -> bool:
    """Whether every row i can be given a distinct column j with ok[i][j] (augmenting paths)."""
    owner: dict[int, int] = {}

    def place(i: int, seen: set[int]) -> bool:
        for j, good in enumerate(ok[i]):
            if good and j not in seen:
                seen.add(j)
                if j not in owner or place(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    return all(place(i, set()) for i in range(len(ok)))


def call_key(call: Call) -> str:
    return json.dumps([call[0], call[1]], sort_keys=True)


def score(
    category: str,
    functions: list[dict[str, Any]],
    answer: list[dict[str, dict[str, list[Any]]]] | None,
    calls: list[Call] | None,
) -> Verdict:
    """Whether the parsed calls (None: the output did not parse) answer the question."""
    if category in IRRELEVANCE:
        if calls:
            return Verdict(False, "call made", ", ".join(c[0] for c in calls))
        return Verdict(True, "")
    assert answer is not None
    if calls is None:
        return Verdict(False, "unparsed")
    if not calls:
        return Verdict(False, "no call")
    if len(calls) > len(answer):
        keys = [call_key(c) for c in calls]
        reason = "repeated call" if len(set(keys)) < len(keys) else "extra call"
        return Verdict(False, reason, f"{len(calls)} calls, {len(answer)} expected")
    if len(calls) < len(answer):
        return Verdict(False, "too few calls", f"{len(calls)} calls, {len(answer)} expected")
    by_name = {f["name"]: f for f in functions}
    expected = [next(iter(a.items())) for a in answer]
    verdicts = [[check_call(by_name.get(n), params, c) for c in calls] for n, params in expected]
    if perfect_matching([[v.correct for v in row] for row in verdicts]):
        return Verdict(True, "")
    # The reason of the first expected call that no call matches, from the call that came
    # closest to it (the right function, else any).
    for (name, _), row in zip(expected, verdicts):
        if not any(v.correct for v in row):
            same = [v for v, c in zip(row, calls) if c[0] == name]
            return (same or row)[0]
    # Each expected call is matched by some call, but not all by distinct ones.
    return Verdict(False, "repeated call", "calls cannot be matched one to one")


# ---------------------------------------------------------------------------------------------
# Running callmask


STATS = re.compile(r"\[(\d+) prompt tokens?, (\d+) generated in ([0-9.]+) ?s")
RUNAWAY = re.compile(r"(\d)\1{9,}")  # ten or more times the same digit


@dataclass
class Settings:
    callmask: str
    dialect: str
    max_tokens: int
    threads: int
    timeout: float
    model: str | None
    extra: list[str]

    def key(self) -> dict[str, Any]:
        """What a saved result must share with this run to be reused by --resume."""
        return {
            "dialect": self.dialect,
            "max_tokens": self.max_tokens,
            "model": self.model,
            "extra": self.extra,
        }


def split_stderr(stderr: str) -> tuple[str, dict[str, Any]]:
    """The streamed text and the statistics line of `callmask generate`'s stderr."""
    lines = stderr.rstrip("\n").split("\n")
    note: dict[str, Any] = {}
    if lines and lines[0].startswith("[prompt: "):
        note = {"prompt": lines.pop(0).strip()}
    for i in range(len(lines) - 1, -1, -1):
        m = STATS.search(lines[i])
        if m:
            text = "\n".join(lines[:i])
            stats = {
                "prompt_tokens": int(m.group(1)),
                "generated_tokens": int(m.group(2)),
                "gen_seconds": float(m.group(3)),
                "hit_max_tokens": "hit --max-tokens" in lines[i],
                "stats_line": lines[i].strip(),
                **note,
            }
            return text, stats
    return "\n".join(lines), note


def run_one(q: Question, mode: str, s: Settings, inputs: Path) -> dict[str, Any]:
    """One `callmask generate` run; never raises for a failed run (it is recorded)."""
    tools_path = inputs / f"{q.id}.tools.json"
    messages_path = inputs / f"{q.id}.messages.json"
    tools_path.write_text(json.dumps(openai_tools(q.functions), ensure_ascii=False, indent=1))
    messages_path.write_text(json.dumps(q.messages, ensure_ascii=False, indent=1))
    cmd = [s.callmask, "generate", "--dialect", s.dialect, "--tools", str(tools_path)]
    cmd += ["--tool-choice", "auto", "--max-tokens", str(s.max_tokens), "--temp", "0"]
    cmd += ["--threads", str(s.threads), "--messages", str(messages_path)]
    if s.model:
        cmd += ["--model", s.model]
    cmd += s.extra
    if mode == "unconstrained":
        cmd.append("--no-constraint")
    rec: dict[str, Any] = {
        "id": q.id,
        "category": q.category,
        "mode": mode,
        "settings": s.key(),
        "command": cmd,
    }
    start = time.monotonic()
    try:
        p = subprocess.run(
            cmd,
            capture_output=True,
            timeout=s.timeout,
            encoding="utf-8",
            errors="replace",  # a model may write bytes that are not UTF-8
        )
    except subprocess.TimeoutExpired as e:
        rec.update(status="timeout", wall_seconds=round(time.monotonic() - start, 2))
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else e.stderr
        rec["stderr_tail"] = (err or "")[-2000:]
        return rec
    rec["wall_seconds"] = round(time.monotonic() - start, 2)
    rec["exit"] = p.returncode
    text, stats = split_stderr(p.stderr)
    rec.update(stats)
    rec["raw_text"] = text
    parsed: Any = None
    try:
        parsed = json.loads(p.stdout) if p.stdout.strip() else None
    except json.JSONDecodeError:
        parsed = None
    calls: list[list[Any]] | None = None
    if isinstance(parsed, dict) and isinstance(parsed.get("tool_calls"), list):
        calls = []
        for tc in parsed["tool_calls"]:
            f = tc.get("function", tc)
            args = f.get("arguments")
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except json.JSONDecodeError:
                    pass
            calls.append([f.get("name"), args])
        rec["text"] = parsed.get("text")
    elif isinstance(parsed, dict) and "error" in parsed:
        rec["parse_error"] = parsed["error"]
    rec["calls"] = calls
    if p.returncode not in (0, 1) or (p.returncode != 0 and "generated_tokens" not in stats):
        rec["status"] = "crash"
        rec["stderr_tail"] = p.stderr[-2000:]
    elif stats.get("hit_max_tokens") and calls is None:
        rec["status"] = "budget hit"
    elif calls is None:
        rec["status"] = "unparsed"
    else:
        rec["status"] = "ok"
    rec["runaway_number"] = bool(RUNAWAY.search(text))
    return rec


def record_verdict(rec: dict[str, Any], q: Question) -> Verdict:
    """The verdict for one saved run (crashes, timeouts and unparsed outputs included)."""
    status = rec.get("status")
    if status in ("timeout", "crash"):
        return Verdict(False, status, rec.get("stderr_tail", "")[-200:])
    raw = rec.get("calls")
    calls = None if raw is None else [(c[0], c[1]) for c in raw]
    v = score(q.category, q.functions, q.answer, calls)
    if not v.correct and v.reason == "unparsed" and status == "budget hit":
        return Verdict(False, "budget hit", v.detail)
    return v


# ---------------------------------------------------------------------------------------------
# Report


def mean(xs: Iterable[float]) -> float | None:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else None


def fmt(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def report(
    records: list[dict[str, Any]], questions: dict[str, Question], header: str
) -> tuple[str, list[dict[str, Any]]]:
    """The Markdown report and one scored line per record."""
    scored = []
    for rec in records:
        v = record_verdict(rec, questions[rec["id"]])
        scored.append({**rec, "correct": v.correct, "reason": v.reason, "detail": v.detail})
    cats = [c for c in CATEGORIES if any(r["category"] == c for r in scored)]
    modes = [m for m in MODES if any(r["mode"] == m for r in scored)]
    out = [header, ""]
    out.append("| category | mode | questions | accuracy | ≥1 call | mean tokens | mean s |")
    out.append("|---|---|---:|---:|---:|---:|---:|")

    def row(label: str, mode: str, rs: list[dict[str, Any]]) -> str:
        n = len(rs)
        good = sum(r["correct"] for r in rs)
        called = sum(bool(r.get("calls")) for r in rs)
        toks = mean(r["generated_tokens"] for r in rs if "generated_tokens" in r)
        secs = mean(r["wall_seconds"] for r in rs if "wall_seconds" in r)
        acc = f"{good}/{n} ({100 * good / n:.0f}%)" if n else "-"
        return f"| {label} | {mode} | {n} | {acc} | {called} | {fmt(toks)} | {fmt(secs, 2)} |"

    for c in cats:
        for m in modes:
            out.append(row(c, m, [r for r in scored if r["category"] == c and r["mode"] == m]))
    for m in modes:
        out.append(row("**total**", m, [r for r in scored if r["mode"] == m]))
    out += ["", "Failure reasons (questions):", ""]
    out.append("| reason | " + " | ".join(modes) + " |")
    out.append("|---|" + "---:|" * len(modes))
    for reason in REASONS:
        counts = [sum(r["reason"] == reason and r["mode"] == m for r in scored) for m in modes]
        if any(counts):
            out.append(f"| {reason} | " + " | ".join(map(str, counts)) + " |")

    def first_calls(rec: dict[str, Any]) -> bool:
        return first_calls_correct(rec, questions[rec["id"]])

    extras = [
        ("correct, keeping only the first k calls (k: the answer's count)", first_calls),
        ("outputs copying the prompt's tool list first", copies_prompt),
        ("outputs repeating an identical call", repeats_a_call),
        ("outputs with a runaway number (10+ same digit)", lambda r: bool(r.get("runaway_number"))),
        ("outputs that ran into the token budget", hit_budget),
    ]
    for label, pred in extras:
        counts = [sum(bool(pred(r)) for r in scored if r["mode"] == m) for m in modes]
        out.append(f"| *{label}* | " + " | ".join(map(str, counts)) + " |")
    return "\n".join(out) + "\n", scored


def first_calls_correct(rec: dict[str, Any], q: Question) -> bool:
    """Whether the run would be correct if a client kept only as many calls as the answer has
    (what a repeated or extra call costs)."""
    if rec.get("status") in ("timeout", "crash"):
        return False
    raw = rec.get("calls")
    calls = None if raw is None else [(c[0], c[1]) for c in raw]
    if calls is not None and q.answer is not None:
        calls = calls[: len(q.answer)]
    return score(q.category, q.functions, q.answer, calls).correct


def copies_prompt(rec: dict[str, Any]) -> bool:
    """Whether the output begins by copying the tool instructions callmask puts in the prompt
    of a chat template that shows no tools (Gemma 3's)."""
    return "(JSON Schema of the arguments)" in (rec.get("raw_text") or "")[:200]


def repeats_a_call(rec: dict[str, Any]) -> bool:
    calls = rec.get("calls") or []
    keys = [json.dumps(c, sort_keys=True) for c in calls]
    return len(set(keys)) < len(keys)


def hit_budget(rec: dict[str, Any]) -> bool:
    """Whether the output ran into the token budget: unconstrained, it hit --max-tokens;
    constrained, the budget steered it to a close (the stats line's "N steered by the budget")."""
    m = re.search(r"(\d+) steered by the budget", rec.get("stats_line") or "")
    return bool(rec.get("hit_max_tokens")) or (m is not None and int(m.group(1)) > 0)


# ---------------------------------------------------------------------------------------------
# Self-test


def self_test() -> int:
    """The checker's own tests; returns the number of failures."""
    import doctest

    failures = doctest.testmod(sys.modules[__name__]).failed
    fact = {
        "name": "math.factorial",
        "parameters": {
            "type": "dict",
            "properties": {"number": {"type": "integer"}},
            "required": ["number"],
        },
    }
    area = {
        "name": "area",
        "parameters": {
            "type": "dict",
            "properties": {
                "radius": {"type": "float"},
                "unit": {"type": "string"},
                "opts": {
                    "type": "dict",
                    "properties": {"round": {"type": "boolean"}, "tag": {"type": "string"}},
                },
                "pts": {"type": "array", "items": {"type": "integer"}},
            },
            "required": ["radius"],
        },
    }
    weather = {
        "name": "weather",
        "parameters": {
            "type": "dict",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
            "required": ["city"],
        },
    }
    fact_answer: list[dict[str, dict[str, list[Any]]]] = [{"math.factorial": {"number": [5]}}]
    area_answer: list[dict[str, dict[str, list[Any]]]] = [
        {
            "area": {
                "radius": [5.0],
                "unit": ["", "cm"],
                "opts": ["", {"round": [True], "tag": ["", "x"]}],
                "pts": ["", [1, 2]],
            }
        }
    ]
    par_answer = [
        {"weather": {"city": ["Paris, France"], "unit": ["", "celsius"]}},
        {"weather": {"city": ["Boston, MA"], "unit": ["", "celsius"]}},
    ]

    def fact_call(**args: Any) -> Call:
        return ("math.factorial", args)

    def area_call(**args: Any) -> Call:
        return ("area", args)

    def fact_q(*calls: Call) -> Verdict:
        return score("simple", [fact], fact_answer, list(calls))

    def area_q(*calls: Call) -> Verdict:
        return score("simple", [area], area_answer, list(calls))

    def weather_q(*cities: str) -> Verdict:
        calls = [("weather", {"city": c}) for c in cities]
        return score("parallel", [weather], par_answer, calls)

    # (label, verdict, the expected reason: "" for a correct answer)
    cases: list[tuple[str, Verdict, str]] = [
        ("simple", fact_q(fact_call(number=5)), ""),
        ("int for float, optional left out", area_q(area_call(radius=5)), ""),
        ("float for int", fact_q(fact_call(number=5.0)), "wrong type"),
        ("bool for int", fact_q(fact_call(number=True)), "wrong type"),
        ("runaway number", fact_q(fact_call(number=4444444444444444444)), "wrong value"),
        ("missing required", fact_q(fact_call()), "missing param"),
        ("undeclared param", fact_q(fact_call(number=5, n=1)), "unexpected param"),
        ("repeated identical calls", fact_q(*[fact_call(number=5)] * 3), "repeated call"),
        ("extra call", fact_q(fact_call(number=5), fact_call(number=6)), "extra call"),
        ("no call", fact_q(), "no call"),
        ("unparsed", score("simple", [fact], fact_answer, None), "unparsed"),
        (
            "null answer",
            score(
                "simple", [fact], [{"math.factorial": {"number": [None]}}], [fact_call(number=None)]
            ),
            "",
        ),
        (
            "string answer",
            score("simple", [fact], [{"math.factorial": {"number": ["n"]}}], [fact_call(number=5)]),
            "wrong value",
        ),
        (
            "wrong function",
            score("multiple", [fact, area], fact_answer, [area_call(radius=5)]),
            "wrong function",
        ),
        ("string normalization", area_q(area_call(radius=5.0, unit="CM")), ""),
        ("string value", area_q(area_call(radius=5.0, unit="mm")), "wrong value"),
        ("dict", area_q(area_call(radius=5.0, opts={"round": True})), ""),
        ("dict missing key", area_q(area_call(radius=5.0, opts={"tag": "x"})), "wrong value"),
        (
            "dict extra key",
            area_q(area_call(radius=5.0, opts={"round": True, "z": 1})),
            "wrong value",
        ),
        ("list", area_q(area_call(radius=5.0, pts=[1, 2])), ""),
        ("list order", area_q(area_call(radius=5.0, pts=[2, 1])), "wrong value"),
        ("list item type", area_q(area_call(radius=5.0, pts=[1.0, 2])), "wrong type"),
        ("parallel, any order", weather_q("boston ma", "Paris, France"), ""),
        ("parallel, twice the same", weather_q("Boston, MA", "Boston, MA"), "wrong value"),
        ("parallel, too few", weather_q("Boston, MA"), "too few calls"),
        ("irrelevance, no call", score("irrelevance", [fact], None, []), ""),
        ("irrelevance, unparsed", score("irrelevance", [fact], None, None), ""),
        (
            "irrelevance, a call",
            score("irrelevance", [fact], None, [fact_call(number=1)]),
            "call made",
        ),
    ]
    for label, got, reason in cases:
        if (got.correct, got.reason) != (reason == "", reason):
            print(f"self-test: {label}: got {got}, expected {reason or 'correct'}")
            failures += 1
    print(f"self-test: {len(cases)} cases and the doctests, {failures} failure(s)")
    return failures


# ---------------------------------------------------------------------------------------------
# Main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--categories", default=",".join(CATEGORIES))
    ap.add_argument("--limit", type=int, default=20, help="first N questions per category")
    ap.add_argument(
        "--offset", type=int, default=0, help="skip the first N questions of each category"
    )
    ap.add_argument("--dialect", default="smollm2")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=300, help="seconds per generation")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--model", help="GGUF file (default: callmask's default model)")
    ap.add_argument(
        "--generate-args",
        default="",
        help="more arguments for callmask generate, split on spaces: --generate-args='--max-text 100'",
    )
    ap.add_argument("--callmask", default=os.environ.get("CALLMASK_BIN", "callmask"))
    ap.add_argument("--out", type=Path, default=ROOT / "target" / "bfcl")
    ap.add_argument(
        "--cache", type=Path, default=Path(os.environ.get("CALLMASK_CACHE", ROOT / ".cache"))
    )
    ap.add_argument("--resume", action="store_true", help="keep the saved runs of OUT")
    ap.add_argument(
        "--max-minutes",
        type=float,
        help="start no new question after this many minutes (questions go round robin over "
        "the categories, so the ones run stay balanced)",
    )
    ap.add_argument("--rescore", action="store_true", help="score OUT's saved runs, run nothing")
    ap.add_argument("--fetch-only", action="store_true")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()

    if a.self_test:
        sys.exit(1 if self_test() else 0)
    data = fetch_data(a.cache)
    if a.fetch_only:
        print(data)
        return
    cats = [c.strip() for c in a.categories.split(",") if c.strip()]
    modes = [m.strip() for m in a.modes.split(",") if m.strip()]
    for c in cats:
        if c not in CATEGORIES:
            sys.exit(f"bfcl.py: unknown category {c!r} (known: {', '.join(CATEGORIES)})")
    for m in modes:
        if m not in MODES:
            sys.exit(f"bfcl.py: unknown mode {m!r} (known: {', '.join(MODES)})")

    results = a.out / "results.jsonl"
    if a.rescore:
        earlier = read_jsonl(results)
        cats = [c for c in CATEGORIES if any(r["category"] == c for r in earlier)]
        questions = {q.id: q for c in cats for q in load_questions(data, c, None)}
        meta = json.loads((a.out / "run.json").read_text()) if (a.out / "run.json").exists() else {}
        finish(a.out, earlier, questions, meta)
        return

    callmask = shutil.which(a.callmask) or a.callmask
    if not os.access(callmask, os.X_OK):
        sys.exit(f"bfcl.py: no callmask binary at {a.callmask!r} (--callmask or CALLMASK_BIN)")
    extra = a.generate_args.split()
    s = Settings(callmask, a.dialect, a.max_tokens, a.threads, a.timeout, a.model, extra)
    inputs = a.out / "inputs"
    inputs.mkdir(parents=True, exist_ok=True)
    per_cat = [load_questions(data, c, a.limit, a.offset) for c in cats]
    # Round robin over the categories, so that a run stopped early (--max-minutes) is balanced.
    order = [
        qs[i] for i in range(max(map(len, per_cat), default=0)) for qs in per_cat if i < len(qs)
    ]
    questions = {q.id: q for q in order}
    kept: dict[tuple[str, str], dict[str, Any]] = {}
    if a.resume and results.exists():
        for r in read_jsonl(results):
            saved = {"extra": [], **(r.get("settings") or {})}  # older lines lack "extra"
            if saved == s.key() and r["id"] in questions:
                kept[(r["id"], r["mode"])] = r
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    t0 = time.monotonic()
    records: list[dict[str, Any]] = []
    stopped = 0
    with open(results, "w", encoding="utf-8") as f:
        for r in kept.values():
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
        total = len(questions) * len(modes)
        done = 0
        for q in order:
            late = a.max_minutes is not None and time.monotonic() - t0 > 60 * a.max_minutes
            if late and not all((q.id, m) in kept for m in modes):
                stopped += 1
                continue
            for m in modes:
                done += 1
                rec = kept.get((q.id, m))
                if rec is None:
                    rec = run_one(q, m, s, inputs)
                    rec["finished_at"] = time.strftime("%Y-%m-%d %H:%M:%S")
                    f.write(json.dumps(rec, ensure_ascii=False) + "\n")
                    f.flush()
                v = record_verdict(rec, q)
                print(
                    f"[{done}/{total}] {q.id} {m}: {rec['status']}, "
                    f"{rec.get('generated_tokens', '-')} tokens, {rec.get('wall_seconds')} s, "
                    + ("correct" if v.correct else f"{v.reason} {v.detail}"[:120]),
                    file=sys.stderr,
                    flush=True,
                )
                records.append(rec)
    if stopped:
        print(f"bfcl.py: --max-minutes reached, {stopped} question(s) not run", file=sys.stderr)
    meta = {
        "started": started,
        "run_seconds": round(time.monotonic() - t0, 1),
        "generation_seconds": round(sum(r.get("wall_seconds", 0) for r in records), 1),
        "command": sys.argv,
        "bfcl_eval": BFCL_VERSION,
        "dialect": s.dialect,
        "max_tokens": s.max_tokens,
        "threads": s.threads,
        "limit": a.limit,
        "offset": a.offset,
        "not_run": stopped,
        "model": s.model or "SmolLM2-135M-Instruct Q4_1 (callmask's default)",
        "generate_args": extra,
    }
    (a.out / "run.json").write_text(json.dumps(meta, indent=1) + "\n")
    finish(a.out, records, questions, meta)


def finish(
    out: Path, records: list[dict[str, Any]], questions: dict[str, Question], meta: dict[str, Any]
) -> None:
    """Writes OUT/scores.jsonl and OUT/report.md, prints the report."""
    limit = meta.get("limit", "?")
    if meta.get("offset"):
        limit = f"{limit} (after the first {meta['offset']})"
    if meta.get("not_run"):
        taken = (
            f"the first {limit} questions per category taken round robin until --max-minutes "
            f"({meta['not_run']} not run)"
        )
    else:
        taken = f"the first {limit} questions per category"
    extra = "".join(f" {x}" for x in meta.get("generate_args") or [])
    header = (
        f"BFCL v4 (bfcl-eval {meta.get('bfcl_eval', BFCL_VERSION)}); dialect "
        f"{meta.get('dialect', '?')}, tool_choice auto, greedy, max_tokens "
        f"{meta.get('max_tokens', '?')}{extra}, {meta.get('threads', '?')} thread(s); {taken}; "
        f"model {meta.get('model', '?')}; run started {meta.get('started', '?')}, "
        f"{meta.get('run_seconds', '?')} s ({meta.get('generation_seconds', '?')} s of callmask "
        "runs, resumed ones included)."
    )
    text, scored = report(records, questions, header)
    with open(out / "scores.jsonl", "w", encoding="utf-8") as f:
        for r in scored:
            keep = ("id", "category", "mode", "status", "correct", "reason", "detail", "calls")
            f.write(json.dumps({k: r.get(k) for k in keep}, ensure_ascii=False) + "\n")
    (out / "report.md").write_text(text)
    print(text, end="")


if __name__ == "__main__":
    main()
