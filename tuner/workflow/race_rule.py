"""Which servers of a raced `compare` keep drawing trials: the race's decisions, as pure logic.

The race follows F-race (Birattari et al. 2002) inside the rungs of successive halving
(Jamieson & Talwalkar 2016; Hyperband, Li et al. 2017): every server gets a rung of trials,
each server's best config so far is re-measured beside the others' in interleaved rounds, and a
server whose best is behind the leader's beyond the noise stops drawing trials; the budget goes
to the rest, rung after rung. What is changed, and why (docs/pages/commands/compare.md, "The
race"):

- F-race drops a candidate on a Friedman test over many instances; a compare has one app and
  two or three runs per config, too few for a rank test (or for the paired test the final
  rounds decide by: five wins of five at the least), so "behind beyond the noise" is the
  tuner's own interim call: the server's best behind the leader's in every round both were
  measured in (the pairs the interleaved rounds make), and the gap of their medians wider
  than the largest noise the race measured (`race_noise`).
- A server is a whole search space, not one config, and its best can still move. So it stops
  only when the gap also exceeds what its untried space could plausibly add: its best trial's
  gain over the last rung, compounded over every rung the budget could still give it (an
  optimistic bound: a best-so-far curve gains less each rung, not more).
- Successive halving drops a fixed fraction each rung; here nobody is dropped for rank alone,
  servers inside the noise never stop each other, and the final rounds take the top
  MIN_FINALISTS and every server the noise cannot separate from the leader.
- The top MIN_FINALISTS never stop: they are measured in the final rounds whatever happens,
  and their figures there must be their tuned best, not a first rung's: a server ranked third
  after a first rung that found little, stopped there, is compared untuned.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from tuner.metrics.stats import Spread, better_in_every_round

# Always in the final rounds: the best this many by their confirmed medians.
MIN_FINALISTS = 3
# The smallest relative gap called "beyond the noise", however quiet the race's repeats were.
MIN_NOISE = 0.10
# Trials a server draws in each rung (the first holds its baselines and queued starts).
RUNG_TRIALS = 6
# The fewest a first rung may shrink to when the budget is tight: the baselines and a start.
MIN_FIRST_RUNG = 3
# Interleaved rounds of the servers' best configs after each rung.
RACE_ROUNDS = 2
# Configs a finalist beyond the top MIN_FINALISTS brings to the final rounds when the budget
# cannot hold all of its candidates: its default and its best.
LEAN_CANDIDATES = 2


@dataclass(frozen=True)
class Standing:
    """One server after a rung: its best config's runs, re-measured beside the others'."""

    server: str
    trials: int  # trials it has drawn
    confirmed: Spread  # the objective's headline over its best config's interleaved runs
    gain: float  # relative gain of its best trial over the last rung (0 = none)
    done: bool = False  # drew all it may (its trial cap, or its space measured): not stopped


@dataclass(frozen=True)
class Call:
    """What the race decided for one server after a rung."""

    server: str
    stop: bool
    reason: str = ""  # why it stopped: "behind granian by x3.1 after 6 trials, beyond ..."


def race_noise(probe_ms: Sequence[float], repeats: Sequence[Spread]) -> float:
    """The largest relative noise the race measured: the CPU probe's range over its repeats
    (machine drift), and the median range of repeats of one config in the race's rounds."""
    parts = [MIN_NOISE]
    probes = _without_outlier(probe_ms)
    if len(probes) >= 2 and statistics.median(probes) > 0:
        parts.append(Spread.of(probes).relative_range)
    ranges = [spread.relative_range for spread in repeats if len(spread.samples) >= 2]
    if ranges:
        parts.append(statistics.median(ranges))
    return max(parts)


# With this many CPU probes or more, the one farthest from their median is left out of their range.
OUTLIER_FROM = 5


def _without_outlier(probe_ms: Sequence[float]) -> list[float]:
    """The probes less the one farthest from their median, when there are OUTLIER_FROM or more:
    one probe slowed by a moment's hiccup is that moment's, while drift moves several; left
    in, one such probe sets the margin of every stop and tie in the race."""
    if len(probe_ms) < OUTLIER_FROM:
        return list(probe_ms)
    middle = statistics.median(probe_ms)
    far = max(range(len(probe_ms)), key=lambda i: abs(probe_ms[i] - middle))
    return [ms for i, ms in enumerate(probe_ms) if i != far]


def gap(leader: Spread, other: Spread, *, higher_is_better: bool) -> float:
    """How many times better the leader's median is than `other`'s (1.0 = level)."""
    mine, theirs = (leader.median, other.median)
    if not higher_is_better:
        mine, theirs = theirs, mine
    if theirs <= 0:
        return math.inf
    return mine / theirs


