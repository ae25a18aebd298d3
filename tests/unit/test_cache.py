"""Cache options per stage key and per stage line, base locations, and what BuildKit's
output says about a build's caches. Pure."""

from __future__ import annotations

import pytest

from stagecraft import cache
from stagecraft.bases import BaseImage
from stagecraft.buildlog import BuildLog
from stagecraft.errors import InputError

KEY = "ab" * 32
LINE = "runtime base=debian12 framework=paddle-2.6.2-cpu"


def test_local_scopes_per_stage_key_and_line():
    spec = cache.parse("type=local,dir=/c", "--cache-to")
    line = cache.line_name("runtime", LINE)
    assert line.startswith("runtime-line-") and len(line) == len("runtime-line-") + 16
    got = cache.stage_args(spec, spec, "runtime", KEY, LINE)
    assert got == (f"--cache-from=type=local,src=/c/runtime-{KEY[:24]}",
                   f"--cache-from=type=local,src=/c/{line}",
                   f"--cache-to=type=local,dest=/c/runtime-{KEY[:24]},mode=max,ignore-error=true")


def test_registry_exports_the_key_and_the_line():
    spec = cache.parse("type=registry,ref=reg:5000/cache", "--cache-to")
    line = cache.line_name("cuda", LINE)
    got = cache.stage_args(None, spec, "cuda", KEY, LINE)
    assert got == (f"--cache-to=type=registry,ref=reg:5000/cache:cuda-{KEY[:24]},mode=max,ignore-error=true",
                   f"--cache-to=type=registry,ref=reg:5000/cache:{line},mode=max,ignore-error=true")
    got = cache.stage_args(spec, None, "cuda", KEY, LINE)
    assert got == (f"--cache-from=type=registry,ref=reg:5000/cache:cuda-{KEY[:24]}",
                   f"--cache-from=type=registry,ref=reg:5000/cache:{line}")


def test_label_stages_get_no_cache():
    spec = cache.parse("type=local,dir=/c", "--cache-to")
    assert cache.stage_args(spec, spec, "label", KEY, "") == ()


def test_two_keys_or_lines_never_share_a_scope():
    spec = cache.parse("type=local,dir=/c", "--cache-to")
    assert cache.stage_args(None, spec, "runtime", "1" * 64, LINE) != cache.stage_args(None, spec, "runtime", "2" * 64, LINE)
    assert cache.line_name("runtime", LINE) != cache.line_name("runtime", LINE + "x")
    assert cache.line_name("runtime", LINE) != cache.line_name("jupyter", LINE)


def test_base_locations_follow_the_base_identity():
    a = BaseImage("debian12", "bootstrap", "stagecraft-base/debian:bookworm-amd64-1", "id-1")
    b = BaseImage("debian12", "bootstrap", "stagecraft-base/debian:bookworm-amd64-2", "id-2")
    reg = cache.parse("type=registry,ref=127.0.0.1:5000/cache", "--cache-from")
    loc = cache.parse("type=local,dir=/c", "--cache-from")
    assert reg.base_location(a).startswith("127.0.0.1:5000/cache:base-image-")
    assert loc.base_location(a).startswith("/c/base-image-") and loc.base_location(a).endswith(".tar")
    assert reg.base_location(a) != reg.base_location(b)


def test_spec_text_round_trips():
    for text in ("type=local,dir=/c", "type=registry,ref=reg:5000/team/cache"):
        assert cache.parse(text, "--cache-to").text == text


@pytest.mark.parametrize("text", ["type=s3,bucket=x", "type=local", "dir=/x", "type=registry,ref=r/x:tag",
                                  "type=local,dir=/x,extra=1"])
def test_bad_specs_are_one_line_errors(text):
    with pytest.raises(InputError, match=r"--cache-to .*: (not a cache location|ref takes a repository)"):
        cache.parse(text, "--cache-to")


# BuildKit 0.13 (Docker 26.1) plain progress, shortened: a cache import from a registry
# that does not answer, one that has no such tag yet, a RUN step from cache, one that ran,
# and a cache export that failed (ignore-error=true: the build still succeeded).
PROGRESS = """\
#0 building with "default" instance using docker driver
#4 importing cache manifest from 127.0.0.1:5999/c:x
#4 ERROR: failed to configure registry cache importer: failed to do request: Head "https://127.0.0.1:5999/v2/c/manifests/x": dial tcp 127.0.0.1:5999: connect: connection refused
#5 importing cache manifest from 127.0.0.1:5000/c:runtime-line-0123
#5 ERROR: 127.0.0.1:5000/c:runtime-line-0123: not found
#6 [1/3] FROM docker.io/stagecraft-base/debian:bookworm-amd64-93ac4b8e27be9467
#6 DONE 0.0s
#7 [2/3] RUN echo one > /one
#7 CACHED
#8 [3/3] RUN echo two > /two
#8 0.101 two
#8 DONE 0.3s
#9 [runtime 4/5] COPY entrypoint/ /opt/stagecraft/entrypoint/
#9 DONE 0.1s
#10 exporting to image
#10 DONE 0.2s
#11 exporting cache to registry
#11 writing layer sha256:261fdcfd3a7af558b22622648de725866730513cb09592f3ab89a41de9287221 done
#11 ERROR: error writing layer blob: failed to do request: Head "https://127.0.0.1:5999/v2/c/blobs/sha256:261f": dial tcp 127.0.0.1:5999: connect: connection refused
------
 > exporting cache to registry:
------
"""


