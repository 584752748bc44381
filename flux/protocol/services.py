"""What a worker asks the server on a running attempt's behalf: a cached task
result, and the secrets its tasks requested (fenced by the attempt)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, field_validator

from flux.domain.names import check_name
from flux.protocol.base import Strict


class CacheLookup(Strict):
    key: str = Field(pattern=r"^[0-9a-f]{64}$", description="The cache key the child computed (sha256, hex)")
    execution: str | None = Field(
        default=None,
        max_length=32,
        description="The execution whose attempt asks (held by this worker): its namespace's entries; none: default's",
    )


class CacheLookupReply(BaseModel):
    hit: bool
    value: Any = Field(default=None, description="The cached result (when hit)")


class SecretRequest(Strict):
    attempt: int = Field(ge=1, le=2**31 - 1)
    names: list[str] = Field(min_length=1, max_length=100)

    @field_validator("names")
    @classmethod
    def _names(cls, names: list[str]) -> list[str]:
        for name in names:
            check_name(name, "secret")
        return names


class SecretValues(BaseModel):
    values: dict[str, str]
