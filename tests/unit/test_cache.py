"""Cache options per stage key: parsing and what each BuildKit path gets. Pure."""

from __future__ import annotations

import pytest

from stagecraft import cache
from stagecraft.errors import InputError

KEY = "ab" * 32


def test_local_with_buildx_scopes_per_stage_key():
    spec = cache.parse("type=local,dir=/c", "--cache-to")
    got = cache.stage_args(True, spec, spec, "runtime", KEY)
    assert got.args == (f"--cache-from=type=local,src=/c/runtime-{KEY[:24]}",
                        f"--cache-to=type=local,dest=/c/runtime-{KEY[:24]},mode=max")
    assert got.push_ref == "" and got.build_args == ()


def test_registry_with_buildx():
    spec = cache.parse("type=registry,ref=reg:5000/cache", "--cache-from")
    got = cache.stage_args(True, spec, None, "cuda", KEY)
    assert got.args == (f"--cache-from=type=registry,ref=reg:5000/cache:cuda-{KEY[:24]}",)


def test_registry_with_classic_client_uses_inline_cache_and_a_push():
    spec = cache.parse("type=registry,ref=reg:5000/cache", "--cache-to")
    got = cache.stage_args(False, spec, spec, "base", KEY)
    assert got.args == (f"--cache-from=reg:5000/cache:base-{KEY[:24]}",)
    assert got.build_args == (("BUILDKIT_INLINE_CACHE", "1"),)
    assert got.push_ref == f"reg:5000/cache:base-{KEY[:24]}"


def test_two_stages_never_share_a_scope():
    spec = cache.parse("type=local,dir=/c", "--cache-to")
    a = cache.stage_args(True, None, spec, "runtime", "1" * 64).args
    b = cache.stage_args(True, None, spec, "runtime", "2" * 64).args
    assert a != b


@pytest.mark.parametrize("text", ["type=s3,bucket=x", "type=local", "dir=/x", "type=registry,ref=r/x:tag",
                                  "type=local,dir=/x,extra=1"])
def test_bad_specs_are_one_line_errors(text):
    with pytest.raises(InputError, match=r"--cache-to .*: (not a cache location|ref takes a repository)"):
        cache.parse(text, "--cache-to")


def test_local_cache_without_buildx_is_refused():
    spec = cache.parse("type=local,dir=/c", "--cache-to")
    with pytest.raises(InputError, match="a local cache needs buildx"):
        cache.stage_args(False, None, spec, "base", KEY)