def ranked(standings: Sequence[Standing], *, higher_is_better: bool) -> list[Standing]:
    """Best confirmed median first (ties keep their order)."""
    sign = -1.0 if higher_is_better else 1.0
    return sorted(standings, key=lambda s: sign * s.confirmed.median)


def judge(
    standings: Sequence[Standing],
    *,
    noise: float,
    rungs_left: int,
    higher_is_better: bool,
) -> list[Call]:
    """Stop each server whose best is behind the leader's beyond the noise, by more than its
    untried space could add in `rungs_left` more rungs; the others go on. A server whose runs
    overlap the leader's is never stopped, nor are the top MIN_FINALISTS: the final rounds
    (`finalists`) measure them anyway, and what they show must be each one tuned."""
    order = ranked(standings, higher_is_better=higher_is_better)
    if not order:
        return []
    leader = order[0]
    podium = {s.server for s in order[:MIN_FINALISTS]}
    calls = []
    for standing in standings:
        if standing.server in podium:
            calls.append(Call(standing.server, False))
            continue
        times = gap(leader.confirmed, standing.confirmed, higher_is_better=higher_is_better)
        apart = better_in_every_round(
            leader.confirmed, standing.confirmed, higher_is_better=higher_is_better
        )
        # A server that drew all it may has no untried configs left to count on.
        ahead = 0 if standing.done else max(0, rungs_left)
        reach = (1.0 + max(0.0, standing.gain)) ** ahead
        if apart and times > (1.0 + noise) * reach:
            why = _reason(leader, standing, times, noise, rungs_left=ahead)
            calls.append(Call(standing.server, True, why))
        else:
            calls.append(Call(standing.server, False))
    return calls


def _reason(
    leader: Standing, standing: Standing, times: float, noise: float, rungs_left: int
) -> str:
    gained = (
        f"its last rung gained {standing.gain:.0%}"
        if standing.gain > 0
        else "its last rung gained nothing"
    )
    # With no rung left, what its space could add is nothing, however much its last rung
    # gained: the reason says so rather than a gain that looks as if it should have counted.
    could = (
        f" and what its untried configs could add ({gained})"
        if rungs_left > 0
        else f", with no rung left in the budget for its untried configs ({gained})"
        if not standing.done
        else ", with all the trials it may draw drawn"
    )
    return (
        f"behind {leader.server} by x{times:.1f} after {standing.trials} trials, beyond the "
        f"noise ({noise:.0%}){could}"
    )


def finalists(standings: Sequence[Standing], *, noise: float, higher_is_better: bool) -> list[str]:
    """The servers measured in the final rounds besides every server's default: the top
    MIN_FINALISTS and every server the noise cannot separate from the leader (its runs overlap
    the leader's, or the gap is inside the noise), best first."""
    order = ranked(standings, higher_is_better=higher_is_better)
    if not order:
        return []
    leader = order[0].confirmed
    chosen = []
    for index, standing in enumerate(order):
        times = gap(leader, standing.confirmed, higher_is_better=higher_is_better)
        apart = better_in_every_round(leader, standing.confirmed, higher_is_better=higher_is_better)
        if index < MIN_FINALISTS or not apart or times <= 1.0 + noise:
            chosen.append(standing.server)
    return chosen


def gain_over(before: float | None, after: float, *, higher_is_better: bool) -> float:
    """The relative gain of a best figure from `before` to `after` (0 when none, or no
    `before`: a first rung is judged against its default baseline by the caller)."""
    if before is None or before <= 0 or after <= 0:
        return 0.0
    better = after / before if higher_is_better else before / after
    return max(0.0, better - 1.0)


@dataclass(frozen=True)
class RunCost:
    """Seconds one run of one config takes, start to stop: in a rung (short windows) and in
    the final rounds (the user's windows). Estimated before the first run, then measured;
    with the share of the race's rounds measured twice, their CPUs having lost too much
    (tuner.workflow.repeats): the final rounds' runs are repeated as often."""

    rung_s: float
    final_s: float
    repeat_share: float = 0.0

    @property
    def final_expected_s(self) -> float:
        """A final run's time with its share of repeats."""
        return self.final_s * (1 + self.repeat_share)


