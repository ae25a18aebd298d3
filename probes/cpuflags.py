"""CPU flags and x86-64 micro-architecture levels: pure data and functions.

Levels from the x86-64 psABI (System V AMD64 ABI, "Micro-Architecture Levels" table,
https://gitlab.com/x86-psABIs/x86-64-ABI), written as Linux /proc/cpuinfo flag names:
SSE3 is ``pni``, LAHF-SAHF is ``lahf_lm``, CMPXCHG16B is ``cx16``, LZCNT is ``abm``,
and OSXSAVE (not a cpuinfo flag) is stood for by ``xsave`` (the kernel clears ``avx``
when the OS has not enabled XSAVE). glibc checks the same sets (sysdeps/x86/get-isa-level.h).
"""
from __future__ import annotations

TYPE_CHECKING = False  # typing costs ms at start-up; only type checkers import it
if TYPE_CHECKING:
    from collections.abc import Iterable

LEVELS: dict[int, frozenset[str]] = {
    1: frozenset({"lm", "cmov", "cx8", "fpu", "fxsr", "mmx", "sse", "sse2"}),
    2: frozenset({"cx16", "lahf_lm", "popcnt", "pni", "sse4_1", "sse4_2", "ssse3"}),
    3: frozenset({"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"}),
    4: frozenset({"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}),
}

# Spellings people use in matrix files -> cpuinfo names.
ALIASES = {"sse3": "pni", "lzcnt": "abm", "avx512": "avx512f", "cmpxchg16b": "cx16",
           "lahf": "lahf_lm", "sse4.1": "sse4_1", "sse4.2": "sse4_2", "neon": "asimd"}


def normalise(flag: str) -> str:
    """A flag as /proc/cpuinfo spells it (lower case, aliases resolved)."""
    f = flag.strip().lower()
    return ALIASES.get(f, f)


def isa_level(flags: Iterable[str]) -> int:
    """Highest x86-64 level (1..4) whose flags, and all lower levels' flags, are present;
    0 when even x86-64-v1 is incomplete."""
    have = set(flags)
    level = 0
    for n in (1, 2, 3, 4):
        if not LEVELS[n] <= have:
            break
        level = n
    return level


def parse_level(name: str) -> int | None:
    """``"x86-64-v3"`` / ``"v3"`` / ``"3"`` -> 3; None when not a level name."""
    s = name.strip().lower().removeprefix("x86-64-").removeprefix("x86_64-").removeprefix("v")
    return int(s) if s.isdecimal() and 1 <= int(s) <= 4 else None


def missing_for_level(flags: Iterable[str], level: int) -> list[str]:
    """Flags missing for x86-64-v<level>, sorted."""
    have = set(flags)
    need: set[str] = set()
    for n in range(1, level + 1):
        need |= LEVELS[n]
    return sorted(need - have)
