"""Writable places for what tools write under $HOME, when $HOME is not writable: an
arbitrary uid (OpenShift: any uid, group 0; the image's HOME=/home/worker belongs to
another uid) or a read-only root filesystem (``--read-only``; Kubernetes
``readOnlyRootFilesystem``). Nothing here needs a home directory.

Jupyter is the case that fails without it: jupyter_server writes its runtime file
(``jpserver-PID.json``) and each kernel's connection file into
``jupyter_core.paths.jupyter_runtime_dir()``, which is $JUPYTER_RUNTIME_DIR, else
``$JUPYTER_DATA_DIR/runtime``, else ``$XDG_DATA_HOME/jupyter/runtime``, else
``~/.local/share/jupyter/runtime`` (jupyter_core 5, paths.py); the server exits when it
cannot create it. The others degrade without it (IPython warns and uses a temporary
directory, matplotlib the same, pip runs without its cache), so they get a place too.

When $HOME is unset, not a directory or not writable by this uid, each variable of
``PLACES`` that is not set already gets a directory under the base (the directory of the
start-up report: entrypoint.runtime, 0700, this uid's), made at start. Variables the
user set are never changed. What an existing ``$HOME/.jupyter`` or
``$HOME/.local/share/jupyter`` holds (a derived image's config, kernel specs) is still
read: the directory joins JUPYTER_CONFIG_PATH or JUPYTER_PATH (``KEEP``). The Jupyter image's HEALTHCHECK finds the runtime
file through ``runtime_dir_beside`` (entrypoint.jupyter_health), the same rule.
"""
from __future__ import annotations

import os

TYPE_CHECKING = False  # typing costs ms at start-up; only type checkers import it
if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

# (variable, directory under the base, who writes there: the source of the fact)
PLACES = (
    ("JUPYTER_RUNTIME_DIR", "jupyter/runtime",
     "jupyter_server: jpserver-PID.json and kernel connection files (jupyter_core.paths.jupyter_runtime_dir)"),
    ("JUPYTER_CONFIG_DIR", "jupyter/config",
     "jupyter_core writes its migration marker there at every server start while IPYTHONDIR exists "
     "(jupyter_core.application.migrate_config); JupyterLab its settings and workspaces (lab/)"),
    ("JUPYTER_DATA_DIR", "jupyter/data",
     "jupyter_server links extensions there at start (notebook_shim: 'error linking extension' when it "
     "cannot); `jupyter kernelspec install --user` (jupyter_core.paths.jupyter_data_dir)"),
    ("IPYTHONDIR", "ipython", "IPython's profile and history.sqlite (IPython.paths.get_ipython_dir, default ~/.ipython)"),
    ("MPLCONFIGDIR", "matplotlib", "matplotlib's font cache (matplotlib.get_configdir, default ~/.config/matplotlib)"),
    ("XDG_CACHE_HOME", "cache", "pip's cache, torch.hub and others (XDG Base Directory spec, default ~/.cache)"),
    ("PADDLE_PDX_CACHE_HOME", "paddlex",
     "PaddleX (PaddleOCR 3) makes its cache, lock and temp dirs there at import and fails without them "
     "(paddlex/utils/cache.py, default ~/.paddlex)"),
)
RUNTIME = PLACES[0][1]
# What stays readable where it was: a moved directory's old place under $HOME, when it
# exists, joins the search path that is read after the moved one
# (jupyter_core.paths.jupyter_config_path and jupyter_path).
KEEP = {"JUPYTER_CONFIG_DIR": ("JUPYTER_CONFIG_PATH", ".jupyter"),
        "JUPYTER_DATA_DIR": ("JUPYTER_PATH", ".local/share/jupyter")}


def home_writable(env: Mapping[str, str]) -> bool:
    """Whether $HOME names a directory this uid may create files in (access(2) answers
    EROFS on a read-only mount as a refusal)."""
    home = env.get("HOME") or ""
    return home.startswith("/") and os.path.isdir(home) and os.access(home, os.W_OK | os.X_OK)