# BuildKit 0.13 building a stage whose every step is in an imported registry cache: the
# last step's result is fetched lazily while the image is unpacked, and reported as a
# plain DONE after the exporter began (it did not run: the image was exported first).
LAZY = """\
#7 [2/3] RUN apt-get update && apt-get install -y tini
#7 CACHED
#8 exporting to image
#8 exporting manifest sha256:09bfcf3d30ba14f82ad18c7d117ef87086a189cbe9e955e97ff2065ac1ca80a2 done
#8 ...
#9 [3/3] RUN groupadd --gid 1000 worker
#9 DONE 0.2s
#8 exporting to image
#8 DONE 2.6s
"""


# The same, for steps a new step (after a template edit) runs on: the cached steps below
# it are fetched and reported as completing twice, with or without a CACHED line.
FETCHED = """\
#8 [stage-0 2/7] RUN pip install six
#8 CACHED
#11 [stage-0 5/7] RUN mkdir -p /etc/stagecraft
#11 DONE 1.2s
#11 [stage-0 5/7] RUN mkdir -p /etc/stagecraft
#11 DONE 1.3s
#10 [stage-0 4/7] RUN true
#10 CACHED
#10 [stage-0 4/7] RUN true
#10 DONE 1.4s
#12 [stage-0 6/7] RUN echo edited > /etc/stagecraft/edited
#12 DONE 0.5s
#14 exporting to image
#14 DONE 0.2s
"""


# The last step's cached completion and the start of its fetch in one redraw of the plain
# printer: no CACHED line; its name before the exporter, its only DONE after it. (A CI run
# on Docker 26.1 counted one of runner B's base steps as run while B's image had runner
# A's layers byte for byte; this interleaving is the one that gives that count.)
REDRAWN = """\
#7 [2/3] RUN apt-get update && apt-get install -y tini
#7 CACHED
#8 [3/3] RUN groupadd --gid 1000 worker
#9 exporting to image
#9 exporting layers done
#9 unpacking to moby-dangling@sha256:bb94e8d45beeb3fda0555eeffb4ad04857e887f404b83edcd701eb1aff300072
#9 ...
#8 [3/3] RUN groupadd --gid 1000 worker
#8 DONE 0.2s
#9 exporting to image
#9 DONE 2.3s
"""

# A step that really ran, silent or not, completes before the exporter starts.
RAN = """\
#7 [2/3] RUN apt-get update && apt-get install -y tini
#7 0.312 Get:1 http://deb.debian.org/debian bookworm InRelease [151 kB]
#7 DONE 9.1s
#8 [3/3] RUN groupadd --gid 1000 worker
#8 DONE 0.2s
#9 exporting to image
#9 exporting layers 0.4s done
#9 DONE 0.5s
"""


# The runner benchmark's B counted the toolkit stage's one step (PaddleOCR's install) as
# run: no CACHED line printed, one DONE. What marks it fetched in any interleaving is the
# transfer of its layer under its own number (lines as in the stage log of the same
# build made again on a fresh runner).
TRANSFERRED = """\
#7 [stage-0 2/2] RUN --mount=type=secret,id=pip-ca,required=false /opt/venv/bin/pip install paddleocr==3.7.0
#7 sha256:d093cef00dc88e6a63e3cad75e3aaf9d5ad42bc03e612827e506fcd4269336bf 160.88MB / 160.88MB 1.9s done
#7 DONE 2.8s
#8 exporting to image
#8 unpacking to moby-dangling@sha256:e0d2414c65c8c1a0841c00eaf0dc4a107b53e8db7bb837350c03ea24ab03cd3f 16.5s done
#8 DONE 16.6s
"""


@pytest.mark.parametrize("text, ran, cached",
                         [(LAZY, 0, 2), (FETCHED, 1, 3), (REDRAWN, 0, 2), (RAN, 2, 0), (TRANSFERRED, 0, 1)],
                         ids=["late", "fetched", "redrawn", "ran", "transferred"])
def test_results_fetched_from_an_imported_cache_count_as_cached(text, ran, cached):
    log = BuildLog()
    for line in text.splitlines():
        log.feed(line)
    assert (log.run_executed, log.run_cached) == (ran, cached)


def test_build_log_counts_steps_and_cache_failures():
    log = BuildLog()
    for line in PROGRESS.splitlines(keepends=True):
        log.feed(line)
    assert (log.run_executed, log.run_cached) == (1, 1)
    assert log.cache_export_errors == [
        "registry: error writing layer blob: failed to do request: Head "
        "\"https://127.0.0.1:5999/v2/c/blobs/sha256:261f\": dial tcp 127.0.0.1:5999: connect: connection refused"]
    (imp,) = log.cache_import_errors  # "not found" is a cache not there yet: no error
    assert imp.startswith("127.0.0.1:5999/c:x: failed to configure registry cache importer") and "refused" in imp
