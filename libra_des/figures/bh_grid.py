"""B x H grid of the configuration simulator: intra-pool imbalance and exchange bytes.

Runs ``libra-des plan --json`` on the 1M corpus (P = 8, VRSP, GBS 128, cp 8) for block sizes
B and head splits H; each cell is TAP on the heaviest pool, averaged over the windows.
Quick mode replays 3 windows instead of 20.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.colors import LogNorm, Normalize

from libra_des.figures import common

NAME = "bh_grid"
BLOCKS = (4096, 8192, 16384, 32768, 65536)
HEADS = (1, 2, 4, 8)


def heatmap(ax: Any, values: np.ndarray, title: str, fmt: str, norm: Normalize) -> Any:
    """Annotated heat map; both colour maps are dark at the low end, so text turns white."""
    image = ax.imshow(values, cmap="viridis", norm=norm, aspect="auto", origin="lower")
    for (i, j), v in np.ndenumerate(values):
        ax.text(j, i, format(v, fmt), ha="center", va="center", fontsize=8,
                color="white" if norm(v) < 0.5 else "black")
    ax.set_xticks(range(len(BLOCKS)), [f"{b // 1024}K" for b in BLOCKS])
    ax.set_yticks(range(len(HEADS)), [str(h) for h in HEADS])
    ax.set_xlabel("block size B (tokens)")
    ax.set_ylabel("head split H")
    ax.set_title(title)
    return image


def make(opts: common.FigOptions) -> Path:
    windows = 3 if opts.quick else 20
    data = common.plan_json(opts, f"{NAME}/1m", [
        "--workload", "longctx-1m", "--policy", "vrsp", "--pool-size", "8", "--gbs", "128",
        "--block-size", ",".join(map(str, BLOCKS)), "--heads-split", ",".join(map(str, HEADS)),
        "--windows", str(windows),
    ])
    rows = {(r["heads_split"], r["block_size"]): r for r in data["results"]}
    intra = np.array([[rows[(h, b)]["intra_pool_imbalance"] for b in BLOCKS] for h in HEADS])
    gbytes = np.array([[rows[(h, b)]["exchange_bytes_per_layer"] / 1e9 for b in BLOCKS]
                       for h in HEADS])
    fig, (ax_i, ax_b) = common.new_figure(2, width=5.4)
    # Imbalance spans orders of magnitude (a single huge tile overshoots): log colours.
    pct = np.maximum(intra * 100, 1e-3)
    fig.colorbar(heatmap(ax_i, pct, "Intra-pool imbalance R - 1 (%)", ".2f",
                         LogNorm(pct.min(), pct.max())), ax=ax_i, label="R - 1 (%, log)")
    fig.colorbar(heatmap(ax_b, gbytes, "Forward exchange per layer (GB)", ".1f",
                         Normalize(gbytes.min(), gbytes.max())), ax=ax_b, label="GB per layer")
    fig.suptitle(f"TAP B x H grid, 1M corpus, P = 8, GBS 128, heaviest pool, "
                 f"{windows} windows")
    return common.save(fig, opts, NAME)


if __name__ == "__main__":
    sys.exit(common.script_main(make, __doc__))
