"""The providers of worker pools (docs/autoscaling.md#providers): the kubernetes one
against a fake API server speaking the real REST paths (this machine has no cluster),
through the official client and a kubeconfig; the command one with a real script; and
a real server whose kubernetes pool meets an API that answers 500, then recovers."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from waiting import eventually

from flux.client import FluxClient
from flux.server.autoscale.providers.base import Change, Context, ProviderError, Stop
from flux.server.autoscale.providers.command import CommandProvider
from flux.server.autoscale.providers.kubernetes import DELETION_COST, KubernetesProvider

CONTEXT = Context("http://127.0.0.1:1", "/tmp", "not-used")


class FakeKubeApi:
    """The paths the provider uses: the Deployment's scale subresource, Pods (create,
    patch, delete); every call recorded; ``failures`` calls answered 500 first."""

    def __init__(self, failures: int = 0):
        self.calls: list[tuple[str, str, dict | None]] = []
        self.failures = failures
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                api.calls.append((self.command, self.path.split("?")[0], body))
                if api.failures > 0:
                    api.failures -= 1
                    return self._send(
                        500,
                        {
                            "kind": "Status",
                            "apiVersion": "v1",
                            "status": "Failure",
                            "code": 500,
                            "message": "etcd is having a bad day",
                        },
                    )
                return self._send(200, api.reply(self.command, self.path.split("?")[0], body))

            def _send(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_DELETE = _answer

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def reply(self, method: str, path: str, body: dict | None) -> dict:
        name = path.rsplit("/", 2)[-2] if path.endswith("/scale") else path.rsplit("/", 1)[-1]
        if path.endswith("/scale"):
            replicas = (body or {}).get("spec", {}).get("replicas", 0)
            return {
                "apiVersion": "autoscaling/v1",
                "kind": "Scale",
                "metadata": {"name": name},
                "spec": {"replicas": replicas},
                "status": {"replicas": replicas},
            }
        pod_name = (body or {}).get("metadata", {}).get("name", name)
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod_name}}

    def kubeconfig(self, folder: Path) -> str:
        path = folder / "kubeconfig"
        path.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "current-context": "fake",
                    "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
                    "users": [{"name": "fake", "user": {"token": "fake-token"}}],
                    "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
                }
            )
        )
        return str(path)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def kube():
    api = FakeKubeApi()
    yield api
    api.close()


def change(options: dict, **fields) -> Change:
    base = dict(
        pool="gpu-a100",
        provider="kubernetes",
        labels={"accel": "a100"},
        resources={"cpu": 8.0, "accel": 2.0},
        gpus=1,
        slots=2,
        options=options,
    )
    return Change(**{**base, **fields})


def test_deployment_replicas_through_the_scale_subresource_fake_kube_api(kube, tmp_path):
    options = {"namespace": "flux", "deployment": "workers-a100", "kubeconfig": kube.kubeconfig(tmp_path)}
    provider = KubernetesProvider(CONTEXT)
    asyncio.run(provider.apply(change(options, start=("gpu-a100-1", "gpu-a100-2"), size=3)))
    assert kube.calls == [
        ("PATCH", "/apis/apps/v1/namespaces/flux/deployments/workers-a100/scale", {"spec": {"replicas": 3}})
    ]
    kube.calls.clear()
    # scale-down: the drained worker's Pod is marked to go first, then replicas lowered
    asyncio.run(provider.apply(change(options, stop=(Stop("workers-a100-7c9d-x2"),), size=2)))
    assert kube.calls == [
        (
            "PATCH",
            "/api/v1/namespaces/flux/pods/workers-a100-7c9d-x2",
            {"metadata": {"annotations": {DELETION_COST: "-1000"}}},
        ),
        ("PATCH", "/apis/apps/v1/namespaces/flux/deployments/workers-a100/scale", {"spec": {"replicas": 2}}),
    ]


def test_one_pod_per_worker_from_a_template_fake_kube_api(kube, tmp_path):
    template = {
        "spec": {
            "containers": [
                {
                    "name": "worker",
                    "image": "flux:latest",
                    "command": ["flux", "start", "worker", "$(FLUX_WORKER_NAME)"],
                }
            ]
        }
    }
    options = {"namespace": "flux", "pod_template": template, "kubeconfig": kube.kubeconfig(tmp_path)}
    handles = asyncio.run(
        KubernetesProvider(CONTEXT).apply(
            change(options, start=("gpu-a100-ab12",), stop=(Stop("gpu-a100-old", "gpu-a100-old"),))
        )
    )
    assert handles == {"gpu-a100-ab12": "gpu-a100-ab12"}
    (deleted, created) = kube.calls
    assert deleted[:2] == ("DELETE", "/api/v1/namespaces/flux/pods/gpu-a100-old")
    method, path, pod = created
    assert (method, path, pod["metadata"]["name"]) == ("POST", "/api/v1/namespaces/flux/pods", "gpu-a100-ab12")
    assert pod["metadata"]["labels"] == {"flux.pool": "gpu-a100"}
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert env["FLUX_WORKER_NAME"] == "gpu-a100-ab12"
    assert env["FLUX_LABELS"] == "accel=a100 flux.pool=gpu-a100" and env["FLUX_RESOURCES"] == "accel=2"
    assert template["spec"]["containers"][0].get("env") is None  # the pool's template is not changed


def test_an_api_answering_500_is_a_provider_error_fake_kube_api(tmp_path):
    api = FakeKubeApi(failures=10)
    try:
        options = {"deployment": "w", "kubeconfig": api.kubeconfig(tmp_path)}
        with pytest.raises(ProviderError, match="kubernetes API answered 500"):
            asyncio.run(KubernetesProvider(CONTEXT).apply(change(options, start=("a",), size=1)))
    finally:
        api.close()


def test_the_command_gets_the_desired_count_and_the_names(tmp_path):
    record = tmp_path / "called"
    script = tmp_path / "scale.sh"
    script.write_text(
        f'#!/bin/sh\necho "$1|$FLUX_POOL|$FLUX_POOL_START|$FLUX_POOL_STOP|${{FLUX_BOOTSTRAP_TOKEN:-none}}" > {record}\n'
    )
    script.chmod(0o755)
    options = {"command": [str(script)]}
    asyncio.run(
        CommandProvider(CONTEXT).apply(
            change(options, provider="command", start=("p-1", "p-2"), stop=(Stop("p-0"),), size=2)
        )
    )
    assert record.read_text().strip() == "2|gpu-a100|p-1 p-2|p-0|none"
    script.write_text("#!/bin/sh\necho 'quota exceeded' >&2\nexit 3\n")
    with pytest.raises(ProviderError, match=r"scale.sh exited 3: quota exceeded"):
        asyncio.run(CommandProvider(CONTEXT).apply(change(options, provider="command", size=1)))


def test_a_server_reports_a_failing_api_and_recovers_fake_kube_api(cluster, tmp_path):
    api = FakeKubeApi(failures=1)
    try:
        with FluxClient(cluster.server_url) as client:
            client.create_pool(
                "gpu",
                "kubernetes",
                resources={"cpu": 1},
                min=1,
                max=3,
                options={"deployment": "workers", "kubeconfig": api.kubeconfig(tmp_path)},
            )
            failed = eventually(lambda: (p := client.show_pool("gpu"))["failures"] and p, 20, "never reported")
            assert failed["provider_error"].startswith("kubernetes API answered 500")
            recovered = eventually(
                lambda: (p := client.show_pool("gpu"))["failures"] == 0 and p["starting"] == 1 and p,
                30,
                "never retried after its backoff",
            )
            assert recovered["provider_error"] is None and recovered["desired"] == 1
            scales = [body for method, path, body in api.calls if path.endswith("/deployments/workers/scale")]
            assert scales == [{"spec": {"replicas": 1}}] * 2  # a 500, then the retry that worked; never doubled
    finally:
        api.close()
