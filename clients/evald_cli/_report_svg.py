"""Inline SVG figures for ``evald report``, drawn from numbers with the standard library
only: the page must open with no network and no script. Every figure is one ``<svg>``
element with a ``data-figure`` attribute naming its kind (the browser test counts them),
a ``<title>`` for screen readers and tooltips on its marks."""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

_FONT = 'font-family="system-ui, sans-serif" font-size="11"'
_BLUE = "#3b6fb6"
_RED = "#c0392b"
_GREEN = "#2e8b57"
_GREY = "#888"


def _svg(kind: str, width: int, height: int, title: str, body: list[str]) -> str:
    return (
        f'<svg data-figure="{escape(kind)}" xmlns="http://www.w3.org/2000/svg" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img">'
        f"<title>{escape(title)}</title>{''.join(body)}</svg>"
    )


def _text(x: float, y: float, text: str, *, anchor: str = "start", extra: str = "") -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" {_FONT} {extra}>'
        f"{escape(text)}</text>"
    )


def histogram(values: Sequence[float], *, title: str, unit: str = "ms", bins: int = 24) -> str:
    """Counts of ``values`` in equal-width bins, axis in ``unit``."""
    width, height, left, bottom, top = 420, 180, 40, 30, 12
    plot_w, plot_h = width - left - 10, height - bottom - top
    body: list[str] = []
    if not values:
        body.append(_text(width / 2, height / 2, "no latencies recorded", anchor="middle"))
        return _svg("histogram", width, height, title, body)
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    counts = [0] * bins
    for value in values:
        counts[min(bins - 1, int((value - low) / span * bins))] += 1
    peak = max(counts)
    bar_w = plot_w / bins
    for i, count in enumerate(counts):
        bar_h = plot_h * count / peak
        x0 = left + i * bar_w
        start, end = low + span * i / bins, low + span * (i + 1) / bins
        body.append(
            f'<rect x="{x0:.1f}" y="{top + plot_h - bar_h:.1f}" width="{max(bar_w - 1, 1):.1f}" '
            f'height="{bar_h:.1f}" fill="{_BLUE}"><title>{start:.1f}–{end:.1f} {unit}: '
            f"{count}</title></rect>"
        )
    axis_y = top + plot_h
    body.append(
        f'<line x1="{left}" y1="{axis_y}" x2="{left + plot_w}" y2="{axis_y}" stroke="#333"/>'
    )
    body.append(_text(left, axis_y + 14, f"{low:.0f}", anchor="middle"))
    body.append(_text(left + plot_w, axis_y + 14, f"{high:.0f} {unit}", anchor="end"))
    body.append(_text(left - 4, top + 8, str(peak), anchor="end"))
    body.append(
        _text(
            left + plot_w / 2, axis_y + 26, f"latency ({unit}), n = {len(values)}", anchor="middle"
        )
    )
    return _svg("histogram", width, height, title, body)


def confusion_matrix(
    labels: Sequence[str], rows: Sequence[Sequence[int]], unmapped: Sequence[int], *, title: str
) -> str:
    """Gold labels down, predicted across (plus an "unmapped" column); shade ∝ row share."""
    cell = 34 if len(labels) <= 8 else 18
    label_w = min(140, 8 + 7 * max((len(label) for label in labels), default=4))
    columns = [*labels, "unmapped"] if any(unmapped) else list(labels)
    width = label_w + cell * len(columns) + 20
    height = label_w + cell * len(labels) + 20
    body: list[str] = []
    for j, label in enumerate(columns):
        x = label_w + cell * j + cell / 2
        body.append(
            _text(
                x, label_w - 6, label[:18], extra=f'transform="rotate(-45 {x:.1f} {label_w - 6})"'
            )
        )
    for i, label in enumerate(labels):
        y = label_w + cell * i
        body.append(_text(label_w - 6, y + cell / 2 + 4, label[:18], anchor="end"))
        counts = [*rows[i], unmapped[i]] if len(columns) > len(labels) else list(rows[i])
        total = sum(counts) or 1
        for j, count in enumerate(counts):
            share = count / total
            colour = _GREEN if j == i else _RED
            body.append(
                f'<rect x="{label_w + cell * j}" y="{y}" width="{cell - 1}" height="{cell - 1}" '
                f'fill="{colour}" fill-opacity="{0.08 + 0.92 * share:.3f}">'
                f"<title>gold {escape(label)} → {escape(columns[j])}: {count}</title></rect>"
            )
            if cell >= 30:
                ink = "#fff" if share > 0.5 else "#222"
                body.append(
                    _text(
                        label_w + cell * j + cell / 2,
                        y + cell / 2 + 4,
                        str(count),
                        anchor="middle",
                        extra=f'fill="{ink}"',
                    )
                )
    return _svg("confusion-matrix", width, height, title, body)


