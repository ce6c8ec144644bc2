"""Results of a simulation on disk: summary.json and summary.csv (every policy), comparison.json
(the policies judged over the same jobs, and the bounds: `comparison`), per-policy
job and timeline CSVs, and plots (PNG and SVG): GPU allocation over time, the JCT
distribution, queueing delay by job size."""

from __future__ import annotations

import csv
import json
import math
from dataclasses import asdict
from pathlib import Path
from types import ModuleType

from volcano_global.simulation.comparison import bounds, judge, verdict
from volcano_global.simulation.engine import SimResult
from volcano_global.simulation.metrics import SIZE_CLASSES, Summary

SUMMARY_COLUMNS = [
    "policy",
    "jobs",
    "finished",
    "avg_jct_s",
    "p99_jct_s",
    "makespan_s",
    "avg_jct_bound_s",
    "makespan_bound_s",
    "gpu_allocation",
    "split_jobs",
    "slowed_jobs",
    "crossing_tb",
    "oversubscribed_s",
    "rounds",
]


def write(out: Path, results: list[SimResult], summaries: list[Summary]) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    files = [out / "summary.json", out / "summary.csv", out / "comparison.json"]
    judged = judge(results)
    (out / "summary.json").write_text(_json([s.as_dict() for s in summaries]))
    (out / "comparison.json").write_text(
        _json(
            {
                "bounds": asdict(bounds(results[0])) if results else {},
                "left_out": results[0].left_out if results else {},
                "policies": [j.as_dict() for j in judged],
                "verdict": verdict(judged),
            }
        )
    )
    with (out / "summary.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(SUMMARY_COLUMNS)
        for s in summaries:
            writer.writerow([_cell(getattr(s, c)) for c in SUMMARY_COLUMNS])
    for result in results:
        files += [_jobs_csv(out, result), _timeline_csv(out, result)]
    plt = _pyplot()
    for name, draw in (("allocation", _allocation), ("jct", _jct), ("queueing", _queueing)):
        figure = draw(plt, results, summaries)
        for ext in ("png", "svg"):
            path = out / f"{name}.{ext}"
            figure.savefig(path, dpi=110, bbox_inches="tight")
            files.append(path)
        plt.close(figure)
    return files


def _pyplot() -> ModuleType:
    # Imported when plots are drawn: matplotlib costs a second of import time that every
    # `vglobal` command would otherwise pay.
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot

    return matplotlib.pyplot


def _json(value: object) -> str:
    # NaN (no job to average over) is not JSON: null, so that strict readers (jq, JSON.parse)
    # take the file.
    return json.dumps(finite(value), indent=2, allow_nan=False, default=str) + "\n"


def finite(value: object) -> object:
    """`value` with every NaN float, however deep, as None."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def _cell(value: object) -> object:
    return "" if isinstance(value, float) and math.isnan(value) else value


def _jobs_csv(out: Path, result: SimResult) -> Path:
    path = out / f"jobs-{result.policy}.csv"
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(
            [
                "job",
                "gpus",
                "arrival_s",
                "start_s",
                "finish_s",
                "duration_s",
                "clusters",
                "slowest_step_factor",
                "crossing_tb",
            ]
        )
        for r in result.records:
            writer.writerow(
                [
                    r.job.id,
                    r.job.gpus,
                    round(r.job.arrival_s, 3),
                    "" if r.start is None else round(r.start, 3),
                    "" if r.finish is None else round(r.finish, 3),
                    round(r.job.duration_s, 3),
                    "+".join(r.clusters),
                    round(r.slowest_factor, 4),
                    round(r.crossing_gbit / 8000, 6),
                ]
            )
    return path


def _timeline_csv(out: Path, result: SimResult) -> Path:
    path = out / f"timeline-{result.policy}.csv"
    links = sorted(result.links)
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(
            ["time_s", "allocated_gpus", "pending_jobs"]
            + [f"demand_{a}_{b}_gbps" for a, b in links]
        )
        for s in result.timeline:
            writer.writerow(
                [round(s.time, 3), s.allocated_gpus, len(s.pending)]
                + [round(s.link_demand.get(p, 0.0), 3) for p in links]
            )
    return path


def _allocation(plt: ModuleType, results: list[SimResult], _: list[Summary]):  # type: ignore[no-untyped-def]
    figure, axis = plt.subplots(figsize=(8, 3.5))
    for result in results:
        times = [s.time / 3600 for s in result.timeline]
        shares = [100 * s.allocated_gpus / max(result.capacity_gpus, 1) for s in result.timeline]
        axis.step(times, shares, where="post", label=result.policy, linewidth=1)
    axis.set_xlabel("hours")
    axis.set_ylabel("GPUs allocated (%)")
    axis.set_ylim(0, 105)
    axis.legend(loc="lower right", fontsize=8)
    axis.set_title("GPU allocation over time")
    return figure


def _jct(plt: ModuleType, results: list[SimResult], _: list[Summary]):  # type: ignore[no-untyped-def]
    figure, axis = plt.subplots(figsize=(6, 3.5))
    for result in results:
        jcts = sorted(r.finish - r.job.arrival_s for r in result.records if r.finish is not None)
        if jcts:
            axis.plot(jcts, [(i + 1) / len(jcts) for i in range(len(jcts))], label=result.policy)
    axis.set_xscale("log")
    axis.set_xlabel("job completion time (s)")
    axis.set_ylabel("fraction of jobs")
    axis.legend(loc="lower right", fontsize=8)
    axis.set_title("JCT distribution")
    return figure


def _queueing(plt: ModuleType, _: list[SimResult], summaries: list[Summary]):  # type: ignore[no-untyped-def]
    figure, axis = plt.subplots(figsize=(6, 3.5))
    labels = [label for *_, label in SIZE_CLASSES]
    width = 0.8 / max(len(summaries), 1)
    for i, s in enumerate(summaries):
        values = [s.queueing_by_size.get(k) or 0.0 for k in labels]
        values = [0.0 if math.isnan(v) else v for v in values]
        axis.bar([x + i * width for x in range(len(labels))], values, width, label=s.policy)
    axis.set_xticks([x + 0.4 - width / 2 for x in range(len(labels))], labels)
    axis.set_xlabel("job size (GPUs)")
    axis.set_ylabel("mean queueing delay (s)")
    axis.legend(fontsize=8)
    axis.set_title("Queueing delay by job size")
    return figure
