"""Two small SVG charts, written by hand (no plotting library needed): lines and grouped bars."""

from __future__ import annotations

from html import escape

COLORS = ("#d62728", "#ff7f0e", "#1f77b4", "#2ca02c", "#9467bd")
W, H = 760, 380
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 40, 90


def _nice_step(span: float, ticks: int = 5) -> float:
    raw = span / ticks
    magnitude = 10 ** len(str(int(raw))) / 10 if raw >= 1 else 1
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * magnitude:
            return m * magnitude
    return 10 * magnitude


def _fmt(v: float) -> str:
    if v >= 1_000_000:
        return f"{v / 1_000_000:g}M"
    if v >= 1_000:
        return f"{v / 1_000:g}K"
    return f"{v:g}"


def _short(v: float) -> str:
    """Three significant digits: 60.8M, 4.52M, 913K."""
    for size, suffix in ((1_000_000, "M"), (1_000, "K")):
        if v >= size:
            return f"{v / size:.3g}{suffix}"
    return f"{v:.3g}"


def _frame(title: str, y_max: float, y_label: str) -> tuple[list[str], float]:
    step = _nice_step(y_max)
    top = step * (int(y_max / step) + 1)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{W}" height="{H}" fill="white"/>',
        f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="15">{escape(title)}</text>',
        f'<text x="16" y="{TOP + (H - TOP - BOTTOM) / 2}" transform="rotate(-90 16 {TOP + (H - TOP - BOTTOM) / 2})" '
        f'text-anchor="middle">{escape(y_label)}</text>',
    ]
    v = 0.0
    while v <= top + 1e-9:
        y = _y(v, top)
        out.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_fmt(v)}</text>')
        v += step
    out.append(f'<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{H - BOTTOM}" stroke="#333"/>')
    out.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{H - BOTTOM}" y2="{H - BOTTOM}" stroke="#333"/>')
    return out, top


def _y(v: float, top: float) -> float:
    return H - BOTTOM - (H - TOP - BOTTOM) * v / top


def _legend(out: list[str], labels: list[str]) -> None:
    x, y = LEFT, H - BOTTOM + 42
    for i, label in enumerate(labels):
        col, row = i % 2, i // 2
        lx, ly = x + col * 340, y + row * 18
        out.append(f'<rect x="{lx}" y="{ly - 9}" width="14" height="10" fill="{COLORS[i % len(COLORS)]}"/>')
        out.append(f'<text x="{lx + 20}" y="{ly}">{escape(label)}</text>')


def line_chart(
    title: str, series: list[tuple[str, list[float]]], *, x_label: str, y_label: str, marks=()
) -> str:
    y_max = max((max(values) for _label, values in series if values), default=1) or 1
    for _label, value in marks:
        y_max = max(y_max, value)
    out, top = _frame(title, y_max, y_label)
    n = max((len(v) for _l, v in series), default=1)
    plot_w = W - LEFT - RIGHT

    def x(i: float) -> float:
        return LEFT + plot_w * i / max(n - 1, 1)

    step = _nice_step(n)
    i = 0.0
    while i < n:
        out.append(f'<text x="{x(i):.1f}" y="{H - BOTTOM + 16}" text-anchor="middle">{int(i)}</text>')
        i += step
    out.append(
        f'<text x="{LEFT + plot_w / 2}" y="{H - BOTTOM + 30}" text-anchor="middle">{escape(x_label)}</text>'
    )
    for label, value in marks:
        y = _y(value, top)
        out.append(
            f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#888" stroke-dasharray="5,4"/>'
        )
        out.append(
            f'<text x="{W - RIGHT - 4}" y="{y - 4:.1f}" text-anchor="end" fill="#555">{escape(label)}</text>'
        )
    for k, (_label, values) in enumerate(series):
        points = " ".join(f"{x(i):.1f},{_y(v, top):.1f}" for i, v in enumerate(values))
        out.append(
            f'<polyline fill="none" stroke="{COLORS[k % len(COLORS)]}" stroke-width="1.8" points="{points}"/>'
        )
    _legend(out, [label for label, _v in series])
    out.append("</svg>")
    return "\n".join(out) + "\n"


def bar_chart(title: str, groups: list[str], bars: list[tuple[str, list[float]]], *, y_label: str) -> str:
    """``bars``: (label, one value per group); drawn side by side in each group."""
    y_max = max((max(v) for _l, v in bars), default=1) or 1
    out, top = _frame(title, y_max, y_label)
    plot_w = W - LEFT - RIGHT
    group_w = plot_w / max(len(groups), 1)
    bar_w = group_w * 0.7 / max(len(bars), 1)
    for g, name in enumerate(groups):
        gx = LEFT + g * group_w + group_w * 0.15
        for b, (_label, values) in enumerate(bars):
            v = values[g]
            y = _y(v, top)
            bx = gx + b * bar_w
            out.append(
                f'<rect x="{bx:.1f}" y="{y:.1f}" width="{bar_w - 2:.1f}" height="{H - BOTTOM - y:.1f}" '
                f'fill="{COLORS[(b + 2) % len(COLORS)]}"/>'
            )
            out.append(
                f'<text x="{bx + bar_w / 2:.1f}" y="{y - 3:.1f}" text-anchor="middle" font-size="10">{_fmt(v)}</text>'
            )
        out.append(
            f'<text x="{LEFT + g * group_w + group_w / 2:.1f}" y="{H - BOTTOM + 16}" text-anchor="middle">{escape(name)}</text>'
        )
    x0 = LEFT
    for b, (label, _v) in enumerate(bars):
        lx, ly = x0 + b * 300, H - BOTTOM + 42
        out.append(
            f'<rect x="{lx}" y="{ly - 9}" width="14" height="10" fill="{COLORS[(b + 2) % len(COLORS)]}"/>'
        )
        out.append(f'<text x="{lx + 20}" y="{ly}">{escape(label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
