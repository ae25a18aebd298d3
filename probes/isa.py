"""CPU ISA levels as the math libraries name them, from /proc/cpuinfo flags; and the caps
a lower CPU kernel set may put on them. Pure data and functions.

Frameworks run their CPU kernels through oneDNN and oneMKL, which pick their own code
path from CPUID at run time. A cap (``ONEDNN_MAX_CPU_ISA``, ``MKL_ENABLE_INSTRUCTIONS``)
can only take paths away: capped at ``AVX512_CORE`` on a CPU with AVX-512 VNNI and BF16,
oneDNN runs bfloat16 convolutions on its emulated ``jit_bf16:avx512_core`` path instead of
``avx512_core_bf16`` (measured 5x slower here, BENCHMARKS.md). So:

- the top CPU kernel set of an image sets no cap: the libraries dispatch on their own;
- a lower set names an ISA class (``isa_cap``: ``avx``, ``avx2``, ``avx512``). When the
  host's class is above it (the user forced the lower set, e.g. to keep AVX-512 off a
  fleet), ``caps`` names the *exact highest* level of each library that the host has
  within that class (AVX2_VNNI on Sapphire Rapids, not AVX2); when the host is in or below
  that class, nothing is set, because the library's own choice is already within it.

Sources:
- oneDNN "CPU Dispatcher Control" (https://oneapi-src.github.io/oneDNN/dev_guide_cpu_dispatcher_control.html)
  and ``dnnl_cpu_isa_t`` (values SSE41 ... AVX10_1_512_AMX_FP16; AVX512_CORE_FP16 and
  AVX512_CORE_AMX(_FP16) are aliases of the AVX10_1_512 names; a value the library does
  not know leaves it uncapped). The conditions per level are oneDNN's ``mayiuse``
  (src/cpu/x64/cpu_isa_traits.hpp): AVX512_CORE needs AVX512F, BW, VL and DQ; VNNI adds
  AVX512_VNNI; BF16 adds AVX512_BF16; AVX10_1_512 adds AVX512_FP16; AMX adds AMX_TILE,
  AMX_INT8 and AMX_BF16; AMX_FP16 adds AMX_FP16; AVX2_VNNI is AVX2 and AVX_VNNI;
  AVX2_VNNI_2 adds AVX-VNNI-INT8 and AVX-NE-CONVERT. The cap is a bit mask: AVX512_CORE
  (0x27) does not contain AVX2_VNNI (0xf), hence caps are named per class.
- oneMKL Developer Guide, "Instruction Set Specific Dispatching on Intel Architectures"
  (values SSE4_2, AVX, AVX2, AVX2_E1, AVX512, AVX512_E1 to AVX512_E4). It states the
  variable has no effect on non-Intel processors, and that a level the processor lacks
  makes MKL use its *default* (highest) path: so an MKL cap must name a level the host has.
- Linux /proc/cpuinfo flag names (arch/x86/include/asm/cpufeatures.h). Linux shows no
  flag for CPUID.(7,1):EDX (AVX-VNNI-INT8, AVX-NE-CONVERT): AVX2_VNNI_2 is never named
  from cpuinfo; hosts that have it are AVX2-class or above, where no cap is set anyway.
- aarch64: oneDNN names ASIMD and SVE_128/256/512 by the exact SVE vector length, which
  /proc/cpuinfo does not show; it is taken from the CPU part for known cores (Arm's
  Neoverse V1 0xd40: 256 bits; Neoverse V2 0xd4f and N2 0xd49: 128 bits).
"""
from __future__ import annotations

TYPE_CHECKING = False  # typing costs ms at start-up; only type checkers import it
if TYPE_CHECKING:
    from collections.abc import Iterable

# Classes a kernel set may cap at, lowest first; "amx" exists only as a host class.
CLASSES = ("sse", "avx", "avx2", "avx512", "amx")
CAP_CLASSES = ("avx", "avx2", "avx512")

