"""Results that JSON cannot hold, in the log: a chain of codecs, as Temporal's payload
converters are (docs/tasks.md, "Results and codecs").

JSON stays the default: a result JSON holds is recorded as it is, readable in the events,
the API and the console. A value JSON lacks (a datetime, a DataFrame, a dataclass) is
encoded by the first codec of the chain that takes it and recorded as an envelope that
names the codec and the value's type::

    {"$codec": "std", "type": "datetime.timedelta", "data": 90.0}
    {"$codec": "pickle", "type": "pandas.DataFrame", "data": "<base64>"}

``std`` (dates, times, durations, UUIDs, decimals, sets) and ``numpy`` (its scalars and
numeric arrays, by dtype and shape) decode to the value without running any code of it:
on by default everywhere. ``pickle`` is opt-in, because decoding
a pickle runs code that whoever wrote the log chose: it is on in a local run
(``Workflow.run``: the process that pickles is the one that reads) and on a worker whose
environment says ``FLUX_CODECS=pickle``. The server never decodes an envelope: it stores
the JSON it is given (docs/security.md). Each envelope is decoded where the workflow runs,
when a task's result comes back to its body or a run's output to its caller.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import enum
import json
import os
import pickle  # noqa: S403 - opt-in codec; never decoded by the server (docs/security.md)
import uuid
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Callable

from flux.model import differences

KEY = "$codec"
#: Codecs a worker enables beyond ``std`` (comma-separated names, e.g. ``pickle``).
ENV = "FLUX_CODECS"


@dataclass(frozen=True)
class Codec:
    """One link of the chain: what it takes, how it writes it as JSON and reads it back.
    ``safe``: decoding runs no code chosen by whoever wrote the value."""

    name: str
    safe: bool
    takes: Callable[[Any], bool]
    encode: Callable[[Any], Any]
    decode: Callable[[Any, str], Any]


STD_TYPES: dict[str, tuple[type, Callable[[Any], Any], Callable[[Any], Any]]] = {
    "datetime.datetime": (datetime.datetime, datetime.datetime.isoformat, datetime.datetime.fromisoformat),
    "datetime.date": (datetime.date, datetime.date.isoformat, datetime.date.fromisoformat),
    "datetime.time": (datetime.time, datetime.time.isoformat, datetime.time.fromisoformat),
    "datetime.timedelta": (
        datetime.timedelta,
        datetime.timedelta.total_seconds,
        lambda seconds: datetime.timedelta(seconds=seconds),
    ),
    "uuid.UUID": (uuid.UUID, str, uuid.UUID),
    "decimal.Decimal": (decimal.Decimal, str, decimal.Decimal),
    "set": (set, lambda value: sorted(value, key=repr), set),
    "frozenset": (frozenset, lambda value: sorted(value, key=repr), frozenset),
}


def _std_name(value: Any) -> str | None:
    return next((name for name, (kind, _, _) in STD_TYPES.items() if type(value) is kind), None)


STD = Codec(
    "std",
    safe=True,
    takes=lambda value: _std_name(value) is not None,
    encode=lambda value: STD_TYPES[_std_name(value)][1](value),
    decode=lambda data, kind: STD_TYPES[kind][2](data),
)


def _is_numpy(value: Any) -> bool:
    """A numpy scalar or a numeric array (numpy is imported only where a value of it exists)."""
    if type(value).__module__ != "numpy":
        return False
    kind = getattr(getattr(value, "dtype", None), "kind", "O")
    return kind in "biufc?" and not (kind == "c" and getattr(value, "ndim", 0))


def _numpy_encode(value: Any) -> Any:
    if value.ndim == 0:
        return value.item() if value.dtype.kind != "c" else [value.real.item(), value.imag.item()]
    return {"dtype": value.dtype.str, "shape": list(value.shape), "values": value.ravel().tolist()}


def _numpy_decode(data: Any, kind: str) -> Any:
    import numpy  # only where a recorded numpy value is read back

    if isinstance(data, dict):
        return numpy.array(data["values"], dtype=numpy.dtype(data["dtype"])).reshape(data["shape"])
    scalar = getattr(numpy, kind.rpartition(".")[2], None)
    if not (isinstance(scalar, type) and issubclass(scalar, numpy.generic)):
        raise TypeError(f"not a numpy scalar type: {kind}")
    return scalar(complex(*data) if isinstance(data, list) else data)


#: numpy scalars and numeric arrays, by dtype and shape: decoding builds only numpy numbers.
NUMPY = Codec("numpy", safe=True, takes=_is_numpy, encode=_numpy_encode, decode=_numpy_decode)
PICKLE = Codec(
    "pickle",
    safe=False,
    takes=lambda value: True,
    encode=lambda value: base64.b64encode(pickle.dumps(value)).decode("ascii"),
    decode=lambda data, kind: pickle.loads(base64.b64decode(data)),  # noqa: S301 - opted in (docs/security.md)
)
#: The chain, in order: the first codec that takes a value encodes it.
CODECS: tuple[Codec, ...] = (STD, NUMPY, PICKLE)
BY_NAME = {codec.name: codec for codec in CODECS}

#: Codecs a local run enables for what it runs (``Workflow.run``: ``pickle``).
_local: ContextVar[frozenset[str]] = ContextVar("flux_local_codecs", default=frozenset())


class CodecRefused(TypeError):
    """No enabled codec takes the value: the message names its type and what would."""


def enabled() -> frozenset[str]:
    """``std`` and ``numpy`` always; ``pickle`` in a local run or where ``FLUX_CODECS`` names it."""
    named = {name.strip() for name in os.environ.get(ENV, "").split(",") if name.strip()}
    return frozenset({"std", "numpy"}) | named | _local.get()


def enable_locally(names: frozenset[str]) -> Any:
    """Enable ``names`` for what runs in this context (a local run); returns the reset token."""
    return _local.set(names)


def reset_local(token: Any) -> None:
    _local.reset(token)


def type_name(value: Any) -> str:
    kind = type(value)
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


def plain(value: Any) -> Any:
    """What JSON nearly holds, as the JSON value (the type is not kept): an Enum's value.
    None when the value is not one."""
    if isinstance(value, enum.Enum):
        return value.value
    return None


def encoder(names: frozenset[str] | None = None) -> Callable:
    """``json.dumps``'s ``default``: each value JSON lacks, at any depth, as its envelope."""
    allowed = enabled() if names is None else names

    def default(value: Any) -> Any:
        simple = plain(value)
        if simple is not None:
            return simple
        for codec in CODECS:
            if codec.name in allowed and codec.takes(value):
                kind = _std_name(value) if codec is STD else type_name(value)
                if codec is PICKLE:
                    differences.pickled(kind, ENV)
                return {KEY: codec.name, "type": kind, "data": codec.encode(value)}
        raise CodecRefused(
            f"Object of type {type_name(value)} is not JSON serializable and no enabled codec takes it "
            f"(enable pickle on the worker with {ENV}=pickle, or keep it with output_storage=)"
        )

    return default


