"""A process's first CP-SAT round imports ortools (a second on a busy machine); that import must
not count against the round's time limit, or a server's first round after boot skips its search
and keeps the warm start."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# A fresh interpreter whose ortools import takes 2 s, twice the round's limit: the round must
# still search and prove its answer.
FIRST_ROUND = textwrap.dedent(
    """
    import importlib.abc, sys, time

    class Slow(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name == "volcano_global.solver.cpsat":
                time.sleep(2.0)
            return None

    sys.meta_path.insert(0, Slow())
    from volcano_global.solver import (
        ClusterCapacity, JobRequest, Leaf, Policy, Snapshot, SolveOptions, solve
    )

    assert "ortools" not in sys.modules
    leaf = Leaf("H100", (0, 0, 0, 0, 0, 0, 0, 0, 4), ("t0",), node_gpus=8)
    # j and k do not both fit: the warm start is not proven optimal, the search must run.
    job = JobRequest("j", pods=2, gpus_per_pod=8, gpu_model="H100")
    other = JobRequest("k", pods=3, gpus_per_pod=8, gpu_model="H100")
    snapshot = Snapshot((ClusterCapacity("a", (leaf,)),), (), (job, other))
    decision = solve(snapshot, Policy.CPSAT, SolveOptions(time_limit_s=1.0))
    print(decision.status, len(decision.admitted))
    """
)


def test_the_first_rounds_ortools_import_is_not_on_its_clock() -> None:
    done = subprocess.run(
        [sys.executable, "-c", FIRST_ROUND], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["OPTIMAL", "1"]
