"""What a run's CPUs lost, as a measurement keeps it and a study's noise line says it."""

from __future__ import annotations

from tuner.metrics.coreshare import CoresGot, CoreShare, losses_text


def _got(server_stolen: float, load_stolen: float, other: float = 0.0) -> CoresGot:
    return CoresGot(CoreShare(1, server_stolen, 0.0), CoreShare(1, load_stolen, other))


def test_the_json_form_reads_back() -> None:
    got = _got(0.05, 0.24, 0.02)
    assert CoresGot.from_json(got.to_json()) == got
    alone = CoresGot(CoreShare(2, 0.1, 0.0), None)  # server and load on the same CPUs
    assert CoresGot.from_json(alone.to_json()) == alone


def test_describe_gives_each_sets_shares() -> None:
    assert "load CPUs 20% stolen, 4% other processes" in _got(0.05, 0.20, 0.04).describe()


def test_the_noise_line_names_each_cause_with_its_median_and_most() -> None:
    runs = [_got(0.01, 0.03), _got(0.05, 0.24), _got(0.0, 0.02, 0.02)]
    assert losses_text(runs) == [
        "steal in those runs: server CPUs 1% (up to 5%), load CPUs 3% (up to 24%)",
        "other processes in those runs: load CPUs 0% (up to 2%)",
    ]


def test_a_cause_that_took_nothing_is_not_named() -> None:
    assert losses_text([_got(0.001, 0.0), _got(0.0, 0.004)]) == []
    assert losses_text([]) == []


def test_a_trial_line_names_only_the_losses_worth_a_word() -> None:
    assert _got(0.18, 0.01, 0.07).notable() == (
        "server CPUs lost 18% to steal, load CPUs lost 7% to other processes"
    )
    assert _got(0.04, 0.0).notable() is None
