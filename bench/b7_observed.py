"""B7's figures as the workers observe them, beside the server's stamps.

The server stamps ``scheduled_at`` (the submission's commit) and ``claimed_at`` (the
placement's); the synthetic workers stamp when each job's claim reply arrived, how
late an empty long poll returned after its ``wait``, every heartbeat's round trip, and
their own event-loop lag. All on one host, so the clocks are one. A worker's figure
includes its own process's lag: ``fleet_lag_ms`` says how much of it that can be.
"""

from __future__ import annotations

from bench.common import Figure, p99

#: The aims of issue 40 at 1,000 quiet workers and 20 runs/s (ms, p99).
ROUND_TRIP_AIM, RECEIVED_AIM = 150.0, 200.0


def _dist(name: str, values: list[float], note: str, aim_ms: float | None) -> Figure:
    figure = Figure.of(name, values, "ms", note=note, with_p99=True)
    if aim_ms is not None:
        figure.aim = f"p99 <= {aim_ms:g} ms"
        figure.met = bool(values) and figure.p99 <= aim_ms
    return figure


def observed(
    tag: str, stats: list[dict], executions: list[dict], window: tuple[float, float], aims: bool
) -> list[Figure]:
    """submit->received, claimed->received (the claim reply), empty polls' overrun and
    the fleet's own lag, over ``window`` (wall times: the fleet online to the load's end)."""
    start, end = window
    arrived: dict[str, float] = {}
    for s in stats:
        for execution_id, at in s.get("received", []):
            arrived[execution_id] = max(at, arrived.get(execution_id, 0.0))  # a retried one: its last claim
    received, reply = [], []
    for e in executions:
        at = arrived.get(e["id"])
        if at is None:
            continue
        received.append((at - e["scheduled_at"]) * 1000)
        if e.get("claimed_at"):
            reply.append((at - e["claimed_at"]) * 1000)
    overrun = [ms for s in stats for ms in s.get("poll_overrun_ms", [])]
    lags = [[ms for t, ms in s.get("loop_lag", []) if start <= t <= end] for s in stats]
    worst = max((p99(values) for values in lags if values), default=float("nan"))
    return [
        _dist(
            f"{tag}.submit_to_received_ms",
            received,
            "worker's arrival of the claim reply - scheduled_at "
            f"(the submission's commit), {len(received)} of {len(executions)} runs",
            RECEIVED_AIM if aims else None,
        ),
        _dist(
            f"{tag}.claim_reply_ms",
            reply,
            "worker's arrival of the claim reply - claimed_at "
            "(the placement's stamp): wake, delivery, the reply on the wire",
            ROUND_TRIP_AIM if aims else None,
        ),
        _dist(f"{tag}.empty_poll_overrun_ms", overrun, "empty long polls: return - their wait (20 s)", None),
        _dist(
            f"{tag}.fleet_lag_ms",
            [ms for values in lags for ms in values],
            f"the synthetic processes' own event-loop lag (100 ms probe), idle and load phases; "
            f"worst process p99 {worst:.1f} ms, {len(stats)} processes",
            None,
        ),
    ]
