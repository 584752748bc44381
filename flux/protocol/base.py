"""What every message of the protocol shares: strict request bodies, and numbers as given."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    """Request bodies: unknown fields are refused, and so are coercions such as
    ``true`` or ``"4"`` for a number (an integer is still a valid float).

    Replies are plain models: a worker ignores a field a newer server adds."""

    model_config = ConfigDict(extra="forbid", strict=True)


#: A number as it was given: 4 stays 4, 0.5 stays 0.5 (never 4.0 in the JSON).
Number = int | float
