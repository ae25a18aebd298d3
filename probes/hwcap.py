"""Arm CPU features from the ELF auxiliary vector (AT_HWCAP, AT_HWCAP2): pure data and
functions, plus ``read_auxv`` for this process.

Why: under user-mode emulation (qemu-user running an arm64 image on an x86-64 host),
/proc/cpuinfo describes the *host's* CPU (AMD EPYC flags, no `Features` line), while the
process runs on the CPU qemu emulates; qemu serves the guest's own /proc/self/auxv, whose
HWCAP bits are the emulated CPU's features. The kernel's `Features` line of /proc/cpuinfo
is made from the same bits, with the same names, so a kernel set written against
`Features` (asimd, sve, bf16, i8mm, ...) holds either way.

Bit numbers: Linux arch/arm64/include/uapi/asm/hwcap.h (HWCAP_FP = 1 << 0, ...;
HWCAP2_DCPODP = 1 << 0, ...), documented in Documentation/arch/arm64/elf_hwcaps.rst.
AT_HWCAP = 16, AT_HWCAP2 = 26 (include/uapi/linux/auxvec.h).
"""
from __future__ import annotations

import struct

AT_HWCAP = 16
AT_HWCAP2 = 26
HWCAP = ("fp", "asimd", "evtstrm", "aes", "pmull", "sha1", "sha2", "crc32", "atomics", "fphp",
         "asimdhp", "cpuid", "asimdrdm", "jscvt", "fcma", "lrcpc", "dcpop", "sha3", "sm3", "sm4",
         "asimddp", "sha512", "sve", "asimdfhm", "dit", "uscat", "ilrcpc", "flagm", "ssbs", "sb",
         "paca", "pacg")
HWCAP2 = ("dcpodp", "sve2", "sveaes", "svepmull", "svebitperm", "svesha3", "svesm4", "flagm2",
          "frint", "svei8mm", "svef32mm", "svef64mm", "svebf16", "i8mm", "bf16", "dgh", "rng",
          "bti", "mte", "ecv", "afp", "rpres", "mte3", "sme", "smei16i64", "smef64f64",
          "smei8i32", "smef16f32", "smeb16f32", "smef32f32", "smefa64", "wfxt")


def parse_auxv(data: bytes) -> dict[int, int]:
    """The (type -> value) pairs of a 64-bit little-endian auxiliary vector."""
    usable = len(data) - len(data) % 16
    return dict(struct.iter_unpack("<QQ", data[:usable]))


def aarch64_features(hwcap: int, hwcap2: int) -> frozenset[str]:
    """Feature names (as /proc/cpuinfo's `Features` spells them) of the set bits."""
    names = {n for i, n in enumerate(HWCAP) if hwcap >> i & 1}
    names |= {n for i, n in enumerate(HWCAP2) if hwcap2 >> i & 1}
    return frozenset(names)


def read_auxv(path: str = "/proc/self/auxv") -> bytes | None:
    """This process's auxiliary vector (at most 64 KiB; a real one is a few hundred
    bytes), or None when it cannot be read or is not a regular file (probes.fsread)."""
    from probes import fsread

    return fsread.read_file(path, fsread.SMALL)
