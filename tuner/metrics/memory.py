"""Memory of a whole server process tree, sampled in the background while it is measured.

PSS is the headline: forked workers share the master's pages, so summing RSS counts those
pages once per worker and makes a 9-worker server look far bigger than it is. PSS divides
each shared page between the processes that map it, so the tree's PSS sum is what the server
really costs. USS (pages only that process has) is reported too.

Behind a front (nginx) the front's processes are summed in too: in production they share the
box with the server, so a config's memory is both trees'. nginx's own part of the PSS mean is
kept apart as well (`front_pss_mean`), so a reader sees what each tree costs.

The server tree is also broken down: its first process (the master, or the only process)
apart from its workers (`master_pss_mean`), and what sharing saves (`sharing_saves_mean`: the
tree's RSS sum less its PSS sum, the pages RSS would count once per process that maps them,
which preload before fork makes larger). Threads share their process's pages, so there is no
per-thread figure to take: a thread's cost is inside its process's PSS.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType

import psutil

_MB = 1024 * 1024  # MiB, reported under the usual "MB" name


class MemorySampler:
    """Samples PSS / USS / RSS summed over `pids_fn()` (and `front_pids_fn()`, if given) every
    `interval_s` in a daemon thread.

    The first sample is taken on entry, so even a very short run has one.
    """

    def __init__(
        self,
        pids_fn: Callable[[], list[int]],
        interval_s: float = 0.25,
        front_pids_fn: Callable[[], list[int]] | None = None,
    ) -> None:
        self._pids_fn = pids_fn
        self._front_pids_fn = front_pids_fn
        self._front_pss: list[int] = []
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._pss: list[int] = []
        self._uss_peak = 0
        self._rss_peak = 0
        self._processes_peak = 0
        self._master_pss: list[int] = []
        self._sharing_saves: list[int] = []
        self._server_processes = 0

    def sample(self) -> None:
        """Take one sample now; processes that vanish while being read are skipped."""
        try:
            pids = self._pids_fn()
            front_pids = self._front_pids_fn() if self._front_pids_fn else []
        except Exception:  # noqa: BLE001 - a server that just died has no tree to sample
            return
        server, front = _summed(pids), _summed(front_pids)
        pss, uss, rss, seen, _ = (a + b for a, b in zip(server, front, strict=True))
        if not server[3]:
            return  # no server left to sample: nginx alone is not a config's memory
        with self._lock:
            self._pss.append(pss)
            self._front_pss.append(front[0])
            self._master_pss.append(server[4])
            self._sharing_saves.append(max(0, server[2] - server[0]))
            self._server_processes = max(self._server_processes, server[3])
            self._uss_peak = max(self._uss_peak, uss)
            self._rss_peak = max(self._rss_peak, rss)
            self._processes_peak = max(self._processes_peak, seen)

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            self.sample()

    def start(self) -> MemorySampler:
        self.sample()
        self._thread = threading.Thread(target=self._run, name="memory-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> MemorySampler:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def summary(self) -> dict[str, float | int]:
        """MB figures over all samples: PSS mean and peak, USS and RSS peaks; 0.0 if none.
        `processes_peak`: the most processes one sample summed (the tree, workers included,
        and the front's processes behind a front). `front_pss_mean`: the front's part of
        `pss_mean`, present only when the sampler was given the front's pids.
        `master_pss_mean`: the server's first process's part of `pss_mean` (its workers are
        the rest of the server tree), `sharing_saves_mean`: the server tree's RSS sum less its
        PSS sum, `server_processes`: the most server processes one sample read."""
        with self._lock:
            samples = list(self._pss)
            front_samples = list(self._front_pss)
            master, saves = list(self._master_pss), list(self._sharing_saves)
            server_processes = self._server_processes
            uss_peak, rss_peak = self._uss_peak, self._rss_peak
            processes_peak = self._processes_peak
        return {
            "pss_mean": round(sum(samples) / len(samples) / _MB, 2) if samples else 0.0,
            "pss_peak": round(max(samples) / _MB, 2) if samples else 0.0,
            "uss_peak": round(uss_peak / _MB, 2),
            "rss_peak": round(rss_peak / _MB, 2),
            "samples": len(samples),
            "processes_peak": processes_peak,
            # The server tree broken down: kept only where a sample read it.
            **(
                {
                    "master_pss_mean": _mean_mb(master),
                    "sharing_saves_mean": _mean_mb(saves),
                    "server_processes": server_processes,
                }
                if samples
                else {}
            ),
            # nginx's part of pss_mean (included in it); only behind a front.
            **(
                {"front_pss_mean": round(sum(front_samples) / len(front_samples) / _MB, 2)}
                if self._front_pids_fn is not None and front_samples
                else {}
            ),
        }


def _mean_mb(samples: list[int]) -> float:
    return round(sum(samples) / len(samples) / _MB, 2) if samples else 0.0


def _summed(pids: list[int]) -> tuple[int, int, int, int, int]:
    """(PSS, USS, RSS, processes read, the first pid's PSS) over `pids`, each process read
    once; processes that vanish are skipped."""
    pss = uss = rss = seen = first = 0
    for index, pid in enumerate(pids):
        try:
            info = psutil.Process(pid).memory_full_info()
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            continue
        first = info.pss if index == 0 else first
        pss += info.pss
        uss += info.uss
        rss += info.rss
        seen += 1
    return pss, uss, rss, seen, first
