"""Differential check of callmask's structural tags against XGrammar itself.

For each case of examples/structural_tags/differential.json (a structural tag and texts), asks
XGrammar (the venv of scripts/bench.sh, `.cache/venv-xgrammar`) whether the whole text is
accepted and may end, and `callmask parse --structural-tag` the same, and prints every text on
which they disagree. Expected disagreements (documented in docs/structural-tags.md): callmask lets object
properties come in any order (XGrammar keeps the declared order), and callmask's default
whitespace policy refuses blank lines inside JSON (XGrammar allows any whitespace).

    .cache/venv-xgrammar/bin/python scripts/structural-tag-diff.py target/release/callmask [--record]

With `--record`, XGrammar's verdicts are written to
examples/structural_tags/differential.xgrammar.json, which the core test
`differential_cases_agree_with_recorded_xgrammar` checks callmask against on every CI run.
"""

import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_xgrammar  # noqa: E402  (installs the torch/transformers stand-ins, imports xgrammar)

xgr = bench_xgrammar.xgr
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
args = [a for a in sys.argv[1:] if a != "--record"]
record = "--record" in sys.argv[1:]
callmask = args[0] if args else os.path.join(root, "target/release/callmask")
cases = json.load(open(os.path.join(root, "examples/structural_tags/differential.json")))

vocab = [bytes([i]) for i in range(256)]
compiler = xgr.GrammarCompiler(
    xgr.TokenizerInfo(vocab, vocab_type=xgr.VocabType.RAW, stop_token_ids=[]), max_threads=1
)
texts = disagreements = 0
verdicts = []
for n, case in enumerate(cases):
    verdicts.append([])
    compiled = compiler.compile_grammar(xgr.Grammar.from_structural_tag(json.dumps(case["tag"])))
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(case["tag"], f)
    for text in case["texts"]:
        m = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
        theirs = m.accept_string(text) and m.is_terminated()
        verdicts[-1].append(theirs)
        r = subprocess.run(
            [callmask, "parse", "--structural-tag", f.name],
            input=text.encode(),
            capture_output=True,
        )
        if r.returncode not in (0, 1):
            sys.exit(f"callmask failed on case {n}: {r.stderr.decode()}")
        ours = r.returncode == 0
        texts += 1
        if ours != theirs:
            disagreements += 1
            print(f"case {n}: {text!r}: xgrammar {theirs}, callmask {ours}")
    os.unlink(f.name)
print(f"{texts} texts, {disagreements} disagreements (xgrammar {bench_xgrammar.XGR_VERSION})")
if record:
    out = os.path.join(root, "examples/structural_tags/differential.xgrammar.json")
    with open(out, "w") as f:
        rows = ",\n  ".join(json.dumps(v) for v in verdicts)
        f.write(f'{{"xgrammar": "{bench_xgrammar.XGR_VERSION}",\n "accepted": [\n  {rows}\n ]}}\n')
    print(f"recorded in {out}")
