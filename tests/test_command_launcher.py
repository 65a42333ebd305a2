"""command_launcher: the shell launcher of a server configured only on its command line gives
the shell back exactly the folder, the environment and the command it was handed, and lists
every setting (pure: it renders and reads the file, `sh -n` parses it, nothing runs)."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from tuner.apps import AppRef
from tuner.servers import get_adapter
from tuner.servers.base import DIRECT, ArtifactRequest
from tuner.servers.cmdlauncher import command_launcher

NASTY = "x\nline $(id) `id` 'q' \"dq\" \\ end"
FOLDER = f"/srv/we'ird dir/{NASTY}"
ARGV = ["server", "--bind", "127.0.0.1:8000", f"--name={NASTY}", "app:app"]
ENV = {"DB_URL": "postgres://u:p@h/db?x=1 2", "QUOTE": NASTY}


def render(one_line: bool) -> str:
    adapter = get_adapter("waitress")
    resolved = adapter.resolve({"threads": 12})
    request = ArtifactRequest(
        AppRef("app", "app", FOLDER), DIRECT, resolved, f"evidence\nstudy {NASTY}", ENV
    )
    return command_launcher(
        adapter,
        request,
        ARGV,
        resolved,
        install="pip install waitress",
        intro=["the intro line"],
        notes=["a note", "another note"],
        one_line=one_line,
    ).text


@pytest.mark.parametrize("one_line", [False, True])
def test_the_shell_reads_back_the_folder_env_and_command(one_line: bool, tmp_path: Path) -> None:
    text = render(one_line)
    # After the comments: the exports, the cd, then the exec as the last command.
    exports, _, rest = text[text.index("\nexport ") + 1 :].partition("\ncd ")
    cd, _, command = rest.partition("\nexec ")
    words = shlex.split(exports)
    assert words[0::2] == ["export"] * len(ENV)
    assert dict(word.split("=", 1) for word in words[1::2]) == ENV
    assert shlex.split(cd) == [FOLDER, "||", "exit", "1"]
    assert shlex.split(command.replace(" \\\n", " ")) == ARGV
    # One flag with its value per line (the command and the app alone) unless one_line.
    lines = [shlex.split(line) for line in command.split(" \\\n    ")]
    assert lines == ([ARGV] if one_line else [ARGV[:1], ARGV[1:3], ARGV[3:4], ARGV[4:]])
    script = tmp_path / "launcher.sh"
    script.write_text(text)
    subprocess.run(["/bin/sh", "-n", str(script)], check=True)


def test_the_comments_list_every_setting_between_intro_and_notes() -> None:
    lines = render(one_line=False).splitlines()
    adapter = get_adapter("waitress")
    assert lines[0] == "#!/bin/sh"
    start = lines.index("# the intro line")
    assert lines[start - 1] == "# Run: sh waitress-serve.sh  (with pip install waitress)."
    listed = lines[start + 1 : start + 1 + len(adapter.table.settings)]
    assert [line.split(" = ")[0] for line in listed] == [
        f"#   {setting.name}" for setting in adapter.table.settings
    ]
    assert "#   threads = 12: " in listed[0]
    after = start + 1 + len(listed)
    assert lines[after : after + 2] == ["# a note", "# another note"]
    # A newline in the header cannot end a comment: every line up to the exports is one.
    first_export = next(i for i, line in enumerate(lines) if line.startswith("export "))
    assert all(line.startswith("#") for line in lines[:first_export])
