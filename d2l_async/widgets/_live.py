"""Live mode: watch the engine's queue grow and drain while the experiment is still running.

A trace is drawn after the run; a reader of a longer run wants to see the queue *now*.  While the
experiment runs on the calling thread, a :class:`Poller` thread reads ``eng.statistics()`` (an
immutable snapshot: pending, running, done, bytes pending) ``hz`` times a second and hands the
samples to a :class:`LiveFigure`, which replaces the x/y arrays of its ``FigureWidget`` in place::

    main thread      sample(first)  experiment(...) ..................... returns / raises
    poller thread                     sample  sample  sample  ...  sample(final)  -> stop, joined
                         |              |       |       |
    LiveFigure         draw           draw    draw    draw   (queue length, bytes pending)

Which engine?  By default none is passed in: an :class:`EngineWatcher` sums the statistics of every
engine the experiment creates during the run (the engine keeps a registry of open engines), so any
experiment function works unchanged.  ``Live(engine=factory)`` instead builds one engine, passes it
to the experiment and shuts it down afterwards.  :class:`LiveRun` is one such run, with its
progress bar (shown once a run takes longer than :data:`PROGRESS_AFTER_S`).

The experiment stays on the calling thread so a Jupyter interrupt (KeyboardInterrupt) reaches it;
the poller stops in a ``finally`` either way and is joined with a timeout, so no thread outlives the
run.  The data step (:func:`live_columns`) is pure and tested without threads.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from .._args import having, instance, sequence
from ._views import FigureView

__all__ = ["Live", "LiveRun", "Sample", "Poller", "LiveFigure", "EngineWatcher", "live_columns", "sample_of",
           "live_figure", "PROGRESS_AFTER_S"]

#: A live run shows its progress bar once it has taken this long (progress for anything
#: over ~2 s; Run-button dashboards show it always).
PROGRESS_AFTER_S = 2.0


@dataclass(frozen=True)
class Live:
    """How a dashboard watches a run live.

    Attributes:
        engine: ``None`` (default): watch every engine the experiment creates while it runs (an
            :class:`EngineWatcher` over ``d2l_async.engine.live_engines()``), so any experiment
            function works unchanged.  Or a callable ``values -> engine``: the dashboard builds the
            engine, passes it to the experiment as ``argument``, polls its ``statistics()`` and
            shuts it down after the run.
        argument: the keyword under which the experiment receives a built engine.
        hz: samples per second (at least 5: a queue that moves must look like it moves).
        total: ops the run will execute, for the progress bar: the name of a control, or
            ``values -> int``; ``None``: the bar shows the share of the ops seen so far that are done.
        figure: draw the live queue/memory figure; ``False`` keeps only the progress bar (with the
            elapsed time), which appears once a run takes longer than about 2 s.
    """

    engine: Callable[[Mapping[str, Any]], Any] | None = None
    argument: str = "engine"
    hz: float = 10.0
    total: str | Callable[[Mapping[str, Any]], int] | None = None
    figure: bool = True

    def __post_init__(self) -> None:
        if self.engine is not None and not callable(self.engine):
            raise TypeError("Live(engine=...) must be None (watch the engines a run creates) or a callable values -> engine")
        if not 1 <= self.hz <= 100:
            raise ValueError(f"Live(hz={self.hz!r}): use 1..100 samples per second (>= 5 for a smooth view)")

    def total_for(self, values: Mapping[str, Any]) -> int | None:
        """Ops expected for ``values`` (``None`` when unknown)."""
        if self.total is None:
            return None
        if isinstance(self.total, str):
            value = values.get(self.total)
            return int(value) if value is not None else None
        return int(self.total(values))


@dataclass(frozen=True)
class Sample:
    """One reading of the engine's statistics, ``t`` seconds after the run started."""

    t: float
    pending: int
    running: int
    done: int
    bytes_pending: int


def sample_of(snapshot: Any, t: float) -> Sample:
    """A :class:`Sample` from an engine statistics snapshot (missing fields count as 0)."""
    return Sample(
        t=float(t),
        pending=int(getattr(snapshot, "pending", 0) or 0),
        running=int(getattr(snapshot, "running", 0) or 0),
        done=int(getattr(snapshot, "done", 0) or 0),
        bytes_pending=int(getattr(snapshot, "bytes_pending", 0) or 0),
    )


