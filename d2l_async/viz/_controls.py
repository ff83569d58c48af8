"""Play/pause buttons and a time slider for figures animated with frames named by their time."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["animation_controls"]


def animation_controls(times: np.ndarray, factor: float, unit: str, *, origin: float = 0.0,
                        redraw: bool = False) -> dict[str, Any]:
    """Play/pause buttons and a time slider over frames named by their time."""
    names = [f"{t:.12g}" for t in times]
    # about 6 s for a whole run, whatever the number of frames (a 6-frame graph should not flash by)
    duration = int(np.clip(6000 / max(len(times), 1), 60, 700))
    step_args = {"mode": "immediate", "frame": {"duration": 0, "redraw": redraw}, "transition": {"duration": 0}}
    return {
        "updatemenus": [{
            "type": "buttons", "direction": "left", "x": 0.0, "y": -0.02, "xanchor": "left", "yanchor": "top",
            "pad": {"r": 10, "t": 40}, "showactive": False,
            "buttons": [
                {"label": "▶ play", "method": "animate",
                 "args": [None, {"frame": {"duration": duration, "redraw": redraw}, "fromcurrent": True,
                                 "transition": {"duration": 0}}]},
                {"label": "❚❚ pause", "method": "animate", "args": [[None], step_args]},
            ],
        }],
        "sliders": [{
            "active": 0, "x": 0.22, "len": 0.78, "y": -0.02, "yanchor": "top", "pad": {"t": 30},
            "currentvalue": {"prefix": "time: ", "suffix": f" {unit}"},
            "steps": [{"label": f"{(t - origin) * factor:.3g}", "method": "animate", "args": [[name], step_args]}
                      for t, name in zip(times, names)],
        }],
    }
