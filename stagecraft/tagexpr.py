"""Tag and alias expressions: Jinja2 over the chosen components, sandboxed and bounded.

Tag expressions come from a file that anyone may hand to the tool. They run in Jinja2's
``ImmutableSandboxedEnvironment`` (no Python internals, no mutation) and, beyond it, are
kept to work that is bounded by their own length:

- only ``{{ expression }}``, ``{% if %}`` and text: no ``for``, ``set``, ``macro``,
  ``include`` and the like, so nothing repeats;
- a short list of filters, methods and globals, none of which can be asked for a huge
  result (``center(10**9)``, ``'%999999999d' % 1``, ``lipsum(10**9)`` are refused);
- ``range`` gives at most ``MAX_RANGE`` numbers; ``*``, ``**`` and ``+`` refuse a result
  longer than ``MAX_TEXT`` characters (or an integer of more than ``MAX_INT_BITS`` bits),
  and so does every filter and method.

The bounds are checked before the work is done, so a tag expression costs at most a few
megabytes and milliseconds, whatever it says. Errors are ``InputError`` (at compile) or
any exception at render, which ``expand`` reports as bad input.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import jinja2
import jinja2.runtime
import jinja2.sandbox
from jinja2 import nodes

from .errors import InputError
from .safetext import cut

MAX_TEXT = 4096  # characters (or items) of any value a tag expression makes
MAX_RANGE = 1000
MAX_INT_BITS = 4096
MAX_SOURCE = 1024  # characters of one tag or alias expression

_FILTERS = ("abs", "capitalize", "count", "d", "default", "dictsort", "first", "float",
            "int", "items", "join", "last", "length", "list", "lower", "map", "max", "min",
            "reject", "rejectattr", "replace", "reverse", "round", "select", "selectattr",
            "sort", "string", "sum", "title", "trim", "truncate", "unique", "upper")
_METHODS = {
    str: {"split", "rsplit", "lower", "upper", "strip", "lstrip", "rstrip", "startswith",
          "endswith", "removeprefix", "removesuffix", "replace", "partition", "rpartition",
          "count", "find", "rfind", "isdigit", "isalpha", "isalnum", "title", "capitalize",
          "join"},
    dict: {"get", "keys", "values", "items"},
    list: {"index", "count"},
    tuple: {"index", "count"},
}
# Expression nodes Jinja builds only internally, or that would reach the environment.
_INTERNAL = (nodes.NSRef, nodes.ContextReference, nodes.DerivedContextReference,
             nodes.ExtensionAttribute, nodes.ImportedName, nodes.InternalName,
             nodes.EnvironmentAttribute)


class TooLarge(ValueError):
    """A value of a tag expression would exceed the bounds of this module."""


def _size(value: Any) -> int:
    if isinstance(value, (str, bytes, list, tuple, dict, set, frozenset)):
        return len(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value.bit_length() // 8
    return 0


def _bounded(value: Any) -> Any:
    if _size(value) > MAX_TEXT:
        raise TooLarge(f"a value of {_size(value)} characters (at most {MAX_TEXT})")
    return value


def _check_args(args: tuple, kwargs: dict[str, Any], value: Any = None) -> None:
    if value is not None:
        _bounded(value)
    for arg in (*args, *kwargs.values()):
        _bounded(arg)
        if isinstance(arg, int) and not isinstance(arg, bool) and abs(arg) > MAX_TEXT * 16:
            # widths, counts and lengths: nothing here needs more
            raise TooLarge(f"the argument {_clip_number(arg)} is larger than {MAX_TEXT * 16}")


def _bounded_filter(func: Any) -> Any:
    @functools.wraps(func)  # keeps Jinja's pass_context / pass_eval_context marks
    def run(*args: Any, **kwargs: Any) -> Any:
        # Jinja passes the context or eval context first when the filter asks for it,
        # then the value, then the filter's own arguments.
        plain = [a for a in args if not isinstance(a, (jinja2.runtime.Context,
                                                       jinja2.nodes.EvalContext,
                                                       jinja2.Environment))]
        _check_args(tuple(plain[1:]), kwargs, plain[0] if plain else None)
        result = func(*args, **kwargs)
        if hasattr(result, "__next__"):  # map/select/...: a lazy iterator; bound its length
            result = list(_drain(result))
        return _bounded(result)
    return run


def _drain(iterator: Any) -> list[Any]:
    out = []
    for item in iterator:
        out.append(item)
        if len(out) > MAX_TEXT:
            raise TooLarge(f"more than {MAX_TEXT} items")
    return out


def _range(*args: int) -> range:
    r = range(*args)
    if len(r) > MAX_RANGE:
        raise TooLarge(f"range of {len(r)} numbers (at most {MAX_RANGE})")
    return r


class _Environment(jinja2.sandbox.ImmutableSandboxedEnvironment):
    intercepted_binops = frozenset({"+", "*", "**", "%"})

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "**":
            if isinstance(left, int) and isinstance(right, int) and (
                    right > MAX_INT_BITS or abs(left).bit_length() * max(right, 0) > MAX_INT_BITS):
                raise TooLarge(f"{_clip_number(left)} ** {_clip_number(right)} is too large")
        elif operator == "*":
            for seq, times in ((left, right), (right, left)):
                if isinstance(times, int) and _size(seq) * max(times, 0) > MAX_TEXT:
                    raise TooLarge(f"repeating a value {times} times is too large")
            if isinstance(left, int) and isinstance(right, int) and (
                    left.bit_length() + right.bit_length() > MAX_INT_BITS):
                raise TooLarge("the product is too large")
        elif operator == "+":
            if _size(left) + _size(right) > MAX_TEXT and not isinstance(left, (int, float)):
                raise TooLarge("the sum is too long")
        elif operator == "%" and isinstance(left, (str, bytes)):
            raise jinja2.sandbox.SecurityError("string formatting with % is not supported in "
                                               "tag expressions; use ~ to join text")
        return super().call_binop(context, operator, left, right)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        if isinstance(__obj, jinja2.Undefined):
            return __obj()  # StrictUndefined: "'lipsum' is undefined"
        owner = getattr(__obj, "__self__", None)
        name = getattr(__obj, "__name__", "")
        allowed = __obj is _range or __obj is dict or (
            owner is not None and name in _METHODS.get(type(owner), ()))
        if not allowed:
            raise jinja2.sandbox.SecurityError(f"calling {_clip_name(__obj)} is not supported "
                                               "in tag expressions")
        _check_args(args, kwargs)
        return _bounded(super().call(__context, __obj, *args, **kwargs))


def _clip_number(n: Any) -> str:
    text = str(n) if not isinstance(n, int) or n.bit_length() < 200 else "a large number"
    return text[:40]


def _clip_name(obj: Any) -> str:
    return repr(getattr(obj, "__name__", type(obj).__name__))[:60]


@functools.cache
def _environment() -> _Environment:
    env = _Environment(undefined=jinja2.StrictUndefined, autoescape=False)
    env.filters = {name: _bounded_filter(env.filters[name]) for name in _FILTERS}
    env.globals = {"range": _range, "dict": dict}
    return env


def compile_expression(source: str) -> jinja2.Template:
    """A tag or alias expression, checked and compiled.

    Raises ``InputError`` (without a location: the caller adds the group) for a syntax
    error, a statement other than ``{% if %}``, a source longer than ``MAX_SOURCE``, or
    an expression Python itself warns about when compiling it (``SyntaxWarning``, e.g.
    ``1[::-1]``: "'int' object is not subscriptable"): the warning becomes that one line
    instead of a warning printed to the user's terminal.
    """
    if len(source) > MAX_SOURCE:
        raise InputError.one("", f"a tag expression of {len(source)} characters (at most "
                             f"{MAX_SOURCE})", "shorten the tag or alias expression")
    env = _environment()
    try:
        tree = env.parse(source)
        for node in tree.find_all(nodes.Node):
            if isinstance(node, _INTERNAL) or not isinstance(
                    node, (nodes.Template, nodes.Output, nodes.If, nodes.TemplateData,
                           nodes.Expr, nodes.Pair, nodes.Keyword, nodes.Operand)):
                raise InputError.one("", f"tag expression: {type(node).__name__.lower()} is not "
                                     "allowed (tags are {{ expressions }} and {% if %} only)",
                                     "write the tag as one expression")
        with warnings.catch_warnings():  # Python's own compile warnings, e.g. `1[::-1]`
            warnings.simplefilter("error", SyntaxWarning)
            return env.from_string(tree)
    except SyntaxError as exc:  # a SyntaxWarning turned error: the compiled code is wrong
        raise InputError.one("", f"tag expression: {cut(exc.msg or str(exc))}",
                             "fix the tag or aliases expression") from None
    except jinja2.TemplateSyntaxError as exc:
        raise InputError.one("", f"tag expression: syntax error: {exc.message}",
                             "fix the tag or aliases expression") from None
    except (RecursionError, MemoryError):
        raise InputError.one("", "tag expression nested too deeply",
                             "fix the tag or aliases expression") from None
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - Jinja folds constants while compiling: their errors
        raise InputError.one("", f"tag expression: {type(exc).__name__}: {cut(str(exc))}",
                             "fix the tag or aliases expression") from None


def render(template: jinja2.Template, context: dict[str, Any]) -> str:
    """The expression's text for one combination, stripped. Raises what the expression
    raises (an undefined name, a type error, ``TooLarge``, a ``SecurityError``)."""
    return _bounded(template.render(**context)).strip()