def home_dirs(env: Mapping[str, str]) -> list[str]:
    """The old places of ``KEEP`` under $HOME (absolute paths; they may not exist)."""
    home = env.get("HOME") or ""
    return [os.path.join(home, rel) for _, rel in KEEP.values()] if home.startswith("/") else []


def plan(env: Mapping[str, str], base: str | None, writable_home: bool,
         existing: Collection[str] = ()) -> dict[str, str]:
    """The variables to set (pure): ``{}`` when the home is writable or there is no base;
    else each unset variable of PLACES mapped to ``BASE/SUBDIR``, and for each of those
    in ``KEEP`` whose old place under $HOME is in ``existing``, its search-path variable
    with that place appended (os.pathsep-separated)."""
    if writable_home or not base or not base.startswith("/"):
        return {}
    out = {var: os.path.join(base, sub) for var, sub, _ in PLACES if not env.get(var)}
    home = env.get("HOME") or ""
    for var, (path_var, rel) in KEEP.items():
        old = os.path.join(home, rel)
        if var in out and home.startswith("/") and old in existing:
            out[path_var] = os.pathsep.join(p for p in (env.get(path_var), old) if p)
    return out


def runtime_dir_beside(report_path: str) -> str:
    """Where ``home_env`` puts JUPYTER_RUNTIME_DIR for a report at ``report_path``."""
    return os.path.join(os.path.dirname(report_path), RUNTIME)


# getpass.getuser() reads these, in this order, before it asks the passwd database
# (CPython Lib/getpass.py); with none set and no passwd entry for the uid it raises
# KeyError ("getpwuid(): uid not found"), and so does what calls it: torch.compile's
# Inductor names its cache directory after the user (torch/_inductor/runtime/
# cache_dir_utils.py, default_cache_dir), and fails under an arbitrary uid.
NAME_VARIABLES = ("LOGNAME", "USER", "LNAME", "USERNAME")


# Uids every image has a passwd entry for: root, and the images' own user
# (templates/base.Dockerfile.j2: useradd --uid 1000; a unit test holds the two equal).
# For them no lookup is made: it costs about 0.1 ms of a start.
IMAGE_UIDS = (0, 1000)


def user_env(env: Mapping[str, str], uid: int | None = None) -> dict[str, str]:
    """``{"USER": "<uid>"}`` (the number, as ``ps`` shows a uid without a name) when
    ``uid`` (default: this process's real uid) has no passwd entry and none of
    ``NAME_VARIABLES`` is set; ``{}`` otherwise, and without asking the passwd database
    for ``IMAGE_UIDS``. Any other uid is looked up, whatever its home: an arbitrary uid
    (OpenShift), or `docker run -u $(id -u) -v $HOME:/home/worker`, which owns its home
    and has no entry. Never raises."""
    if any(env.get(v) for v in NAME_VARIABLES):
        return {}
    uid = os.getuid() if uid is None else uid
    if uid in IMAGE_UIDS:
        return {}
    import pwd  # built in; asked only for a uid the images do not create

    try:
        pwd.getpwuid(uid)
    except KeyError:
        return {"USER": str(uid)}
    except (OSError, ValueError, OverflowError):
        return {}
    return {}


def home_env(env: Mapping[str, str], report_path: str | None) -> dict[str, str]:
    """The command's extra environment for a uid without a name or a home of its own:
    ``user_env``'s USER, and, when $HOME is not writable (an arbitrary uid, a read-only
    root), the variables of ``plan`` whose directory could be made (mode 0700, beside
    the report at ``report_path``); ``{}`` for the image's own user with its writable
    home. Never raises."""
    out = user_env(env)
    if home_writable(env) or not report_path:
        return out
    wanted = plan(env, os.path.dirname(report_path), False,
                  [d for d in home_dirs(env) if os.path.isdir(d)])
    out.update({pv: wanted.pop(pv) for pv, _ in KEEP.values() if pv in wanted})
    for var, path in wanted.items():
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)
        except (OSError, ValueError):
            continue
        if os.path.isdir(path) and os.access(path, os.W_OK | os.X_OK):
            out[var] = path
    return out
