"""The chaos soak (issue 39), long: two replicas on one Postgres, four simulated clusters as
agent processes, a job every ~1.5 s, random faults from a seeded RNG (`tests/faults/chaos.py`);
prints the figures (`tests/faults/chaos_checks.py` says what each counts). docs/chaos.md.

    .venv/bin/python bench/chaos_soak.py --minutes 4 --seed 1 [--faults kill-agent,cut-database]
        [--fault-every-s 6] [--settle-s 60] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import create_postgres_database, drop_postgres_database
from tests.faults.chaos import FAULTS, SoakConfig, soak


async def main(args: argparse.Namespace) -> dict[str, object]:
    faults = tuple(args.faults.split(",")) if args.faults else FAULTS
    unknown = set(faults) - set(FAULTS)
    if unknown:
        raise SystemExit(f"--faults: unknown {sorted(unknown)}; known: {', '.join(FAULTS)}")
    config = SoakConfig(
        seconds=args.minutes * 60,
        seed=args.seed,
        faults=faults,
        fault_every_s=args.fault_every_s,
        settle_s=args.settle_s,
    )
    name = f"chaos_bench_{uuid.uuid4().hex[:8]}"
    url = await create_postgres_database(name)
    began = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="chaos-") as tmp:
            figures = await soak(url, Path(tmp), config)
    finally:
        await drop_postgres_database(name)
    report = {"minutes of faults": args.minutes, "seed": args.seed, **figures.report()}
    report["wall seconds"] = round(time.monotonic() - began)
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=4.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--faults", default="", help=f"comma-separated, of {', '.join(FAULTS)}")
    parser.add_argument("--fault-every-s", type=float, default=6.0)
    parser.add_argument("--settle-s", type=float, default=60.0)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    report = asyncio.run(main(args))
    text = json.dumps(report, indent=2, default=str)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
