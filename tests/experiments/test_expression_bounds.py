"""The expression checker bounds constants before anything is evaluated."""

from __future__ import annotations

import subprocess
import sys

import pytest

from d2l_async.experiments.dependency import CONSTANT_LIMIT, check_expression

HUGE = ["9 ** 9 ** 9 * x", "x ** (9 ** 9 ** 9)", "2 ** 60 * x", "((2 ** 10) ** 10) ** 10 + x",
        "1" + "0" * 400 + " * x", "-(10 ** 16) + y"]


def test_a_tower_of_powers_is_refused_at_once_in_a_fresh_process():
    # in a subprocess with a deadline: on the unfixed checker it computed a 370-million-digit int
    code = ("from d2l_async.experiments.dependency import run_expression\n"
            "try:\n    run_expression('9 ** 9 ** 9 * x')\nexcept ValueError as e:\n    print('refused:', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "refused:" in out.stdout and "too large" in out.stdout


@pytest.mark.parametrize("expression", HUGE)
def test_huge_constants_are_refused_with_the_limit_named(expression):
    with pytest.raises(ValueError, match="too large") as info:
        check_expression(expression)
    assert f"{CONSTANT_LIMIT:g}" in str(info.value)


@pytest.mark.parametrize("expression", ["x * y + 2", "x ** 2 + 3 * 4", "2 ** 40 * x", "(-8) ** 0.5 * x",
                                        "x ** 1000000", "2 ** -2000 * w", "exp(x) * 1e14"])
def test_ordinary_constants_pass(expression):
    assert check_expression(expression) is not None