@dataclass(frozen=True)
class _Totals:
    pending: int
    running: int
    done: int
    bytes_pending: int


def _live_engines() -> list[Any]:
    # looked up at call time (tests replace this function to watch fake engines)
    from d2l_async.engine import live_engines

    return live_engines()


class EngineWatcher:
    """``statistics()`` summed over the engines created since this watcher was made.

    Experiments build their own engines; the engine keeps a registry of the open ones
    (``d2l_async.engine.live_engines()``).  Engines open before the run are not counted; an engine
    that closes is still read (its statistics stay valid), so its last ops count and ``done`` only grows.

    Args:
        engines: lists the open engines (default ``d2l_async.engine.live_engines``; tests pass fakes).
    """

    def __init__(self, engines: Callable[[], Sequence[Any]] | None = None) -> None:
        self._engines = engines or _live_engines
        self._before = {id(e) for e in self._engines()}
        self._done: dict[int, int] = {}
        self._seen: list[Any] = []  # keeps seen engines alive for the run so their ids stay unique

    def statistics(self) -> _Totals:
        for eng in self._engines():
            if id(eng) not in self._before and id(eng) not in self._done:
                self._seen.append(eng)
                self._done[id(eng)] = 0
        pending = running = nbytes = 0
        # engines seen before keep being read after they close: their last ops still count
        for eng in self._seen:
            snap = eng.statistics()
            pending += int(getattr(snap, "pending", 0))
            running += int(getattr(snap, "running", 0))
            nbytes += int(getattr(snap, "bytes_pending", 0))
            self._done[id(eng)] = int(getattr(snap, "done", 0))
        return _Totals(pending, running, sum(self._done.values()), nbytes)

    @property
    def engines_seen(self) -> int:
        """How many new engines the watcher has read so far."""
        return len(self._done)


def live_columns(samples: Sequence[Sample]) -> dict[str, np.ndarray]:
    """The live figure's data step: samples -> columns ``t``, ``pending``, ``running``, ``done``, ``mib``.

    ``mib`` is the memory held by pending outputs in MiB.
    """
    samples = [having("samples", s, ("t", "pending", "running", "done", "bytes_pending"), what="a sequence of Samples")
               for s in sequence("samples", samples, what="Samples")]
    return {
        "t": np.array([s.t for s in samples], dtype=float),
        "pending": np.array([s.pending for s in samples], dtype=np.int64),
        "running": np.array([s.running for s in samples], dtype=np.int64),
        "done": np.array([s.done for s in samples], dtype=np.int64),
        "mib": np.array([s.bytes_pending / 2**20 for s in samples], dtype=float),
    }


def live_figure(samples: Sequence[Sample] = ()) -> go.Figure:
    """Queue length (pending, running) and memory pending over time, as a static figure.

    Returns:
        A plotly Figure of two rows on one time axis: pending and running ops, and the MiB held by pending ops
        (empty lines for no samples).
    """
    from plotly.subplots import make_subplots

    cols = live_columns(samples)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        subplot_titles=("engine queue (live)", "memory held by pending ops"))
    fig.add_scatter(x=cols["t"], y=cols["pending"], name="pending", mode="lines", line_shape="hv", row=1, col=1)
    fig.add_scatter(x=cols["t"], y=cols["running"], name="running", mode="lines", line_shape="hv", row=1, col=1)
    fig.add_scatter(x=cols["t"], y=cols["mib"], name="MiB pending", mode="lines", line_shape="hv", row=2, col=1)
    fig.update_yaxes(title_text="ops", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="MiB", rangemode="tozero", row=2, col=1)
    fig.update_xaxes(title_text="seconds since the run started", row=2, col=1)
    fig.update_layout(height=380, margin=dict(l=60, r=20, t=40, b=40), legend=dict(orientation="h", y=1.12))
    return fig