def is_envelope(value: Any) -> bool:
    return isinstance(value, dict) and KEY in value and set(value) == {KEY, "type", "data"}


def _decode_one(envelope: dict, allowed: frozenset[str]) -> Any:
    name = envelope[KEY]
    codec = BY_NAME.get(name)
    if codec is None or name not in allowed:
        raise CodecRefused(
            f"a recorded {envelope['type']} is encoded by codec {name!r}, which is not enabled here"
            + (f" ({ENV}={name})" if codec is not None else "")
        )
    return codec.decode(envelope["data"], envelope["type"])


def decode(value: Any, names: frozenset[str] | None = None) -> Any:
    """The value a log form stands for: each envelope, at any depth, decoded; a value with
    no envelope is returned as it is (the same object)."""
    if not _has_envelope(value):
        return value
    allowed = enabled() if names is None else names
    return json.loads(json.dumps(value), object_hook=lambda d: _decode_one(d, allowed) if is_envelope(d) else d)


def _has_envelope(value: Any) -> bool:
    if isinstance(value, dict):
        return is_envelope(value) or any(_has_envelope(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_envelope(v) for v in value)
    return False


def codecs_in(value: Any) -> list[str]:
    """The codecs named in a log form, outermost first (what the console shows beside it)."""
    if is_envelope(value):
        return [value[KEY]]
    if isinstance(value, dict):
        return [name for v in value.values() for name in codecs_in(v)]
    if isinstance(value, list):
        return [name for v in value for name in codecs_in(v)]
    return []
