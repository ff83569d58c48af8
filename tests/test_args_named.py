"""The shared checks that name the argument, its value and the fix (``d2l_async._args``), the entry points
that use them, and the bad-input sweep's judge of such messages (``tests.bad_input.surface.classify``).

Each message is judged by the sweep's own classifier, so "clear" here means what it means in the sweep:
the argument named, and its value or what is accepted shown, in the package's words.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from d2l_async import _args
from tests.bad_input import surface


def _judged(call, name: str, bad: str, value) -> tuple[str, BaseException]:
    with pytest.raises((TypeError, ValueError)) as info:
        call()
    return surface.classify(info.value, name, bad, value)[0], info.value


# -- the shared checks -----------------------------------------------------------------------------

@pytest.mark.parametrize("bad, value", [("str", "0.5"), ("none", None), ("object", object()), ("empty_list", []),
                                        ("nan", math.nan), ("inf", [1.0, math.inf]), ("negative", [0.1, -1.0])])
def test_samples_names_the_argument_and_refuses_text_whole(bad, value):
    outcome, exc = _judged(lambda: _args.samples("sync_s", value, minimum=0, what="seconds"), "sync_s", bad, value)
    assert outcome == "clear", exc
    assert isinstance(exc, ValueError)  # NotANumber is both, so ``except ValueError`` still catches it


def test_samples_accepts_one_number_a_numpy_scalar_or_a_sequence():
    assert _args.samples("a", 2) == [2.0]
    assert _args.samples("a", np.float32(0.5)) == [0.5]
    assert _args.samples("a", (1, 2.5)) == [1.0, 2.5]
    assert _args.samples("a", np.array([3.0])) == [3.0]
    with pytest.raises(ValueError):
        _args.samples("a", [0.0], above=0)


@pytest.mark.parametrize("bad, value", [("object", object()), ("none", None), ("negative", -1), ("empty_list", []),
                                        ("empty_str", "")])
def test_path_names_the_argument(bad, value):
    outcome, exc = _judged(lambda: _args.path("folder", value), "folder", bad, value)
    assert outcome == "clear", exc


def test_path_returns_a_path():
    assert _args.path("p", "a/b.json") == Path("a/b.json")
    assert _args.path("p", Path("x")) == Path("x")


def test_function_mapping_and_span_name_the_argument():
    for call, name, bad, value in [
        (lambda: _args.function("run", 3), "run", "zero", 3),
        (lambda: _args.mapping("book", [], what="label -> seconds"), "book", "empty_list", []),
        (lambda: _args.span("window", None), "window", "none", None),
        (lambda: _args.span("window", (2.0, 1.0)), "window", "object", (2.0, 1.0)),
        (lambda: _args.span("window", (math.nan, 1.0)), "window", "nan", (math.nan, 1.0)),
    ]:
        outcome, exc = _judged(call, name, bad, value)
        assert outcome == "clear", exc
    assert _args.span("w", (0, math.inf)) == (0.0, math.inf)


def test_number_finite_false_lets_never_through_but_checks_the_type():
    assert _args.number("t", math.inf, finite=False) == math.inf
    assert math.isnan(_args.number("t", math.nan, finite=False))
    with pytest.raises(TypeError, match=r"\bt\b"):
        _args.number("t", "soon", finite=False)


# -- entry points that used to answer in Python's words --------------------------------------------

def test_entry_points_name_their_argument():
    from d2l_async.experiments import book_loop_check
    from d2l_async.experiments.asynchrony import timer_check
    from d2l_async.torch_async.lessons import increments, narrow_waits
    from d2l_async.verdict import compare, within
    from d2l_async.viz import expression_graph, style
    from d2l_async.widgets import window_trace

    trace = surface._small_trace()
    for call, name, bad, value in [
        (lambda: compare("not-a-number", [1.0]), "a", "str", "not-a-number"),
        (lambda: within([1.0], 1.0, tolerance=None), "tolerance", "none", None),
        (lambda: book_loop_check(0.5, "slow", ops=10), "async_s", "str", "slow"),
        (lambda: timer_check(None, 1.0), "naive_s", "none", None),
        (lambda: increments([1.0], [0.5], [], 10), "eager_s", "empty_list", []),
        (lambda: narrow_waits(0.1, 1.0, 0.9, None), "done_one_s", "none", None),
        (lambda: expression_graph("z = x + 1", op_time=None), "op_time", "none", None),
        (lambda: style.time_unit("soon"), "span_seconds", "str", "soon"),
        (lambda: window_trace(trace, window=0), "window", "zero", 0),
    ]:
        outcome, exc = _judged(call, name, bad, value)
        assert outcome == "clear", exc


def test_launch_checks_every_argument_before_the_functions_importability():
    from d2l_async.distributed import launch

    with pytest.raises(ValueError) as info:
        launch(lambda ctx: None, world_size=0)  # both wrong: the cheap one is named first
    assert surface.classify(info.value, "world_size", "zero", 0)[0] == "clear", info.value
    with pytest.raises(ValueError) as info:
        launch(lambda ctx: None)
    assert surface._names(str(info.value), "fn"), info.value


def test_a_missing_trace_file_names_path():
    from d2l_async.trace import TraceError, read_chrome_trace

    with pytest.raises(TraceError) as info:
        read_chrome_trace("no-such-trace.json")
    assert surface.classify(info.value, "path", "str", "no-such-trace.json")[0] == "clear", info.value


# -- the judge -------------------------------------------------------------------------------------

def test_python_words_are_never_clear_even_for_a_function_of_one_argument():
    # aliases=("",): the only argument, which any message is about
    assert surface.classify(TypeError("unhashable type: 'list'"), "key", "empty_list", [], aliases=("",))[0] == "unclear"
    assert surface.classify(TypeError("'int' object is not iterable"), "iv", "zero", 0, aliases=("",))[0] == "unclear"
    # plotly's refusal names its own 'title' property, not the reader's argument
    plotly = ValueError("Invalid value of type 'builtins.object' received for the 'title' property of layout")
    assert surface.classify(plotly, "title", "object", object())[0] == "unclear"
    # the package's own message for the same call is clear
    assert surface.classify(TypeError("key must be a str, got list []"), "key", "empty_list", [],
                            aliases=("",))[0] == "clear"


def test_a_message_saying_what_to_pass_is_clear_and_one_without_a_fix_is_not():
    fix = ValueError("model= is for backend='modelled' (got backend='engine'); drop it or pass backend='modelled'")
    assert surface.classify(fix, "model", "object", object(), others=("backend",))[0] == "clear"
    assert surface.classify(ValueError("model is wrong"), "model", "object", object())[0] == "unclear"


def test_a_refusal_of_another_arguments_stand_in_is_blocked_not_unclear():
    stand_in = "cell 1, line 2: print(a)"
    exc = ValueError(f"could not parse {stand_in!r} as Python: invalid syntax")
    assert surface.classify(exc, "title", "inf", math.inf, others=("source",), stand_ins=(stand_in,))[0] == "blocked"
    # without the stand-in quoted, the same refusal is unclear (the reader cannot tell which argument)
    vague = ValueError("could not parse the text as Python: invalid syntax")
    assert surface.classify(vague, "title", "inf", math.inf, others=("source",), stand_ins=(stand_in,))[0] == "unclear"
    # a message that names this argument is judged on its own, whatever else it quotes
    own = ValueError(f"title must be a str or None, got inf (source {stand_in!r})")
    assert surface.classify(own, "title", "inf", math.inf, others=("source",), stand_ins=(stand_in,))[0] == "clear"
