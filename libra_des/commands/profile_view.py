"""Rich tables for ``libra-des profile show`` and ``profile compare``."""

from __future__ import annotations

from collections import Counter

from rich.table import Table

from libra_des.api import CostModel, Fit, Profile, Sourced, group_samples, sample_size

GIB, MIB = float(1 << 30), float(1 << 20)


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
    for (op, group, gpn, _), ss in group_samples(p.samples).items():
        sizes = [sample_size(s) for s in ss]
        files = Counter(s.source for s in ss)
        tab.add_row(
            op,
            str(group),
            str(gpn),
            str(len(ss)),
            f"{min(sizes):.4g} .. {max(sizes):.4g}",
            ", ".join(sorted(files)),
        )
    return tab


def queries(model: CostModel) -> list[tuple[str, float, str]]:
    """(label, seconds, how) for a fixed set of questions asked of every profile."""
    out: list[tuple[str, float, str]] = []
    for op, size, group, gpn in (
        ("all_reduce", 64 * MIB, 8, 8),
        ("all_reduce", 1 * GIB, 8, 8),
        ("all_gather", 64 * MIB, 8, 8),
        ("reduce_scatter", 64 * MIB, 8, 8),
        ("all_reduce", 1 * GIB, 16, 8),
        ("send_recv", 64 * MIB, 2, 2),
        ("send_recv", 64 * MIB, 2, 1),
    ):
        res = model.collective(op, size, group, gpn)
        out.append(
            (
                f"{op} {size / MIB:.0f} MiB on {group} ({gpn}/node)",
                res.seconds,
                f"{res.algorithm}, busbw {res.busbw_gbs:.0f} GB/s",
            )
        )
    for length in (1024, 8192, 32768):
        secs = model.attention_docs([length] * (32768 // length), 64, 8, 128)
        out.append((f"attention fwd, 32K tokens in {length}-token docs, 64 heads", secs, "-"))
    secs = float(model.gemm(4096, 4096, 4096))
    out.append(("gemm 4096^3 bf16", secs, f"{2 * 4096**3 / secs / 1e12:.0f} TFLOP/s"))
    return out


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
    qa = queries(CostModel(a, a.interconnect.fabric(nodes=2)))
    qb = queries(CostModel(b, b.interconnect.fabric(nodes=2)))
    for (label, sa, ha), (_, sb, hb) in zip(qa, qb, strict=True):
        preds.add_row(label, f"{sa:.4g}", f"{sb:.4g}", f"{sb / sa:.3f}", ha, hb)
    return [nums, preds]
