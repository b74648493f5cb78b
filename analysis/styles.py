"""One visual identity per mode and per stage, shared by every figure (plotly and matplotlib).

Modes differ in colour, marker and line dash, so two modes with the same numbers stay visible:
rollout_async and streamer often predict the same throughput (the rollout bounds both), and
rollout_async is drawn as a larger open marker on a dashed line under streamer's small filled
marker on a solid line. Colours: the Okabe-Ito colour-blind-safe palette; stages use a separate
set so a stage is never mistaken for a mode.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfmodel.schema.modes import MODES
from perfmodel.schema.timeline import STAGES


@dataclass(frozen=True)
class ModeStyle:
    color: str
    symbol: str        # plotly marker symbol
    mpl_marker: str    # matplotlib marker
    dash: str          # plotly dash
    mpl_dash: str      # matplotlib linestyle
    size: int          # marker size (plotly px)
    filled: bool


MODE_STYLES: dict[str, ModeStyle] = {
    "colocated": ModeStyle("#555555", "circle", "o", "solid", "-", 9, True),
    "disaggregated": ModeStyle("#0072B2", "square", "s", "dot", ":", 9, True),
    "train_async": ModeStyle("#009E73", "diamond", "D", "dashdot", "-.", 10, True),
    "rollout_async": ModeStyle("#E69F00", "triangle-up-open", "^", "dash", "--", 15, False),
    "streamer": ModeStyle("#CC79A7", "x", "x", "solid", "-", 8, True),
}
assert tuple(MODE_STYLES) == tuple(MODES), "one style per mode of the mode table"
UNKNOWN_MODE = ModeStyle("#000000", "star", "*", "solid", "-", 9, True)

STAGE_COLORS: dict[str, str] = {
    "env_reset": "#bcbd22",
    "env_step": "#17becf",
    "inference": "#d62728",
    "train": "#1f77b4",
    "optimizer_step": "#9467bd",
    "weight_sync": "#8c564b",
    "phase_switch": "#7f7f7f",
}
assert tuple(STAGE_COLORS) == tuple(STAGES)

CHOSEN_COLOR = "#D55E00"  # the chosen plan's star (vermillion: no mode has it)
EXTRAPOLATION_FILL = "rgba(120,120,120,0.13)"
LEGEND_FONT = 13
FONT = 13


def mode_style(mode: str | None) -> ModeStyle:
    return MODE_STYLES.get(mode or "", UNKNOWN_MODE)


def mode_order(mode: str | None) -> int:
    return MODES.index(mode) if mode in MODES else len(MODES)
