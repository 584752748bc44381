"""``flux worker show``: one row per GPU device with its health and what holds it."""

from flux.cli.workers import gpu_rows

G = 1024**3


def test_each_device_shows_memory_used_health_and_its_holders():
    gpus = [
        {
            "index": 0,
            "uuid": "GPU-a",
            "name": "NVIDIA H200",
            "memory_total": 141 * G,
            "memory_available": 101 * G,
            "utilization": 35.0,
        },
        {
            "index": 1,
            "uuid": "GPU-b",
            "name": "NVIDIA H200",
            "memory_total": 141 * G,
            "memory_available": 141 * G,
            "utilization": 0.0,
            "unhealthy": "XID 79",
        },
        {
            "index": 2,
            "uuid": "MIG-x",
            "name": "A100 MIG 1g.10gb",
            "memory_total": 10 * G,
            "memory_available": 10 * G,
            "mig_profile": "1g.10gb",
            "parent": "GPU-c",
        },
    ]
    held = [
        {"index": 0, "uuid": "GPU-a", "execution_id": "3f1c9a2b7d10aaaa", "fraction": 0.5, "memory": 20 * G},
        {"index": 0, "uuid": "GPU-a", "execution_id": "77aa01c2e9f3bbbb", "fraction": 0.5},
        {"index": 2, "uuid": "MIG-x", "execution_id": "1234567890abcdef", "fraction": 1.0},
    ]
    assert gpu_rows(gpus, held) == [
        (
            "gpu 0",
            "NVIDIA H200, 40.0 GiB of 141.0 GiB used, 35% busy, healthy; "
            "allotted 0.5 + 20.0 GiB to 3f1c9a2b7d10, 0.5 to 77aa01c2e9f3",
        ),
        ("gpu 1", "NVIDIA H200, 0 B of 141.0 GiB used, 0% busy, UNHEALTHY: XID 79"),
        ("gpu 2", "MIG slice 1g.10gb, 0 B of 10.0 GiB used, 0% busy, healthy; allotted whole to 1234567890ab"),
    ]
