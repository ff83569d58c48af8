from __future__ import annotations

import dataclasses
import inspect

import d2l_async.experiments as E



def test_runners_take_keyword_only_options():
    positional_ok = {"run_expression": {"expression"}, "sample_queue_summary": {"name"},
                     "export_perfetto": {"trace", "path"}, "sample_summaries": {"names"},
                     "compute_comm_overlap": {"trace"}, "resolve_backend": {"backend"}, "book_number": {"key"},
                     "check_expression": {"expression"}, "size_for_device": {"times"}, "workload": {"key"},
                     # the check functions a notebook cell calls on its own data: the data comes first
                     "ran_ahead_check": {"trace", "machine"}, "frontend_wait_check": {"trace", "reason", "machine"},
                     "report_check": {"trace"}, "book_loop_check": {"sync_s", "async_s"}, "hta_check": {"summary"},
                     "plan_devices": {"facts"}}
    for name in E.__all__:
        fn = getattr(E, name)
        if not inspect.isfunction(fn):
            continue
        params = inspect.signature(fn).parameters.values()
        positional = {p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)}
        assert positional <= positional_ok.get(name, set()), (name, positional)


def test_results_are_frozen_and_say_where_they_ran():
    for name in E.__all__:
        cls = getattr(E, name)
        if inspect.isclass(cls) and dataclasses.is_dataclass(cls):
            assert cls.__dataclass_params__.frozen, name
            fields = {f.name for f in dataclasses.fields(cls)}
            if name.endswith("Result"):
                assert {"device", "virtual"} <= fields or name == "SampleQueueSummary", name
