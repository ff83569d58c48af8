"""The dashboard: controls bound to an experiment and to the pure figure functions.

Readers learn this chapter by moving a slider and watching the queue change.  A
:class:`Dashboard` holds that loop and nothing else; it does not know which experiment it runs::

    controls (.value) --observe--> guard? --ok--> experiment(**values) --> result
         ^                           |                                        |
         | revert on refusal         v refused: message, figures kept         v
         '------------------------ status <--- error: "ValueError: ..."    figures(result)
                                                                              |
                                                  FigureWidget.batch_update() v  (same widget)

* On a control change the experiment reruns with every control's value (plus ``fixed``) and each
  figure function draws the new result; the existing ``FigureWidget`` takes the new traces in place
  (:func:`~d2l_async.widgets._views.apply_figure`), it is never rebuilt.  Animations (figures with
  frames, which ``FigureWidget`` cannot play) are shown through the ``Output`` redraw instead.
* Workloads longer than a few seconds get a Run button (``run_button=True``): a change then only
  marks the figures stale.  Everything else reruns by itself.
* A :data:`~d2l_async.widgets._guards.Guard` may refuse values before anything runs: the message
  appears in the status line, the controls return to the last values that ran and the previous
  figures stay.
* Every run has a time limit (``time_limit_s``, default :data:`DEFAULT_TIME_LIMIT_S`): the
  experiments' loops call :func:`~d2l_async.experiments.deadline.checkpoint` between pushes, and a
  run that passes the limit — or whose first steps show it would — is stopped while it runs
  (:class:`~d2l_async.experiments.deadline.RunStopped`).  The status says so, the controls return to
  the last values that ran and the previous figures stay.
* Changes that arrive while a run goes on wait in the kernel's queue (:mod:`._kernel`): the last value
  wins.  A change with a newer one waiting behind it is skipped, and a run in progress is abandoned at
  its next checkpoint when a newer value waits (:class:`~d2l_async.experiments.deadline.RunSuperseded`),
  so ten quick moves of a slider cost one run, not ten.  An interrupt (the kernel's ■) ends the run in
  progress *and* the changes that were waiting behind it: they are not run, and the controls return to
  the last values that ran.
* An exception in the experiment or a figure function appears in the status line as
  ``Type: message``; it is never raised into the kernel's event loop, and the next change works.
* ``view_controls`` change only how a result is drawn (which blocker, which lanes, what time window):
  they are passed to the figure functions as keyword arguments and redraw the last result without
  running the experiment again.
* With ``live=Live(...)`` the experiment receives a fresh engine and a poller draws its queue at
  ``hz`` while it runs (:mod:`d2l_async.widgets._live`), with a progress bar.
"""

from __future__ import annotations

import html
import time
from typing import Any, Callable, Mapping

import ipywidgets as widgets
import plotly.graph_objects as go

from d2l_async.experiments.deadline import RunStopped, RunSuperseded, deadline

from ._guards import Guard
from ._kernel import current_message_id, pending_updates
from ._live import Live, LiveFigure, LiveRun, Poller
from ._views import FigureView, OutputView, drawn_size, make_view, resolve_mode
from .._args import flag, instance

__all__ = ["Dashboard", "FigureSpec", "DEFAULT_TIME_LIMIT_S"]

#: Longest a slider's run may take before it is stopped (seconds).
DEFAULT_TIME_LIMIT_S = 30.0

#: How figures come from a result: ``{name: result -> go.Figure}``, one ``result -> figures``
#: callable (a ``go.Figure``, a mapping name -> figure, or a sequence), or ``None`` for ``result.figures()``.
FigureSpec = Mapping[str, Callable[[Any], go.Figure]] | Callable[[Any], Any] | None

_COLOURS = {"ok": "#1b7837", "info": "#4d4d4d", "refused": "#b35806", "error": "#b2182b"}


def _check_control(name: str, control: Any) -> None:
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"control name {name!r} must be the experiment's keyword argument (an identifier)")
    if not (hasattr(control, "value") and hasattr(control, "observe")):
        raise TypeError(
            f"control {name!r} is a {type(control).__name__}; use an ipywidgets control "
            "(e.g. d2l_async.widgets.int_slider(...))"
        )


def _as_figures(out: Any) -> dict[str, go.Figure]:
    """Normalize what a figures callable returned to ``{name: go.Figure}``."""
    if isinstance(out, go.Figure):
        return {"figure": out}
    if isinstance(out, Mapping):
        return dict(out)
    if isinstance(out, (list, tuple)):
        return {f"figure {i}": f for i, f in enumerate(out)}
    raise TypeError(f"figures must return a go.Figure, a mapping or a sequence of figures, got {type(out).__name__}")