@dataclass(frozen=True, slots=True)
class Bar:
    label: str
    value: float
    note: str = ""


def bars(
    items: Sequence[Bar], *, title: str, maximum: float | None = None, kind: str = "bars"
) -> str:
    """Horizontal bars (per-class F1, failures by reason)."""
    row, label_w, width = 18, 170, 460
    height = row * max(1, len(items)) + 16
    top = maximum if maximum is not None else max((b.value for b in items), default=1.0) or 1.0
    plot_w = width - label_w - 60
    body: list[str] = []
    for i, item in enumerate(items):
        y = 6 + i * row
        length = plot_w * (item.value / top if top else 0.0)
        body.append(_text(label_w - 6, y + 12, item.label[:28], anchor="end"))
        body.append(
            f'<rect x="{label_w}" y="{y + 2}" width="{max(length, 0.5):.1f}" height="{row - 5}" '
            f'fill="{_BLUE}"><title>{escape(item.label)}: {item.value:g} {escape(item.note)}'
            "</title></rect>"
        )
        shown = f"{item.value:.3f}" if maximum is not None else f"{item.value:g}"
        body.append(_text(label_w + length + 4, y + 12, shown))
    return _svg(kind, width, height, title, body)


@dataclass(frozen=True, slots=True)
class ForestRow:
    label: str
    delta: float
    lower: float
    upper: float
    significant: bool


def forest_plot(rows: Sequence[ForestRow], *, title: str) -> str:
    """Each delta with its interval against a zero line; red / green when significant."""
    row, label_w, width = 22, 260, 640
    height = row * max(1, len(rows)) + 40
    extent = max((max(abs(r.lower), abs(r.upper), abs(r.delta)) for r in rows), default=0.0)
    extent = extent * 1.1 or 0.05
    plot_w = width - label_w - 30

    def x(value: float) -> float:
        return label_w + plot_w * (value + extent) / (2 * extent)

    body: list[str] = []
    zero = x(0.0)
    body.append(
        f'<line x1="{zero:.1f}" y1="4" x2="{zero:.1f}" y2="{height - 26}" '
        'stroke="#333" stroke-dasharray="3,3"/>'
    )
    for i, r in enumerate(rows):
        y = 12 + i * row
        colour = (_GREEN if r.delta > 0 else _RED) if r.significant else _GREY
        body.append(_text(label_w - 8, y + 4, r.label[:42], anchor="end"))
        body.append(
            f'<line x1="{x(r.lower):.1f}" y1="{y}" x2="{x(r.upper):.1f}" y2="{y}" '
            f'stroke="{colour}" stroke-width="2"/>'
        )
        body.append(
            f'<circle cx="{x(r.delta):.1f}" cy="{y}" r="4" fill="{colour}"><title>'
            f"{escape(r.label)}: Δ {r.delta:+.4f} [{r.lower:+.4f}, {r.upper:+.4f}]"
            "</title></circle>"
        )
    axis = height - 22
    for value in (-extent, 0.0, extent):
        body.append(_text(x(value), axis + 12, f"{value:+.3f}", anchor="middle"))
    body.append(_text(label_w + plot_w / 2, axis + 28, "Δ = candidate − baseline", anchor="middle"))
    return _svg("forest-plot", width, height + 14, title, body)


def finite(values: Sequence[float | None]) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v)]
