"""The lanes as a user gives them: on the command line (`--streams`, `--probe`) or in the
workload file (`[streams]`, `[probe]`), one line naming the value for each mistake."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuner.commands.options import LoadOptions, lanes_from
from tuner.errors import ConfigError
from tuner.loadgen.lanes import Lanes, Probe, Streams
from tuner.loadgen.spec import load_workload_file

REQUEST = '[[requests]]\npath = "/"\n'


def test_the_options_make_the_lanes_with_kubernetes_defaults() -> None:
    lanes = lanes_from(LoadOptions(streams=3, stream_path="/sse", probe="/healthz"))
    assert lanes == Lanes(Streams(3, "/sse", stall_s=5.0), Probe("/healthz", 10.0, 1.0, 3))
    assert lanes.kinds() == ("streams", "probe")
    assert not lanes_from(LoadOptions())


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (LoadOptions(stream_path="/sse"), "--stream-path: names the streams' path; give --streams"),
        (LoadOptions(streams=2), "--streams 2: give --stream-path PATH too"),
        (LoadOptions(probe_timeout_s=2.0), "--probe-timeout: describes the probe; give --probe"),
    ],
)
def test_a_lane_option_without_its_partner_is_one_line(options: LoadOptions, said: str) -> None:
    with pytest.raises(ConfigError, match=said):
        lanes_from(options)


def test_the_workload_file_declares_lanes_and_the_options_may_not_repeat_them(
    tmp_path: Path,
) -> None:
    file = tmp_path / "w.toml"
    file.write_text(
        REQUEST + '[streams]\ncount = 4\npath = "/sse"\n[probe]\npath = "/healthz"\ntimeout_s = 2\n'
    )
    workload = load_workload_file(file)
    assert workload.lanes == Lanes(Streams(4, "/sse"), Probe("/healthz", timeout_s=2))
    merged = lanes_from(LoadOptions(request_timeout_s=3.0), workload.lanes)
    assert (
        merged.streams == Streams(4, "/sse", stall_s=3.0) and merged.probe == workload.lanes.probe
    )
    with pytest.raises(ConfigError, match=r"--probe: the workload file declares \[probe\] already"):
        lanes_from(LoadOptions(probe="/ready"), workload.lanes)


@pytest.mark.parametrize(
    ("tables", "said"),
    [
        ("[streams]\ncount = 2\n", "streams: expected a table with keys count, path"),
        ('[streams]\npath = "/s"\nlength = 3\n', "streams: unknown key 'length'; valid keys"),
        ('[probe]\npath = "/h"\nfailures = 0\n', "probe failures 0: expected a whole number"),
        ('[probe]\npath = "h"\n', "probe path 'h': expected an absolute path"),
        ('[stream]\npath = "/s"\n', "unknown key 'stream'; valid keys: requests, streams, probe"),
    ],
)
def test_a_bad_lane_in_the_workload_file_names_the_file_and_the_value(
    tmp_path: Path, tables: str, said: str
) -> None:
    file = tmp_path / "w.toml"
    file.write_text(REQUEST + tables)
    with pytest.raises(ConfigError, match=f"workload file {file}: .*{said}"):
        load_workload_file(file)
