"""A dispatch round's pure parts over 1,000 workers (``python -m bench.round_1000``).

Written to check that resources as data (issue 32, item 2) left a round no slower.

Measures (CPU time, median of repeats):
  scan:   FleetSnapshot.views cold (every view built from its row) on SQLite
  warm:   FleetSnapshot.views again with nothing changed
  apply:  with_allotments over 1,000 views holding 2 allotments each (reserve and sample)
  place:  place() of 2,000 mixed demands on a FreePool of 1,000 views
  b5:     bench.b5_matching place() of 10,000 demands on 1,000 workers
"""

from __future__ import annotations

import copy
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from sqlalchemy.orm import sessionmaker

from bench import b5_matching
from flux.domain.allotment import Allotment
from flux.domain.policy import ExecutionPolicy
from flux.domain.resource_request import ResourceRequest
from flux.scheduling.allocation import with_allotments
from flux.scheduling.demand import Demand
from flux.scheduling.placement import place
from flux.scheduling.pool import FreePool
from flux.server import fleet
from flux.server.database import make_engine, migrate
from flux.server.registry import FleetRegistry
from flux.server.schemas import WorkerRegistration
from flux.server.snapshot import FleetSnapshot

GI = 1024**3
N = 1000


def body(i):
    gpus = [
        dict(index=g, uuid=f"GPU-{i}-{g}", name="H100", memory_total=80 * GI, memory_available=40 * GI)
        for g in range(i % 3)
    ]
    return WorkerRegistration.model_validate(
        dict(
            name=f"w{i:04d}",
            labels={"zone": "abc"[i % 3]},
            max_concurrent_executions=8,
            allocation="reserve" if i % 2 else "sample",
            custom_resources={"fpga": 2} if i % 5 == 0 else {},
            resources=dict(
                cpu_total=16.0,
                cpu_available=float(i % 17),
                memory_total=64 * GI,
                memory_available=(i % 64) * GI,
                disk_total=500 * GI,
                disk_free=(i % 500) * GI,
                gpus=gpus,
            ),
            runtime=dict(python_version="3.12", os_name="Linux", os_version="6", hostname=f"h{i}"),
        )
    )


def cpu(fn):
    t0 = time.process_time()
    fn()
    return (time.process_time() - t0) * 1000


def main():
    tmp = Path(tempfile.mkdtemp())
    url = f"sqlite:///{tmp / 'b.db'}"
    migrate(url)
    engine = make_engine(url)
    Session = sessionmaker(engine, expire_on_commit=False)
    with Session.begin() as s:
        for i in range(N):
            fleet.register_worker(s, body(i), f"token-{i}", None, ExecutionPolicy())
    scans, warms = [], []
    for _ in range(7):
        snap = FleetSnapshot(FleetRegistry())
        with Session() as s:
            scans.append(cpu(lambda: snap.views(s)))
            warms.append(cpu(lambda: snap.views(s)))
    views = snap.views(Session())
    allots = [{"cpu": 1.0, "memory": GI, "gpus": [0]}, {"cpu": 2.0, "disk": GI, "resources": {"fpga": 1.0}}]
    held = [Allotment.from_json(a) for a in allots]
    applies = [cpu(lambda: [with_allotments(v.evolve(running=2), held) for v in views]) for _ in range(7)]
    reqs = [
        None,
        ResourceRequest(cpu=2),
        ResourceRequest(cpu=1, memory="4Gi"),
        ResourceRequest(gpu=1),
        ResourceRequest(disk="10Gi", resources={"fpga": 1}),
        ResourceRequest(memory="32Gi"),
    ]
    demands = [Demand(f"e{i}", reqs[i % len(reqs)], {"zone": "a"} if i % 7 == 0 else None) for i in range(2000)]
    places = []
    for _ in range(7):
        fresh = [v.evolve(running=0) for v in views]
        pool = FreePool(fresh)
        places.append(cpu(lambda: place(demands, pool)))
    rng = random.Random(7)
    b5d = b5_matching.make_demands(10_000, rng)
    b5f = b5_matching.make_fleet(1000, 10_000, random.Random(1000))
    b5 = []
    for _ in range(5):
        w = copy.deepcopy(b5f)
        b5.append(cpu(lambda: place(b5d, w)))
    for name, xs in [
        ("scan_cold_1000", scans),
        ("views_warm_1000", warms),
        ("with_allotments_1000", applies),
        ("place_2000_on_1000", places),
        ("b5_place_10000_on_1000", b5),
    ]:
        print(f"{name:28s} median {statistics.median(xs):8.2f} ms  (min {min(xs):.2f}, n={len(xs)})")
    engine.dispose()
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
