"""A namespace's quota changed through the API and ``flux namespace quota`` on a real
server (docs/contention.md#quotas-per-namespace): a key that names no dimension is
refused with the closest valid one and the quota is left as it was; keys given are
merged into the quota (the others kept), ``--unset`` removes one, ``--replace`` and
``PUT /namespaces/NAME/quota`` replace the whole quota; the CLI prints it before and after."""

from __future__ import annotations

import json
import re

import httpx
import pytest
from shared import assert_error, error_line, flux

from flux.domain.quotas import Quota, QuotaChange
from flux.domain.resource_request import InvalidResourceRequest


@pytest.mark.parametrize(
    "key, says",
    [
        ("gpus", "did you mean gpu?"),
        ("memroy", "did you mean memory?"),
        ("execution", "did you mean executions?"),
        ("fpga", "did you mean resources.fpga?"),
        ("foo.bar", "unknown quota key 'foo.bar'"),
        ("gpu_memory", "GPU memory is not counted by a quota"),
        ("resources.cpu", "'cpu' is not a custom resource"),
    ],
)
def test_a_key_that_names_no_dimension_is_refused_with_the_closest_one(key, says):
    with pytest.raises(InvalidResourceRequest, match=says.replace("?", r"\?")):
        Quota.from_mapping({key: 1})
    with pytest.raises(InvalidResourceRequest, match=says.replace("?", r"\?")):
        QuotaChange.from_mapping({key: None})


def test_a_change_sets_and_removes_keys_and_keeps_the_rest():
    quota = Quota.parse(["cpu=1", "executions=2", "resources.fpga=2"])
    changed = QuotaChange.parse(["gpu=0.5"], unset=["resources.fpga"]).applied_to(quota)
    assert changed.to_json() == {"cpu": 1, "gpu": 0.5, "executions": 2}
    assert changed.describe() == "cpu=1 gpu=0.5 executions=2"
    assert quota.keys() == {"cpu": 1, "resources.fpga": 2, "executions": 2}
    assert Quota.from_mapping(quota.keys()) == quota  # what is shown as keys is what is set
    assert QuotaChange.parse([], unset=["executions"]).applied_to(quota).executions is None
    with pytest.raises(InvalidResourceRequest, match="both set and unset"):
        QuotaChange.parse(["gpu=1"], unset=["gpu"])


def test_the_api_merges_a_patch_replaces_on_put_and_refuses_a_typo_leaving_the_quota(cluster):
    url = cluster.server_url
    assert httpx.post(f"{url}/namespaces", json={"name": "ml"}).status_code == 201

    def patch(quota) -> httpx.Response:  # noqa: ANN001 - a JSON value
        return httpx.patch(f"{url}/namespaces/ml", json={"quota": quota})

    assert patch({"cpu": 1, "executions": 2}).json()["quota"] == {"cpu": 1, "executions": 2}
    typo = assert_error(patch({"gpus": 2}), 422, "validation_error")
    assert "unknown quota key 'gpus'; did you mean gpu?" in typo["detail"]
    assert typo["errors"][0]["loc"] == ["body", "quota"]
    assert "unknown quota key 'foo.bar'" in assert_error(patch({"foo.bar": 1}), 422, "validation_error")["detail"]
    cores = assert_error(patch({"cpu": "abc"}), 422, "validation_error")["detail"]  # the quota's field, not a request's
    assert cores.startswith("quota: quota cpu: cannot parse 'abc' as cores"), cores
    assert httpx.get(f"{url}/namespaces/ml").json()["quota"] == {"cpu": 1, "executions": 2}  # unchanged

    assert patch({"gpu": 2}).json()["quota"] == {"cpu": 1, "gpu": 2, "executions": 2}  # the rest kept
    assert patch({"cpu": None, "resources.fpga": 4}).json()["quota"] == {"fpga": 4, "gpu": 2, "executions": 2}
    assert patch({"resources.fpga": None}).json()["quota"] == {"gpu": 2, "executions": 2}

    def put(quota) -> httpx.Response:  # noqa: ANN001 - a JSON value
        return httpx.put(f"{url}/namespaces/ml/quota", json={"quota": quota})

    assert put({"memory": "1Gi"}).json()["quota"] == {"memory": 1024**3}  # replaced
    assert "did you mean gpu?" in assert_error(put({"gpus": 1}), 422, "validation_error")["detail"]
    assert put({}).json()["quota"] is None
    assert patch({"executions": 3}).json()["quota"] == {"executions": 3}
    assert patch(None).json()["quota"] is None  # the whole quota removed
    assert_error(httpx.put(f"{url}/namespaces/nope/quota", json={"quota": {}}), 404, "not_found")


