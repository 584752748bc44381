"""Run flux-core's example programs unchanged on flux-core and on this engine, and
compare the state and output of each run they make (issue 37's measure).

    python3 scripts/compare_flux_core.py EXAMPLES_DIR [--flux-core-python PATH]

EXAMPLES_DIR is flux-core's ``examples/`` folder (kept outside this repository). Each
program runs as ``__main__`` in a fresh interpreter, in a fresh HOME, from the folder
above EXAMPLES_DIR (the examples name their data as ``examples/data/...``), first with
flux-core's interpreter (a venv with ``flux-core==0.87.5``), then with this one (this
checkout on PYTHONPATH). Every ``run``/``resume`` result is recorded as (state, output);
a failure's output is compared by its exception type. Programs that need an LLM or a
network service are skipped by path. Prints one line per program and the count.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

#: What needs an LLM, an agent runtime, MCP or the network (issue 37's 36 of 98).
NEEDS_SERVICE = ("ai/", "agents/", "agent_architecture/", "mcp/", "github_stars", "airgapped", "approvals/")
MARK = "@@FLUX-COMPARE@@"

PROBE = r'''
import json, runpy, sys
results = []
def record(ctx):
    data = json.loads(ctx.to_json())
    output = data.get("output")
    state = data.get("state")
    if state == "FAILED" and isinstance(output, dict):
        output = {"type": output.get("type")}
    if state == "PAUSED":
        output = None
    results.append([state, output])
    return ctx
def patch(cls, *names):
    for name in names:
        original = getattr(cls, name)
        def wrapped(self, *a, __original=original, **k):
            return record(__original(self, *a, **k))
        setattr(cls, name, wrapped)
if KIND == "flux-core":
    import flux.workflow
    patch(sys.modules["flux.workflow"].workflow, "run", "resume")
else:
    import flux.model.workflow as module
    patch(module.Workflow, "run", "resume")
sys.argv = [PATH]
try:
    runpy.run_path(PATH, run_name="__main__")
except BaseException as exc:
    results.append(["ERROR", f"{type(exc).__name__}: {exc}"[:300]])
print("MARK" + json.dumps(results, default=str))
'''.replace("MARK", MARK)


def run(python: str, kind: str, program: Path, cwd: Path, env: dict[str, str], timeout: float) -> list:
    code = f"KIND = {kind!r}\nPATH = {str(program)!r}\n" + PROBE
    with tempfile.TemporaryDirectory() as home:
        for where in (Path(home), cwd):  # flux-core keeps its inline runs' database in .flux/
            (where / ".flux").mkdir(exist_ok=True)
        try:
            done = subprocess.run([python, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                                  env={**env, "HOME": home}, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return [["ERROR", f"timed out after {timeout:.0f} s"]]
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(MARK):
            return json.loads(line[len(MARK):])
    return [["ERROR", (done.stderr.strip().splitlines() or ["no output"])[-1][:300]]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("examples", type=Path)
    parser.add_argument("--flux-core-python", default="/work/fluxcore-venv/bin/python")
    parser.add_argument("--timeout", type=float, default=120)
    args = parser.parse_args()
    root = Path(__file__).resolve().parents[1]
    examples = args.examples.resolve()
    programs = sorted(p for p in examples.rglob("*.py") if p.name != "__init__.py"
                      and not any(str(p.relative_to(examples)).startswith(s) for s in NEEDS_SERVICE))
    base = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    same = 0
    for program in programs:
        theirs = run(args.flux_core_python, "flux-core", program, examples.parent, base, args.timeout)
        ours = run(sys.executable, "flux", program, examples.parent, {**base, "PYTHONPATH": str(root)}, args.timeout)
        ok = theirs == ours and not any(state == "ERROR" for state, _ in theirs)
        same += ok
        print(f"{'SAME' if ok else 'DIFF'} {program.relative_to(examples)}" + ("" if ok else f"\n  flux-core: {theirs}\n  here:      {ours}"))
    print(f"{same} of {len(programs)} run unchanged with the same state and output")
    return 0


if __name__ == "__main__":
    sys.exit(main())
