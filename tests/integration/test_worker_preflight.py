"""A worker's start on a host an operator got wrong (issue #30): a data folder that cannot be made, a
web port another process holds. One line on stderr and exit 2, before any broker is asked (the worker
once died in faust with a traceback); a data folder whose parents are missing is simply made."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from services.cli import main
from services.runtime.kafka.preflight import check_data_dir
from services.runtime.settings import Settings

NO_BROKER = "127.0.0.1:9"  # nothing listens there: a check that reached the broker would say so instead


def one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["worker", "dealer"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


def test_a_data_folder_that_cannot_be_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``CASINO_DATA_DIR`` under a file: exit 2, one line naming the variable and the folder."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("CASINO_BOOTSTRAP_SERVERS", NO_BROKER)
    monkeypatch.setenv("CASINO_DATA_DIR", str(blocker / "faust"))
    line = one_line_exit_2(capsys)
    assert "CASINO_DATA_DIR" in line and str(blocker / "faust") in line


def test_a_web_port_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``CASINO_WEB_PORT`` held by another process: exit 2, one line naming the port."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        for name, value in {"CASINO_BOOTSTRAP_SERVERS": NO_BROKER, "CASINO_DATA_DIR": str(tmp_path / "d"),
                            "CASINO_WEB_ENABLED": "true", "CASINO_WEB_BIND": "127.0.0.1",
                            "CASINO_WEB_PORT": str(port)}.items():  # fmt: skip
            monkeypatch.setenv(name, value)
        line = one_line_exit_2(capsys)
    assert f"CASINO_WEB_PORT {port}" in line and "in use" in line


def test_a_data_folder_without_its_parents_is_made(tmp_path: Path) -> None:
    """The default data folder is relative (``var/faust``): started where no ``var/`` exists, the worker
    makes it, parents and all."""
    where = tmp_path / "elsewhere" / "var" / "faust"
    check_data_dir(Settings(data_dir=where))
    assert where.is_dir()