def quota(url: str, *args: str, check: bool = True):  # noqa: ANN201
    return flux("namespace", "quota", "ml", *args, server_url=url, check=check)


def test_the_cli_merges_unsets_replaces_and_prints_the_quota_before_and_after(cluster):
    url = cluster.server_url
    flux("namespace", "create", "ml", server_url=url)
    quota(url, "cpu=1", "executions=2")

    typo = quota(url, "gpus=2", check=False)
    assert typo.returncode == 2
    assert error_line(typo).startswith("Error: unknown quota key 'gpus'; did you mean gpu?")
    assert "did you mean" in error_line(quota(url, "--unset", "gpus", check=False))
    assert "unknown quota key 'foo.bar'" in error_line(quota(url, "foo.bar=1", check=False))
    assert error_line(quota(url, "cpu=-1", check=False)).startswith("Error: quota cpu: cannot parse '-1' as cores")
    assert json.loads(quota(url, "--format", "json").stdout)["quota"] == {"cpu": 1, "executions": 2}  # unchanged

    merged = quota(url, "gpu=2").stdout
    assert "before: cpu=1 executions=2" in merged and "after:  cpu=1 gpu=2 executions=2" in merged
    unset = quota(url, "--unset", "cpu", "--unset", "executions", "memory=64Gi").stdout
    assert "before: cpu=1 gpu=2 executions=2" in unset and "after:  gpu=2 memory=64Gi" in unset
    replaced = quota(url, "--replace", "resources.fpga=2").stdout
    assert "before: gpu=2 memory=64Gi" in replaced and "after:  resources.fpga=2" in replaced
    as_json = json.loads(quota(url, "executions=1", "--format", "json").stdout)
    assert as_json["quota"] == {"fpga": 2, "executions": 1}
    cleared = quota(url, "--clear").stdout
    assert "before: resources.fpga=2 executions=1" in cleared and "after:  none" in cleared

    for args, says in (
        (("--replace",), "--replace makes LIMITS the whole quota"),
        (("--replace", "gpu=1", "--unset", "cpu"), "--replace makes LIMITS the whole quota"),
        (("--clear", "gpu=1"), "--clear removes the whole quota"),
        (("gpu=1", "--unset", "gpu"), "both set and unset"),
    ):
        refused = quota(url, *args, check=False)
        assert refused.returncode == 2 and says in error_line(refused), args


def test_show_and_list_print_the_quota_as_quota_does_and_a_change_answers_as_a_read_does(cluster):
    """``namespace show``/``list`` print the quota and what is held in the form ``namespace
    quota`` takes and prints, never JSON; PATCH and PUT answer the namespace as GET does
    (the server's fair-share half-life, not 0)."""
    url = cluster.server_url
    flux("namespace", "create", "ml", server_url=url)
    patched = httpx.patch(f"{url}/namespaces/ml", json={"quota": {"cpu": 1, "memory": "4Gi", "executions": 2}})
    put = httpx.put(f"{url}/namespaces/ml/quota", json={"quota": {"cpu": 1, "memory": "4Gi", "executions": 2}})
    read = httpx.get(f"{url}/namespaces/ml").json()
    assert read["fair_share_half_life"] == 3600.0  # the server's default, 1h
    for changed in (patched.json(), put.json()):
        assert changed == read

    shown = flux("namespace", "show", "ml", server_url=url).stdout
    assert "cpu=1 memory=4Gi executions=2" in shown and "executions=0" in shown  # the quota; held: nothing
    assert "{" not in shown and "0% of the fleet" in shown and re.search(r"│ fair_share_half_life +│ 1h +│", shown)
    listed = flux("namespace", "list", server_url=url, env={"COLUMNS": "120"}).stdout
    assert "cpu=1 memory=4Gi executions=2" in next(line for line in listed.splitlines() if " ml " in line)
    assert "cpu=1 memory=4Gi executions=2" in quota(url).stdout  # without LIMITS: the same record
    assert json.loads(flux("namespace", "show", "ml", "--format", "json", server_url=url).stdout)["quota"] == {
        "cpu": 1,
        "memory": 4 * 1024**3,
        "executions": 2,
    }
