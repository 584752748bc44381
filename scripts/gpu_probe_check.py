"""Run flux.worker.probe's GPU detection for real and print what it finds.

Usage (from the repo root, on a GPU machine): python scripts/gpu_probe_check.py
Prints JSON for each source plus the flux.worker.probe DEBUG log, all on stdout.
"""

import json
import logging
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # works without pip install

logging.basicConfig(stream=sys.stdout, level=logging.WARNING, format="LOG %(levelname)s %(name)s: %(message)s")
logging.getLogger("flux.worker.probe").setLevel(logging.DEBUG)

from flux.worker.probe import detect_gpus  # noqa: E402

print("nvidia-smi:", shutil.which("nvidia-smi"))
for source in ("nvml", "auto", "gputil"):
    print(f"--- detect_gpus({source!r})", flush=True)
    print(json.dumps(detect_gpus(source), indent=2), flush=True)
