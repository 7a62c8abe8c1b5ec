"""Rich tables for ``libra-des profile show`` and ``profile compare``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from libra_des.api.profiles import profile_predictions, sample_groups

if TYPE_CHECKING:
    from libra_des.api.profiles import Fit, Profile, Sourced


def table(title: str, *columns: str) -> Table:
    out = Table(title=title, title_justify="left")
    for col in columns:
        out.add_column(col, overflow="fold")
    return out


def num(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"


def sourced_rows(tab: Table, items: dict[str, Sourced | None]) -> None:
    for name, item in items.items():
        if item is not None:
            tab.add_row(name, num(item.value), item.source)


def show_tables(p: Profile) -> list[Table]:
    head = table(f"profile {p.name} (schema {p.schema_version})", "field", "value")
    ic = p.interconnect
    for key, value in (
        ("device", p.device),
        ("date", p.date),
        ("source", p.source),
        ("interconnect", f"{ic.name} (topology {ic.topology or '-'})"),
        ("nvls ops", ", ".join(ic.nvls_ops) or "-"),
        *((f"software.{k}", v) for k, v in sorted(p.software.items())),
    ):
        head.add_row(key, value)
    numbers = table("datasheet numbers", "quantity", "value", "source")
    sourced_rows(numbers, {f"peak {k}": v for k, v in p.peaks})
    links = ("intra_bw", "inter_bw", "intra_latency", "inter_latency")
    sourced_rows(numbers, {k: getattr(ic, k) for k in links})
    sourced_rows(numbers, {f"kernel {k}": v for k, v in p.kernels})
    return [head, numbers, fit_table(p.fits), sample_table(p)]


def fit_summary(f: Fit) -> str:
    if f.model == "alpha_beta":
        return "; ".join(
            f"from {pc.start:.3g} B: alpha {pc.alpha_step * 1e6:.3g} us/step, eta {pc.eta:.3f}"
            for pc in f.pieces
        )
    return ", ".join(f"{k} {v:.4g}" for k, v in sorted(f.params.items()))


def fit_table(fits: tuple[Fit, ...]) -> Table:
    tab = table(
        "fits",
        "op",
        "group",
        "per node",
        "alg/dtype",
        "parameters",
        "n",
        "fit |err| %",
        "cv median/p90 %",
        "source",
    )
    for f in fits:
        cv = (
            f"{f.cv_median_abs_pct_error:.2f} / {f.cv_p90_abs_pct_error:.2f}"
            if f.cv_median_abs_pct_error is not None and f.cv_p90_abs_pct_error is not None
            else "-"
        )
        tab.add_row(
            f.op,
            str(f.group),
            str(f.gpus_per_node or f.group),
            f.algorithm or f.dtype or "-",
            fit_summary(f),
            str(f.n),
            num(f.fit_median_abs_pct_error),
            cv,
            f.source,
        )
    return tab


def sample_table(p: Profile) -> Table:
    tab = table(f"samples ({len(p.samples)})", "op", "group", "per node", "count", "sizes", "files")
    for g in sample_groups(p):
        tab.add_row(g.op, str(g.group), str(g.gpus_per_node), str(g.count),
                    f"{g.smallest:.4g} .. {g.largest:.4g}", ", ".join(g.files))
    return tab


def compare_tables(a: Profile, b: Profile) -> list[Table]:
    nums = table(f"{a.name} vs {b.name}", "quantity", a.name, b.name, "b / a")
    rows = [(f"peak {k}", va, getattr(b.peaks, k)) for k, va in a.peaks]
    rows += [
        (k, getattr(a.interconnect, k), getattr(b.interconnect, k))
        for k in ("intra_bw", "inter_bw", "intra_latency", "inter_latency")
    ]
    for name, va, vb in rows:
        if va is not None and vb is not None:
            ratio = vb.value / va.value if va.value else float("nan")
            nums.add_row(name, num(va.value), num(vb.value), f"{ratio:.3f}")
    preds = table(
        "predictions, each profile on its own machine",
        "query",
        f"{a.name} s",
        f"{b.name} s",
        "b / a",
        f"{a.name} how",
        f"{b.name} how",
    )
    for qa, qb in zip(profile_predictions(a), profile_predictions(b), strict=True):
        preds.add_row(qa.label, f"{qa.seconds:.4g}", f"{qb.seconds:.4g}",
                      f"{qb.seconds / qa.seconds:.3f}", qa.how, qb.how)
    return [nums, preds]
