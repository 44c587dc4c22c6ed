"""Matplotlib plots (Agg backend) of a benchmark document."""

from __future__ import annotations

from pathlib import Path

METRICS = [
    ("t_fwd_ms", "forward time [ms]", "time_fwd.png", True),
    ("t_fwdbwd_ms", "forward + backward time [ms]", "time_fwdbwd.png", True),
    ("peak_mem_mb", "peak memory rise, fwd+bwd [MiB]", "memory.png", True),
    ("saved_mb", "outputs + tensors saved for backward [MiB]", "saved.png", True),
    ("err_P", "error of P vs hard top-k (mean TV per rank)", "error.png", False),
]


def plot_all(doc: dict, out_dir) -> list[Path]:
    from ..extras import require

    matplotlib = require("matplotlib", "the benchmark plots", "bench")

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = doc["results"]
    panels = sorted({(r["B"], r["k"]) for r in rows})
    methods = [m for m in doc["methods"] if any(r["method"] == m and r.get("status") == "ok" for r in rows)]
    cmap = plt.get_cmap("tab20")
    style = {m: (cmap(i % 20), "o-" if m.startswith("netgen") else ".--") for i, m in enumerate(methods)}
    paths = []
    for key, label, fname, logy in METRICS:
        fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels) + 2.2, 4.2), squeeze=False)
        for ax, (B, k) in zip(axes[0], panels):
            for m in methods:
                pts = sorted((r["n"], r[key]) for r in rows
                             if r["method"] == m and r["B"] == B and r["k"] == k
                             and r.get("status") == "ok" and r.get(key) is not None)
                pts = [(x, y) for x, y in pts if not logy or y > 0]
                if pts:
                    color, fmt = style[m]
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], fmt, color=color, label=m,
                            linewidth=2 if m.startswith("netgen") else 1)
                # timeouts: a cross at the top of the panel
                for r in rows:
                    if r["method"] == m and r["B"] == B and r["k"] == k and r.get("status") == "timeout":
                        ax.plot([r["n"]], [1.0], "x", color=style[m][0], transform=ax.get_xaxis_transform(),
                                clip_on=False, markersize=8)
            ax.set_xscale("log")
            if logy:
                ax.set_yscale("log")
            ax.set_xlabel("n")
            ax.set_ylabel(label)
            ax.set_title(f"B = {B}, k = {k}")
            ax.grid(True, which="both", alpha=0.3)
        handles, labels = axes[0][0].get_legend_handles_labels()
        for ax in axes[0][1:]:
            for h, lab in zip(*ax.get_legend_handles_labels()):
                if lab not in labels:
                    handles.append(h)
                    labels.append(lab)
        fig.legend(handles, labels, loc="center right", fontsize=8)
        fig.suptitle(f"{label}  (x at the top: timed out)", fontsize=10)
        fig.tight_layout(rect=(0, 0, 1 - 2.0 / (5.2 * len(panels) + 2.2), 0.95))
        path = Path(out_dir) / fname
        fig.savefig(path, dpi=90)
        plt.close(fig)
        paths.append(path)
    return paths
