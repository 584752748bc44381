"""Tokens recently found to be unknown, remembered for a few seconds: a flood of bad
tokens (a misconfigured client, a scan) then costs one database read per token and
ttl, not one per request. Used for worker session tokens (``registry``) and client
tokens (``tokens``)."""

from __future__ import annotations


class RecentMisses:
    def __init__(self, ttl: float, cap: int):
        self.ttl, self.cap = ttl, cap
        self._until: dict[str, float] = {}

    def known(self, key: str, now: float) -> bool:
        until = self._until.get(key)
        return until is not None and until > now

    def remember(self, key: str, now: float) -> None:
        """Bounded: when full, expired entries go, then (under a flood) all of them."""
        if len(self._until) >= self.cap:
            self._until = {k: t for k, t in self._until.items() if t > now}
            if len(self._until) >= self.cap:
                self._until.clear()
        self._until[key] = now + self.ttl

    def forget(self, key: str) -> None:
        self._until.pop(key, None)
