"""The messages between the server and its workers, as typed pydantic models.

The server's routes take and return them (``flux.server.schemas`` re-exports them,
so the API and its OpenAPI document are theirs), and the worker builds its requests
and decodes the replies with them at its edge (``flux.worker.session``): one
definition of each message for both sides. Pure: it imports only ``flux.domain``
and pydantic (an import-linter contract).

Rooms: ``base`` (``Strict`` request bodies), ``registration``, ``heartbeat``,
``claims`` (the claimed job, its ``allotment``), ``checkpoints``, ``logs``,
``services`` (cache lookups and secrets asked on an attempt's behalf), ``failures``
(what a task or workflow raised, with its traceback). Each name is
imported on first use: a runner child decodes its job and loads nothing else.
"""

import importlib

#: Each exported name and the module that defines it, imported on first use (PEP 562).
_EXPORTS = {
    "Strict": "base",
    "GangSeat": "gangs",
    "GangPeer": "gangs",
    "Rendezvous": "gangs",
    "RendezvousReply": "gangs",
    "Number": "base",
    "GPUInfo": "registration",
    "ResourcesInfo": "registration",
    "PackageInfo": "registration",
    "RuntimeInfo": "registration",
    "WorkerRegistration": "registration",
    "RegistrationReply": "registration",
    "Heartbeat": "heartbeat",
    "HeartbeatReply": "heartbeat",
    "RequestsJSON": "claims",
    "AllotmentJSON": "claims",
    "AllotmentField": "claims",
    "ClaimRequest": "claims",
    "ClaimedExecution": "claims",
    "ClaimReply": "claims",
    "EventIn": "checkpoints",
    "Checkpoint": "checkpoints",
    "CheckpointReply": "checkpoints",
    "LogStream": "logs",
    "MAX_LOG_LINES": "logs",
    "LogLineIn": "logs",
    "LogBatch": "logs",
    "LogBatchReply": "logs",
    "Failure": "failures",
    "Frame": "failures",
    "RaisedError": "failures",
    "CacheLookup": "services",
    "CacheLookupReply": "services",
    "SecretRequest": "services",
    "SecretValues": "services",
}


def __getattr__(name: str) -> object:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)


__all__ = list(_EXPORTS)
