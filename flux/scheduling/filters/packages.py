"""Installed packages: every requirement (``torch>=2.0``) must be met by the worker's
installed version, compared as versions (``2.10 > 2.9``), pre-releases included."""

from __future__ import annotations

from typing import Any, Mapping

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from flux.domain.resource_request import ResourceRequest
from flux.scheduling.filters.base import Check, Filter, Reason
from flux.scheduling.snapshot import WorkerView


class Packages(Filter):
    name = "packages"
    phrase = "missing or mismatched package"
    static = True

    def applies(self, request: ResourceRequest | None, affinity: Mapping[str, Any] | None) -> bool:
        return request is not None and bool(request.packages)

    def bind(self, request: ResourceRequest, affinity: Mapping[str, Any] | None) -> Check:
        requirements = request.requirements

        def check(worker: WorkerView) -> Reason | None:
            for requirement in requirements:
                if message := self._unmet(requirement, worker.packages):
                    return self.reason(message)
            return None

        return check

    @staticmethod
    def _unmet(requirement: Requirement, installed: Mapping[str, str]) -> str | None:
        name = canonicalize_name(requirement.name)
        if name not in installed:
            return f"package {name} not installed"
        try:
            version = Version(installed[name])
        except InvalidVersion:
            return f"package {name} has unparseable version {installed[name]!r}"
        if not requirement.specifier.contains(version, prereleases=True):
            return f"package {name} {installed[name]} does not satisfy {requirement.specifier}"
        return None


PACKAGES = Packages()