class Dashboard:
    """Controls, an experiment and its figures, kept in step.

    Args:
        experiment: called as ``experiment(**fixed, **values)`` with keyword arguments only.
        controls: keyword -> ipywidgets control (see :mod:`d2l_async.widgets._controls`).
        figures: how to draw a result (see :data:`FigureSpec`); default ``result.figures()``.
        fixed: keyword arguments passed on every run that no control changes.
        view_controls: keyword -> control passed to the figure functions (``fn(result, **view)``);
            a change redraws the last result without rerunning.
        run_button: True for workloads over a few seconds: changes wait for the Run button.
        live: watch the engine while the experiment runs (see :class:`Live`).
        guard: refuses values before a run (see :mod:`d2l_async.widgets._guards`).
        mode: ``"figurewidget"``, ``"output"`` (redraw a plain figure: Colab) or ``"auto"``.
        title: a heading shown above the controls.
        describe: ``result -> str`` appended to the status after a run (e.g. where it ran:
            ``"CPU engine, 1 virtual device (threads)"``).
        autorun: run once with the controls' initial values now.
        time_limit_s: stop a run that passes this many seconds (``None``: no limit).

    Attributes:
        result: the last result that ran (``None`` before the first successful run).
        runs: how many times the experiment has been called.
        redraws: how many times a view control redrew the last result.
        errors: how many runs (or drawings) raised.
        stops: how many runs were stopped at their time limit.
        skipped: how many control changes were not run because a newer one waited behind them.
        superseded: how many runs were abandoned midway for a newer value.
        dropped: how many changes waiting behind an interrupted run were dropped.
        status: the ``HTML`` line that reports the last run, refusal or error.
        progress: the ``IntProgress`` bar (shown for Run-button and live dashboards).
        views: figure name -> view (:class:`FigureView` or :class:`OutputView`).
        live_view: the :class:`LiveFigure` (``None`` without ``live`` or with ``Live(figure=False)``).
        poller: the :class:`Poller` of the last live run (its samples stay for inspection).
        last_error: the exception of the last failed run or drawing (``None`` before any).
        timings: seconds of the last run: ``run``, ``draw`` and ``total``.
        widget: the whole dashboard as one ``VBox`` (what a notebook displays).
    """

    def __init__(
        self,
        experiment: Callable[..., Any],
        controls: Mapping[str, Any],
        figures: FigureSpec = None,
        *,
        fixed: Mapping[str, Any] | None = None,
        view_controls: Mapping[str, Any] | None = None,
        run_button: bool = False,
        live: Live | None = None,
        guard: Guard | None = None,
        mode: str = "auto",
        title: str | None = None,
        describe: Callable[[Any], str] | None = None,
        autorun: bool = True,
        time_limit_s: float | None = DEFAULT_TIME_LIMIT_S,
    ) -> None:
        if not callable(experiment):
            raise TypeError(f"experiment must be callable, got {type(experiment).__name__}")
        instance("controls", controls, Mapping, what="a mapping keyword -> ipywidgets control",
                 hint="e.g. controls={'n': d2l_async.widgets.int_slider('n', 10, 1, 100)}")
        if view_controls is not None:
            instance("view_controls", view_controls, Mapping, what="a mapping keyword -> ipywidgets control or None")
        if fixed is not None:
            instance("fixed", fixed, Mapping, what="a mapping keyword -> value or None")
        run_button, autorun = flag("run_button", run_button), flag("autorun", autorun)
        controls = dict(controls)
        for name, control in controls.items():
            _check_control(name, control)
        view_controls = dict(view_controls or {})
        for name, control in view_controls.items():
            _check_control(name, control)
        fixed = dict(fixed or {})
        clash = set(fixed) & set(controls)
        if clash:
            raise ValueError(f"{sorted(clash)} are both controls and fixed arguments; keep each in one place")
        clash = set(view_controls) & (set(controls) | set(fixed))
        if clash:
            raise ValueError(f"{sorted(clash)} are both view controls and experiment arguments; keep each in one place")
        if figures is not None and not callable(figures) and not isinstance(figures, Mapping):
            raise TypeError("figures must be a mapping name -> callable, a callable, or None")
        if isinstance(figures, Mapping):
            bad = [k for k, f in figures.items() if not callable(f)]
            if bad:
                raise TypeError(f"figure functions {bad} are not callable")
        if live is not None and not isinstance(live, Live):
            raise TypeError("live must be a d2l_async.widgets.Live(...) or None")
        if guard is not None and not callable(guard):
            raise TypeError("guard must be a callable values -> message | None")
        if time_limit_s is not None and (isinstance(time_limit_s, bool) or not isinstance(time_limit_s, (int, float))
                                         or not time_limit_s > 0):
            raise ValueError(f"time_limit_s must be a positive number of seconds or None, got {time_limit_s!r}")

        if title is not None:
            instance("title", title, str, what="str or None")
        self.experiment = experiment
        self.controls = controls
        self.view_controls = view_controls
        self.fixed = fixed
        self.describe = describe
        self.figure_spec = figures
        self.run_button = bool(run_button)
        self.live = live
        self.guard = guard
        self.time_limit_s = time_limit_s
        self.mode = resolve_mode(mode)
        self.result: Any = None
        self.runs = 0
        self.redraws = 0
        self.errors = 0
        self.stops = 0
        self.skipped = 0
        self.superseded = 0
        self.dropped = 0
        self._interrupted: set[str] = set()  # ids of the changes that waited behind an interrupted run
        self.timings: dict[str, float] = {}
        self.last_error: BaseException | None = None
        self.poller: Poller | None = None
        self.views: dict[str, FigureView | OutputView] = {}
        self._accepted: dict[str, Any] = self.values()
        self._suppress = False
        self._busy = False
        self._stale = False

        self.status = widgets.HTML("")
        self.progress = widgets.IntProgress(value=0, min=0, max=100, description="progress",
                                            layout={"width": "420px"})
        self.progress.layout.visibility = "visible" if run_button else "hidden"
        self.button = widgets.Button(description="Run", button_style="primary", icon="play")
        self.button.on_click(lambda _: self.rerun())
        self.button.layout.display = None if run_button else "none"
        self._figure_box = widgets.VBox([])
        self.live_view = LiveFigure(self.mode) if live is not None and live.figure else None
        parts: list[Any] = []
        if title:
            parts.append(widgets.HTML(f"<b>{html.escape(title)}</b>"))
        parts += [widgets.VBox([*controls.values(), *view_controls.values()]),
                  widgets.HBox([self.button, self.progress]), self.status]
        if self.live_view is not None:
            parts.append(self.live_view.widget)
        parts.append(self._figure_box)
        self.widget = widgets.VBox(parts)
        self.widget.add_class("d2l-dashboard")  # the browser test finds a dashboard's own figures under it
        self.status.add_class("d2l-dashboard-status")

        for control in controls.values():
            control.observe(self._on_change, names="value")
        for control in view_controls.values():
            control.observe(self._on_view_change, names="value")
        if autorun:
            self.rerun()
        elif run_button:
            self._say("info", "Press Run to start.")

    # -- reading ---------------------------------------------------------------------------
    def values(self) -> dict[str, Any]:
        """The controls' current values, by keyword."""
        return {name: control.value for name, control in self.controls.items()}

    def view_values(self) -> dict[str, Any]:
        """The view controls' current values, by keyword."""
        return {name: control.value for name, control in self.view_controls.items()}

    @property
    def figure_widgets(self) -> dict[str, Any]:
        """Figure name -> the widget on screen (``FigureWidget``, or ``Output`` in output mode)."""
        return {name: view.widget for name, view in self.views.items()}

    @property
    def figures(self) -> dict[str, Any]:
        """Figure name -> what is shown (the ``FigureWidget`` itself, or the last ``go.Figure``)."""
        return {name: view.figure for name, view in self.views.items()}

    @property
    def stale(self) -> bool:
        """True when controls changed since the last run (Run-button dashboards)."""
        return self._stale

    # -- display ---------------------------------------------------------------------------
    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)

    def __repr__(self) -> str:
        return (f"<Dashboard {getattr(self.experiment, '__name__', self.experiment)!s} "
                f"controls={list(self.controls)} runs={self.runs} mode={self.mode}>")

    # -- running ---------------------------------------------------------------------------
    def _model_ids(self) -> list[str]:
        return [c.model_id for c in (*self.controls.values(), *self.view_controls.values())
                if isinstance(getattr(c, "model_id", None), str)]

    def _newer_change_waits(self) -> str | None:
        """Why this run's result will not be wanted: a newer value of a control waits (``None``: go on)."""
        waiting = pending_updates(self._model_ids())
        return f"{len(waiting)} newer change(s) of the controls wait" if waiting else None

    def _on_change(self, change: Mapping[str, Any]) -> None:
        if self._suppress:
            return
        message = current_message_id()
        if message is not None and message in self._interrupted:
            # this change waited behind a run the reader interrupted: an interrupt clears the queue
            self._interrupted.discard(message)
            self.dropped += 1
            self._revert()
            self._say("refused", "Interrupted: the changes made while the run went on were not run; the controls "
                                 "show the values of the last finished run (move one to run again).")
            return
        if self.run_button:
            self._stale = True
            self._say("info", "Changed: press Run to rerun with the new values.")
            return
        if self._newer_change_waits():  # the last value wins: it runs when its message comes
            self.skipped += 1
            return
        self.rerun(_from_change=True)

    def _on_view_change(self, change: Mapping[str, Any]) -> None:
        if not self._suppress:
            self.redraw()

    def redraw(self) -> bool:
        """Draw the last result again with the view controls' values (no rerun); never raises."""
        if self.result is None or self._busy:
            return False
        self._busy = True
        t0 = time.perf_counter()
        try:
            try:
                self._draw(self.result)
            except BaseException as exc:  # noqa: BLE001 - as in rerun
                return self._fail("drawing the figures", exc)
            self.redraws += 1
            self.timings = {"run": 0.0, "draw": time.perf_counter() - t0, "total": time.perf_counter() - t0}
            self._say("ok", f"Redrawn with {self._describe(self.view_values())} in {self.timings['draw']:.2f} s.")
            return True
        finally:
            self._busy = False

    def rerun(self, *, _from_change: bool = False) -> bool:
        """Run the experiment with the controls' values and redraw; never raises (but passes a Ctrl-C on).

        Returns:
            True when the run and the drawing succeeded; False when refused or failed (the status
            says why, the previous figures stay).
        """
        if self._busy:  # a change arrived while drawing (e.g. from a figure callback): ignore it
            return False
        values = self.values()
        refusal = self._check(values)
        if refusal:
            self._revert()
            self._say("refused", f"Refused: {refusal}")
            return False
        self._busy = True
        t0 = time.perf_counter()
        try:
            self._say("info", "Running\u2026")
            try:
                self.runs += 1
                abandon = self._newer_change_waits if _from_change else None
                with deadline(self.time_limit_s, what="This run", abandon=abandon):
                    result = self._run(values)
            except RunSuperseded as exc:  # a newer value waits: it runs next, the controls stay
                self.superseded += 1
                self.last_error = exc
                self._say("info", f"Abandoned for a newer value: {exc}")
                return False
            except RunStopped as exc:  # past its time limit: stopped, the last good run stays
                self.stops += 1
                self.last_error = exc
                self._revert()
                self._say("refused", f"Stopped: {exc}")
                return False
            except BaseException as exc:  # noqa: BLE001 - every way a run ends is shown (
                # SystemExit and GeneratorExit escaped and left "Running..."); see _fail
                return self._fail("the experiment", exc)
            t1 = time.perf_counter()
            try:
                self._draw(result)
            except BaseException as exc:  # noqa: BLE001 - as above
                return self._fail("drawing the figures", exc)
            t2 = time.perf_counter()
            self.result = result
            self._accepted = values
            self._stale = False
            self.timings = {"run": t1 - t0, "draw": t2 - t1, "total": t2 - t0}
            where = ""
            if self.describe is not None:
                try:
                    where = f" ({self.describe(result)})"
                except Exception as exc:  # a label must not hide a good run
                    where = f" (describe failed: {type(exc).__name__}: {exc})"
            self._say("ok", f"Ran with {self._describe(values)} in {t1 - t0:.2f} s{where}; drawn in {t2 - t1:.2f} s.")
            return True
        finally:
            self._busy = False

    def _check(self, values: Mapping[str, Any]) -> str | None:
        if self.guard is None:
            return None
        try:
            return self.guard({**self.fixed, **values})
        except Exception as exc:  # a guard that cannot judge the values refuses them, with its reason
            return f"{type(exc).__name__}: {exc}"

    def _run(self, values: Mapping[str, Any]) -> Any:
        kwargs = {**self.fixed, **values}
        if self.live is None:
            return self.experiment(**kwargs)
        return self._run_live(kwargs)

    def _run_live(self, kwargs: dict[str, Any]) -> Any:
        assert self.live is not None
        run = LiveRun(self.live, kwargs, view=self.live_view, progress=self.progress)
        self.poller = run.poller
        return run(self.experiment)

    def _draw(self, result: Any) -> None:
        spec = self.figure_spec
        view = self.view_values()
        if spec is None:
            if not hasattr(result, "figures"):
                raise TypeError(f"the result ({type(result).__name__}) has no .figures(); pass figures=...")
            new = _as_figures(result.figures(**view))
        elif isinstance(spec, Mapping):
            new = {name: fn(result, **view) for name, fn in spec.items()}
        else:
            new = _as_figures(spec(result, **view))
        for name, fig in new.items():
            if not isinstance(fig, go.Figure):
                raise TypeError(f"figure {name!r} is a {type(fig).__name__}, not a plotly go.Figure")
        for name, fig in new.items():
            view = self.views.get(name)
            if view is None or isinstance(view, FigureView):
                # a FigureWidget view per drawing, made with its figure (its first message carries it):
                # plotly's widget redraws a view from the state it had when the view was attached, so a
                # restyle that arrives while JupyterLab re-attaches it (a scroll) left it showing the
                # last run but one; a new widget has nothing to miss
                self._add_view(name, fig)
            else:
                view.show(fig)

    def _add_view(self, name: str, figure: go.Figure) -> FigureView | OutputView:
        """A view for figure ``name`` showing ``figure``, in the place of the one before (closed); made at
        every drawing of a ``FigureWidget`` figure, at the first of an output one.

        An animation (a figure with frames) always gets the output view: ``FigureWidget`` does not
        support frames, and its play button would do nothing.
        """
        view = make_view("output" if figure.frames else self.mode, figure)
        old = self.views.get(name)
        self.views[name] = view
        children = list(self._figure_box.children)
        if old is not None and old.widget in children:
            children[children.index(old.widget)] = view.widget
        else:
            children.append(view.widget)
        self._figure_box.children = tuple(children)
        if old is not None and old.widget is not view.widget:
            old.widget.close()  # its comm and its model in every front end
        return view

    def _revert(self) -> None:
        self._suppress = True
        try:
            for name, value in self._accepted.items():
                self.controls[name].value = value
        finally:
            self._suppress = False

    def _fail(self, where: str, exc: BaseException) -> bool:
        """Show ``exc`` in the status line and return False; only a Ctrl-C goes on up, after the
        status says so: the reader asked the kernel to stop."""
        self.errors += 1
        self.last_error = exc
        if isinstance(exc, KeyboardInterrupt):
            # the reader pressed stop: the changes queued behind this run are not run either
            waiting = pending_updates(self._model_ids()) or []
            self._interrupted.update(waiting)
            self._revert()
            queued = f"; {len(waiting)} change(s) that waited will not run" if waiting else ""
            self._say("error", f"Interrupted (KeyboardInterrupt) in {where}: the figures and the controls show the "
                               f"last finished run{queued}.")
            raise exc
        self._say("error", f"Error in {where}: {type(exc).__name__}: {exc}")
        return False

    def _say(self, kind: str, message: str) -> None:
        colour = _COLOURS[kind]
        # what each figure holds now, as a browser counts it: a test waits for the page to show it
        shown = [view.figure for view in self.views.values()]
        if self.live_view is not None and self.live_view.figure is not None:  # above the others on the page
            shown.insert(0, self.live_view.figure)
        # an animation's points are those of the frame on screen: only its traces are stated ("*")
        drawn = ",".join(f"{drawn_size(f)[0]}:*" if getattr(f, "frames", None) else "{}:{}".format(*drawn_size(f))
                         for f in shown)
        self.status.value = (f'<span style="color:{colour}" data-kind="{kind}" data-runs="{self.runs}" '
                             f'data-figures="{drawn}">{html.escape(message)}</span>')

    @staticmethod
    def _describe(values: Mapping[str, Any]) -> str:
        def short(v: Any) -> str:
            if isinstance(v, float):
                return f"{v:.4g}"
            if isinstance(v, tuple) and v and all(isinstance(x, float) for x in v):
                return "(" + ", ".join(f"{x:.4g}" for x in v) + ")"
            if isinstance(v, tuple) and len(v) > 3:
                return f"{len(v)} items"
            text = repr(v)
            return text if len(text) <= 40 else text[:37] + "..."

        return ", ".join(f"{k}={short(v)}" for k, v in values.items()) or "the defaults"