class LiveFigure:
    """The live view: a ``FigureWidget`` whose three lines get new x/y arrays on every tick.

    The figure widget is made at the end of the first run, with that run's samples, inside a box that is
    part of the dashboard from the start: its first message to the front end then carries the whole
    figure (:func:`~d2l_async.widgets._views.figure_widget`), even where the dashboard's first run is the
    cell that displays it.  Later runs stream their ticks to it in place.

    In ``"output"`` mode (no FigureWidget) the numbers are shown as text instead: redisplaying a
    figure ten times a second from a thread is what the fallback cannot do.

    Attributes:
        widget: the box the figure appears in (or the ``HTML`` text in output mode).
        figure: the ``FigureWidget`` (``None`` before the first run ended, and in output mode).
        draws: how many ticks have been drawn since the last :meth:`reset`.
    """

    def __init__(self, mode: str) -> None:
        import ipywidgets as widgets

        self.mode = mode
        self.draws = 0
        self._lock = threading.Lock()
        self._samples: Sequence[Sample] = ()
        self.view: FigureView | None = None
        if mode == "figurewidget":
            self.widget: Any = widgets.VBox([])
            self.widget.add_class("d2l-live-view")
        else:
            self.widget = widgets.HTML("")

    @property
    def figure(self) -> go.FigureWidget | None:
        return None if self.view is None else self.view.widget

    def reset(self) -> None:
        self.draws = 0
        self.draw(())

    def publish(self) -> None:
        """After a run: a new figure widget with the run's last ticks, in the place of the one before."""
        with self._lock:
            if self.mode != "figurewidget":
                return
            # a new widget with the run's last ticks, also after later runs: their ticks streamed to the
            # widget on screen, and a tick that reached a view while JupyterLab re-attached it is lost there
            fig = live_figure()
            cols = live_columns(self._samples)
            for trace, key in zip(fig.data, ("pending", "running", "mib")):
                trace.x, trace.y = cols["t"], cols[key]
            old, self.view = self.view, FigureView(fig)
            self.widget.children = (self.view.widget,)
            if old is not None:
                old.widget.close()

    def draw(self, samples: Sequence[Sample]) -> None:
        """Show ``samples`` (called from the poller thread)."""
        with self._lock:
            self._samples = samples
            if self.view is not None:
                cols = live_columns(samples)
                self.view.stream({i: {"x": cols["t"], "y": cols[key]}
                                  for i, key in enumerate(("pending", "running", "mib"))})
            elif self.mode != "figurewidget" and samples:
                s = samples[-1]
                self.widget.value = (
                    f"<tt>t={s.t:6.2f} s &nbsp; pending={s.pending} &nbsp; running={s.running} "
                    f"&nbsp; done={s.done} &nbsp; memory pending={s.bytes_pending / 2**20:.1f} MiB</tt>"
                )
            elif self.mode != "figurewidget":
                self.widget.value = ""
            if samples:
                self.draws += 1


class Poller:
    """A thread that samples ``statistics()`` ``hz`` times a second until :meth:`stop`.

    Args:
        statistics: returns the current snapshot (``eng.statistics``).
        on_tick: called with all samples so far after each new one (drawing, progress); its
            exceptions end the polling and are kept in :attr:`error` instead of being lost.
        hz: samples per second.
    """

    def __init__(self, statistics: Callable[[], Any], on_tick: Callable[[list[Sample]], None], *, hz: float = 10.0) -> None:
        if hz <= 0:
            raise ValueError(f"hz must be positive, got {hz!r}")
        self._statistics = statistics
        self._on_tick = on_tick
        self.period = 1.0 / hz
        self.samples: list[Sample] = []
        self.ticks = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._t0 = time.perf_counter()
        self._thread = threading.Thread(target=self._loop, name="d2l-async-live-poller", daemon=True)

    def start(self) -> "Poller":
        """Take the first sample on the calling thread, then poll on the thread.

        The first tick runs here on purpose, so lazy imports of the drawing path finish on this
        thread; its errors are raised here, before the run starts.  pandas is imported first:
        plotly's validators use pandas whenever ``sys.modules`` has it, and an experiment importing
        pandas on the main thread would otherwise show the poller a half-initialized module.
        """
        try:
            import pandas  # noqa: F401
        except ImportError:  # plotly then never looks for it
            pass
        self._t0 = time.perf_counter()
        self._tick()
        self._thread.start()
        return self

    def _tick(self) -> None:
        self.samples.append(sample_of(self._statistics(), time.perf_counter() - self._t0))
        self.ticks += 1
        self._on_tick(list(self.samples))

    def _loop(self) -> None:
        try:
            # wait() returns True once stop() is called: one last reading is taken in stop()
            while not self._stop.wait(self.period):
                self._tick()
        except BaseException as exc:  # keep it for the dashboard; a dying thread would print it instead
            self.error = exc

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout: float = 5.0) -> bool:
        """Stop, join (at most ``timeout`` seconds) and take a final sample.

        Returns:
            True when the thread has ended; False if it is still stuck after ``timeout``.
        """
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(timeout)
        ended = not self._thread.is_alive()
        if ended and self.error is None:
            try:
                self._tick()  # the final state: the queue drained (or where the error left it)
            except Exception as exc:
                self.error = exc
        return ended


