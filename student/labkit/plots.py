"""Small matplotlib helpers for the labs: heat maps, bar charts, 2-D vectors."""

from __future__ import annotations

import numpy as np

__all__ = ["heatmap", "bars", "vectors"]


def _numpy(value) -> np.ndarray:
    from labkit.checks import to_numpy

    return to_numpy(value, "plotted value").astype(np.float64)


def _axes(ax, figsize):
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


def heatmap(matrix, row_labels=None, col_labels=None, title="", ax=None,
            annotate=None, vmin=0.0, vmax=None, cmap="viridis"):
    """Draw a matrix of attention weights: rows are queries, columns keys.

    Args:
        matrix: 2-D array or tensor `(T_q, T_k)`.
        row_labels, col_labels: tick labels (tokens), or None.
        title: the axes title.
        ax: a matplotlib Axes to draw on; a new figure when None.
        annotate: write each value in its cell (default: when at most 12x12).
        vmin, vmax: colour range (weights: 0 to the largest value).
        cmap: matplotlib colour map.

    Returns:
        The matplotlib Axes.
    """
    values = _numpy(matrix)
    if values.ndim != 2:
        raise ValueError(f"heatmap expects a 2-D matrix, got shape {values.shape}.")
    rows, cols = values.shape
    ax = _axes(ax, (0.6 * cols + 2.0, 0.5 * rows + 1.5))
    finite = values[np.isfinite(values)]
    top = vmax if vmax is not None else (finite.max() if finite.size else 1.0)
    image = ax.imshow(values, cmap=cmap, vmin=vmin, vmax=top)
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    ax.set_xticks(range(cols))
    ax.set_yticks(range(rows))
    if col_labels is not None:
        ax.set_xticklabels(col_labels, rotation=45, ha="right")
    if row_labels is not None:
        ax.set_yticklabels(row_labels)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    if annotate is None:
        annotate = rows <= 12 and cols <= 12
    if annotate:
        middle = (vmin + top) / 2
        for i in range(rows):
            for j in range(cols):
                color = "black" if values[i, j] > middle else "white"
                ax.text(j, i, f"{values[i, j]:.2f}", ha="center", va="center",
                        color=color, fontsize=8)
    ax.set_title(title)
    return ax


def bars(weights, labels=None, title="", ax=None, ylabel="weight", hide_below=None):
    """Draw a vector of weights (e.g. one row of attention weights) as bars.

    Args:
        weights: 1-D array or tensor `(n,)`.
        labels: one label per bar (tokens), or None.
        title: the axes title.
        ax: a matplotlib Axes to draw on; a new figure when None.
        ylabel: the y-axis label.
        hide_below: write no value over the bars below it (e.g. 0.005: no "0.00"
            over the empty bars of a long distribution); None writes every value.

    Returns:
        The matplotlib Axes.
    """
    values = _numpy(weights).reshape(-1)
    ax = _axes(ax, (0.6 * len(values) + 2.0, 2.5))
    positions = np.arange(len(values))
    ax.bar(positions, values, color="tab:blue")
    for x, y in zip(positions, values):
        if hide_below is None or y >= hide_below:
            ax.text(x, y, f"{y:.2f}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(positions)
    if labels is not None:
        ax.set_xticklabels(labels)
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, max(1.0, float(values.max()) * 1.15) if values.size else 1.0)
    ax.set_title(title)
    return ax


def vectors(points, title="", ax=None):
    """Draw 2-D vectors as arrows from the origin, each with its name.

    Args:
        points: a dict ``{name: (x, y)}``.
        title: the axes title.
        ax: a matplotlib Axes to draw on; a new figure when None.

    Returns:
        The matplotlib Axes.
    """
    ax = _axes(ax, (5.5, 4.0))
    coordinates = {name: _numpy(xy).reshape(2) for name, xy in points.items()}
    colors = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple",
              "tab:brown", "tab:pink", "tab:gray"]
    for (name, (x, y)), color in zip(coordinates.items(), colors * 4):
        ax.annotate("", xy=(x, y), xytext=(0, 0),
                    arrowprops=dict(arrowstyle="->", color=color, lw=1.5))
        ax.plot([x], [y], "o", color=color, markersize=4,
                label=f"{name} ({x:.1f}, {y:.1f})")
    stacked = np.array(list(coordinates.values()) + [[0.0, 0.0]])
    low, high = stacked.min(axis=0), stacked.max(axis=0)
    margin = 0.1 * (high - low).max() + 0.5
    ax.set_xlim(low[0] - margin, high[0] + margin)
    ax.set_ylim(low[1] - margin, high[1] + margin)
    ax.legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize=9)
    ax.set_aspect("equal")
    ax.grid(alpha=0.3)
    ax.set_title(title)
    return ax
