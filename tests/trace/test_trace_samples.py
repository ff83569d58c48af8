"""The sample traces ship inside the package, with their licence."""

from __future__ import annotations

from pathlib import Path

import pytest

import d2l_async.data as data


def test_samples_are_files_inside_the_package():
    pkg = Path(data.__file__).parent
    assert (pkg / "LICENSE-HolisticTraceAnalysis").is_file()
    assert "HolisticTraceAnalysis" in (pkg / "README.md").read_text()
    for name in data.SAMPLES:
        path = data.sample_path(name)
        assert path.parent == pkg and path.name == f"{name}.json.gz"
        assert "/work/shared" not in str(path)


def test_required_samples_present():
    assert {"a100_simple_add", "a100_alexnet", "a100_training_step", "v100_training_step", "cpu_only",
            "a100_cuda_event_sync"} <= set(data.SAMPLES)


@pytest.mark.parametrize("bad", ["resnet", "", 3, None])
def test_unknown_name_lists_the_choices(bad):
    with pytest.raises(ValueError) as info:
        data.sample_path(bad)
    assert "a100_simple_add" in str(info.value) and "v100_training_step" in str(info.value)


def test_suffix_is_optional():
    assert data.sample_path("cpu_only.json.gz") == data.sample_path("cpu_only")
    assert len(data.load_sample("cpu_only")) > 0