class LiveRun:
    """One live run: an engine (built, or watched), a poller drawing it, a progress bar.

    Args:
        live: the :class:`Live` settings.
        kwargs: the experiment's keyword arguments (the controls' values and the fixed ones).
        view: the :class:`LiveFigure` to draw on (``None``: progress only).
        progress: an ``ipywidgets.IntProgress`` (value = ops done; description = elapsed time).

    Attributes:
        poller: the :class:`Poller` (made here, started by :meth:`__call__`).
    """

    def __init__(self, live: Live, kwargs: Mapping[str, Any], *, view: LiveFigure | None, progress: Any) -> None:
        self.live = instance("live", live, Live, what="d2l_async.widgets.Live")
        self.view = view
        self.progress = progress
        self.total = live.total_for(kwargs)
        progress.max = max(int(self.total or 1), 1)
        progress.value = 0
        progress.bar_style = "info"
        progress.description = "0.0 s"
        if view is not None:
            view.reset()
        if live.engine is None:  # watch whatever engines the experiment builds
            self.engine: Any = EngineWatcher()
            self.kwargs = dict(kwargs)
        else:
            self.engine = live.engine(kwargs)
            self.kwargs = {**kwargs, live.argument: self.engine}
        self._t0 = time.perf_counter()
        self.poller = Poller(self.engine.statistics, self._on_tick, hz=live.hz)

    def _on_tick(self, samples: list[Sample]) -> None:
        if self.view is not None:
            self.view.draw(samples)
        s, bar = samples[-1], self.progress
        elapsed = time.perf_counter() - self._t0
        if not self.total:  # unknown size: the share of the ops seen so far that are done
            bar.max = max(bar.max, s.done + s.pending, 1)
        bar.value = min(s.done, bar.max)
        bar.description = f"{elapsed:.1f} s"
        if elapsed > PROGRESS_AFTER_S:
            bar.layout.visibility = "visible"

    def _close(self) -> None:
        """Shut down an engine this run built (its ``shutdown()``, ``close()`` or context exit)."""
        if self.live.engine is None:
            return
        for name in ("shutdown", "close"):
            method = getattr(self.engine, name, None)
            if callable(method):
                method()
                return
        if hasattr(self.engine, "__exit__"):
            self.engine.__exit__(None, None, None)

    def __call__(self, experiment: Callable[..., Any]) -> Any:
        """Run ``experiment`` on this thread while the poller draws; stop and join it in any case.

        Raises:
            whatever the experiment raised (KeyboardInterrupt included), after the poller stopped;
            RuntimeError when the poller failed or did not stop.
        """
        self._t0 = time.perf_counter()
        try:
            self.poller.start()
        except BaseException:
            self._close()
            self.progress.bar_style = "danger"
            raise
        try:
            result = experiment(**self.kwargs)
        finally:
            ended = self.poller.stop(timeout=max(5.0, 5 * self.poller.period))
            self._close()
            if self.view is not None:
                self.view.publish()  # the figure, with the last tick, for the views to come
            self.progress.bar_style = "success" if ended and self.poller.error is None else "danger"
        if not ended:
            raise RuntimeError("the live poller did not stop within its timeout (engine.statistics() blocked?)")
        if self.poller.error is not None:
            err = self.poller.error
            raise RuntimeError(f"the live view failed: {type(err).__name__}: {err}") from err
        self.progress.value = self.progress.max
        return result
