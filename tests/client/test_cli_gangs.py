"""The CLI's gang helpers (docs/gangs.md#seeing-a-gang), pure: which member ``flux execution
logs`` reads, and the members' rows ``show`` and ``explain`` print. The same commands run
against a real server in tests/e2e/test_gang_seeing_e2e.py."""

from __future__ import annotations

import pytest

from flux.cli.core import UsageProblem
from flux.cli.gangs import logs_target, member_rows

GANG = {
    "id": "g" * 32,
    "gang": {"size": 3, "topology": "rack", "per_worker": 1, "start_timeout": 300.0},
    "members": [
        {"rank": rank, "id": f"{rank}" * 32, "worker_name": f"a{rank}", "attempt": 1, "state": "RUNNING"}
        for rank in range(3)
    ],
}


def test_logs_of_a_gang_read_the_member_of_the_rank_and_rank_0s_by_default(capsys):
    assert logs_target(GANG, 2) == "2" * 32
    assert logs_target(GANG, None) == "0" * 32
    assert "--rank 0 to 2" in capsys.readouterr().err  # stderr: a JSON log on stdout stays clean
    with pytest.raises(UsageProblem, match="ranks 0 to 2, not 3"):
        logs_target(GANG, 3)


def test_logs_of_an_execution_that_is_no_gang_take_no_rank():
    single = {"id": "s" * 32, "gang": None, "members": None}
    assert logs_target(single, None) == "s" * 32
    with pytest.raises(UsageProblem, match="is not a gang"):
        logs_target(single, 1)
    member = {"id": "m" * 32, "gang_id": "g" * 32, "rank": 1}
    assert logs_target(member, None) == "m" * 32


def test_members_read_by_rank_with_their_shortest_ids():
    rows = member_rows(GANG["members"])
    assert [r["rank"] for r in rows] == [0, 1, 2]
    assert rows[1] == {"rank": 1, "id": "1" * 12, "worker": "a1", "attempt": 1, "state": "RUNNING"}
