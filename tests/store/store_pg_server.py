"""A throwaway PostgreSQL server for the store tests: Debian's `postgresql` binaries, `initdb` into a temp
dir, `pg_ctl start` on a free loopback port with its unix socket in the temp dir.

As root the server must run as an unprivileged user; the Debian package's `postgres` user is used.
Every failure is reported as a reason string so the tests skip by name with it.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass
class PgServer:
    bindir: Path
    datadir: Path
    sockdir: Path
    port: int
    run_as: str | None
    base: Path

    def url(self, dbname: str) -> str:
        return f"postgresql+psycopg://medic@127.0.0.1:{self.port}/{dbname}"

    def stop(self) -> None:
        _run(
            self, [str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-m", "immediate", "-w", "stop"], 60
        )
        shutil.rmtree(self.base, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(
    server: PgServer | None, argv: list[str], timeout: float, run_as: str | None = None
) -> subprocess.CompletedProcess[str]:
    user = run_as if server is None else server.run_as
    if user:
        argv = ["runuser", "-u", user, "--", *argv]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


def find_bindir() -> Path | None:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), reverse=True)
    if candidates:
        return Path(candidates[0]).parent
    which = shutil.which("pg_ctl")
    return Path(which).parent if which else None


def start() -> PgServer | str:
    """A running server, or the reason it could not start."""
    bindir = find_bindir()
    if bindir is None:
        return "PostgreSQL binaries not found (Debian package `postgresql`; scripts/setup-system-deps.sh installs it)"
    run_as: str | None = None
    # As root the server runs as `postgres`, which cannot enter a private $TMPDIR: use world-traversable /tmp.
    tmp_root = "/tmp" if os.geteuid() == 0 and os.path.isdir("/tmp") else None
    base = Path(tempfile.mkdtemp(prefix="medic-pg-", dir=tmp_root))
    if os.geteuid() == 0:
        try:
            pw = pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no `postgres` user to run the server as"
        run_as = "postgres"
        os.chown(base, pw.pw_uid, pw.pw_gid)
        os.chmod(base, 0o700)
    datadir, sockdir = base / "data", base / "sock"
    server = PgServer(bindir, datadir, sockdir, _free_port(), run_as, base)
    init = _run(
        server, [str(bindir / "initdb"), "-D", str(datadir), "-A", "trust", "-U", "medic", "-E", "UTF8"], 120
    )
    if init.returncode != 0:
        shutil.rmtree(base, ignore_errors=True)
        return f"initdb failed: {(init.stderr or init.stdout).strip()[-400:]}"
    _run(server, ["mkdir", "-p", str(sockdir)], 10)
    opts = f"-h 127.0.0.1 -p {server.port} -k {sockdir} -c fsync=off"
    log = base / "server.log"
    started = _run(
        server,
        [str(bindir / "pg_ctl"), "-D", str(datadir), "-o", opts, "-l", str(log), "-w", "-t", "60", "start"],
        90,
    )
    if started.returncode != 0:
        tail = ""
        with contextlib.suppress(OSError):
            tail = log.read_text()[-400:]
        shutil.rmtree(base, ignore_errors=True)
        return f"pg_ctl start failed: {(started.stderr or started.stdout).strip()[-300:]} {tail}"
    return server


def create_database(server: PgServer, name: str) -> str:
    import psycopg

    with psycopg.connect(
        host="127.0.0.1", port=server.port, user="medic", dbname="postgres", autocommit=True
    ) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    return server.url(name)
