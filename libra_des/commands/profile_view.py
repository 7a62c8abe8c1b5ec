"""Rich tables for ``libra-des profile show`` and ``profile compare``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from libra_des.api.numbers import sig3, with_unit
from libra_des.api.profiles import profile_predictions, sample_groups

if TYPE_CHECKING:
    from libra_des.api.profiles import Fit, Profile, Sourced


def table(title: str, *columns: str) -> Table:
    out = Table(title=title, title_justify="left")
    for col in columns:
        out.add_column(col, overflow="fold")
    return out


def num(x: float | None, name: str = "") -> str:
    """A profile number in its unit (from its name: rates, bandwidths, latencies)."""
    return "-" if x is None else with_unit(x, unit_for(name))


def unit_for(name: str) -> str:
    """A profile quantity's unit from its name: ``peak *_flops`` rates, ``*_half_flops``
    sizes, ``*_bw`` and ``*_bytes_per_s`` bandwidths, ``*_latency`` and ``*_s`` times."""
    if name.endswith(("_bw", "bytes_per_s")):
        return "B/s"
    if name.endswith(("latency", "_s")):
        return "s"
    if name.endswith("flops") and name.startswith("peak "):
        return "FLOP/s"
    # gemm_half_flops is a GEMM's size; attention_bwd_flops a ratio of FLOPs (no unit).
    return "FLOPs" if name.endswith("half_flops") else ""


def sourced_rows(tab: Table, items: dict[str, Sourced | None]) -> None:
    for name, item in items.items():
        if item is not None:
            tab.add_row(name, num(item.value, name), item.source)


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
            f"from {with_unit(pc.start, 'B')}: alpha {with_unit(pc.alpha_step, 's')}/step, "
            f"eta {sig3(pc.eta)}"
            for pc in f.pieces
        )
    return ", ".join(f"{k} {with_unit(v)}" for k, v in sorted(f.params.items()))


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
            f"{sig3(f.cv_median_abs_pct_error)} / {sig3(f.cv_p90_abs_pct_error)}"
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
                    f"{with_unit(g.smallest)} .. {with_unit(g.largest)}", ", ".join(g.files))
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
            nums.add_row(name, num(va.value, name), num(vb.value, name), sig3(ratio))
    preds = table(
        "predictions, each profile on its own machine",
        "query",
        a.name,
        b.name,
        "b / a",
        f"{a.name} how",
        f"{b.name} how",
    )
    for qa, qb in zip(profile_predictions(a), profile_predictions(b), strict=True):
        preds.add_row(qa.label, with_unit(qa.seconds, "s"), with_unit(qb.seconds, "s"),
                      sig3(qb.seconds / qa.seconds), qa.how, qb.how)
    return [nums, preds]
