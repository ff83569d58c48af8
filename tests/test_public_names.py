"""The public surface, pinned: each module's ``__all__`` as decided.

A name added to (or dropped from) a module's ``__all__`` fails this test until it is added here too:
growing the API is a decision, taken in a review of this file, not a side effect.  362 names in
23 modules.
"""

from __future__ import annotations

import importlib

import pytest

import d2l_async

#: public modules below a subpackage: the engine's interface for a runtime built on it (torch_async), the
#: engine in one file that notebook 2 shows with the grader of its exercise, plain PyTorch's lesson checks,
#: and the distributed dashboard
EXTRA = ["d2l_async.engine.core", "d2l_async.engine.exercise", "d2l_async.engine.minimal",
         "d2l_async.torch_async.lessons", "d2l_async.widgets.distributed"]

SURFACE = {'d2l_async': ['Benchmark', 'Measurement', 'NaiveEngine', 'ThreadedEngine', 'Trace', '__version__', 'asynchronous',
               'describe_machine', 'measure', 'num_gpus', 'quick_mode', 'synchronize', 'try_all_gpus', 'try_gpu'],
 'd2l_async.analysis': ['BLOCKED_COLUMNS', 'BUSY_COLUMNS', 'Overlap', 'RankComm', 'SUMMARY_COLUMNS', 'blocked_time',
                        'busy_idle', 'comm_overlap', 'comm_per_step', 'intersection_seconds', 'intervals_union',
                        'is_backward_name', 'overlap', 'overlap_counts', 'pending_memory_series',
                        'queue_length_series', 'queue_length_summary', 'step_windows', 'union_seconds'],
 'd2l_async.benchmark': ['Benchmark', 'Measurement', 'measure', 'no_collector_pauses', 'wait_all'],
 'd2l_async.capture': ['BLOCKING_COPY_REASON', 'CAPTURE_SYNC_SOURCE', 'Capture', 'JAX_INSTALL', 'JaxMissing',
                       'blocking_copies', 'capture', 'cuda_capture', 'have_jax', 'import_jax', 'jax_capture',
                       'jax_cpu_devices', 'jax_label', 'jax_wait', 'jax_waitall', 'label_block_sources',
                       'label_final_sync', 'quiet_kineto', 'synchronize_all'],
 'd2l_async.claims': ['Claim', 'Probe', 'claim', 'counterfactual', 'counterfactuals', 'falsifier', 'falsifiers',
                      'get', 'headline_claims', 'registry'],
 'd2l_async.config': ['ENGINE_KINDS', 'REPO_SLUG', 'REPO_URL', 'engine_kind', 'in_colab', 'quick_mode', 'scale'],
 'd2l_async.data': ['DESCRIPTIONS', 'SAMPLES', 'load_sample', 'sample_path'],
 'd2l_async.devices': ['Machine', 'cuda_available', 'describe_machine', 'machine', 'num_gpus', 'try_all_gpus',
                       'try_gpu'],
 'd2l_async.distributed': ['BACKENDS', 'DistributedError', 'LaunchResult', 'MODES', 'OnRanks', 'RankContext',
                           'RankDied', 'RankError', 'RankTimeout', 'Where', 'check_backend', 'free_port',
                           'is_alive', 'launch', 'profiled', 'run_and_load', 'where'],
 'd2l_async.engine': ['DeviceModel', 'EngineArray', 'EngineError', 'EngineStatistics', 'MODELLED_LABEL',
                      'NaiveEngine', 'OpState', 'Recorder', 'SchedulingOverhead', 'ThreadedEngine', 'get_engine',
                      'live_engines', 'make_engine', 'measure_scheduling_overhead', 'wait_limit', 'waitall_all',
                      'with_flops'],
 'd2l_async.engine.core': ['Device', 'EngineError', 'EngineOp', 'EngineStatistics', 'EngineVar', 'Observer', 'Op',
                           'OpState', 'RECORD_LIMIT', 'Recorder', 'Scheduler', 'Var', 'add_internal_dir',
                           'deferred', 'expose', 'finish_op', 'hold_gc_freeze', 'lower_priority', 'push_op',
                           'release_gc_freeze', 'shield', 'shield_ctrl_c', 'split_access'],
 'd2l_async.engine.exercise': ['CASES', 'CaseResult', 'Grade', 'Listing', 'grade', 'listing'],
 'd2l_async.engine.minimal': ['Array', 'Engine'],
 'd2l_async.experiments': ['AsynchronyResult', 'BACKENDS', 'BLOCKERS', 'BLOCKER_DEMO', 'BOOK', 'BarrierResult',
                           'BlockEvent', 'BlockersResult', 'BookNumber', 'CostModel', 'DependencyResult',
                           'DeviceSizes', 'DeviceTimes', 'EXPRESSIONS', 'IndependenceResult', 'MLPResult',
                           'OPS_PER_BATCH', 'PROFILE_SAMPLES', 'ProfilingResult', 'QueueMemoryResult',
                           'RankFailure', 'SampleQueueSummary', 'SchedulingResult', 'Setup', 'SweepPoint',
                           'SyncAsyncResult', 'SyncAsyncSweep', 'TwoDeviceResult', 'book_loop_check', 'book_number',
                           'check_expression', 'compare_sync_every', 'compute_comm_overlap', 'device_sizes',
                           'export_perfetto', 'frontend_wait_check', 'hta_check', 'measure_device', 'plan_devices',
                           'ran_ahead_check', 'report_check', 'resolve_backend', 'run_asynchrony',
                           'run_asynchrony_jax', 'run_barriers', 'run_barriers_jax', 'run_blockers',
                           'run_blockers_jax', 'run_collective', 'run_expression', 'run_independent_vs_dependent',
                           'run_mlp_parallel', 'run_modelled_overlap', 'run_overlap', 'run_profiling',
                           'run_queue_memory', 'run_rank_failure', 'run_scheduling', 'run_straggler',
                           'run_sync_async', 'run_sync_async_jax', 'run_two_devices', 'sample_queue_summary',
                           'sample_summaries', 'size_for_device', 'sweep_sync_async', 'workload'],
 'd2l_async.lesson': ['Cause', 'Check', 'CheckList', 'FAILS', 'HOLDS', 'KEY_URL', 'MODELLED', 'ROLES', 'UNSURE',
                      'check', 'checks_in_outputs', 'contradictions', 'expect', 'show'],
 'd2l_async.report': ['ReportResult', 'check_device', 'render_html', 'run_report', 'write_json'],
 'd2l_async.torch_async': ['AsyncRuntime', 'AsyncTensor', 'MIN_VERSION', 'NotComputedError', 'StaleParameterError', 'TESTED_VERSIONS',
                           'UnsupportedTorchError', 'asynchronous', 'check_torch', 'current_runtime', 'make_async',
                           'synchronize'],
 'd2l_async.torch_async.lessons': ['blockers_recorded', 'increments', 'largest_stall', 'narrow_waits',
                                   'returned_before_done'],
 'd2l_async.trace': ['BACKEND_KINDS', 'BLOCKING_COPIES', 'BLOCKING_COPY_REASON', 'CATEGORIES',
                     'COLLECTIVE_PREFIXES', 'COLUMNS', 'Coded', 'EmptyTrace', 'Event', 'HAVE_MSGSPEC', 'HTA_ORDERS',
                     'JAX_WAIT', 'Kind', 'LAUNCH_CALLS', 'Lane', 'LaneRole', 'MissingRanks', 'MixedJobs',
                     'NameConflict', 'PYTHON_GROUP', 'Ragged', 'RankLanes', 'SYNC_CALLS', 'SkippedEntries', 'Trace',
                     'TraceError', 'UnplacedDeviceEvents', 'hta_ties', 'hta_times', 'hta_window_mask',
                     'is_python_lane', 'last_step_starts', 'launch_calls', 'merge_ranks', 'queue_steps',
                     'queued_mask', 'rank_lanes', 'rank_metas', 'read_chrome_trace', 'read_jax_trace', 'read_trace',
                     'read_trace_dir', 'segments', 'split_ranks', 'write_chrome_trace', 'write_trace_dir'],
 'd2l_async.verdict': ['LEVEL', 'Trend', 'UNREPEATED_FACTOR', 'Verdict', 'at_least', 'compare', 'compare_paired',
                       'overruled', 'similar', 'spearman', 'trend', 'within'],
 'd2l_async.viz': ['DependencyGraph', 'QueueData', 'TimelineData', 'alt_text', 'animate_timeline', 'comm_table',
                   'dependency_graph', 'expression_graph', 'frontend_status', 'join_wait', 'measurement_table',
                   'node_states', 'plot_blocked_time', 'plot_comm_overlap', 'plot_dependency_graph',
                   'plot_measurements', 'plot_queue_length', 'plot_scheduling_overhead', 'plot_sweep',
                   'plot_timeline', 'plot_trace', 'queue_at', 'queue_data', 'style', 'sweep_table',
                   'timeline_data'],
 'd2l_async.widgets': ['Dashboard', 'asynchrony_dashboard', 'backend_dropdown', 'backends', 'barrier_dashboard',
                       'blocker_dashboard', 'blocker_dropdown', 'dependency_dashboard', 'dropdown',
                       'expression_dropdown', 'float_slider', 'int_slider', 'live_figure', 'log_slider',
                       'memory_guard', 'parallelism_dashboard', 'queue_dashboard', 'scheduling_dashboard',
                       'sync_async_dashboard', 'toggle', 'trace_explorer', 'window_trace'],
 'd2l_async.widgets.distributed': ['RANK_BYTES', 'distributed_dashboard', 'ranks_guard']}