_AVX512_CORE = ("avx512f", "avx512bw", "avx512vl", "avx512dq")
_AMX = ("amx_tile", "amx_int8", "amx_bf16")

# (oneDNN ONEDNN_MAX_CPU_ISA value, its class, cpuinfo flags it needs): ascending.
ONEDNN_X64: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("SSE41", "sse", ("sse4_1",)),
    ("AVX", "avx", ("avx",)),
    ("AVX2", "avx2", ("avx2",)),
    ("AVX2_VNNI", "avx2", ("avx2", "avx_vnni")),
    ("AVX2_VNNI_2", "avx2", ("avx2", "avx_vnni", "avx_vnni_int8", "avx_ne_convert")),
    ("AVX512_CORE", "avx512", _AVX512_CORE),
    ("AVX512_CORE_VNNI", "avx512", (*_AVX512_CORE, "avx512_vnni")),
    ("AVX512_CORE_BF16", "avx512", (*_AVX512_CORE, "avx512_vnni", "avx512_bf16")),
    ("AVX10_1_512", "avx512", (*_AVX512_CORE, "avx512_vnni", "avx512_bf16", "avx512_fp16")),
    ("AVX10_1_512_AMX", "amx", (*_AVX512_CORE, "avx512_vnni", "avx512_bf16", "avx512_fp16", *_AMX)),
    ("AVX10_1_512_AMX_FP16", "amx", (*_AVX512_CORE, "avx512_vnni", "avx512_bf16", "avx512_fp16",
                                     *_AMX, "amx_fp16")),
)

# (MKL_ENABLE_INSTRUCTIONS value, its class, cpuinfo flags it needs): ascending; Intel only.
MKL_X64: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("SSE4_2", "sse", ("sse4_2",)),
    ("AVX", "avx", ("avx",)),
    ("AVX2", "avx2", ("avx2", "fma")),
    ("AVX2_E1", "avx2", ("avx2", "fma", "avx_vnni")),
    ("AVX512", "avx512", (*_AVX512_CORE, "avx512cd")),
    ("AVX512_E1", "avx512", (*_AVX512_CORE, "avx512cd", "avx512_vnni")),
    ("AVX512_E2", "avx512", (*_AVX512_CORE, "avx512cd", "avx512_vnni", "vaes", "vpclmulqdq")),
    ("AVX512_E3", "avx512", (*_AVX512_CORE, "avx512cd", "avx512_vnni", "avx512_bf16")),
    ("AVX512_E4", "amx", (*_AVX512_CORE, "avx512cd", "avx512_vnni", "avx512_bf16", "avx512_fp16", *_AMX)),
)

# Arm CPU parts (``CPU part`` in /proc/cpuinfo) -> SVE vector length in bits.
SVE_BITS = {"0xd40": 256, "0xd49": 128, "0xd4f": 128}

ONEDNN_VAR = "ONEDNN_MAX_CPU_ISA"
MKL_VAR = "MKL_ENABLE_INSTRUCTIONS"
# Variables a kernel set may not set through ``env`` (they are derived from ``isa_cap``).
CAP_VARS = (ONEDNN_VAR, "DNNL_MAX_CPU_ISA", MKL_VAR)


def _rank(cls: str) -> int:
    return CLASSES.index(cls)


def _levels(table: tuple[tuple[str, str, tuple[str, ...]], ...], flags: Iterable[str],
            within: str | None = None) -> list[str]:
    have = set(flags)
    return [name for name, cls, need in table
            if set(need) <= have and (within is None or _rank(cls) <= _rank(within))]


def host_class(flags: Iterable[str], arch: str = "x86_64") -> str | None:
    """The host's ISA class (one of CLASSES) from cpuinfo flags; None off x86."""
    if arch not in ("x86_64", "x86"):
        return None
    have = set(flags)
    cls = None
    for _, c, need in ONEDNN_X64:
        if set(need) <= have:
            cls = c
    return cls


