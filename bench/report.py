"""Render a results record as the Markdown table used in bench/README.md.

python -m bench.report                      # newest record in bench/results
python -m bench.report bench/results/X.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench.common import Figure, _num

RESULTS = Path(__file__).resolve().parent / "results"


def table(record: dict) -> str:
    date = record["started_at"][:10]
    commit = record.get("commit") or "?"
    if record.get("dirty"):
        commit += " (dirty)"
    rows = [
        "| figure | median | p95 | unit | n | aim | met | date | commit |",
        "|---|---:|---:|---|---:|---|---|---|---|",
    ]
    for data in record["figures"]:
        figure = Figure(**{k: v for k, v in data.items() if k in Figure.__dataclass_fields__})
        high = "-" if figure.p95 is None else _num(figure.p95)
        if figure.p99 is not None:
            high += f" (p99 {_num(figure.p99)})"
        met = "" if figure.met is None else ("yes" if figure.met else "**no**")
        rows.append(
            f"| {figure.name} | {_num(figure.median)} | {high} | {figure.unit} | {figure.n} | "
            f"{figure.aim or ''} | {met} | {date} | {commit} |"
        )
    skipped = [
        f"{k}: {v.get('status')} ({v.get('reason')})" for k, v in record["scenarios"].items() if v.get("status") != "ok"
    ]
    if skipped:
        rows += ["", "Not measured: " + "; ".join(skipped)]
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else max(RESULTS.glob("*.json"), key=lambda p: p.stat().st_mtime)
    record = json.loads(path.read_text())
    print(
        f"{path.name}: {record['mode']} run, {record['duration_s']} s, backend {record['backend']}, "
        f"{record['machine']['cores']} cores, Python {record['machine']['python']}\n"
    )
    print(table(record))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
