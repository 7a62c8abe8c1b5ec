"""B x H grid of the configuration simulator: intra-pool imbalance and exchange bytes.

Replays the configuration simulator (``libra-des plan``, :func:`libra_des.api.replay_plans`)
on the 1M corpus (P = 8, VRSP, GBS 128, CP 8) for block sizes
B and head splits H; each cell is TAP on the heaviest pool, averaged over the windows. TAP
stops refining a placement once the pool is within its slack tau (``balancer.slack``, 3%
by default), so cells whose imbalance sits near tau are at the slack, not at a limit of the
B x H choice; they are marked with a dot. Quick mode replays 3 windows instead of 20.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from libra_des.report.figures import text_colour
from paper_figs import common

if TYPE_CHECKING:
    from matplotlib.colors import Normalize

NAME = "bh_grid"
TITLE = "TAP block size x head split grid"
#: A cell "sits at the slack" within this relative distance of tau (our choice).
AT_SLACK = 0.25


def heatmap(
    ax: Any,
    values: np.ndarray,
    blocks: tuple[int, ...],
    heads: tuple[int, ...],
    fmt: str,
    norm: Normalize,
    marks: np.ndarray,
) -> Any:
    """Annotated heat map; each label black or white by its cell colour's luminance."""
    image = ax.imshow(values, cmap="viridis", norm=norm, aspect="auto", origin="lower")
    for (i, j), v in np.ndenumerate(values):
        dot = " •" if marks[i, j] else ""
        ax.text(
            j,
            i,
            format(v, fmt) + dot,
            ha="center",
            va="center",
            fontsize=8,
            color=text_colour(image.cmap(norm(v))),
        )
    ax.set_xticks(range(len(blocks)), [f"{b // 1024}K" for b in blocks])
    ax.set_yticks(range(len(heads)), [str(h) for h in heads])
    return image


def make(opts: common.FigOptions) -> common.Drawn:
    from matplotlib.colors import LogNorm, Normalize

    windows = opts.pick(20, 3, 1)
    blocks = opts.pick(
        (4096, 8192, 16384, 32768, 65536), (4096, 8192, 16384, 32768, 65536), (16384, 65536)
    )
    heads = opts.pick((1, 2, 4, 8), (1, 2, 4, 8), (1, 2))
    gbs = opts.pick(128, 128, 16)
    data = common.replay_plans(
        opts,
        NAME,
        workload="paper-1m",
        policies=["vrsp"],
        pool_sizes=[8],
        gbs=gbs,
        block_sizes=blocks,
        heads_splits=heads,
        windows=windows,
    )
    tau = float(data["slack"])
    rows = {(r["heads_split"], r["block_size"]): r for r in data["results"]}
    intra = np.array([[rows[(h, b)]["intra_pool_imbalance"] for b in blocks] for h in heads])
    gbytes = np.array(
        [[rows[(h, b)]["exchange_bytes_per_layer"] / 1e9 for b in blocks] for h in heads]
    )
    at_slack = np.abs(intra - tau) <= AT_SLACK * tau
    fig, (ax_i, ax_b) = common.new_figure(2, width=5.4)
    pct = np.maximum(intra * 100, 1e-3)  # spans orders of magnitude: log colours
    fig.colorbar(
        heatmap(ax_i, pct, blocks, heads, ".2f", LogNorm(pct.min(), pct.max() * 1.01), at_slack),
        ax=ax_i,
        label="R - 1 (%, log colour scale)",
    )
    fig.colorbar(
        heatmap(
            ax_b,
            gbytes,
            blocks,
            heads,
            ".1f",
            Normalize(gbytes.min(), gbytes.max() * 1.01 + 1e-12),
            at_slack,
        ),
        ax=ax_b,
        label="GB per layer",
    )
    common.label_axes(
        ax_i,
        "block size B (tokens)",
        "head split H (shards per head group)",
        f"Intra-pool imbalance R - 1 (%); • = at the TAP slack {tau:.0%}",
    )
    common.label_axes(
        ax_b,
        "block size B (tokens)",
        "head split H (shards per head group)",
        "Forward exchange per layer (GB)",
    )
    fig.suptitle(f"TAP B x H grid, 1M corpus, P = 8, GBS {gbs}, heaviest pool, {windows} windows")
    cells = [
        {
            "block_size": b,
            "heads_split": h,
            "intra_pool_imbalance_percent": pct[i, j],
            "exchange_gb_per_layer": gbytes[i, j],
            "at_tap_slack": bool(at_slack[i, j]),
        }
        for i, h in enumerate(heads)
        for j, b in enumerate(blocks)
    ]
    text = common.caption(
        "plan --workload paper-1m (configuration simulator)",
        opts,
        "planner only",
        f"{int(at_slack.sum())} of {at_slack.size} cells sit "
        f"at the TAP slack tau = {tau:.0%} (marked •)",
    )
    return common.save(fig, opts, NAME, TITLE, text, cells)
