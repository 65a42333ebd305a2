"""Synthetic objectives whose best is several processes x several threads, behind a plateau in
another concurrency model (issue 45's uWSGI study: gevent at 496-503 req/s in 15 of 30 trials,
the best at 6 processes x 8 threads on http-socket, 560). The tuner's own study code runs
against them with `run_bench` replaced: no server, no load."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import random
import statistics
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from tests.support.measurements import measurement
from tuner.loadgen.engine import WindowStats
from tuner.measure.runner import BenchPlan, BenchResult
from tuner.search import study as study_module
from tuner.search.records import TrialRecord
from tuner.settings import Value

Objective = Callable[[Mapping[str, Value]], float]
WINDOWS = 3  # one-second windows per run


def bump(value: float, best: float, width: float) -> float:
    """1 at `best`, falling as a Gaussian in log2 distance (`width` doublings)."""
    return math.exp(-((math.log2(value) - math.log2(best)) ** 2) / (2 * width**2))


@dataclasses.dataclass(frozen=True)
class Shapes:
    """req/s of a config by its concurrency model: the threaded model peaks at `processes` x
    `threads` (its best, `peak`), gevent is a flat plateau at 0.89 of it whatever its shape,
    plain processes and the rest stay below. The best shape moves from study to study, so a
    search that only works for one shape fails most of them."""

    processes: int
    threads: int
    peak: float = 560.0

    @property
    def plateau(self) -> float:
        return 0.89 * self.peak

    def threaded(self, processes: int, threads: int) -> float:
        shape = bump(processes, self.processes, 1.0) * bump(threads, self.threads, 1.2)
        return 200.0 + (self.peak - 200.0) * shape

    def uwsgi(self, values: Mapping[str, Value]) -> float:
        """uWSGI: threads on http-socket reach the peak, on the HTTP router 0.75 of it;
        http11-socket starves (low); gevent's plateau; plain processes below."""
        processes, threads = int(values["processes"]), int(values["threads"])
        protocol, gevent = values["protocol"], int(values["gevent"])
        if gevent:
            return self.plateau - 10.0 + 10.0 * bump(processes, 3, 2.0)
        if protocol == "http11-socket":
            return 150.0
        if threads > 1:
            value = self.threaded(processes, threads)
            return value if protocol == "http-socket" else 0.75 * value
        return 120.0 + 180.0 * bump(processes, self.processes, 1.0)

    def gunicorn(self, values: Mapping[str, Value]) -> float:
        """gunicorn: gthread reaches the peak; gevent's plateau; sync below."""
        workers, threads = int(values["workers"]), int(values["threads"])
        if values["worker_class"] == "gevent":
            return self.plateau - 10.0 + 10.0 * bump(workers, 3, 2.0)
        if values["worker_class"] == "gthread":
            return self.threaded(workers, threads)
        return 120.0 + 180.0 * bump(workers, self.processes, 1.0)


# Several processes x several threads, over a 2-CPU box's space (processes 1-9, threads 1-32).
BEST_SHAPES = ((6, 8), (3, 16), (8, 4), (4, 6), (9, 12))


class Synthetic:
    """Stands in for `run_bench`: the objective with lognormal noise per one-second window
    (`sigma`) and per run (`run_sigma`: how a run's workers happened to share the load, the
    same for all its windows). Each window goes to `on_window`, so the study's pruner judges
    it as it judges a real run's."""

    def __init__(
        self, objective: Objective, sigma: float, seed: int, run_sigma: float = 0.0
    ) -> None:
        self.objective = objective
        self.sigma = sigma
        self.run_sigma = run_sigma
        self.rng = random.Random(seed)
        self.true_rps: list[float] = []
        self.settings: list[dict[str, Value]] = []
        self.records: list[TrialRecord] = []  # the study's, once it has run

    def run_bench(
        self,
        plan: BenchPlan,
        on_window: Callable[[WindowStats], bool] | None = None,
        **_: object,
    ) -> BenchResult:
        value = self.objective(plan.settings)
        self.true_rps.append(value)
        self.settings.append(dict(plan.settings))
        run = value * math.exp(self.rng.gauss(0.0, self.run_sigma))
        rates: list[float] = []
        for index in range(WINDOWS):
            rates.append(run * math.exp(self.rng.gauss(0.0, self.sigma)))
            window = WindowStats(index, index + 1.0, round(rates[-1]), rates[-1], 0, 10.0)
            if on_window is not None and not on_window(window):
                break  # pruned: the study keeps what was measured so far
        rps = statistics.median(rates)
        run = measurement(rps, window_rps=tuple(rates), overall_rps=statistics.fmean(rates))
        return BenchResult(run, dict(plan.settings), {})


@contextlib.contextmanager
def synthetic_study(synthetic: Synthetic) -> Iterator[None]:
    """The study module measures with `synthetic` and keeps its studies in memory."""
    import optuna

    real_bench, real_storage = study_module.run_bench, study_module.storage
    study_module.run_bench = synthetic.run_bench  # type: ignore[assignment]
    study_module.storage = lambda _url: optuna.storages.InMemoryStorage()  # type: ignore[assignment]
    try:
        yield
    finally:
        study_module.run_bench, study_module.storage = real_bench, real_storage


def run_synthetic(
    setup: study_module.StudySetup,
    objective: Objective,
    *,
    seed: int,
    trials: int,
    sigma: float,
    run_sigma: float = 0.0,
) -> Synthetic:
    """One study of `trials` against `objective`; the synthetic run holds what it measured."""
    synthetic = Synthetic(objective, sigma, seed, run_sigma)
    setup = dataclasses.replace(setup, seed=seed, name=f"{setup.name}-{seed}", probe_every=0)
    with synthetic_study(synthetic):
        study = study_module.open_study(setup)
        study_module.run_search(
            setup, study, n_trials=trials, timeout_s=None, listener=study_module.QuietListener()
        )
        synthetic.records = study.records()
    return synthetic


def setup_for(server: str, workdir: Path, cpus: int = 2) -> study_module.StudySetup:
    """The setup `tuner tune apps/hello.py --server SERVER` builds, at `cpus` server CPUs."""
    from tuner.cli import build_parser
    from tuner.commands.setup import build_setup
    from tuner.commands.tune_options import TuneOptions

    argv = ["tune", "apps/hello.py", "--server", server, "--duration", "3"]
    argv += ["--storage", f"sqlite:///{workdir}/x.db"]
    setup = build_setup(TuneOptions.from_args(build_parser().parse_args(argv)))
    return dataclasses.replace(setup, server_cpus=tuple(range(cpus)), workdir=workdir)