@dataclass(frozen=True)
class BudgetPlan:
    """What the race's time goes to: rungs of trials and rounds, then the final rounds."""

    budget_s: float
    servers: int
    final_candidates: int  # configs each finalist brings to the final rounds
    final_rounds: int
    sized_runs: int = 0  # --for-cpus: trials each finalist draws after them, at other sizes

    def final_runs(self, finalists: int | None = None, extra_candidates: int | None = None) -> int:
        """The final rounds' runs (the top MIN_FINALISTS' candidates, `extra_candidates` of
        each finalist beyond them, every other server's default), and each finalist's trials
        at the other sizes, at the same windows."""
        count = min(self.servers, MIN_FINALISTS) if finalists is None else finalists
        top = min(count, MIN_FINALISTS)
        each = self.final_candidates if extra_candidates is None else extra_candidates
        per_round = top * self.final_candidates + (count - top) * each + (self.servers - count)
        return self.runs_of_final(per_round, count)

    def extra_candidates(self, spent_s: float, cost: RunCost, finalists: int) -> int:
        """Configs each finalist beyond the top MIN_FINALISTS brings to the final rounds: all
        its candidates when the final fits what the budget leaves after `spent_s`, else the
        most that fit, down to LEAN_CANDIDATES (the servers the noise cannot separate from
        the leader are many when the app is bound by waits, not by the server)."""
        for each in range(self.final_candidates, LEAN_CANDIDATES, -1):
            if spent_s + self.final_runs(finalists, each) * cost.final_expected_s <= self.budget_s:
                return each
        return min(LEAN_CANDIDATES, self.final_candidates)

    def first_rung(self, cost: RunCost) -> int:
        """Trials per server in the first rung: RUNG_TRIALS, fewer (down to MIN_FIRST_RUNG)
        when the budget, less the final rounds, cannot hold them."""
        left_s = self.budget_s - self.final_runs() * cost.final_expected_s
        fit = math.floor(left_s / (self.servers * cost.rung_s)) - RACE_ROUNDS
        return max(MIN_FIRST_RUNG, min(RUNG_TRIALS, fit))

    def rung_s(self, alive: int, cost: RunCost) -> float:
        """A rung of `alive` servers: its trials, and its rounds with their share of repeats
        (a trial is not repeated: the pruner and the confirmation judge it)."""
        rounds = RACE_ROUNDS * (1 + cost.repeat_share)
        return alive * (RUNG_TRIALS + rounds) * cost.rung_s

    def rung_fits(self, spent_s: float, cost: RunCost, alive: int, finalists: int) -> bool:
        """Whether another rung of `alive` servers (its trials and rounds) and then the final
        rounds fit in what the budget leaves after `spent_s`: a rung that tunes the servers
        comes before more configs of the finalists beyond the top MIN_FINALISTS."""
        final_s = self.final_runs(finalists, LEAN_CANDIDATES) * cost.final_expected_s
        return spent_s + self.rung_s(alive, cost) + final_s <= self.budget_s

    def rungs_left(self, spent_s: float, cost: RunCost, alive: int) -> int:
        """How many more rungs of `alive` servers the budget could hold (0 or more): the
        horizon of a server's optimistic bound."""
        free_s = self.budget_s - spent_s - self.final_runs() * cost.final_expected_s
        return max(0, math.floor(free_s / self.rung_s(max(1, alive), cost)))

    def runs_of_final(self, candidates: int, finalists: int) -> int:
        """The final's runs once its candidates are chosen (`candidates` of every server,
        each measured in every round), and each finalist's trials at the other sizes."""
        return candidates * self.final_rounds + finalists * self.sized_runs

    def repeats_left(self, spent_s: float, cost: RunCost, runs: int) -> int:
        """How many runs beyond the final's own `runs` the budget holds after `spent_s` and
        them (0 or more): repeats of its lossy runs, then the finalists' second looks."""
        free_s = self.budget_s - spent_s - runs * cost.final_s
        return max(0, math.floor(free_s / cost.final_s)) if cost.final_s > 0 else 0

    def expected_repeats(self, cost: RunCost, runs: int) -> int:
        """How many of the final's `runs` the race's share of repeats predicts lossy."""
        return math.ceil(runs * cost.repeat_share)

    def budget_for_repeats(self, spent_s: float, cost: RunCost, runs: int) -> float:
        """The budget that would have held the final's `runs` with the repeats the race's
        share predicts, after `spent_s`: what a user can give `--budget` next time."""
        return spent_s + (runs + self.expected_repeats(cost, runs)) * cost.final_s

    def fixed_s(self, cost: RunCost) -> float:
        """What the smallest first rung, its rounds and the final rounds take: a budget below
        it still runs them (every server gets its baselines and a start)."""
        rung = self.servers * (MIN_FIRST_RUNG + RACE_ROUNDS) * cost.rung_s
        return rung + self.final_runs() * cost.final_expected_s