def _cpu_part(model: str) -> str:
    """The first ``part 0x<hex>`` of ``model`` as ``0x<hex>`` (lower case); "" when none."""
    text = model.lower()
    at = text.find("part 0x")
    while at >= 0:
        end = at + 7
        while end < len(text) and text[end] in "0123456789abcdef":
            end += 1
        if end > at + 7:
            return text[at + 5:end]
        at = text.find("part 0x", at + 1)
    return ""


def onednn_level(flags: Iterable[str], arch: str = "x86_64", model: str = "",
                 within: str | None = None) -> str | None:
    """The highest ``ONEDNN_MAX_CPU_ISA`` value the host supports (within class ``within``
    when given), e.g. ``"AVX512_CORE_BF16"`` on Zen 4, ``"AVX10_1_512_AMX"`` on Sapphire
    Rapids; on aarch64 ``"SVE_256"``/``"SVE_128"``/``"ASIMD"`` (SVE length from the CPU
    part in ``model``, ``"part 0xd40"``). None when nothing is known."""
    if arch == "aarch64":
        have = set(flags)
        if "sve" in have:
            bits = SVE_BITS.get(_cpu_part(model))
            if bits:
                return f"SVE_{bits}"
        return "ASIMD" if "asimd" in have else None
    found = _levels(ONEDNN_X64, flags, within)
    return found[-1] if found else None


def mkl_level(flags: Iterable[str], vendor: str, arch: str = "x86_64",
              within: str | None = None) -> str | None:
    """The highest ``MKL_ENABLE_INSTRUCTIONS`` value the host supports (within ``within``);
    None on non-Intel CPUs (the variable has no effect there) and off x86."""
    if arch not in ("x86_64", "x86") or vendor != "GenuineIntel":
        return None
    found = _levels(MKL_X64, flags, within)
    return found[-1] if found else None


def caps(isa_cap: str | None, flags: Iterable[str], vendor: str,
         arch: str = "x86_64") -> tuple[dict[str, str], str]:
    """(variables to set, one-line note) for a chosen set's ``isa_cap`` on this host.

    No cap (``{}``) when ``isa_cap`` is None, off x86, or when the host's class is at or
    below ``isa_cap``: the libraries' own dispatch is then already within the class, and
    naming a level could only take paths away. Otherwise each library is capped at the
    highest level the host has within the class. Raises ValueError for an unknown class."""
    flags = frozenset(flags)
    if isa_cap is None:
        return {}, ""
    if isa_cap not in CAP_CLASSES:
        raise ValueError(f"unknown isa_cap {isa_cap!r}; expected one of {', '.join(CAP_CLASSES)}")
    host = host_class(flags, arch)
    if host is None or _rank(host) <= _rank(isa_cap):
        return {}, ""
    out: dict[str, str] = {}
    dnn = onednn_level(flags, arch, within=isa_cap)
    if dnn:
        out[ONEDNN_VAR] = dnn
    mkl = mkl_level(flags, vendor, arch, within=isa_cap)
    if mkl:
        out[MKL_VAR] = mkl
    note = (f"CPU kernels capped at {isa_cap} on this {host}-class CPU: "
            + ", ".join(f"{k}={v}" for k, v in out.items()))
    if vendor != "GenuineIntel":
        note += f" (MKL cannot be capped on a non-Intel CPU: {MKL_VAR} has no effect there)"
    return out, note


def describe(flags: Iterable[str], vendor: str, arch: str, model: str = "") -> str:
    """One line for the report: what the libraries dispatch to on their own here, e.g.
    ``oneDNN AVX512_CORE_BF16; MKL: non-Intel CPU (own dispatch)``."""
    flags = frozenset(flags)
    dnn = onednn_level(flags, arch, model) or "unknown"
    if arch not in ("x86_64", "x86"):
        return f"oneDNN {dnn}"
    mkl = mkl_level(flags, vendor, arch)
    return f"oneDNN {dnn}; MKL {mkl}" if mkl else f"oneDNN {dnn}; MKL: non-Intel CPU (own dispatch)"
