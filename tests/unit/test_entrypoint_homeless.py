"""entrypoint/homeless.py and entrypoint/jupyter_health.py: when $HOME is not writable
(an arbitrary uid, a read-only root) Jupyter's runtime dir and the like go beside the
start-up report, and the Jupyter HEALTHCHECK finds the server there. Real directories, a
real HTTP server on 127.0.0.1, the real entrypoint in a subprocess."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from entrypoint import homeless, jupyter_health

NO_HOME = "/nonexistent/stagecraft-home"
VARS = [v for v, _, _ in homeless.PLACES]


def test_plan_is_every_place_under_the_base_when_home_is_not_writable() -> None:
    got = homeless.plan({"HOME": NO_HOME}, "/dev/shm/stagecraft-54321", writable_home=False)
    assert got["JUPYTER_RUNTIME_DIR"] == "/dev/shm/stagecraft-54321/jupyter/runtime"
    assert sorted(got) == sorted(VARS) and all(p.startswith("/dev/shm/stagecraft-54321/") for p in got.values())


@pytest.mark.parametrize(("env", "base", "writable"), [
    ({"HOME": "/home/worker"}, "/tmp/stagecraft-1000", True),   # a usable home: nothing
    ({}, None, False),                                          # no report, no base
    ({}, "relative/dir", False),                                # never a relative place
])
def test_plan_is_empty(env: dict, base: str | None, writable: bool) -> None:
    assert homeless.plan(env, base, writable) == {}


def test_plan_keeps_what_the_user_set() -> None:
    got = homeless.plan({"JUPYTER_RUNTIME_DIR": "/srv/rt", "XDG_CACHE_HOME": "/srv/c"}, "/b", writable_home=False)
    assert "JUPYTER_RUNTIME_DIR" not in got and "XDG_CACHE_HOME" not in got and got["IPYTHONDIR"] == "/b/ipython"


def test_an_existing_home_config_is_still_read() -> None:
    """$HOME/.jupyter (say, baked into a derived image) joins JUPYTER_CONFIG_PATH, after
    what the user had there; the config dir itself moves to where it can be written."""
    env = {"HOME": "/home/worker", "JUPYTER_CONFIG_PATH": "/etc/x"}
    got = homeless.plan(env, "/b", False, homeless.home_dirs(env))
    assert got["JUPYTER_CONFIG_DIR"] == "/b/jupyter/config" and got["JUPYTER_DATA_DIR"] == "/b/jupyter/data"
    assert got["JUPYTER_CONFIG_PATH"] == os.pathsep.join(["/etc/x", "/home/worker/.jupyter"])
    assert got["JUPYTER_PATH"] == "/home/worker/.local/share/jupyter"
    only_data = homeless.plan(env, "/b", False, ["/home/worker/.local/share/jupyter"])
    assert "JUPYTER_CONFIG_PATH" not in only_data and "JUPYTER_PATH" in only_data
    mine = {"HOME": "/h", "JUPYTER_CONFIG_DIR": "/mine"}
    assert "JUPYTER_CONFIG_PATH" not in homeless.plan(mine, "/b", False, ["/h/.jupyter"])


@pytest.mark.parametrize(("home", "want"), [("", False), ("relative", False), (NO_HOME, False), ("/", None)])
def test_home_writable(home: str, want: bool | None) -> None:
    got = homeless.home_writable({"HOME": home} if home else {})
    assert got == (os.access("/", os.W_OK) if want is None else want), home


def test_home_env_makes_the_directories_0700(tmp_path: Path) -> None:
    report = tmp_path / "stagecraft-54321" / "report.json"
    report.parent.mkdir()
    got = homeless.home_env({"HOME": NO_HOME}, str(report))
    assert got["JUPYTER_RUNTIME_DIR"] == homeless.runtime_dir_beside(str(report))
    for path in got.values():
        assert Path(path).is_dir() and Path(path).stat().st_mode & 0o777 == 0o700, path


def test_home_env_changes_nothing_with_a_writable_home(tmp_path: Path) -> None:
    report = tmp_path / "r" / "report.json"
    report.parent.mkdir()
    assert homeless.home_env({"HOME": str(tmp_path)}, str(report)) == {}
    assert list(report.parent.iterdir()) == []


def test_home_env_leaves_out_a_place_that_cannot_be_made(tmp_path: Path) -> None:
    (tmp_path / "jupyter").write_text("a file where a directory would go")
    got = homeless.home_env({"HOME": NO_HOME}, str(tmp_path / "report.json"))
    assert "JUPYTER_RUNTIME_DIR" not in got and "IPYTHONDIR" in got
    assert homeless.home_env({"HOME": NO_HOME}, None) == {}


def _entrypoint_env(tmp_path: Path, home: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in VARS and not k.startswith("STAGECRAFT_")}
    env.update({"STAGECRAFT_QUIET": "1", "STAGECRAFT_REPORT": str(tmp_path / "rep" / "report.json"),
                "STAGECRAFT_PROBE_ROOT": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": home})
    return env


@pytest.mark.parametrize("home", ["none", "writable"])
def test_the_entrypoint_gives_the_command_the_places(tmp_path: Path, home: str) -> None:
    """Through the real entrypoint: without a usable home the command sees
    JUPYTER_RUNTIME_DIR beside the report (an existing directory); with one, nothing."""
    env = _entrypoint_env(tmp_path, NO_HOME if home == "none" else str(tmp_path))
    cp = subprocess.run([sys.executable, str(REPO / "entrypoint/stagecraft-entrypoint"), "sh", "-c",
                         'echo "[${JUPYTER_RUNTIME_DIR-unset}]"; if test -d "${JUPYTER_RUNTIME_DIR:-/nonexistent}"; then echo made; fi'],
                        capture_output=True, text=True, env=env, timeout=60, check=False)
    want = f"[{tmp_path}/rep/jupyter/runtime]\nmade" if home == "none" else "[unset]"
    assert cp.returncode == 0 and cp.stdout.strip() == want, cp.stdout + cp.stderr


# --- a uid without a passwd entry: USER for getpass.getuser() ------------------------------

def _unknown_uid() -> int:
    import pwd

    known = {p.pw_uid for p in pwd.getpwall()}
    return next(u for u in range(54321, 70000) if u not in known)


def test_user_env_names_a_uid_the_passwd_database_does_not() -> None:
    uid = _unknown_uid()
    assert homeless.user_env({}, uid) == {"USER": str(uid)}
    assert homeless.user_env({"HOME": "/"}, uid) == {"USER": str(uid)}
    assert homeless.user_env({}, 0) == {}  # root has an entry everywhere
    for var in homeless.NAME_VARIABLES:  # whatever getpass.getuser() reads first is kept
        assert homeless.user_env({var: "someone"}, uid) == {}, var
    assert homeless.user_env({"USER": ""}, uid) == {"USER": str(uid)}  # empty: getpass skips it too


def test_the_images_own_uids_are_not_looked_up() -> None:
    """Root and the images' user (uid 1000, made by the base template) get no USER and
    cost no passwd lookup on the start path: even where 1000 has no entry (this host may
    not), user_env answers {} for it. The template and IMAGE_UIDS agree."""
    assert homeless.user_env({}, 1000) == {} and homeless.user_env({}, 0) == {}
    template = (REPO / "templates" / "base.Dockerfile.j2").read_text()
    uids = {int(u) for u in re.findall(r"useradd --uid (\d+)", template)}
    assert uids and uids | {0} == set(homeless.IMAGE_UIDS), (uids, homeless.IMAGE_UIDS)


SYSTEM_PYTHON = "/usr/bin/python3"  # readable by any uid, unlike a pyenv under /root


@pytest.mark.skipif(os.geteuid() != 0 or not os.access(SYSTEM_PYTHON, os.X_OK),
                    reason="runs the entrypoint as another uid: needs root and /usr/bin/python3")
@pytest.mark.parametrize("home", ["slash", "group-writable", "its-own"])
def test_the_entrypoint_lets_getpass_name_an_arbitrary_uid(home: str) -> None:
    """OpenShift's arbitrary uid: through the real entrypoint, getpass.getuser() answers
    (torch.compile's Inductor names its cache after it) where without the entrypoint it
    raises KeyError. Its HOME as Docker gives it: ``/`` (an image without HOME), the
    image's HOME, another uid's and group-writable for group 0 (these images: review
    s30, where USER was missing because that home is writable), or a home it owns
    (`-u $(id -u) -v $HOME:/home/worker`: the second review s30). The uid is switched in
    the child before anything runs (preexec_fn), as `docker run --user UID:0` does; the
    entrypoint is a copy in a directory that uid can read (tmp_path is root's alone)."""
    import shutil
    import tempfile

    uid = _unknown_uid()
    top = Path(tempfile.mkdtemp(prefix="stagecraft-anyuid-"))
    try:
        top.chmod(0o755)
        for part in ("entrypoint", "probes"):
            shutil.copytree(REPO / part, top / part, ignore=shutil.ignore_patterns("__pycache__"))
        rep = top / "rep"
        rep.mkdir(mode=0o777)
        rep.chmod(0o777)
        home_dir = top / "home"
        home_dir.mkdir()
        os.chown(home_dir, uid if home == "its-own" else 1000, 0)  # its own: a volume as HOME
        home_dir.chmod(0o2775)
        env = _entrypoint_env(top, "/" if home == "slash" else str(home_dir))
        env["STAGECRAFT_REPORT"] = str(rep / "report.json")
        for var in homeless.NAME_VARIABLES:
            env.pop(var, None)
        code = "import getpass; print(getpass.getuser())"

        def as_uid() -> None:
            os.setgid(0)
            os.setuid(uid)

        def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
            return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, check=False,
                                  preexec_fn=as_uid, cwd="/")

        plain = run([SYSTEM_PYTHON, "-c", code])
        assert plain.returncode == 1 and "uid not found" in plain.stderr, plain.stdout + plain.stderr
        cp = run([SYSTEM_PYTHON, str(top / "entrypoint/stagecraft-entrypoint"), SYSTEM_PYTHON, "-c", code])
        assert cp.returncode == 0 and cp.stdout.strip() == str(uid), cp.stdout + cp.stderr
    finally:
        shutil.rmtree(top, ignore_errors=True)


# --- the Jupyter HEALTHCHECK -----------------------------------------------------------------

class _Api(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        ok = self.path == "/lab/base/api"
        body = json.dumps({"version": "2.99.0"}).encode() if ok else b"{}"
        self.send_response(200 if ok else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[int]:
    """A real HTTP server on 127.0.0.1 answering GET /lab/base/api; yields its port."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Api)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        yield httpd.server_address[1]
    finally:
        httpd.shutdown()
        httpd.server_close()


def _runtime_file(d: Path, port: int, base_url: str = "/lab/base/") -> Path:
    d.mkdir(parents=True, exist_ok=True)
    f = d / "jpserver-7.json"
    f.write_text(json.dumps({"port": port, "base_url": base_url, "secure": False, "token": "never-read"}))
    return f


def test_health_finds_the_server_beside_the_report(tmp_path: Path, server: int) -> None:
    """The case the entrypoint makes under any uid: the runtime file is beside the report,
    not in jupyter_core's directory of the check's own environment."""
    report = tmp_path / "shm" / "report.json"
    report.parent.mkdir()
    report.write_text(json.dumps({"schema": 1, "probes": {}}))
    _runtime_file(Path(homeless.runtime_dir_beside(str(report))), server)
    code, line = jupyter_health.check({"STAGECRAFT_REPORT": str(report)}, str(tmp_path / "home-rt"), 3)
    assert (code, line) == (0, f"healthy: Jupyter server 2.99.0 answers http://127.0.0.1:{server}/lab/base/api")


def test_health_finds_the_server_in_jupyters_own_dir(tmp_path: Path, server: int) -> None:
    _runtime_file(tmp_path / "rt", server)
    code, line = jupyter_health.check({"STAGECRAFT_REPORT": str(tmp_path / "none.json")}, str(tmp_path / "rt"), 3)
    assert code == 0 and line.startswith("healthy:"), line


@pytest.mark.parametrize("case", ["no-file", "bad-json", "wrong-base-url", "nobody-listens"])
def test_health_is_unhealthy(tmp_path: Path, server: int, case: str) -> None:
    rt = tmp_path / "rt"
    if case == "bad-json":
        rt.mkdir()
        (rt / "jpserver-1.json").write_text("{not json")
    elif case == "wrong-base-url":
        _runtime_file(rt, server, "/other/")
    elif case == "nobody-listens":
        _runtime_file(rt, 1)  # port 1: nothing answers on this machine's loopback
    code, line = jupyter_health.check({"STAGECRAFT_REPORT": str(tmp_path / "none.json")}, str(rt), 3)
    assert code == 1 and line.startswith("unhealthy: "), (case, line)
    if case in ("no-file", "bad-json"):
        assert f"no Jupyter server runtime file in {rt}" in line, line


def test_api_url_follows_the_runtime_file() -> None:
    assert jupyter_health.api_url({"port": 8888}) == "http://127.0.0.1:8888/api"
    assert jupyter_health.api_url({"port": 9, "base_url": "/x", "secure": True}) == "https://127.0.0.1:9/x/api"


def test_runtime_dirs_without_repeats() -> None:
    assert jupyter_health.runtime_dirs("/h/rt", None) == ["/h/rt"]
    assert jupyter_health.runtime_dirs("/s/jupyter/runtime/", "/s/report.json") == ["/s/jupyter/runtime/"]
    assert jupyter_health.runtime_dirs("/h/rt", "/s/report.json") == ["/h/rt", "/s/jupyter/runtime"]


@pytest.mark.parametrize("args", [["--timeout", "x"], ["--timeout", "0"], ["--bogus"], ["--timeout"]])
def test_bad_arguments_are_one_unhealthy_line(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert jupyter_health.main(args) == 1
    out = capsys.readouterr().out
    assert out.startswith("unhealthy: bad arguments") and out.count("\n") == 1, out