def test_every_public_module_is_pinned():
    modules = ["d2l_async", *(f"d2l_async.{m}" for m in d2l_async._SUBMODULES), *EXTRA]
    assert sorted(SURFACE) == sorted(modules)


@pytest.mark.parametrize("module", sorted(SURFACE))
def test_the_public_names_are_the_pinned_ones(module):
    public = sorted(getattr(importlib.import_module(module), "__all__", []))
    added, dropped = sorted(set(public) - set(SURFACE[module])), sorted(set(SURFACE[module]) - set(public))
    assert (added, dropped) == ([], []), f"{module}: added {added}, dropped {dropped}: a decision -- update SURFACE"


#: Modules whose every public callable of their own (by ``__module__``) must be exported; the others
#: deliberately keep some names importable but out of ``__all__`` (widgets' views and guards, report's rows,
#: the teaching engine's rule functions: see each module's docstring).
EXPORTS_ALL_OWN = {"d2l_async.trace", "d2l_async.analysis", "d2l_async.data", "d2l_async.capture",
                   "d2l_async.engine", "d2l_async.viz"}
#: Names that must be exported wherever they are defined: every experiment runner, every distributed run.
RUNNERS = {"d2l_async.experiments": "run_", "d2l_async.distributed": "run_"}


@pytest.mark.parametrize("module", sorted(SURFACE))
def test_every_exported_name_resolves_once_and_nothing_public_is_left_out(module):
    mod = importlib.import_module(module)
    names = list(getattr(mod, "__all__", []))
    assert len(names) == len(set(names)), f"{module}: names listed twice in __all__"
    missing = [n for n in names if getattr(mod, n, None) is None]
    assert missing == [], f"{module}: __all__ names {missing} that do not resolve"
    own = {n for n in vars(mod) if not n.startswith("_") and callable(getattr(mod, n))
           and str(getattr(getattr(mod, n), "__module__", "")).startswith(module)}
    if module in EXPORTS_ALL_OWN:
        assert own <= set(names), f"{module}: public names left out of __all__: {sorted(own - set(names))}"
    prefix = RUNNERS.get(module)
    if prefix:
        runners = {n for n in dir(mod) if n.startswith(prefix)}
        assert runners <= set(names), f"{module}: runners left out of __all__: {sorted(runners - set(names))}"
