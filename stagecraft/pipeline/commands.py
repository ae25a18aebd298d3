"""The run of each command, for ``stagecraft.cli``: ``NAME(args) -> exit status`` makes
the run context from the parsed command line once (``RunContext.from_args``) and hands
it to the pipeline. Each phase's module is imported when its command runs, so
``build.py list`` does not load the Docker and registry clients."""

from __future__ import annotations

import argparse

from .context import RunContext


def build(args: argparse.Namespace) -> int:
    """``build`` (``pipeline.buildrun.build``)."""
    from . import buildrun

    return buildrun.build(RunContext.from_args(args))


def list_tags(args: argparse.Namespace) -> int:
    """``list`` (``pipeline.views.list_tags``)."""
    from . import views

    return views.list_tags(RunContext.from_args(args))


def render(args: argparse.Namespace) -> int:
    """``render`` (``pipeline.views.render``)."""
    from . import views

    return views.render(RunContext.from_args(args))


def plan(args: argparse.Namespace) -> int:
    """``plan`` (``pipeline.views.plan``)."""
    from . import views

    return views.plan(RunContext.from_args(args))


def ci_matrix(args: argparse.Namespace) -> int:
    """``matrix`` (``pipeline.exports.ci_jobs``)."""
    from . import exports

    return exports.ci_jobs(RunContext.from_args(args))


def bake(args: argparse.Namespace) -> int:
    """``bake`` (``pipeline.exports.bake``)."""
    from . import exports

    return exports.bake(RunContext.from_args(args))


def probe(args: argparse.Namespace) -> int:
    """``probe`` (``pipeline.views.probe``)."""
    from . import views

    return views.probe(RunContext.from_args(args))


def catalog(args: argparse.Namespace) -> int:
    """``catalog`` (``pipeline.views.catalog``)."""
    from . import views

    return views.catalog(RunContext.from_args(args))


def run_tests(args: argparse.Namespace) -> int:
    """``test`` (``pipeline.testrun.run_tests``)."""
    from . import testrun

    return testrun.run_tests(RunContext.from_args(args))


def push(args: argparse.Namespace) -> int:
    """``push`` (``pipeline.pushrun.push_tested``)."""
    from . import pushrun

    return pushrun.push_tested(RunContext.from_args(args))


def verify(args: argparse.Namespace) -> int:
    """``verify`` (``pipeline.signrun.verify``)."""
    from . import signrun

    return signrun.verify(RunContext.from_args(args))


def verify_index(args: argparse.Namespace) -> int:
    """``verify-index`` (``pipeline.pushrun.verify_pushed_index``)."""
    from . import pushrun

    return pushrun.verify_pushed_index(RunContext.from_args(args))


def verify_reproducible(args: argparse.Namespace) -> int:
    """``verify-reproducible`` (``pipeline.buildrun.verify_reproducible``)."""
    from . import buildrun

    return buildrun.verify_reproducible(RunContext.from_args(args))


def prune(args: argparse.Namespace) -> int:
    """``prune`` (``pipeline.upkeep.prune_unused``)."""
    from . import upkeep

    return upkeep.prune_unused(RunContext.from_args(args))


def freeze(args: argparse.Namespace) -> int:
    """``freeze`` (``pipeline.upkeep.freeze``)."""
    from . import upkeep

    return upkeep.freeze(RunContext.from_args(args))


def lock(args: argparse.Namespace) -> int:
    """``lock`` (``pipeline.upkeep.lock``)."""
    from . import upkeep

    return upkeep.lock(RunContext.from_args(args))


def doctor(args: argparse.Namespace) -> int:
    """``doctor`` (``pipeline.upkeep.doctor``)."""
    from . import upkeep

    return upkeep.doctor(RunContext.from_args(args))
