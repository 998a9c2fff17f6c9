"""The layout check of a drawn figure: can a reader read it?

Every visible text (titles, axis and tick labels, offset texts, legend entries and titles,
figure texts, annotations, `no_data` boxes) lies inside the canvas and overlaps no other
text; every legend entry names something a panel shows. `check(fig, name)` lists what is
wrong; `save` runs the same check on the PNG's own draw (`on_draw`), so it measures with the
renderer of the saved output and changes nothing that is drawn.

Boxes are the texts' layout boxes (their line height, not only the ink); boxes that only
touch (adjacent tick labels) pass: an overlap or an overhang counts from TOLERANCE_PT.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np
from matplotlib.collections import Collection
from matplotlib.colors import to_rgb, to_rgba
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.text import Annotation, Text
from matplotlib.transforms import Bbox

TOLERANCE_PT = 0.25
NO_LINE = ("None", "none", "", " ")


@dataclass(frozen=True)
class Label:
    kind: str  # "title", "offset text", "x tick label", ...
    what: str  # how a reader finds it: 'x tick label "0.5" (panel "symmetry")'
    box: Bbox  # display units, axis-aligned
    corners: np.ndarray  # (4, 2): the rotated rectangle (the box itself when not rotated)
    rotated: bool


def check(fig: Figure, name: str = "figure", renderer=None) -> list[str]:
    """The layout problems of `fig` ("NAME: ..."), none when a reader can read it. Without a
    renderer the figure is drawn first (without output) to place its texts."""
    if renderer is None:
        fig.draw_without_rendering()
        renderer = fig._get_renderer()  # matplotlib's own way to a renderer without output
    return [f"{name}: {p}" for p in problems(fig, renderer)]


@contextlib.contextmanager
def on_draw(fig: Figure):
    """The problems of the last draw of `fig` in the list yielded (for a savefig)."""
    found: list[str] = []

    def collect(event):  # the last draw is the one written
        found[:] = problems(fig, event.renderer)

    cid = fig.canvas.mpl_connect("draw_event", collect)
    try:
        yield found
    finally:
        fig.canvas.mpl_disconnect(cid)


def problems(fig: Figure, renderer) -> list[str]:
    tol = renderer.points_to_pixels(TOLERANCE_PT)
    labels = visible_texts(fig, renderer)
    return [
        *outside(labels, fig.bbox, tol, renderer),
        *overlaps(labels, tol),
        *offsets_by_titles(labels, tol),
        *legend_problems(fig, renderer),
    ]


# ---- the texts ------------------------------------------------------------------------------


def visible_texts(fig: Figure, renderer) -> list[Label]:
    found = []  # (kind, panel, Text)
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        panel = f' (panel "{ax.get_title()}")' if ax.get_title() else ""
        for title in (ax.title, getattr(ax, "_left_title", None), getattr(ax, "_right_title", None)):
            found.append(("title", "", title))
        if ax.axison:
            for axis, xy in ((ax.xaxis, "x"), (ax.yaxis, "y")):
                if not axis.get_visible():
                    continue
                found += [(f"{xy} label", panel, axis.label), ("offset text", panel, axis.offsetText)]
                for tick in axis._update_ticks():  # the ticks inside the view: the ones drawn
                    found += [(f"{xy} tick label", panel, tick.label1), (f"{xy} tick label", panel, tick.label2)]
        found += [("annotation" if isinstance(t, Annotation) else "text", panel, t) for t in ax.texts]
        if ax.get_legend() is not None:
            found += legend_texts(ax.get_legend(), panel)
    found += [("figure text", "", t) for t in fig.texts]
    for legend in fig.legends:
        found += legend_texts(legend, "")
    labels, seen = [], set()
    for kind, panel, text in found:
        if text is None or id(text) in seen:
            continue
        seen.add(id(text))
        label = measure(kind, f'{kind} "{text.get_text()}"{panel}', text, renderer)
        if label is not None:
            labels.append(label)
    return labels


def legend_texts(legend: Legend, panel: str) -> list[tuple[str, str, Text]]:
    if not legend.get_visible():
        return []
    return [("legend title", panel, legend.get_title())] + [("legend entry", panel, t) for t in legend.texts]


def measure(kind: str, what: str, text: Text, renderer) -> Label | None:
    """The text's box (with its bbox patch, e.g. `no_data`'s), None when nothing is drawn."""
    if not text.get_visible() or not text.get_text().strip():
        return None
    if to_rgba(text.get_color())[3] * (1 if text.get_alpha() is None else text.get_alpha()) == 0:
        return None
    if isinstance(text, Annotation) and not text._check_xy(renderer):
        return None  # annotates a point outside its axes: not drawn
    box = text.get_window_extent(renderer)
    patch = text.get_bbox_patch()
    angle = text.get_rotation() % 90
    rotated = not np.isclose(angle, 0) and not np.isclose(angle, 90)
    if patch is not None and not rotated:
        box = Bbox.union([box, patch.get_window_extent(renderer)])
    if text.get_clip_on():
        clip = clip_box(text)
        if clip is not None:
            box = Bbox.intersection(box, clip)
            if box is None:
                return None
    corners = rotated_corners(text, box, renderer) if rotated else box.corners()[[0, 2, 3, 1]]  # in turn
    return Label(kind, what, box, corners, rotated)


def clip_box(text: Text) -> Bbox | None:
    boxes = []
    if text.get_clip_box() is not None:
        boxes.append(text.get_clip_box())
    path = text.get_clip_path()
    if path is not None:
        boxes.append(path.get_fully_transformed_path().get_extents())
    return Bbox.intersection(*boxes) if len(boxes) == 2 else (boxes[0] if boxes else None)


def rotated_corners(text: Text, box: Bbox, renderer) -> np.ndarray:
    """The rotated rectangle of a text: its unrotated size turned about the centre of its box."""
    probe = Text(0, 0, text.get_text(), fontproperties=text.get_fontproperties(), linespacing=text.get_linespacing())
    probe.set_figure(text.get_figure(root=True))
    size = probe.get_window_extent(renderer)
    w, h = size.width / 2, size.height / 2
    a = np.deg2rad(text.get_rotation())
    turn = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
    local = np.array([[-w, -h], [w, -h], [w, h], [-w, h]])
    return local @ turn.T + np.array([(box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2])


# ---- inside the canvas and clear of each other ----------------------------------------------


def outside(labels: list[Label], canvas: Bbox, tol: float, renderer) -> list[str]:
    out = []
    for label in labels:
        b = label.box
        over = {
            "left": canvas.x0 - b.x0,
            "right": b.x1 - canvas.x1,
            "bottom": canvas.y0 - b.y0,
            "top": b.y1 - canvas.y1,
        }
        for edge, px in over.items():
            if px > tol:
                pt = px / renderer.points_to_pixels(1.0)
                out.append(f"{label.what} is cut off at the {edge} edge of the figure (by {pt:.1f} pt)")
    return out


def overlaps(labels: list[Label], tol: float) -> list[str]:
    if len(labels) < 2:
        return []
    b = np.array([lab.box.extents for lab in labels])  # x0, y0, x1, y1
    dx = np.minimum(b[:, None, 2], b[None, :, 2]) - np.maximum(b[:, None, 0], b[None, :, 0])
    dy = np.minimum(b[:, None, 3], b[None, :, 3]) - np.maximum(b[:, None, 1], b[None, :, 1])
    hit = np.triu((dx > tol) & (dy > tol), k=1)
    out = []
    for i, j in zip(*np.nonzero(hit)):
        a, c = labels[i], labels[j]
        if (a.rotated or c.rotated) and not rectangles_overlap(a.corners, c.corners, tol):
            continue
        out.append(f"{a.what} overlaps {c.what}")
    return out


def offsets_by_titles(labels: list[Label], tol: float) -> list[str]:
    """An offset text ("+1.032e1", "1e6") in a title's row, less than a line height from it,
    reads as part of the title even when their boxes do not overlap."""
    out = []
    for offset in (lab for lab in labels if lab.kind == "offset text"):
        for title in (lab for lab in labels if lab.kind == "title"):
            a, b = offset.box, title.box
            rows = min(a.y1, b.y1) - max(a.y0, b.y0)
            gap = max(b.x0 - a.x1, a.x0 - b.x1)
            if rows > tol and -tol <= gap < a.height:  # (an overlap is reported as one)
                out.append(f"{offset.what} sits in the row of {title.what}, next to it")
    return out


def rectangles_overlap(p: np.ndarray, q: np.ndarray, tol: float) -> bool:
    """Separating-axis test of two convex quadrilaterals, overlapping by more than tol."""
    for poly in (p, q):
        for k in range(4):
            edge = poly[(k + 1) % 4] - poly[k]
            normal = np.array([-edge[1], edge[0]]) / np.hypot(*edge)
            sp, sq = p @ normal, q @ normal
            if min(sp.max(), sq.max()) - max(sp.min(), sq.min()) <= tol:
                return False
    return True


# ---- the legend names only what is drawn -----------------------------------------------------


def legend_problems(fig: Figure, renderer) -> list[str]:
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_visible())]
    drawn = [a for ax in fig.axes if ax.get_visible() for a in shown_artists(ax, renderer)]
    out = []
    for legend in legends:
        if legend is None or not legend.get_visible():
            continue
        for handle, text in zip(legend.legend_handles, legend.texts):
            if handle is None or not text.get_text().strip():
                continue
            matches = [a for a in drawn if same_look(handle, a)]
            if not matches:
                out.append(f'legend entry "{text.get_text()}" names nothing drawn in any panel')
            elif all(hidden(a, [d for d in drawn if d not in matches], renderer) for a in matches):
                out.append(
                    f'legend entry "{text.get_text()}" names nothing visible: what it names lies exactly '
                    "under another line of the same colour"
                )
    return out


def shown_artists(ax, renderer) -> list:
    """The lines, patches and collections of ax that put something inside its view."""
    view = ax.bbox
    out = []
    for artist in (*ax.lines, *ax.patches, *ax.collections):
        if not artist.get_visible():
            continue
        if isinstance(artist, Line2D):
            xy = artist.get_transform().transform(np.asarray(artist.get_xydata(), dtype=float))
            xy = xy[np.isfinite(xy).all(axis=1)]
            crosses = artist.get_linestyle() not in NO_LINE and artist.get_transform().transform_path(
                artist.get_path()
            ).intersects_bbox(view)
            if not len(xy) or not (inside(xy, view).any() or crosses):
                continue
        elif isinstance(artist, Collection) and not len(artist.get_paths()):
            continue
        out.append(artist)
    return out


def inside(xy: np.ndarray, box: Bbox) -> np.ndarray:
    return (xy[:, 0] >= box.x0) & (xy[:, 0] <= box.x1) & (xy[:, 1] >= box.y0) & (xy[:, 1] <= box.y1)


def colours(artist) -> set[tuple]:
    """The opaque-enough colours an artist shows (as RGB, rounded)."""
    if isinstance(artist, Line2D):
        raw = [artist.get_color()]
        if artist.get_marker() not in NO_LINE:
            raw += [artist.get_markerfacecolor(), artist.get_markeredgecolor()]
    elif isinstance(artist, Patch):
        raw = [artist.get_facecolor(), artist.get_edgecolor()]
    elif isinstance(artist, Collection):
        raw = [*artist.get_facecolor(), *artist.get_edgecolor()]
    else:
        return set()
    return {rgb(c) for c in raw if to_rgba(c)[3] > 0}


def rgb(colour) -> tuple:
    return tuple(round(v, 3) for v in to_rgb(colour))


def grey(colour) -> bool:
    r, g, b = to_rgb(colour)
    return r == g == b


def filled(line: Line2D) -> bool:
    face = line.get_markerfacecolor()
    return not (isinstance(face, str) and face == "none") and to_rgba(face)[3] > 0


def same_look(handle, artist) -> bool:
    """Whether `artist` is drawn as the legend `handle` shows. A line handle: its colour, its
    line style if it draws a line, its marker (and fill) if it has one; a grey marker-only
    handle is a key of shape (the points come in their group's colours, filled or hollow;
    a hollow key names hollow points). A patch handle: its colour on anything drawn."""
    if isinstance(handle, Line2D):
        if not isinstance(artist, Line2D):
            return False
        draws_line = handle.get_linestyle() not in NO_LINE
        marker = handle.get_marker() not in NO_LINE
        if draws_line and artist.get_linestyle() != handle.get_linestyle():
            return False
        key = marker and not draws_line and grey(handle.get_color())
        if marker and artist.get_marker() != handle.get_marker():
            return False
        if marker and filled(artist) != filled(handle) and not (key and filled(handle)):
            return False
        return key or rgb(handle.get_color()) == rgb(artist.get_color())
    if isinstance(handle, (Patch, Collection)):
        return bool(colours(handle) & colours(artist))
    return True  # a kind of handle this check does not know: not judged


def hidden(line, others: list, renderer) -> bool:
    """Whether a line adds nothing to what is drawn: one of `others` (what another legend
    entry names, or nothing does), opaque, solid, of its colour and at least as wide, runs
    through exactly its points (e.g. a dashed run whose curve equals another run's)."""
    if not isinstance(line, Line2D) or line.get_marker() not in NO_LINE:
        return False
    xy = line.get_transform().transform(np.asarray(line.get_xydata(), dtype=float))
    tol = renderer.points_to_pixels(TOLERANCE_PT)
    for other in others:
        if (
            other is line
            or not isinstance(other, Line2D)
            or other.axes is not line.axes
            or other.get_linestyle() != "-"
            or other.get_alpha() not in (None, 1)
            or other.get_linewidth() < line.get_linewidth()
            or rgb(other.get_color()) != rgb(line.get_color())
        ):
            continue
        oxy = other.get_transform().transform(np.asarray(other.get_xydata(), dtype=float))
        if oxy.shape == xy.shape and np.nanmax(np.abs(oxy - xy), initial=0) <= tol:
            return True
    return False
