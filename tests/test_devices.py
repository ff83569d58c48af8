from __future__ import annotations

import pytest
import torch

from d2l_async.devices import describe_machine, num_gpus, try_all_gpus, try_gpu


def test_try_all_gpus_is_never_empty():
    devices = try_all_gpus()
    assert devices, "the book's v1.0 returned [] here"
    assert len(devices) == max(1, num_gpus())
    if num_gpus() == 0:
        assert devices == [torch.device("cpu")]


def test_try_gpu_falls_back_to_cpu():
    assert try_gpu(num_gpus()) == torch.device("cpu")
    if num_gpus():
        assert try_gpu(0) == torch.device("cuda:0")


@pytest.mark.parametrize("bad", [-1, 1.5, "0", True])
def test_try_gpu_rejects_bad_index(bad):
    with pytest.raises(ValueError):
        try_gpu(bad)


def test_describe_machine_names_the_hardware():
    text = describe_machine()
    assert "\n" not in text
    if num_gpus():
        assert torch.cuda.get_device_name(0) in text
    else:
        assert text.startswith("CPU only")
