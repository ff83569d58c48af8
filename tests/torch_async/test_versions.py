"""Torch versions, told truly: the floor is checked when the package is
imported, before any private API is touched -- an old torch gets UnsupportedTorchError naming
the versions that work, not an AttributeError.  Old torch wheels are multi-GB CUDA builds, so the
old torch here is a stand-in module (a fresh interpreter that finds it first)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from d2l_async.torch_async import _compat

FAKE_TORCH = '''
__version__ = "{version}"
class _C:                      # torch 2.1's _C: no TensorBase, no dispatch key guards
    pass
class Tensor:
    pass
'''


@pytest.mark.parametrize("version", ["2.1.2", "2.2.2", "1.13.1"])
def test_importing_on_an_old_torch_raises_unsupported_torch_error(tmp_path, version):
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(FAKE_TORCH.format(version=version))
    code = textwrap.dedent("""
        import sys
        try:
            import d2l_async.torch_async
        except Exception as exc:
            print(type(exc).__name__, "|", exc)
        else:
            print("imported")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-2000:]
    name, _, message = out.stdout.partition(" | ")
    assert name == "UnsupportedTorchError", out.stdout
    floor = ".".join(map(str, _compat.MIN_VERSION))
    assert f"needs torch >= {floor}" in message and f"this is torch {version}" in message
    assert all(v in message for v in _compat.TESTED_VERSIONS)


def test_a_new_torch_without_a_private_api_is_refused_by_name(monkeypatch):
    import torch
    monkeypatch.setattr(_compat, "_CHECKED", [])
    monkeypatch.delattr(torch._C, "_ForceDispatchKeyGuard")
    with pytest.raises(_compat.UnsupportedTorchError, match="_ForceDispatchKeyGuard"):
        _compat.check_torch()


def test_the_constants_are_one_source_of_truth():
    import d2l_async.torch_async as ta
    assert ta.MIN_VERSION == _compat.MIN_VERSION == (2, 3)
    assert ta.TESTED_VERSIONS is _compat.TESTED_VERSIONS
    assert all(_compat._version(v) >= _compat.MIN_VERSION for v in _compat.TESTED_VERSIONS)


class _NoMetaKernel:
    """An op as torch 2.3 has ``_foreach_addcdiv_.ScalarList``: a schema, and no meta kernel."""

    def __init__(self, overload):
        self._schema = overload._schema

    def __call__(self, *args, **kwargs):
        raise NotImplementedError("attempted to run this operator with Meta tensors")


def test_an_in_place_op_without_a_meta_kernel_still_gets_its_metadata():
    """torch 2.3 lacks _foreach_addcdiv_.ScalarList's meta kernel (AdamW(foreach=True) calls it each
    step): an op that returns nothing and writes in place needs none, so it is queued, not run
    synchronously; an op that returns tensors still raises (and runs synchronously)."""
    import torch

    from d2l_async.torch_async._meta import compute_specs, meta_of
    ps, grads = [torch.ones(3), torch.ones(2, 2)], [torch.ones(3), torch.ones(2, 2)]
    leaves = [*ps, *grads, *grads]
    func = _NoMetaKernel(torch.ops.aten._foreach_addcdiv_.ScalarList)
    structure, specs, metas = compute_specs(func, (ps, grads, grads, [0.1, 0.2]), {}, leaves,
                                            [meta_of(t) for t in leaves], False)
    assert (structure, specs) == (3, ())
    assert [tuple(m.shape) for m in metas] == [(3,), (2, 2)] * 3
    with pytest.raises(NotImplementedError):
        compute_specs(_NoMetaKernel(torch.ops.aten.add.Tensor), (ps[0], grads[0]), {}, [ps[0], grads[0]],
                      [meta_of(ps[0]), meta_of(grads[0])], False)
