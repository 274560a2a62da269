"""Issue 40 item 6c: ``--engine dask://HOST:PORT`` that cannot reach a scheduler is one line, exit 1, and leaves
no --spill folder: nothing listening (a closed port on the loopback), and a listener that is not a Dask
scheduler (a tiny TCP server in this test that accepts and closes, on 127.0.0.1 only, for the test's length).
No network beyond the loopback."""
from __future__ import annotations

import socket
import threading
import time

import pytest

import tiny_inputs as tiny

pytest.importorskip("distributed")
pytest.importorskip("pyarrow")

from pyprof.prof.ranks import rank_dask  # noqa: E402
from pyprof.prof.cli import main  # noqa: E402


@pytest.fixture
def ranks(tmp_path):
    return [str(tiny.records(tmp_path / f"rank{i}.dict")) for i in range(2)]


def _closed_port() -> int:
    """A loopback port where nothing listens: one the system gave a socket that is closed again."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture
def closer():
    """A TCP server on 127.0.0.1 that accepts each connection and closes it at once (no Dask handshake)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    done = threading.Event()

    def serve():
        while not done.is_set():
            try:
                conn, _ = server.accept()
            except OSError:  # the 0.2 s tick, or the socket closed at the end
                continue
            conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield server.getsockname()[1]
    done.set()
    t.join(5)
    server.close()


def _refused(capsys, tmp_path, ranks, port: int) -> str:
    spill = tmp_path / "spill"
    rc = main(["--view", "ranks", "--engine", f"dask://127.0.0.1:{port}", "--spill", str(spill), *ranks])
    out, err = capsys.readouterr()
    assert rc == 1, err
    assert out == "" and not spill.exists()
    lines = err.splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_nothing_listening_is_one_line_at_once(capsys, tmp_path, ranks, monkeypatch):
    # Dask alone retries a refused connection until its timeout (3 s here): the refusal must come before it
    monkeypatch.setattr(rank_dask, "CONNECT_TIMEOUT_S", 3)
    port = _closed_port()
    start = time.monotonic()
    line = _refused(capsys, tmp_path, ranks, port)
    assert time.monotonic() - start < 3
    assert line == (f"pyprof prof: error: cannot reach a Dask scheduler at tcp://127.0.0.1:{port}: connection "
                    "refused (nothing listens on that port)")


def test_a_listener_that_is_no_scheduler_is_one_line(capsys, tmp_path, ranks, monkeypatch, closer):
    monkeypatch.setattr(rank_dask, "CONNECT_TIMEOUT_S", 3)
    line = _refused(capsys, tmp_path, ranks, closer)
    assert line.startswith(f"pyprof prof: error: cannot reach a Dask scheduler at tcp://127.0.0.1:{closer}: "), line
    assert "<TCP" not in line  # Dask's connection object is not repeated


@pytest.mark.parametrize("engine", ["dask://127.0.0.1", "dask://127.0.0.1:99999", "dask://127.0.0.1:0",
                                    "dask://:8786"])
def test_an_address_without_a_usable_port_is_a_usage_error(capsys, tmp_path, ranks, engine):
    assert main(["--view", "ranks", "--engine", engine, "--spill", str(tmp_path / "s"), *ranks]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "dask://HOST:PORT (1 to 65535)" in err
    assert not (tmp_path / "s").exists()


def test_a_good_address_is_kept():
    """The silent side: the addresses docs/cluster.md shows pass the check unchanged."""
    assert rank_dask.scheduler_address("dask://HOST:8786") == "tcp://HOST:8786"
    assert rank_dask.scheduler_address("dask://tls://10.0.0.1:8786") == "tls://10.0.0.1:8786"
    assert rank_dask.scheduler_address("dask://[::1]:8786") == "tcp://[::1]:8786"
    assert rank_dask.scheduler_address("dask") is None
