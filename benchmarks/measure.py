"""Measurement helpers for the benchmark scripts: working memory (Linux
/proc: peak RSS minus RSS after loading, the peak reset after loading) and
interleaved timing of several steps in one process, and CUDA-event timing
(:func:`cuda_events`) for the GPU scripts."""


def status(field: str) -> int:
    """A /proc/self/status field (VmRSS, VmHWM, ...) in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def reset_peak() -> bool:
    """Reset VmHWM to the current RSS; False where the kernel refuses."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def measure(step, reps: int) -> tuple[list[float], int, bool]:
    """Time ``step()`` ``reps`` times after loading and warm-up. Returns the
    times, the working memory (peak RSS during the runs minus RSS before
    them) and whether the peak could be reset (else it includes loading)."""
    import time

    rss_loaded = status("VmRSS")
    peak_reset = reset_peak()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    return times, status("VmHWM") - rss_loaded, peak_reset


def interleaved(steps: dict, reps: int, before=None, clock=None) -> dict:
    """Median seconds of each ``steps[name]()`` over ``reps`` rounds, one call
    of every step per round (a shared machine's noise spreads over all of
    them); ``before()`` runs untimed before each call. ``clock``: the timer
    (default ``time.perf_counter``, wall; ``time.thread_time`` counts only
    this thread's CPU, for single-threaded steps on a busy machine)."""
    import statistics
    import time

    clock = time.perf_counter if clock is None else clock

    times = {name: [] for name in steps}
    for _ in range(reps):
        for name, step in steps.items():
            if before is not None:
                before()
            t = clock()
            step()
            times[name].append(clock() - t)
    return {name: statistics.median(ts) for name, ts in times.items()}


def cuda_events(step, reps: int) -> float:
    """Median milliseconds of ``step()`` between two CUDA events, over
    ``reps`` calls after one untimed warm-up call (a GPU script's timer)."""
    import statistics

    import torch

    step()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        step()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b))
    return statistics.median(out)
