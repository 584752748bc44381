"""``kubernetes``: a Deployment's replicas through the scale subresource, or one worker
Pod per worker from a template, with the official ``kubernetes`` client (in-cluster,
else a kubeconfig).

Deployment mode cannot name the Pod a scale-down removes, so before lowering
``replicas`` the drained workers' Pods (a worker there is named after its Pod, through
the downward API) get ``controller.kubernetes.io/pod-deletion-cost: -1000``, which the
ReplicaSet controller deletes first. Pod mode names each Pod after its worker and
deletes exactly the drained ones. Calls are blocking: each runs on a thread.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from flux.server.autoscale.providers.base import Change, Provider, ProviderError, custom_resources, worker_labels
from flux.server.autoscale.schemas import KubernetesOptions

#: What makes the ReplicaSet controller delete a drained worker's Pod before the others.
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"


def api_client(options: KubernetesOptions) -> Any:
    """In-cluster when running in a Pod and no kubeconfig is named; else the kubeconfig."""
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    configuration = client.Configuration()
    if options.kubeconfig is None:
        try:
            config.load_incluster_config(client_configuration=configuration)
            return client.ApiClient(configuration)
        except ConfigException:
            pass
    config.load_kube_config(config_file=options.kubeconfig, context=options.context, client_configuration=configuration)
    return client.ApiClient(configuration)


def pod_manifest(change: Change, options: KubernetesOptions, name: str) -> dict:
    """The template with the worker's name, labels, resources and slots filled in."""
    pod = copy.deepcopy(options.pod_template or {})
    pod.setdefault("apiVersion", "v1")
    pod.setdefault("kind", "Pod")
    metadata = pod.setdefault("metadata", {})
    metadata["name"] = name
    metadata.setdefault("labels", {})["flux.pool"] = change.pool
    env = [
        {"name": "FLUX_WORKER_NAME", "value": name},
        {"name": "FLUX_LABELS", "value": " ".join(f"{k}={v}" for k, v in worker_labels(change).items())},
        {"name": "FLUX_RESOURCES", "value": " ".join(f"{k}={v:g}" for k, v in custom_resources(change).items())},
        {"name": "FLUX_MAX_CONCURRENT_EXECUTIONS", "value": str(change.slots)},
    ]
    for container in pod.setdefault("spec", {}).setdefault("containers", []):
        container["env"] = [*container.get("env", []), *env]
    return pod


class KubernetesProvider(Provider):
    async def apply(self, change: Change) -> dict[str, str]:
        options = KubernetesOptions.model_validate(change.options)
        try:
            return await asyncio.to_thread(self._apply, change, options)
        except ProviderError:
            raise
        except Exception as exc:  # noqa: BLE001 - ApiException, a kubeconfig that does not load, the network
            raise ProviderError(_describe(exc)) from None

    def _apply(self, change: Change, options: KubernetesOptions) -> dict[str, str]:
        from kubernetes import client

        with api_client(options) as api:
            core = client.CoreV1Api(api)
            if options.deployment is not None:
                for stop in change.stop:
                    _ignore_missing(
                        lambda: core.patch_namespaced_pod(
                            stop.name, options.namespace, {"metadata": {"annotations": {DELETION_COST: "-1000"}}}
                        )
                    )
                client.AppsV1Api(api).patch_namespaced_deployment_scale(
                    options.deployment, options.namespace, {"spec": {"replicas": change.size}}
                )
                return {}
            for stop in change.stop:
                _ignore_missing(lambda: core.delete_namespaced_pod(stop.handle or stop.name, options.namespace))
            started = {}
            for name in change.start:
                core.create_namespaced_pod(options.namespace, pod_manifest(change, options, name))
                started[name] = name
            return started


def _ignore_missing(call) -> None:  # noqa: ANN001 - a call of the client
    from kubernetes.client.exceptions import ApiException

    try:
        call()
    except ApiException as exc:
        if exc.status != 404:
            raise


def _describe(exc: Exception) -> str:
    status = getattr(exc, "status", None)
    if status is not None:
        return f"kubernetes API answered {status} {getattr(exc, 'reason', '') or ''}".strip()
    return f"kubernetes: {type(exc).__name__}: {exc}"[:500]
