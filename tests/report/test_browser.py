"""The HTML pages a user opens (`tuner report`, `tuner compare`), opened in headless Chromium:
every image decodes and is drawn, the console shows no error, the page names its study. Each
test keeps its screenshot in its own output folder (pytest's tmp_path)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import unavailable
from tests.report import browser
from tests.report.pages import COMPARE_NAME, COMPARED_SERVERS, STUDIES
from tuner.cli import main
from tuner.report.data import load_study_data
from tuner.report.front_view import FRONT_PAGE
from tuner.workflow.pareto_front import emit_command

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def chromium(real_servers: None) -> Iterator[Any]:
    """One browser for the module; a heavy process, so its tests run with the server tests."""
    reason = browser.missing()
    if reason:
        unavailable(reason)
    with browser.chromium() as driver:
        yield driver


def assert_drawn(seen: browser.Seen, charts: int, screenshot: Path) -> None:
    assert len(seen.images) == charts, seen.images
    for image in seen.images:
        assert image["complete"] and image["naturalWidth"] > 0, image  # decoded
        assert image["width"] > 0 and image["height"] > 0, image  # and laid out on the page
    assert seen.severe == []
    assert screenshot.read_bytes().startswith(PNG_SIGNATURE)


def test_a_broken_image_and_a_console_error_are_seen(chromium: Any, tmp_path: Path) -> None:
    """The checks below can fail: a PNG that does not decode, and a script error, show."""
    page = tmp_path / "broken.html"
    page.write_text(
        "<!DOCTYPE html><html><head><title>broken</title></head><body><h1>broken</h1>"
        '<img alt="cut" src="data:image/png;base64,iVBORw0KGgo=">'
        "<script>undefined_function()</script></body></html>"
    )
    seen = browser.look_at(chromium, page, tmp_path / "broken.png")
    assert [image["naturalWidth"] for image in seen.images] == [0]
    assert any("undefined_function" in message for message in seen.severe), seen.severe


@pytest.mark.parametrize("name", list(STUDIES))
def test_report_page_draws_in_chromium(
    storage: str, chromium: Any, tmp_path: Path, name: str
) -> None:
    out = tmp_path / "report"
    assert main(["report", "--study", name, "--storage", storage, "--out", str(out)]) == 0
    screenshot = tmp_path / "report.png"
    seen = browser.look_at(chromium, out / "report.html", screenshot)
    assert name in seen.heading and name in seen.title and "Top trials" in seen.text
    assert_drawn(seen, len(list(out.glob("*.png"))), screenshot)  # every chart written


def test_front_page_shows_every_point_the_knee_and_its_commands(
    storage: str, chromium: Any, tmp_path: Path
) -> None:
    """The multi study's front.html: each confirmed point with the command that writes it,
    the knee marked, the chart drawn; the report links to it."""
    out = tmp_path / "report"
    assert main(["report", "--study", "multi", "--storage", storage, "--out", str(out)]) == 0
    front = load_study_data(storage, "multi", importances=False).result.front
    assert front is not None and front.points  # the study confirmed a front
    screenshot = tmp_path / "front.png"
    seen = browser.look_at(chromium, out / FRONT_PAGE, screenshot)
    assert "multi" in seen.heading and "latency-memory front" in seen.title
    assert "Points of the confirmed front" in seen.text and "Memory per process" in seen.text
    for number, point in enumerate(front.points, start=1):
        assert point.summary.label in seen.text
        assert emit_command("multi", number, storage) in seen.text
    assert "Knee: point" in seen.text and "knee" in seen.text.split("Points of the")[1]
    assert_drawn(seen, 1, screenshot)  # the front chart, shared with the report
    report = browser.look_at(chromium, out / "report.html", tmp_path / "report-page.png")
    assert "The confirmed front" in report.text and (out / "front.png").is_file()


def test_compare_page_draws_in_chromium(
    compared: tuple[subprocess.CompletedProcess, Path], chromium: Any, tmp_path: Path
) -> None:
    _, folder = compared
    screenshot = tmp_path / "compare.png"
    seen = browser.look_at(chromium, folder / COMPARE_NAME / "compare.html", screenshot)
    assert COMPARE_NAME in seen.heading
    for server in COMPARED_SERVERS:
        assert f"{COMPARE_NAME}-{server}" in seen.text  # each server's study is named
    assert_drawn(seen, 1, screenshot)
