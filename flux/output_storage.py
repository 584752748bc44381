"""flux-core's ``output_storage=``: a task's result or a workflow's output kept outside the
log, the log recording its reference (a small JSON object), for values that are not JSON
(a DataFrame). ``LocalFileStorage`` keeps them as pickles in a directory of this machine:
the task that stores and the workflow that reads must share it (one process, or a shared
volume), and whoever can write there can run code in them: keep it private
(docs/migrating-from-flux-core.md).
"""

from __future__ import annotations

import json
import os
import pickle  # noqa: S403 - the values are this machine's own, in a private directory
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["InlineOutputStorage", "LocalFileStorage", "OutputStorage", "OutputStorageReference"]


@dataclass(frozen=True)
class OutputStorageReference:
    """flux-core's reference to a stored value: what a run of a workflow with
    ``output_storage=`` gives as its output (the log records it as ``to_dict()``)."""

    storage_type: str
    reference_id: str
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def of(cls, reference: Any) -> "OutputStorageReference | Any":
        """A recorded reference (its dict) as the object; anything else as it is."""
        if isinstance(reference, dict) and {"storage_type", "reference_id"} <= set(reference):
            return cls(reference["storage_type"], reference["reference_id"], dict(reference.get("metadata") or {}))
        return reference


class OutputStorage:
    """``store(reference_id, value)`` gives a JSON reference; ``retrieve(reference)`` the value."""

    def store(self, reference_id: str, value: Any) -> Any:
        raise NotImplementedError

    def retrieve(self, reference: Any) -> Any:
        raise NotImplementedError

    def delete(self, reference: Any) -> None:
        raise NotImplementedError


class InlineOutputStorage(OutputStorage):
    """The value itself is the reference: what a task without ``output_storage`` does."""

    def store(self, reference_id: str, value: Any) -> Any:
        return value

    def retrieve(self, reference: Any) -> Any:
        return reference

    def delete(self, reference: Any) -> None:
        return None


def default_storage_dir() -> Path:
    """Where ``LocalFileStorage()`` keeps values (flux-core's ``local_storage_path``)."""
    return Path(os.environ.get("FLUX_OUTPUT_STORAGE_DIR") or Path.home() / ".flux" / "outputs")


class LocalFileStorage(OutputStorage):
    """One file per value under ``base_path`` (``FLUX_OUTPUT_STORAGE_DIR``, default
    ``~/.flux/outputs``): JSON when the value is JSON, a pickle otherwise."""

    def __init__(self, base_path: str | os.PathLike | None = None):
        self.base_path = Path(base_path or default_storage_dir())

    def _path(self, reference_id: str) -> Path:
        return self.base_path / re.sub(r"[^A-Za-z0-9_.:-]", "_", reference_id)

    def store(self, reference_id: str, value: Any) -> dict[str, Any]:
        """The reference in flux-core's shape (``metadata.serializer``: ``json`` or ``pkl``)."""
        self.base_path.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            data, serializer = json.dumps(value).encode(), "json"
        except (TypeError, ValueError):
            data, serializer = pickle.dumps(value), "pkl"
        self._path(reference_id).write_bytes(data)
        return {"storage_type": "local_file", "reference_id": reference_id, "metadata": {"serializer": serializer}}

    def retrieve(self, reference: dict[str, Any] | OutputStorageReference) -> Any:
        if isinstance(reference, OutputStorageReference):
            reference = reference.to_dict()
        data = self._path(reference["reference_id"]).read_bytes()
        # a reference recorded before the metadata shape kept "serializer" at the top
        if reference.get("metadata", reference).get("serializer") == "json":
            return json.loads(data)
        return pickle.loads(data)  # noqa: S301 - written by store() above, in a private directory

    def delete(self, reference: dict[str, str] | OutputStorageReference) -> None:
        reference_id = (
            reference.reference_id if isinstance(reference, OutputStorageReference) else reference["reference_id"]
        )
        self._path(reference_id).unlink(missing_ok=True)
