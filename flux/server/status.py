"""Worker status in batches: a sample that moved is held in memory, and written with
every other one that moved, once a ``WRITE_PERIOD``.

Written as it arrives, a busy fleet's status (memory moving past the threshold on
every beat) would cost a write transaction per heartbeat, and a re-read of the changed
rows by placement: at 1,000 such workers 200 transactions a second. So a heartbeat
records its sample in the registry (``FleetRegistry.record_status``), placement reads it from there at its
next round (``flux.server.snapshot``), and this loop writes what changed in one
batch (``resources.store_statuses``: a few statements however many workers changed).

What may be seen late, and by how much (docs/fleet.md, *Status in batches*):

- this server's placement: nothing; it reads memory;
- ``GET /workers``, ``GET /fleet`` and the console read the database: up to
  ``WRITE_PERIOD`` behind a sample (plus the write itself);
- another replica (PostgreSQL) reads the rows of the workers it does not hear when
  its lease sync finds their version moved: up to ``WRITE_PERIOD`` plus
  ``lease_interval`` (5 s by default) plus its next round;
- a restart: a batch not yet written when the process died (at most
  ``WRITE_PERIOD`` of samples) is lost; the database keeps each worker's sample
  before it, until the worker's next material change. A clean stop writes it.
"""

from __future__ import annotations

import asyncio
import logging

from flux.server import resources, topics
from flux.server.database import Database
from flux.server.notify import Notifier
from flux.server.registry import FleetRegistry

log = logging.getLogger("flux.server.status")

#: Seconds between batches.
WRITE_PERIOD = 1.0


class StatusWriter:
    def __init__(self, db: Database, registry: FleetRegistry, notifier: Notifier):
        self.db = db
        self.registry = registry
        self.notifier = notifier

    async def run(self) -> None:
        while True:
            await asyncio.sleep(WRITE_PERIOD)
            try:
                await self.write()
            except Exception:  # noqa: BLE001 - the database away: the batch goes with the next one
                log.exception("writing worker status failed; retrying")

    async def write(self) -> int:
        """Write what changed since the last batch; how many workers it wrote."""
        members = self.registry.take_unwritten()
        if not members:
            return 0
        batch = [resources.Status(m.id, m.name, m.sample, m.metrics, m.gpu_rows) for m in members]
        try:
            await self.db.run(lambda s: resources.store_statuses(s, batch))
        except BaseException:
            self.registry.unwritten_again(members)
            raise
        for member, status in zip(members, batch):
            if status.sample is not None:
                member.gpu_rows = bool(status.sample.get("gpus"))
        self.notifier.notify_local(topics.FLEET)  # GET /fleet's followers here read it again
        return len(batch)
