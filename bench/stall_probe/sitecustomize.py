"""The event loop's long turns in a `vglobal server`, and who held the loop thread through them.

Put this directory on PYTHONPATH of a benchmark that starts servers (it loads in every Python
process; it acts only in one whose arguments include `server`):

    PYTHONPATH=bench/stall_probe .venv/bin/python bench/load_bench.py --replicas 2 --rate 100 ...

The server's loop beats every 2 ms (a timer). A watchdog thread looks every 4 ms; while a beat
is over 30 ms late it samples the loop thread's stack, and when the loop beats again it writes
the stall to `$VGLOBAL_STALLS_DIR/stalls-PID.txt` (default: the temporary directory): how long,
the loop thread's CPU and the other threads' CPU over it, and the stacks sampled. A stall
whose CPU is the loop thread's is our code holding the loop; one whose CPU is other threads'
is the interpreter lock held by another thread (a round's plan); one with neither is the
process waiting for a core. Full and middle-generation collections are written too. The
samples are few (the watchdog needs the interpreter lock to take one) and fall where the loop
thread releases it (`uuid4` reads the system's random source): read them as where, not how
much. Not part of the product."""

from __future__ import annotations

import sys

if "server" in sys.argv:
    import collections
    import gc
    import os
    import tempfile
    import threading
    import time

    import uvloop

    _out = open(  # for the process's life
        os.path.join(
            os.environ.get("VGLOBAL_STALLS_DIR", tempfile.gettempdir()),
            f"stalls-{os.getpid()}.txt",
        ),
        "a",
        buffering=1,
    )
    _last_beat = [time.perf_counter()]
    _loop_thread = threading.get_ident()
    _loop_cpu = time.pthread_getcpuclockid(_loop_thread)
    _new_event_loop = uvloop.new_event_loop

    def _beat(loop: uvloop.Loop) -> None:
        _last_beat[0] = time.perf_counter()
        loop.call_later(0.002, _beat, loop)

    def _beating_loop(*args: object, **kwargs: object) -> uvloop.Loop:
        loop = _new_event_loop(*args, **kwargs)
        loop.call_soon(_beat, loop)
        return loop

    uvloop.new_event_loop = _beating_loop  # uvicorn's loop factory looks it up when called

    def _stack() -> str:
        frame = sys._current_frames().get(_loop_thread)
        parts: list[str] = []
        while frame is not None:
            code = frame.f_code
            if "volcano_global" in code.co_filename or "/global/" in code.co_filename:
                parts.append(
                    f"{os.path.basename(code.co_filename)}:{code.co_name}:{frame.f_lineno}"
                )
            elif not parts:
                parts.append(f"[{os.path.basename(code.co_filename)}:{code.co_name}]")
            frame = frame.f_back
        return " < ".join(parts[:8])

    _collection_started = [0.0]

    def _collection(phase: str, info: dict[str, int]) -> None:
        if info["generation"] < 1:
            return
        if phase == "start":
            _collection_started[0] = time.perf_counter()
            return
        took = 1000 * (time.perf_counter() - _collection_started[0])
        _out.write(f"GC gen{info['generation']} {took:.1f} ms at {time.time():.3f}\n")

    gc.callbacks.append(_collection)

    def _watch() -> None:
        marks: collections.deque[tuple[float, float, float]] = collections.deque(maxlen=40)
        stacks: collections.Counter[str] | None = None
        first = (0.0, 0.0, 0.0)
        while True:
            time.sleep(0.004)
            now = time.perf_counter()
            marks.append((now, time.clock_gettime(_loop_cpu), time.process_time()))
            if now - _last_beat[0] > 0.030:
                if stacks is None:
                    stacks = collections.Counter()
                    first = next((m for m in marks if m[0] >= _last_beat[0] - 0.005), marks[0])
                stacks[_stack()] += 1
            elif stacks is not None:
                wall, loop_cpu, cpu = (b - a for a, b in zip(first, marks[-1], strict=True))
                _out.write(
                    f"STALL {1000 * wall:.0f} ms at {time.time():.3f} "
                    f"loop-thread-cpu {1000 * loop_cpu:.0f} "
                    f"other-threads-cpu {1000 * (cpu - loop_cpu):.0f}\n"
                )
                for stack, n in stacks.most_common(6):
                    _out.write(f"  {n:3d} {stack}\n")
                stacks = None

    threading.Thread(target=_watch, name="stall-probe", daemon=True).start()
