"""``GangContext`` (issue 53): what a started gang member sees as ``ctx.gang``, and the
environment torch.distributed's ``env://`` reads from it."""

from __future__ import annotations

import dataclasses

import pytest

from flux import GangContext as Exported
from flux.domain.gang import GangContext, GangMember
from flux.model.runtime import ExecutionContext

MEMBERS = (
    GangMember(0, "w1", "10.0.0.1:29500"),
    GangMember(1, "w1", "10.0.0.1:29501"),
    GangMember(2, "w2", "10.0.0.2:41000"),
)


def test_env_is_what_torch_distributed_env_init_reads():
    gang = GangContext(
        rank=2, size=3, local_rank=0, local_size=1, master_addr="10.0.0.1", master_port=29500, members=MEMBERS
    )
    assert gang.env() == {
        "MASTER_ADDR": "10.0.0.1",
        "MASTER_PORT": "29500",
        "RANK": "2",
        "WORLD_SIZE": "3",
        "LOCAL_RANK": "0",
        "LOCAL_WORLD_SIZE": "1",
    }
    assert all(isinstance(value, str) for value in gang.env().values())  # os.environ takes strings only


def test_it_is_frozen_and_names_its_peers_by_rank():
    gang = GangContext(rank=0, size=3, local_rank=0, local_size=2, master_addr="h", master_port=1, members=MEMBERS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        gang.rank = 1  # type: ignore[misc]
    assert [member.worker for member in gang.members] == ["w1", "w1", "w2"]
    assert gang.members[2].address == "10.0.0.2:41000"
    assert hash(gang) == hash(dataclasses.replace(gang))
    assert Exported is GangContext


def test_an_execution_that_is_not_a_gang_member_has_no_gang():
    assert ExecutionContext(execution_id="e", workflow_name="w").gang is None
