"""The framework's own spelling of the chosen device: ``STAGECRAFT_DEVICE_STRING``.

Each framework names devices its own way, so the spelling is data in matrix.yaml
(``components.framework.<name>.device_strings``: device family -> template), e.g. for
PaddlePaddle (``paddle.device.set_device``: "cpu, gpu, xpu, npu, mlu, gpu:x, xpu:x, npu:x,
mlu:x, where x is the index of the GPUs, XPUs, NPUs or MLUs"; ROCm builds use ``gpu:x``):

    {cpu: cpu, nvidia: "gpu:{index}", amd: "gpu:{index}", xpu: "xpu:{index}",
     npu: "npu:{index}", mlu: "mlu:{index}"}

and for PyTorch ``{cpu: cpu, nvidia: "cuda:{index}", amd: "cuda:{index}", xpu: "xpu:{index}"}``.
Each family's record (probes.families ``device_string``) holds PaddlePaddle's spelling; a
unit test holds matrix.yaml's PaddlePaddle ``device_strings`` equal to them, and the
matrix schema's family names come from the records (stagecraft.familyschema).

Template fields (Python ``str.format`` names, nothing else):
- ``index``: the chosen device as the framework numbers it. Runtimes renumber the visible
  devices from 0 (CUDA_VISIBLE_DEVICES and its siblings), so this is 0: the first one.
- ``count``: how many devices of the chosen family the process may use (1 for cpu).
A template naming any other field, a positional ``{}``, a conversion (``!r``) or a format
spec is refused when the matrix is loaded (``problems``), so rendering at start-up never
fails on a template that passed.
"""
from __future__ import annotations

FIELDS = ("index", "count")
LIMIT = 64  # characters of a template


def problems(template: str) -> list[str]:
    """What is wrong with one template, each a short phrase; ``[]`` when it is usable.
    Never raises."""
    import string

    if not isinstance(template, str) or not template:
        return ["must be a non-empty string"]
    if len(template) > LIMIT:
        return [f"is longer than {LIMIT} characters"]
    out = []
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as exc:
        return [f"is not a template ({exc}); write {{{{ and }}}} for literal braces"]
    for _, field, spec, conv in parts:
        if field is None:
            continue
        if field not in FIELDS:
            out.append(f"names unknown field {{{field}}}" if field else "has a positional field {}")
        elif spec or conv:
            out.append(f"field {{{field}}} takes no conversion or format spec")
    return [f"{p}; fields: {', '.join(FIELDS)}" for p in out]


def render(templates: dict[str, str] | None, family: str, count: int) -> str | None:
    """The device string for ``family`` (``gpu:0``), or None when the image declares no
    template for it. ``count``: devices of that family the process may use."""
    if not templates or family not in templates:
        return None
    try:  # checked by problems() at load time; an image.json edited by hand stays harmless
        return str(templates[family]).format(index=0, count=max(int(count), 1))[:LIMIT]
    except (KeyError, IndexError, ValueError, AttributeError):
        return None
